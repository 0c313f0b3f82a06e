"""Small SVG-writing helpers shared by the kit's own pictures.

Every number is written with a fixed precision and every element in a fixed order, so
a picture is byte-for-byte the same on every run and every machine. Arrowheads are
drawn as polygons rather than `<marker>`s: no element ids, so two pictures on one page
can never clash.
"""

from __future__ import annotations

import base64
import html
import math
import re

FONT = "Helvetica,Arial,sans-serif"
MAX_WIDTH = 1200
"""Widest a picture is shown, in px: JupyterLab's output area is about 1,220 px wide at a
1,400 px window, and a wider SVG is clipped there. A larger drawing keeps its viewBox
and is scaled down to this width."""
NARROW_WIDTH = 930
"""Widest a picture that must fit a narrower window is shown, in px: JupyterLab's output area
at a 1,024 px window, with the file browser closed."""
PICTURE_CLASS = "shopops-picture"
"""Marks the <img> a picture is shown through (see `image`), so stored notebook outputs can be
compared by its text alternative."""
DIAGRAM_CLASS = "shopops-diagram"
"""Marks a picture that Graphviz or the kit may draw: its `<desc>` says what it shows in
words both renderers share, which is what stored notebook outputs compare (see
tests/nbval_sanitize.cfg)."""


def num(value: float) -> str:
    """A coordinate as short, stable text: one decimal, no trailing '.0'."""
    text = f"{value:.1f}"
    if text.endswith(".0"):
        text = text[:-2]
    return "0" if text == "-0" else text


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def document(
    width: float,
    height: float,
    body: list[str],
    *,
    label: str,
    desc: str = "",
    diagram: bool = False,
    max_width: float = MAX_WIDTH,
) -> str:
    """Wrap `body` elements in an <svg> root with a fixed size, no wider than `max_width`,
    and a text alternative: `label` as its title, `desc` (if any) as its description.
    `diagram=True` marks a picture Graphviz may draw instead (DIAGRAM_CLASS)."""
    shown_width, shown_height = fit(width, height, max_width)
    cls = f' class="{DIAGRAM_CLASS}"' if diagram else ""
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{num(shown_width)}" height="{num(shown_height)}" '
        f'viewBox="0 0 {num(width)} {num(height)}" role="img" aria-label="{esc(label)}"{cls} '
        f'font-family="{FONT}">'
    )
    return "\n".join([head, *alternative(label, desc), *body, "</svg>"]) + "\n"


def alternative(label: str, desc: str = "") -> list[str]:
    """The <title> (and <desc>) a screen reader reads, first inside the root."""
    return [f"<title>{esc(label)}</title>", *([f"<desc>{esc(desc)}</desc>"] if desc else [])]


def fit(width: float, height: float, max_width: float = MAX_WIDTH) -> tuple[float, float]:
    """The size to show a width x height picture at: as drawn, or scaled to `max_width`."""
    if width <= max_width:
        return width, height
    return max_width, height * max_width / width


_ROOT = re.compile(r"<svg\b[^>]*>")
_TITLE = re.compile(r"<title>([^<]*)</title>")
_DESC = re.compile(r"<desc>([^<]*)</desc>")


def _attribute(tag: str, name: str) -> str | None:
    found = re.search(rf'\s{name}="([^"]*)"', tag)
    return None if found is None else found.group(1)


def words(svg: str) -> tuple[str, str]:
    """(title, description) of an SVG: the first <title> and the <desc> right after it, which
    the kit writes first inside the root; the aria-label when there is no title."""
    root = _ROOT.search(svg)
    if root is None:
        return "", ""
    head = svg[root.end() :].lstrip()
    title = _TITLE.match(head)
    label = html.unescape(title.group(1)) if title else html.unescape(_attribute(root.group(0), "aria-label") or "")
    desc = _DESC.match(head[title.end() :].lstrip()) if title else None
    return label, html.unescape(desc.group(1)) if desc else ""


def alt_text(svg: str, summary: str = "") -> str:
    """What an SVG says in words: its title, then its description (or `summary` if it has none),
    said once (a description that opens with the title's last part does not repeat it)."""
    label, desc = words(svg)
    desc = desc or summary
    tail = label.rsplit(": ", 1)[-1]
    if tail and desc.startswith(tail) and desc[len(tail) : len(tail) + 2] in (": ", ", ", "; "):
        desc = desc[len(tail) + 2 :]
    return f"{label}: {desc}" if label and desc else label or desc


ALT_MOST = 250
"""The longest alt text, in characters: a screen reader reads an alt whole, with no way to
skip, so a longer description goes in a collapsible text beside the picture (`framed`)."""


def short(words: str) -> tuple[str, str]:
    """(an alt text of at most ALT_MOST characters, the full words when they did not fit, else
    ''): cut at the last sentence, clause or list item that fits, and saying where the rest is."""
    if len(words) <= ALT_MOST:
        return words, ""
    more = " … (the rest below the picture)"
    cut = words[: ALT_MOST - len(more)]
    for mark in (". ", "; ", ", "):
        at = cut.rfind(mark)
        if at > ALT_MOST // 3:
            cut = cut[:at]
            break
    return cut.rstrip(" ,;.:") + more, words


def framed(img: str, width: float | None, full: str) -> str:
    """`img` in a frame that scrolls sideways rather than shrinking the picture below 80% of its
    size (a phone's 390 px would make its labels unreadable), with the full description, when
    the alt text is a shortened one, in a collapsible text after it."""
    if width:
        img = f'{img[:-1]} style="min-width: {num(width * 0.8)}px">'
    described = (
        f'<details class="shopops-described"><summary>The picture in words</summary><p>{esc(full)}</p></details>'
        if full
        else ""
    )
    return f'<div class="shopops-frame" style="overflow-x: auto; max-width: 100%">{img}</div>{described}'


