"""The chaos supervisor: real worker processes on a shared database, killed with SIGKILL.

`run_chaos` fills an empty database with a morning's emails (a few of them poison), writes
the settings and a seeded kill plan into it, starts the workers, kills each one that
reports a planned point, restarts it, and waits until the queue is drained. Then it reads
the database's event history, which every process wrote, and lets the checker judge it.

What a report says depends only on the seed and the adapter, never on process timing:
every planned kill happens, every item ends done or dead-lettered, and an item is
emailed twice only if a kill (or a stall) let a second worker send it again.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from selectors import EVENT_READ, DefaultSelector
from typing import Any

from shopops_lab import arguments
from shopops_lab.chaos.plan import Kill, KillPoint, plan_kills
from shopops_lab.chaos.worker import SETUP
from shopops_lab.checker import AnomalyName, CheckResult, check
from shopops_lab.clock import SystemClock
from shopops_lab.errors import BadArgumentError, ShopOpsError
from shopops_lab.events import EventKind
from shopops_lab.states import ItemState
from shopops_lab.store import MemoryStore, open_store, redact
from shopops_lab.worker.queue import Queue

__all__ = ["ADAPTERS", "ChaosError", "ChaosReport", "run_chaos"]

ADAPTERS = ("idempotent", "naive")
LIMITS = {"items": 2_000, "workers": 16, "kills": 500}
_POISON_SHARE = 0.1  # one email in ten cannot be rendered: it must end in the DLQ, not loop


class ChaosError(ShopOpsError):
    """The chaos run could not finish: {reason}. Fix: {fix}."""


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
        return tuple(sorted({a.case_id for a in self.result.of(AnomalyName.DOUBLE_CONTACT)}))

    def as_dict(self) -> dict[str, Any]:
        return {"db": self.db, "seed": self.seed, "adapter": self.adapter, "workers": self.workers,
                "items": self.items, "done": self.done, "dead_lettered": self.dead_lettered, "lost": self.lost,
                "double_contacts": self.double_contacts, "kills": self.kills, "redeliveries": self.redeliveries,
                "valid": self.valid, "killed": [k.as_dict() for k in self.killed],
                "anomalies": [a.as_dict() for a in self.result.anomalies]}

    def __str__(self) -> str:
        verdict = {True: "valid", False: "INVALID", None: "not judged"}[self.valid]
        lines = [f"chaos on {self.db}: {self.items} items, {self.workers} worker processes, "
                 f"{self.adapter} adapter, seed {self.seed}",
                 f"  killed with SIGKILL {self.kills} times: "
                 + ", ".join(f"{p.value} x{n}" for p, n in _by_point(self.killed) if n),
                 f"  done {self.done}, dead-lettered {self.dead_lettered}, lost {self.lost}, "
                 f"redeliveries {self.redeliveries}",
                 f"  double contacts: {self.double_contacts}"
                 + (f" (cases {', '.join(self.doubled_cases)})" if self.double_contacts else ""),
                 f"  checker: {verdict}"]
        lines += [f"    - {a.message}" for a in self.result.anomalies]
        lines.append(f"  replay: shopops-lab chaos --db NEW_DB --items {self.items} --workers {self.workers} "
                     f"--kills {self.kills} --seed {self.seed} --adapter {self.adapter}")
        return "\n".join(lines)


def run_chaos(url: str, *, items: int = 40, workers: int = 3, kills: int = 12, seed: int = 0,
              adapter: str = "idempotent", lease_seconds: float = 1.0, max_attempts: int = 5,
              timeout: float = 300.0) -> ChaosReport:
    """Run `workers` processes over `items` emails on the empty database at `url`, killing
    them `kills` times at points drawn from `seed`; return what happened, checked."""
    _check_settings(items, workers, kills, seed, adapter, timeout)
    store = open_store(url)
    try:
        if isinstance(store, MemoryStore):
            raise BadArgumentError(field="db", problem="is memory:, which no other process can see",
                                   fix="use a database the workers share, e.g. --db sqlite:///chaos.db")
        queue = Queue(store=store, lease_seconds=lease_seconds, max_attempts=max_attempts, clock=SystemClock())
        if len(queue):
            raise BadArgumentError(field="db", problem=f"already holds {len(queue)} items",
                                   fix="give every chaos run a new, empty database (a new file name)")
        rng = random.Random(seed)
        ids, poison = _fill(queue, rng, items)
        plan = plan_kills(rng, ids, poison, kills, max_attempts)
        with store.atomic:
            store.put(*SETUP, {"seed": seed, "adapter": adapter, "lease_seconds": lease_seconds,
                               "max_attempts": max_attempts, "kills": [k.as_dict() for k in plan]})
        killed = _Supervisor(url, queue, workers, timeout).run()
        return _report(redact(url), seed, adapter, workers, queue, killed, max_attempts)
    finally:
        store.close()


def _check_settings(items: int, workers: int, kills: int, seed: int, adapter: str, timeout: float) -> None:
    for field, value, least in (("items", items, 1), ("workers", workers, 1), ("kills", kills, 0)):
        arguments.whole(field, value, least)
        if value > LIMITS[field]:
            raise BadArgumentError(field=field, problem=f"is {value}, above the limit of {LIMITS[field]}",
                                   fix=f"pass at most {LIMITS[field]}: chaos runs real processes on one machine")
    arguments.whole("seed", seed, 0)
    if adapter not in ADAPTERS:
        raise BadArgumentError(field="adapter", problem=f"is {adapter!r}", fix=f"pass one of {', '.join(ADAPTERS)}")
    arguments.seconds("timeout", timeout)


def _fill(queue: Queue, rng: random.Random, items: int) -> tuple[list[str], set[str]]:
    """A morning's emails: about one case in five has two, served in order; one in ten is poison."""
    ids, poison = [], set()
    case = 0
    while len(ids) < items:
        case += 1
        case_id = f"O-{1000 + case}"
        for n in range(1 if rng.random() < 0.8 or len(ids) + 1 == items else 2):
            bad = rng.random() < _POISON_SHARE
            item_id = queue.enqueue(case_id=case_id, tenant_id="store_northline", kind="contact_send",
                                    payload={"idem_key": f"{case_id}:email:{n + 1}", "to": f"{case_id.lower()}@example.com",
                                             **({"poison": True} if bad else {})})
            ids.append(item_id)
            if bad:
                poison.add(item_id)
    return ids, poison


