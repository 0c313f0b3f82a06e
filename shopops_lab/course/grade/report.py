"""The gradebook's files, written from its record (`gradebook.Gradebook`), every one of them
each time, so they always agree:

* grades.csv: a row per submission (key `student/labNN`), a column per graded cell, the
  marks in words (`2 correct; 1 not attempted`), lateness, penalty, points, notes;
* manual.csv: every written answer to score by hand (`hand.py`);
* feedback/<student>/labNN.html: per learner, the checks' words, hand scores and comments;
* term.csv, canvas.csv, moodle.csv: the term view and LMS imports (`term.py`);
* files.csv: every file a run found: graded, superseded, unmatched (and why) or skipped;
* grades.json: the record itself, written last.

Every file is written whole (temp file + rename) with the permissions the umask gives, so
a crash mid-write leaves the previous gradebook's files, never half of one. Nothing written
here quotes a test cell or a check's source: feedback shows what the checks say to the
learner, and the learner's own answers. A CSV cell that a spreadsheet would read as a
formula (it starts with = + - @, a tab or a carriage return) is written after a `'`.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from shopops_lab.course.build import write_atomic
from shopops_lab.course.grade import term
from shopops_lab.course.grade.gradebook import GRADES_JSON, MANIFEST, Gradebook, manifest, record, row_json
from shopops_lab.course.grade.hand import MANUAL_FIELDS, manual_rows, points
from shopops_lab.course.grade.key import Kind
from shopops_lab.course.grade.late import lateness
from shopops_lab.course.grade.results import ExerciseResult, Status, SubmissionResult
from shopops_lab.course.grade.spreadsheet import csv_text
from shopops_lab.errors import BadArgumentError

GRADES_CSV = "grades.csv"
MANUAL_CSV = "manual.csv"
TERM_CSV = "term.csv"
CANVAS_CSV = "canvas.csv"
MOODLE_CSV = "moodle.csv"
FILES_CSV = "files.csv"
FEEDBACK = "feedback"
FILES = (MANIFEST, GRADES_CSV, GRADES_JSON, MANUAL_CSV, TERM_CSV, CANVAS_CSV, MOODLE_CSV, FILES_CSV)


def check_out(path: Path) -> Path:
    """The gradebook folder, created if need be; refused unless this user can write in it and
    the gradebook's names are free for files (and `feedback` for a folder)."""
    import tempfile

    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".shopops-write-test-"):
            pass
    except OSError as exc:
        raise BadArgumentError(
            field=f"--out {path}",
            problem=f"is not a folder this user can write ({exc.strerror or exc})",
            fix="pass a folder you can write to, e.g. --out ~/grades/lab01",
        ) from None
    for name, folder in (*((name, False) for name in FILES), (FEEDBACK, True)):
        found = path / name
        if found.exists() and found.is_dir() != folder:
            raise BadArgumentError(
                field=f"--out {path}",
                problem=f"holds {name}, which is {'a file' if folder else 'a folder'}",
                fix=f"move {found} away, or pass another folder",
            )
    return path


def _marks(result: SubmissionResult) -> str:
    """`2 correct; 1 not attempted; 1 to be graded by hand`: the marks apart, in words."""
    counts = Counter("stale hand score" if exercise.stale else exercise.mark.value for exercise in result.exercises)
    return "; ".join(f"{count} {mark}" for mark, count in sorted(counts.items()))


def _stale_notes(result: SubmissionResult) -> list[str]:
    return [
        f"{exercise.label}: the hand score {points(exercise.hand)} of {points(exercise.max_points)} was given "
        "to an earlier answer (stale: not counted; score the new answer in manual.csv)"
        for exercise in result.exercises
        if exercise.stale
    ]


