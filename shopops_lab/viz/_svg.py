"""Small SVG-writing helpers shared by the kit's own pictures.

Every number is written with a fixed precision and every element in a fixed order, so
a picture is byte-for-byte the same on every run and every machine. Arrowheads are
drawn as polygons rather than `<marker>`s: no element ids, so two pictures on one page
can never clash.
"""
from __future__ import annotations

import html
import math

FONT = "Helvetica,Arial,sans-serif"


def num(value: float) -> str:
    """A coordinate as short, stable text: one decimal, no trailing '.0'."""
    text = f"{value:.1f}"
    if text.endswith(".0"):
        text = text[:-2]
    return "0" if text == "-0" else text


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def document(width: float, height: float, body: list[str], *, label: str) -> str:
    """Wrap `body` elements in an <svg> root with a fixed size and an accessible label."""
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{num(width)}" height="{num(height)}" '
            f'viewBox="0 0 {num(width)} {num(height)}" role="img" aria-label="{esc(label)}" '
            f'font-family="{FONT}">')
    return "\n".join([head, f"<title>{esc(label)}</title>", *body, "</svg>"]) + "\n"


def text(x: float, y: float, content: object, *, size: float = 12, anchor: str = "middle",
         fill: str = "#222", weight: str | None = None, cls: str | None = None) -> str:
    extra = f' font-weight="{weight}"' if weight else ""
    extra += f' class="{cls}"' if cls else ""
    return (f'<text x="{num(x)}" y="{num(y)}" font-size="{num(size)}" text-anchor="{anchor}" '
            f'fill="{fill}"{extra}>{esc(content)}</text>')


def arrowhead(x1: float, y1: float, x2: float, y2: float, *, color: str,
              length: float = 9, width: float = 7) -> str:
    """A filled triangle whose tip is (x2, y2), pointing along (x1, y1) -> (x2, y2)."""
    dx, dy = x2 - x1, y2 - y1
    norm = math.hypot(dx, dy) or 1.0
    ux, uy = dx / norm, dy / norm
    bx, by = x2 - ux * length, y2 - uy * length
    px, py = -uy * width / 2, ux * width / 2
    points = f"{num(x2)},{num(y2)} {num(bx + px)},{num(by + py)} {num(bx - px)},{num(by - py)}"
    return f'<polygon points="{points}" fill="{color}" stroke="none"/>'
