"""A schedule you can step through: one moment at a time, what every worker, the store and
the customer's side looked like, with the step that breaks the promise marked.

`Stepper` is the picture's data (the moments, in order) and draws itself three ways, so it
works wherever a notebook shows it: as HTML with ◀ ▶ buttons and the arrow keys (a short
script, run where the output is trusted: JupyterLab and JupyterLite run it for a cell run in
this session), each step said in a live region; the same HTML without the script lists every
moment (a saved notebook, a viewer that runs no scripts); and as plain text. The moments come
from the schedule explorer (`shopops_lab.explore`, read by `shopops_lab.snapshot`); nothing
here knows a queue or a worker.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["Moment", "Stepper", "Table"]

STEPPER_CLASS = "shopops-stepper"


@dataclass(frozen=True, kw_only=True, slots=True)
class Table:
    """Rows of the world's state (the queue's items, the store's records), headed by `columns`."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Moment:
    """One moment of a schedule: after step `step` (0: before the first), or, `inside` a
    learner call, right after one of its kit calls took effect. `words` say what happened."""

    step: int
    words: str
    clock: str = ""
    workers: tuple[tuple[str, str], ...] = ()
    tables: tuple[Table, ...] = ()
    effects: tuple[str, ...] = ()
    problem: str | None = None
    inside: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Stepper:
    """A schedule's moments in order, walked with ◀ ▶; `steps` counts the schedule's steps."""

    title: str
    moments: tuple[Moment, ...]
    steps: int

    def label(self, moment: Moment) -> str:
        """'Step 3 of 5', 'Step 3 of 5, inside the call', or 'Before the first step'."""
        if moment.step == 0:
            return "Before the first step"
        where = ", inside the call" if moment.inside else ""
        return f"Step {moment.step} of {self.steps}{where}"

    def said(self, moment: Moment) -> str:
        """What the live region says when the moment is shown: where, when, what, what broke."""
        clock = f" ({moment.clock})" if moment.clock else ""
        broken = f" The promise breaks here: {moment.problem}" if moment.problem else ""
        return f"{self.label(moment)}{clock}: {moment.words}.{broken}".replace("..", ".")

    def __str__(self) -> str:
        """The text form: every moment with the workers, tables and effects it shows."""
        lines = [self.title]
        for moment in self.moments:
            lines.append(self.said(moment))
            if moment.workers:
                lines.append("   workers: " + "; ".join(f"{name} {what}" for name, what in moment.workers))
            for table in moment.tables:
                lines.append(f"   {table.title}: " + ("; ".join(", ".join(row) for row in table.rows) or "empty"))
            lines.append("   effects so far: " + ("; ".join(moment.effects) or "none"))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Stepper {self.title!r}: {len(self.moments)} moments, {self.steps} steps>"

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": self.html()}

    def html(self) -> str:
        """The HTML: every moment listed, and the script that turns the list into ◀ ▶."""
        items = "\n".join(self._moment_html(n, moment) for n, moment in enumerate(self.moments))
        name = html.escape(self.title)
        return (
            f'<div class="{STEPPER_CLASS}" role="group" aria-label="{name}">{_STYLE}'
            f'<p class="shopops-stepper-title"><strong>{name}</strong></p>'
            '<div class="shopops-stepper-controls" hidden>'
            '<button type="button" class="shopops-back" aria-label="previous step">◀</button>'
            '<span class="shopops-stepper-position" aria-hidden="true"></span>'
            '<button type="button" class="shopops-next" aria-label="next step">▶</button>'
            "<small>or the ← → keys (Home, End) while a button has the focus</small></div>"
            '<div class="shopops-stepper-live" role="status" aria-live="polite" aria-atomic="true"></div>'
            f'<ol class="shopops-moments">\n{items}\n</ol>'
            f"<script>{_script()}</script></div>"
        )

    def _moment_html(self, n: int, moment: Moment) -> str:
        label = self.label(moment)
        broken = ""
        if moment.problem:
            broken = (
                f'<p class="shopops-broken"><strong>⚠ The promise breaks here:</strong> '
                f"{html.escape(moment.problem)}</p>"
            )
        clock = f" · {html.escape(moment.clock)}" if moment.clock else ""
        workers = "".join(f"<li><b>{html.escape(w)}</b>: {html.escape(what)}</li>" for w, what in moment.workers)
        parts = [f'<div class="shopops-part"><strong>Workers</strong><ul>{workers}</ul></div>'] if workers else []
        parts.extend(_table_html(table) for table in moment.tables)
        effects = "".join(f"<li>{html.escape(e)}</li>" for e in moment.effects) or "<li>none yet</li>"
        parts.append(f'<div class="shopops-part"><strong>Effects so far</strong><ul>{effects}</ul></div>')
        cls = "shopops-moment shopops-breaks" if moment.problem else "shopops-moment"
        return (
            f'<li class="{cls}" data-label="{html.escape(label)}" data-say="{html.escape(self.said(moment))}">'
            f"<p><b>{html.escape(label)}</b>{clock}: {html.escape(moment.words)}</p>{broken}"
            f'<div class="shopops-parts">{"".join(parts)}</div></li>'
        )


def _table_html(table: Table) -> str:
    head = "".join(f'<th scope="col">{html.escape(c)}</th>' for c in table.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in table.rows)
    if not table.rows:
        return f'<div class="shopops-part"><strong>{html.escape(table.title)}</strong><p>empty</p></div>'
    return (
        f'<div class="shopops-part shopops-wide"><table><caption><strong>{html.escape(table.title)}</strong></caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


_STYLE = """<style>
.shopops-stepper { max-width: 60rem; }
.shopops-stepper .shopops-moments { padding-left: 0; list-style: none; margin: 0.4rem 0; }
.shopops-stepper .shopops-moment { border-left: 4px solid #7a7a7a; padding: 0.2rem 0.6rem; margin: 0.4rem 0; }
.shopops-stepper .shopops-moment[hidden] { display: none; }
.shopops-stepper .shopops-breaks { border-left: 6px solid #b00020; }
.shopops-stepper .shopops-broken { color: #8a0018; }
.shopops-stepper .shopops-parts { display: flex; flex-wrap: wrap; gap: 0.3rem 1.5rem; }
.shopops-stepper .shopops-part ul { margin: 0.1rem 0; padding-left: 1.2rem; }
.shopops-stepper .shopops-wide { overflow-x: auto; max-width: 100%; }
.shopops-stepper table { border-collapse: collapse; font-size: 0.9em; margin: 0; }
.shopops-stepper table caption { text-align: left; }
.shopops-stepper table th, .shopops-stepper table td { border: 1px solid #bbb; padding: 0.1rem 0.4rem;
  text-align: left !important; }
.shopops-stepper .shopops-stepper-live { position: absolute; width: 1px; height: 1px; overflow: hidden;
  clip: rect(0 0 0 0); white-space: nowrap; }
.shopops-stepper .shopops-stepper-controls { display: flex; gap: 0.5rem; align-items: center; flex-wrap: wrap; }
.shopops-stepper .shopops-stepper-controls[hidden] { display: none; }
.shopops-stepper button { font-size: 1.1em; min-width: 2.75rem; min-height: 2.75rem; cursor: pointer; }
.shopops-stepper button[aria-disabled="true"] { opacity: 0.5; cursor: default; }
</style>"""


@cache
def _script() -> str:
    return Path(__file__).with_name("stepper.js").read_text(encoding="utf-8")
