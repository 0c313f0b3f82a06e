"""Matplotlib plots of a run, read from its event log: queue depth, gateway p95,
throughput and the attempts histogram, with fault periods shaded.

The numbers come from `shopops_lab.metrics` (one definition of depth, throughput and
attempts for the whole kit); gateway p95 per bucket and the fault periods are read here.
They are drawn on a `PlotFigure`: a matplotlib `Figure` built directly on the Agg
canvas. No pyplot: nothing global is touched, the notebook's backend stays as it was,
and a returned figure is displayed once, as the cell's value, through its own
`_repr_png_`, which (like `png_bytes`) renders at a fixed size and dpi without the
"Software" stamp, so two renders give the same bytes.

Fault periods come from `faults=[(start, end, label), ...]`, or, when not given, from
the log: see `fault_periods`.
"""
from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from shopops_lab import metrics
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import EventKind, EventLog

__all__ = ["FaultPeriod", "PlotFigure", "attempts_plot", "dashboard", "depth_plot", "fault_periods",
           "latency_plot", "p95_series", "png_bytes", "throughput_plot"]

FaultPeriod = tuple[float, float, str]
"""(start, end, label): a period to shade, e.g. (900, 1800, "gateway spike")."""

SIZE = (7.0, 3.0)
DPI = 100


class PlotFigure(Figure):
    """A matplotlib Figure that shows itself in a notebook as deterministic PNG."""

    def _repr_png_(self) -> bytes:
        return png_bytes(self)

    def __repr__(self) -> str:
        width, height = self.get_size_inches()
        return f"<PlotFigure {width:g}x{height:g} in, {len(self.axes)} axes>"


# ---------------------------------------------------------------------------- series
def p95_series(log: EventLog, bucket: float | None = None) -> list[tuple[float, float, int]]:
    """(t, p95 latency, calls) for each bucket (t - bucket, t] holding GATEWAY_CALL events,
    the way `metrics.series` samples; p95 is nearest-rank (`metrics.percentile`)."""
    rows = _rows(log)
    calls = [(row[0], float(seconds)) for row in rows
             if row[1] is EventKind.GATEWAY_CALL and (seconds := _latency(row[7])) is not None]
    if not calls:
        return []
    size = _bucket(bucket, rows)
    groups: dict[int, list[float]] = {}
    for t, seconds in calls:
        groups.setdefault(math.ceil(t / size - 1e-9), []).append(seconds)
    return [(key * size, metrics.percentile(sorted(values), 95), len(values))
            for key, values in sorted(groups.items())]


def fault_periods(log: EventLog) -> list[FaultPeriod]:
    """Periods of faults that hit the whole system for a while (a gateway spike): a
    FAULT_INJECTED event naming no worker and no delivery `point` opens one, and the
    same fault's `phase="over"` event (or the log's end) closes it. Faults that strike
    one worker or one delivery are instants; the timeline shows those."""
    rows = _rows(log)
    periods: list[FaultPeriod] = []
    open_: dict[str, float] = {}
    for time, kind, _item, _case, worker, _token, _attempt, info in rows:
        if (kind is not EventKind.FAULT_INJECTED or worker is not None or info.get("point")
                or not info.get("fault")):
            continue
        name = str(info["fault"])
        if info.get("phase") == "over":
            if name in open_:
                periods.append((open_.pop(name), time, name.replace("_", " ")))
        else:
            open_.setdefault(name, time)
    end = rows[-1][0] if rows else 0.0
    periods.extend((start, end, name.replace("_", " ")) for name, start in open_.items())
    return sorted(periods)


# ---------------------------------------------------------------------------- figures
def depth_plot(log: EventLog, *, faults: Sequence[FaultPeriod] | None = None) -> PlotFigure:
    """Items ready (the queue depth) and leased (in flight) over time."""
    log = _log(log)
    fig, (ax,) = _figure(1)
    _draw_depth(ax, log, _faults(faults, log))
    return fig


def latency_plot(log: EventLog, *, bucket: float | None = None,
                 budget: float | None = None, faults: Sequence[FaultPeriod] | None = None) -> PlotFigure:
    """Gateway p95 latency per time bucket, with the budget as a dashed line if given."""
    log = _log(log)
    fig, (ax,) = _figure(1)
    _draw_latency(ax, log, bucket, budget, _faults(faults, log))
    return fig


def throughput_plot(log: EventLog, *, bucket: float | None = None,
                    faults: Sequence[FaultPeriod] | None = None) -> PlotFigure:
    """Acks per time bucket."""
    log = _log(log)
    fig, (ax,) = _figure(1)
    _draw_throughput(ax, log, bucket, _faults(faults, log))
    return fig


def attempts_plot(log: EventLog) -> PlotFigure:
    """How many deliveries each item has had (`metrics.queue_metrics(log).attempts`)."""
    log = _log(log)
    fig, (ax,) = _figure(1)
    _draw_attempts(ax, log)
    return fig


def dashboard(log: EventLog, *, bucket: float | None = None,
              budget: float | None = None, faults: Sequence[FaultPeriod] | None = None) -> PlotFigure:
    """All four plots on one 2x2 figure."""
    log = _log(log)
    periods = _faults(faults, log)
    fig, axes = _figure(4, size=(11.0, 6.5))
    _draw_depth(axes[0], log, periods)
    _draw_latency(axes[1], log, bucket, budget, periods)
    _draw_throughput(axes[2], log, bucket, periods)
    _draw_attempts(axes[3], log)
    return fig


