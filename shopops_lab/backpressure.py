"""Backpressure: slow down before the model gateway melts, and shed bulk work before approvals.

The `Gateway` stands in for the model endpoint every worker calls. It has a `capacity`:
past that many calls at once, the calls share the same hardware, so each one gets slower
in proportion. More concurrency then buys no throughput, only latency, and a call slowed
past the latency model's `max` times out and comes back as a retry: that is how a gateway
melts. The gateway keeps a rolling p95 of recent calls, the signal a policy reads.

A policy turns four signals (`Signals`: the gateway's p95, queue depth, calls in flight,
the time) into a `Decision` for a worker about to ask for work:

- `acquire()`: take anything;
- `acquire(max_priority=Priority.NORMAL)`: take nothing less urgent than NORMAL, so bulk
  outreach waits (it is shed first);
- `acquire(max_priority=Priority.APPROVAL)`: take approval resumes only;
- `wait(seconds)`: take nothing for a while.

Priorities follow `Priority`: lower is served first. A sound policy sheds in that order,
bulk outreach, then ordinary intake, and never holds back approval resumes while bulk
work still flows: a customer who was promised a refund is waiting on each of them.

A policy is any function of one `Signals`, so writing your own is one `def`:

    from shopops_lab.backpressure import acquire, wait
    from shopops_lab.worker.queue import Priority

    def my_policy(signals):
        if signals.gateway_p95 > 45:
            return acquire(max_priority=Priority.APPROVAL)
        return acquire()

An object with a `decide(*, gateway_p95, depth, in_flight, now)` method works too, like
the kit's `BackpressurePolicy` and `NoBackpressure`. Keep policies pure (no randomness
of their own, no state): the simulator replays runs from their seed.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shopops_lab import arguments
from shopops_lab.arguments import MAX_TIME
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import EventKind, EventLog, component_log
from shopops_lab.latency import LatencyModel
from shopops_lab.metrics import nearest_rank
from shopops_lab.worker.queue import Priority

__all__ = [
    "BackpressurePolicy",
    "Decision",
    "Gateway",
    "NoBackpressure",
    "Policy",
    "Signals",
    "acquire",
    "as_policy",
    "describe_policy",
    "wait",
]


# --------------------------------------------------------------------------- the gateway


class Gateway:
    """The model gateway as the workers see it: latency drawn from a `LatencyModel`, a
    count of calls in flight, and a rolling p95 over the last `window` calls.

    `capacity` is how many calls it serves at full speed (None: unlimited); beyond it each
    new call is slowed by in_flight / capacity. A latency spike swaps in `latency.scaled(k)`
    until it ends. Calls finished more than `max_age` seconds ago drop out of the p95, so a
    gateway nobody calls stops looking slow (None keeps them until pushed out by newer ones).
    """

    def __init__(
        self,
        latency: LatencyModel | None = None,
        *,
        window: int = 50,
        capacity: int | None = None,
        max_age: float | None = 300.0,
        log: EventLog | None = None,
    ) -> None:
        latency = LatencyModel() if latency is None else latency
        if not isinstance(latency, LatencyModel):
            raise BadArgumentError(
                field="latency",
                problem=f"is {arguments.a(type(latency).__name__)}",
                fix="pass a LatencyModel(p50=..., p99=..., max=...)",
            )
        arguments.whole("window", window, 1, "pass how many recent calls the p95 covers, e.g. 50")
        if capacity is not None:
            arguments.whole("capacity", capacity, 1, "pass how many calls the gateway serves at full speed, or None")
        if max_age is not None:
            arguments.seconds("max_age", max_age)
        self.base = latency
        self.latency = latency
        self.window = window
        self.capacity = capacity
        self.max_age = None if max_age is None else float(max_age)
        self.log = component_log(log)
        self.in_flight = 0
        self.calls = 0
        self.timeouts = 0
        self._recent: deque[tuple[float, float]] = deque()  # (finished at, seconds), oldest first
        self._ordered: list[float] = []  # the same latencies, sorted
        self._spikes: list[float] = []

    # ------------------------------------------------------------------ calls
    def start_call(self, rng: random.Random) -> float:
        """Begin one call and return how long it will take, at most `latency.max` (a call
        that reaches `max` timed out). Latency comes from `rng`, slowed by the load."""
        seconds = self.latency.sample(rng)  # checks rng before anything is counted
        self.in_flight += 1
        capacity = self.capacity
        if capacity is not None and self.in_flight > capacity:
            seconds *= self.in_flight / capacity
        return min(round(seconds, 3), self.latency.max)  # millisecond resolution reads better in logs

    def finish_call(
        self,
        seconds: float,
        *,
        now: float,
        worker_id: str | None = None,
        item_id: str | None = None,
        case_id: str | None = None,
    ) -> bool:
        """End a call started with `start_call`; record it and log GATEWAY_CALL.
        Returns True if it timed out."""
        _check_finished(seconds, now)
        self.in_flight -= 1
        timed_out = self.timed_out(seconds)
        if timed_out:
            self.timeouts += 1
        self._record(seconds, now)  # checked just above
        self.log.append(
            EventKind.GATEWAY_CALL,
            now,
            item_id=item_id,
            case_id=case_id,
            worker_id=worker_id,
            seconds=seconds,
            in_flight=self.in_flight,
            timed_out=timed_out,
        )
        return timed_out

    def timed_out(self, seconds: float) -> bool:
        return seconds >= self.latency.max

    def record(self, latency: float, now: float) -> None:
        """Count one finished call of `latency` seconds, finished at `now`."""
        _check_finished(latency, now, "latency")
        self._record(latency, now)

    def _record(self, latency: float, now: float) -> None:
        """`record`, once its arguments are checked."""
        self.calls += 1
        recent = self._recent
        recent.append((now, latency))
        insort(self._ordered, latency)
        if len(recent) > self.window:
            self._forget()

    def p95(self, now: float | None = None) -> float:
        """Nearest-rank 95th percentile of the last `window` calls (those finished within
        `max_age` of `now`, when both are given); 0.0 when there are none: no recent call,
        no evidence of slowness."""
        recent = self._recent
        if now is not None and (now.__class__ is not float or not -MAX_TIME <= now <= MAX_TIME):
            arguments.moment("now", now, "pass the time to measure at, in seconds, or leave it out")
        if now is not None and self.max_age is not None:
            horizon = now - self.max_age
            while recent and recent[0][0] < horizon:
                self._forget()
        ordered = self._ordered
        return nearest_rank(ordered, 95) if ordered else 0.0

    def _forget(self) -> None:
        """Drop the oldest recorded call from the window."""
        _, seconds = self._recent.popleft()
        ordered = self._ordered
        del ordered[bisect_left(ordered, seconds)]

    # ------------------------------------------------------------------ spikes
    def spike(self, factor: float) -> None:
        """Make calls `factor` times slower until `end_spike(factor)` (spikes stack)."""
        self._spikes.append(
            arguments.number("factor", factor, "pass how many times slower calls get, e.g. 3", above=0, below=math.inf)
        )
        self._rescale()

    def end_spike(self, factor: float) -> None:
        """End one spike started with `spike(factor)`."""
        if not arguments.is_number(factor) or float(factor) not in self._spikes:
            raise BadArgumentError(
                field="factor",
                problem=f"is {factor!r}, but no spike of that factor is on",
                fix=f"end one of the spikes in progress: {self._spikes}",
            )
        self._spikes.remove(float(factor))
        self._rescale()

    @property
    def slowdown(self) -> float:
        """How many times slower than `base` the gateway is now, from spikes alone."""
        return math.prod(self._spikes)

    def _rescale(self) -> None:
        self.latency = self.base.scaled(self.slowdown) if self._spikes else self.base

    def __repr__(self) -> str:
        return (
            f"Gateway(in_flight={self.in_flight}, capacity={self.capacity}, calls={self.calls}, "
            f"slowdown={self.slowdown:g})"
        )


def _check_finished(seconds: object, now: object, field: str = "seconds") -> None:
    """Check a finished call's duration and end time before the gateway counts it."""
    if seconds.__class__ is not float or not 0 <= seconds < math.inf:  # the slow path only for a suspect
        arguments.number(
            field, seconds, "pass the call's duration in seconds, e.g. record(7.5, now=120)", least=0, below=math.inf
        )
    if now.__class__ is not float or not -MAX_TIME <= now <= MAX_TIME:
        arguments.moment("now", now, "pass the time the call finished, in seconds")


