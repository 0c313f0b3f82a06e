"""Turn DOT text into a picture, and never crash a notebook doing it.

Graphviz draws the course's diagrams wherever its `dot` program runs. A laptop may lack
it, and JupyterLite (Python in the browser) cannot start programs at all, so `render`
falls back to a picture the kit draws in pure Python (every diagram of the kit has one),
or, for DOT text of your own, to the DOT source itself with one line on how to get
Graphviz. Either way the result is a `Diagram` that a notebook cell displays as its last
expression.

Both renderers give the SVG the same text alternative (a `<title>` and a `<desc>` saying
what the diagram shows), and its plain-text form says the same: that is what stored
notebook outputs compare, so they stay equal across Graphviz versions and with or without
`dot`. Graphviz stamps its version into a comment; `render` strips comments and the XML
prologue so the same input gives the same SVG on every run.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from shopops_lab import arguments
from shopops_lab.errors import BadArgumentError
from shopops_lab.viz import _svg

__all__ = ["BROWSER_HINT", "Diagram", "INSTALL_HINT", "NO_DOT_ENV", "dot_available", "in_browser", "render"]

NO_DOT_ENV = "SHOPOPS_NO_DOT"
"""Set this environment variable to 1 to draw every diagram without Graphviz."""

INSTALL_HINT = (
    "This diagram needs Graphviz: `sudo apt-get install graphviz` (Debian/Ubuntu) or "
    "`brew install graphviz` (macOS); this page shows the DOT source."
)
BROWSER_HINT = (
    "Python in the browser cannot run Graphviz, and this diagram has no drawing of "
    "the kit's own; this page shows the DOT source."
)

ENGINES = ("auto", "fallback")

_COMMENT = re.compile(r"<!--.*?-->\s*", re.DOTALL)
_PROLOGUE = re.compile(r"<\?xml.*?\?>\s*|<!DOCTYPE.*?>\s*", re.DOTALL)
_ROOT = re.compile(r"<svg\b[^>]*>")
_POINTS = re.compile(r'\s(width|height)="([\d.]+)pt"')


@dataclass(frozen=True, kw_only=True, slots=True)
class Diagram:
    """A picture for a notebook cell: its SVG when there is one, else the DOT source.

    `engine` says who drew it: "dot" (Graphviz), "builtin" (the kit's own pure-Python
    layout), or "source" (no picture; the DOT text is shown instead). `summary` says in
    words what the picture shows (the same whoever drew it); `note` explains anything a
    reader should know (a truncated view, a missing Graphviz).
    """

    title: str
    svg: str | None
    source: str | None = None
    engine: str = "builtin"
    note: str = ""
    summary: str = ""

    def _repr_svg_(self) -> str | None:
        return self.svg

    def _repr_html_(self) -> str:
        """The picture as an <img> with alt text (a screen reader announces it; the SVG output
        alone is shown through an <img> without one), or the DOT source when there is none."""
        if self.svg is not None:
            return _svg.image(self.svg, summary=self.summary)
        note = f"<p>{html.escape(self.note)}</p>" if self.note else ""
        return f"{note}<pre>{html.escape(self.source or '')}</pre>"

    def __repr__(self) -> str:
        """Who drew the picture is left out: a notebook's stored text is the same either way."""
        parts = ["no picture, DOT source only"] if self.svg is None else []
        parts += [text for text in (self.summary, self.note) if text]
        return f"<Diagram {self.title!r}" + (f": {'; '.join(parts)}>" if parts else ">")


def in_browser() -> bool:
    """True inside Pyodide (JupyterLite): no subprocesses, no system packages."""
    return sys.platform == "emscripten"


def dot_available(which: Callable[[str], str | None] = shutil.which) -> bool:
    """True when Graphviz's `dot` can run here (and `SHOPOPS_NO_DOT` is not set)."""
    if os.environ.get(NO_DOT_ENV, "").strip() not in ("", "0"):
        return False
    if in_browser():
        return False
    return which("dot") is not None


def render(
    source: str,
    *,
    title: str = "diagram",
    engine: str = "auto",
    fallback_svg: str | None = None,
    summary: str = "",
    max_width: float = _svg.MAX_WIDTH,
) -> Diagram:
    """Draw DOT `source`: with Graphviz when `dot_available()` (engine="auto", the
    default), else with `fallback_svg` (the kit's own drawing), else as the DOT source
    itself. engine="fallback" never runs Graphviz: what a machine without it shows.
    `summary` says what the picture shows; it becomes the SVG's description. Graphviz's
    drawing is shown no wider than `max_width` px."""
    if not isinstance(source, str) or not source.strip():
        raise BadArgumentError(
            field="source", problem=f"is {source!r}", fix="pass DOT text, e.g. 'digraph { ready -> leased }'"
        )
    arguments.choice("engine", engine, ENGINES, f"pass one of {', '.join(map(repr, ENGINES))}")
    reason = "Graphviz drawing switched off" if engine == "fallback" else ""
    if not reason:
        if dot_available():
            svg, reason = _run_dot(source)
            if svg is not None:
                return Diagram(
                    title=title,
                    svg=accessible(svg, title=title, desc=summary, max_width=max_width),
                    source=source,
                    engine="dot",
                    summary=summary,
                )
        else:
            reason = "Graphviz `dot` cannot run in the browser" if in_browser() else "Graphviz `dot` not found"
    if fallback_svg is not None:
        return Diagram(title=title, svg=fallback_svg, source=source, engine="builtin", summary=summary)
    hint = BROWSER_HINT if in_browser() else INSTALL_HINT
    return Diagram(title=title, svg=None, source=source, engine="source", note=f"{reason}. {hint}", summary=summary)


def accessible(svg: str, *, title: str, desc: str = "", max_width: float = _svg.MAX_WIDTH) -> str:
    """Graphviz's SVG made like the kit's own: a title and description first, `role` and
    `aria-label` on the root, marked as a diagram, and sized in px no wider than
    `max_width` (its viewBox keeps the drawing whole)."""
    root = _ROOT.search(svg)
    if root is None:
        return svg
    sizes = {name: float(value) * 4 / 3 for name, value in _POINTS.findall(root.group(0))}
    tag = " ".join(_POINTS.sub("", root.group(0))[:-1].split())
    if len(sizes) == 2:
        width, height = _svg.fit(sizes["width"], sizes["height"], max_width)
        tag += f' width="{_svg.num(width)}" height="{_svg.num(height)}"'
    tag += f' role="img" aria-label="{_svg.esc(title)}" class="{_svg.DIAGRAM_CLASS}">'
    return svg[: root.start()] + "\n".join([tag, *_svg.alternative(title, desc)]) + svg[root.end() :]


def clean_svg(svg: str) -> str:
    """Graphviz's SVG without the XML prologue and comments (which carry its version)."""
    return _COMMENT.sub("", _PROLOGUE.sub("", svg)).replace("\r\n", "\n").strip() + "\n"


def _run_dot(source: str) -> tuple[str | None, str]:
    """(svg, "") from Graphviz, or (None, why not). Its stderr is captured, never shown."""
    try:
        import graphviz
    except ImportError:
        return None, "the graphviz Python package is not installed"
    try:
        raw = graphviz.Source(source).pipe(format="svg", encoding="utf-8", quiet=True)
    except graphviz.ExecutableNotFound:
        return None, "Graphviz `dot` not found"
    except graphviz.CalledProcessError as exc:
        return None, f"Graphviz `dot` failed (exit status {exc.returncode})"
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"Graphviz `dot` could not run ({type(exc).__name__})"
    return clean_svg(raw), ""
