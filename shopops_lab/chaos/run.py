"""The chaos supervisor: real worker processes on a shared database, killed with SIGKILL.

`run_chaos` claims an empty database for one run (atomically: a second run on it is refused),
writing its settings; fills it with a morning's emails (a few of them poison); draws a
seeded kill plan and writes it; and lets the supervisor (`run_workers`) fork the workers,
kill them where the plan says and restart them until the queue is drained. Then it reads the
database's event history, which every process wrote, and lets the checker judge it.

The database going away for a moment (a restart) is ridden through: every process
reconnects and carries on. A run stopped anywhere (killed, the disk full, the server away
for longer than the stores wait) says so in one line, and `run_chaos(url, resume=True)`
(`--resume`) finishes it from wherever it stopped, because every phase can be run again:
the settings are read back from the claim, the morning is drawn again from the seed and only
what is not enqueued yet is enqueued (each batch exactly once, `fill_morning`), the plan is
drawn again and its kills already in the history are not planned again, the workers drain
what is left, and the judging only reads. One supervisor drives a database at a time: a
fresh run or a resume claims it atomically (`owner`), so a second `--resume` while one is
running is refused.

What a report says depends only on the seed and the adapter, never on process timing:
every planned kill lands (a kill a slow worker missed moves to the item's redelivery),
every item ends done or dead-lettered, and an item is emailed twice only if a kill (or a
stall) let a second worker send it again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from shopops_lab import arguments
from shopops_lab.chaos import owner
from shopops_lab.chaos.emails import FILLED, EmailWorkload, fill_morning
from shopops_lab.chaos.plan import Kill, KillPoint, plan_kills
from shopops_lab.chaos.supervisor import ChaosError, halfway, run_workers
from shopops_lab.chaos.worker import write_crash
from shopops_lab.checker import AnomalyName, CheckResult, check
from shopops_lab.clock import SystemClock
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import Event, EventKind
from shopops_lab.states import ItemState
from shopops_lab.store import MemoryStore, open_store, redact
from shopops_lab.store.base import transact
from shopops_lab.worker.queue import Queue

__all__ = ["ADAPTERS", "ChaosError", "ChaosReport", "run_chaos", "run_workers"]

ADAPTERS = ("idempotent", "naive")
LIMITS = {"items": 2_000, "workers": 16, "kills": 500}
RUN = ("chaos", "run")  # the claim: a run's first write, made once per database, holding its settings


@dataclass(frozen=True, kw_only=True, slots=True)
class ChaosReport:
    """What a chaos run did and what the checker made of the database's history."""

    db: str
    seed: int
    adapter: str
    workers: int
    items: int
    done: int
    dead_lettered: int
    lost: int
    double_contacts: int
    kills: int
    redeliveries: int
    killed: tuple[Kill, ...]
    result: CheckResult

    @property
    def valid(self) -> bool | None:
        return self.result.valid

    @property
    def doubled_cases(self) -> tuple[str, ...]:
        """The cases whose customer heard the same thing twice, sorted."""
        doubled = self.result.of(AnomalyName.DOUBLE_CONTACT)
        return tuple(sorted({a.case_id for a in doubled if a.case_id is not None}))  # each names its case

    def as_dict(self) -> dict[str, Any]:
        return {
            "db": self.db,
            "seed": self.seed,
            "adapter": self.adapter,
            "workers": self.workers,
            "items": self.items,
            "done": self.done,
            "dead_lettered": self.dead_lettered,
            "lost": self.lost,
            "double_contacts": self.double_contacts,
            "kills": self.kills,
            "redeliveries": self.redeliveries,
            "valid": self.valid,
            "killed": [k.as_dict() for k in self.killed],
            "anomalies": [a.as_dict() for a in self.result.anomalies],
        }

    def __str__(self) -> str:
        verdict = {True: "valid", False: "INVALID", None: "not judged"}[self.valid]
        lines = [
            f"chaos on {self.db}: {self.items} items, {self.workers} worker processes, "
            f"{self.adapter} adapter, seed {self.seed}",
            f"  killed with SIGKILL {self.kills} times: "
            + ", ".join(f"{p.value} x{n}" for p, n in _by_point(self.killed) if n),
            f"  done {self.done}, dead-lettered {self.dead_lettered}, lost {self.lost}, "
            f"redeliveries {self.redeliveries}",
            f"  double contacts: {self.double_contacts}"
            + (f" (cases {', '.join(self.doubled_cases)})" if self.double_contacts else ""),
            f"  checker: {verdict}",
        ]
        lines += [f"    - {a.message}" for a in self.result.anomalies]
        lines.append(
            f"  replay: shopops-lab chaos --db NEW_DB --items {self.items} --workers {self.workers} "
            f"--kills {self.kills} --seed {self.seed} --adapter {self.adapter}"
        )
        return "\n".join(lines)