def image(svg: str, *, summary: str = "") -> str:
    """The SVG as an <img> whose alt text a screen reader announces. A notebook shows an SVG
    output through an <img> that has no alt, and a <title> inside the image is not read out;
    an HTML output carrying this tag is. Marked DIAGRAM_CLASS too when the SVG is. `summary`
    completes the alt text of an SVG that has no description of its own (see `framed`)."""
    root = _ROOT.search(svg)
    tag = root.group(0) if root else ""
    size = "".join(f' {name}="{value}"' for name in ("width", "height") if (value := _attribute(tag, name)) is not None)
    classes = PICTURE_CLASS + (f" {DIAGRAM_CLASS}" if DIAGRAM_CLASS in (_attribute(tag, "class") or "").split() else "")
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    alt, full = short(alt_text(svg, summary))
    width = _attribute(tag, "width")
    img = f'<img class="{classes}" alt="{esc(alt)}"{size} src="data:image/svg+xml;base64,{data}">'
    return framed(img, float(width) if width and width.replace(".", "", 1).isdigit() else None, full)


def png_image(png: bytes, *, alt: str, width: float, height: float) -> str:
    """PNG bytes as an <img> with its alt text (see `image`)."""
    data = base64.b64encode(png).decode("ascii")
    said, full = short(alt)
    img = (
        f'<img class="{PICTURE_CLASS}" alt="{esc(said)}" width="{num(width)}" height="{num(height)}" '
        f'src="data:image/png;base64,{data}">'
    )
    return framed(img, width, full)


def text(
    x: float,
    y: float,
    content: object,
    *,
    size: float = 12,
    anchor: str = "middle",
    fill: str = "#222",
    weight: str | None = None,
    cls: str | None = None,
) -> str:
    extra = f' font-weight="{weight}"' if weight else ""
    extra += f' class="{cls}"' if cls else ""
    return (
        f'<text x="{num(x)}" y="{num(y)}" font-size="{num(size)}" text-anchor="{anchor}" '
        f'fill="{fill}"{extra}>{esc(content)}</text>'
    )


def border(cx: float, cy: float, half_width: float, half_height: float, dx: float, dy: float) -> tuple[float, float]:
    """Where a ray from a box's centre (cx, cy) along (dx, dy) leaves the box."""
    limits = [half_width / abs(dx) if dx else math.inf, half_height / abs(dy) if dy else math.inf]
    s = min(limits)
    return cx + dx * s, cy + dy * s


def arrowhead(x1: float, y1: float, x2: float, y2: float, *, color: str, length: float = 9, width: float = 7) -> str:
    """A filled triangle whose tip is (x2, y2), pointing along (x1, y1) -> (x2, y2)."""
    dx, dy = x2 - x1, y2 - y1
    norm = math.hypot(dx, dy) or 1.0
    ux, uy = dx / norm, dy / norm
    bx, by = x2 - ux * length, y2 - uy * length
    px, py = -uy * width / 2, ux * width / 2
    points = f"{num(x2)},{num(y2)} {num(bx + px)},{num(by + py)} {num(bx - px)},{num(by - py)}"
    return f'<polygon points="{points}" fill="{color}" stroke="none"/>'


# ---------------------------------------------------------------------------- elements
# Geometry (positions, sizes, a path's steps) goes through `num`; style is written as
# given, so `fill_opacity=0.16` stays 0.16. Style names are SVG's with `_` for `-` (`cls`
# for `class`); a style of None is left out. Attributes keep the order they are passed in.


def rect(x: float, y: float, width: float, height: float, **style: object) -> str:
    return _element("rect", {"x": x, "y": y, "width": width, "height": height}, style)


def line(x1: float, y1: float, x2: float, y2: float, **style: object) -> str:
    return _element("line", {"x1": x1, "y1": y1, "x2": x2, "y2": y2}, style)


def circle(cx: float, cy: float, r: float, **style: object) -> str:
    return _element("circle", {"cx": cx, "cy": cy, "r": r}, style)


def path(*steps: str | float, **style: object) -> str:
    """A path from its steps: path("M", 0, 0, "L", 10, 10, stroke="#333")."""
    return _element("path", {"d": " ".join(s if isinstance(s, str) else num(s) for s in steps)}, style)


def polyline(points: list[tuple[float, float]], **style: object) -> str:
    return _element("polyline", {"points": " ".join(f"{num(x)},{num(y)}" for x, y in points)}, style)


def cross(x: float, y: float, half: float, **style: object) -> str:
    """An X centred on (x, y), `half` wide each way."""
    return path(
        "M", x - half, y - half, "L", x + half, y + half, "M", x - half, y + half, "L", x + half, y - half, **style
    )


def group(cls: str, *children: str, tip: str | None = None) -> str:
    """A <g class=...> on one line, with `tip` as the <title> a pointer shows."""
    title = "" if tip is None else f"<title>{esc(tip)}</title>"
    return f'<g class="{cls}">{title}{"".join(children)}</g>'


def _element(tag: str, geometry: dict[str, float | str], style: dict[str, object]) -> str:
    attributes = [f'{name}="{value if isinstance(value, str) else num(value)}"' for name, value in geometry.items()]
    attributes += [
        f'{"class" if name == "cls" else name.replace("_", "-")}="{value}"'
        for name, value in style.items()
        if value is not None
    ]
    return f"<{tag} {' '.join(attributes)}/>"
