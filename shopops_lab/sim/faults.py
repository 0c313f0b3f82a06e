"""Named faults: what can go wrong in a run, where it strikes, and how it is chosen.

A fault is data. Schedule one explicitly (`Fault("kill_worker", item="O-1001")`) to tell
a story, or give a scenario `FaultRates` so faults strike at random, drawn from the
run's one seeded `random.Random`: the same seed brings the same chaos back.

Where each kind strikes (its `point` in a worker's handling of one delivery):

    enqueue -> acquire -> [model call starts] mid_call -> before_send -> send -> after_send -> [checkpoint] ack

- `kill_worker`: the worker dies where it stands and loses everything it had not written
  down; its lease is left to expire. A supervisor restarts it under the same name after
  `duration` seconds (default: the scenario's `restart_after`; `math.inf`: never), with
  nothing remembered. Default point `after_send`, the chapter's crash: the email went out,
  the ack did not.
- `pause_worker`: the worker freezes for `duration` seconds (default: twice the lease),
  then carries on with its old lease as if nothing happened (a GC pause, a suspended VM).
  Default point `before_send`, so it wakes up stale and about to contact the customer.
- `lose_ack`: the worker acks, the ack never reaches the queue; the lease expires and
  the item is delivered again (point `ack`).
- `drop_reply`: the provider delivers the email but the reply is lost: outcome unknown
  (point `send`).
- `deliver_twice`: the broker hands a copy of a live lease to the next other worker that
  asks for work, the way an at-least-once broker redelivers a message whose delivery
  receipt went missing. Both hold the same token, so fencing cannot tell them apart; the
  second ack finds the item already settled (point `acquire`).
- `gateway_spike`: the model gateway gets `factor` times slower (default 3) for
  `duration` seconds (default 600), from time `at`.
- `poison`: the item's payload has a bad schema, so every attempt fails and it ends in
  the dead-letter queue (point `enqueue`).

Fields: `worker` and `item` narrow who is hit (not for `gateway_spike`; `poison` takes only
`item`); `duration` is for the kinds that last (kill, pause, spike); `factor` only for spikes.

Matching: a point fault strikes once, at the first opportunity at or after time `at`
whose worker and item match (`item` may be an item id such as `item-0003` or a case id
such as `O-1001`; None matches any). A `kill_worker` or `pause_worker` that names a
`worker` but no `item` and no `point` is timed instead: it strikes that worker at
exactly `at`, whatever it is doing.
"""

from __future__ import annotations

import math
import random
from dataclasses import KW_ONLY, dataclass, fields
from enum import StrEnum

from shopops_lab import arguments
from shopops_lab.errors import BadArgumentError

__all__ = ["Fault", "FaultKind", "FaultPlan", "FaultRates", "Point"]


class FaultKind(StrEnum):
    KILL_WORKER = "kill_worker"
    PAUSE_WORKER = "pause_worker"
    LOSE_ACK = "lose_ack"
    DROP_REPLY = "drop_reply"
    DELIVER_TWICE = "deliver_twice"
    GATEWAY_SPIKE = "gateway_spike"
    POISON = "poison"


class Point(StrEnum):
    """The moments in one delivery's life where a fault can strike, in order."""

    ENQUEUE = "enqueue"
    ACQUIRE = "acquire"
    MID_CALL = "mid_call"
    BEFORE_SEND = "before_send"
    SEND = "send"
    AFTER_SEND = "after_send"
    ACK = "ack"


