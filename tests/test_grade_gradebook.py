"""The gradebook's record and files, from rows made by hand (no grading here; test_grade.py
and test_grade_term.py grade for real): merging keeps every row and hand score, a score is
tied to the answer it scored, the files agree with the record, are written whole with the
umask's permissions, and show no formula to a spreadsheet; a merge that fails leaves the old
gradebook as it was."""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import replace
from enum import StrEnum
from pathlib import Path

import grade_fixtures as fx
import pytest

from shopops_lab.course.build import write_atomic
from shopops_lab.course.grade import report
from shopops_lab.course.grade.gradebook import MANIFEST, Gradebook, claim
from shopops_lab.course.grade.hand import ManualScores
from shopops_lab.course.grade.key import Key, Kind
from shopops_lab.course.grade.results import ExerciseResult, Mark, Status, SubmissionResult, answer_hash
from shopops_lab.course.grade.run import grade
from shopops_lab.course.grade.sheets import Sheet
from shopops_lab.course.grade.submissions import Submission
from shopops_lab.course.grade.term import final, standing
from shopops_lab.errors import BadArgumentError

MASTER = Key.load(fx.SOLUTIONS, labs={"03"}).masters["03"]
SHEETS = {"03": Sheet.of(MASTER)}
WHY = "A 60 s TTL bounds how long a dead worker's case waits."


def row(student: str, why: str | None = WHY, policy: float = 2.0, file: str = "") -> SubmissionResult:
    """A lab 03 row: the policy's points, the written answer (None: left blank)."""
    rubric = next(cell.rubric for cell in MASTER.graded if cell.grade_id == "explain-policy")
    written = (
        ExerciseResult(
            "explain-policy", Kind.MANUAL, Mark.BY_HAND, None, 3.0, "To be graded by hand.", answer=why, rubric=rubric
        )
        if why is not None
        else ExerciseResult("explain-policy", Kind.MANUAL, Mark.NOT_ATTEMPTED, 0.0, 3.0, "Not answered.", rubric=rubric)
    )
    mark = Mark.CORRECT if policy else Mark.INCORRECT
    return SubmissionResult(
        submission=Submission(Path(file or f"{student}_lab03.ipynb"), f"{student}_lab03", student, "03", lab="03"),
        lab="03",
        status=Status.GRADED,
        reason="",
        exercises=(
            ExerciseResult("choose-policy-test", Kind.AUTO, mark, policy, 2.0, "", title="Exercise 03.1 (a policy)"),
            written,
            ExerciseResult("heartbeat-loop-test", Kind.AUTO, Mark.NOT_ATTEMPTED, 0.0, 2.0, "Not attempted."),
        ),
        title=MASTER.title,
    )


def scores(tmp_path: Path, text: str) -> ManualScores:
    path = tmp_path / "scores.csv"
    path.write_text("submission,lab,grade_id,score,found,comment,answer_hash\n" + text)
    return ManualScores.read(path, SHEETS)


def written(result: SubmissionResult) -> ExerciseResult:
    return next(e for e in result.exercises if e.grade_id == "explain-policy")


# --- hand scores tied to the answer ---------------------------------------------------------


def test_a_score_counts_for_the_answer_it_scored_and_goes_stale_when_the_answer_changes(tmp_path) -> None:
    applied = scores(tmp_path, f"amy/lab03,03,explain-policy,2,,Good.,{answer_hash(WHY)}\n").apply([row("amy")])
    scored = written(applied.results[0])
    assert (scored.mark, scored.points, scored.comment, scored.stale) == (Mark.GRADED_BY_HAND, 2.0, "Good.", False)
    book = Gradebook().merged(applied.results, masters=[MASTER])
    same = book.merged([row("amy", WHY + "  \n")])  # trailing spaces: the same answer
    assert written(same.rows["amy/lab03"]).points == 2.0
    changed = book.merged([row("amy", "I do not know.")])
    stale = written(changed.rows["amy/lab03"])
    assert (stale.mark, stale.points, stale.hand, stale.stale, stale.comment) == (
        Mark.BY_HAND,
        None,
        2.0,
        True,
        "Good.",
    )
    assert changed.rows["amy/lab03"].needs_manual and standing(changed.rows["amy/lab03"]) == "stale hand score"
    back = changed.merged([row("amy", WHY)])  # the scored answer again: its score counts again
    assert written(back.rows["amy/lab03"]).points == 2.0


def test_a_score_given_to_another_answer_is_kept_aside_and_an_older_file_takes_nothing_back(tmp_path) -> None:
    old_hash = answer_hash("an earlier answer")
    applied = scores(tmp_path, f"amy/lab03,03,explain-policy,3,,,{old_hash}\n").apply([row("amy")])
    assert applied.stale == [("amy/lab03", "explain-policy")] and written(applied.results[0]).points is None
    now = scores(tmp_path, f"amy/lab03,03,explain-policy,1,,,{answer_hash(WHY)}\n").apply(applied.results)
    assert written(now.results[0]).points == 1.0 and not written(now.results[0]).stale
    again = scores(tmp_path, f"amy/lab03,03,explain-policy,3,,,{old_hash}\n").apply(now.results)
    assert written(again.results[0]).points == 1.0  # the score of this answer stays


