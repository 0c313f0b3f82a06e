"""The outbox's two acknowledgement boundaries, as one picture (lab 06).

A refund travels from the refunds database (row and outbox entry, one local
transaction) through the dispatcher and the broker to the payments consumer (refund
and processed id, one local transaction). Two acknowledgements cross it, drawn in red:
(1) the broker's publisher confirm and (2) the consumer's ack; a crash just before each
one repeats a hand-over. The parts are data here, so Graphviz's drawing (`dot_source`)
and the kit's own (`svg`) show the same boxes, arrows and notes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shopops_lab.viz import _svg
from shopops_lab.viz.dot import Diagram, render

__all__ = ["TITLE", "dot_source", "outbox_boundaries", "summary", "svg"]

TITLE = "two acknowledgement boundaries"
LIT = "#d62728"
_WIDTH, _HEIGHT = 1195.0, 320.0
_GROUP_WIDTH = 250.0


@dataclass(frozen=True, kw_only=True, slots=True)
class _Box:
    name: str
    label: str
    x: float  # centre, in the kit's own layout
    y: float
    width: float = 150.0
    fill: str = "#eef3fb"
    note: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class _Arrow:
    source: str
    target: str
    label: str = ""
    style: str = "solid"  # "dashed", "dotted" (a note's line: no head)
    lit: bool = False
    shift: float = 0.0  # sideways, so two arrows between the same boxes do not overlap


@dataclass(frozen=True, kw_only=True, slots=True)
class _Group:
    label: str
    members: tuple[str, ...]


BOXES = (
    _Box(name="row", label="row O-1001\nrefund_approved", x=135, y=84),
    _Box(name="outbox", label="outbox\nout-0001 pending", x=135, y=174),
    _Box(name="dispatcher", label="dispatcher", x=370, y=174, width=120),
    _Box(name="broker", label="broker", x=600, y=174, width=90, fill="#fff4de"),
    _Box(name="consumer", label="payments consumer", x=830, y=174, width=150),
    _Box(name="refund", label="refund\n35.00 to Jordan", x=1060, y=84),
    _Box(name="processed", label="processed ids\nout-0001", x=1060, y=174),
    _Box(
        name="w1",
        label="crash after (1), before mark sent:\nout-0001 is published again",
        x=370,
        y=276,
        width=230,
        fill="#fde9e9",
        note=True,
    ),
    _Box(
        name="w2",
        label="crash after apply, before (2):\nout-0001 is delivered again",
        x=830,
        y=276,
        width=230,
        fill="#fde9e9",
        note=True,
    ),
)
ARROWS = (
    _Arrow(source="outbox", target="dispatcher", label="read pending", shift=9),
    _Arrow(source="dispatcher", target="outbox", label="mark sent", style="dashed", shift=9),
    _Arrow(source="dispatcher", target="broker", label="publish", shift=9),
    _Arrow(source="broker", target="dispatcher", label="(1) publisher confirm", lit=True, shift=9),
    _Arrow(source="broker", target="consumer", label="deliver", shift=9),
    _Arrow(source="consumer", target="broker", label="(2) consumer ack", lit=True, shift=9),
    _Arrow(source="consumer", target="refund", label="apply"),
    _Arrow(source="consumer", target="processed", label="record id"),
    _Arrow(source="dispatcher", target="w1", style="dotted"),
    _Arrow(source="consumer", target="w2", style="dotted"),
)
GROUPS = (
    _Group(label="refunds database: one local transaction", members=("row", "outbox")),
    _Group(label="payments database: one local transaction", members=("refund", "processed")),
)
_BOX_HEIGHT = 44.0


def outbox_boundaries(*, engine: str = "auto") -> Diagram:
    """The picture: Graphviz's where `dot` runs, the kit's own elsewhere (engine="fallback"
    always draws the kit's own)."""
    return render(
        dot_source(), title=TITLE, engine=engine, fallback_svg=svg(), summary=summary(), max_width=_svg.NARROW_WIDTH
    )


def summary() -> str:
    """What the picture shows, in words (its text alternative, the same for both renderers)."""
    names = {box.name: box.label.replace("\n", " ") for box in BOXES}
    groups = "; ".join(f"{group.label}: {' and '.join(names[m] for m in group.members)}" for group in GROUPS)
    lit = "; ".join(
        f"{arrow.label} from {names[arrow.source]} to {names[arrow.target]}" for arrow in ARROWS if arrow.lit
    )
    notes = "; ".join(box.label.replace("\n", " ") for box in BOXES if box.note)
    return f"{groups}. The two acknowledgements: {lit}. Crash windows: {notes}"


def dot_source() -> str:
    """The DOT text Graphviz draws: top to bottom, so it fits a 930 px output area at full size
    (left to right it is 1,600 px wide, and its words shrink to half size when scaled)."""
    lines = [
        "digraph boundaries {",
        "  rankdir=TB; nodesep=0.5; ranksep=0.4;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    grouped = {member for group in GROUPS for member in group.members}
    for n, group in enumerate(GROUPS, start=1):
        lines.append(
            f'  subgraph cluster_{n} {{ label={_quote(group.label)}; fontname="Helvetica"; '
            'fontsize=10; color="#888888";'
        )
        lines += [f"    {_node(box)}" for box in BOXES if box.name in group.members]
        lines.append("  }")
    lines += [f"  {_node(box)}" for box in BOXES if box.name not in grouped]
    for arrow in ARROWS:
        attributes = [f"label={_quote(arrow.label)}"] if arrow.label else []
        if arrow.lit:
            attributes += [f'color="{LIT}"', f'fontcolor="{LIT}"', "style=bold"]
        elif arrow.style != "solid":
            attributes.append(f"style={arrow.style}")
        if arrow.style == "dotted":
            attributes.append("arrowhead=none")
        lines.append(f"  {arrow.source} -> {arrow.target} [{', '.join(attributes)}];")
    for arrow in ARROWS:
        if arrow.style == "dotted":  # a note sits beside the part it is about
            lines.append(f"  {{ rank=same; {arrow.source}; {arrow.target}; }}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def svg() -> str:
    """The kit's own drawing: pure Python, the same on every machine, JupyterLite included."""
    boxes = {box.name: box for box in BOXES}
    body: list[str] = []
    for group in GROUPS:
        members = [boxes[m] for m in group.members]
        middle = sum(b.x for b in members) / len(members)
        left, right = middle - _GROUP_WIDTH / 2, middle + _GROUP_WIDTH / 2
        top = min(b.y for b in members) - _BOX_HEIGHT / 2 - 34
        bottom = max(b.y for b in members) + _BOX_HEIGHT / 2 + 14
        body.append(
            _svg.group(
                "group",
                _svg.rect(left, top, right - left, bottom - top, fill="none", stroke="#888"),
                _svg.text((left + right) / 2, top + 16, group.label, size=11),
            )
        )
    for arrow in ARROWS:
        body.append(_arrow(arrow, boxes[arrow.source], boxes[arrow.target]))
    for box in BOXES:
        body.append(_box(box))
    return _svg.document(_WIDTH, _HEIGHT, body, label=TITLE, desc=summary(), diagram=True, max_width=_svg.NARROW_WIDTH)


# ---------------------------------------------------------------------------- internals
def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _node(box: _Box) -> str:
    shape = ", shape=note, style=filled, fontsize=10" if box.note else ""
    return f'{box.name} [label={_quote(box.label)}, fillcolor="{box.fill}"{shape}];'


def _box(box: _Box) -> str:
    left, top = box.x - box.width / 2, box.y - _BOX_HEIGHT / 2
    corner = "2" if box.note else "12"
    lines = box.label.split("\n")
    size = 11 if box.note else 12
    first = box.y + 4 - (len(lines) - 1) * 8
    texts = [_svg.text(box.x, first + 16 * i, line, size=size) for i, line in enumerate(lines)]
    return "\n".join(
        [
            f'<g class="box {box.name}">',
            _svg.rect(left, top, box.width, _BOX_HEIGHT, rx=corner, fill=box.fill, stroke="#555"),
            *texts,
            "</g>",
        ]
    )


def _arrow(arrow: _Arrow, source: _Box, target: _Box) -> str:
    dx, dy = target.x - source.x, target.y - source.y
    length = math.hypot(dx, dy)
    ux, uy = dx / length, dy / length
    ox, oy = uy * arrow.shift, -ux * arrow.shift  # to the left of travel: a pair of opposite arrows separates
    x1, y1 = _svg.border(source.x + ox, source.y + oy, source.width / 2 + 2, _BOX_HEIGHT / 2 + 2, dx, dy)
    x2, y2 = _svg.border(target.x + ox, target.y + oy, target.width / 2 + 2, _BOX_HEIGHT / 2 + 2, -dx, -dy)
    color = LIT if arrow.lit else "#444"
    dash = {"dashed": "6 4", "dotted": "2 3"}.get(arrow.style)
    head = arrow.style != "dotted"
    end_x, end_y = (x2 - ux * 8, y2 - uy * 8) if head else (x2, y2)
    parts = [
        f'<g class="arrow {arrow.source}-{arrow.target}' + (' lit"' if arrow.lit else '"') + ">",
        _svg.line(x1, y1, end_x, end_y, stroke=color, stroke_width=2.4 if arrow.lit else 1.2, stroke_dasharray=dash),
    ]
    if head:
        parts.append(_svg.arrowhead(x1, y1, x2, y2, color=color))
    if arrow.label:
        # above a line going right, below one going left: the two of a pair never collide
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        if abs(dx) >= abs(dy):
            my += -7 if dx > 0 else 16
        else:
            mx += 8
        anchor = "middle" if abs(dx) >= abs(dy) else "start"
        parts.append(_svg.text(mx, my, arrow.label, size=11, anchor=anchor, fill=color, cls="label"))
    parts.append("</g>")
    return "\n".join(parts)
