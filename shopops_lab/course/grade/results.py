"""What grading found: per exercise a mark, points and the check's message; per submission
a status and the reason for it. Plain frozen data, so the gradebook writers need nothing else."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum

from shopops_lab.course.grade.key import Kind, RubricElement
from shopops_lab.course.grade.submissions import Submission


class Status(StrEnum):
    """How grading a submission went (a column of grades.csv)."""

    GRADED = "graded"  # every exercise was checked
    TIMEOUT = "timeout"  # an exercise, or the whole notebook, ran past its limit
    INVALID = "invalid"  # not a notebook of a lab in the key
    ERROR = "error"  # the learner's code ended the grading process (crash, exit)
    GRADER_ERROR = "grader error"  # the grader itself failed: nothing charged, grade it again once fixed


class Mark(StrEnum):
    """One exercise's outcome: the check's verdict, or why there is none."""

    CORRECT = "correct"
    INCORRECT = "incorrect"
    NOT_ATTEMPTED = "not attempted"
    TIMEOUT = "timeout"
    ERROR = "error"
    NOT_GRADED = "not graded"  # the grader failed before it could check this: no points either way
    BY_HAND = "to be graded by hand"
    GRADED_BY_HAND = "graded by hand"


@dataclass(frozen=True, slots=True)
class ExerciseResult:
    """One graded cell of one submission. `points` is None while a written answer waits for
    the instructor; `answer` is the written answer's text (empty for code); `rubric` its
    elements, and `found` the numbers (from 1) of those the instructor marked found (None
    until the instructor scored it through manual.csv). `hand` is the instructor's score and
    `scored_hash` the `answer_hash` of the answer it was given for: when the answer changed
    since, the score is `stale` (kept, shown, never counted); `comment` reaches the learner."""

    grade_id: str
    kind: Kind
    mark: Mark
    points: float | None
    max_points: float
    message: str
    evidence: tuple[str, ...] = ()
    answer: str = ""
    title: str = ""  # what the learner knows the exercise as ("Exercise 01.1 (...)"), else empty
    rubric: tuple[RubricElement, ...] = ()
    found: tuple[int, ...] | None = None
    hand: float | None = None
    scored_hash: str = ""
    comment: str = ""

    @property
    def label(self) -> str:
        return self.title or self.grade_id

    @property
    def answer_hash(self) -> str:
        return answer_hash(self.answer)

    @property
    def stale(self) -> bool:
        return self.hand is not None and self.scored_hash != self.answer_hash


def answer_hash(text: str) -> str:
    """What a hand score is tied to: the answer's text, its trailing spaces and blank edges
    aside (so re-saving a notebook does not make a score stale), hashed (SHA-256, 16 hex)."""
    lines = "\n".join(line.rstrip() for line in text.strip().splitlines())
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class SubmissionResult:
    """One row of the gradebook."""

    submission: Submission
    lab: str | None
    status: Status
    reason: str
    exercises: tuple[ExerciseResult, ...] = ()
    restored: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    title: str = ""

    @property
    def points(self) -> float:
        return sum(exercise.points or 0 for exercise in self.exercises)

    @property
    def max_points(self) -> float:
        return sum(exercise.max_points for exercise in self.exercises)

    @property
    def needs_manual(self) -> bool:
        return any(exercise.mark is Mark.BY_HAND for exercise in self.exercises)