_WORKER_POINTS = (Point.MID_CALL, Point.BEFORE_SEND, Point.AFTER_SEND)
_POINTS: dict[FaultKind, tuple[Point, ...]] = {
    FaultKind.KILL_WORKER: _WORKER_POINTS,
    FaultKind.PAUSE_WORKER: _WORKER_POINTS,
    FaultKind.LOSE_ACK: (Point.ACK,),
    FaultKind.DROP_REPLY: (Point.SEND,),
    FaultKind.DELIVER_TWICE: (Point.ACQUIRE,),
    FaultKind.POISON: (Point.ENQUEUE,),
    FaultKind.GATEWAY_SPIKE: (),
}
_DEFAULT_POINT = {FaultKind.KILL_WORKER: Point.AFTER_SEND, FaultKind.PAUSE_WORKER: Point.BEFORE_SEND}
_LASTING = (FaultKind.KILL_WORKER, FaultKind.PAUSE_WORKER, FaultKind.GATEWAY_SPIKE)  # these take a duration
# drawn once per delivery, in this order (the order fixes the random draws)
_PER_DELIVERY = (
    FaultKind.KILL_WORKER,
    FaultKind.PAUSE_WORKER,
    FaultKind.LOSE_ACK,
    FaultKind.DROP_REPLY,
    FaultKind.DELIVER_TWICE,
)
_WORKER_TARGETED = _PER_DELIVERY
_ITEM_TARGETED = _WORKER_TARGETED + (FaultKind.POISON,)


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault to inject. See the module docstring for each kind and how it matches."""

    kind: FaultKind
    _: KW_ONLY
    at: float = 0.0
    worker: str | None = None
    item: str | None = None
    duration: float | None = None
    factor: float | None = None
    point: Point | None = None

    def __post_init__(self) -> None:
        known = ", ".join(k.value for k in FaultKind)
        if not isinstance(self.kind, str) or self.kind not in FaultKind._value2member_map_:
            raise BadArgumentError(field="kind", problem=f"is {self.kind!r}", fix=f"pass one of: {known}")
        kind = FaultKind(self.kind)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(
            self,
            "at",
            arguments.number(
                "at",
                self.at,
                "pass the simulated time in seconds (>= 0) from which the fault may strike",
                least=0,
                below=math.inf,
            ),
        )
        for name, example in (("worker", "'W1'"), ("item", "'O-1001' or 'item-0001'")):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise BadArgumentError(
                    field=name, problem=f"is {value!r}", fix=f"pass a name like {example}, or None for any"
                )
        for name, kinds in (("worker", _WORKER_TARGETED), ("item", _ITEM_TARGETED), ("duration", _LASTING)):
            if getattr(self, name) is not None and kind not in kinds:
                users = ", ".join(k.value for k in kinds)
                raise BadArgumentError(
                    field=name,
                    problem=f"is set on a {kind.value} fault",
                    fix=f"leave it out; only {users} take a {name}",
                )
        if self.duration is not None:
            object.__setattr__(
                self,
                "duration",
                arguments.number(
                    "duration",
                    self.duration,
                    "pass a positive number of seconds (math.inf: a killed worker never restarts)",
                    above=0,
                ),
            )
        if self.factor is not None:
            f = self.factor
            if kind is not FaultKind.GATEWAY_SPIKE:
                raise BadArgumentError(
                    field="factor", problem=f"is set on a {kind.value} fault", fix="only gateway_spike takes a factor"
                )
            object.__setattr__(
                self,
                "factor",
                arguments.number("factor", f, "pass how many times slower, e.g. 3", above=0, below=math.inf),
            )
        if self.point is None:
            object.__setattr__(self, "point", _inferred_point(kind, self.worker, self.item))
        elif (
            not isinstance(self.point, str)
            or self.point not in Point._value2member_map_
            or Point(self.point) not in _POINTS[kind]
        ):
            choices = ", ".join(p.value for p in _POINTS[kind]) or "none (it is timed)"
            raise BadArgumentError(
                field="point", problem=f"is {self.point!r} for a {kind.value} fault", fix=f"pass one of: {choices}"
            )
        else:
            object.__setattr__(self, "point", Point(self.point))

    @property
    def timed(self) -> bool:
        """True if the fault strikes at exactly `at`; False if at a point in some delivery."""
        return self.point is None

    def matches(self, now: float, worker_id: str | None, item_id: str | None, case_id: str | None) -> bool:
        return (
            self.at <= now
            and (self.worker is None or self.worker == worker_id)
            and (self.item is None or self.item == item_id or self.item == case_id)
        )

    def __repr__(self) -> str:
        """Only what differs from the defaults, so it can be pasted back as Python."""
        parts = [repr(self.kind.value)]
        for f in fields(self)[1:]:
            value = getattr(self, f.name)
            if f.name == "point":
                if value is _inferred_point(self.kind, self.worker, self.item):
                    continue
                value = value.value
            elif value == f.default:
                continue
            text = "math.inf" if isinstance(value, float) and math.isinf(value) else repr(value)
            parts.append(f"{f.name}={text}")
        return f"Fault({', '.join(parts)})"


def _inferred_point(kind: FaultKind, worker: str | None, item: str | None) -> Point | None:
    """The point a fault gets when none is given: None (timed) for a worker fault that
    names a worker but no item; otherwise the kind's usual moment."""
    if kind in _DEFAULT_POINT:
        return None if worker is not None and item is None else _DEFAULT_POINT[kind]
    allowed = _POINTS[kind]
    return allowed[0] if allowed else None


