"""Workers that move one step at a time: real processes, each paused at every named point
until the supervisor says go.

`run_workers` lets processes race (the chaos run is a stress test). A check needs the
opposite: every interleaving it plans happens exactly as planned. Here a worker process
reports each named point its handler passes (`pause.at("after_credit")`) and waits there
for one word from the supervisor: go on, or nothing ever again (a SIGKILL). Only one worker
moves at a time, so the database sees the planned order of steps whatever the machine's
speed. The workers' queue runs on a clock the supervisor sets with every word, so a lease
runs out when the plan moves the clock, never because a process was slow.

A planned step that cannot happen (a worker that ends without a word, or stays silent past
`patience` seconds) raises `StepsError`: the caller voids its run, it never judges one.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from shopops_lab.chaos.worker import fork_worker
from shopops_lab.errors import LeaseExpiredError, LeaseSettledError, ShopOpsError, StaleTokenError
from shopops_lab.store import Store, open_store
from shopops_lab.worker.queue import Lease, Queue

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

__all__ = ["IDLE", "Pause", "Reached", "Stepper", "StepsError", "StepWorkload"]

IDLE = ("after_handler", "empty")  # where a worker waits for its next delivery, not inside one
_LOST = (StaleTokenError, LeaseExpiredError, LeaseSettledError)  # the lease is over: someone else owns the item


class StepsError(ShopOpsError):
    """A planned step did not happen: {reason}. Fix: {fix}."""


@dataclass(frozen=True, slots=True)
class Reached:
    """One report: `worker` stopped at `point` (inside a transaction or not), having done
    `did` (in words) since its last report."""

    worker: str
    point: str
    in_transaction: bool
    did: tuple[str, ...]


class StepWorkload(Protocol):
    """What a stepped worker does with a lease."""

    def prepare(self, store: Store, queue: Queue, pause: Pause, name: str) -> Callable[[Lease], Any]:
        """In a fresh worker process: the function that handles one lease."""


class _ToldClock:
    """The worker's clock: the time the supervisor's last word carried."""

    __slots__ = ("t",)

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t


class Pause:
    """The worker's side: note what it did, report where it is, wait for the word."""

    def __init__(self, conn: Connection, clock: _ToldClock, store: Store) -> None:
        self._conn, self._clock, self._store = conn, clock, store
        self._did: list[str] = []

    def note(self, words: str) -> None:
        self._did.append(words)

    def at(self, point: str) -> None:
        """Report `point` and wait here until the supervisor says go."""
        self.report(point)
        if self.wait() != "go":
            os._exit(3)

    def report(self, point: str) -> None:
        self._conn.send(("at", point, self._store.atomic.open, tuple(self._did)))
        self._did.clear()

    def wait(self) -> str:
        word, self._clock.t = self._conn.recv()
        return word


def _work(url: str, name: str, workload: StepWorkload, conn: Connection, settings: tuple[float, int]) -> None:
    """The forked worker's whole life: one delivery per `acquire` word. Never returns."""
    sys.stdout = sys.stderr = open(os.devnull, "w")  # the parent's streams (a notebook's) are not ours
    store = open_store(url)
    clock = _ToldClock()
    queue = Queue(store=store, lease_seconds=settings[0], max_attempts=settings[1], clock=clock)
    pause = Pause(conn, clock, store)
    handle = workload.prepare(store, queue, pause, name)
    pause.report("ready")
    while pause.wait() == "acquire":
        lease = queue.acquire(name)
        if lease is None:
            pause.report("empty")
            continue
        pause.note(f"acquires {lease.case_id} (attempt {lease.attempt}, token {lease.token})")
        pause.at("after_acquire")
        _deliver(handle, lease, queue, pause)
        pause.report("after_handler")
    os._exit(0)


def _deliver(handle: Callable[[Lease], Any], lease: Lease, queue: Queue, pause: Pause) -> None:
    """Run the handler on `lease` as a worker would: an error it raises gives the delivery back."""
    try:
        handle(lease)
    except _LOST as error:
        pause.note(f"your handler raised {type(error).__name__}: the lease is no longer this worker's")
        return
    except BaseException as error:  # noqa: BLE001 - the handler failed: that is data for the nack
        pause.note(f"your handler raised {type(error).__name__}; the worker gives the delivery back (nack)")
        try:
            queue.nack(lease, error)
        except _LOST:
            pass
        return
    pause.note("your handler returned")


class Stepper:
    """The supervisor's side: start workers, move each one point at a time, kill them."""

    def __init__(
        self, url: str, workload: StepWorkload, *, lease_seconds: float, max_attempts: int, patience: float = 60.0
    ) -> None:
        self.url, self.workload, self.patience = url, workload, patience
        self.settings = (lease_seconds, max_attempts)
        self.procs: dict[str, tuple[int, Connection]] = {}

    def start(self, name: str) -> None:
        """Fork worker `name`; it reports "ready" once it opened the database."""
        self.procs[name] = fork_worker(lambda conn: self._life(name, conn))
        self._read(name)  # "ready": it opened the database

    def _life(self, name: str, conn: Connection) -> None:
        try:
            _work(self.url, name, self.workload, conn, self.settings)
        except BaseException as error:  # noqa: BLE001 - told to the supervisor, which voids the run
            conn.send(("at", "failed", False, (f"{type(error).__name__}: {error}",)))

    def acquire(self, name: str, t: float) -> Reached:
        """`name` asks the queue for a delivery at time `t`: it stops right after it (or reports empty)."""
        return self._say(name, "acquire", t)

    def go(self, name: str, t: float) -> Reached:
        """Let `name` run on to its next point."""
        return self._say(name, "go", t)

    def kill(self, name: str) -> None:
        """SIGKILL `name` where it stands: it runs nothing more, not even a `finally`."""
        pid, conn = self.procs.pop(name)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        conn.close()

    def stop(self, name: str) -> None:
        """End an idle worker (one between deliveries) the ordinary way."""
        pid, conn = self.procs.pop(name)
        conn.send(("exit", 0.0))
        os.waitpid(pid, 0)
        conn.close()

    def close(self) -> None:
        for name in list(self.procs):
            self.kill(name)

    def __enter__(self) -> Stepper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _say(self, name: str, word: str, t: float) -> Reached:
        self.procs[name][1].send((word, t))
        return self._read(name)

    def _read(self, name: str) -> Reached:
        pid, conn = self.procs[name]
        try:
            if not conn.poll(self.patience):
                self.kill(name)
                raise StepsError(
                    reason=f"worker {name} said nothing for {self.patience:g} s (does your handler "
                    "wait for something, or loop?)",
                    fix="make the handler return after its writes, then run the check again",
                )
            _, point, in_transaction, did = conn.recv()
            if point == "failed":
                raise StepsError(
                    reason=f"worker {name} could not start: {did[0]}", fix="run it again; if it repeats, report it"
                )
        except (EOFError, OSError):
            self.procs.pop(name, None)
            os.waitpid(pid, 0)
            raise StepsError(
                reason=f"worker {name} ended without a word (did your handler end the process?)",
                fix="let the handler return or raise; never exit the process from it",
            ) from None
        return Reached(worker=name, point=point, in_transaction=in_transaction, did=did)
