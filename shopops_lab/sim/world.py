"""The world the workers act on: the queue, the event log, the channel adapter, the model
gateway, the fault plan, the checkpoint store's claims, the workers themselves, and what
happens to them on its own (arrivals, timed faults, restarts).

The world never decides when anything happens: it asks the engine to `schedule` an
action at a time, and the engine calls it back then, with `now` moved there. Everything
a worker does to the world goes through the methods below, each of which logs what it did.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Generator
from enum import IntEnum
from typing import Any, TypedDict

from shopops_lab.backpressure import Decision, Gateway, Signals, as_policy
from shopops_lab.clock import FakeClock
from shopops_lab.effects import ProviderFault
from shopops_lab.errors import LeaseExpiredError, LeaseSettledError, StaleTokenError
from shopops_lab.events import EventKind, EventLog
from shopops_lab.fencing import TokenFence
from shopops_lab.sim.config import ADAPTERS, RunConfig
from shopops_lab.sim.faults import Fault, FaultKind, FaultPlan, Point
from shopops_lab.sim.scenarios import KINDS, plan_arrivals
from shopops_lab.states import ItemState
from shopops_lab.worker.queue import InMemoryQueue, Lease

__all__ = ["Rank", "Worker", "World"]

Action = Callable[[Any, int], "str | None"]  # (its argument, its schedule number) -> who acted, or None
Schedule = Callable[[float, int, Action, Any], int]  # (time, rank, action, argument) -> schedule number
Program = Callable[["World", "Worker"], Generator[float, None, None]]  # a worker's loop


class Rank(IntEnum):
    """Who goes first among events at the same instant."""

    FAULT = 0
    GATEWAY = 1
    ARRIVAL = 2
    WORKER = 3


_WORKER = Rank.WORKER  # read on every wake-up: a member off its Enum class costs ~20x a global (bench_queue.py)


class Holding(TypedDict):
    """What a worker holds, as the item_id / case_id / token fields of an event."""

    item_id: str | None
    case_id: str | None
    token: int | None


class Worker:
    """One worker's identity and what the world needs to drive it."""

    __slots__ = ("id", "loop", "wake_seq", "paused_until", "lease", "fault", "held", "up")

    def __init__(self, worker_id: str) -> None:
        self.id = worker_id
        self.loop: Generator[float, None, None] | None = None
        self.wake_seq = -1  # the schedule entry that may resume it; others are stale
        self.paused_until = 0.0  # frozen from outside until then
        self.lease: Lease | None = None
        self.fault: Fault | None = None  # the random fault drawn for the current delivery
        self.held = False  # held back by the policy at its last poll
        self.up = True

    def holding(self) -> Holding:
        """What the worker holds, as the item_id / case_id / token fields of an event."""
        lease = self.lease
        if lease is None:
            return {"item_id": None, "case_id": None, "token": None}
        return {"item_id": lease.item_id, "case_id": lease.case_id, "token": lease.token}

    def __repr__(self) -> str:
        doing = "down" if not self.up else f"holding {self.lease.item_id}" if self.lease else "idle"
        return f"Worker({self.id}, {doing})"