class Writer:
    """Renders every file of a gradebook; rows sorted by student, then lab."""

    def __init__(self, book: Gradebook, confinement: str = "") -> None:
        self.book = book
        self.confinement = confinement  # how learner code was confined, for grades.json
        self.rows = sorted(book.rows.values(), key=lambda r: (r.submission.student, r.lab or ""))
        self.scored = [self._scored(result) for result in self.rows]

    def _scored(self, result: SubmissionResult) -> term.Scored:
        sheet = self.book.sheets.get(result.lab or "")
        late = lateness(result.submission, sheet.due if sheet else None)
        most = self._max(result)
        penalty = late.penalty(self.book.policy, result.points, most or 0.0)
        return term.Scored(result, result.points - penalty, late.text(), penalty)

    def _max(self, result: SubmissionResult) -> float | None:
        if result.exercises:
            return result.max_points
        sheet = self.book.sheets.get(result.lab or "")
        return sheet.max_points if sheet else None

    def columns(self) -> list[tuple[str, str, str]]:
        """(lab, grade_id, header) per graded cell of every lab in the gradebook; a grade_id
        two labs share is written lab/grade_id."""
        cells = [(lab, cell.grade_id) for lab, sheet in self.book.sheets.items() for cell in sheet.cells]
        shared = {gid for gid, count in Counter(gid for _, gid in cells).items() if count > 1}
        return [(lab, gid, f"{lab}/{gid}" if gid in shared else gid) for lab, gid in cells]

    def grades_csv(self) -> str:
        columns = self.columns()
        maxima = {(lab, c.grade_id): c.points for lab, sheet in self.book.sheets.items() for c in sheet.cells}
        labs = list(self.book.sheets)
        total = points(self.book.sheets[labs[0]].max_points) if len(labs) == 1 else ""
        head = ["submission", "student", "lab", "status", "reason", "file"]
        tail = ["marks", "late", "penalty", "points", "max_points", "needs_manual", "notes"]
        table = [
            [*head, *(header for _, _, header in columns), *tail],
            ["max", "", "/".join(labs), "", "", "", *(points(maxima[(lab, gid)]) for lab, gid, _ in columns)]
            + ["", "", "", total, total, "", ""],
        ]
        for row in self.scored:
            result = row.result
            by_id = {exercise.grade_id: exercise for exercise in result.exercises}
            cells = [points(by_id[gid].points) if lab == result.lab and gid in by_id else "" for lab, gid, _ in columns]
            table.append(
                [
                    result.submission.key,
                    result.submission.student,
                    result.lab or "",
                    result.status.value,
                    result.reason,
                    result.submission.file,
                    *cells,
                    _marks(result),
                    row.late,
                    points(row.penalty) if row.penalty else "",
                    points(row.points),
                    points(self._max(result)),
                    "yes" if result.needs_manual else "no",
                    "; ".join((*result.notes, *result.restored, *_stale_notes(result))),
                ]
            )
        return csv_text(table)

    def manual_csv(self) -> str:
        return csv_text([list(MANUAL_FIELDS), *manual_rows(self.rows)])

    def files_csv(self) -> str:
        table = [["file", "outcome", "detail", "submission", "student", "lab", "found by", "submitted"]]
        for item in self.book.files.values():
            known = item.submission
            table.append(
                [
                    item.file,
                    item.outcome.value,
                    item.detail,
                    known.key if known else "",
                    known.student if known else "",
                    (known.lab or "") if known else "",
                    known.layout.value if known else "",
                    known.submitted.isoformat() if known and known.submitted else "",
                ]
            )
        return csv_text(table)

    def labs(self) -> dict[str, str]:
        return {lab: sheet.name for lab, sheet in self.book.sheets.items()}

    def maxima(self) -> dict[str, float]:
        return {lab: sheet.max_points for lab, sheet in self.book.sheets.items()}

    def record(self) -> str:
        rows = [
            row_json(
                row.result,
                self.book,
                {"late": row.late, "penalty": row.penalty, "final_points": row.points, "marks": _marks(row.result)},
            )
            for row in self.scored
        ]
        return record(self.book, rows, summary_counts(self.rows), self.confinement)

    def write(self, out: Path) -> None:
        """Every file; the manifest first (the folder is a gradebook from then on) and the
        record last."""
        write_atomic(out / MANIFEST, manifest())
        for row in self.scored:
            page = feedback_html(row, self.book.name(row.result.submission.student), self._max(row.result))
            _write_changed(out / feedback_path(row.result), page)
        names = self.book.names
        write_atomic(out / MANUAL_CSV, self.manual_csv())
        write_atomic(out / FILES_CSV, self.files_csv())
        write_atomic(out / TERM_CSV, csv_text(term.term_rows(self.scored, self.labs(), self.maxima(), names)))
        write_atomic(out / CANVAS_CSV, csv_text(term.canvas_rows(self.scored, self.labs(), self.maxima(), names)))
        write_atomic(out / MOODLE_CSV, csv_text(term.moodle_rows(self.scored, self.labs(), names)))
        write_atomic(out / GRADES_CSV, self.grades_csv())
        write_atomic(out / GRADES_JSON, self.record())


def _write_changed(path: Path, text: str) -> None:
    """`write_atomic`, unless the file holds `text` already: a merge rewrites only the pages
    that changed (a term's gradebook holds hundreds)."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    write_atomic(path, text)


def feedback_path(result: SubmissionResult) -> Path:
    """feedback/<student>/labNN.html (a student's name made safe for a file name)."""
    student = re.sub(r"[^\w@+ .-]", "_", result.submission.student).lstrip(".") or "_"
    return Path(FEEDBACK) / student / f"lab{result.lab or '??'}.html"


STYLE = (
    "body{font:15px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}\n"
    "table{border-collapse:collapse;width:100%}"
    "td,th{border-bottom:1px solid #ddd;padding:.4rem;text-align:left;vertical-align:top}\n"
    ".correct{color:#1a7f37}.incorrect,.error,.timeout{color:#b42318}.muted{color:#666}"
    "pre{white-space:pre-wrap;background:#f6f8fa;padding:.6rem}"
)


def feedback_html(row: term.Scored, name: str, total: float | None) -> str:
    """One learner's page: per exercise the points and what the check said; written answers
    as they were submitted, "to be graded by hand" until the instructor scores them, then
    the score, the rubric's elements found and the instructor's comment."""
    e = html.escape
    result = row.result
    title = f"Lab {result.lab} — {result.title}" if result.title else f"Lab {result.lab or '?'}"
    who = name or result.submission.student
    parts = [
        f"<!doctype html><html lang=en><meta charset=utf-8><title>{e(title)}: feedback</title><style>{STYLE}</style>",
        f"<h1>{e(title)}</h1><p>Feedback for <b>{e(who)}</b> "
        f"({e(result.submission.key)}): <b>{points(row.points)}</b> of {points(total)} points"
        + (" so far; your instructor reads the written answers." if result.needs_manual else ".")
        + "</p>",
    ]
    if row.late:
        taken = f" {points(row.penalty)} points were taken off for it." if row.penalty else ""
        parts.append(f"<p class=muted>This submission was {e(row.late)}.{taken}</p>")
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
    if exercise.comment:
        body += "<p class=muted>Your instructor's comment:</p><pre>" + e(exercise.comment) + "</pre>"
    score = f"{points(exercise.points) or '–'} / {points(exercise.max_points)}"
    return f"<tr><td>{e(exercise.label)}</td><td>{score}</td><td>{body}</td></tr>"


def summary_counts(results: Iterable[SubmissionResult]) -> dict[str, int]:
    counts = Counter(result.status for result in results)
    return {status.value: counts.get(status, 0) for status in Status}
