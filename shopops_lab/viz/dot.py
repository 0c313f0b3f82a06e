"""Turn DOT text into a picture, and never crash a notebook doing it.

Graphviz's `dot` is a separate program: a laptop may lack it, and JupyterLite (Python
in the browser) cannot start programs at all. So `render` uses `dot` when it can and
otherwise falls back to a picture drawn in pure Python (when the caller has one) or to
the DOT source itself, with one line saying how to get Graphviz. Either way the result
is a `Diagram` that a notebook cell displays as its last expression.

Graphviz stamps its version into a comment; `render` strips comments and the XML
prologue so the same input gives the same SVG on every run.
"""
from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable

from shopops_lab.errors import BadArgumentError

__all__ = ["Diagram", "INSTALL_HINT", "NO_DOT_ENV", "dot_available", "render"]

NO_DOT_ENV = "SHOPOPS_NO_DOT"
"""Set this environment variable to 1 to draw every diagram without Graphviz."""

INSTALL_HINT = ("Diagrams need Graphviz: `sudo apt-get install graphviz` (Debian/Ubuntu) or "
                "`brew install graphviz` (macOS). In JupyterLite diagrams need graphviz; "
                "this page shows the DOT source.")

ENGINES = ("auto", "fallback")

_COMMENT = re.compile(r"<!--.*?-->\s*", re.DOTALL)
_PROLOGUE = re.compile(r"<\?xml.*?\?>\s*|<!DOCTYPE.*?>\s*", re.DOTALL)


@dataclass(frozen=True, kw_only=True, slots=True)
class Diagram:
    """A picture for a notebook cell: its SVG when there is one, else the DOT source.

    `engine` says who drew it: "dot" (Graphviz), "builtin" (the kit's own pure-Python
    layout), or "source" (no picture; the DOT text is shown instead). `note` explains
    anything a reader should know (a fallback, a truncated view).
    """

    title: str
    svg: str | None
    source: str | None = None
    engine: str = "builtin"
    note: str = ""

    def _repr_svg_(self) -> str | None:
        return self.svg

    def _repr_html_(self) -> str | None:
        if self.svg is not None:
            return None
        note = f"<p>{html.escape(self.note)}</p>" if self.note else ""
        return f"{note}<pre>{html.escape(self.source or '')}</pre>"

    def __repr__(self) -> str:
        shown = "no picture, DOT source only" if self.svg is None else f"SVG drawn by {self.engine}"
        note = f"; {self.note}" if self.note else ""
        return f"<Diagram {self.title!r}: {shown}{note}>"


def dot_available(which: Callable[[str], str | None] = shutil.which) -> bool:
    """True when Graphviz's `dot` can run here (and `SHOPOPS_NO_DOT` is not set)."""
    if os.environ.get(NO_DOT_ENV, "").strip() not in ("", "0"):
        return False
    if sys.platform == "emscripten":  # Pyodide / JupyterLite: no subprocesses
        return False
    return which("dot") is not None


def render(source: str, *, title: str = "diagram", engine: str = "auto",
           fallback_svg: str | None = None) -> Diagram:
    """Draw DOT `source`. engine="auto" uses Graphviz when `dot_available()`;
    engine="fallback" never does (what a machine without Graphviz shows). Without
    Graphviz the picture is `fallback_svg` if given, else the DOT source itself."""
    if not isinstance(source, str) or not source.strip():
        raise BadArgumentError(field="source", problem=f"is {source!r}",
                               fix="pass DOT text, e.g. 'digraph { ready -> leased }'")
    if engine not in ENGINES:
        raise BadArgumentError(field="engine", problem=f"is {engine!r}",
                               fix=f"pass one of {', '.join(map(repr, ENGINES))}")
    reason = "Graphviz drawing switched off" if engine == "fallback" else ""
    if not reason:
        if dot_available():
            svg, reason = _run_dot(source)
            if svg is not None:
                return Diagram(title=title, svg=svg, source=source, engine="dot")
        else:
            reason = "Graphviz `dot` not found"
    if fallback_svg is not None:
        return Diagram(title=title, svg=fallback_svg, source=source, engine="builtin")
    return Diagram(title=title, svg=None, source=source, engine="source",
                   note=f"{reason}. {INSTALL_HINT}")


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
