"""Lab 07, exercise 7.4: the vital signs, computed by the learner from an event log.

The learner writes `vital_signs(log, now)`: from one run's event log, as it stood at `now`,
a dict of four numbers an operator watches on burst day:

- "time_in_queue_p95": the nearest-rank p95, over every item leased by `now`, of its first
  lease's time minus its enqueue time (None when no item was leased);
- "attempts": how many items were leased how many times, {leases: items} (0 for an item never
  leased yet), counting every item enqueued by `now`;
- "dlq_age": how long the oldest item dead at `now` has waited there, `now` minus the time it
  was (last) dead-lettered (None when the DLQ is empty at `now`);
- "redelivery_rate": the leases after each item's first, over all leases (0.0 without leases).

The check holds the answer to the kit's own `shopops_lab.metrics.queue_metrics` on runs the
notebook never shows (a chaotic burst day read at its end and in its middle, a poison day
read long after, a replayed dead letter, a run with nothing leased yet), and refuses an
answer that hands the work to `queue_metrics` itself. A failure names the run, `now`, the
number that differs, and what the kit measured there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shopops_lab.checks.base import Exercise, Wrong, attempt, describe, error_text, watching
from shopops_lab.clock import FakeClock
from shopops_lab.events import EventLog
from shopops_lab.metrics import queue_metrics
from shopops_lab.sim import Simulation, get_scenario
from shopops_lab.worker.queue import InMemoryQueue

__all__ = ["KEYS", "RUNS", "vitals"]

KEYS = ("time_in_queue_p95", "attempts", "dlq_age", "redelivery_rate")


@dataclass(frozen=True, slots=True)
class VitalsRun:
    """One run the answer is held to the kit on: its name, and how to make (log, now) afresh."""

    name: str
    make: Callable[[], tuple[EventLog, float]]


def _day(seed: int, items: int, at: float | None) -> tuple[EventLog, float]:
    sim = Simulation(get_scenario("burst_day"), seed=seed, items=items).finish()
    end = max(event.time for event in sim.log.where())
    return sim.log, end if at is None else at


def _poison_read_later() -> tuple[EventLog, float]:
    sim = Simulation(get_scenario("poison"), seed=2).finish()
    return sim.log, max(event.time for event in sim.log.where()) + 3600.0


def _replayed() -> tuple[EventLog, float]:
    """One item dead-lettered, replayed after a fix and dead again; another dead once and left."""
    clock = FakeClock()
    queue = InMemoryQueue(lease_seconds=30, max_attempts=2, clock=clock)
    first = queue.enqueue(case_id="O-2001", tenant_id="store_northline", kind="refund_review")
    queue.enqueue(case_id="O-2002", tenant_id="store_northline", kind="refund_review")
    clock.advance(5)
    for _ in range(4):  # each item fails twice: both dead at t=8 or so
        lease = queue.acquire("W1")
        if lease is not None:
            queue.nack(lease, ValueError("bad payload"))
        clock.advance(1)
    clock.advance(600)
    queue.replay_dlq(first)
    clock.advance(40)
    for _ in range(2):
        lease = queue.acquire("W2")
        if lease is not None:
            queue.nack(lease, ValueError("still a bad payload"))
        clock.advance(3)
    clock.advance(900)
    queue.enqueue(case_id="O-2003", tenant_id="store_northline", kind="refund_review")  # never leased
    return queue.log, clock.now() + 120.0


def _nothing_leased() -> tuple[EventLog, float]:
    clock = FakeClock()
    queue = InMemoryQueue(lease_seconds=30, clock=clock)
    for n in range(3):
        queue.enqueue(case_id=f"O-{3001 + n}", tenant_id="store_northline", kind="contact_send")
    return queue.log, 50.0


RUNS = (
    VitalsRun("a 200-item burst day with its chaos (seed 5), read at its end", lambda: _day(5, 200, None)),
    VitalsRun("the same day read at t=100, items still waiting and leased", lambda: _day(5, 200, 100.0)),
    VitalsRun("a poison day (seed 2), read an hour after its last event", _poison_read_later),
    VitalsRun("a dead letter replayed after a fix and dead again, beside one left dead", _replayed),
    VitalsRun("three items enqueued, none leased yet", _nothing_leased),
)


def _kit(log: EventLog, now: float) -> dict[str, Any]:
    m = queue_metrics(log, now=now)
    return {
        "time_in_queue_p95": m.time_in_queue.p95,
        "attempts": dict(m.attempts),
        "dlq_age": m.dlq_age.max,
        "redelivery_rate": m.redelivery_rate,
    }


_MEANS = {
    "time_in_queue_p95": "the nearest-rank p95 of each leased item's first lease minus its enqueue",
    "attempts": "{leases: items}, every enqueued item counted, 0 for one never leased",
    "dlq_age": "now minus the time the oldest item dead at now was dead-lettered",
    "redelivery_rate": "the leases after each item's first, over all leases",
}


def _same(key: str, mine: Any, kit: Any) -> bool:
    if kit is None or mine is None:
        return mine is None and kit is None
    if key == "attempts":
        return (
            isinstance(mine, dict)
            and all(type(k) is int and type(v) is int for k, v in mine.items())
            and dict(mine) == kit
        )
    if isinstance(mine, bool) or not isinstance(mine, (int, float)):
        return False
    return math.isclose(float(mine), float(kit), rel_tol=1e-9, abs_tol=1e-6)


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))) + "}"
    return describe(value) if not isinstance(value, (int, type(None))) else repr(value)


def _judge(vital_signs: Any) -> str:
    for run in RUNS:
        log, now = run.make()
        kit = _kit(log, now)
        with watching(vital_signs, queue_metrics) as handed:
            mine, err = attempt(vital_signs, log, now)
        if handed:
            raise Wrong(
                "vital_signs hands the work to the kit's queue_metrics, which already computes these numbers: "
                "compute them from the log's events yourself."
            )
        if err is not None:
            raise Wrong(f"on {run.name} (now t={now:g}), vital_signs raised {error_text(err)}")
        if not isinstance(mine, dict) or sorted(mine) != sorted(KEYS):
            keys = sorted(mine) if isinstance(mine, dict) else None
            raise Wrong(
                f"vital_signs returned {describe(mine) if keys is None else 'a dict with the keys ' + ', '.join(keys)}"
                f": return a dict with exactly the keys {', '.join(KEYS)}."
            )
        for key in KEYS:
            if not _same(key, mine[key], kit[key]):
                raise Wrong(
                    f"on {run.name} (now t={now:g}), your {key} is {_shown(mine[key])}, and the kit measures "
                    f"{_shown(kit[key])} ({_MEANS[key]})."
                )
    return (
        f"your four vital signs agree with the kit's metrics on all {len(RUNS)} runs the notebook never showed: a "
        "chaotic burst day read at its end and halfway, a poison day read an hour later, a replayed dead letter, "
        "and a queue with nothing leased yet."
    )


vitals = Exercise(
    id="07.4",
    title="the vital signs, from the log",
    answer="vital_signs",
    run=_judge,
    hints=(
        "Each number is a question about items, not events: walk the log once and keep, per item, what you "
        "need (when it was enqueued, when it was first leased, how often it was leased, whether it is dead "
        "at now and since when). Events after now did not happen yet.",
        "log.where() gives every event in order; each has .time, .kind ('enqueued', 'leased', "
        "'dead_lettered', 'replayed', ...) and .item_id. Nearest rank: sort the values, take the one at "
        "position ceil(0.95 x n), counting from 1.",
        "Per item, keep its enqueue time, the time of its first lease, its lease count and its state after "
        "each event (a replay makes a dead item ready again). Then the p95 of first lease minus enqueue over "
        "the leased items, the histogram of lease counts over every item, now minus the dead time of the "
        "items still dead, and the leases beyond each item's first over all leases.",
    ),
)