class World:
    """One run's world at time `now` (set by the engine). `program` is the loop every
    worker runs; the world starts it, and starts it again after a crash."""

    def __init__(self, config: RunConfig, clock: FakeClock, schedule: Schedule, program: Program) -> None:
        sc = self.scenario = config.scenario
        self.config, self.clock, self.schedule, self._program = config, clock, schedule, program
        self.rng = random.Random(config.seed)
        self.now = 0.0
        self.log = EventLog()
        self.queue = InMemoryQueue(
            lease_seconds=sc.lease_seconds, max_attempts=sc.max_attempts, clock=clock, log=self.log
        )
        self.gateway = Gateway(sc.latency, capacity=sc.gateway_capacity, log=self.log)
        self.adapter = ADAPTERS[config.adapter](log=self.log, clock=clock)
        self.plan = FaultPlan(config.faults, config.rates, self.rng)
        self._decide = as_policy(config.policy)
        self.duplicates: deque[tuple[str, Lease]] = deque()
        self.claims = TokenFence("checkpoint", log=self.log)  # the checkpoint store's fence, per item
        self._arrivals = plan_arrivals(sc, config.items, self.rng)
        self._next_arrival = 0
        self.workers = [Worker(worker_id) for worker_id in config.worker_ids]
        if self._arrivals:
            schedule(self._arrivals[0][0], Rank.ARRIVAL, self._arrive, None)
        for fault in self.plan.timed:
            schedule(fault.at, Rank.FAULT, self._timed_fault, fault)
        for w in self.workers:
            w.loop = program(self, w)
            self._wake_at(w, 0.0)

    # ------------------------------------------------------------------ what happens on its own
    def _wake_at(self, w: Worker, t: float) -> None:
        w.wake_seq = self.schedule(t, _WORKER, self._wake, w)

    def _wake(self, w: Worker, seq: int) -> str | None:
        if w.wake_seq != seq or w.loop is None:
            return None  # superseded: the worker was killed or rescheduled
        if w.paused_until > self.now:
            self._wake_at(w, w.paused_until)  # frozen: its timer fires when it thaws
            return None
        try:
            delay = next(w.loop)
        except StopIteration:
            w.loop, w.wake_seq = None, -1
            return w.id
        self._wake_at(w, self.now + delay)
        return w.id

    def _arrive(self, _: None, seq: int) -> str:
        arrivals, queue, now = self._arrivals, self.queue, self.now
        i = self._next_arrival
        take = self.plan.take
        while i < len(arrivals) and arrivals[i][0] <= now:
            _at, index, kind = arrivals[i]
            case_id = f"O-{1001 + index}"
            priority, step = KINDS[kind]
            item_id = f"item-{len(queue) + 1:04d}"  # the queue numbers items in enqueue order
            fault = take(Point.ENQUEUE, now, None, item_id, case_id)
            if fault is None and self.plan.draw_poison():
                fault = Fault(FaultKind.POISON)
                self._fault_logged(fault, "random", item_id=item_id, case_id=case_id)
            elif fault is not None:
                self._fault_logged(fault, "explicit", item_id=item_id, case_id=case_id)
            to = f"{case_id.lower()}@customers.example"
            payload = (
                {"to": to, "schema": 0}
                if fault is not None
                else {"idem_key": f"{case_id}:email:{step}", "to": to, "schema": 1}
            )
            queue.enqueue(case_id=case_id, tenant_id="store_northline", kind=kind, payload=payload, priority=priority)
            i += 1
        self._next_arrival = i
        if i < len(arrivals):
            self.schedule(arrivals[i][0], Rank.ARRIVAL, self._arrive, None)
        return "arrivals"

    def _call_done(self, call: tuple[float, str, str, str], seq: int) -> str:
        seconds, worker_id, item_id, case_id = call
        self.gateway.finish_call(seconds, now=self.now, worker_id=worker_id, item_id=item_id, case_id=case_id)
        return "gateway"

    def _timed_fault(self, fault: Fault, seq: int) -> str:
        self._fault_logged(fault, "explicit", worker_id=fault.worker)
        if fault.kind is FaultKind.GATEWAY_SPIKE:
            factor = 3.0 if fault.factor is None else fault.factor
            self.gateway.spike(factor)
            self.schedule(
                self.now + (600.0 if fault.duration is None else fault.duration), Rank.FAULT, self._spike_over, factor
            )
            return "fault"
        w = self.workers[int(fault.worker[1:]) - 1] if fault.worker else self.workers[0]
        if not w.up:
            return "fault"  # already down: nothing more to do to it
        if fault.kind is FaultKind.KILL_WORKER:
            if w.loop is not None:
                w.loop.close()
            self.crash(w, fault)
        else:
            seconds = self.pause_seconds(fault)
            w.paused_until = max(w.paused_until, self.now + seconds)
            self.log.append(EventKind.WORKER_PAUSED, self.now, worker_id=w.id, seconds=seconds, **w.holding())
            self.schedule(w.paused_until, Rank.FAULT, self._thaw, (w, w.paused_until))
        return "fault"

    def _spike_over(self, factor: float, seq: int) -> str:
        self.gateway.end_spike(factor)
        self.log.append(
            EventKind.FAULT_INJECTED, self.now, fault=FaultKind.GATEWAY_SPIKE.value, phase="over", factor=factor
        )
        return "fault"

    def _thaw(self, pause: tuple[Worker, float], seq: int) -> str | None:
        w, until = pause
        if not w.up or w.paused_until != until:
            return None  # died meanwhile, or a later pause extended the freeze
        self.log.append(EventKind.WORKER_RESUMED, self.now, worker_id=w.id, **w.holding())
        return w.id

    def _restart(self, w: Worker, seq: int) -> str:
        w.up, w.lease, w.fault, w.held, w.paused_until = True, None, None, False, 0.0
        self.log.append(EventKind.WORKER_RESUMED, self.now, worker_id=w.id, restarted=True)
        w.loop = self._program(self, w)
        self._wake_at(w, self.now)
        return w.id

    # ------------------------------------------------------------------ what workers call
    def drained(self) -> bool:
        """No work is left and none can arrive: a worker may go home. (A broker's copy of
        a delivery still waiting for a second worker does not keep anyone: it is moot.)"""
        if self._next_arrival < len(self._arrivals):
            return False
        counts = self.queue.counts()
        return not counts[ItemState.READY] and not counts[ItemState.LEASED]

    def decide(self) -> Decision:
        gateway = self.gateway
        return self._decide(
            Signals(
                gateway_p95=gateway.p95(self.now), depth=self.queue.depth, in_flight=gateway.in_flight, now=self.now
            )
        )

    def held_back(self, w: Worker, decision: Decision) -> None:
        """Log THROTTLED when the policy starts holding this worker back (once per stretch)."""
        if w.held:
            return
        w.held = True
        limit = decision.max_priority
        self.log.append(
            EventKind.THROTTLED,
            self.now,
            worker_id=w.id,
            reason=decision.reason,
            max_priority=None if limit is None else int(limit),
            wait_seconds=decision.wait_seconds,
            depth=self.queue.depth,
            gateway_p95=self.gateway.p95(self.now),
            in_flight=self.gateway.in_flight,
        )

    def take_duplicate(self, w: Worker) -> Lease | None:
        """A broker's second copy of someone else's delivery, if one is waiting."""
        for i, (origin, lease) in enumerate(self.duplicates):
            if origin != w.id:
                del self.duplicates[i]
                self.log.append(
                    EventKind.DELIVERED_TWICE,
                    self.now,
                    item_id=lease.item_id,
                    case_id=lease.case_id,
                    worker_id=w.id,
                    token=lease.token,
                    attempt=lease.attempt,
                    first_worker=origin,
                )
                return lease._replace(worker_id=w.id)
        return None

    def began(self, w: Worker, lease: Lease) -> None:
        """`w` begins handling `lease`: the log says so, and the delivery is `delivered`."""
        w.lease = lease
        self.log.append(EventKind.HANDLER_STARTED, self.now, **_about(w, lease), kind=lease.kind)
        self.delivered(w, lease)

    def ack_lost(self, w: Worker, lease: Lease) -> None:
        """`w`'s ack of `lease` never reached the queue: the lease runs out, the item comes back."""
        self.log.append(EventKind.ACK_LOST, self.now, **_about(w, lease))
        w.lease = None

    def delivered(self, w: Worker, lease: Lease) -> None:
        """A delivery began: note its claim, draw its random fault, and let the broker
        duplicate it."""
        self.claims.observe(lease.item_id, lease.token, worker_id=w.id)
        w.fault = self.plan.draw_delivery()
        if self.fault_at(Point.ACQUIRE, w, lease) is not None:
            self.duplicates.append((w.id, lease))

    def fault_at(self, point: Point, w: Worker, lease: Lease) -> Fault | None:
        """The fault striking this delivery at `point`, if any (logged as it strikes)."""
        fault = w.fault
        if fault is not None and fault.point is point:
            w.fault = None
            source = "random"
        elif not self.plan.explicit:
            return None  # nothing waits for a point: asked six times a delivery, so no call (bench_sim.py)
        else:
            fault = self.plan.take(point, self.now, w.id, lease.item_id, lease.case_id)
            if fault is None:
                return None
            source = "explicit"
        self._fault_logged(
            fault, source, item_id=lease.item_id, case_id=lease.case_id, worker_id=w.id, token=lease.token
        )
        return fault

    def call_model(self, w: Worker, lease: Lease) -> float:
        """Start a model call; the gateway finishes it on its own, even if the caller dies."""
        seconds = self.gateway.start_call(self.rng)
        self.schedule(self.now + seconds, Rank.GATEWAY, self._call_done, (seconds, w.id, lease.item_id, lease.case_id))
        return seconds

    def drop_next_reply(self) -> None:
        self.adapter.provider.inject(ProviderFault.DROP_REPLY)

    def checkpoint(self, w: Worker, lease: Lease, idem_key: str, message_id: str | None) -> bool:
        """Record the confirmed send. The store learns of every claim (like a job record
        whose token is bumped when it is claimed), so a write under an older token than the
        item's newest is refused (fenced) or, unfenced, accepted and logged as the anomaly it is."""
        common: dict[str, Any] = dict(item_id=lease.item_id, case_id=lease.case_id, worker_id=w.id, token=lease.token)
        if self.scenario.fenced_checkpoints:
            try:
                self.claims.check(
                    lease.item_id, lease.token, t=self.now, op="checkpoint", case_id=lease.case_id, worker_id=w.id
                )
            except StaleTokenError:
                return False
        elif lease.token < (current := self.claims.current(lease.item_id)):  # unfenced: taken, and named
            self.log.append(EventKind.STALE_WRITE_ACCEPTED, self.now, **common, op="checkpoint", current=current)
        self.log.append(
            EventKind.CHECKPOINT_WRITTEN,
            self.now,
            **common,
            attempt=lease.attempt,
            step=idem_key,
            message_id=message_id,
        )
        return True

    def fail(self, w: Worker, lease: Lease, error: str) -> None:
        """The handler failed: say why and give the item back (it may go to the DLQ)."""
        self.log.append(EventKind.HANDLER_FAILED, self.now, **_about(w, lease), error=error)
        try:
            self.queue.nack(lease, error)
        except (StaleTokenError, LeaseExpiredError, LeaseSettledError) as refused:
            self.lost(w, lease, "nack", f"{type(refused).__name__}")
            return
        w.lease = None

    def lost(self, w: Worker, lease: Lease, op: str, reason: str) -> None:
        """The worker found out it no longer owns the item, and stops."""
        self.log.append(EventKind.LEASE_LOST, self.now, **_about(w, lease), op=op, reason=reason)
        w.lease = None

    def pause_seconds(self, fault: Fault) -> float:
        """How long a pause fault freezes its worker: its own duration, else the scenario's."""
        return self.scenario.pause_length if fault.duration is None else fault.duration

    def crash(self, w: Worker, fault: Fault) -> None:
        """The worker dies now, with whatever it held; a supervisor may restart it later."""
        self.log.append(EventKind.WORKER_CRASHED, self.now, worker_id=w.id, **w.holding())
        w.up, w.loop, w.wake_seq, w.lease, w.fault = False, None, -1, None, None
        delay = self.scenario.restart_after if fault.duration is None else fault.duration
        if not math.isinf(delay):
            self.schedule(self.now + delay, Rank.FAULT, self._restart, w)

    def _fault_logged(self, fault: Fault, source: str, **where: Any) -> None:
        self.log.append(
            EventKind.FAULT_INJECTED,
            self.now,
            fault=fault.kind.value,
            source=source,
            point=fault.point.value if fault.point else None,
            **where,
        )


class _About(TypedDict):
    """The fields of an event about one worker's delivery of one lease."""

    item_id: str
    case_id: str
    worker_id: str
    token: int
    attempt: int


def _about(w: Worker, lease: Lease) -> _About:
    return {
        "item_id": lease.item_id,
        "case_id": lease.case_id,
        "worker_id": w.id,
        "token": lease.token,
        "attempt": lease.attempt,
    }
