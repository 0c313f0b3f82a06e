"""Queue health numbers, read from the event log and nothing else.

The queue's own counters say where items are *now*; the questions an operator asks on
burst day are about history: how long did work wait, how often was it delivered again,
how old is the poison in the DLQ, how fast are we finishing. Every one of them can be
answered from the log, so any run (live, simulated, or rebuilt with `EventLog.from_dicts`)
can be measured the same way, after the fact.

Each function makes one pass over the log (O(events)) through `EventLog.rows()`, so a
simulation of 100,000 items is measured in well under a second. Events later than `now=`
are ignored, which turns any log into "the metrics as they stood at time now".

Conventions:
- depth = items ready to be acquired; in flight = items leased (as `InMemoryQueue` counts).
- percentiles are nearest-rank: p95 is the smallest value with at least 95% of the values
  at or below it, so it is always one of the observed values.
- a `series` sample at time t covers everything that happened up to and including t:
  gauges (depth, in flight) are levels after those events, counters (acks) count the
  events in the bucket (t - bucket_seconds, t].
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from shopops_lab import arguments
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import EventKind, EventLog, EventRow
from shopops_lab.states import ItemState

__all__ = ["QueueMetrics", "Series", "Summary", "percentile", "queue_metrics", "series"]

# Members looked up once: reading one off the Enum class, per event, costs ~20x a global (bench_metrics.py).
_READY, _LEASED, _DONE, _DEAD = ItemState.READY, ItemState.LEASED, ItemState.DONE, ItemState.DEAD

# The state an item is in right after each queue event (heartbeats and stale rejections move nothing).
# NACKED and EXPIRED put the item back to ready; when it was the last attempt, the DEAD_LETTERED
# event that follows at the same instant moves it on to dead.
_STATE_AFTER: dict[EventKind, ItemState] = {
    EventKind.ENQUEUED: _READY,
    EventKind.LEASED: _LEASED,
    EventKind.ACKED: _DONE,
    EventKind.NACKED: _READY,
    EventKind.EXPIRED: _READY,
    EventKind.DEAD_LETTERED: _DEAD,
    EventKind.REPLAYED: _READY,
}

_MAX_BUCKETS = 1_000_000


def percentile(sorted_values: list[float], q: float) -> float:
    """The nearest-rank `q`-th percentile (0 < q <= 100) of an ascending, non-empty list."""
    if not isinstance(sorted_values, (list, tuple)) or not all(map(arguments.is_number, sorted_values)):
        raise BadArgumentError(
            field="sorted_values",
            problem=f"is {sorted_values!r}",
            fix="pass an ascending list of numbers, e.g. sorted(latencies)",
        )
    if not sorted_values:
        raise BadArgumentError(
            field="sorted_values", problem="is empty", fix="pass at least one value (Summary.of handles the empty case)"
        )
    arguments.number("q", q, "pass a percentile in (0, 100], e.g. 95", above=0, most=100)
    return nearest_rank(sorted_values, q)


def nearest_rank(sorted_values: list[float], q: float) -> float:
    """`percentile` without its checks, for a hot path that keeps its own sorted, checked
    numbers (the gateway's rolling p95, asked on every poll)."""
    rank = math.ceil(q * len(sorted_values) / 100)  # q * n first: exact for whole-number q
    return sorted_values[max(rank, 1) - 1]


@dataclass(frozen=True, kw_only=True, slots=True)
class Summary:
    """Count, mean, median, p95 and max of some durations (all None when there are none)."""

    count: int
    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: Iterable[float]) -> Summary:
        """The summary of some finite numbers (an empty iterable gives count=0)."""
        given = list(values) if isinstance(values, Iterable) and not isinstance(values, (str, bytes)) else None
        wrong = [v for v in given or () if not (arguments.is_number(v) and -math.inf < v < math.inf)]
        if given is None or wrong:
            problem = f"is {arguments.a(type(values).__name__)}" if given is None else f"holds {wrong[0]!r}"
            raise BadArgumentError(
                field="values", problem=problem, fix="pass finite numbers, e.g. a list of durations in seconds"
            )
        ordered = sorted(given)
        if not ordered:
            return cls(count=0)
        return cls(
            count=len(ordered),
            mean=math.fsum(ordered) / len(ordered),
            p50=nearest_rank(ordered, 50),
            p95=nearest_rank(ordered, 95),
            max=ordered[-1],
        )

    def __str__(self) -> str:
        if not self.count:
            return "n=0"
        return f"n={self.count} mean={self.mean:.4g} p50={self.p50:.4g} p95={self.p95:.4g} max={self.max:.4g}"


