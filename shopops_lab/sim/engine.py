"""The discrete-event core: one heap of future events, one seeded rng, one clock.

Events are ordered by (time, priority, sequence number): at the same instant, faults act
first, then the gateway finishes calls, then new items arrive, then workers move; ties
within a rank go in scheduling order. Everything runs in one thread, so a run is a pure
function of its seed and arguments: same seed, same event log, in a notebook, on CI or in
the browser. The queue, the channel adapter and the gateway share one `EventLog` and one
`FakeClock`, which the engine moves to each event's time.

`run()` plays a whole scenario and returns its `Report`. `Simulation` is the same run, one
event at a time (`step`, `run_until`), with `snapshot` / `restore` to rewind: restoring
replays from the seed up to the saved step, which is exact because the run is deterministic.
"""
from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Callable, Iterable

from shopops_lab import arguments
from shopops_lab.backpressure import (
    Decision,
    Gateway,
    NoBackpressure,
    Signals,
    as_policy,
)
from shopops_lab.clock import FakeClock
from shopops_lab.effects import EmailAdapter, NaiveEmailAdapter
from shopops_lab.effects import Fault as ProviderFault
from shopops_lab.errors import (
    BadArgumentError,
    LeaseExpiredError,
    LeaseSettledError,
    StaleTokenError,
)
from shopops_lab.events import Event, EventKind, EventLog, collector_paused
from shopops_lab.sim.faults import Fault, FaultKind, FaultPlan, FaultRates, Point
from shopops_lab.sim.report import Report, build_report
from shopops_lab.sim.scenarios import KINDS, MAX_ITEMS, MAX_WORKERS, Scenario, get_scenario, plan_arrivals
from shopops_lab.sim.workers import Worker, worker_loop
from shopops_lab.states import ItemState
from shopops_lab.worker.queue import InMemoryQueue, Lease

__all__ = ["ADAPTERS", "Simulation", "Snapshot", "Step", "run"]

ADAPTERS = {"idempotent": EmailAdapter, "naive": NaiveEmailAdapter}


class Rank(IntEnum):
    """Who goes first among events at the same instant."""

    FAULT = 0
    GATEWAY = 1
    ARRIVAL = 2
    WORKER = 3


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """One event the engine handled: when, who acted, and what it wrote to the log."""

    number: int
    time: float
    actor: str
    events: tuple[Event, ...]

    def __str__(self) -> str:
        head = f"step {self.number} t={self.time:g} {self.actor}"
        return "\n".join([head, *(f"  {e}" for e in self.events)]) if self.events else f"{head} (nothing logged)"


@dataclass(frozen=True, kw_only=True, slots=True)
class Snapshot:
    """Where a simulation stood: enough to come back to it by replaying from the seed."""

    scenario: str
    seed: int
    steps: int
    time: float


