"""What a plot shows, as plain data: the panels of `shopops_lab.viz.plots`.

A `Panel` holds the numbers and words of one chart (lines, bars, a budget line, shaded
fault periods), so matplotlib (`viz._mpl`) and the kit's own SVG sketch (`viz.sketch`)
draw the same thing, and neither computes anything itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["FaultPeriod", "Panel", "Series", "describe"]

FaultPeriod = tuple[float, float, str]
"""(start, end, label): a period to shade, e.g. (900, 1800, "gateway spike")."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Series:
    """One line: (x, y) points; `step` "post"/"pre" draws a level that holds until the
    next point ("post") or since the previous one ("pre"); None joins the points."""

    label: str
    points: tuple[tuple[float, float], ...]
    color: str
    step: str | None = None
    marker: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Panel:
    """One chart. `bars` are (x, height, color); a panel with no series and no bars
    says "no data yet"."""

    title: str
    xlabel: str
    ylabel: str
    series: tuple[Series, ...] = ()
    bars: tuple[tuple[int, int, str], ...] = ()
    budget: float | None = None
    faults: tuple[FaultPeriod, ...] = ()
    legend: bool = False

    @property
    def empty(self) -> bool:
        return not self.series and not self.bars

    def with_series(self, *series: Series) -> Panel:
        return replace(self, series=series)


def describe(panels: list[Panel] | tuple[Panel, ...], *, title: str) -> str:
    """The plot in words, for its alt text: per panel, what is plotted against what, each
    line's range and peak, the bars' counts, the budget and the shaded periods."""
    return f"{title}: " + " ".join(_sentence(panel) for panel in panels)


def _sentence(panel: Panel) -> str:
    parts = [f"{panel.title}, {panel.ylabel} against {panel.xlabel}"]
    if panel.empty:
        parts.append("no data yet")
    for line in panel.series:
        if not line.points:
            continue
        peak_x, peak_y = max(line.points, key=lambda point: point[1])
        parts.append(
            f"{line.label} from {_n(line.points[0][0])} to {_n(line.points[-1][0])}, "
            f"highest {_n(peak_y)} at {_n(peak_x)}, last {_n(line.points[-1][1])}"
        )
    if panel.bars:
        parts.append("bars " + ", ".join(f"{x}: {_n(height)}" for x, height, _ in panel.bars))
    if panel.budget is not None:
        parts.append(f"budget line at {_n(panel.budget)}")
    parts += [f"shaded {label} from {_n(start)} to {_n(end)}" for start, end, label in panel.faults]
    return "; ".join(parts) + "."


def _n(value: float) -> str:
    """A number as a reader says it: whole numbers with thousands separators, others to one decimal."""
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:,.1f}"
