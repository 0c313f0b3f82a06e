"""Knowledge checks: one question, a few options, and an explanation for every option,
so a wrong pick teaches why it is wrong rather than just saying so.

`Quiz.answer(i)` is the logic (no browser needed); the widget is radio buttons and a
Check button over it. Options keep the order they were written in, unless a
`shuffle_seed` is given, which shuffles them the same way on every run.

Build a quiz away from the cell that shows it: a cell's source sits right above its
buttons, and `answer_index` and the explanations would give the answer away. The labs
keep theirs in `shopops_lab.checks.labNN` (e.g. `quiz = lab01.SAME_KEY_QUIZ`).
"""

from __future__ import annotations

import html
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shopops_lab import arguments, live
from shopops_lab.errors import BadArgumentError
from shopops_lab.widgets import _ui

__all__ = ["Feedback", "Quiz"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Feedback:
    correct: bool
    message: str

    def __str__(self) -> str:
        return self.message


class Quiz(_ui.LiveWidget):
    """A multiple-choice question. `answer_index` and `explanations` follow `options`
    as written; `options` on the object is the order shown (shuffled only if seeded)."""

    def __init__(
        self,
        question: str,
        options: Sequence[str],
        answer_index: int,
        explanations: Sequence[str],
        *,
        hint: str | None = None,
        shuffle_seed: int | None = None,
    ) -> None:
        if not isinstance(question, str) or not question.strip():
            raise BadArgumentError(field="question", problem=f"is {question!r}", fix="pass the question text")
        if not _listlike(options) or len(options) < 2 or not all(isinstance(o, str) and o for o in options):
            raise BadArgumentError(
                field="options", problem=f"is {options!r}", fix="pass a list of at least two non-empty strings"
            )
        arguments.whole(
            "answer_index",
            answer_index,
            0,
            f"pass the index of the right option, 0 to {len(options) - 1}",
            most=len(options) - 1,
        )
        if (
            not _listlike(explanations)
            or len(explanations) != len(options)
            or not all(isinstance(e, str) and e for e in explanations)
        ):
            raise BadArgumentError(
                field="explanations",
                problem=f"is {explanations!r} for {len(options)} options",
                fix="pass one non-empty explanation per option, in the same order",
            )
        if hint is not None and (not isinstance(hint, str) or not hint):
            raise BadArgumentError(field="hint", problem=f"is {hint!r}", fix="pass a string or leave it out")
        order = list(range(len(options)))
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(order)
        self.question = question
        self.options = tuple(options[i] for i in order)
        self.explanations = tuple(explanations[i] for i in order)
        self.answer_index = order.index(answer_index)
        self.hint = hint

    def answer(self, index: int) -> Feedback:
        """Feedback for picking option `index` (in the order shown)."""
        arguments.whole(
            "index", index, 0, f"pass the number of an option, 0 to {len(self.options) - 1}", most=len(self.options) - 1
        )
        if index == self.answer_index:
            return Feedback(correct=True, message=f"Correct. {self.explanations[index]}")
        message = f"Not quite. {self.explanations[index]}"
        if self.hint:
            message += f" Hint: {self.hint}"
        return Feedback(correct=False, message=message)

    def text(self) -> str:
        """The question and numbered options as plain text."""
        return "\n".join([self.question, *(f"  {i}. {o}" for i, o in enumerate(self.options))])

    def build(self, w: Any) -> Any:
        choices = w.RadioButtons(
            options=[(o, i) for i, o in enumerate(self.options)], value=None, layout=w.Layout(width="max-content")
        )
        check = w.Button(description="Check")
        result = w.HTML()

        def clicked(_: Any) -> None:
            if choices.value is None:
                result.value = live.region("<p>Pick an option first.</p>")
                return
            feedback = self.answer(choices.value)
            mark = "✅" if feedback.correct else "❌"
            result.value = live.region(f"<p>{mark} {html.escape(feedback.message)}</p>")

        check.on_click(clicked)
        return w.VBox([w.HTML(f"<p><b>{html.escape(self.question)}</b></p>"), choices, check, result])

    def static_html(self, note: str = _ui.NO_WIDGETS) -> str:
        items = "".join(f"<li>{html.escape(o)}</li>" for o in self.options)
        return (
            f'<p><b>{html.escape(self.question)}</b></p><ol start="0">{items}</ol>'
            f"<p><em>Answer with <code>quiz.answer(n)</code>. {html.escape(note)}</em></p>"
        )

    def label(self) -> str:
        return f"Quiz: {self.question}"

    def __repr__(self) -> str:
        return f"Quiz({self.question!r}, {len(self.options)} options)"


def _listlike(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str)
