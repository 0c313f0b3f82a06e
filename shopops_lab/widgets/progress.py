"""The course at a glance: every lab's time and points, and which exercises you have passed.

`ProgressView` reads the record every passing check leaves (`shopops_lab.progress`: a file
on your machine, or the browser's storage in JupyterLite) when it is drawn, so running its
cell again shows what changed. A saved notebook keeps only the course itself (labs, minutes,
points): what you passed is yours, not part of the notebook.
"""

from __future__ import annotations

import html
from typing import Any

from shopops_lab import live, progress
from shopops_lab.widgets import _ui

__all__ = ["ProgressView"]

_STYLE = """<style>
.shopops-progress table { border-collapse: collapse; }
.shopops-progress th, .shopops-progress td { border: 1px solid #bbb; padding: 0.2rem 0.5rem; text-align: left;
  vertical-align: top; }
.shopops-progress ul { margin: 0; padding-left: 1.1rem; }
.shopops-progress .shopops-scroll { overflow-x: auto; max-width: 100%; }
</style>"""


class ProgressView(_ui.LiveWidget):
    """The labs in a table: minutes, points, and each graded part, ticked once passed."""

    def __init__(self) -> None:
        self.labs = progress.course()

    def summary(self, passed: frozenset[str]) -> str:
        """One sentence: how many of the checked exercises, and their points, are passed."""
        checked = [g for lab in self.labs for g in lab.graded if g.checked]
        done = [g for g in checked if g.id in passed]
        hand = sum(g.points for lab in self.labs for g in lab.graded if not g.checked)
        return (
            f"You have passed {len(done)} of the course's {len(checked)} checked exercises "
            f"({sum(g.points for g in done):g} of {_points(sum(g.points for g in checked))}); "
            f"written answers ({_points(hand)}) are graded by hand."
        )

    def table_html(self, passed: frozenset[str] | None) -> str:
        """The course as a table; with `passed`, each exercise marked done or not yet."""
        rows = []
        for lab in self.labs:
            parts = "".join(f"<li>{_part(graded, passed)}</li>" for graded in lab.graded)
            rows.append(
                f"<tr><th scope='row'>{html.escape(lab.title)}</th><td>about {lab.minutes} min</td>"
                f"<td>{_points(lab.points)}</td><td><ul>{parts}</ul></td></tr>"
            )
        columns = ("lab", "time", "points", "graded parts")
        head = "<tr>" + "".join(f"<th scope='col'>{name}</th>" for name in columns) + "</tr>"
        total = sum(lab.minutes for lab in self.labs)
        return (
            f"{_STYLE}<div class='shopops-scroll'><table><caption>The course: {len(self.labs)} labs, about "
            f"{total // 60} h {total % 60:02d} min</caption><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
            "</div>"
        )

    def view_html(self, passed: frozenset[str]) -> str:
        return live.region(f"<p>{html.escape(self.summary(passed))}</p>") + self.table_html(passed)

    def text(self, passed: frozenset[str]) -> str:
        """The same as plain text."""
        lines = [self.summary(passed)]
        for lab in self.labs:
            lines.append(f"{lab.title}: about {lab.minutes} min, {_points(lab.points)}")
            lines.extend(f"   {_mark(g, passed)} {_name(g)} ({_points(g.points)})" for g in lab.graded)
        return "\n".join(lines)

    def build(self, w: Any) -> Any:
        shown = w.HTML(
            live.region("<p>Reading your progress…</p>") + self.table_html(None),
            _dom_classes=["shopops-progress"],
        )

        def arrived(passed: frozenset[str]) -> None:
            shown.value = self.view_html(passed)

        progress.read(arrived)
        return shown

    def display(self) -> None:
        """The live table; without ipywidgets, the table as it stands now (`progress.passed`)."""
        if _ui.ipywidgets() is None:
            from IPython.display import display

            passed = progress.passed()
            html_text = f"<div class='shopops-progress'>{self.view_html(passed)}</div>"
            display({"text/html": html_text, "text/plain": self.text(passed)}, raw=True)
            return
        super().display()

    def static_html(self, note: str = _ui.NO_WIDGETS) -> str:
        return (
            f"<div class='shopops-progress'><p><em>{html.escape(note)} It then ticks the exercises you "
            f"passed.</em></p>{self.table_html(None)}</div>"
        )

    def label(self) -> str:
        return f"ProgressView: the course's {len(self.labs)} labs, their time and points, and what you passed"

    def __repr__(self) -> str:
        return f"ProgressView({len(self.labs)} labs)"


def _part(graded: progress.Graded, passed: frozenset[str] | None) -> str:
    what = f"{html.escape(_name(graded))} ({_points(graded.points)})"
    if passed is None or not graded.checked:
        return what
    return f"{_mark(graded, passed)} {what}"


def _name(graded: progress.Graded) -> str:
    return f"{graded.id} {graded.title}" if graded.checked else graded.title


def _mark(graded: progress.Graded, passed: frozenset[str]) -> str:
    if not graded.checked:
        return "✍"
    return "✅ passed:" if graded.id in passed else "⬜ not yet:"


def _points(points: float) -> str:
    return f"{points:g} point{'s' if points != 1 else ''}"
