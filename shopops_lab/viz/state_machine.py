"""The lease state machine, drawn from `states.TRANSITIONS`, with live counts.

The edges come from the table the queue enforces, so the picture cannot drift from
the code. Given a queue, each state shows how many items sit in it, and the edge the
queue walked last (read from its event log) is drawn bold and red: run a cell that
expires a lease and the "expiry / nack" edge lights up.

Graphviz draws it wherever `dot` runs; elsewhere (JupyterLite, a laptop without
Graphviz) the kit lays the four states out itself, in pure Python. Both pictures carry
the same description (`lease_summary`: the states, their counts, the highlighted edge), which
is what a notebook's stored output compares.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from shopops_lab import arguments
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import EventKind, EventLog
from shopops_lab.states import TRANSITIONS, ItemState
from shopops_lab.viz import _svg
from shopops_lab.viz.dot import ENGINES, Diagram, render

__all__ = ["ENTRY_LABEL", "Edge", "last_transition", "lease_dot", "lease_summary", "lease_svg", "state_machine"]

Edge = tuple[ItemState | None, ItemState]
"""(source, target); source None is the entry point (an item is enqueued)."""

ENTRY_LABEL = "enqueue"
ENTRY_EDGE: Edge = (None, ItemState.READY)
HIGHLIGHT = "#d62728"
TITLE = "lease state machine"

# Which edge each queue event walks. EXPIRED and NACKED end in the DLQ instead when a
# DEAD_LETTERED event follows them, and that event is then the last one.
_EVENT_EDGES: Mapping[EventKind, Edge] = {
    EventKind.ENQUEUED: ENTRY_EDGE,
    EventKind.LEASED: (ItemState.READY, ItemState.LEASED),
    EventKind.ACKED: (ItemState.LEASED, ItemState.DONE),
    EventKind.NACKED: (ItemState.LEASED, ItemState.READY),
    EventKind.EXPIRED: (ItemState.LEASED, ItemState.READY),
    EventKind.DEAD_LETTERED: (ItemState.LEASED, ItemState.DEAD),
    EventKind.REPLAYED: (ItemState.DEAD, ItemState.READY),
}

# The builtin layout: centres of the four boxes. A state added to ItemState later is
# placed on a row of its own below, so the picture still shows every state.
_POS = {
    ItemState.READY: (170.0, 84.0),
    ItemState.LEASED: (400.0, 84.0),
    ItemState.DONE: (610.0, 84.0),
    ItemState.DEAD: (285.0, 222.0),
}
_ENTRY_POS = (44.0, 84.0)
_BOX_W, _BOX_H = 112.0, 52.0
_FILL = {ItemState.READY: "#e8f1fb", ItemState.LEASED: "#fff4de", ItemState.DONE: "#e7f5ea", ItemState.DEAD: "#fde9e9"}


def state_machine(queue: Any = None, highlight: Edge | str | None = None, *, engine: str = "auto") -> Diagram:
    """The lease state machine; with `queue`, counts per state and its last transition.

    `highlight` picks the bold edge yourself: a pair like ("leased", "ready") or an edge
    label like "ack" ("enqueue" for the entry point). engine="auto" (the default) uses
    Graphviz when `dot` runs and the kit's own layout otherwise; "fallback" always uses
    the kit's own layout (what JupyterLite shows).
    """
    arguments.choice("engine", engine, ENGINES, "pass 'auto' (Graphviz where it runs, the default) or 'fallback'")
    counts = None
    if queue is not None:
        if not callable(getattr(queue, "counts", None)) or not isinstance(getattr(queue, "log", None), EventLog):
            raise BadArgumentError(
                field="queue",
                problem=f"is a {type(queue).__name__}",
                fix="pass an InMemoryQueue (or leave it out for the bare diagram)",
            )
        counts = queue.counts()
    edge = _edge(highlight) if highlight is not None else (last_transition(queue.log) if queue is not None else None)
    return render(
        lease_dot(counts, edge),
        title=TITLE,
        engine=engine,
        fallback_svg=lease_svg(counts, edge),
        summary=lease_summary(counts, edge),
    )


def last_transition(log: EventLog) -> Edge | None:
    """The edge of the newest queue event that moved an item, or None if none did."""
    for row in reversed(list(log.rows())):  # bare rows: no Event objects built for a long log
        edge = _EVENT_EDGES.get(row.kind)
        if edge is not None:
            return edge
    return None


def lease_dot(counts: Mapping[ItemState, int] | None = None, highlight: Edge | str | None = None) -> str:
    """The DOT source of the diagram (what Graphviz draws)."""
    edge = _edge(highlight) if highlight is not None else None
    lines = [
        "digraph lease_states {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fillcolor="white"];',
        '  edge [fontname="Helvetica", fontsize=11];',
        '  start [shape=point, width=0.15, style=filled, fillcolor="#222222", label=""];',
    ]
    for state in _states():
        label = _dot_quote(state.value if counts is None else f"{state.value}\n{counts.get(state, 0)}")
        lines.append(f'  {state.value} [label={label}, fillcolor="{_FILL.get(state, "white")}"];')
    for (source, target), label in [(ENTRY_EDGE, ENTRY_LABEL), *TRANSITIONS.items()]:
        name = "start" if source is None else source.value
        style = f', color="{HIGHLIGHT}", fontcolor="{HIGHLIGHT}", penwidth=2.5' if edge == (source, target) else ""
        lines.append(f"  {name} -> {target.value} [label={_dot_quote(label)}{style}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def lease_summary(counts: Mapping[ItemState, int] | None = None, highlight: Edge | str | None = None) -> str:
    """What the diagram shows, in words: its text alternative, the same for both renderers."""
    edge = _edge(highlight) if highlight is not None else None
    states = ", ".join(
        state.value if counts is None else f"{state.value} {counts.get(state, 0)}" for state in _states()
    )
    edges = ", ".join(
        f"{label} ({_name(source)} to {target.value})"
        for (source, target), label in [(ENTRY_EDGE, ENTRY_LABEL), *TRANSITIONS.items()]
    )
    lit = "" if edge is None else f"; highlighted: {_label(edge)}"
    return f"states: {states}; edges: {edges}{lit}"


def lease_svg(counts: Mapping[ItemState, int] | None = None, highlight: Edge | str | None = None) -> str:
    """The kit's own picture: pure Python, no Graphviz, identical on every machine."""
    edge = _edge(highlight) if highlight is not None else None
    pos = _positions()
    height = max(y for _, y in pos.values()) + _BOX_H / 2 + 24
    body: list[str] = []
    edges = [(ENTRY_EDGE, ENTRY_LABEL), *TRANSITIONS.items()]
    for (source, target), label in edges:
        two_way = source is not None and (target, source) in TRANSITIONS
        start = _ENTRY_POS if source is None else pos[source]
        body.extend(
            _edge_svg(
                start,
                pos[target],
                label,
                entry=source is None,
                parallel=two_way,
                lit=edge == (source, target),
                name=f"{_name(source)}-{target.value}",
            )
        )
    ex, ey = _ENTRY_POS
    body.append(_svg.circle(ex, ey, 6, fill="#222", cls="entry"))
    for state in _states():
        x, y = pos[state]
        body.append(f'<g class="state {state.value}">')
        body.append(
            _svg.rect(
                x - _BOX_W / 2,
                y - _BOX_H / 2,
                _BOX_W,
                _BOX_H,
                rx=14,
                fill=_FILL.get(state, "#ffffff"),
                stroke="#555",
                stroke_width=1.2,
            )
        )
        if counts is None:
            body.append(_svg.text(x, y + 5, state.value, size=15, weight="bold"))
        else:
            body.append(_svg.text(x, y - 4, state.value, size=15, weight="bold"))
            body.append(_svg.text(x, y + 16, counts.get(state, 0), size=14, cls="count"))
        body.append("</g>")
    return _svg.document(690, height, body, label=TITLE, desc=lease_summary(counts, edge), diagram=True)


