"""The chaos supervisor: forks worker processes on a shared database and kills them where the plan says.

Each planned kill lands exactly once. A worker that reaches a point where a kill of its item
may land asks first; the supervisor SIGKILLs it if that item's next kill is planned there
(on this delivery, or an earlier one that never got there: a worker slowed down past its
lease loses its delivery before its ack, so its kill moves to the redelivery rather than
being dropped), and restarts it; otherwise it says go. A kill that could still not land by
the time the queue is drained is an error that says so, never a shorter report. Workers die
with the supervisor (the kernel's parent-death signal on Linux, and the supervisor's own
cleanup on any error or interrupt: each worker is SIGKILLed and reaped once, and a worker
already reaped is never signalled again, since its pid may belong to another process by then).

The database may go away under a run (a restart): the workers and the supervisor reconnect
and carry on (see `worker.py`); a cause that does not pass (a full disk, a damaged file, a
server that stays away) ends the run with one line, its cause and how to finish it (`halfway`).
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING

from shopops_lab.chaos.plan import Kill
from shopops_lab.chaos.worker import SETUP, Workload, fork_worker, serve
from shopops_lab.clock import SystemClock
from shopops_lab.errors import (
    ConnectionLostError,
    Kept,
    ShopOpsError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreLockedError,
)
from shopops_lab.store import redact
from shopops_lab.store.base import transact
from shopops_lab.worker.queue import Queue

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

__all__ = ["ChaosError", "halfway", "run_workers"]


class ChaosError(ShopOpsError):
    """The chaos run could not finish: {reason}. Fix: {fix}."""


def halfway(url: str, error: BaseException, who: str = "") -> ChaosError:
    """What stopped a run (`who`: a worker, or the supervisor itself) as one line: the cause,
    told by the error's class, and the one thing to do before `--resume` finishes the run."""
    if isinstance(error, StoreFullError):
        cause, then = "the disk that holds the database is full", "free some space, then"
    elif isinstance(error, ConnectionLostError) and error.outcome is Kept.NOT_SENT:
        cause, then = f"the database went away and did not come back ({error.reason})", "when it is back,"
    elif isinstance(error, ConnectionLostError):
        cause, then = f"the connection to the database broke ({error.reason})", "when the database answers,"
    elif isinstance(error, StoreLockedError):
        cause, then = f"the database stayed locked ({error.reason})", "when the process holding it has let go,"
    elif isinstance(error, StoreCorruptError):
        cause, then = f"the database is damaged ({error.reason})", "restore it from a copy, then"
    elif isinstance(error, StoreError):
        cause, then = f"the database failed halfway: {error.reason}", f"{error.fix.rstrip('.')}; then"
    else:
        text = f"{type(error).__name__}: {error}".splitlines()[0]
        cause, then = f"the database failed halfway: {text}", "when the database is back,"
    return ChaosError(
        reason=f"{who}{cause}".rstrip("."), fix=f"{then} finish the run: shopops-lab chaos --db {redact(url)} --resume"
    )


def run_workers(
    queue: Queue, workload: Workload, plan: tuple[Kill, ...], *, workers: int, timeout: float = 300.0
) -> tuple[Kill, ...]:
    """Fork `workers` processes running `workload` on `queue`'s database until it is drained,
    killing them where `plan` says; returns the kills as they landed (item, delivery, point)."""
    if not hasattr(os, "fork"):
        raise ChaosError(
            reason="real worker processes are started with fork, which this system lacks",
            fix="run it on Linux or macOS (in a browser-only notebook, read the recorded run)",
        )
    setup = {
        "lease_seconds": queue.lease_seconds,
        "max_attempts": queue.max_attempts,
        "stops": [k.as_dict() for k in plan],
    }
    transact(queue.store, lambda: queue.store.put(*SETUP, setup), idempotent=True)
    return _Supervisor(queue, workload, plan, workers, timeout).run()