@dataclass(frozen=True, kw_only=True, slots=True)
class QueueMetrics:
    """The queue's story up to `now`, as numbers. Build it with `queue_metrics(log)`."""

    now: float  # the time these numbers describe
    start: float  # the time of the first event counted
    enqueued: int
    leases: int  # every acquire, first deliveries and redeliveries alike
    acked: int
    nacked: int
    expirations: int
    stale_rejections: int  # writes refused because a newer token existed
    dead_letters: int  # times an item entered the DLQ (a replayed item can enter again)
    replays: int
    ready: int  # items in each state at `now`
    in_flight: int
    done: int
    dead: int
    time_in_queue: Summary  # per leased item: first lease - enqueue
    attempts: Mapping[int, int]  # leases per item -> how many items (0 = never leased yet), ascending
    redelivery_rate: float  # leases beyond each item's first / all leases (0.0 without leases)
    throughput: float | None  # acks per second over [start, now]; None when no time has passed
    dlq_age: Summary  # per item dead at `now`: now - when it was dead-lettered
    time_to_dlq: Summary  # per dead-lettering: its time - the item's enqueue time

    def __str__(self) -> str:
        histogram = "  ".join(f"{n}:{items}" for n, items in self.attempts.items()) or "-"
        speed = "-" if self.throughput is None else f"{self.throughput:.4g} acks/s"
        rows = [
            ("enqueued", self.enqueued),
            ("leases", self.leases),
            ("acked", self.acked),
            ("nacked", self.nacked),
            ("expirations", self.expirations),
            ("stale rejections", self.stale_rejections),
            ("dead letters", self.dead_letters),
            ("replays", self.replays),
            ("now", f"ready={self.ready} in_flight={self.in_flight} done={self.done} dead={self.dead}"),
            ("time in queue (s)", self.time_in_queue),
            ("attempts histogram", histogram),
            ("redelivery rate", f"{self.redelivery_rate:.4g}"),
            ("throughput", speed),
            ("DLQ age (s)", self.dlq_age),
            ("time to DLQ (s)", self.time_to_dlq),
        ]
        lines = [f"queue metrics from t={self.start:g} to t={self.now:g}"]
        lines += [f"  {name:<20}{value}" for name, value in rows]
        return "\n".join(lines)


@dataclass(frozen=True, kw_only=True, slots=True)
class Series:
    """Samples every `bucket_seconds`, as ascending (t, value) lists ready for plotting."""

    bucket_seconds: float
    depth: list[tuple[float, int]]  # ready items at t
    in_flight: list[tuple[float, int]]  # leased items at t
    acks: list[tuple[float, int]]  # acks in (t - bucket_seconds, t]
    throughput: list[tuple[float, float]]  # the same, per second


def queue_metrics(log: EventLog, *, now: float | None = None) -> QueueMetrics:
    """Measure the queue from its event log, as it stood at `now` (default: the last event)."""
    rows = _rows(log)
    limit = _now(now)
    state: dict[str, ItemState] = {}
    enqueued_at: dict[str, float] = {}
    first_lease: dict[str, float] = {}
    lease_count: dict[str, int] = {}
    dead_at: dict[str, float] = {}
    to_dlq: list[float] = []
    counts = dict.fromkeys(EventKind, 0)
    enqueued, leased, dead_lettered = EventKind.ENQUEUED, EventKind.LEASED, EventKind.DEAD_LETTERED  # per event below
    start: float | None = None
    last = 0.0
    for row in rows:
        time, kind, item_id = row.time, row.kind, row.item_id
        if limit is not None and time > limit:
            continue
        if start is None:
            start = last = time
        elif time > last:
            last = time
        counts[kind] += 1
        target = _STATE_AFTER.get(kind)
        if target is None or item_id is None:
            continue
        state[item_id] = target
        if kind is leased:
            if item_id in lease_count:
                lease_count[item_id] += 1
            else:
                lease_count[item_id] = 1
                first_lease[item_id] = time - enqueued_at.get(item_id, time)
        elif kind is enqueued:
            enqueued_at[item_id] = time
        elif kind is dead_lettered:
            dead_at[item_id] = time
            to_dlq.append(time - enqueued_at.get(item_id, time))
    at = limit if limit is not None else last
    start = at if start is None else start
    levels = dict.fromkeys(ItemState, 0)
    for where in state.values():
        levels[where] += 1
    histogram: dict[int, int] = {}
    for item_id in state:
        n = lease_count.get(item_id, 0)
        histogram[n] = histogram.get(n, 0) + 1
    leases, acked = counts[EventKind.LEASED], counts[EventKind.ACKED]
    elapsed = at - start
    return QueueMetrics(
        now=at,
        start=start,
        enqueued=counts[EventKind.ENQUEUED],
        leases=leases,
        acked=acked,
        nacked=counts[EventKind.NACKED],
        expirations=counts[EventKind.EXPIRED],
        stale_rejections=counts[EventKind.STALE_REJECTED],
        dead_letters=counts[EventKind.DEAD_LETTERED],
        replays=counts[EventKind.REPLAYED],
        ready=levels[_READY],
        in_flight=levels[_LEASED],
        done=levels[_DONE],
        dead=levels[_DEAD],
        time_in_queue=Summary.of(first_lease.values()),
        attempts=MappingProxyType(dict(sorted(histogram.items()))),
        redelivery_rate=(leases - len(lease_count)) / leases if leases else 0.0,
        throughput=acked / elapsed if elapsed > 0 else None,
        dlq_age=Summary.of(at - dead_at[i] for i, where in state.items() if where is _DEAD),
        time_to_dlq=Summary.of(to_dlq),
    )


