"""What a check shows in a notebook: its verdict, said to a screen reader, and help one click
away (`present`, the one thing `Exercise.check` calls).

Under a verdict that is not "correct" sit three buttons: the next hint, the counterexample (the
shortest breaking schedule the explorer found, walked step by step: `viz.stepper`), and the
model answer, behind the same confirmation as `solution()`. The typed calls (`hint(n)`,
`solution(confirm=True)`) stay as they were; the buttons call them. A pass is recorded as
progress (`shopops_lab.progress`).

A button's output goes to the widget, not to the cell: Jupyter routes what a callback displays
to the widget that asked, and saves a notebook's cell outputs without it. So a model answer
shown by its button leaves its mark (the `shopops_lab` metadata `solution(confirm=True)` writes,
which the grader reads) in the next cell the learner runs, in a line that says so.

This module never imports the checks (they import it): the exercise and its result are used
by what they offer (`id`, `name`, `hint`, `solution`; `verdict`, `evidence`).
"""

from __future__ import annotations

import html
import sys
from typing import Any

from shopops_lab import live, progress, refusals
from shopops_lab.widgets import _ui

__all__ = ["HelpBar", "present"]

_VERDICT_STYLE = (
    "<style>.shopops-verdict pre, .shopops-said pre { margin: 0; white-space: pre-wrap; word-break: normal; "
    "overflow-wrap: break-word; font-size: var(--jp-code-font-size, 13px); }</style>"
)


def present(exercise: Any, result: Any) -> None:
    """Show `result`, the verdict on `exercise`: as text where no notebook runs, else as a
    status region a screen reader announces, with the help buttons under anything but a pass.
    Records a pass. Never raises (but the learner's Ctrl-C): at worst it prints."""
    try:
        if result.correct:
            progress.record(exercise.id)
        shell = _shell()
        if shell is None:
            print(result)
            return
        from IPython.display import display

        text = str(result)
        display({"text/plain": text, "text/html": verdict_html(text)}, raw=True)
        if not result.correct:
            found = refusals.matching(result.evidence) if result.verdict.value == "incorrect" else None
            HelpBar(exercise, found).display()
    except KeyboardInterrupt:
        raise
    except Exception:  # noqa: BLE001 - a check's verdict must reach the learner even if its face fails
        print(result)


def verdict_html(text: str) -> str:
    """A verdict as a status region (the page's announcer says it), in the cell's own monospace."""
    return f"{_VERDICT_STYLE}{live.region(f'<pre>{html.escape(text)}</pre>', cls='shopops-verdict')}{live.script()}"


def typed(exercise: Any) -> str:
    """How the learner types this exercise: 'lab01.exercise', found in its check module."""
    module = sys.modules.get(f"shopops_lab.checks.lab{exercise.id[:2]}")
    for name, value in vars(module).items() if module is not None else ():
        if value is exercise:
            return f"lab{exercise.id[:2]}.{name}"
    return "exercise"