# --------------------------------------------------------------------------- decisions


@dataclass(frozen=True, kw_only=True, slots=True)
class Signals:
    """What a policy may look at when a worker asks for work."""

    gateway_p95: float  # seconds; 0.0 when no call finished recently
    depth: int  # items waiting in the queue
    in_flight: int  # model calls in progress at the gateway
    now: float  # the simulated time

    def __post_init__(self) -> None:
        # Made on every poll of the simulator: one cheap test passes the usual values.
        p95, depth, in_flight, now = self.gateway_p95, self.depth, self.in_flight, self.now
        if not (
            p95.__class__ is float
            and 0 <= p95 < math.inf
            and depth.__class__ is int
            and depth >= 0
            and in_flight.__class__ is int
            and in_flight >= 0
            and now.__class__ is float
            and -MAX_TIME <= now <= MAX_TIME
        ):
            if isinstance(p95, bool) or not isinstance(p95, (int, float)) or not 0 <= p95 < math.inf:
                raise BadArgumentError(
                    field="gateway_p95",
                    problem=f"is {p95!r}",
                    fix="pass the gateway's p95 in seconds (0.0 when nothing finished lately)",
                )
            arguments.whole("depth", depth, 0, "pass how many items wait in the queue, a whole number >= 0")
            arguments.whole("in_flight", in_flight, 0, "pass how many model calls are in progress, a whole number >= 0")
            arguments.moment("now", now, "pass the time in seconds")


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """What a worker does next: acquire work no less urgent than `max_priority` (None:
    anything), or, when `wait_seconds` > 0, acquire nothing for that long.
    Build one with `acquire(...)` or `wait(...)`."""

    max_priority: int | None = None
    wait_seconds: float = 0.0
    reason: str = ""

    def __post_init__(self) -> None:
        limit, seconds = self.max_priority, self.wait_seconds
        if (limit is None or limit.__class__ is Priority) and seconds.__class__ is float and seconds == 0.0:
            if self.reason.__class__ is str:
                return  # acquire(...) as policies build it on every poll, passed in one cheap test (bench_sim.py)
        if self.max_priority is not None:
            arguments.whole(
                "max_priority",
                self.max_priority,
                None,
                "pass a Priority, e.g. Priority.NORMAL to shed bulk, or None for anything",
            )
        seconds = self.wait_seconds
        arguments.number(
            "wait_seconds", seconds, "pass a positive, finite number of seconds, e.g. wait(2)", least=0, below=math.inf
        )
        if not isinstance(self.reason, str):
            raise BadArgumentError(
                field="reason",
                problem=f"is {self.reason!r}",
                fix="say why in a few words, e.g. reason='gateway p95 over budget'",
            )
        if seconds and self.max_priority is not None:
            raise BadArgumentError(
                field="max_priority",
                problem="is set on a decision to wait",
                fix="return either acquire(max_priority=...) or wait(seconds), not both",
            )

    @property
    def waits(self) -> bool:
        return self.wait_seconds > 0


