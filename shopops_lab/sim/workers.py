"""A simulated agent worker, written the way a real one would be: a loop that asks the
backpressure policy, acquires, calls the model while heartbeating, sends the email with
its idempotency key, writes a checkpoint and acks.

The loop is a generator: `yield seconds` is where a real worker would block (a model call,
a sleep), and the world resumes it once the engine's clock has moved on that far. Nothing
else changes time, so a frozen worker is simply one that is not resumed, and a killed one
is a generator that is closed. Everything the loop does, it does to its `World`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator

from shopops_lab.effects import SendStatus
from shopops_lab.errors import LeaseExpiredError, LeaseSettledError, StaleTokenError
from shopops_lab.events import EventKind
from shopops_lab.sim.faults import Fault, FaultKind, Point
from shopops_lab.sim.world import Worker, World
from shopops_lab.worker.queue import Lease

__all__ = ["Handler", "Steps", "Worker", "handle", "interrupt", "worker_loop"]

Steps = Generator[float, None, bool]  # yields seconds to wait; returns True if the worker died


Handler = Callable[[World, Worker, Lease], Steps]  # one delivery, start to end


def worker_loop(world: World, w: Worker, handler: Handler | None = None) -> Generator[float, None, None]:
    """Poll, handle, repeat, until no work is left or can arrive. An empty poll backs off,
    doubling the wait from `idle_poll` up to `idle_poll_max`, as real consumers do.
    `handler` handles each delivery (default: the kit's own `handle`)."""
    handle_one = handle if handler is None else handler
    queue = world.queue
    first, most = world.scenario.idle_poll, world.scenario.idle_poll_max
    idle = first
    while True:
        lease = world.take_duplicate(w) if world.duplicates else None  # the broker pushed a copy
        if lease is not None:
            if (yield from handle_one(world, w, lease)):
                return
            continue
        if world.drained():
            return
        decision = world.decide()
        if decision.wait_seconds:
            world.held_back(w, decision)
            yield decision.wait_seconds
            continue
        lease = queue.acquire(w.id, max_priority=decision.max_priority)
        if lease is None:
            if decision.max_priority is not None and queue.depth:
                world.held_back(w, decision)
            yield idle
            idle = min(idle * 2, most)
            continue
        w.held = False
        idle = first
        if (yield from handle_one(world, w, lease)):
            return


def handle(world: World, w: Worker, lease: Lease) -> Steps:
    """One delivery, start to ack. Returns True if the worker died on the way."""
    queue = world.queue
    world.began(w, lease)
    payload = lease.payload
    idem_key = payload.get("idem_key")
    if not isinstance(idem_key, str) or not idem_key:
        yield world.scenario.parse_seconds
        world.fail(w, lease, f"bad payload: no idem_key (schema {payload.get('schema')!r})")
        return False

    # the model call, heartbeating so the lease outlives it
    seconds = world.call_model(w, lease)
    end = world.now + seconds
    if (fault := world.fault_at(Point.MID_CALL, w, lease)) and (yield from interrupt(world, w, fault)):
        return True
    every = world.scenario.heartbeat_interval
    while True:
        remaining = end - world.now
        if remaining <= every:
            if remaining > 0:
                yield remaining
            break
        yield every
        if not queue.heartbeat(lease):
            world.lost(w, lease, "heartbeat", "the heartbeat was refused: the lease is gone")
            return False
    if world.gateway.timed_out(seconds):
        world.fail(w, lease, f"model call timed out after {seconds:g} s")
        return False
    return (yield from send_and_ack(world, w, lease, idem_key))


def send_and_ack(world: World, w: Worker, lease: Lease, idem_key: str) -> Steps:
    """The rest of a delivery once the model has answered: the side effect, with the
    idempotency key from the payload, then the checkpoint and the ack."""
    log, queue, payload = world.log, world.queue, lease.payload
    if (fault := world.fault_at(Point.BEFORE_SEND, w, lease)) and (yield from interrupt(world, w, fault)):
        return True
    if world.scenario.heartbeat_before_send and not queue.heartbeat(lease):
        world.lost(w, lease, "heartbeat", "the lease was gone before the send: nothing sent")
        return False
    if world.fault_at(Point.SEND, w, lease):
        world.drop_next_reply()
    result = world.adapter.send(idem_key, case_id=lease.case_id, to=payload.get("to") or "customer", worker_id=w.id)
    if result.status is SendStatus.UNKNOWN:
        if not world.scenario.reconcile_unknown:
            world.fail(w, lease, "send outcome unknown: retrying the whole item")
            return False
        found = world.adapter.lookup(result.op_id)
        log.append(
            EventKind.EFFECT_RECONCILED,
            world.now,
            item_id=lease.item_id,
            case_id=lease.case_id,
            worker_id=w.id,
            token=lease.token,
            op_id=result.op_id,
            status=found.status.value,
            message_id=found.message_id,
        )
        result = found
    if result.status is not SendStatus.OK:
        world.fail(w, lease, f"send {result.status.value} for {idem_key}")
        return False
    if (fault := world.fault_at(Point.AFTER_SEND, w, lease)) and (yield from interrupt(world, w, fault)):
        return True

    # record the confirmed step, then settle with the queue
    if world.scenario.checkpoints and not world.checkpoint(w, lease, idem_key, result.message_id):
        world.lost(w, lease, "checkpoint", "the checkpoint store refused a stale token")
        return False
    if world.fault_at(Point.ACK, w, lease):
        world.ack_lost(w, lease)
        return False
    try:
        queue.ack(lease)
    except (StaleTokenError, LeaseExpiredError, LeaseSettledError) as refused:
        world.lost(w, lease, "ack", _reason(refused))
        return False
    w.lease = None
    return False


def interrupt(world: World, w: Worker, fault: Fault) -> Steps:
    """A kill or a pause striking inside a delivery. Returns True if the worker died."""
    if fault.kind is FaultKind.KILL_WORKER:
        world.crash(w, fault)
        return True
    seconds = world.pause_seconds(fault)
    held = w.holding()
    world.log.append(EventKind.WORKER_PAUSED, world.now, worker_id=w.id, seconds=seconds, **held)
    yield seconds
    world.log.append(EventKind.WORKER_RESUMED, world.now, worker_id=w.id, **held)
    return False


def _reason(refused: StaleTokenError | LeaseExpiredError | LeaseSettledError) -> str:
    if isinstance(refused, StaleTokenError):
        return f"stale token: the store is at token {refused.current}"
    if isinstance(refused, LeaseExpiredError):
        return "the lease expired"
    return f"the item was already {refused.how}"