class HelpBar(_ui.LiveWidget):
    """Buttons for the next hint, the counterexample (when the check found one) and the model
    answer, over one area where what they show appears."""

    def __init__(self, exercise: Any, counterexample: Any = None) -> None:
        self.exercise = exercise
        self.counterexample = counterexample
        self.level = 0  # the last hint shown
        self.revealed = False

    # ------------------------------------------------------------------ what the buttons do (no browser needed)
    def next_hint(self) -> str:
        """The next hint's words (the last one again once all are shown)."""
        return self.show_hint()[0]

    def show_hint(self) -> tuple[str, list[tuple[dict[str, Any], dict[str, Any]]]]:
        """`hint(level)` for the next level: its words, and the other outputs it displayed (the
        last level's diagram); its record goes into the next cell that runs, as a reveal's does."""
        self.level = min(self.level + 1, max(len(self.exercise.hints), 1))
        words, outputs = _printed(self.exercise.hint, self.level)
        marks = [(data, metadata) for data, metadata in outputs if isinstance(metadata.get("shopops_lab"), dict)]
        if marks:  # in a notebook, hint() displays its words as the record
            words = "\n".join(filter(None, [words, *(str(data.get("text/plain", "")) for data, _ in marks)]))
            _mark_next_cell(marks[-1][1], f"hint {self.level} to {self.exercise.name} was shown")
        return words, [output for output in outputs if output not in marks]

    def ask_for_answer(self) -> str:
        """The confirmation `solution()` asks for."""
        return _printed(self.exercise.solution)[0]

    def reveal(self) -> tuple[str, list[tuple[dict[str, Any], dict[str, Any]]]]:
        """`solution(confirm=True)`: its printed words and its outputs (data, metadata), which
        carry the mark the grader reads; the mark is left in the next cell that runs."""
        words, outputs = _printed(self.exercise.solution, confirm=True)
        marks = [metadata for _, metadata in outputs if isinstance(metadata.get("shopops_lab"), dict)]
        if marks:
            self.revealed = True
            _mark_next_cell(marks[-1], f"the model answer to {self.exercise.name} was shown")
        return words, outputs

    # ------------------------------------------------------------------ the widget
    def build(self, w: Any) -> Any:
        from IPython.display import display

        area = w.Output(layout=w.Layout(width="100%"))
        hints = max(len(self.exercise.hints), 1)
        wide = w.Layout(width="auto")
        hint = w.Button(description=f"Hint 1 of {hints}", tooltip="show the next hint", layout=wide)
        answer = w.Button(description="Show the model answer", tooltip="asks you to confirm first", layout=wide)
        confirm = w.Button(
            description="Yes, show the model answer", button_style="warning", layout=w.Layout(width="auto")
        )
        confirm.layout.display = "none"

        def say(text: str) -> None:
            area.clear_output()
            with area:
                display({"text/plain": text, "text/html": _said_html(text)}, raw=True)

        def on_hint(_: Any) -> None:
            words, pictures = self.show_hint()
            say(words)
            with area:
                for data, metadata in pictures:
                    display(data, raw=True, metadata=metadata)
            done = self.level >= hints
            hint.description = f"Hint {self.level} of {hints} again" if done else f"Hint {self.level + 1} of {hints}"

        def on_answer(_: Any) -> None:
            say(self.ask_for_answer())
            confirm.layout.display = "" if not self.revealed else "none"

        def on_confirm(_: Any) -> None:
            words, outputs = self.reveal()
            confirm.layout.display = "none"
            area.clear_output()
            with area:
                if words:
                    display({"text/plain": words, "text/html": _said_html(words)}, raw=True)
                for data, metadata in outputs:
                    display(data, raw=True, metadata=metadata)
                display({"text/plain": _RECORDED, "text/html": _said_html(_RECORDED)}, raw=True)

        hint.on_click(on_hint)
        answer.on_click(on_answer)
        confirm.on_click(on_confirm)
        buttons = [hint]
        if self.counterexample is not None:
            show = w.Button(
                description="Show the counterexample", tooltip="step through the breaking schedule", layout=wide
            )

            def on_counterexample(_: Any) -> None:
                area.clear_output()
                with area:
                    display(self.counterexample.stepper())

            show.on_click(on_counterexample)
            buttons.append(show)
        buttons += [answer, confirm]
        row = w.HBox(buttons, layout=w.Layout(flex_flow="row wrap"))
        return w.VBox([row, area], _dom_classes=["shopops-help"])

    def static_html(self, note: str = _ui.NO_WIDGETS) -> str:
        name = html.escape(typed(self.exercise))
        walk = ""
        if self.counterexample is not None:  # the viewer needs no widgets: it is there already
            walk = self.counterexample.stepper().html()
        return (
            f"<p><em>Help with {html.escape(self.exercise.name)}: <code>{name}.hint(1)</code> and up, "
            f"<code>{name}.solution()</code>. {html.escape(note)}</em></p>{walk}"
        )

    def label(self) -> str:
        found = ", the counterexample" if self.counterexample is not None else ""
        return f"Help for {self.exercise.name}: hints{found}, the model answer (buttons)"


_RECORDED = (
    "Your notebook records that you saw it: the next cell you run carries the mark (a button's output "
    "stays with the button, so the mark goes there)."
)


def _said_html(text: str) -> str:
    return _VERDICT_STYLE + live.region(f"<pre>{html.escape(text)}</pre>", cls="shopops-said") + live.script()


def _shell() -> Any:
    """The running IPython shell, or None (a plain Python, a script)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _printed(call: Any, *args: Any, **kwargs: Any) -> tuple[str, list[tuple[dict[str, Any], dict[str, Any]]]]:
    """What `call(*args, **kwargs)` printed, and the rich outputs it displayed (data, metadata)."""
    from IPython.utils.capture import capture_output

    with capture_output(display=True) as captured:
        call(*args, **kwargs)
    return captured.stdout.rstrip("\n"), [(dict(o.data), dict(o.metadata or {})) for o in captured.outputs]


def _mark_next_cell(metadata: dict[str, Any], what: str) -> None:
    """Leave `metadata` (a hint's or the reveal's record) in an output of the next cell the
    learner runs: a button's own output is not saved with the notebook. `what` was shown."""
    shell = _shell()
    if shell is None:
        return
    from IPython.display import display

    line = f"📌 Recorded here: {what} by its button."

    def mark(*_: Any) -> None:
        shell.events.unregister("pre_run_cell", mark)
        display({"text/plain": line}, raw=True, metadata=metadata)

    shell.events.register("pre_run_cell", mark)