def test_an_empty_cell_changes_nothing_and_a_comment_alone_is_taken(tmp_path) -> None:
    first = scores(tmp_path, f"amy/lab03,03,explain-policy,2,,,{answer_hash(WHY)}\n").apply([row("amy")])
    blank = scores(tmp_path, f"amy/lab03,03,explain-policy,,,,{answer_hash(WHY)}\n").apply(first.results)
    assert written(blank.results[0]).points == 2.0
    commented = scores(tmp_path, f"amy/lab03,03,explain-policy,,,See me.,{answer_hash(WHY)}\n").apply(first.results)
    assert (written(commented.results[0]).points, written(commented.results[0]).comment) == (2.0, "See me.")
    unknown = scores(tmp_path, "bob/lab03,03,explain-policy,1,,,\n").apply(first.results)
    assert unknown.unmatched == [("bob/lab03", "explain-policy")]


# --- merging ------------------------------------------------------------------------------


def test_a_merge_replaces_its_own_rows_and_keeps_every_other_row_and_score(tmp_path) -> None:
    applied = scores(tmp_path, f"amy/lab03,03,explain-policy,2,,,{answer_hash(WHY)}\n").apply([row("amy"), row("bob")])
    book = Gradebook().merged(applied.results, masters=[MASTER])
    regraded = book.merged([row("bob", policy=0.0)])
    assert list(regraded.rows) == ["amy/lab03", "bob/lab03"]
    assert regraded.rows["amy/lab03"] == book.rows["amy/lab03"] and written(regraded.rows["amy/lab03"]).points == 2.0
    assert regraded.rows["bob/lab03"].points == 0.0


def test_the_record_reads_back_as_the_gradebook_it_was(tmp_path) -> None:
    applied = scores(tmp_path, f"amy/lab03,03,explain-policy,2,1 2,Good.,{answer_hash(WHY)}\n").apply(
        [row("amy"), row("bob", why=None)]
    )
    book = Gradebook().merged(applied.results, masters=[MASTER], names={"amy": "Amy Adams"})
    book = book.merged([row("amy", "changed")])  # a stale score, kept in the record
    out = tmp_path / "out"
    report.Writer(book).write(out)
    again = Gradebook.load(out)
    assert again.rows == book.rows and again.sheets == book.sheets and again.names == book.names
    report.Writer(again).write(tmp_path / "again")
    for name in (*report.FILES, "feedback/amy/lab03.html"):
        assert (tmp_path / "again" / name).read_text() == (out / name).read_text(), name


def test_an_unreadable_record_is_refused_and_written_over_only_with_force(tmp_path) -> None:
    out = tmp_path / "out"
    report.Writer(Gradebook().merged([row("amy")], masters=[MASTER])).write(out)
    (out / "grades.json").write_text("{ not json")
    with pytest.raises(BadArgumentError, match="holds a grades.json this kit cannot read.*--force"):
        Gradebook.load(out)
    assert Gradebook.load(out, force=True).rows == {}


# --- the files ----------------------------------------------------------------------------


def read_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_marks_are_told_apart_in_words() -> None:
    book = Gradebook().merged([row("amy"), row("bob", why=None, policy=0.0)], masters=[MASTER])
    by_key = {line["submission"]: line for line in read_csv(report.Writer(book).grades_csv())}
    assert by_key["amy/lab03"]["marks"] == "1 correct; 1 not attempted; 1 to be graded by hand"
    assert by_key["bob/lab03"]["marks"] == "1 incorrect; 2 not attempted"


def test_the_term_view_shows_a_status_it_does_not_know_by_its_own_name() -> None:
    """A status added later (say, the grader itself failing) reads as itself, not as a grade."""
    later = StrEnum("Later", {"GRADER_FAILED": "grader failed"})  # a Status member this code never saw
    strange = replace(row("bob", why=None), status=later.GRADER_FAILED)
    assert standing(strange) == "grader failed" and not final(strange)  # never exported as a grade
    assert final(row("bob", why=None)) and not final(row("amy"))  # amy's written answer waits for the instructor
    assert [standing(replace(row("amy"), status=s)) for s in (Status.INVALID, Status.TIMEOUT)] == ["invalid", "timeout"]
    assert standing(None) == "not submitted"


