"""The term view: each student's standing in every lab and their total, and the same grades
as an LMS imports them.

* `term.csv`: a row per student, per lab its points (late penalty taken) and its standing
  (`Standing`: "not attempted", "needs hand grading", "stale hand score", "invalid" ... are
  different words, never one 0), then the total and the most the labs give;
* `canvas.csv`: Canvas's gradebook shape (Student, ID, SIS User ID, SIS Login ID, Section, a
  column per lab, a "Points Possible" row);
* `moodle.csv`: Moodle's grade import shape (an identifier column, a column per lab).

An LMS export leaves a lab's cell empty until its grade is final (no written answer waiting
for the instructor, no stale hand score, and a status that charges its points: not one this
module does not know, such as the grader itself failing), so a partial grade is never
imported as the grade.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from shopops_lab.course.grade.hand import points
from shopops_lab.course.grade.key import Kind
from shopops_lab.course.grade.results import Mark, Status, SubmissionResult


class Standing(StrEnum):
    """Where a student stands in one lab (a row's status other than graded is shown as it is)."""

    GRADED = "graded"
    NEEDS_HAND = "needs hand grading"
    STALE = "stale hand score"
    NOT_ATTEMPTED = "not attempted"
    NOT_SUBMITTED = "not submitted"


def standing(result: SubmissionResult | None) -> str:
    """One lab's standing for the term view: the row's status when it is not `graded` (so a
    status this module does not know is still shown by its own name), else what is left."""
    if result is None:
        return Standing.NOT_SUBMITTED.value
    if result.status is not Status.GRADED:
        return str(result.status.value)
    if any(exercise.stale for exercise in result.exercises):
        return Standing.STALE.value
    if result.needs_manual:
        return Standing.NEEDS_HAND.value
    if result.exercises and all(exercise.mark is Mark.NOT_ATTEMPTED for exercise in result.exercises):
        return Standing.NOT_ATTEMPTED.value
    return Standing.GRADED.value


# The statuses whose points are the grade (a timeout or a crash costs the learner what it cost);
# any other (the grader itself failing on the submission, say) charges nothing until graded again.
CHARGED = frozenset({Status.GRADED, Status.TIMEOUT, Status.INVALID, Status.ERROR})


def final(result: SubmissionResult) -> bool:
    """Is the row's grade final: a status that charges its points, and nothing left for the
    instructor to score?"""
    stale = any(e.stale for e in result.exercises if e.kind is Kind.MANUAL)
    return result.status in CHARGED and not result.needs_manual and not stale


@dataclass(frozen=True)
class Scored:
    """One row as the term view counts it: its points after the late penalty, and its words."""

    result: SubmissionResult
    points: float
    late: str
    penalty: float


def term_rows(
    scored: Sequence[Scored], labs: Mapping[str, str], maxima: Mapping[str, float], names: Mapping[str, str]
) -> list[list[str]]:
    """term.csv: a header, then a row per student (sorted): name, per lab (`labs`: lab ->
    title) points and standing, total and the most the labs give."""
    by_student: dict[str, dict[str, Scored]] = {}
    for row in scored:
        by_student.setdefault(row.result.submission.student, {})[row.result.lab or ""] = row
    header = ["student", "name"]
    for lab in labs:
        header += [f"lab {lab}", f"lab {lab} standing"]
    table = [[*header, "total", "max_points"]]
    most = sum(maxima[lab] for lab in labs)
    for student in sorted(by_student):
        line = [student, names.get(student, student)]
        total = 0.0
        for lab in labs:
            one = by_student[student].get(lab)
            words = standing(one.result if one else None)
            if one is not None and one.late:
                words += f"; {one.late}" + (f", {points(one.penalty)} taken off" if one.penalty else "")
            line += ["" if one is None else points(one.points), words]
            total += one.points if one is not None else 0.0
        table.append([*line, points(total), points(most)])
    return table


def canvas_rows(
    scored: Sequence[Scored], labs: Mapping[str, str], maxima: Mapping[str, float], names: Mapping[str, str]
) -> list[list[str]]:
    """canvas.csv, as Canvas's gradebook export and import shape it: a column per lab (its
    title; Canvas creates the assignment on import), "Points Possible", a row per student."""
    fixed = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    table = [[*fixed, *labs.values()], ["    Points Possible", "", "", "", "", *(points(maxima[lab]) for lab in labs)]]
    for student, cells in _final_by_student(scored, labs):
        table.append([names.get(student, student), "", student, "", "", *cells])
    return table


def moodle_rows(scored: Sequence[Scored], labs: Mapping[str, str], names: Mapping[str, str]) -> list[list[str]]:
    """moodle.csv, for Moodle's grade import (map "ID number" to the users' ID number, and
    each lab's column to its grade item)."""
    table = [["ID number", "Full name", *labs.values()]]
    for student, cells in _final_by_student(scored, labs):
        table.append([student, names.get(student, student), *cells])
    return table


def _final_by_student(scored: Sequence[Scored], labs: Mapping[str, str]) -> list[tuple[str, list[str]]]:
    by_student: dict[str, dict[str, Scored]] = {}
    for row in scored:
        by_student.setdefault(row.result.submission.student, {})[row.result.lab or ""] = row
    found = []
    for student in sorted(by_student):
        cells = []
        for lab in labs:
            one = by_student[student].get(lab)
            cells.append(points(one.points) if one is not None and final(one.result) else "")
        found.append((student, cells))
    return found