def acquire(max_priority: int | None = None, *, reason: str = "") -> Decision:
    """Take work no less urgent than `max_priority` (None: anything)."""
    if max_priority is None and not reason:
        return ACQUIRE_ANY
    return Decision(max_priority=max_priority, reason=reason)


def wait(seconds: float, *, reason: str = "") -> Decision:
    """Take no work for `seconds`, then ask again."""
    seconds = arguments.number(
        "seconds", seconds, "pass a positive, finite number of seconds, e.g. wait(2)", above=0, below=math.inf
    )
    return Decision(wait_seconds=seconds, reason=reason)


ACQUIRE_ANY = Decision()
SHED_BULK = Decision(max_priority=Priority.NORMAL, reason="gateway p95 over budget: bulk outreach waits")
APPROVALS_ONLY = Decision(max_priority=Priority.APPROVAL, reason="gateway p95 past the hard limit: approvals only")
AT_CAPACITY = Decision(max_priority=Priority.APPROVAL, reason="calls in flight at the cap: approvals only")

Policy = Callable[[Signals], Decision]


# --------------------------------------------------------------------------- policies


@dataclass(frozen=True, kw_only=True, slots=True)
class BackpressurePolicy:
    """The kit's reference policy: a ladder of thresholds, checked from the most severe.

    While more than `soft_depth` items wait (a short queue drains by itself):
    1. p95 above `stop_p95` (if set): everyone waits `min_delay`; calls would time out anyway.
    2. p95 above `p95_hard`, or `max_in_flight` calls already in flight: approvals only.
    3. p95 above `p95_budget`: bulk outreach waits, intake and approvals flow.
    Otherwise: acquire anything. Approvals are never held back before bulk is.
    """

    p95_budget: float = 30.0
    p95_hard: float = 60.0
    stop_p95: float | None = None
    max_in_flight: int | None = None
    soft_depth: int = 0
    min_delay: float = 1.0

    def __post_init__(self) -> None:
        for field in ("p95_budget", "p95_hard", "min_delay"):
            arguments.seconds(field, getattr(self, field))
        if self.stop_p95 is not None:
            arguments.seconds("stop_p95", self.stop_p95)
        if self.p95_hard < self.p95_budget:
            raise BadArgumentError(
                field="p95_hard",
                problem=f"is {self.p95_hard:g}, below p95_budget={self.p95_budget:g}",
                fix="keep p95_budget <= p95_hard (bulk is shed before intake)",
            )
        if self.stop_p95 is not None and self.stop_p95 < self.p95_hard:
            raise BadArgumentError(
                field="stop_p95",
                problem=f"is {self.stop_p95:g}, below p95_hard={self.p95_hard:g}",
                fix="keep p95_hard <= stop_p95 (approvals are held back last)",
            )
        if self.max_in_flight is not None:
            arguments.whole("max_in_flight", self.max_in_flight, 1, "pass a whole number of calls >= 1, or None")
        arguments.whole("soft_depth", self.soft_depth, 0, "pass a whole number of waiting items >= 0")

    def decide(self, *, gateway_p95: float, depth: int, in_flight: int, now: float) -> Decision:
        return self(Signals(gateway_p95=gateway_p95, depth=depth, in_flight=in_flight, now=now))

    def __call__(self, signals: Signals) -> Decision:
        gateway_p95, depth, in_flight = signals.gateway_p95, signals.depth, signals.in_flight
        if depth <= self.soft_depth:
            return ACQUIRE_ANY
        if self.stop_p95 is not None and gateway_p95 > self.stop_p95:
            return Decision(wait_seconds=self.min_delay, reason="gateway p95 past the stop line: everyone waits")
        if gateway_p95 > self.p95_hard:
            return APPROVALS_ONLY
        if self.max_in_flight is not None and in_flight >= self.max_in_flight:
            return AT_CAPACITY
        if gateway_p95 > self.p95_budget:
            return SHED_BULK
        return ACQUIRE_ANY


