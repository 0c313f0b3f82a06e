"""What a plot shows, as plain data: the panels of `shopops_lab.viz.plots`.

A `Panel` holds the numbers and words of one chart (lines, bars, a budget line, shaded
fault periods), so matplotlib (`viz._mpl`) and the kit's own SVG sketch (`viz.sketch`)
draw the same thing, and neither computes anything itself.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["FaultPeriod", "Panel", "Series"]

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
