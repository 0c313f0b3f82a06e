"""Plots without matplotlib: the kit's own SVG sketch of the same panels.

The offline JupyterLite site has no matplotlib (Pyodide's core has none and PyPI has no
build for the browser), so a lab's plots are drawn here instead: the same lines, bars,
budget line and shaded fault periods, with plain axes (each labelled at zero and at its
largest value) and one line saying the full plot needs the online site. Like every
picture of the kit, the same panels give the same bytes.
"""

from __future__ import annotations

from shopops_lab.viz import _svg
from shopops_lab.viz.dot import Diagram
from shopops_lab.viz.panels import Panel, Series, describe

__all__ = ["NOTE", "sketch"]

NOTE = (
    "A sketch drawn by the kit: matplotlib is not available here. The full plot needs the online site (or JupyterLab)."
)
_PX_PER_INCH = 100
_PAD_LEFT, _PAD_RIGHT, _PAD_TOP, _PAD_BOTTOM = 56.0, 16.0, 30.0, 40.0
_NOTE_HEIGHT = 24.0
_FAULT = "#d62728"


def sketch(panels: list[Panel], *, title: str, size: tuple[float, float]) -> Diagram:
    """One panel, or four on a 2x2 grid, at `size` inches (like the matplotlib figure)."""
    width, height = size[0] * _PX_PER_INCH, size[1] * _PX_PER_INCH
    columns = 2 if len(panels) == 4 else 1
    rows = (len(panels) + columns - 1) // columns
    cell_w, cell_h = width / columns, (height - _NOTE_HEIGHT) / rows
    body = [_svg.text(8, 16, NOTE, size=12, anchor="start", fill="#b35900", cls="note")]
    for n, panel in enumerate(panels):
        left, top = (n % columns) * cell_w, _NOTE_HEIGHT + (n // columns) * cell_h
        body.extend(_panel(panel, left, top, cell_w, cell_h))
    return Diagram(
        title=title,
        svg=_svg.document(width, height, body, label=title, desc=describe(panels, title=title)),
        engine="builtin",
        note=NOTE,
    )


def _panel(panel: Panel, left: float, top: float, width: float, height: float) -> list[str]:
    x0, x1 = left + _PAD_LEFT, left + width - _PAD_RIGHT
    y0, y1 = top + height - _PAD_BOTTOM, top + _PAD_TOP  # y0: the axis (value 0); y1: the top
    out = [
        '<g class="panel">',
        _svg.text((x0 + x1) / 2, top + 18, panel.title, size=13, weight="bold"),
        _svg.text((x0 + x1) / 2, y0 + 32, panel.xlabel, size=11, fill="#444"),
        f'<text x="0" y="0" font-size="11" text-anchor="middle" fill="#444" class="ylabel" '
        f'transform="translate({_svg.num(left + 16)} {_svg.num((y0 + y1) / 2)}) rotate(-90)">'
        f"{_svg.esc(panel.ylabel)}</text>",
        _svg.rect(x0, y1, x1 - x0, y0 - y1, fill="none", stroke="#999"),
    ]
    if panel.empty:
        out += [_svg.text((x0 + x1) / 2, (y0 + y1) / 2, "no data yet", size=12, fill="#666"), "</g>"]
        return out
    xs = [x for line in panel.series for x, _ in line.points] + [x for x, _, _ in panel.bars]
    xs += [t for start, end, _ in panel.faults for t in (start, end)]
    ys = [y for line in panel.series for _, y in line.points] + [h for _, h, _ in panel.bars]
    ys += [] if panel.budget is None else [panel.budget]
    bar_pad = 0.5 if panel.bars else 0.0
    lo, hi = min(xs) - bar_pad, max(xs) + bar_pad
    top_value = max(max(ys), 1e-9)

    def px(x: float) -> float:
        return x0 + (x - lo) / ((hi - lo) or 1.0) * (x1 - x0)

    def py(y: float) -> float:
        return y0 - y / top_value * (y0 - y1)

    for start, end, label in panel.faults:
        out.append(
            _svg.rect(px(start), y1, max(px(end) - px(start), 1), y0 - y1, fill=_FAULT, fill_opacity=0.12, cls="fault")
        )
        out.append(_svg.text(px(start) + 3, y1 + 12, label, size=10, anchor="start", fill="#a01010"))
    for x, value, color in panel.bars:
        bar_w = (x1 - x0) / max(len(panel.bars) * 1.5, 1)
        out.append(_svg.rect(px(x) - bar_w / 2, py(value), bar_w, y0 - py(value), fill=color, cls="bar"))
        out.append(_svg.text(px(x), py(value) - 3, value, size=10))
        out.append(_svg.text(px(x), y0 + 14, x, size=10, fill="#444"))
    for line in panel.series:
        out.append(
            _svg.polyline(
                [(px(x), py(y)) for x, y in _stepped(line)],
                fill="none",
                stroke=line.color,
                stroke_width=1.5,
                cls="line",
            )
        )
    if panel.budget is not None:
        out.append(
            _svg.line(x0, py(panel.budget), x1, py(panel.budget), stroke=_FAULT, stroke_dasharray="6 4", cls="budget")
        )
    out += [
        _svg.text(x0 - 4, y0 + 4, 0, size=10, anchor="end", fill="#444"),
        _svg.text(x0 - 4, y1 + 10, _round(top_value), size=10, anchor="end", fill="#444"),
    ]
    if not panel.bars:
        out += [
            _svg.text(x0, y0 + 14, _round(lo), size=10, fill="#444"),
            _svg.text(x1, y0 + 14, _round(hi), size=10, fill="#444"),
        ]
    if panel.legend:
        entries = [(line.label, line.color) for line in panel.series]
        entries += [] if panel.budget is None else [("budget", _FAULT)]
        for i, (label, color) in enumerate(entries):
            out.append(_svg.text(x1 - 6, y1 + 14 + 14 * i, label, size=10, anchor="end", fill=color))
    out.append("</g>")
    return out


def _stepped(line: Series) -> list[tuple[float, float]]:
    """The corners a step line passes through ("post": hold, then jump; "pre": jump, then hold)."""
    points = list(line.points)
    if not line.step or len(points) < 2:
        return points
    corners = [points[0]]
    for (xa, ya), (xb, yb) in zip(points, points[1:]):
        corners += [(xb, ya), (xb, yb)] if line.step == "post" else [(xa, yb), (xb, yb)]
    return corners


def _round(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 10 else f"{value:.3g}"
