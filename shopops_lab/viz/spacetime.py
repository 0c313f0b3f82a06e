"""A schedule as a space-time (Lamport) diagram: one vertical line per process (the
workers, and whatever they talk to: the store, the queue, the broker), time running down,
one row per step. A step is a dot on its worker's line and, when it talks to another
process, an arrow to that line labelled with what it did (red for the step that broke a
promise); a crash is a red cross, and the
line of a dead process is dashed until its next step (a fresh process). The broken promise
is written under the last step. Pure SVG, deterministic, with a text alternative.

It reads only each step's `actor`, `peer`, `event.words`, `said` and `crashed`, so it
imports nothing from the explorer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shopops_lab.errors import BadArgumentError
from shopops_lab.viz import _svg
from shopops_lab.viz.dot import Diagram

__all__ = ["spacetime"]

LANE, ROW, TOP, MARGIN, LABEL = 190, 34, 46, 20, 250
INK, BAD, MUTED = "#333", "#b01c1c", "#777"


def spacetime(steps: Sequence[Any], *, title: str = "schedule", problem: str | None = None) -> Diagram:
    """Draw `steps` (each with .actor, .peer, .event.words, .said, .crashed)."""
    if not all(hasattr(s, "actor") and hasattr(s, "event") for s in steps):
        raise BadArgumentError(
            field="steps",
            problem="are not the steps of a schedule",
            fix="pass a counterexample's or a replay's .steps, or call its .diagram()",
        )
    lanes: list[str] = []
    for step in steps:
        for who in (step.actor, step.peer):
            if who is not None and who not in lanes:
                lanes.append(who)
    x = {who: MARGIN + LABEL + LANE * n + LANE / 2 for n, who in enumerate(lanes)}
    bottom = TOP + ROW * (len(steps) + 0.5)
    width = MARGIN * 2 + LABEL + LANE * max(len(lanes), 1)
    said = _wrap(f"broken: {problem}", max(int(width / 6.2), 40)) if problem else []
    height = bottom + 16 + 15 * len(said)
    body = [_svg.text(x[who], TOP - 16, who, size=13, weight="bold") for who in lanes]
    body += _lanes(steps, lanes, x, bottom)
    for n, step in enumerate(steps):
        body += _row(n, step, x)
    for n, text in enumerate(said):
        body.append(_svg.text(MARGIN, bottom + 20 + 15 * n, text, size=11, anchor="start", fill=BAD))
    label = f"{title}: " + "; ".join(
        f"{n}. {s.event.words}{' (process dies)' if s.crashed else ''}" for n, s in enumerate(steps, 1)
    )
    summary = label + (f"; broken: {problem}" if problem else "")
    return Diagram(
        title=title, svg=_svg.document(width, height, body, label=summary), engine="builtin", summary=summary
    )


def _lanes(steps: Sequence[Any], lanes: list[str], x: dict[str, float], bottom: float) -> list[str]:
    """Each process's line: solid while alive, dashed from a crash to its next step."""
    body: list[str] = []
    for who in lanes:
        y: float = TOP - 6
        dead = False
        for n, step in enumerate(steps):
            if step.actor != who:
                continue
            row_y = TOP + ROW * n + ROW / 2
            body.append(
                _svg.line(
                    x[who],
                    y,
                    x[who],
                    row_y,
                    stroke=MUTED if dead else INK,
                    stroke_width=1.2,
                    stroke_dasharray="4 4" if dead else None,
                )
            )
            y, dead = row_y, step.crashed
        body.append(
            _svg.line(
                x[who],
                y,
                x[who],
                bottom,
                stroke=MUTED if dead else INK,
                stroke_width=1.2,
                stroke_dasharray="4 4" if dead else None,
            )
        )
    return body


def _row(n: int, step: Any, x: dict[str, float]) -> list[str]:
    y = TOP + ROW * n + ROW / 2
    here = x[step.actor]
    color = BAD if step.crashed or getattr(step, "problem", None) else INK
    body = [_svg.text(MARGIN, y + 4, f"{n + 1}. {_short(step.event.words, 42)}", size=11, anchor="start", fill=color)]
    if step.peer is not None and step.peer != step.actor:
        there = x[step.peer]
        body.append(_svg.line(here, y, there, y, stroke=color, stroke_width=1.2))
        body.append(_svg.arrowhead(here, y, there, y, color=color, length=7, width=6))
        body.append(_svg.text((here + there) / 2, y - 5, _short(_what(step), 40), size=9, fill=color))
    if step.crashed:
        body.append(_svg.cross(here, y, 6, stroke=BAD, stroke_width=2.4))
    else:
        body.append(_svg.circle(here, y, 4, fill=color))
    return body


def _what(step: Any) -> str:
    """What the step did, without its actor's name (the lane says who)."""
    if step.crashed:
        return "dies" + (f" ({step.event.fault.words})" if step.event.fault is not None else "")
    said = step.said.removeprefix(f"{step.actor} ").removeprefix(f"{step.actor}'s ")
    return said.split("; ", 1)[0]


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
