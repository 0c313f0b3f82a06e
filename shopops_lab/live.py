"""Results a screen reader hears: one page-wide live region that the kit's outputs speak through.

A live region is only announced when its *content* changes; one inserted with its text
already in it (a new output, a widget's HTML replaced whole) is mostly not. So the kit keeps
one region that never leaves the page, made by the first kit output that runs `SCRIPT`, and
says each verdict, widget result and step there: an output marks what it wants said with
`data-shopops-live` (`region`), and the script says it when the output appears, whether it
came with the script or later (an ipywidgets HTML value changing). The marked element is a
`role="status"` region itself, so the accessibility tree shows each result as one.

Outputs render their scripts only when trusted (run in this session); a saved notebook
opened again shows the same words, unannounced until run.
"""

from __future__ import annotations

import html
from functools import cache
from pathlib import Path

__all__ = ["ANNOUNCER_CLASS", "region", "script"]

ANNOUNCER_CLASS = "shopops-announcer"


@cache
def _source() -> str:
    return Path(__file__).with_name("live.js").read_text(encoding="utf-8")


def script() -> str:
    """The announcer (`live.js`) as a <script> tag, for an HTML output the notebook renders."""
    return f"<script>{_source()}</script>"


def region(inner_html: str, *, cls: str = "", tag: str = "div") -> str:
    """`inner_html` in a status region (polite) whose words the announcer says when it appears."""
    classes = f' class="{html.escape(cls)}"' if cls else ""
    return f'<{tag}{classes} role="status" aria-live="polite" data-shopops-live>{inner_html}</{tag}>'
