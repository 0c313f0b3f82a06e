"""The learner-facing check: run the learner's code in scenarios, say correct /
incorrect / not attempted, and name what went wrong without giving the answer.

`Exercise.check()` only prints (for ungraded cells). `Exercise.grade()` raises an
`AssertionError` carrying the same friendly message unless the answer is correct, and
returns nothing, which is what nbgrader needs from an autograded test cell.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable


class Verdict(StrEnum):
    CORRECT = "correct"
    INCORRECT = "incorrect"
    NOT_ATTEMPTED = "not attempted"


_MARKS = {Verdict.CORRECT: "✅", Verdict.INCORRECT: "❌", Verdict.NOT_ATTEMPTED: "⏳"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Result:
    """What a check found: a verdict, one friendly sentence, and the evidence behind it."""

    exercise: str
    verdict: Verdict
    message: str
    evidence: tuple[str, ...] = ()

    @property
    def correct(self) -> bool:
        return self.verdict is Verdict.CORRECT

    def __str__(self) -> str:
        lines = [f"{_MARKS[self.verdict]} {self.exercise}: {self.verdict.value}. {self.message}"]
        lines.extend(f"   {line}" for line in self.evidence)
        return "\n".join(lines)


class NotAttempted(Exception):
    """The learner's answer still raises NotImplementedError (or is missing)."""


class Wrong(Exception):
    """A scenario found a problem; the message is shown to the learner as is."""

    def __init__(self, message: str, evidence: tuple[str, ...] | list[str] = ()) -> None:
        super().__init__(message)
        self.evidence = tuple(evidence)


def call_answer(answer: Any, *args: Any, **kwargs: Any) -> Any:
    """Call the learner's function, turning the pristine stub into `NotAttempted`."""
    if answer is None:
        raise NotAttempted()
    try:
        return answer(*args, **kwargs)
    except NotImplementedError:
        raise NotAttempted() from None


@dataclass(frozen=True, kw_only=True)
class Exercise:
    """One exercise: its scenarios (`run` raises `Wrong` or `NotAttempted`, returns a
    message on success) and its hints, from a nudge to the shape of the answer."""

    id: str
    title: str
    run: Callable[..., str]
    hints: tuple[str, ...] = field(default=())

    def result(self, *answer: Any) -> Result:
        name = f"Exercise {self.id} ({self.title})"
        try:
            message = self.run(*answer)
        except NotAttempted:
            return Result(exercise=name, verdict=Verdict.NOT_ATTEMPTED,
                          message="Write your answer where the cell says `# YOUR CODE HERE` (delete the line below it "
                                  "that raises NotImplementedError), run that cell, then run this one again.")
        except Wrong as wrong:
            return Result(exercise=name, verdict=Verdict.INCORRECT, message=str(wrong), evidence=wrong.evidence)
        except Exception as exc:  # the learner's code crashed: show that, not a traceback
            return Result(exercise=name, verdict=Verdict.INCORRECT,
                          message=f"your code raised {type(exc).__name__}: {exc}")
        return Result(exercise=name, verdict=Verdict.CORRECT, message=message)

    def check(self, *answer: Any) -> None:
        """Print how the answer does. Never raises: safe in any cell."""
        print(self.result(*answer))

    def grade(self, *answer: Any) -> None:
        """For graded test cells: raise AssertionError with the friendly message unless correct."""
        result = self.result(*answer)
        if not result.correct:
            raise AssertionError(str(result))

    def hint(self, level: int = 1) -> None:
        """Print hint `level` (1 = a nudge, higher = closer to the shape of the answer)."""
        if not self.hints:
            print("No hints for this one: re-read the cell above the exercise.")
            return
        level = max(1, min(int(level), len(self.hints)))
        more = f" (hint({level + 1}) says more)" if level < len(self.hints) else ""
        print(f"Hint {level} of {len(self.hints)}{more}: {self.hints[level - 1]}")