def png_bytes(fig: Figure, *, dpi: int = DPI) -> bytes:
    """The figure as PNG bytes, identical across renders (fixed dpi, no version stamp)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


# ---------------------------------------------------------------------------- drawing
def _figure(panels: int, *, size: tuple[float, float] = SIZE) -> tuple[PlotFigure, list[Any]]:
    fig = PlotFigure(figsize=size, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2).ravel().tolist() if panels == 4 else [fig.subplots()]
    return fig, axes


def _draw_depth(ax: Any, log: EventLog, faults: list[FaultPeriod]) -> None:
    ax.set_title("queue depth")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("items")
    rows = _rows(log)
    if not rows:
        _no_data(ax)
        return
    sampled = metrics.series(log, _bucket(None, rows, buckets=200))  # fine steps: depth is a level
    for points, label, color in ((sampled.depth, "ready (depth)", "#1f77b4"),
                                 (sampled.in_flight, "leased (in flight)", "#ff7f0e")):
        ax.step([t for t, _ in points], [n for _, n in points], where="post", label=label, color=color,
                linewidth=1.4)
    ax.set_ylim(bottom=0)
    _shade(ax, faults)
    ax.legend(loc="upper right", fontsize=8)


def _draw_latency(ax: Any, log: EventLog, bucket: float | None, budget: float | None,
                  faults: list[FaultPeriod]) -> None:
    rows = p95_series(log, bucket)
    ax.set_title("gateway p95 latency")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("p95 latency (s)")
    if not rows:
        _no_data(ax)
        return
    ax.plot([r[0] for r in rows], [r[1] for r in rows], marker=".", color="#9467bd", linewidth=1.4, label="p95")
    if budget is not None:
        ax.axhline(_number("budget", budget), color="#d62728", linestyle="--", linewidth=1, label="budget")
    ax.set_ylim(bottom=0)
    _shade(ax, faults)
    ax.legend(loc="upper right", fontsize=8)


def _draw_throughput(ax: Any, log: EventLog, bucket: float | None, faults: list[FaultPeriod]) -> None:
    ax.set_title("throughput")
    ax.set_xlabel("time (s)")
    rows = _rows(log)
    if not rows:
        ax.set_ylabel("acks")
        _no_data(ax)
        return
    size = _bucket(bucket, rows)
    acks = metrics.series(log, size).acks
    ax.set_ylabel(f"acks per {size:g} s")
    ax.step([t for t, _ in acks], [n for _, n in acks], where="pre", color="#2ca02c", linewidth=1.4)
    ax.set_ylim(bottom=0)
    _shade(ax, faults)


def _draw_attempts(ax: Any, log: EventLog) -> None:
    histogram = metrics.queue_metrics(log).attempts
    ax.set_title("attempts histogram")
    ax.set_xlabel("deliveries per item (0: not yet leased)")
    ax.set_ylabel("items")
    if not histogram:
        _no_data(ax)
        return
    keys = list(histogram)
    bars = ax.bar(keys, [histogram[k] for k in keys], color=["#bbbbbb" if k == 0 else "#1f77b4" for k in keys])
    ax.bar_label(bars, fontsize=8)  # small counts (the retried few) stay readable next to the many
    ax.set_xticks(keys)


def _shade(ax: Any, faults: list[FaultPeriod]) -> None:
    for start, end, label in faults:
        ax.axvspan(start, max(end, start + 1e-9), color="#d62728", alpha=0.12, linewidth=0)
        ax.annotate(label, xy=(start, 1), xycoords=("data", "axes fraction"), xytext=(2, -10),
                    textcoords="offset points", fontsize=8, color="#a01010")


def _no_data(ax: Any) -> None:
    ax.text(0.5, 0.5, "no data yet", transform=ax.transAxes, ha="center", va="center", color="#666")


# ---------------------------------------------------------------------------- inputs
def _log(log: Any) -> EventLog:
    if isinstance(log, EventLog):
        return log
    if isinstance(getattr(log, "log", None), EventLog):  # a queue, a simulation...
        return log.log
    raise BadArgumentError(field="log", problem=f"is a {type(log).__name__}",
                           fix="pass an EventLog, e.g. depth_plot(queue.log)")


def _rows(log: EventLog) -> list[tuple]:
    return list(_log(log).rows())


def _latency(info: Any) -> float | None:
    """A gateway call's duration: `seconds` (the gateway's key) or `latency`."""
    value = info.get("seconds", info.get("latency"))
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else value


def _faults(faults: Sequence[FaultPeriod] | None, log: EventLog) -> list[FaultPeriod]:
    if faults is None:
        return fault_periods(log)
    periods = []
    for fault in faults:
        ok = (isinstance(fault, (tuple, list)) and len(fault) == 3 and isinstance(fault[2], str)
              and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in fault[:2])
              and fault[0] <= fault[1])
        if not ok:
            raise BadArgumentError(field="faults", problem=f"has {fault!r}",
                                   fix="pass (start, end, label) tuples with start <= end, "
                                       "e.g. faults=[(900, 1800, 'gateway spike')]")
        periods.append((float(fault[0]), float(fault[1]), fault[2]))
    return periods


def _number(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadArgumentError(field=field, problem=f"is {value!r}", fix="pass a number of seconds")
    return float(value)


def _bucket(bucket: float | None, rows: list[tuple], *, buckets: int = 40) -> float:
    """The bucket width: as given, or a round number giving about `buckets` over the log."""
    if bucket is not None:
        if _number("bucket", bucket) <= 0:
            raise BadArgumentError(field="bucket", problem=f"is {bucket!r}", fix="pass a positive number of seconds")
        return float(bucket)
    times = [row[0] for row in rows]
    raw = max(max(times) - min(times), 1.0) / buckets
    power = 10 ** math.floor(math.log10(raw))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= raw))