# ---------------------------------------------------------------------------- internals
def _states() -> list[ItemState]:
    return list(ItemState)


def _positions() -> dict[ItemState, tuple[float, float]]:
    pos = dict(_POS)
    extra = [s for s in ItemState if s not in pos]
    for i, state in enumerate(extra):
        pos[state] = (170.0 + 150.0 * i, 330.0)
    return pos


def _name(state: ItemState | None) -> str:
    return "start" if state is None else state.value


def _label(edge: Edge) -> str:
    source, target = edge
    return ENTRY_LABEL if source is None else TRANSITIONS[source, target]  # only the entry edge has no source


def _edge(value: Edge | str) -> Edge:
    """Normalise a highlight given as an edge label or a (source, target) pair."""
    if isinstance(value, str):
        if value == ENTRY_LABEL:
            return ENTRY_EDGE
        for known_edge, label in TRANSITIONS.items():
            if label == value:
                return known_edge
    elif isinstance(value, tuple) and len(value) == 2:
        try:
            pair: Edge | None = (None if value[0] is None else ItemState(value[0]), ItemState(value[1]))
        except ValueError:
            pair = None
        if pair is not None and (pair == ENTRY_EDGE or pair in TRANSITIONS):
            return pair
    known = ", ".join(repr(label) for label in [ENTRY_LABEL, *TRANSITIONS.values()])
    raise BadArgumentError(
        field="highlight",
        problem=f"is {value!r}, not an edge of the lease state machine",
        fix=f"pass an edge label ({known}) or a pair like ('leased', 'ready')",
    )


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _border(cx: float, cy: float, dx: float, dy: float) -> tuple[float, float]:
    """Where a ray from the centre of a box along (dx, dy) leaves the box (3 px outside)."""
    return _svg.border(cx, cy, _BOX_W / 2 + 3, _BOX_H / 2 + 3, dx, dy)


