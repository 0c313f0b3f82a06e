"""Panels drawn by matplotlib, on a `PlotFigure`: a `Figure` built directly on the Agg
canvas. No pyplot: nothing global is touched, the notebook's backend stays as it was,
and a returned figure is displayed once, as the cell's value, through its own
`_repr_png_`, which (like `png_bytes`) renders at a fixed size and dpi without the
"Software" stamp, so two renders give the same bytes.

Imported only when a plot is drawn: `shopops_lab.viz.plots` works without matplotlib.
"""

from __future__ import annotations

import io
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from shopops_lab.viz import _svg
from shopops_lab.viz.panels import Panel, describe

__all__ = ["DPI", "PlotFigure", "figure", "png_bytes"]

DPI = 100


class PlotFigure(Figure):
    """A matplotlib Figure that shows itself in a notebook as deterministic PNG, and as an
    <img> carrying `alt`, the plot in words, which a screen reader announces (a PNG output
    alone is shown without alt text)."""

    alt = ""

    def _repr_png_(self) -> bytes:
        return png_bytes(self)

    def _repr_html_(self) -> str:
        width, height = self.get_size_inches()
        return _svg.png_image(png_bytes(self), alt=self.alt, width=width * DPI, height=height * DPI)

    def __repr__(self) -> str:
        width, height = self.get_size_inches()
        return f"<PlotFigure {width:g}x{height:g} in, {len(self.axes)} axes>"


def figure(panels: list[Panel], *, size: tuple[float, float], title: str = "plot") -> PlotFigure:
    """One panel on its own, or four on a 2x2 grid; `title` heads its alt text."""
    fig = PlotFigure(figsize=size, dpi=DPI, layout="constrained")
    fig.alt = describe(panels, title=title)
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2).ravel().tolist() if len(panels) == 4 else [fig.subplots()]
    for ax, panel in zip(axes, panels):
        _draw(ax, panel)
    return fig


def png_bytes(fig: Figure, *, dpi: int = DPI) -> bytes:
    """The figure as PNG bytes, identical across renders (fixed dpi, no version stamp)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


def _draw(ax: Any, panel: Panel) -> None:
    ax.set_title(panel.title)
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    if panel.empty:
        ax.text(0.5, 0.5, "no data yet", transform=ax.transAxes, ha="center", va="center", color="#666")
        return
    for line in panel.series:
        xs, ys = [x for x, _ in line.points], [y for _, y in line.points]
        if line.step:
            ax.step(xs, ys, where=line.step, label=line.label, color=line.color, linewidth=1.4)
        else:
            ax.plot(xs, ys, marker="." if line.marker else None, color=line.color, linewidth=1.4, label=line.label)
    if panel.bars:
        keys = [x for x, _, _ in panel.bars]
        bars = ax.bar(keys, [h for _, h, _ in panel.bars], color=[c for _, _, c in panel.bars])
        ax.bar_label(bars, fontsize=8)  # small counts (the retried few) stay readable next to the many
        ax.set_xticks(keys)
    if panel.budget is not None:
        ax.axhline(panel.budget, color="#d62728", linestyle="--", linewidth=1, label="budget")
    if panel.series:
        ax.set_ylim(bottom=0)
    for start, end, label in panel.faults:
        ax.axvspan(start, max(end, start + 1e-9), color="#d62728", alpha=0.12, linewidth=0)
        ax.annotate(
            label,
            xy=(start, 1),
            xycoords=("data", "axes fraction"),
            xytext=(2, -10),
            textcoords="offset points",
            fontsize=8,
            color="#a01010",
        )
    if panel.legend:
        ax.legend(loc="upper right", fontsize=8)
