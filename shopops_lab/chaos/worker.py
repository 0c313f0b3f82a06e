"""One worker process: drains the shared queue until every item is done or dead-lettered.

The supervisor forks it (os.fork), so it runs any handler, the learner's own included. It opens its
own store on the database, reads the run's settings and stop plan from it, and loops:
acquire, hand the lease to the workload's handler, repeat. The handler passes named points
(`stops.at("after_send", lease)`); at a point where the plan has a kill for its item (on this
delivery or an earlier one that never got there, e.g. because it stalled), the worker reports
over its pipe and waits: the supervisor SIGKILLs it there, or says go when that kill has
already landed elsewhere. On Linux the kernel kills a worker whose supervisor died.

A worker rides through its database going away (a restart): its store reconnects, and a
delivery the lost connection broke off is left to its lease, which runs out and brings the
item back, as if the worker had been killed there (the idempotent adapter makes the second
send the first). It opens the store waiting for a server that is restarting; it writes its
predecessor's death exactly once (`once`). A failure that does not pass (a full disk, a
damaged file, a server that stays away) goes to the supervisor as the error itself.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from shopops_lab.chaos.plan import Kill
from shopops_lab.clock import SystemClock
from shopops_lab.errors import (
    ConnectionLostError,
    Kept,
    LeaseExpiredError,
    LeaseSettledError,
    ShopOpsError,
    StaleTokenError,
    StoreError,
)
from shopops_lab.events import EventKind
from shopops_lab.states import ItemState
from shopops_lab.store import Store, open_store
from shopops_lab.store.base import once
from shopops_lab.worker.queue import Lease, Queue

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

__all__ = ["CRASHES", "SETUP", "Stops", "Workload", "crash_key", "die_with_parent", "serve"]

SETUP = ("chaos", "setup")  # the record the supervisor writes and every worker reads
CRASHES = "chaos crash"  # one record per kill written into the history: it is written once
_POLL_SECONDS = 0.02  # how long an idle worker waits before asking again
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_LOST = (StaleTokenError, LeaseExpiredError, LeaseSettledError)  # the lease is over: someone else owns the item


class Workload(Protocol):
    """What the workers do with each lease, and where they may be stopped."""

    @property
    def points(self) -> tuple[str, ...]:
        """The names of the points, in the order one delivery passes them."""

    def prepare(self, store: Store, queue: Queue, stops: Stops, name: str) -> Callable[[Lease], Any]:
        """In a fresh worker process: the function that handles one lease (and acks it)."""


class Stops:
    """The worker's side of the stop plan."""

    def __init__(self, name: str, plan: tuple[Kill, ...], conn: Connection) -> None:
        self.name, self._conn = name, conn
        self._plan: dict[str, list[Kill]] = {}
        for kill in plan:
            self._plan.setdefault(kill.item_id, []).append(kill)

    def at(self, point: str, lease: Lease) -> None:
        """Ask the supervisor here if a kill of this item may land here (planned on this delivery or
        an earlier one): wait for the SIGKILL, or for go if that kill has landed already."""
        if not any(k.point == point and k.attempt <= lease.attempt for k in self._plan.get(lease.item_id, ())):
            return
        self._conn.send(("stopped", point, lease.item_id, lease.attempt, lease.token))
        if self._conn.recv() != "go":
            os._exit(3)


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """The C library's prctl(2) on Linux (None elsewhere), found once, by the supervisor before
    it forks: a worker that imported ctypes itself spent about 4 ms of its life on it (a lab 09
    check forks 39 workers)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl


def die_with_parent(parent: int) -> None:
    """In a freshly forked worker: on Linux, have the kernel SIGKILL this process the moment its
    supervisor dies, however it dies (PR_SET_PDEATHSIG); and end now if it is already gone."""
    prctl = _prctl()
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def fork_worker(life: Callable[[Connection], None]) -> tuple[int, Connection]:
    """Fork a worker that lives `life(its end of a new pipe)` and then ends, never returning
    into its parent's code; returns its pid and the parent's end. os.fork itself: a process
    started by multiprocessing (a grader's) may not have multiprocessing children."""
    from multiprocessing import Pipe  # here, not at import: a browser's Python has no processes

    mine, theirs = Pipe()
    parent = os.getpid()
    _prctl()  # found here, once: each worker inherits it
    with warnings.catch_warnings():  # Python 3.12+ warns that a threaded parent (a notebook) forks
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        try:
            die_with_parent(parent)
            mine.close()
            life(theirs)
        finally:
            os._exit(1)
    theirs.close()
    return pid, mine


def serve(url: str, name: str, workload: Workload, conn: Connection, crashed: tuple | None) -> None:
    """The forked worker's whole life. Never returns: it ends the process."""
    sys.stdout = sys.stderr = open(os.devnull, "w")  # the parent's streams (a notebook's) are not ours
    try:
        store = open_store(url, wait=True)  # the server may be restarting right now
        setup = store.get(*SETUP)
        queue = Queue(
            store=store, lease_seconds=setup["lease_seconds"], max_attempts=setup["max_attempts"], clock=SystemClock()
        )
        if crashed is not None:  # the predecessor's SIGKILL, written by its successor (see the supervisor)
            item_id, attempt, point, at = crashed
            write_crash(queue, name, item_id, attempt, point, at)
        stops = Stops(name, tuple(map(Kill.from_dict, setup["stops"])), conn)
        _drain(queue, workload.prepare(store, queue, stops, name), stops, name)
    except ShopOpsError as error:  # the kit's own words reach the supervisor whole
        conn.send(("failed", error))
        os._exit(1)
    except BaseException:
        conn.send(("failed", traceback.format_exc().strip().splitlines()[-1]))
        os._exit(1)
    conn.send(("drained",))
    os._exit(0)


def crash_key(item_id: str, attempt: int, point: str) -> str:
    """The key of a kill's record: an item's planned kill lands once."""
    return f"{item_id}:{attempt}:{point}"


def write_crash(queue: Queue, worker_id: str | None, item_id: str, attempt: int, point: str, at: float) -> None:
    """Write a planned kill that landed into the history, exactly once whoever writes it (the
    killed worker's successor, a resume) and however often the connection breaks meanwhile."""

    def write() -> None:
        queue.log.append(
            EventKind.WORKER_CRASHED,
            at,
            worker_id=worker_id,
            item_id=item_id,
            case_id=queue.item(item_id).case_id,
            attempt=attempt,
            point=point,
            signal="SIGKILL",
        )

    once(queue.store, CRASHES, crash_key(item_id, attempt, point), write)


def _drain(queue: Queue, handle: Callable[[Lease], Any], stops: Stops, name: str) -> None:
    while True:
        try:
            lease = queue.acquire(name)
        except ConnectionLostError as lost:
            _passing(lost)
            continue  # a lease the broken acquire may have taken comes back when it runs out
        if lease is None:
            counts = queue.counts()
            if not counts[ItemState.READY] and not counts[ItemState.LEASED]:
                return
            time.sleep(_POLL_SECONDS)  # a lease elsewhere may still expire and come back
            continue
        stops.at("after_acquire", lease)
        try:
            handle(lease)
        except _LOST:
            continue  # the lease ran out while this worker was slow: the redelivery owns the item
        except ConnectionLostError as lost:
            _passing(lost)
            continue  # the database went away under this delivery: its lease brings it back
        except StoreError:
            raise  # the database failed for good (full, damaged, locked too long): the supervisor says so
        except ShopOpsError as error:  # the handler was refused something else: give the item back
            _nack(queue, lease, error)
        except Exception as error:  # noqa: BLE001 - the handler failed: that is data for the nack
            _nack(queue, lease, error)
        stops.at("after_handler", lease)


def _passing(lost: ConnectionLostError) -> None:
    """Go on after a lost connection (the store reconnects at its next statement); a server
    that did not come back within the store's patience ends the worker."""
    if lost.outcome is Kept.NOT_SENT:
        raise lost


def _nack(queue: Queue, lease: Lease, error: BaseException) -> None:
    try:
        queue.nack(lease, error)
    except _LOST:
        pass
    except ConnectionLostError as lost:
        _passing(lost)  # the nack is lost with it: the lease runs out instead
