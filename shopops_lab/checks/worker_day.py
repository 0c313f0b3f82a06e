"""Lab 09's burst day: the learner's `work` as every worker of lab 07's day, measured.

`day(work, seed=...)` plays `burst_day` (3,000 cases for 20 workers, the gateway spike of the
seed) with the chapter's faults turned up (`CHAOS`) and each delivery handed to `work`
(`sim.agents`), then judges the day from what the kit recorded, never from the workers: the
provider's ledger (no customer emailed twice, none acknowledged without an email), the
queue (every case settled; every dead letter a poison case, with a reason that is not a
lease expiry), the anomaly checker's report, and the approvals' p95.

Behind the grader's process boundary a day is 30,000 steps of the learner's code; a message
for each would take seconds. So the day is played where the learner's code runs
(`applied(work, played, ...)`, the kit's own simulator there), which sends back what every
step of every worker did (`Transcript`: its kit call, or how its delivery ended) and a digest
of the answers each step was given. The judge then plays the day itself, on its own world,
with each worker doing what the transcript says: every kit call is answered by the judge's
kit, every verdict read from the judge's records. A transcript that does not fit the judge's
day (a step by another worker than the judge's schedule steps, or answers that differ from
the judge's: the learner's process played another day) is thrown away, and the day is played
again, stepping the learner's code across the boundary one call at a time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from shopops_lab import arguments
from shopops_lab.checker import is_approval
from shopops_lab.checks.base import ForeignAnswer, applied, call_answer, restart
from shopops_lab.checks.driven import Delivery
from shopops_lab.checks.lab07 import LIMITS, burst_day
from shopops_lab.effects import SendResult
from shopops_lab.events import EventKind, collector_paused
from shopops_lab.metrics import percentile
from shopops_lab.sim import Simulation
from shopops_lab.sim.agents import agent_program
from shopops_lab.sim.faults import FaultRates
from shopops_lab.states import ItemState
from shopops_lab.worker.backend import is_poison
from shopops_lab.worker.kit import Finished, Kit, KitCall, Raised, Reply, steps
from shopops_lab.worker.queue import Lease

__all__ = ["CHAOS", "ITEMS", "MAX_STEPS", "Day", "day", "played"]

ITEMS = 3000  # each burst day's cases, the size lab 07's check plays
# The chapter's faults, turned up ten times over lab 07's burst day, so a day of 3,000 cases
# holds dozens of each: kills and pauses mid call and around a send, dropped replies, lost
# acks, duplicate deliveries, and poison payloads.
CHAOS = FaultRates(
    kill_worker=0.02, pause_worker=0.01, lose_ack=0.01, drop_reply=0.02, deliver_twice=0.01, poison=0.005
)
MAX_STEPS = 300_000  # a sound day of 3,000 cases takes about 18,000 worker wake-ups
_CHUNK = 600.0  # simulated seconds between looks at the wake-up count


@dataclass(frozen=True)
class Day:
    """One burst day with the learner's worker: what it did to the customers and the queue,
    and the evidence (the checker's report, the double contacts, the dead letters)."""

    seed: int
    items: int
    end: float
    stopped: bool
    cut: bool  # ended at its first broken promise (the check's day), with work left
    done: int
    dead: int
    unsettled: int
    doubled: tuple[str, ...]  # one line per customer emailed more than once
    never_emailed: tuple[str, ...]  # cases acknowledged whose customer never heard
    wrongly_dead: tuple[str, ...]  # dead letters that are not poison, or whose reason is a lease expiry
    poison_done: tuple[str, ...]  # poison cases marked done
    anomalies: tuple[str, ...]  # the checker's, one line each
    approval_p95: float | None
    misused: tuple[str, ...]
    checker: str  # the checker's summary line

    @property
    def replay_line(self) -> str:
        return f"lab09.day(work, seed={self.seed})"

    def problems(self) -> list[str]:
        """Every broken promise, one sentence each, the customer's first."""
        found = []
        if self.misused:
            found.append(f"a worker misused its kit: {self.misused[0]}")
        if self.doubled:
            found.append(f"{len(self.doubled)} customer(s) were emailed more than once: {self.doubled[0]}")
        if self.never_emailed:
            found.append(
                f"{len(self.never_emailed)} case(s) were acknowledged, yet their customer was never emailed: "
                f"{self.never_emailed[0]}"
            )
        if self.stopped:
            found.append(
                f"the day was stopped at t={self.end:,.0f} s after {MAX_STEPS:,} worker wake-ups, with "
                f"{self.unsettled:,} cases unsettled: the workers kept busy without finishing them"
            )
        elif self.unsettled and not self.cut:
            found.append(f"{self.unsettled:,} cases were never settled (neither done nor dead-lettered)")
        if self.poison_done:
            found.append(f"a poison case was marked done: {self.poison_done[0]}")
        if self.wrongly_dead:
            found.append(
                f"{len(self.wrongly_dead)} dead letter(s) not explained by a poison payload: {self.wrongly_dead[0]}"
            )
        if self.anomalies:
            found.append(f"the checker found: {self.anomalies[0]}")
        if self.approval_p95 is not None and self.approval_p95 > LIMITS.approval_p95:
            found.append(
                f"approvals were late: p95 from arrival to done {self.approval_p95:,.0f} s, over the "
                f"{LIMITS.approval_p95:g} s limit"
            )
        return found

    def lines(self) -> list[str]:
        p95 = "none done" if self.approval_p95 is None else f"p95 {self.approval_p95:,.0f} s"
        cut = "; the day was cut there, at its first broken promise" if self.cut else ""
        return [
            f"cases: {self.done:,} done, {self.dead} dead-lettered, {self.unsettled} unsettled, "
            f"by t={self.end:,.0f} s{cut}",
            f"customers emailed twice: {len(self.doubled)}; acknowledged but never emailed: {len(self.never_emailed)}",
            f"dead letters not explained by a poison payload: {len(self.wrongly_dead)}",
            f"approvals: {p95} (limit {LIMITS.approval_p95:g} s)",
            f"checker: {self.checker}",
        ]

    def __str__(self) -> str:
        head = f"burst day, seed {self.seed}: {self.items:,} cases, 20 workers running your work, chaos turned up"
        return "\n".join([head, *(f"  {line}" for line in self.lines()), f"  replay: {self.replay_line}"])


# ------------------------------------------------------------------ who runs the workers' code
class _Pool:
    """Each simulated worker's process: its own copy of the answer (fresh after a death)."""

    def __init__(self, work: Any) -> None:
        self.work = work
        self.copies: dict[str, Any] = {}

    def begin(self, name: str, lease: Lease) -> Any:
        copy = self.copies.get(name)
        if copy is None:
            copy = self.copies[name] = restart(self.work)
        return Delivery(copy, lease)

    def died(self, name: str) -> None:
        self.copies.pop(name, None)


Step = list[Any]  # [worker, "call", name, args] | [worker, "done"] | [worker, "raise", class name, message]


class _Digest:
    """A digest of the answers the workers' steps were given, in the day's order: each answer
    written down as it is given, hashed once at the end."""

    def __init__(self) -> None:
        self._said: list[str] = []

    def given(self, worker: str, reply: Reply) -> None:
        value, refused = reply.value, reply.refused
        if refused is not None:
            said = f"!{refused.kind}{sorted(refused.fields.items())!r}"
        elif type(value) is SendResult:  # the most common record: its fields, without the dataclass's repr
            said = f"={value.status.value} {value.message_id} {value.deduped}"
        else:
            said = repr(value)
        self._said += (worker, "\x00", said, "\x01")

    def hexdigest(self) -> str:
        return hashlib.sha256("".join(self._said).encode()).hexdigest()


class _Recording(_Pool):
    """The live workers, where the learner's code runs, each step written down."""

    def __init__(self, work: Any) -> None:
        super().__init__(work)
        self.steps: list[Step] = []
        self.digest = _Digest()

    def begin(self, name: str, lease: Lease) -> Any:
        return _Recorded(self, name, lambda: super(_Recording, self).begin(name, lease))


class _Recorded:
    def __init__(self, pool: _Recording, name: str, start: Callable[[], Any]) -> None:
        self.pool, self.name, self.start = pool, name, start
        self.running: Any = None

    def step(self, reply: Reply) -> KitCall | Finished:
        pool = self.pool
        pool.digest.given(self.name, reply)
        try:
            if self.running is None:
                self.running = self.start()
            found = self.running.step(reply)
        except Exception as error:
            pool.steps.append([self.name, "raise", type(error).__name__, str(error)])
            raise
        pool.steps.append(
            [self.name, "done"] if isinstance(found, Finished) else [self.name, "call", found.name, list(found.args)]
        )
        return found

    def close(self) -> None:
        if self.running is not None:
            self.running.close()


class _Diverged(BaseException):
    """The transcript does not fit the judge's day (a BaseException: the simulator's worker
    catches what a worker raises, and this is not the worker's)."""


class _StandIn(Exception):
    """What a worker raised where its code ran, raised here again by name and message."""

    def __init__(self, named: str, text: str) -> None:
        super().__init__(text)
        self.named = named


@dataclass
class _Delivery:
    """One delivery in the judge's day: its lease, the answers it was given and what the
    transcript says it did after each (a step as the transcript writes it)."""

    lease: Lease
    replies: list[Reply] = field(default_factory=list)
    did: list[Step] = field(default_factory=list)


_FINISHED = Finished()


class _Replaying:
    """The workers as the transcript says they behaved, step by step, in the judge's day; what
    each worker process was told and did, life by life (a death starts a new life), kept for
    `_spot_checked`."""

    def __init__(self, steps: list[Step]) -> None:
        self._steps: Iterator[Step] = iter(steps)
        self.digest = _Digest()
        self.lives: dict[str, list[list[_Delivery]]] = {}

    def begin(self, name: str, lease: Lease) -> Any:
        delivery = _Delivery(lease)
        self.lives.setdefault(name, [[]])[-1].append(delivery)
        return _Replayed(self, name, delivery)

    def died(self, name: str) -> None:
        self.lives.setdefault(name, [[]]).append([])

    def next(self, name: str, delivery: _Delivery, reply: Reply) -> KitCall | Finished:
        self.digest.given(name, reply)
        step = next(self._steps, None)
        if not (type(step) is list and len(step) >= 2 and step[0] == name):
            raise _Diverged(f"the transcript's next step is not {name}'s")
        delivery.replies.append(reply)
        delivery.did.append(step)
        if step[1] == "done":
            return _FINISHED
        if step[1] == "call" and len(step) == 4 and type(step[2]) is str and type(step[3]) is list:
            return KitCall(step[2], tuple(step[3]))
        if step[1] == "raise" and len(step) == 4 and type(step[2]) is str and type(step[3]) is str:
            raise _StandIn(step[2], step[3])
        raise _Diverged("a step of no known shape")

    def finished(self) -> bool:
        return next(self._steps, None) is None


class _Replayed:
    def __init__(self, pool: _Replaying, name: str, delivery: _Delivery) -> None:
        self.pool, self.name, self.delivery = pool, name, delivery

    def step(self, reply: Reply) -> KitCall | Finished:
        return self.pool.next(self.name, self.delivery, reply)

    def close(self) -> None:
        pass


SPOT_CHECKED = 2  # workers whose every delivery is played again with the learner's own code


def _spot_checked(work: Any, replaying: _Replaying) -> bool:
    """Does `work` itself do what the transcript says? For SPOT_CHECKED workers picked at random
    after the transcript came (so a process that sent another worker's calls cannot know which),
    each life is played again on a fresh copy of the answer, where it runs (`lived`: one message
    a life), every delivery told the answers the judge's day gave it; each step must be what the
    transcript says."""
    named = sorted(replaying.lives)
    for name in random.SystemRandom().sample(named, min(SPOT_CHECKED, len(named))):
        for life in replaying.lives[name]:
            if not life:
                continue
            try:
                found = applied(restart(work), lived, [(delivery.lease, delivery.replies) for delivery in life])
            except Exception:  # noqa: BLE001 - a life that cannot be played again does not fit
                return False
            if not (isinstance(found, list) and len(found) == len(life)):
                return False
            if not all(_alike(steps, delivery) for steps, delivery in zip(found, life, strict=True)):
                return False
    return True


def lived(work: Any, deliveries: list[tuple[Lease, list[Reply]]]) -> list[list[KitCall | Finished | Raised]]:
    """One worker process's life played again: each delivery started on `work` and told its
    answers, in turn, on the same copy (its memory carries from one delivery to the next); what
    each step gave back. A kit function, run where the answer runs by `applied`."""
    found: list[list[KitCall | Finished | Raised]] = []
    for lease, replies in deliveries:
        try:
            coroutine = call_answer(work, lease, Kit())
        except Exception as error:  # noqa: BLE001 - the learner's call raised: told as data
            found.append([Raised(type(error).__name__, str(error))])
            continue
        found.append(steps(coroutine, replies))
    return found


def _alike(found: Any, delivery: _Delivery) -> bool:
    """Is what the answer's code did in one delivery (`found`) what the transcript says it did?"""
    if not isinstance(found, list):
        return False
    said: list[Step] = []
    for step, done in zip(delivery.did, found, strict=False):
        if isinstance(done, Raised):
            said.append([step[0], "raise", done.kind, done.text])
        elif isinstance(done, Finished):
            said.append([step[0], "done"])
        elif isinstance(done, KitCall):
            said.append([step[0], "call", done.name, json.loads(json.dumps(list(done.args), default=repr))])
        else:
            return False
    return len(found) == len(delivery.did) and said == delivery.did


# ------------------------------------------------------------------ a day
def played(work: Any, seed: int, items: int, whole: bool) -> list[str]:
    """The day of `seed` played here, where `work` runs: [what each step did (one JSON text: a
    judge reads 30,000 steps with one call of json.loads), the digest of the answers the steps
    were given]. A kit function, run in the learner's process by `applied`."""
    pool = _Recording(work)
    _play(pool, seed, items, [], whole)
    return [json.dumps(pool.steps, separators=(",", ":")), pool.digest.hexdigest()]


def _play(pool: Any, seed: int, items: int, misused: list[str], whole: bool) -> tuple[Simulation, bool, bool]:
    """The day, (its simulation, stopped for too many wake-ups, cut at its first broken promise).
    Unless `whole`, the day ends at the first look (every `_CHUNK` simulated seconds) that finds a
    customer emailed twice or a misused kit: a verdict needs no more, and both sides of the grader's
    boundary cut it at the same look."""
    program = agent_program(pool, lambda worker, error: misused.append(f"{worker} {error}"))
    scenario = dataclasses.replace(burst_day(seed), rates=CHAOS)
    with collector_paused():
        sim = Simulation(scenario, seed=seed, items=items, program=program)
        t, stopped, cut = 0.0, False, False
        while not sim.done:
            t += _CHUNK
            sim.run_until(t)
            if sim.steps > MAX_STEPS and not sim.done:
                stopped = True
                break
            if not whole and not sim.done and (misused or sim.world.adapter.ledger.any_case_twice()):
                cut = True
                break
    return sim, stopped, cut


def day(work: Any, *, seed: int = 3, items: int = ITEMS, whole: bool = True) -> Day:
    """Play burst day (`items` cases, 20 workers, the chapter's faults turned up; the gateway
    spike of `seed`, as lab 07 draws it) with `work` as every worker's delivery, and measure it.
    `whole=False` (the check) ends the day at its first look that finds a customer emailed twice
    or a misused kit."""
    arguments.flag("whole", whole, "pass True to play the whole day, False to stop at the first broken promise")
    arguments.whole("seed", seed, None, "pass a whole number, e.g. seed=3")
    arguments.whole("items", items, 1, "pass how many cases arrive, e.g. items=3000", most=100_000)
    with collector_paused():  # the transcript read, the day played and measured: one pause (see events)
        return _day(work, seed, items, whole)


def _day(work: Any, seed: int, items: int, whole: bool) -> Day:
    misused: list[str] = []
    if isinstance(work, ForeignAnswer):
        try:
            transcript = applied(restart(work), played, seed, items, whole)
        except Exception:  # noqa: BLE001 - no transcript (a value of the worker's JSON cannot carry): stepped
            transcript = None
        steps = _steps(transcript)
        if steps is not None:
            replaying = _Replaying(steps)
            try:
                sim, stopped, cut = _play(replaying, seed, items, misused, whole)
            except _Diverged:
                pass
            else:
                fits = replaying.finished() and replaying.digest.hexdigest() == transcript[1]
                if fits and _spot_checked(work, replaying):
                    return _measured(sim, seed, items, stopped, cut, misused)
        misused.clear()  # the transcript does not fit: the day again, the learner's code stepped from here
    sim, stopped, cut = _play(_Pool(work), seed, items, misused, whole)
    return _measured(sim, seed, items, stopped, cut, misused)


def _steps(transcript: Any) -> list[Step] | None:
    """The steps a transcript holds (data only: JSON, read as such), or None if it holds none."""
    if not (type(transcript) is list and len(transcript) == 2 and all(type(part) is str for part in transcript)):
        return None
    try:
        steps = json.loads(transcript[0])
    except (ValueError, RecursionError):
        return None
    return steps if type(steps) is list else None


def _measured(sim: Simulation, seed: int, items: int, stopped: bool, cut: bool, misused: list[str]) -> Day:
    world = sim.world
    queue = world.queue
    contacts = world.adapter.ledger.contacts()
    per_case = Counter(c.case_id for c in contacts)
    doubled = tuple(
        f"case {case} was emailed {n} times: "
        + ", ".join(
            f"{c.message_id} at t={c.time:,.0f} by {c.worker_id} under key {c.idem_key}"
            for c in contacts
            if c.case_id == case
        )
        for case, n in sorted(per_case.items())
        if n > 1
    )
    wrongly_dead, poison_done, never_emailed = [], [], []
    for item in queue.items():
        poison = is_poison(item.payload)
        if item.state is ItemState.DONE and not poison and not per_case[item.case_id]:
            never_emailed.append(f"case {item.case_id} (its last delivery was attempt {item.attempts})")
        if item.state is ItemState.DEAD and (not poison or (item.last_error or "").startswith("lease expired")):
            why = "its payload is sound" if not poison else "its last attempt only ran out of lease"
            wrongly_dead.append(f"case {item.case_id} ({why}; last error: {item.last_error})")
        elif item.state is ItemState.DONE and poison:
            poison_done.append(f"case {item.case_id} has a payload no worker can handle, yet it was acknowledged")
    verdict = sim.verdict()
    anomalies = tuple(a.message for a in verdict.anomalies if a.name.value != "double_contact")
    arrived: dict[str, float] = {}
    waits = []
    for row in world.log.rows():
        item_id = row.item_id
        if item_id is None:
            continue
        if row.kind is EventKind.ENQUEUED and is_approval(row.info):
            arrived[item_id] = row.time
        elif row.kind is EventKind.ACKED and item_id in arrived:
            waits.append(row.time - arrived.pop(item_id))
    counts = queue.counts()
    return Day(
        seed=seed,
        items=items,
        end=round(sim.now, 3),
        stopped=stopped,
        cut=cut,
        done=counts[ItemState.DONE],
        dead=counts[ItemState.DEAD],
        unsettled=counts[ItemState.READY] + counts[ItemState.LEASED],
        doubled=doubled,
        never_emailed=tuple(never_emailed),
        wrongly_dead=tuple(wrongly_dead),
        poison_done=tuple(poison_done),
        anomalies=anomalies,
        approval_p95=percentile(sorted(waits), 95) if waits else None,
        misused=tuple(dict.fromkeys(misused)),
        checker=verdict.summary,
    )