def _edge_svg(
    start: tuple[float, float],
    end: tuple[float, float],
    label: str,
    *,
    entry: bool,
    parallel: bool,
    lit: bool,
    name: str,
) -> list[str]:
    (x1, y1), (x2, y2) = start, end
    dx, dy = x2 - x1, y2 - y1
    length = math.hypot(dx, dy)
    ux, uy = dx / length, dy / length
    lx, ly = uy, -ux  # the left-hand side of travel (SVG's y axis points down)
    shift = 8.0 if parallel else 0.0
    x1, y1, x2, y2 = x1 + lx * shift, y1 + ly * shift, x2 + lx * shift, y2 + ly * shift
    sx, sy = (x1 + ux * 8, y1 + uy * 8) if entry else _border(x1, y1, dx, dy)
    tx, ty = _border(x2, y2, -dx, -dy)
    color = HIGHLIGHT if lit else "#555"
    width = "3" if lit else "1.4"
    cls = f"edge {name}" + (" highlight" if lit else "")
    mx, my = (sx + tx) / 2 + lx * 9, (sy + ty) / 2 + ly * 9
    if abs(lx) > abs(ly):
        anchor, my = ("start" if lx > 0 else "end"), my + 4
    else:
        anchor, my = "middle", (my - 2 if ly < 0 else my + 11)
    return [
        f'<g class="{cls}">',
        _svg.line(sx, sy, tx - ux * 8, ty - uy * 8, stroke=color, stroke_width=width),
        _svg.arrowhead(sx, sy, tx, ty, color=color, length=10, width=8 if lit else 7),
        _svg.text(mx, my, label, size=12, anchor=anchor, fill=color, weight="bold" if lit else None, cls="label"),
        "</g>",
    ]
