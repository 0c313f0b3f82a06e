"""Where real workers were stopped, and what each stop did to the money (lab 08).

One cell per stop, left to right in the order a delivery reaches them (acquired,
credited, acked, committed, returned), each naming the order a worker was killed or
frozen on and how that order ended: refunded once (green), more than once (red,
with the count), never (amber), the wrong amount, or dead-lettered. The cells are plain
data (`Stop`) taken from a run's outcomes, never from its timing, so a run and its
recording draw the same bytes. Pure SVG, so it looks the same everywhere, JupyterLite
included; it reads no run itself and imports nothing from the lab.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from shopops_lab.errors import BadArgumentError
from shopops_lab.viz import _svg
from shopops_lab.viz.crash_map import BAD_FILL, OK_FILL
from shopops_lab.viz.dot import Diagram

__all__ = ["Outcome", "Stop", "stop_map"]

CELL, CELL_HEIGHT, GAP, MARGIN = 214, 104, 12, 16
TOP = 70  # the title and the arrow above the cells
NOTE = 18  # and the note's line, when there is one
LEGEND = 34  # the key below them
NARROWEST = 620  # room for the title and the note over a single cell
EDGE = "#555"


class Outcome(StrEnum):
    """How one order ended; the value is the cell's class in the SVG."""

    ONCE = "once"
    REPEATED = "repeated"
    NEVER = "never"
    WRONG_AMOUNT = "wrong-amount"
    DEAD = "dead"


# fill, the colour of the verdict line, and the legend's words, per outcome
_LOOK = {
    Outcome.ONCE: (OK_FILL, "#1e6b34", "refunded once"),
    Outcome.REPEATED: (BAD_FILL, "#a11", "refunded more than once"),
    Outcome.NEVER: ("#fbe3b8", "#8a5300", "never refunded"),
    Outcome.WRONG_AMOUNT: ("#f6d0e4", "#8c1d5a", "refunded the wrong amount"),
    Outcome.DEAD: ("#dcdcdc", "#333", "dead-lettered"),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Stop:
    """One stop of a run: where a worker was stopped (`paused`: frozen past its lease
    rather than killed; `reached`: False if no worker ever got there) and how the order
    it was holding ended."""

    point: str
    paused: bool
    reached: bool
    order: str
    asked: float
    refunded: float
    credits: int
    outcome: Outcome

    @property
    def how(self) -> str:
        return f"{'frozen' if self.paused else 'killed'} {self.point}"

    @property
    def verdict(self) -> str:
        """The cell's big line: what the customer got."""
        if self.outcome is Outcome.DEAD:
            return "dead-lettered"
        if self.outcome is Outcome.NEVER:
            return "never refunded"
        return f"refunded {self.credits}\u00d7" if self.outcome is Outcome.REPEATED else "refunded once"

    @property
    def money(self) -> str:
        if self.outcome is Outcome.DEAD:
            return f"{self.refunded:.2f} paid; the handler raised"
        paid = f"{self.refunded:.2f} paid for {self.asked:.2f}"
        return f"{paid}, in {self.credits} credits" if self.outcome is Outcome.REPEATED else paid

    def words(self) -> str:
        """The stop in one phrase, for the text alternative."""
        reached = "" if self.reached else " (never reached)"
        return f"{self.order} {self.how}{reached}: {self.verdict}, {self.money}"


def stop_map(stops: Sequence[Stop], *, title: str, note: str = "") -> Diagram:
    """Draw `stops` left to right, in the order given (a delivery's order); `note`, if
    any, is one line under the title (e.g. that this is a recorded run)."""
    if not stops or not all(isinstance(stop, Stop) for stop in stops):
        raise BadArgumentError(
            field="stops",
            problem="are missing or not Stop rows",
            fix="pass one Stop per stop point, e.g. run.stop_rows() of a lab 08 run",
        )
    cells = MARGIN * 2 + CELL * len(stops) + GAP * (len(stops) - 1)
    width = max(cells, NARROWEST)
    top = TOP + (NOTE if note else 0)
    height = top + CELL_HEIGHT + LEGEND + MARGIN
    body = [_svg.text(MARGIN, MARGIN + 12, title, size=14, anchor="start", weight="bold")]
    if note:
        body.append(_svg.text(MARGIN, MARGIN + 30, note, size=11, anchor="start", fill="#b35900", cls="note"))
    body += _arrow(cells, top)
    for n, stop in enumerate(stops):
        body.append(_cell(MARGIN + n * (CELL + GAP), top, stop))
    body += _legend(sorted({stop.outcome for stop in stops}, key=list(Outcome).index), top + CELL_HEIGHT + 24)
    summary = "; ".join(stop.words() for stop in stops)
    return Diagram(
        title=title,
        svg=_svg.document(width, height, body, label=title, desc=summary),
        engine="builtin",
        summary=summary,
    )


def _arrow(width: float, top: float) -> list[str]:
    """Left to right is later in a delivery: say so once, above the cells."""
    y, left, right = top - 12, MARGIN + 4, width - MARGIN - 4
    return [
        _svg.line(left, y, right, y, stroke=EDGE, stroke_width=1.2),
        _svg.arrowhead(left, y, right, y, color=EDGE, length=8, width=7),
        _svg.text(
            left,
            y - 6,
            "where in its delivery each worker was stopped: earlier \u2192 later",
            size=10,
            anchor="start",
            fill="#444",
        ),
    ]


def _cell(left: float, top: float, stop: Stop) -> str:
    fill, ink, _ = _LOOK[stop.outcome]
    middle = left + CELL / 2
    parts = [
        _svg.rect(
            left,
            top,
            CELL,
            CELL_HEIGHT,
            rx=8,
            fill=fill,
            stroke="#888",
            stroke_dasharray=None if stop.reached else "5 4",
        ),
        _mark(left + 16, top + 17, stop.paused),
        _svg.text(left + 30, top + 21, stop.how, size=12, anchor="start", weight="bold"),
        _svg.text(middle, top + 42, f"order {stop.order}, asked {stop.asked:.2f}", size=11, fill="#444"),
        _svg.text(middle, top + 66, stop.verdict, size=16, weight="bold", fill=ink),
        _svg.text(middle, top + 85, stop.money, size=11),
    ]
    if not stop.reached:
        parts.append(_svg.text(middle, top + 99, "(no worker ever reached this stop)", size=9, fill="#666"))
    return _svg.group(f"stop {stop.outcome.value}", *parts, tip=stop.words())


def _mark(x: float, y: float, paused: bool) -> str:
    """A cross for a SIGKILL, two bars for a worker frozen in place."""
    if paused:
        return _svg.path(
            "M",
            x - 3,
            y - 6,
            "L",
            x - 3,
            y + 6,
            "M",
            x + 3,
            y - 6,
            "L",
            x + 3,
            y + 6,
            stroke=EDGE,
            stroke_width=2.5,
            fill="none",
        )
    return _svg.cross(x, y, 5, stroke="#a11", stroke_width=2.5, fill="none")


def _legend(outcomes: list[Outcome], y: float) -> list[str]:
    parts: list[str] = []
    x: float = MARGIN
    for outcome in outcomes:
        fill, _, words = _LOOK[outcome]
        parts.append(_svg.rect(x, y - 10, 14, 14, rx=3, fill=fill, stroke="#888"))
        parts.append(_svg.text(x + 20, y + 1, words, size=11, anchor="start"))
        x += 36 + 6.5 * len(words)
    return parts
