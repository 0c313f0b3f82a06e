"""The chaos supervisor: real worker processes on a shared database, killed with SIGKILL.

`run_chaos` fills an empty database with a morning's emails (a few of them poison), writes
the settings and a seeded kill plan into it, forks the workers, kills each one that reports
a planned point, restarts it, and waits until the queue is drained. Then it reads the
database's event history, which every process wrote, and lets the checker judge it.
`run_workers` is the same machinery for any workload: lab 08 runs the learner's handler on it.

What a report says depends only on the seed and the adapter, never on process timing:
every planned kill happens, every item ends done or dead-lettered, and an item is
emailed twice only if a kill (or a stall) let a second worker send it again.
"""
from __future__ import annotations

import os
import random
import signal
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shopops_lab import arguments
from shopops_lab.chaos.emails import EmailWorkload, fill_morning
from shopops_lab.chaos.plan import Kill, KillPoint, plan_kills
from shopops_lab.chaos.worker import SETUP, Workload, serve
from shopops_lab.checker import AnomalyName, CheckResult, check
from shopops_lab.clock import SystemClock
from shopops_lab.errors import BadArgumentError, ShopOpsError
from shopops_lab.events import EventKind
from shopops_lab.states import ItemState
from shopops_lab.store import MemoryStore, open_store, redact
from shopops_lab.worker.queue import Queue

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

__all__ = ["ADAPTERS", "ChaosError", "ChaosReport", "run_chaos", "run_workers"]

ADAPTERS = ("idempotent", "naive")
LIMITS = {"items": 2_000, "workers": 16, "kills": 500}


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
    with _empty_queue(url, lease_seconds, max_attempts) as queue:
        rng = random.Random(seed)
        ids, poison = fill_morning(queue, rng, items)
        plan = plan_kills(rng, ids, poison, kills, max_attempts)
        killed = run_workers(queue, EmailWorkload(adapter), plan, workers=workers, timeout=timeout)
        return _report(redact(url), seed, adapter, workers, queue, killed, max_attempts)


class _empty_queue:
    """The queue on the new, empty database at `url` (refused if it is memory or holds work)."""

    def __init__(self, url: str, lease_seconds: float, max_attempts: int) -> None:
        self.store = open_store(url)
        try:
            if isinstance(self.store, MemoryStore):
                raise BadArgumentError(field="db", problem="is memory:, which no other process can see",
                                       fix="use a database the workers share, e.g. --db sqlite:///chaos.db")
            self.queue = Queue(store=self.store, lease_seconds=lease_seconds, max_attempts=max_attempts,
                               clock=SystemClock())
            if len(self.queue):
                raise BadArgumentError(field="db", problem=f"already holds {len(self.queue)} items",
                                       fix="give every chaos run a new, empty database (a new file name)")
        except BaseException:
            self.store.close()
            raise

    def __enter__(self) -> Queue:
        return self.queue

    def __exit__(self, *exc: object) -> None:
        self.store.close()


def run_workers(queue: Queue, workload: Workload, plan: tuple[Kill, ...], *, workers: int,
                timeout: float = 300.0) -> tuple[Kill, ...]:
    """Fork `workers` processes running `workload` on `queue`'s database until it is drained,
    stopping them where `plan` says; returns the stops that happened, in plan order."""
    if not hasattr(os, "fork"):
        raise ChaosError(reason="real worker processes are started with fork, which this system lacks",
                         fix="run it on Linux or macOS (in a browser-only notebook, read the recorded run)")
    with queue.store.atomic:
        queue.store.put(*SETUP, {"lease_seconds": queue.lease_seconds, "max_attempts": queue.max_attempts,
                                 "stops": [k.as_dict() for k in plan]})
    return _Supervisor(queue, workload, plan, workers, timeout).run()


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