def series(log: EventLog, bucket_seconds: float, *, now: float | None = None) -> Series:
    """Depth, in-flight leases, acks and throughput sampled every `bucket_seconds`.

    Samples sit on multiples of `bucket_seconds`, from the last one at or before the first
    event to the first one at or after `now` (default: the last event)."""
    arguments.seconds("bucket_seconds", bucket_seconds, "pass a positive number of seconds per sample, e.g. 10")
    rows = _rows(log)
    limit = _now(now)
    width = float(bucket_seconds)
    kept = [row for row in rows if limit is None or row.time <= limit]
    if not kept:
        return Series(bucket_seconds=width, depth=[], in_flight=[], acks=[], throughput=[])
    first = min(row.time for row in kept)
    end = limit if limit is not None else max(row.time for row in kept)
    origin = math.floor(first / width) * width
    buckets = _bucket(end, origin, width) + 1
    if buckets > _MAX_BUCKETS:
        raise BadArgumentError(
            field="bucket_seconds",
            problem=f"is {bucket_seconds!r}, which makes {buckets:,} samples between t={first:g} and t={end:g}",
            fix=f"pass a bigger bucket (at most {_MAX_BUCKETS:,} samples)",
        )
    d_ready, d_leased, acks = [0] * buckets, [0] * buckets, [0] * buckets
    state: dict[str, ItemState] = {}
    for row in kept:
        target = _STATE_AFTER.get(row.kind)
        item_id = row.item_id
        if target is None or item_id is None:
            continue
        k = _bucket(row.time, origin, width)
        source = state.get(item_id)
        state[item_id] = target
        if source is _READY:
            d_ready[k] -= 1
        elif source is _LEASED:
            d_leased[k] -= 1
        if target is _READY:
            d_ready[k] += 1
        elif target is _LEASED:
            d_leased[k] += 1
        elif target is _DONE:
            acks[k] += 1
    times = [origin + k * width for k in range(buckets)]
    return Series(
        bucket_seconds=width,
        depth=list(zip(times, _running(d_ready))),
        in_flight=list(zip(times, _running(d_leased))),
        acks=list(zip(times, acks)),
        throughput=[(t, n / width) for t, n in zip(times, acks)],
    )


def _rows(log: EventLog) -> Iterator[EventRow]:
    if not isinstance(log, EventLog):
        raise BadArgumentError(
            field="log", problem=f"is a {type(log).__name__}", fix="pass an EventLog, e.g. queue.log"
        )
    return log.rows()


def _now(now: float | None) -> float | None:
    if now is None:
        return None
    return arguments.moment("now", now, "pass the time to measure at, in seconds, or leave it out for the last event")


def _bucket(time: float, origin: float, width: float) -> int:
    """The first sample at or after `time`, guarded against float rounding near a boundary."""
    k = max(math.ceil((time - origin) / width), 0)
    if origin + k * width < time:
        k += 1
    elif k > 0 and origin + (k - 1) * width >= time:
        k -= 1
    return k


def _running(deltas: list[int]) -> list[int]:
    total, levels = 0, []
    for delta in deltas:
        total += delta
        levels.append(total)
    return levels
