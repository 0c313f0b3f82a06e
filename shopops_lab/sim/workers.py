"""A simulated agent worker, written the way a real one would be: a loop that asks the
backpressure policy, acquires, calls the model while heartbeating, sends the email with
its idempotency key, writes a checkpoint and acks.

The loop is a generator: `yield seconds` is where a real worker would block (a model call,
a sleep), and the engine resumes it when simulated time has moved on. Nothing else
changes time, so a frozen worker is simply one the engine does not resume, and a killed
one is a generator the engine closes.
"""
from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

from shopops_lab.effects import SendStatus
from shopops_lab.errors import LeaseExpiredError, LeaseSettledError, StaleTokenError
from shopops_lab.events import EventKind
from shopops_lab.sim.faults import Fault, FaultKind, Point
from shopops_lab.worker.queue import Lease

if TYPE_CHECKING:
    from shopops_lab.sim.engine import Simulation

__all__ = ["Worker", "worker_loop"]

Steps = Generator[float, None, bool]   # yields seconds to wait; returns True if the worker died


class Worker:
    """One worker's identity and what the engine needs to drive it."""

    __slots__ = ("id", "loop", "wake_seq", "paused_until", "lease", "fault", "held", "up")

    def __init__(self, worker_id: str) -> None:
        self.id = worker_id
        self.loop: Generator[float, None, None] | None = None
        self.wake_seq = -1          # the heap entry that may resume it; others are stale
        self.paused_until = 0.0     # frozen from outside until then
        self.lease: Lease | None = None
        self.fault: Fault | None = None   # the random fault drawn for the current delivery
        self.held = False           # held back by the policy at its last poll
        self.up = True

    def holding(self) -> dict[str, object]:
        """What the worker holds, as the item_id / case_id / token fields of an event."""
        lease = self.lease
        if lease is None:
            return {"item_id": None, "case_id": None, "token": None}
        return {"item_id": lease.item_id, "case_id": lease.case_id, "token": lease.token}

    def __repr__(self) -> str:
        doing = "down" if not self.up else f"holding {self.lease.item_id}" if self.lease else "idle"
        return f"Worker({self.id}, {doing})"


def worker_loop(sim: Simulation, w: Worker) -> Generator[float, None, None]:
    """Poll, handle, repeat, until no work is left or can arrive. An empty poll backs off,
    doubling the wait from `idle_poll` up to `idle_poll_max`, as real consumers do."""
    queue = sim.queue
    first, most = sim.scenario.idle_poll, sim.scenario.idle_poll_max
    idle = first
    while True:
        lease = sim.take_duplicate(w) if sim.duplicates else None   # the broker pushed a copy
        if lease is not None:
            if (yield from handle(sim, w, lease)):
                return
            continue
        if sim.drained():
            return
        decision = sim.decide()
        if decision.wait_seconds:
            sim.held_back(w, decision)
            yield decision.wait_seconds
            continue
        lease = queue.acquire(w.id, max_priority=decision.max_priority)
        if lease is None:
            if decision.max_priority is not None and queue.depth:
                sim.held_back(w, decision)
            yield idle
            idle = min(idle * 2, most)
            continue
        w.held = False
        idle = first
        if (yield from handle(sim, w, lease)):
            return


def handle(sim: Simulation, w: Worker, lease: Lease) -> Steps:
    """One delivery, start to ack. Returns True if the worker died on the way."""
    log, queue, now = sim.log, sim.queue, sim.now
    w.lease = lease
    log.append(EventKind.HANDLER_STARTED, now, item_id=lease.item_id, case_id=lease.case_id,
               worker_id=w.id, token=lease.token, attempt=lease.attempt, kind=lease.kind)
    sim.delivered(w, lease)
    payload = lease.payload
    idem_key = payload.get("idem_key")
    if not isinstance(idem_key, str) or not idem_key:
        yield sim.scenario.parse_seconds
        sim.fail(w, lease, f"bad payload: no idem_key (schema {payload.get('schema')!r})")
        return False

    # the model call, heartbeating so the lease outlives it
    seconds = sim.call_model(w, lease)
    end = sim.now + seconds
    if (fault := sim.fault_at(Point.MID_CALL, w, lease)) and (yield from interrupt(sim, w, fault)):
        return True
    every = sim.scenario.heartbeat_interval
    while True:
        remaining = end - sim.now
        if remaining <= every:
            if remaining > 0:
                yield remaining
            break
        yield every
        if not queue.heartbeat(lease):
            sim.lost(w, lease, "heartbeat", "the heartbeat was refused: the lease is gone")
            return False
    if sim.gateway.timed_out(seconds):
        sim.fail(w, lease, f"model call timed out after {seconds:g} s")
        return False

    # the side effect, with the idempotency key from the payload
    if (fault := sim.fault_at(Point.BEFORE_SEND, w, lease)) and (yield from interrupt(sim, w, fault)):
        return True
    if sim.scenario.heartbeat_before_send and not queue.heartbeat(lease):
        sim.lost(w, lease, "heartbeat", "the lease was gone before the send: nothing sent")
        return False
    if sim.fault_at(Point.SEND, w, lease):
        sim.drop_next_reply()
    result = sim.adapter.send(idem_key, case_id=lease.case_id, to=payload.get("to") or "customer",
                              worker_id=w.id)
    if result.status is SendStatus.UNKNOWN:
        if not sim.scenario.reconcile_unknown:
            sim.fail(w, lease, "send outcome unknown: retrying the whole item")
            return False
        found = sim.adapter.lookup(result.op_id)
        log.append(EventKind.EFFECT_RECONCILED, sim.now, item_id=lease.item_id, case_id=lease.case_id,
                   worker_id=w.id, token=lease.token, op_id=result.op_id, status=found.status.value,
                   message_id=found.message_id)
        result = found
    if result.status is not SendStatus.OK:
        sim.fail(w, lease, f"send {result.status.value} for {idem_key}")
        return False
    if (fault := sim.fault_at(Point.AFTER_SEND, w, lease)) and (yield from interrupt(sim, w, fault)):
        return True

    # record the confirmed step, then settle with the queue
    if sim.scenario.checkpoints and not sim.checkpoint(w, lease, idem_key, result.message_id):
        sim.lost(w, lease, "checkpoint", "the checkpoint store refused a stale token")
        return False
    if sim.fault_at(Point.ACK, w, lease):
        log.append(EventKind.ACK_LOST, sim.now, item_id=lease.item_id, case_id=lease.case_id,
                   worker_id=w.id, token=lease.token, attempt=lease.attempt)
        w.lease = None
        return False
    try:
        queue.ack(lease)
    except (StaleTokenError, LeaseExpiredError, LeaseSettledError) as refused:
        sim.lost(w, lease, "ack", _reason(refused))
        return False
    w.lease = None
    return False


def interrupt(sim: Simulation, w: Worker, fault: Fault) -> Steps:
    """A kill or a pause striking inside a delivery. Returns True if the worker died."""
    if fault.kind is FaultKind.KILL_WORKER:
        sim.crash(w, fault)
        return True
    seconds = sim.pause_seconds(fault)
    held = w.holding()
    sim.log.append(EventKind.WORKER_PAUSED, sim.now, worker_id=w.id, seconds=seconds, **held)
    yield seconds
    sim.log.append(EventKind.WORKER_RESUMED, sim.now, worker_id=w.id, **held)
    return False


def _reason(refused: Exception) -> str:
    if isinstance(refused, StaleTokenError):
        return f"stale token: the store is at token {refused.current}"
    if isinstance(refused, LeaseExpiredError):
        return "the lease expired"
    return f"the item was already {refused.how}"