class _Supervisor:
    """Starts the workers, kills the one that reports a planned point, restarts it, and
    waits for all of them to find the queue drained."""

    def __init__(self, url: str, queue: Queue, workers: int, timeout: float) -> None:
        self.url, self.queue, self.timeout = url, queue, timeout
        self.names = [f"W{n}" for n in range(1, workers + 1)]
        self.procs: dict[str, subprocess.Popen] = {}
        self.errors: dict[str, Path] = {}
        self.killed: list[Kill] = []
        self.selector = DefaultSelector()
        self.folder = Path(tempfile.mkdtemp(prefix="shopops-chaos-"))

    def run(self) -> tuple[Kill, ...]:
        deadline = time.monotonic() + self.timeout
        try:
            for name in self.names:
                self._start(name)
            while self.procs:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChaosError(reason=f"the queue was not drained within {self.timeout:g} s "
                                            f"(counts: {_counts(self.queue)})",
                                     fix="pass a larger --timeout, or fewer items, on a busy machine")
                for key, _ in self.selector.select(timeout=min(left, 1.0)):
                    self._read(key.data)
        finally:
            for proc in self.procs.values():
                proc.kill()
                proc.wait()
            self.selector.close()
            for path in self.errors.values():
                path.unlink(missing_ok=True)
            self.folder.rmdir()
        return tuple(sorted(self.killed, key=lambda k: (k.item_id, k.attempt)))

    def _start(self, name: str, killed: tuple[str, ...] = ()) -> None:
        errors = self.errors.setdefault(name, self.folder / f"{name}.stderr")
        with errors.open("ab") as stderr:
            proc = subprocess.Popen([sys.executable, "-m", "shopops_lab.chaos.worker", self.url, name, *killed],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                    text=True, bufsize=1, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.procs[name] = proc
        self.selector.register(proc.stdout, EVENT_READ, name)

    def _read(self, name: str) -> None:
        proc = self.procs[name]
        line = proc.stdout.readline()
        if line.startswith(f"stopped {name} "):
            _, _, point, item_id, attempt = line.split()
            self._kill(name, proc, Kill(item_id=item_id, attempt=int(attempt), point=KillPoint(point)))
            return
        if line:
            return  # not ours to read: a worker prints nothing else
        self.selector.unregister(proc.stdout)
        del self.procs[name]
        status = proc.wait()
        proc.stdout.close()
        proc.stdin.close()
        if status != 0:
            detail = self.errors[name].read_text().strip().splitlines()[-1:] or [f"exit status {status}"]
            raise ChaosError(reason=f"worker {name} failed on its own: {detail[0]}",
                             fix="run the same command again; if it repeats, report it with the seed")

    def _kill(self, name: str, proc: subprocess.Popen, kill: Kill) -> None:
        os.kill(proc.pid, signal.SIGKILL)
        status = proc.wait()
        if status != -signal.SIGKILL:
            raise ChaosError(reason=f"worker {name} ended with status {status}, not by the SIGKILL sent to it",
                             fix="run the same command again; if it repeats, report it with the seed")
        self.selector.unregister(proc.stdout)
        proc.stdout.close()
        proc.stdin.close()
        self.killed.append(kill)
        # The restarted worker writes the crash into the history: another worker may be stopped
        # inside a transaction right now, and a write from here would wait for it forever.
        self._start(name, killed=(kill.item_id, str(kill.attempt), kill.point.value, repr(SystemClock().now())))


def _counts(queue: Queue) -> str:
    return ", ".join(f"{state.value} {n}" for state, n in queue.counts().items())


def _by_point(killed: tuple[Kill, ...]) -> list[tuple[KillPoint, int]]:
    return [(point, sum(1 for k in killed if k.point is point)) for point in KillPoint]


def _report(db: str, seed: int, adapter: str, workers: int, queue: Queue, killed: tuple[Kill, ...],
            max_attempts: int) -> ChaosReport:
    history = queue.log
    result = check(history, max_attempts=max_attempts)
    counts = queue.counts()
    leased = history.where(EventKind.LEASED)
    return ChaosReport(db=db, seed=seed, adapter=adapter, workers=workers, items=len(queue),
                       done=counts[ItemState.DONE], dead_lettered=counts[ItemState.DEAD],
                       lost=len(result.of(AnomalyName.LOST_ITEM)),
                       double_contacts=len(result.of(AnomalyName.DOUBLE_CONTACT)), kills=len(killed),
                       redeliveries=sum(1 for e in leased if (e.attempt or 1) > 1), killed=killed, result=result)