@dataclass(frozen=True, slots=True)
class NoBackpressure:
    """Always acquire anything: the baseline that piles every worker onto a slow gateway."""

    def decide(self, *, gateway_p95: float, depth: int, in_flight: int, now: float) -> Decision:
        return self(Signals(gateway_p95=gateway_p95, depth=depth, in_flight=in_flight, now=now))

    def __call__(self, signals: Signals) -> Decision:
        return ACQUIRE_ANY


def as_policy(policy: Any) -> Policy:
    """Accept a plain function of `Signals`, or an object with `decide(...)`; return a
    function of `Signals` that checks what the policy returns."""
    if isinstance(policy, (BackpressurePolicy, NoBackpressure)):
        return policy  # the kit's own: known to return Decisions
    decide = getattr(policy, "decide", None)
    if callable(decide):

        def inner(signals: Signals) -> Any:
            return decide(
                gateway_p95=signals.gateway_p95, depth=signals.depth, in_flight=signals.in_flight, now=signals.now
            )
    elif callable(policy):
        inner = policy
    else:
        raise BadArgumentError(
            field="policy",
            problem=f"is {arguments.a(type(policy).__name__)}, not a function",
            fix="pass a function policy(signals) -> Decision, or BackpressurePolicy(...)",
        )

    def checked(signals: Signals) -> Decision:
        decision = inner(signals)
        if type(decision) is not Decision:
            raise BadArgumentError(
                field="policy",
                problem=f"returned {decision!r}",
                fix="return acquire(...) or wait(seconds) from shopops_lab.backpressure",
            )
        return decision

    return checked


def describe_policy(policy: Any) -> str:
    """A stable, address-free name for a policy, for reports and replay lines."""
    if policy is None:
        return "None"
    if isinstance(policy, (BackpressurePolicy, NoBackpressure)):
        return repr(policy)
    name = getattr(policy, "__qualname__", None) or getattr(policy, "__name__", None)
    return name if isinstance(name, str) else f"{type(policy).__name__}()"