def test_a_cell_a_spreadsheet_would_run_is_written_as_text_and_read_back_as_it_was(tmp_path) -> None:
    formula = '=HYPERLINK("http://evil.example","click")'
    book = Gradebook().merged([row("amy", why=formula)], masters=[MASTER])
    out = tmp_path / "out"
    report.Writer(book).write(out)
    manual = read_csv((out / "manual.csv").read_text())
    assert manual[0]["answer"] == "'" + formula
    manual[0]["score"], manual[0]["comment"], manual[0]["found"] = "1", "-1 for the missing cost", "-"
    with open(tmp_path / "scored.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(manual[0]))
        writer.writeheader()
        writer.writerow(manual[0])
    text = (tmp_path / "scored.csv").read_text()
    assert ",'-1 for the missing cost," not in text  # written by the instructor's own tool: as typed
    applied = ManualScores.read(tmp_path / "scored.csv", SHEETS).apply(list(book.rows.values()))
    assert written(applied.results[0]).comment == "-1 for the missing cost"
    report.Writer(book.with_rows(applied.results)).write(out)
    again = read_csv((out / "manual.csv").read_text())[0]
    assert (again["comment"], again["found"]) == (
        "'-1 for the missing cost",
        "-",
    )  # neutralised; "-" alone is no formula
    applied = ManualScores.read(out / "manual.csv", SHEETS).apply(applied.results)
    assert written(applied.results[0]).comment == "-1 for the missing cost"  # the quote taken off again


def test_feedback_escapes_what_the_learner_and_the_instructor_wrote(tmp_path) -> None:
    book = Gradebook().merged([row("amy", why="<script>alert(1)</script>")], masters=[MASTER])
    applied = scores(
        tmp_path, f"amy/lab03,03,explain-policy,1,,<b>bold</b>,{answer_hash('<script>alert(1)</script>')}\n"
    ).apply(list(book.rows.values()))
    report.Writer(book.with_rows(applied.results)).write(tmp_path / "out")
    page = (tmp_path / "out" / "feedback" / "amy" / "lab03.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;bold&lt;/b&gt;" in page


def test_a_student_name_cannot_lead_feedback_out_of_its_folder() -> None:
    sneaky = replace(row("amy"), submission=Submission(Path("x.ipynb"), "x", "../../etc", "03", lab="03"))
    assert report.feedback_path(sneaky).as_posix() == "feedback/_.._etc/lab03.html"


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077])
def test_files_get_the_permissions_the_umask_gives(tmp_path, mask) -> None:
    before = os.umask(mask)
    try:
        report.Writer(Gradebook().merged([row("amy")], masters=[MASTER])).write(tmp_path / "out")
    finally:
        os.umask(before)
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    modes = {p.relative_to(tmp_path / "out").as_posix(): p.stat().st_mode & 0o777 for p in files}
    assert len(modes) == 9 and set(modes.values()) == {0o666 & ~mask}, modes  # 0644 under the usual 022
    assert not [name for name in modes if Path(name).name.startswith(".")]  # no temp file left


def test_a_write_that_fails_leaves_the_old_record(tmp_path, monkeypatch) -> None:
    out = tmp_path / "out"
    report.Writer(Gradebook().merged([row("amy")], masters=[MASTER])).write(out)
    record = (out / "grades.json").read_text()

    def full_disk(path: Path, text: str) -> None:
        if path.name == "grades.csv":
            raise OSError(28, "No space left on device")
        write_atomic(path, text)

    monkeypatch.setattr(report, "write_atomic", full_disk)
    with pytest.raises(OSError):
        report.Writer(Gradebook.load(out).merged([row("bob")])).write(out)
    assert (out / "grades.json").read_text() == record and list(Gradebook.load(out).rows) == ["amy/lab03"]


def test_merging_hand_scores_needs_a_gradebook_and_a_bad_score_changes_nothing(tmp_path) -> None:
    out = tmp_path / "out"
    with pytest.raises(BadArgumentError, match="submissions are missing"):
        grade([], key=None, out=out)
    (tmp_path / "scores.csv").write_text("submission,grade_id,score\namy/lab03,explain-policy,1\n")
    with pytest.raises(BadArgumentError, match="holds no gradebook"):
        grade([], key=None, out=out, manual=tmp_path / "scores.csv")
    report.Writer(Gradebook().merged([row("amy")], masters=[MASTER])).write(out)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    (tmp_path / "bad.csv").write_text("submission,lab,grade_id,score\namy/lab03,03,explain-policy,9\n")
    with pytest.raises(BadArgumentError, match="line 2, score is '9', not a number from 0 to 3"):
        grade([], key=None, out=out, manual=tmp_path / "bad.csv")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    done = grade([], key=None, out=out, manual=tmp_path / "scores.csv")
    assert done.hand_scores == 1 and json.loads((out / "grades.json").read_text())["submissions"][0]["points"] == 3.0


def test_the_manifest_marks_the_folder_as_a_gradebook(tmp_path) -> None:
    out = tmp_path / "out"
    report.Writer(Gradebook().merged([row("amy")], masters=[MASTER])).write(out)
    assert json.loads((out / MANIFEST).read_text())["written_by"] == "shopops-lab grade"
    assert claim(out, force=False, key=None) == out
    (out / MANIFEST).unlink()
    with pytest.raises(BadArgumentError, match="holds files and is not a gradebook"):
        claim(out, force=False, key=None)