@dataclass(frozen=True, kw_only=True, slots=True)
class FaultRates:
    """The chance that each fault strikes one delivery (`poison`: one item), drawn from
    the run's rng. The per-delivery chances together may not exceed 1: at most one of
    them strikes a given delivery."""

    kill_worker: float = 0.0
    pause_worker: float = 0.0
    lose_ack: float = 0.0
    drop_reply: float = 0.0
    deliver_twice: float = 0.0
    poison: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            arguments.number(
                f.name, getattr(self, f.name), "pass a probability between 0 and 1, e.g. 0.002", least=0, most=1
            )
        if self.per_delivery > 1:
            raise BadArgumentError(
                field="rates",
                problem=f"add up to {self.per_delivery:g} per delivery",
                fix="keep kill_worker + pause_worker + lose_ack + drop_reply + deliver_twice <= 1",
            )

    @property
    def per_delivery(self) -> float:
        return sum(getattr(self, kind.value) for kind in _PER_DELIVERY)


class FaultPlan:
    """The faults of one run, as it goes: explicit point faults wait for their moment
    and strike once; random ones are drawn per delivery (or per item, for poison)."""

    def __init__(self, faults: tuple[Fault, ...], rates: FaultRates, rng: random.Random) -> None:
        self.timed = [f for f in faults if f.timed]
        self._waiting: dict[Point, list[Fault]] = {}
        for fault in faults:
            if fault.point is not None:  # not timed: it waits for its point in some delivery
                self._waiting.setdefault(fault.point, []).append(fault)
        self.explicit = bool(self._waiting)  # any fault waits for a point (`take` has something to look at)
        self.rates = rates
        self._rng = rng
        cumulative, total = [], 0.0
        for kind in _PER_DELIVERY:
            chance = getattr(rates, kind.value)
            if chance:
                total += chance
                cumulative.append((total, kind))
        self._cumulative = tuple(cumulative)

    def take(
        self, point: Point, now: float, worker_id: str | None, item_id: str | None, case_id: str | None
    ) -> Fault | None:
        """The first explicit fault waiting at `point` that matches, now used up; or None."""
        waiting = self._waiting.get(point)
        if not waiting:
            return None
        for i, fault in enumerate(waiting):
            if fault.matches(now, worker_id, item_id, case_id):
                del waiting[i]
                return fault
        return None

    def draw_delivery(self) -> Fault | None:
        """At most one random fault for the delivery that just began, with its point."""
        if not self._cumulative:
            return None
        u = self._rng.random()
        for threshold, kind in self._cumulative:
            if u < threshold:
                points = _POINTS[kind]
                point = points[0] if len(points) == 1 else self._rng.choice(points)
                return Fault(kind, point=point)
        return None

    def draw_poison(self) -> bool:
        chance = self.rates.poison
        return bool(chance) and self._rng.random() < chance