class Simulation:
    """One run of a scenario, driven step by step or all at once.

    `faults=None` uses the scenario's own faults and random rates; a list of `Fault`
    replaces both, so exactly those faults happen. `policy=None` uses the scenario's policy.
    """

    def __init__(self, scenario: str | Scenario = "burst_day", *, seed: int = 0, items: int | None = None,
                 workers: int | None = None, adapter: str = "idempotent", policy: Any = None,
                 faults: Iterable[Fault] | None = None) -> None:
        sc = get_scenario(scenario)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise BadArgumentError(field="seed", problem=f"is {seed!r}", fix="pass a whole number, e.g. seed=7")
        for name, value, most in (("items", items, MAX_ITEMS), ("workers", workers, MAX_WORKERS)):
            if value is not None:
                arguments.whole(name, value, 1, f"pass a whole number from 1 to {most:,}, or leave it out "
                                "for the scenario's own", most=most)
        if adapter not in ADAPTERS:
            raise BadArgumentError(field="adapter", problem=f"is {adapter!r}",
                                   fix=f"pass one of: {', '.join(ADAPTERS)}")
        if faults is not None:
            given = faults
            try:
                faults = None if isinstance(given, (str, Fault)) else tuple(given)
            except TypeError:
                faults = None
            if faults is None or not all(isinstance(f, Fault) for f in faults):
                raise BadArgumentError(field="faults", problem=f"is {given!r}, not a list of Fault",
                                       fix="pass e.g. faults=[Fault('kill_worker', item='O-1001')], or None")
        self.scenario = sc
        self.seed = seed
        self.items = sc.items if items is None else items
        self.worker_count = sc.workers if workers is None else workers
        self.horizon = sc.horizon * max(1.0, self.items / sc.items)   # more items, a longer day
        self.adapter_name = adapter
        self.custom_policy = policy is not None
        self.policy = policy if policy is not None else (sc.policy if sc.policy is not None else NoBackpressure())
        self._decide = as_policy(self.policy)
        self.custom_faults = faults is not None
        self.faults: tuple[Fault, ...] = sc.faults if faults is None else faults
        self.rates = sc.rates if faults is None else FaultRates()
        ids = {f"W{n}" for n in range(1, self.worker_count + 1)}
        for i, fault in enumerate(self.faults):
            if fault.worker is not None and fault.worker not in ids:
                raise BadArgumentError(field=f"faults[{i}].worker", problem=f"is {fault.worker!r}",
                                       fix=f"name one of this run's workers, W1 to W{self.worker_count}")
        with collector_paused():
            self._start()

    # ------------------------------------------------------------------ building
    def _start(self) -> None:
        sc = self.scenario
        self.rng = random.Random(self.seed)
        self.clock = FakeClock()
        self.log = EventLog()
        self.queue = InMemoryQueue(lease_seconds=sc.lease_seconds, max_attempts=sc.max_attempts,
                                   clock=self.clock, log=self.log)
        self.gateway = Gateway(sc.latency, capacity=sc.gateway_capacity, log=self.log)
        self.adapter = ADAPTERS[self.adapter_name](log=self.log, clock=self.clock)
        self.plan = FaultPlan(self.faults, self.rates, self.rng)
        self.now = 0.0
        self.steps = 0
        self._last_actor = ""
        self.duplicates: deque[tuple[str, Lease]] = deque()
        self._claims: dict[str, int] = {}   # item -> newest token claimed: the checkpoint store's fence
        self._heap: list[tuple[float, int, int, Callable[[Any, int], str | None], Any]] = []
        self._seq = 0
        self._arrivals = plan_arrivals(sc, self.items, self.rng)
        self._next_arrival = 0
        self.workers = [Worker(f"W{n}") for n in range(1, self.worker_count + 1)]
        if self._arrivals:
            self._push(self._arrivals[0][0], Rank.ARRIVAL, self._arrive, None)
        for fault in self.plan.timed:
            self._push(fault.at, Rank.FAULT, self._timed_fault, fault)
        for w in self.workers:
            w.loop = worker_loop(self, w)
            self._wake_at(w, 0.0)

    def _push(self, t: float, rank: int, action: Callable[[Any, int], str | None], arg: Any) -> int:
        self._seq += 1
        heapq.heappush(self._heap, (t, rank, self._seq, action, arg))
        return self._seq

    def _wake_at(self, w: Worker, t: float) -> None:
        w.wake_seq = self._push(t, Rank.WORKER, self._wake, w)

    # ------------------------------------------------------------------ running
    @property
    def done(self) -> bool:
        """True once nothing is left to happen before the horizon."""
        return not self._heap or self._heap[0][0] > self.horizon

    def step(self) -> Step | None:
        """Handle the next event and say what happened; None when the run is over."""
        start = len(self.log)
        if not self._advance(1, self.horizon):
            return None
        return Step(number=self.steps, time=self.now, actor=self._last_actor,
                    events=tuple(self.log[i] for i in range(start, len(self.log))))

    def run_until(self, t: float | None = None) -> int:
        """Handle every event up to time `t` (default: the end); returns how many."""
        horizon = self.horizon
        if t is not None:
            if isinstance(t, bool) or not isinstance(t, (int, float)) or t != t:
                raise BadArgumentError(field="t", problem=f"is {t!r}", fix="pass a simulated time in seconds")
            horizon = min(horizon, t)
        with collector_paused():
            return self._advance(None, horizon)

    def finish(self) -> Simulation:
        """Run to the end and return self, so `Simulation(...).finish().report()` reads well."""
        self.run_until()
        return self

    def _advance(self, limit: int | None, until: float) -> int:
        """The engine's loop: pop, move the clock, act. Stale entries (a killed worker's
        wake-up) are dropped without counting as a step."""
        heap, pop, set_clock = self._heap, heapq.heappop, self.clock.set
        handled = 0
        while heap and heap[0][0] <= until and (limit is None or handled < limit):
            t, _, seq, action, arg = pop(heap)
            if t != self.now:
                self.now = t
                set_clock(t)
            actor = action(arg, seq)
            if actor is not None:
                handled += 1
                self._last_actor = actor
        self.steps += handled
        return handled

    def snapshot(self) -> Snapshot:
        return Snapshot(scenario=self.scenario.name, seed=self.seed, steps=self.steps, time=self.now)

    def restore(self, snap: Snapshot) -> None:
        """Go back (or forward) to `snap`, by replaying this run from its seed."""
        if not isinstance(snap, Snapshot) or (snap.scenario, snap.seed) != (self.scenario.name, self.seed):
            raise BadArgumentError(field="snap", problem="is not a snapshot of this simulation",
                                   fix="pass a Snapshot taken from this Simulation with snapshot()")
        with collector_paused():
            if snap.steps < self.steps:
                self._start()
            self._advance(snap.steps - self.steps, self.horizon)

    def report(self) -> Report:
        """The run so far (or, once `done`, the whole run) judged and summarised."""
        with collector_paused():
            return build_report(self)

    # ------------------------------------------------------------------ event actions
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
            _, index, kind = arrivals[i]
            case_id = f"O-{1001 + index}"
            priority, step = KINDS[kind]
            item_id = f"item-{len(queue) + 1:04d}"   # the queue numbers items in enqueue order
            fault = take(Point.ENQUEUE, now, None, item_id, case_id)
            if fault is None and self.plan.draw_poison():
                fault = Fault(FaultKind.POISON)
                self._fault_logged(fault, "random", item_id=item_id, case_id=case_id)
            elif fault is not None:
                self._fault_logged(fault, "explicit", item_id=item_id, case_id=case_id)
            to = f"{case_id.lower()}@customers.example"
            payload = ({"to": to, "schema": 0} if fault is not None
                       else {"idem_key": f"{case_id}:email:{step}", "to": to, "schema": 1})
            queue.enqueue(case_id=case_id, tenant_id="store_northline", kind=kind,
                          payload=payload, priority=priority)
            i += 1
        self._next_arrival = i
        if i < len(arrivals):
            self._push(arrivals[i][0], Rank.ARRIVAL, self._arrive, None)
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
            self._push(self.now + (600.0 if fault.duration is None else fault.duration),
                       Rank.FAULT, self._spike_over, factor)
            return "fault"
        w = self._worker(fault.worker)
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
            self._push(w.paused_until, Rank.FAULT, self._thaw, (w, w.paused_until))
        return "fault"

    def _spike_over(self, factor: float, seq: int) -> str:
        self.gateway.end_spike(factor)
        self.log.append(EventKind.FAULT_INJECTED, self.now, fault=FaultKind.GATEWAY_SPIKE.value,
                        phase="over", factor=factor)
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
        w.loop = worker_loop(self, w)
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
        return self._decide(Signals(gateway_p95=gateway.p95(self.now), depth=self.queue.depth,
                                    in_flight=gateway.in_flight, now=self.now))

    def held_back(self, w: Worker, decision: Decision) -> None:
        """Log THROTTLED when the policy starts holding this worker back (once per stretch)."""
        if w.held:
            return
        w.held = True
        limit = decision.max_priority
        self.log.append(EventKind.THROTTLED, self.now, worker_id=w.id, reason=decision.reason,
                        max_priority=None if limit is None else int(limit), wait_seconds=decision.wait_seconds,
                        depth=self.queue.depth, gateway_p95=self.gateway.p95(self.now),
                        in_flight=self.gateway.in_flight)

    def take_duplicate(self, w: Worker) -> Lease | None:
        """A broker's second copy of someone else's delivery, if one is waiting."""
        for i, (origin, lease) in enumerate(self.duplicates):
            if origin != w.id:
                del self.duplicates[i]
                self.log.append(EventKind.DELIVERED_TWICE, self.now, item_id=lease.item_id,
                                case_id=lease.case_id, worker_id=w.id, token=lease.token,
                                attempt=lease.attempt, first_worker=origin)
                return lease._replace(worker_id=w.id)
        return None

    def delivered(self, w: Worker, lease: Lease) -> None:
        """A delivery began: note its claim, draw its random fault, and let the broker
        duplicate it."""
        if lease.token > self._claims.get(lease.item_id, 0):
            self._claims[lease.item_id] = lease.token
        w.fault = self.plan.draw_delivery()
        if self.fault_at(Point.ACQUIRE, w, lease) is not None:
            self.duplicates.append((w.id, lease))

    def fault_at(self, point: Point, w: Worker, lease: Lease) -> Fault | None:
        """The fault striking this delivery at `point`, if any (logged as it strikes)."""
        fault = w.fault
        if fault is not None and fault.point is point:
            w.fault = None
            source = "random"
        else:
            fault = self.plan.take(point, self.now, w.id, lease.item_id, lease.case_id)
            if fault is None:
                return None
            source = "explicit"
        self._fault_logged(fault, source, item_id=lease.item_id, case_id=lease.case_id,
                           worker_id=w.id, token=lease.token)
        return fault

    def call_model(self, w: Worker, lease: Lease) -> float:
        """Start a model call; the gateway finishes it on its own, even if the caller dies."""
        seconds = self.gateway.start_call(self.rng)
        self._push(self.now + seconds, Rank.GATEWAY, self._call_done,
                   (seconds, w.id, lease.item_id, lease.case_id))
        return seconds

    def drop_next_reply(self) -> None:
        self.adapter.provider.inject(ProviderFault.DROP_REPLY)

    def checkpoint(self, w: Worker, lease: Lease, idem_key: str, message_id: str | None) -> bool:
        """Record the confirmed send. The store learns of every claim (like a job record
        whose token is bumped when it is claimed), so a write under an older token than the
        item's newest is refused (fenced) or, unfenced, accepted and logged as the anomaly it is."""
        current = self._claims[lease.item_id]
        common = dict(item_id=lease.item_id, case_id=lease.case_id, worker_id=w.id, token=lease.token)
        if lease.token < current:
            if self.scenario.fenced_checkpoints:
                self.log.append(EventKind.STALE_REJECTED, self.now, **common, op="checkpoint", current=current)
                return False
            self.log.append(EventKind.STALE_WRITE_ACCEPTED, self.now, **common, op="checkpoint", current=current)
        self.log.append(EventKind.CHECKPOINT_WRITTEN, self.now, **common, attempt=lease.attempt,
                        step=idem_key, message_id=message_id)
        return True

    def fail(self, w: Worker, lease: Lease, error: str) -> None:
        """The handler failed: say why and give the item back (it may go to the DLQ)."""
        self.log.append(EventKind.HANDLER_FAILED, self.now, item_id=lease.item_id, case_id=lease.case_id,
                        worker_id=w.id, token=lease.token, attempt=lease.attempt, error=error)
        try:
            self.queue.nack(lease, error)
        except (StaleTokenError, LeaseExpiredError, LeaseSettledError) as refused:
            self.lost(w, lease, "nack", f"{type(refused).__name__}")
            return
        w.lease = None

    def lost(self, w: Worker, lease: Lease, op: str, reason: str) -> None:
        """The worker found out it no longer owns the item, and stops."""
        self.log.append(EventKind.LEASE_LOST, self.now, item_id=lease.item_id, case_id=lease.case_id,
                        worker_id=w.id, token=lease.token, attempt=lease.attempt, op=op, reason=reason)
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
            self._push(self.now + delay, Rank.FAULT, self._restart, w)

    # ------------------------------------------------------------------ helpers
    def _worker(self, worker_id: str | None) -> Worker:
        return self.workers[int(worker_id[1:]) - 1] if worker_id else self.workers[0]

    def _fault_logged(self, fault: Fault, source: str, **where: Any) -> None:
        self.log.append(EventKind.FAULT_INJECTED, self.now, fault=fault.kind.value, source=source,
                        point=fault.point.value if fault.point else None, **where)

    def __repr__(self) -> str:
        state = "done" if self.done else f"t={self.now:g}"
        return (f"Simulation({self.scenario.name!r}, seed={self.seed}, items={self.items}, "
                f"workers={self.worker_count}, adapter={self.adapter_name!r}, {state}, steps={self.steps})")


def run(scenario: str | Scenario = "burst_day", *, seed: int = 0, items: int | None = None,
        workers: int | None = None, adapter: str = "idempotent", policy: Any = None,
        faults: Iterable[Fault] | None = None) -> Report:
    """Play a scenario to the end and return its `Report` (str() it for a summary with
    the seed and a one-line replay)."""
    return Simulation(scenario, seed=seed, items=items, workers=workers, adapter=adapter,
                      policy=policy, faults=faults).finish().report()
