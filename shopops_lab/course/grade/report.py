"""The gradebook on disk: grades.csv, grades.json, feedback/<submission>.html, manual.csv,
and the merge of a filled-in manual.csv (`--manual`) into the next run.

A written answer's rubric reaches the instructor in manual.csv (`rubric`: its elements,
numbered, with their points) and grades.json; the instructor marks what the answer has in
`found` (the elements' numbers, `1 3`, or `-` for none) and/or writes a `score`; without a
score, the found elements' points are the score. The learner's feedback names each element
as found or not once it is scored, and says nothing of the rubric before.

Every file is written whole (temp file + rename), so a crash mid-run leaves the previous
gradebook, never half of one. Nothing written here quotes a test cell or a check's source:
feedback shows what the checks say to the learner, and the learner's own answers.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from shopops_lab import __version__
from shopops_lab.course.build import write_atomic
from shopops_lab.course.grade.key import Key, Kind, RubricElement
from shopops_lab.course.grade.results import ExerciseResult, Mark, Status, SubmissionResult
from shopops_lab.errors import BadArgumentError

GRADES_CSV = "grades.csv"
GRADES_JSON = "grades.json"
MANUAL_CSV = "manual.csv"
FEEDBACK = "feedback"
MANUAL_FIELDS = ("submission", "student", "lab", "grade_id", "max_points", "score", "found", "rubric", "answer")
NONE_FOUND = "-"  # `found` when the answer has none of the rubric's elements


def prepare_out(out: str | Path | None) -> Path:
    """The gradebook folder, created if need be; refused unless this user can write in it."""
    if not out:
        raise BadArgumentError(
            field="--out", problem="is missing", fix="name a folder for the gradebook, e.g. --out grades/"
        )
    path = Path(out)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".shopops-write-test-"):
            pass
    except OSError as exc:
        raise BadArgumentError(
            field=f"--out {out}",
            problem=f"is not a folder this user can write ({exc.strerror or exc})",
            fix="pass a folder you can write to, e.g. --out ~/grades/lab01",
        ) from None
    for name, folder in ((GRADES_CSV, False), (GRADES_JSON, False), (MANUAL_CSV, False), (FEEDBACK, True)):
        found = path / name
        if found.exists() and found.is_dir() != folder:
            raise BadArgumentError(
                field=f"--out {out}",
                problem=f"holds {name}, which is {'a file' if folder else 'a folder'}",
                fix=f"move {found} away, or pass another folder",
            )
    return path


def points(value: float | None) -> str:
    """2.0 -> "2", 2.5 -> "2.5", None -> "" (a cell still waiting for the instructor)."""
    return "" if value is None else f"{value:g}"


# --- manual scores --------------------------------------------------------------------------


@dataclass(frozen=True)
class ManualScores:
    """Scores an instructor wrote into manual.csv, by (submission, grade_id), and the rubric
    elements marked found."""

    scores: dict[tuple[str, str], float]
    source: str = ""
    found: dict[tuple[str, str], tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def read(cls, path: str | Path, key: Key) -> ManualScores:
        """Read a filled-in manual.csv; refuse a score that is not a number in 0..max."""
        where = f"--manual {path}"
        try:
            text = Path(path).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadArgumentError(
                field=where,
                problem=f"cannot be read ({type(exc).__name__}: {exc})",
                fix=f"pass the {MANUAL_CSV} a previous run wrote, with the score column filled in",
            ) from None
        rows = csv.DictReader(io.StringIO(text))
        missing = [name for name in ("submission", "grade_id", "score") if name not in (rows.fieldnames or ())]
        if missing:
            raise BadArgumentError(
                field=where,
                problem=f"has no {', '.join(missing)} column",
                fix=f"start from the {MANUAL_CSV} a previous run wrote and fill in its score column",
            )
        maxima = {(lab, cell.grade_id): cell.points for lab, master in key.masters.items() for cell in master.graded}
        rubrics = {(lab, cell.grade_id): cell.rubric for lab, master in key.masters.items() for cell in master.graded}
        scores: dict[tuple[str, str], float] = {}
        marked: dict[tuple[str, str], tuple[int, ...]] = {}
        for line, row in enumerate(rows, start=2):
            cell = (row.get("lab") or "", row.get("grade_id") or "")
            found = _found(row.get("found") or "", rubrics.get(cell, ()), f"{where}, line {line}, found")
            raw = (row.get("score") or "").strip()
            if found is not None:
                marked[(row["submission"], row["grade_id"])] = found
                if not raw:
                    raw = points(sum(rubrics[cell][number - 1].points for number in found) + 0.0)
            if not raw:
                continue
            most = maxima.get(cell)
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
                    field=f"{where}, line {line}, score",
                    problem=f"is {raw!r}, not a number from 0 to {points(most)}",
                    fix="write the points earned, or leave it empty to grade it later",
                )
            scores[(row["submission"], row["grade_id"])] = score
        return cls(scores=scores, source=str(path), found=marked)

    def apply(self, results: Sequence[SubmissionResult]) -> tuple[list[SubmissionResult], list[tuple[str, str]]]:
        """`results` with the hand-given points in, and the scores that matched nothing."""
        used: set[tuple[str, str]] = set()
        merged = []
        for result in results:
            exercises = []
            for exercise in result.exercises:
                found = (result.submission.name, exercise.grade_id)
                if exercise.kind is Kind.MANUAL and found in self.scores:
                    used.add(found)
                    score = self.scores[found]
                    exercise = replace(
                        exercise,
                        mark=Mark.GRADED_BY_HAND,
                        points=score,
                        found=self.found.get(found),
                        message=f"Graded by hand: {points(score)} of {points(exercise.max_points)}.",
                    )
                exercises.append(exercise)
            merged.append(replace(result, exercises=tuple(exercises)))
        return merged, sorted(set(self.scores) - used)


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


# --- the gradebook --------------------------------------------------------------------------


def _columns(results: Sequence[SubmissionResult], key: Key) -> list[tuple[str, str, str]]:
    """(lab, grade_id, header) per graded cell of every lab in this run, in lab and cell order;
    a grade_id two labs share is written lab/grade_id."""
    labs = sorted({result.lab for result in results if result.lab in key.masters})
    cells = [(lab, cell.grade_id) for lab in labs for cell in key.masters[lab].graded]
    shared = {grade_id for grade_id, count in Counter(gid for _, gid in cells).items() if count > 1}
    return [(lab, gid, f"{lab}/{gid}" if gid in shared else gid) for lab, gid in cells]


def _max_points(result: SubmissionResult, key: Key) -> float | None:
    if result.exercises:
        return result.max_points
    master = key.masters.get(result.lab or "")
    return master.max_points if master else None


def grades_csv(results: Sequence[SubmissionResult], key: Key) -> str:
    columns = _columns(results, key)
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(
        [
            "submission",
            "student",
            "lab",
            "status",
            "reason",
            *(header for _, _, header in columns),
            "points",
            "max_points",
            "needs_manual",
            "notes",
        ]
    )
    maxima = {(lab, cell.grade_id): cell.points for lab, master in key.masters.items() for cell in master.graded}
    labs = {lab for lab, _, _ in columns}
    total = points(key.masters[next(iter(labs))].max_points) if len(labs) == 1 else ""
    writer.writerow(
        [
            "max",
            "",
            "/".join(sorted(labs)),
            "",
            "",
            *(points(maxima[(lab, gid)]) for lab, gid, _ in columns),
            total,
            total,
            "",
            "",
        ]
    )
    for result in results:
        by_id = {exercise.grade_id: exercise for exercise in result.exercises}
        cells = [points(by_id[gid].points) if lab == result.lab and gid in by_id else "" for lab, gid, _ in columns]
        writer.writerow(
            [
                result.submission.name,
                result.submission.student,
                result.lab or "",
                result.status.value,
                result.reason,
                *cells,
                points(result.points),
                points(_max_points(result, key)),
                "yes" if result.needs_manual else "no",
                "; ".join((*result.notes, *result.restored)),
            ]
        )
    return stream.getvalue()


def grades_json(results: Sequence[SubmissionResult], key: Key, confinement: str = "") -> str:
    labs = sorted({result.lab for result in results if result.lab in key.masters})
    document = {
        "kit_version": __version__,
        "confinement": confinement,  # how learner code was confined (`Confinement.describe`)
        "labs": {
            lab: {
                "title": key.masters[lab].title,
                "version": key.masters[lab].version,
                "max_points": key.masters[lab].max_points,
                "hand_graded_points": key.masters[lab].manual_points,
                "cells": [
                    {
                        "grade_id": c.grade_id,
                        "kind": c.kind.value,
                        "points": c.points,
                        **(
                            {"rubric": [{"element": r.element, "points": r.points} for r in c.rubric]}
                            if c.rubric
                            else {}
                        ),
                    }
                    for c in key.masters[lab].graded
                ],
            }
            for lab in labs
        },
        "summary": summary_counts(results),
        "submissions": [
            {
                "submission": result.submission.name,
                "student": result.submission.student,
                "lab": result.lab,
                "file": result.submission.path.as_posix(),
                "status": result.status.value,
                "reason": result.reason,
                "points": result.points,
                "max_points": _max_points(result, key),
                "needs_manual": result.needs_manual,
                "exercises": [
                    {
                        "grade_id": e.grade_id,
                        "title": e.title,
                        "kind": e.kind.value,
                        "mark": e.mark.value,
                        "points": e.points,
                        "max_points": e.max_points,
                        "message": e.message,
                        "evidence": list(e.evidence),
                        **({"found": list(e.found)} if e.found is not None else {}),
                    }
                    for e in result.exercises
                ],
                "restored": list(result.restored),
                "notes": list(result.notes),
            }
            for result in results
        ],
    }
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def manual_csv(results: Sequence[SubmissionResult]) -> str:
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(MANUAL_FIELDS)
    for result in results:
        for exercise in result.exercises:
            if exercise.kind is Kind.MANUAL and (exercise.mark is not Mark.NOT_ATTEMPTED):
                found = "" if exercise.found is None else " ".join(map(str, exercise.found)) or NONE_FOUND
                writer.writerow(
                    [
                        result.submission.name,
                        result.submission.student,
                        result.lab,
                        exercise.grade_id,
                        points(exercise.max_points),
                        points(exercise.points),
                        found,
                        rubric_text(exercise.rubric),
                        exercise.answer,
                    ]
                )
    return stream.getvalue()


STYLE = (
    "body{font:15px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}\n"
    "table{border-collapse:collapse;width:100%}"
    "td,th{border-bottom:1px solid #ddd;padding:.4rem;text-align:left;vertical-align:top}\n"
    ".correct{color:#1a7f37}.incorrect,.error,.timeout{color:#b42318}.muted{color:#666}"
    "pre{white-space:pre-wrap;background:#f6f8fa;padding:.6rem}"
)


def feedback_html(result: SubmissionResult, key: Key) -> str:
    """One learner's page: per exercise the points and what the check said; written answers
    as they were submitted, "to be graded by hand" until the instructor scores them."""
    e = html.escape
    title = f"Lab {result.lab} — {result.title}" if result.title else f"Lab {result.lab or '?'}"
    total = _max_points(result, key)
    parts = [
        f"<!doctype html><html lang=en><meta charset=utf-8><title>{e(title)}: feedback</title><style>{STYLE}</style>",
        f"<h1>{e(title)}</h1><p>Feedback for <b>{e(result.submission.student)}</b> "
        f"({e(result.submission.name)}): <b>{points(result.points)}</b> of {points(total)} points"
        + (" so far; your instructor reads the written answers." if result.needs_manual else ".")
        + "</p>",
    ]
    if result.status is Status.INVALID:  # the problem, not the fix (the fix is the instructor's to make)
        problem = result.reason.split(" (fix: ")[0]
        parts.append(f"<p class=error>This submission could not be graded: {e(problem)}</p>")
    if result.status is Status.GRADER_ERROR:  # the grader's own failure: nothing the learner did
        parts.append(
            "<p class=error>The grader itself failed on part of this submission, so that part is not graded "
            "yet; nothing was taken off for it. Your instructor will grade it again.</p>"
        )
    if result.exercises:
        parts.append("<table><tr><th>exercise</th><th>points</th><th>result</th></tr>")
        for exercise in result.exercises:
            parts.append(_exercise_row(exercise))
        parts.append("</table>")
    for heading, lines in (("Put back from the original notebook", result.restored), ("Notes", result.notes)):
        if lines:
            parts.append(f"<h2>{heading}</h2><ul>" + "".join(f"<li>{e(line)}</li>" for line in lines) + "</ul>")
    parts.append("</html>\n")
    return "\n".join(parts)


def _exercise_row(exercise: ExerciseResult) -> str:
    e = html.escape
    css = exercise.mark.value.replace(" ", "-")
    said = "" if exercise.message.rstrip(".").lower() == exercise.mark.value else f" {e(exercise.message)}"
    body = f"<span class={css}>{e(exercise.mark.value)}</span>.{said}"
    if exercise.evidence:
        body += "<pre>" + e("\n".join(exercise.evidence)) + "</pre>"
    if exercise.kind is Kind.MANUAL and exercise.answer:
        body += "<p class=muted>Your answer:</p><pre>" + e(exercise.answer) + "</pre>"
    if exercise.rubric and exercise.found is not None:  # after grading only: the rubric is the answer key
        body += (
            "<p class=muted>What your instructor looked for:</p><ul>"
            + "".join(
                f"<li>{'✓ found' if number in exercise.found else '✗ not found'} ({points(item.points)}): "
                f"{e(item.element)}</li>"
                for number, item in enumerate(exercise.rubric, 1)
            )
            + "</ul>"
        )
    score = f"{points(exercise.points) or '–'} / {points(exercise.max_points)}"
    return f"<tr><td>{e(exercise.label)}</td><td>{score}</td><td>{body}</td></tr>"


def summary_counts(results: Iterable[SubmissionResult]) -> dict[str, int]:
    counts = Counter(result.status for result in results)
    return {status.value: counts.get(status, 0) for status in Status}


def write(out: Path, results: Sequence[SubmissionResult], key: Key, confinement: str = "") -> None:
    """Every output file; grades.csv last, so its presence means the run finished.
    `confinement`: how learner code was confined, for grades.json."""
    for result in results:
        write_atomic(out / FEEDBACK / f"{result.submission.name}.html", feedback_html(result, key))
    write_atomic(out / MANUAL_CSV, manual_csv(results))
    write_atomic(out / GRADES_JSON, grades_json(results, key, confinement))
    write_atomic(out / GRADES_CSV, grades_csv(results, key))
