"""Hand scores, tied to the answer they scored.

The instructor scores written answers in manual.csv (`score`, or the rubric elements
`found`, and a `comment` for the learner) and passes it back with `--manual`. Each row
carries `answer_hash`, the hash of the answer it shows (`results.answer_hash`); a score is
taken only for that answer. When the answer changes (a regrade of a new submission), the
score is kept aside as stale: not counted, shown in grades.csv, and flagged in the next
manual.csv, until the instructor scores the new answer. An empty cell changes nothing, so
an older manual.csv never takes back a later score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from shopops_lab.course.grade.key import Kind, RubricElement
from shopops_lab.course.grade.results import ExerciseResult, Mark, SubmissionResult
from shopops_lab.course.grade.sheets import Sheet
from shopops_lab.course.grade.spreadsheet import read_rows, unsafe
from shopops_lab.errors import BadArgumentError

MANUAL_FIELDS = (
    "submission",
    "student",
    "lab",
    "grade_id",
    "exercise",
    "max_points",
    "score",
    "found",
    "comment",
    "stale",
    "answer_hash",
    "rubric",
    "answer",
)
NONE_FOUND = "-"  # `found` when the answer has none of the rubric's elements


def points(value: float | None) -> str:
    """2.0 -> "2", 2.5 -> "2.5", None -> "" (a cell still waiting for the instructor)."""
    return "" if value is None else f"{value:g}"


def settled(
    exercise: ExerciseResult,
    *,
    hand: float | None,
    found: tuple[int, ...] | None,
    comment: str,
    scored_hash: str,
) -> ExerciseResult:
    """A written answer with the instructor's score, found elements and comment: counted if
    the score was given for this answer (`scored_hash`), kept aside as stale if not."""
    exercise = replace(exercise, hand=hand, found=found, comment=comment, scored_hash=scored_hash)
    if hand is None:
        return exercise
    if exercise.stale:
        return replace(
            exercise,
            mark=Mark.BY_HAND,
            points=None,
            found=None,
            message="Your answer changed after it was graded by hand: your instructor grades it again.",
        )
    return replace(
        exercise,
        mark=Mark.GRADED_BY_HAND,
        points=hand,
        message=f"Graded by hand: {points(hand)} of {points(exercise.max_points)}.",
    )


def carried(old: SubmissionResult, new: SubmissionResult) -> SubmissionResult:
    """`new` (a regrade) with the hand scores and comments `old` had: counted where the
    answer is the one they scored, stale where it changed."""
    before = {exercise.grade_id: exercise for exercise in old.exercises if exercise.kind is Kind.MANUAL}
    exercises = []
    for exercise in new.exercises:
        was = before.get(exercise.grade_id)
        if exercise.kind is Kind.MANUAL and was is not None and (was.hand is not None or was.comment):
            exercise = settled(
                exercise, hand=was.hand, found=was.found, comment=was.comment, scored_hash=was.scored_hash
            )
        exercises.append(exercise)
    return replace(new, exercises=tuple(exercises))


@dataclass(frozen=True, slots=True)
class Entry:
    """One filled-in row of manual.csv: a score (None: none given), the found elements, a
    comment (None: none given), and the hash of the answer the row showed ('' if none)."""

    score: float | None
    found: tuple[int, ...] | None
    comment: str | None
    answer_hash: str


@dataclass(frozen=True)
class Applied:
    """What merging manual.csv did: the rows, and what it could not take in (a score for no
    written answer, a score for an answer that has changed since)."""

    results: list[SubmissionResult]
    unmatched: list[tuple[str, str]]
    stale: list[tuple[str, str]]


@dataclass(frozen=True)
class ManualScores:
    """Scores an instructor wrote into manual.csv, by (submission, grade_id)."""

    entries: dict[tuple[str, str], Entry]
    source: str = ""

    @property
    def scores(self) -> dict[tuple[str, str], float]:
        return {where: entry.score for where, entry in self.entries.items() if entry.score is not None}

    @classmethod
    def read(cls, path: str | Path, sheets: Mapping[str, Sheet]) -> ManualScores:
        """Read a filled-in manual.csv (its labs' cells in `sheets`); refuse a score that is
        not a number in 0..max, or a found element the rubric does not have."""
        maxima = {(lab, cell.grade_id): cell.points for lab, sheet in sheets.items() for cell in sheet.cells}
        rubrics = {(lab, cell.grade_id): cell.rubric for lab, sheet in sheets.items() for cell in sheet.cells}
        where = f"--manual {path}"
        rows = read_rows(
            path, field=where, fix="pass the manual.csv a previous run wrote, with the score column filled in"
        )
        missing = [name for name in ("submission", "grade_id", "score") if name not in (rows.fieldnames or ())]
        if missing:
            raise BadArgumentError(
                field=where,
                problem=f"has no {', '.join(missing)} column",
                fix="start from the manual.csv a previous run wrote and fill in its score column",
            )
        entries: dict[tuple[str, str], Entry] = {}
        for line, row in enumerate(rows, start=2):
            cell = (row.get("lab") or "", row.get("grade_id") or "")
            rubric = rubrics.get(cell, ())
            found = _found(row.get("found") or "", rubric, f"{where}, line {line}, found")
            raw = (row.get("score") or "").strip()
            if found is not None and not raw:
                raw = points(sum(rubric[number - 1].points for number in found) + 0.0)
            comment = unsafe((row.get("comment") or "").strip()) or None
            if not raw and found is None and comment is None:
                continue
            score = _score(raw, maxima.get(cell), row, f"{where}, line {line}, score") if raw else None
            entries[(row["submission"], row["grade_id"])] = Entry(
                score, found, comment, (row.get("answer_hash") or "").strip()
            )
        return cls(entries=entries, source=str(path))

    def apply(self, results: Sequence[SubmissionResult]) -> Applied:
        """`results` with the hand-given scores and comments in; those that matched no written
        answer, and those given for an answer that has changed since (kept aside as stale)."""
        used: set[tuple[str, str]] = set()
        stale: list[tuple[str, str]] = []
        merged = []
        for result in results:
            exercises = []
            for exercise in result.exercises:
                where = (result.submission.key, exercise.grade_id)
                entry = self.entries.get(where)
                if exercise.kind is Kind.MANUAL and entry is not None:
                    used.add(where)
                    exercise = self._applied(exercise, entry)
                    if entry.score is not None and entry.answer_hash not in ("", exercise.answer_hash):
                        stale.append(where)
                exercises.append(exercise)
            merged.append(replace(result, exercises=tuple(exercises)))
        return Applied(merged, sorted(set(self.entries) - used), stale)

    @staticmethod
    def _applied(exercise: ExerciseResult, entry: Entry) -> ExerciseResult:
        comment = exercise.comment if entry.comment is None else entry.comment
        if entry.score is None:
            return settled(
                exercise, hand=exercise.hand, found=exercise.found, comment=comment, scored_hash=exercise.scored_hash
            )
        scored = entry.answer_hash or exercise.answer_hash  # a row typed by hand, without a hash: this answer
        if scored != exercise.answer_hash and exercise.hand is not None and not exercise.stale:
            scored, hand, found = exercise.scored_hash, exercise.hand, exercise.found  # an older file: this one stays
        else:
            hand, found = entry.score, entry.found
        return settled(exercise, hand=hand, found=found, comment=comment, scored_hash=scored)


def _score(raw: str, most: float | None, row: Mapping[str, str], where: str) -> float:
    if most is None:
        try:
            most = float(row.get("max_points") or "")
        except ValueError:
            most = math.inf
    try:
        score = float(raw)
    except ValueError:
        score = math.nan
    if not 0 <= score <= most:
        raise BadArgumentError(
            field=where,
            problem=f"is {raw!r}, not a number from 0 to {points(most)}",
            fix="write the points earned, or leave it empty to grade it later",
        )
    return score


def _found(raw: str, rubric: Sequence[RubricElement], where: str) -> tuple[int, ...] | None:
    """The rubric elements a `found` cell names (numbers from 1, or `-` for none); None if empty."""
    text = raw.replace(",", " ").strip()
    if not text:
        return None
    if not rubric:
        raise BadArgumentError(
            field=where,
            problem=f"is {raw!r}, but this answer has no rubric",
            fix="leave found empty and write the score",
        )
    if text == NONE_FOUND:
        return ()
    numbers = []
    for token in text.split():
        if not (token.isdigit() and 1 <= int(token) <= len(rubric)):
            raise BadArgumentError(
                field=where,
                problem=f"is {raw!r}: {token!r} is not an element of the rubric",
                fix=f"write the numbers of the elements found, from 1 to {len(rubric)} "
                f"(e.g. '1 3'), or '{NONE_FOUND}' for none",
            )
        numbers.append(int(token))
    return tuple(sorted(set(numbers)))


def rubric_text(rubric: Sequence[RubricElement]) -> str:
    """A rubric as manual.csv shows it: `1. (0.5) the element` per line."""
    return "\n".join(f"{number}. ({points(item.points)}) {item.element}" for number, item in enumerate(rubric, 1))


def manual_rows(results: Sequence[SubmissionResult]) -> list[list[str]]:
    """manual.csv's rows: every written answer (not a blank one), its score, found elements,
    comment, a stale score's points, and the hash that ties a score to the answer shown."""
    rows = []
    for result in results:
        for exercise in result.exercises:
            if exercise.kind is Kind.MANUAL and exercise.mark is not Mark.NOT_ATTEMPTED:
                found = "" if exercise.found is None else " ".join(map(str, exercise.found)) or NONE_FOUND
                stale = (
                    f"{points(exercise.hand)} was given to an earlier answer: score this one" if exercise.stale else ""
                )
                rows.append(
                    [
                        result.submission.key,
                        result.submission.student,
                        result.lab or "",
                        exercise.grade_id,
                        exercise.title,
                        points(exercise.max_points),
                        points(exercise.points),
                        found,
                        exercise.comment,
                        stale,
                        exercise.answer_hash,
                        rubric_text(exercise.rubric),
                        exercise.answer,
                    ]
                )
    return rows
