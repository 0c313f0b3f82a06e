"""The gradebook kept in `--out`: a folder of plain files that only grows.

`grades.json` is its record: every submission's row (by its key, student and lab), what each
lab's master grades (`Sheet`, so a later run can write every file without that master), due
dates, the late policy, the roster's names, and every file a run found with what became of
it. `shopops-gradebook.json`, written first, marks the folder as a gradebook this command
keeps (`outputs.claim` lets `grade` write into such a folder, and refuses any other that
holds files, unless --force).

A run merges into it (`Gradebook.merged`): a submission graded again replaces its own row,
keeping the hand scores and comments of the answers that did not change (`hand.carried`);
every other row, score and comment stays. Everything is read and merged before anything is
written, so a run refused or failing leaves the old gradebook as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from shopops_lab import __version__
from shopops_lab.course import outputs
from shopops_lab.course.grade.hand import carried
from shopops_lab.course.grade.key import Kind, Master, RubricElement
from shopops_lab.course.grade.late import LatePolicy
from shopops_lab.course.grade.results import ExerciseResult, Mark, Status, SubmissionResult
from shopops_lab.course.grade.sheets import Cell, Sheet
from shopops_lab.course.grade.submissions import Layout, Listed, Outcome, Submission, parse_time
from shopops_lab.errors import BadArgumentError

FORMAT = 1
WRITTEN_BY = "shopops-lab grade"
MANIFEST = "shopops-gradebook.json"
GRADES_JSON = "grades.json"


def _is_gradebook(folder: Path) -> bool:
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("written_by") == WRITTEN_BY


OWNED = outputs.Owned(_is_gradebook, f"a gradebook {WRITTEN_BY} wrote (it has no {MANIFEST})")


def claim(out: str | Path | None, *, force: bool, key: str | Path | None) -> Path:
    """The gradebook folder `--out` names, once the output rule allows it (`outputs.claim`):
    never the root, home, the key or the kit's masters; a folder holding other files only
    with `force`."""
    if not out:
        raise BadArgumentError(
            field="--out", problem="is missing", fix="name a folder for the gradebook, e.g. --out grades/"
        )
    kept = [*outputs.masters()]
    if key:
        folder = Path(key) if Path(key).is_dir() else Path(key).parent
        kept.append(outputs.Kept(folder, "the key (the masters --key names)"))
    return outputs.claim(out, field="--out", example="grades/", owned=OWNED, force=force, kept=kept)


def manifest() -> str:
    return json.dumps({"written_by": WRITTEN_BY, "format": FORMAT, "kit_version": __version__}, indent=1) + "\n"


@dataclass(frozen=True)
class Gradebook:
    """Rows by submission key, in the order they were first graded; the labs' sheets; every
    file found, by file; the roster's names; the late policy."""

    rows: dict[str, SubmissionResult] = field(default_factory=dict)
    sheets: dict[str, Sheet] = field(default_factory=dict)
    files: dict[str, Listed] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    policy: LatePolicy = LatePolicy()

    @classmethod
    def load(cls, folder: Path, *, force: bool = False) -> Gradebook:
        """The gradebook kept in `folder` (empty if none yet). An unreadable record is refused
        (nothing is written), unless `force`: then a new gradebook starts."""
        path = folder / GRADES_JSON
        if not _is_gradebook(folder) or not path.exists():
            return cls()
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            if document.get("format") != FORMAT:
                raise ValueError(f"format {document.get('format')!r}, where this kit reads {FORMAT}")
            return _gradebook(document)
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            if force:
                return cls()
            raise BadArgumentError(
                field=f"--out {folder}",
                problem=f"holds a {GRADES_JSON} this kit cannot read ({type(exc).__name__}: {str(exc)[:200]})",
                fix=f"restore {path} from a copy, or pass --force to start a new gradebook there",
            ) from None

    def merged(
        self,
        results: Sequence[SubmissionResult],
        *,
        masters: Iterable[Master] = (),
        due: Mapping[str, datetime] | None = None,
        files: Iterable[Listed] = (),
        names: Mapping[str, str] | None = None,
        policy: LatePolicy | None = None,
    ) -> Gradebook:
        """This gradebook with a run's rows in: each replaces the row of its key (keeping the
        hand scores of answers that did not change), every other row stays; the run's labs'
        sheets, due dates, files, names and policy replace what was known of them."""
        rows = dict(self.rows)
        for result in results:
            old = rows.get(result.submission.key)
            rows[result.submission.key] = carried(old, result) if old is not None else result
        sheets = dict(self.sheets)
        for master in masters:
            known = sheets.get(master.lab)
            sheets[master.lab] = Sheet.of(master, known.due if known else None)
        for lab, when in (due or {}).items():
            if lab in sheets:
                sheets[lab] = replace(sheets[lab], due=when)
        listed = dict(self.files)
        run = list(files)
        regraded = {
            item.submission.key: item.file for item in run if item.outcome is Outcome.GRADED and item.submission
        }
        for item in listed.values():  # a key graded again from another file: the one graded before is superseded
            if (
                item.outcome is Outcome.GRADED
                and item.submission
                and regraded.get(item.submission.key, item.file) != item.file
            ):
                detail = f"{regraded[item.submission.key]} was graded in its place later"
                listed[item.file] = replace(item, outcome=Outcome.SUPERSEDED, detail=detail)
        listed.update((item.file, item) for item in run)
        return Gradebook(
            rows=rows,
            sheets=dict(sorted(sheets.items())),
            files=dict(sorted(listed.items())),
            names={**self.names, **(names or {})},
            policy=policy or self.policy,
        )

    def with_rows(self, results: Iterable[SubmissionResult]) -> Gradebook:
        return replace(self, rows={result.submission.key: result for result in results})

    def name(self, student: str) -> str:
        return self.names.get(student, student)