class _Supervisor:
    """Forks the workers, kills the one that reports where its item's next kill is planned and
    restarts it, and waits until all of them found the queue drained."""

    def __init__(self, queue: Queue, workload: Workload, plan: tuple[Kill, ...], workers: int, timeout: float) -> None:
        self.queue, self.workload, self.timeout = queue, workload, timeout
        self.pending: dict[str, list[Kill]] = {}  # item -> its kills still to land, by delivery
        for kill in sorted(plan, key=lambda k: (k.item_id, k.attempt)):
            self.pending.setdefault(kill.item_id, []).append(kill)
        self.url = queue.store.url
        self.procs: dict[str, tuple[int, Connection]] = {}  # name -> (pid, pipe)
        self.landed: list[Kill] = []
        self.names = [f"W{n}" for n in range(1, workers + 1)]

    def run(self) -> tuple[Kill, ...]:
        from multiprocessing.connection import wait  # here, not at import: a browser's Python has no processes

        deadline = time.monotonic() + self.timeout
        try:
            for name in self.names:
                self._start(name, None)
            while self.procs:
                if time.monotonic() > deadline:
                    raise ChaosError(
                        reason=f"the queue was not drained within {self.timeout:g} s (counts: {_counts(self.queue)})",
                        fix=f"finish it with a larger --timeout: {self._resume()} --timeout 900",
                    )
                ready = wait([pipe for _, pipe in self.procs.values()], timeout=1.0)
                for name, (pid, pipe) in list(self.procs.items()):
                    if pipe in ready:
                        self._read(name, pid, pipe)
        finally:  # every worker still in the table is alive or a zombie: never a reaped pid
            procs, self.procs = self.procs, {}
            for pid, pipe in procs.values():
                _end(pid, pipe)
        left = [kill for kills in self.pending.values() for kill in kills]
        if left:
            raise ChaosError(
                reason=f"{len(left)} planned kill(s) could not land, because their items ended first "
                f"({', '.join(map(str, left[:3]))})",
                fix="pass a longer --lease-seconds on a busy machine, so a slow worker keeps its lease",
            )
        return tuple(self.landed)

    def _start(self, name: str, crashed: tuple | None) -> None:
        self.procs[name] = fork_worker(lambda conn: serve(self.url, name, self.workload, conn, crashed))

    def _read(self, name: str, pid: int, pipe: Connection) -> None:
        try:
            message = pipe.recv()
        except EOFError:
            message = ("failed", "it ended without a word")
        if message[0] == "stopped":
            _, point, item_id, attempt, _token = message
            kills = self.pending.get(item_id)
            if kills and kills[0].point == point and kills[0].attempt <= attempt:
                kills.pop(0)
                self.landed.append(Kill(item_id=item_id, attempt=attempt, point=point))
                self._kill(name, pid, pipe, (item_id, attempt, point, SystemClock().now()))
            else:
                pipe.send("go")  # that kill landed already, or is planned for later on this item
            return
        del self.procs[name]
        os.waitpid(pid, 0)
        pipe.close()
        if message[0] != "drained":
            failure = message[1]
            if isinstance(failure, str):
                raise ChaosError(reason=f"worker {name} failed: {failure}", fix=f"finish the run: {self._resume()}")
            raise halfway(self.url, failure, who=f"worker {name} failed: ")

    def _resume(self) -> str:
        return f"shopops-lab chaos --db {redact(self.url)} --resume"

    def _kill(self, name: str, pid: int, pipe: Connection, crashed: tuple) -> None:
        del self.procs[name]  # before it is reaped: the cleanup must never signal its pid again
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        pipe.close()
        if os.waitstatus_to_exitcode(status) != -signal.SIGKILL:
            raise ChaosError(
                reason=f"worker {name} ended with status {os.waitstatus_to_exitcode(status)}, "
                "not by the SIGKILL sent to it",
                fix="run it again; if it repeats, report it with the seed",
            )
        # The restarted worker writes the crash into the history: another worker may be stopped
        # inside a transaction right now, and a write from here would wait until it ends.
        self._start(name, crashed)


def _end(pid: int, pipe: Connection) -> None:
    """SIGKILL a worker not reaped yet and reap it; one that is already gone is only reaped, so
    one worker's end never keeps the others from theirs."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it ended by itself (a zombie is still signalled fine: this is only a race)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    pipe.close()


def _counts(queue: Queue) -> str:
    return ", ".join(f"{state.value} {n}" for state, n in queue.counts().items())
