"""Plots of a run, read from its event log: queue depth, gateway p95, throughput and
the attempts histogram, with fault periods shaded.

The numbers come from `shopops_lab.metrics` (one definition of depth, throughput and
attempts for the whole kit); gateway p95 per bucket and the fault periods are read here.
Each plot is first a list of `Panel`s (plain data), then drawn by matplotlib as a
`PlotFigure` (see `shopops_lab.viz._mpl`), or, where matplotlib is missing (the offline
JupyterLite site), as the kit's own SVG sketch with one line saying the full plot needs
the online site (`shopops_lab.viz.sketch`).

Fault periods come from `faults=[(start, end, label), ...]`, or, when not given, from
the log: see `fault_periods`.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from typing import Any

from shopops_lab import arguments, metrics
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import EventKind, EventLog, EventRow
from shopops_lab.viz.panels import FaultPeriod, Panel, Series

__all__ = [
    "FaultPeriod",
    "attempts_plot",
    "dashboard",
    "depth_plot",
    "fault_periods",
    "latency_plot",
    "p95_series",
    "png_bytes",
    "throughput_plot",
]

SIZE = (7.0, 3.0)
BOARD_SIZE = (11.0, 6.5)


def png_bytes(figure: Any) -> bytes:
    """A matplotlib plot of this module as PNG bytes, identical across renders. Needs
    matplotlib, so it is imported here, on use: the module itself imports (and sketches)
    without it."""
    from shopops_lab.viz import _mpl

    return _mpl.png_bytes(figure)


# ---------------------------------------------------------------------------- series
def p95_series(log: EventLog, bucket: float | None = None) -> list[tuple[float, float, int]]:
    """(t, p95 latency, calls) for each bucket (t - bucket, t] holding GATEWAY_CALL events,
    the way `metrics.series` samples; p95 is nearest-rank (`metrics.percentile`)."""
    rows = _rows(log)
    calls = [
        (row.time, float(seconds))
        for row in rows
        if row.kind is EventKind.GATEWAY_CALL and (seconds := _latency(row.info)) is not None
    ]
    if not calls:
        return []
    size = _bucket(bucket, rows)
    groups: dict[int, list[float]] = {}
    for t, seconds in calls:
        groups.setdefault(math.ceil(t / size - 1e-9), []).append(seconds)
    return [(key * size, metrics.percentile(sorted(values), 95), len(values)) for key, values in sorted(groups.items())]


def fault_periods(log: EventLog) -> list[FaultPeriod]:
    """Periods of faults that hit the whole system for a while (a gateway spike): a
    FAULT_INJECTED event naming no worker and no delivery `point` opens one, and the
    same fault's `phase="over"` event (or the log's end) closes it. Faults that strike
    one worker or one delivery are instants; the timeline shows those."""
    rows = _rows(log)
    periods: list[FaultPeriod] = []
    open_: dict[str, float] = {}
    for row in rows:
        info = row.info
        if (
            row.kind is not EventKind.FAULT_INJECTED
            or row.worker_id is not None
            or info.get("point")
            or not info.get("fault")
        ):
            continue
        name = str(info["fault"])
        if info.get("phase") == "over":
            if name in open_:
                periods.append((open_.pop(name), row.time, name.replace("_", " ")))
        else:
            open_.setdefault(name, row.time)
    end = rows[-1].time if rows else 0.0
    periods.extend((start, end, name.replace("_", " ")) for name, start in open_.items())
    return sorted(periods)


# ---------------------------------------------------------------------------- figures
def depth_plot(log: EventLog, *, faults: Sequence[FaultPeriod] | None = None) -> Any:
    """Items ready (the queue depth) and leased (in flight) over time."""
    log = _log(log)
    return _draw([_depth_panel(log, _faults(faults, log))], title="queue depth")


def latency_plot(
    log: EventLog,
    *,
    bucket: float | None = None,
    budget: float | None = None,
    faults: Sequence[FaultPeriod] | None = None,
) -> Any:
    """Gateway p95 latency per time bucket, with the budget as a dashed line if given."""
    log = _log(log)
    return _draw([_latency_panel(log, bucket, budget, _faults(faults, log))], title="gateway p95 latency")


def throughput_plot(log: EventLog, *, bucket: float | None = None, faults: Sequence[FaultPeriod] | None = None) -> Any:
    """Acks per time bucket."""
    log = _log(log)
    return _draw([_throughput_panel(log, bucket, _faults(faults, log))], title="throughput")


def attempts_plot(log: EventLog) -> Any:
    """How many deliveries each item has had (`metrics.queue_metrics(log).attempts`)."""
    return _draw([_attempts_panel(_log(log))], title="attempts histogram")


def dashboard(
    log: EventLog,
    *,
    bucket: float | None = None,
    budget: float | None = None,
    faults: Sequence[FaultPeriod] | None = None,
) -> Any:
    """All four plots on one 2x2 figure."""
    log = _log(log)
    periods = _faults(faults, log)
    panels = [
        _depth_panel(log, periods),
        _latency_panel(log, bucket, budget, periods),
        _throughput_panel(log, bucket, periods),
        _attempts_panel(log),
    ]
    return _draw(panels, title="dashboard", size=BOARD_SIZE)


def _draw(panels: list[Panel], *, title: str, size: tuple[float, float] = SIZE) -> Any:
    """A matplotlib `PlotFigure`, or the kit's SVG sketch where matplotlib is missing."""
    try:
        mpl = importlib.import_module("shopops_lab.viz._mpl")
    except ImportError:
        from shopops_lab.viz import sketch

        return sketch.sketch(panels, title=title, size=size)
    return mpl.figure(panels, size=size, title=title)


