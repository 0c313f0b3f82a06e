"""The crash explorer's findings as a picture: one column per runner, one box per crash
point in the order a run reaches them, red where a restart from that point broke a
promise, and on each arrow the action that separates two points (write the intent, send
the email, write the checkpoint...). Drawn in pure SVG, so it looks the same everywhere,
JupyterLite included. It reads a report's fields and imports nothing from the explorer."""

from __future__ import annotations

from typing import Any

from shopops_lab.errors import BadArgumentError
from shopops_lab.viz import _svg
from shopops_lab.viz.dot import Diagram

__all__ = ["crash_map"]

COLUMN, BOX, BROKEN_BOX, GAP, MARGIN, HEADER = 270, 28, 44, 30, 16, 30
OK_FILL, BAD_FILL, EDGE = "#dff0e3", "#f8c9c9", "#555"
ACTIONS = {
    "after_intent": "write intent",
    "after_receipt": "write receipt",
    "after_save": "write checkpoint",
    "after_checkpoint": "write checkpoint",
    "after_ack": "ack",
}


def crash_map(*reports: Any) -> Diagram:
    """Draw one or more `ExplorationReport`s side by side (e.g. the naive runner next to yours)."""
    if not reports or not all(hasattr(r, "results") and hasattr(r, "runner") for r in reports):
        raise BadArgumentError(
            field="reports",
            problem="are missing or not exploration reports",
            fix="pass what explore(...) returned, e.g. crash_map(explore(ReceiptRunner()))",
        )
    columns = [[row for row in report.results if row.point is not None] for report in reports]
    heights = [
        sum(BROKEN_BOX if row.violations else BOX for row in rows) + GAP * max(len(rows) - 1, 0) for rows in columns
    ]
    width = MARGIN * 2 + COLUMN * len(reports)
    height = MARGIN * 2 + HEADER + max(heights, default=0)
    body: list[str] = []
    for n, (report, rows) in enumerate(zip(reports, columns)):
        left = MARGIN + n * COLUMN
        middle = left + COLUMN / 2
        body.append(_svg.text(middle, MARGIN + 14, report.runner, size=13, weight="bold"))
        y = MARGIN + HEADER
        for i, row in enumerate(rows):
            box = BROKEN_BOX if row.violations else BOX
            if i:
                top = y - GAP
                body.append(_svg.line(middle, top, middle, y, stroke=EDGE, stroke_width=1.2))
                body.append(_svg.arrowhead(middle, top, middle, y, color=EDGE, length=7, width=6))
                body.append(
                    _svg.text(middle + 8, top + GAP / 2 + 4, _action(report, row), size=10, anchor="start", fill="#444")
                )
            fill = BAD_FILL if row.violations else OK_FILL
            body.append(_svg.rect(left + 12, y, COLUMN - 24, box, rx=8, fill=fill, stroke="#888"))
            body.append(_svg.text(middle, y + 18, row.label, size=11))
            if row.violations:
                broke = ", ".join(sorted(row.violations))
                body.append(_svg.text(middle, y + 34, f"restart breaks {broke}", size=10, fill="#a11"))
            y += box + GAP
    title = "crash map: " + " vs ".join(r.runner for r in reports)
    desc = " ".join(_column_words(report, rows) for report, rows in zip(reports, columns))
    return Diagram(title=title, svg=_svg.document(width, height, body, label=title, desc=desc), engine="builtin")


def _column_words(report: Any, rows: list[Any]) -> str:
    """One column in words: its crash points in order, and which restarts break what."""
    broken = [f"{row.label} (restart breaks {', '.join(sorted(row.violations))})" for row in rows if row.violations]
    verdict = (
        f"{len(broken)} of them break{'s' if len(broken) == 1 else ''} a promise: {'; '.join(broken)}"
        if broken
        else "none breaks a promise"
    )
    return f"{report.runner}: {len(rows)} crash points, {', '.join(row.label for row in rows)}; {verdict}."


def _action(report: Any, row: Any) -> str:
    """What the run does between the previous point and this one."""
    kind, step = row.point.kind.value, row.point.step
    if kind == "after_effect":
        return "send email" if report.workflow.step(step).effect else f"make {step}"
    return ACTIONS.get(kind, "")