def run_chaos(
    url: str,
    *,
    items: int = 40,
    workers: int = 3,
    kills: int = 12,
    seed: int = 0,
    adapter: str = "idempotent",
    lease_seconds: float = 1.0,
    max_attempts: int = 5,
    timeout: float = 300.0,
    resume: bool = False,
) -> ChaosReport:
    """Run `workers` processes over `items` emails on the empty database at `url`, killing
    them `kills` times at points drawn from `seed`; return what happened, checked. With
    `resume`, finish the run already on `url` instead (its own settings, its kills still to land)."""
    if resume:
        return _resume(url, timeout)
    _check_settings(items, workers, kills, seed, adapter, timeout)
    settings = {
        "items": items,
        "workers": workers,
        "kills": kills,
        "seed": seed,
        "adapter": adapter,
        "lease_seconds": lease_seconds,
        "max_attempts": max_attempts,
    }
    with _claimed(url, settings) as (queue, run):
        return _carry_on(url, queue, settings, run, timeout)


def _resume(url: str, timeout: float) -> ChaosReport:
    arguments.seconds("timeout", timeout)
    store = open_store(url)
    try:
        settings = store.get(*RUN)
        if settings is None:
            raise BadArgumentError(
                field="db",
                problem="holds no chaos run to finish",
                fix="start a new run (without --resume); an empty database takes one",
            )
        me = owner.claimant()
        run = transact(store, lambda: owner.claim(store, me), idempotent=True)
        queue = Queue(
            store=store,
            lease_seconds=settings["lease_seconds"],
            max_attempts=settings["max_attempts"],
            clock=SystemClock(),
        )
        return _carry_on(url, queue, settings, run, timeout)
    finally:
        store.close()


def _carry_on(url: str, queue: Queue, settings: dict[str, Any], run: str, timeout: float) -> ChaosReport:
    """Every phase of the run from wherever it stands: fill, plan, the workers, the report. A
    database that fails halfway is one line saying how to resume. However it ends, the run
    lets go of the database (`run` is its claim), so a `--resume` may follow."""
    try:
        if queue.store.get(FILLED, "0001") is None and len(queue):
            raise BadArgumentError(
                field="db",
                problem="holds a chaos run an older ShopOps Lab started",
                fix="finish it with the version that started it, or start a new run on a new, empty database",
            )
        rng = random.Random(settings["seed"])
        ids, poison = fill_morning(queue, rng, settings["items"])
        plan = plan_kills(rng, ids, poison, settings["kills"], settings["max_attempts"])
        run_workers(
            queue,
            EmailWorkload(settings["adapter"]),
            _still_to_land(plan, queue),
            workers=settings["workers"],
            timeout=timeout,
        )
        return _report(redact(url), settings, queue)
    except (BadArgumentError, ChaosError):
        raise
    except Exception as error:  # noqa: BLE001 - the database failed: one line, and what to do
        raise halfway(url, error) from None
    finally:
        owner.release(queue.store, run)


def _still_to_land(plan: tuple[Kill, ...], queue: Queue) -> tuple[Kill, ...]:
    """The kills of `plan` the history does not hold yet (matched as the supervisor matches them)."""
    left: dict[str, list[Kill]] = {}
    for kill in sorted(plan, key=lambda k: (k.item_id, k.attempt)):
        left.setdefault(kill.item_id, []).append(kill)
    for event in queue.log.where(EventKind.WORKER_CRASHED):
        kills = None if event.item_id is None else left.get(event.item_id)
        if kills and kills[0].point == event.info.get("point") and kills[0].attempt <= (event.attempt or 0):
            kills.pop(0)
    for item_id, kills in left.items():
        row = queue.store.get_item(item_id)  # None: the run broke off before enqueueing it
        if kills and row is not None and row.state in (ItemState.DONE, ItemState.DEAD):
            _landed_at_the_interruption(queue, kills.pop(0))
    return tuple(kill for kills in left.values() for kill in kills)