# ---------------------------------------------------------------------------- panels
def _depth_panel(log: EventLog, faults: list[FaultPeriod]) -> Panel:
    rows = _rows(log)
    panel = Panel(title="queue depth", xlabel="time (s)", ylabel="items", faults=tuple(faults), legend=True)
    if not rows:
        return panel
    sampled = metrics.series(log, _bucket(None, rows, buckets=200))  # fine steps: depth is a level
    return panel.with_series(
        *(
            Series(label=label, points=tuple(points), color=color, step="post")
            for points, label, color in (
                (sampled.depth, "ready (depth)", "#1f77b4"),
                (sampled.in_flight, "leased (in flight)", "#ff7f0e"),
            )
        )
    )


def _latency_panel(log: EventLog, bucket: float | None, budget: float | None, faults: list[FaultPeriod]) -> Panel:
    rows = p95_series(log, bucket)
    limit = None if budget is None else arguments.finite("budget", budget, "pass a number of seconds")
    panel = Panel(
        title="gateway p95 latency",
        xlabel="time (s)",
        ylabel="p95 latency (s)",
        faults=tuple(faults),
        budget=limit,
        legend=True,
    )
    if not rows:
        return panel
    return panel.with_series(
        Series(label="p95", points=tuple((r[0], r[1]) for r in rows), color="#9467bd", marker=True)
    )


def _throughput_panel(log: EventLog, bucket: float | None, faults: list[FaultPeriod]) -> Panel:
    rows = _rows(log)
    if not rows:
        return Panel(title="throughput", xlabel="time (s)", ylabel="acks", faults=tuple(faults))
    size = _bucket(bucket, rows)
    acks = metrics.series(log, size).acks
    return Panel(
        title="throughput",
        xlabel="time (s)",
        ylabel=f"acks per {size:g} s",
        faults=tuple(faults),
        series=(Series(label="acks", points=tuple(acks), color="#2ca02c", step="pre"),),
    )


def _attempts_panel(log: EventLog) -> Panel:
    histogram = metrics.queue_metrics(log).attempts
    return Panel(
        title="attempts histogram",
        xlabel="deliveries per item (0: not yet leased)",
        ylabel="items",
        bars=tuple((k, histogram[k], "#bbbbbb" if k == 0 else "#1f77b4") for k in histogram),
    )


# ---------------------------------------------------------------------------- inputs
def _log(log: Any) -> EventLog:
    if isinstance(log, EventLog):
        return log
    if isinstance(getattr(log, "log", None), EventLog):  # a queue, a simulation...
        return log.log
    raise BadArgumentError(
        field="log", problem=f"is a {type(log).__name__}", fix="pass an EventLog, e.g. depth_plot(queue.log)"
    )


def _rows(log: EventLog) -> list[EventRow]:
    return list(_log(log).rows())


def _latency(info: Any) -> float | None:
    """A gateway call's duration: `seconds` (the gateway's key) or `latency`."""
    value = info.get("seconds", info.get("latency"))
    return value if arguments.is_number(value) else None


def _faults(faults: Sequence[FaultPeriod] | None, log: EventLog) -> list[FaultPeriod]:
    if faults is None:
        return fault_periods(log)
    periods = []
    for fault in faults:
        ok = (
            isinstance(fault, (tuple, list))
            and len(fault) == 3
            and isinstance(fault[2], str)
            and all(map(arguments.is_number, fault[:2]))
            and fault[0] <= fault[1]
        )
        if not ok:
            raise BadArgumentError(
                field="faults",
                problem=f"has {fault!r}",
                fix="pass (start, end, label) tuples with start <= end, e.g. faults=[(900, 1800, 'gateway spike')]",
            )
        periods.append((float(fault[0]), float(fault[1]), fault[2]))
    return periods


def _bucket(bucket: float | None, rows: list[EventRow], *, buckets: int = 40) -> float:
    """The bucket width: as given, or a round number giving about `buckets` over the log."""
    if bucket is not None:
        arguments.finite("bucket", bucket, "pass a number of seconds")
        return arguments.number("bucket", bucket, "pass a positive number of seconds", above=0)
    times = [row.time for row in rows]
    raw = max(max(times) - min(times), 1.0) / buckets
    power = 10 ** math.floor(math.log10(raw))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= raw))