class _Supervisor:
    """Forks the workers, kills the one that reports a planned point and restarts it, lets a
    paused one go on once its item belongs to someone else, and waits until all of them
    found the queue drained."""

    def __init__(self, queue: Queue, workload: Workload, plan: tuple[Kill, ...], workers: int,
                 timeout: float) -> None:
        self.queue, self.workload, self.timeout = queue, workload, timeout
        self.plan = {(k.item_id, k.attempt): k for k in plan}
        self.url = queue.store.url
        self.procs: dict[str, tuple[int, Connection]] = {}  # name -> (pid, pipe)
        self.paused: dict[str, tuple[str, int]] = {}        # name -> (item, token) it waits on
        self.happened: list[Kill] = []
        self.names = [f"W{n}" for n in range(1, workers + 1)]

    def run(self) -> tuple[Kill, ...]:
        from multiprocessing.connection import wait  # here, not at import: a browser's Python has no processes

        deadline = time.monotonic() + self.timeout
        try:
            for name in self.names:
                self._start(name, None)
            while self.procs:
                if time.monotonic() > deadline:
                    raise ChaosError(reason=f"the queue was not drained within {self.timeout:g} s "
                                            f"(counts: {_counts(self.queue)})",
                                     fix="pass a larger timeout, or fewer items, on a busy machine")
                self._release_paused()
                ready = wait([pipe for _, pipe in self.procs.values()], timeout=0.05)
                for name, (pid, pipe) in list(self.procs.items()):
                    if pipe in ready:
                        self._read(name, pid, pipe)
        finally:
            for pid, pipe in self.procs.values():
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pipe.close()
        order = {key: n for n, key in enumerate(self.plan)}
        return tuple(sorted(self.happened, key=lambda k: order[k.item_id, k.attempt]))

    def _start(self, name: str, crashed: tuple | None) -> None:
        """Fork a worker (os.fork itself: a process started by multiprocessing, such as a grader's,
        may not have multiprocessing children)."""
        from multiprocessing import Pipe

        mine, theirs = Pipe()
        with warnings.catch_warnings():  # Python 3.12+ warns that a threaded parent (a notebook) forks
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the worker: it never returns into the supervisor's code, whatever happens
            try:
                mine.close()
                serve(self.url, name, self.workload, theirs, crashed)
            finally:
                os._exit(1)
        theirs.close()
        self.procs[name] = (pid, mine)

    def _read(self, name: str, pid: int, pipe: Connection) -> None:
        try:
            message = pipe.recv()
        except EOFError:
            message = ("failed", "it ended without a word")
        if message[0] == "stopped":
            _, point, item_id, attempt, token = message
            stop = self.plan[item_id, attempt]
            self.happened.append(stop)
            if stop.pause:
                self.paused[name] = (item_id, token)
            else:
                self._kill(name, pid, pipe, (item_id, attempt, point, SystemClock().now()))
            return
        del self.procs[name]
        os.waitpid(pid, 0)
        pipe.close()
        if message[0] != "drained":
            raise ChaosError(reason=f"worker {name} failed on its own: {message[1]}",
                             fix="run it again; if it repeats, the handler has a bug (or report it with the seed)")

    def _kill(self, name: str, pid: int, pipe: Connection, crashed: tuple) -> None:
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        pipe.close()
        if os.waitstatus_to_exitcode(status) != -signal.SIGKILL:
            raise ChaosError(reason=f"worker {name} ended with status {os.waitstatus_to_exitcode(status)}, "
                                    "not by the SIGKILL sent to it",
                             fix="run it again; if it repeats, report it with the seed")
        # The restarted worker writes the crash into the history: another worker may be stopped
        # inside a transaction right now, and a write from here would wait for it forever.
        self._start(name, crashed)

    def _release_paused(self) -> None:
        """A paused worker goes on once its item has a newer token (someone took it over) or is over."""
        for name, (item_id, token) in list(self.paused.items()):
            item = self.queue.item(item_id)
            if item.token > token or item.state in (ItemState.DONE, ItemState.DEAD):
                del self.paused[name]
                self.procs[name][1].send("go")


def _counts(queue: Queue) -> str:
    return ", ".join(f"{state.value} {n}" for state, n in queue.counts().items())


def _by_point(killed: tuple[Kill, ...]) -> list[tuple[KillPoint, int]]:
    return [(point, sum(1 for k in killed if k.point == point)) for point in KillPoint]


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