def _landed_at_the_interruption(queue: Queue, kill: Kill) -> None:
    """A worker passes a planned kill's point only by being killed there, so an item that ended
    with its kill not in the history ended under a worker stopped at that point (after its
    ack) when the run broke off: the supervisor SIGKILLed it there without reading its word.
    Written now, as its restarted successor would have written it (and once: `write_crash`)."""
    last = queue.log.where(item_id=kill.item_id)[-1]
    write_crash(queue, last.worker_id, kill.item_id, kill.attempt, kill.point, last.time)


class _claimed:
    """The queue on the new, empty database at `url`, claimed for one run in one transaction
    (refused if it is memory, holds work, or another run claimed it first), and the claim
    that makes this process its supervisor."""

    def __init__(self, url: str, settings: dict[str, Any]) -> None:
        self.store = open_store(url)
        try:
            if isinstance(self.store, MemoryStore):
                raise BadArgumentError(
                    field="db",
                    problem="is memory:, which no other process can see",
                    fix="use a database the workers share, e.g. --db sqlite:///chaos.db",
                )
            self.queue = Queue(
                store=self.store,
                lease_seconds=settings["lease_seconds"],
                max_attempts=settings["max_attempts"],
                clock=SystemClock(),
            )
            me = owner.claimant()

            def claim() -> str:
                if owner.is_mine(self.store, me):
                    return me["run"]  # an earlier try of this very claim was kept (its COMMIT's answer was lost)
                if len(self.queue):
                    raise BadArgumentError(
                        field="db",
                        problem=f"already holds {len(self.queue)} items",
                        fix="give every chaos run a new, empty database (a new file name)",
                    )
                if not self.store.put_new(*RUN, settings):
                    raise BadArgumentError(
                        field="db",
                        problem="is already claimed by another chaos run",
                        fix="give every chaos run a new, empty database (a new file name), "
                        "or finish that run with --resume",
                    )
                return owner.claim(self.store, me)

            self.run = transact(self.store, claim, idempotent=True)
        except BaseException:
            self.store.close()
            raise

    def __enter__(self) -> tuple[Queue, str]:
        return self.queue, self.run

    def __exit__(self, *exc: object) -> None:
        self.store.close()


def _check_settings(items: int, workers: int, kills: int, seed: int, adapter: str, timeout: float) -> None:
    for field, value, least in (("items", items, 1), ("workers", workers, 1), ("kills", kills, 0)):
        arguments.whole(field, value, least)
        if value > LIMITS[field]:
            raise BadArgumentError(
                field=field,
                problem=f"is {value}, above the limit of {LIMITS[field]}",
                fix=f"pass at most {LIMITS[field]}: chaos runs real processes on one machine",
            )
    arguments.whole("seed", seed, 0)
    if adapter not in ADAPTERS:
        raise BadArgumentError(field="adapter", problem=f"is {adapter!r}", fix=f"pass one of {', '.join(ADAPTERS)}")
    arguments.seconds("timeout", timeout)


def _by_point(killed: tuple[Kill, ...]) -> list[tuple[KillPoint, int]]:
    return [(point, sum(1 for k in killed if k.point == point)) for point in KillPoint]


def _report(db: str, settings: dict[str, Any], queue: Queue) -> ChaosReport:
    """The report, read from the database's history alone (a resumed run's too)."""
    history = queue.log
    result = check(history, max_attempts=settings["max_attempts"])
    counts = queue.counts()
    leased = history.where(EventKind.LEASED)
    killed = tuple(
        sorted(
            map(_killed, history.where(EventKind.WORKER_CRASHED)),
            key=lambda k: (k.item_id, k.attempt, list(KillPoint).index(KillPoint(k.point))),
        )
    )
    return ChaosReport(
        db=db,
        seed=settings["seed"],
        adapter=settings["adapter"],
        workers=settings["workers"],
        items=len(queue),
        done=counts[ItemState.DONE],
        dead_lettered=counts[ItemState.DEAD],
        lost=len(result.of(AnomalyName.LOST_ITEM)),
        double_contacts=len(result.of(AnomalyName.DOUBLE_CONTACT)),
        kills=len(killed),
        redeliveries=sum(1 for e in leased if (e.attempt or 1) > 1),
        killed=killed,
        result=result,
    )


def _killed(crash: Event) -> Kill:
    """The kill a chaos history's WORKER_CRASHED event records. Its only writers (the killed
    worker's successor, a resume) name the item and the attempt of the planned kill."""
    assert crash.item_id is not None and crash.attempt is not None, crash
    return Kill(item_id=crash.item_id, attempt=crash.attempt, point=KillPoint(crash.info["point"]))