# --- the record: grades.json ----------------------------------------------------------------


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _cell_json(cell: Cell) -> dict[str, Any]:
    rubric = {"rubric": [{"element": r.element, "points": r.points} for r in cell.rubric]} if cell.rubric else {}
    return {"grade_id": cell.grade_id, "kind": cell.kind.value, "points": cell.points, **rubric}


def _exercise_json(e: ExerciseResult) -> dict[str, Any]:
    hand: dict[str, Any] = {}
    if e.kind is Kind.MANUAL:
        hand = {"answer": e.answer, "answer_hash": e.answer_hash, "comment": e.comment}
        if e.hand is not None:
            hand |= {"hand": e.hand, "scored_hash": e.scored_hash, "stale": e.stale}
    return {
        "grade_id": e.grade_id,
        "title": e.title,
        "kind": e.kind.value,
        "mark": e.mark.value,
        "points": e.points,
        "max_points": e.max_points,
        "message": e.message,
        "evidence": list(e.evidence),
        **({"found": list(e.found)} if e.found is not None else {}),
        **hand,
    }


def row_json(result: SubmissionResult, book: Gradebook, extra: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the record (`extra`: what the writers work out for it: lateness, penalty)."""
    submission = result.submission
    return {
        "submission": submission.key,
        "student": submission.student,
        "name": book.name(submission.student),
        "lab": result.lab,
        "file": submission.file,
        "path": submission.name,
        "lab_hint": submission.lab_hint,
        "layout": submission.layout.value,
        "submitted": _time(submission.submitted),
        "late_mark": submission.late_mark,
        "status": result.status.value,
        "reason": result.reason,
        "title": result.title,
        "points": result.points,
        "max_points": result.max_points,
        "needs_manual": result.needs_manual,
        **extra,
        "exercises": [_exercise_json(e) for e in result.exercises],
        "restored": list(result.restored),
        "notes": list(result.notes),
    }


def record(book: Gradebook, rows: Sequence[dict[str, Any]], summary: Mapping[str, int], confinement: str = "") -> str:
    """grades.json: the whole gradebook, as a later run reads it back (`load`). `confinement`:
    how the last run confined learner code (`Confinement.describe`)."""
    document = {
        "written_by": WRITTEN_BY,
        "format": FORMAT,
        "kit_version": __version__,
        "confinement": confinement,
        "late_policy": book.policy.text,
        "labs": {
            lab: {
                "title": sheet.title,
                "version": sheet.version,
                "max_points": sheet.max_points,
                "hand_graded_points": sheet.hand_points,
                "due": _time(sheet.due),
                "cells": [_cell_json(cell) for cell in sheet.cells],
            }
            for lab, sheet in book.sheets.items()
        },
        "students": {student: {"name": name} for student, name in sorted(book.names.items())},
        "summary": dict(summary),
        "submissions": list(rows),
        "files": [
            {
                "file": item.file,
                "outcome": item.outcome.value,
                "detail": item.detail,
                "submission": item.submission.key if item.submission else None,
                "student": item.submission.student if item.submission else None,
                "lab": item.submission.lab if item.submission else None,
                "layout": item.submission.layout.value if item.submission else None,
                "submitted": _time(item.submission.submitted) if item.submission else None,
            }
            for item in book.files.values()
        ],
    }
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def _gradebook(document: dict[str, Any]) -> Gradebook:
    sheets = {
        lab: Sheet(
            lab=lab,
            title=str(info["title"]),
            version=str(info["version"]),
            cells=tuple(
                Cell(
                    str(cell["grade_id"]),
                    Kind(cell["kind"]),
                    float(cell["points"]),
                    tuple(RubricElement(str(r["element"]), float(r["points"])) for r in cell.get("rubric", ())),
                )
                for cell in info["cells"]
            ),
            due=parse_time(info["due"]) if info.get("due") else None,
        )
        for lab, info in document["labs"].items()
    }
    rows = {}
    for row in document["submissions"]:
        result = _result(row, sheets)
        rows[result.submission.key] = result
    files = {}
    for item in document.get("files", ()):
        known = item.get("submission")
        submission = None
        if known:
            submission = Submission(
                path=Path(item["file"]),
                name=Path(item["file"]).stem,
                student=str(item["student"]),
                lab_hint=item.get("lab"),
                lab=item.get("lab"),
                layout=Layout(item["layout"]),
                submitted=parse_time(item["submitted"]) if item.get("submitted") else None,
            )
        files[str(item["file"])] = Listed(str(item["file"]), Outcome(item["outcome"]), str(item["detail"]), submission)
    names = {student: str(info["name"]) for student, info in document.get("students", {}).items()}
    return Gradebook(rows, sheets, files, names, LatePolicy.parse(document.get("late_policy")))


def _result(row: dict[str, Any], sheets: Mapping[str, Sheet]) -> SubmissionResult:
    submission = Submission(
        path=Path(row["file"]),
        name=str(row["path"]),
        student=str(row["student"]),
        lab_hint=row.get("lab_hint"),
        lab=row.get("lab"),
        layout=Layout(row["layout"]),
        submitted=parse_time(row["submitted"]) if row.get("submitted") else None,
        late_mark=bool(row.get("late_mark")),
    )
    sheet = sheets.get(row.get("lab") or "")
    rubrics = {cell.grade_id: cell.rubric for cell in sheet.cells} if sheet else {}
    exercises = tuple(
        ExerciseResult(
            grade_id=str(e["grade_id"]),
            kind=Kind(e["kind"]),
            mark=Mark(e["mark"]),
            points=None if e["points"] is None else float(e["points"]),
            max_points=float(e["max_points"]),
            message=str(e["message"]),
            evidence=tuple(str(line) for line in e["evidence"]),
            answer=str(e.get("answer", "")),
            title=str(e["title"]),
            rubric=rubrics.get(str(e["grade_id"]), ()),
            found=tuple(int(n) for n in e["found"]) if "found" in e else None,
            hand=None if e.get("hand") is None else float(e["hand"]),
            scored_hash=str(e.get("scored_hash", "")),
            comment=str(e.get("comment", "")),
        )
        for e in row["exercises"]
    )
    return SubmissionResult(
        submission=submission,
        lab=row.get("lab"),
        status=Status(str(row["status"])),
        reason=str(row["reason"]),
        exercises=exercises,
        restored=tuple(str(line) for line in row["restored"]),
        notes=tuple(str(line) for line in row["notes"]),
        title=str(row["title"]),
    )
