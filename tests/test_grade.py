"""`shopops-lab grade` end to end: a class of lab 01 submissions built from the master and
the student notebook (right, wrong, unanswered, tampered, hanging, crashing, garbage),
graded once by real child processes, then every row checked.

Tampered twins are checked twice: first that the trick does fool a check run naively in one
process (so the attack is real), then that the grader scores the twin as its honest original.
Timeouts are 2 s per cell here; nothing in these tests measures time."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import grade_fixtures as fx
import nbformat
import pytest

from shopops_lab.checks import lab01
from shopops_lab.checks.base import Exercise, Result, Verdict
from shopops_lab.course.grade import confinement
from shopops_lab.course.grade.hand import ManualScores
from shopops_lab.course.grade.judge import Limits
from shopops_lab.course.grade.results import Kind, Mark, Status
from shopops_lab.course.grade.run import GradeReport, grade

LIMITS = Limits(cell_seconds=60.0, notebook_seconds=600.0, memory_mb=512)  # no honest cell nears them
# For the hangs alone: stopped soon, yet with room for the honest check beside a hang, which
# shares the machine with other test files' spinning learners (a CI run once took 2 s for it).
HANG_LIMITS = Limits(cell_seconds=5.0, notebook_seconds=60.0, memory_mb=512)
STOP = f"did not finish within {HANG_LIMITS.cell_seconds:g} s"

# Tricks a learner might paste into an answer cell (appended to the what-next answer).
REBIND = """
class _Pass:
    def grade(self, *answer): pass
    def check(self, *answer): print("✅ correct")
    def result(self, *answer): raise SystemExit
lab01.exercise = lab01.knowledge = _Pass()
import shopops_lab.checks.lab01 as _checks
_checks.exercise = _checks.knowledge = _Pass()
"""
PATCH_GLOBALS = "\nlab01.SEEDS = ()  # no scenario left to fail\n"
PATCH_CLASS = """
from shopops_lab.checks.base import Exercise, Result, Verdict
Exercise.result = lambda self, *answer: Result(exercise="x", verdict=Verdict.CORRECT, message="fine")
"""
PATCH_FIELD = '\nobject.__setattr__(lab01.exercise, "run", lambda *answer: "fine")\n'
PRINT_CORRECT = '\nprint("✅ Exercise 01.1: correct. 3/3 points")\n'
PATCH_WHILE_CHECKED = """
def send_followup(lease, adapter):
    import shopops_lab.checks.lab01 as checks
    checks.SEEDS = ()
    return adapter.send(f"{lease.case_id}:{lease.token}", case_id=lease.case_id, to=lease.payload["to"], body="!")
"""
HANG = "def send_followup(lease, adapter):\n    while True:\n        pass\n"
SWALLOW = """
def send_followup(lease, adapter):
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass
"""
CRASH = "def send_followup(lease, adapter):\n    import os\n    os._exit(3)\n"
HOG = "def send_followup(lease, adapter):\n    return bytearray(64 * 2**30)\n"
TOP_HANG = "while True:\n    pass\n"
TOP_EXIT = "import sys\nsys.exit(2)\n"


def right(gid: str) -> str:
    return fx.right_answer("01", gid)


def one_wrong(extra: str = "") -> nbformat.NotebookNode:
    """send-followup wrong (a key per delivery), what-next right, plus `extra` in the what-next cell."""
    return fx.submission("01", {"send-followup": fx.KEY_FROM_TOKEN, "what-next": right("what-next") + "\n" + extra})


def edited_twin() -> nbformat.NotebookNode:
    nb = one_wrong()
    fx.cell(nb, "send-followup-test").source = "pass"
    nb.cells.remove(fx.cell(nb, "what-next-test"))
    nb.cells.append(nbformat.v4.new_code_cell("print('all tests passed')"))
    return nb


def without_metadata() -> nbformat.NotebookNode:
    nb = fx.all_right("01")
    del nb.metadata["shopops_lab"]
    return nb


def answered_in_new_cells() -> nbformat.NotebookNode:
    """Both answers typed into cells the learner added below the stubs, one using a helper."""
    nb = fx.submission("01")
    for gid in ("send-followup", "what-next"):
        at = nb.cells.index(fx.cell(nb, gid))
        nb.cells.insert(at + 1, nbformat.v4.new_code_cell(right(gid)))
    return nb


def other_version() -> nbformat.NotebookNode:
    nb = fx.all_right("01")
    nb.metadata["shopops_lab"]["version"] = "0"
    return nb


CLASS = {
    "pristine_lab01": lambda: fx.submission("01"),
    "right_lab01": lambda: fx.all_right("01"),
    "onewrong_lab01": one_wrong,
    "printer_lab01": lambda: one_wrong(PRINT_CORRECT),
    "edited_lab01": edited_twin,
    "rebinder_lab01": lambda: one_wrong(REBIND),
    "globals_lab01": lambda: one_wrong(PATCH_GLOBALS),
    "classpatch_lab01": lambda: one_wrong(PATCH_CLASS),
    "fieldpatch_lab01": lambda: one_wrong(PATCH_FIELD),
    "duringcheck_lab01": lambda: fx.submission("01", {"send-followup": PATCH_WHILE_CHECKED, "what-next": fx.RIGHT}),
    "skipper_lab01": lambda: fx.submission("01", {"send-followup": right("send-followup") + "\n" + REBIND}),
    "crash_lab01": lambda: fx.submission("01", {"send-followup": CRASH, "what-next": fx.RIGHT}),
    "exit_lab01": lambda: fx.submission("01", {"send-followup": fx.RIGHT, "what-next": TOP_EXIT}),
    "exitafter_lab01": lambda: fx.submission(
        "01", {"send-followup": fx.RIGHT, "what-next": right("what-next") + "\n" + TOP_EXIT}
    ),
    "hog_lab01": lambda: fx.submission("01", {"send-followup": HOG, "what-next": fx.RIGHT}),
    "nometa_lab01": without_metadata,
    "newcell_lab01": answered_in_new_cells,
    "oldversion_lab01": other_version,
    "writer_lab03": lambda: fx.all_right("03"),
}


# Graded on their own under a short limit: the class's honest cells get a long one, so a busy
# machine never turns a right answer into a timeout.
HANGS = {
    "hang_lab01": lambda: fx.submission("01", {"send-followup": HANG, "what-next": fx.RIGHT}),
    "swallow_lab01": lambda: fx.submission("01", {"send-followup": SWALLOW, "what-next": fx.RIGHT}),
    "tophang_lab01": lambda: fx.submission("01", {"send-followup": fx.RIGHT, "what-next": TOP_HANG}),
}


@pytest.fixture(scope="module")
def hung(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("hangs")
    for name, build in HANGS.items():
        fx.write(build(), root / "class" / f"{name}.ipynb")
    report = grade([str(root / "class")], key=fx.SOLUTIONS, out=root / "out", jobs=2, limits=HANG_LIMITS)
    return {result.submission.name: result for result in report.results}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[GradeReport, dict, Path]:
    root = tmp_path_factory.mktemp("grade")
    for name, build in CLASS.items():
        fx.write(build(), root / "class" / f"{name}.ipynb")
    (root / "class" / "garbage_lab01.ipynb").write_bytes(b"PK\x03\x04 not a notebook \xff\xfe")
    fx.write(fx.all_right("01"), root / "class" / "submitted" / "zoe" / "lab01" / "01_leases_and_redelivery.ipynb")
    out = root / "out"
    report = grade([str(root / "class")], key=fx.SOLUTIONS, out=out, jobs=2, limits=LIMITS)
    rows = {result.submission.name: result for result in report.results}
    return report, rows, out


EXPIRY = "force-expiry-test"  # lab 01's third exercise: no submission here but the right ones answers it


def marks(result) -> dict[str, tuple[Mark, float | None]]:
    """The marks of the exercises the class's submissions answer (EXPIRY is judged below)."""
    return {e.grade_id: (e.mark, e.points) for e in result.exercises if e.grade_id != EXPIRY}


def test_lab01s_third_exercise_is_not_attempted_unless_answered(graded) -> None:
    _, rows, _ = graded
    every = {name: {e.grade_id: (e.mark, e.points) for e in row.exercises} for name, row in rows.items()}
    assert every["right_lab01"][EXPIRY] == (Mark.CORRECT, 2)
    assert every["pristine_lab01"][EXPIRY] == every["onewrong_lab01"][EXPIRY] == (Mark.NOT_ATTEMPTED, 0)


def test_every_submission_gets_one_row(graded) -> None:
    report, rows, _ = graded
    assert len(report.results) == len(CLASS) + 2
    assert rows["submitted/zoe/lab01/01_leases_and_redelivery"].submission.student == "zoe"
    assert rows["submitted/zoe/lab01/01_leases_and_redelivery"].points == 4


def test_pristine_scores_zero_and_the_master_full(graded) -> None:
    _, rows, _ = graded
    assert marks(rows["pristine_lab01"]) == {
        "send-followup-test": (Mark.NOT_ATTEMPTED, 0),
        "what-next-test": (Mark.NOT_ATTEMPTED, 0),
    }
    assert marks(rows["right_lab01"]) == {"send-followup-test": (Mark.CORRECT, 1), "what-next-test": (Mark.CORRECT, 1)}
    assert (rows["right_lab01"].status, rows["right_lab01"].points, rows["right_lab01"].max_points) == (
        Status.GRADED,
        4,
        4,
    )


def test_one_wrong_exercise_scores_partially_with_the_checks_message(graded) -> None:
    _, rows, _ = graded
    result = rows["onewrong_lab01"]
    assert result.status is Status.GRADED and result.points == 1
    wrong = next(e for e in result.exercises if e.grade_id == "send-followup-test")
    assert wrong.mark is Mark.INCORRECT
    assert wrong.message == lab01.exercise.result(_define(fx.KEY_FROM_TOKEN, "send_followup")).message


def _define(source: str, name: str):
    namespace: dict = {}
    exec(compile(source, "<answer>", "exec"), namespace)
    return namespace[name]


@pytest.mark.parametrize(
    "twin",
    [
        "printer_lab01",
        "edited_lab01",
        "rebinder_lab01",
        "globals_lab01",
        "classpatch_lab01",
        "fieldpatch_lab01",
        "duringcheck_lab01",
    ],
)
def test_a_tampered_twin_scores_as_its_honest_original(graded, twin: str) -> None:
    _, rows, _ = graded
    points = {e.grade_id: e.points for e in rows[twin].exercises}
    assert (
        points
        == {e.grade_id: e.points for e in rows["onewrong_lab01"].exercises}
        == {"send-followup-test": 0, EXPIRY: 0, "what-next-test": 1}
    )


def test_the_tricks_do_fool_a_naive_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the grader's protection each trick passes the wrong answer: the tests above
    would prove nothing otherwise."""
    wrong = _define(fx.KEY_FROM_TOKEN, "send_followup")
    assert not lab01.exercise.result(wrong).correct
    with monkeypatch.context() as patch:
        patch.setattr(lab01, "SEEDS", ())
        assert lab01.exercise.result(wrong).correct
    with monkeypatch.context() as patch:
        patch.setattr(
            Exercise, "result", lambda self, *a: Result(exercise="x", verdict=Verdict.CORRECT, message="fine")
        )
        assert lab01.exercise.result(wrong).correct
    honest_run = lab01.exercise.run
    object.__setattr__(lab01.exercise, "run", lambda *a: "fine")  # a frozen dataclass, forced
    try:
        assert lab01.exercise.result(wrong).correct
    finally:
        object.__setattr__(lab01.exercise, "run", honest_run)
    with monkeypatch.context() as patch:
        patch.setattr(lab01, "exercise", lab01.exercise)  # undone at the end of the block
        patch.setattr(lab01, "knowledge", lab01.knowledge)
        exec(compile(REBIND, "<cell>", "exec"), {"lab01": lab01})
        exec(
            compile("lab01.exercise.grade(send_followup)", "<test cell>", "exec"),
            {"lab01": lab01, "send_followup": wrong},
        )
    assert type(lab01.exercise) is Exercise and not lab01.exercise.result(wrong).correct


def test_changing_the_kit_changes_only_the_learners_own_copy(graded) -> None:
    """The checks run in the judge's process: a notebook that patches the kit (before or
    while being checked) patches its own process's copy, and is graded as if it had not."""
    _, rows, _ = graded
    for name in ("globals_lab01", "duringcheck_lab01"):
        wrong = next(e for e in rows[name].exercises if e.grade_id == "send-followup-test")
        assert wrong.mark is Mark.INCORRECT and rows[name].status is Status.GRADED, name
        assert wrong.message == next(e.message for e in rows["onewrong_lab01"].exercises), name


def test_edits_to_locked_cells_are_listed_as_restored(graded) -> None:
    _, rows, _ = graded
    assert rows["edited_lab01"].restored == (
        "restored 1 deleted cell from the master: the test of Exercise 01.3 (what an expired lease leads to)",
        "restored 1 edited cell from the master: the test of Exercise 01.1 (a handler that is safe to run twice)",
        "ignored 1 cell the master does not have (answers belong in the answer cells)",
    )


def test_rebinding_the_checks_scores_zero_on_the_exercise_it_skipped(graded) -> None:
    _, rows, _ = graded
    assert marks(rows["skipper_lab01"]) == {
        "send-followup-test": (Mark.CORRECT, 1),
        "what-next-test": (Mark.NOT_ATTEMPTED, 0),
    }


def test_a_hang_costs_only_its_exercise_and_only_once(hung) -> None:
    rows = hung
    for name in ("hang_lab01", "swallow_lab01"):  # the second swallows the child's own timer
        result = rows[name]
        assert result.status is Status.TIMEOUT
        assert marks(result) == {"send-followup-test": (Mark.TIMEOUT, 0), "what-next-test": (Mark.CORRECT, 1)}
        stops = [note for note in result.notes if "did not finish within" in note]
        # the master's print-only check() cell is not run (Plan.needed): the hang is met in the test
        assert stops == [f"cell send-followup-test {STOP}; what depends on it was skipped"], name
        assert result.reason.startswith(f"send-followup-test: Your answer {STOP}")
    top = rows["tophang_lab01"]
    assert marks(top) == {"send-followup-test": (Mark.CORRECT, 1), "what-next-test": (Mark.TIMEOUT, 0)}


def test_a_crash_is_an_error_row_and_the_other_exercise_is_still_graded(graded) -> None:
    _, rows, _ = graded
    crash = rows["crash_lab01"]
    assert crash.status is Status.ERROR and crash.points == 1
    assert "ended the grading process (exit code 3)" in crash.reason


def test_sys_exit_ends_only_its_cell_as_in_jupyter_and_is_noted(graded) -> None:
    _, rows, _ = graded
    exited = rows["exit_lab01"]  # sys.exit() instead of an answer: no function to check, nothing else lost
    assert marks(exited) == {"send-followup-test": (Mark.CORRECT, 1), "what-next-test": (Mark.INCORRECT, 0)}
    assert exited.status is Status.GRADED
    assert any("cell what-next called sys.exit(2), which ends only that cell" in note for note in exited.notes)
    after = rows["exitafter_lab01"]  # a right answer that ends with sys.exit(): full marks
    assert after.points == 2 and after.status is Status.GRADED  # 01.2 left unanswered


@pytest.mark.skipif(sys.platform != "linux", reason="the memory limit is enforced where RLIMIT_AS is (Linux)")
def test_a_huge_allocation_fails_inside_the_memory_limit(graded) -> None:
    _, rows, _ = graded
    hog = rows["hog_lab01"]
    (failed,) = [e for e in hog.exercises if e.grade_id == "send-followup-test"]
    assert failed.mark is Mark.INCORRECT and "MemoryError" in failed.message
    assert hog.points == 1


def test_garbage_and_another_version_are_invalid_rows_with_a_reason(graded) -> None:
    _, rows, _ = graded
    assert rows["garbage_lab01"].status is Status.INVALID and "is not a notebook" in rows["garbage_lab01"].reason
    old = rows["oldversion_lab01"]
    assert old.status is Status.INVALID and "version '0' of lab 01" in old.reason and "--key" in old.reason


def test_answers_typed_into_added_cells_count(graded) -> None:
    _, rows, _ = graded
    result = rows["newcell_lab01"]
    assert result.points == 2 and "kept 2 cells you added that your answers use" in result.restored


def test_a_notebook_without_metadata_is_graded_by_its_name(graded) -> None:
    _, rows, _ = graded
    result = rows["nometa_lab01"]
    assert result.points == 4 and "lab 01 taken from the file name" in result.notes[0]


# --- the files -----------------------------------------------------------------------------


def test_grades_csv_has_a_max_row_and_a_row_per_submission(graded) -> None:
    report, rows, out = graded
    with open(out / "grades.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert list(table[0])[:5] == ["submission", "student", "lab", "status", "reason"]
    assert list(table[0])[-4:] == ["points", "max_points", "needs_manual", "notes"]
    top = table[0]
    assert top["submission"] == "max" and top["send-followup-test"] == "1" and top["explain-policy"] == "3"
    assert {row["submission"] for row in table[1:]} == {r.submission.key for r in report.results}
    by_name = {Path(row["file"]).stem: row for row in table[1:] if "submitted" not in row["file"]}
    assert len(by_name) == len(report.results) - 1 and by_name["onewrong_lab01"]["submission"] == "onewrong/lab01"
    assert by_name["onewrong_lab01"] | {"reason": ""} == by_name["onewrong_lab01"]
    assert (by_name["onewrong_lab01"]["send-followup-test"], by_name["onewrong_lab01"]["what-next-test"]) == ("0", "1")
    assert (by_name["onewrong_lab01"]["points"], by_name["onewrong_lab01"]["max_points"]) == ("1", "4")
    assert by_name["writer_lab03"]["explain-policy"] == "" and by_name["writer_lab03"]["needs_manual"] == "yes"
    assert by_name["garbage_lab01"]["status"] == "invalid" and by_name["garbage_lab01"]["max_points"] == "4"
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")], "a temp file was left behind"
    assert "cell what-next called sys.exit(2)" in by_name["exit_lab01"]["notes"]


def test_grades_json_holds_every_verdict_and_message(graded) -> None:
    _, rows, out = graded
    document = json.loads((out / "grades.json").read_text())
    assert document["labs"]["03"]["hand_graded_points"] == 3
    entry = next(s for s in document["submissions"] if s["submission"] == "onewrong/lab01")
    assert [(e["grade_id"], e["mark"], e["points"]) for e in entry["exercises"]] == [
        ("send-followup-test", "incorrect", 0),
        (EXPIRY, "not attempted", 0),
        ("what-next-test", "correct", 1),
    ]
    assert entry["exercises"][0]["message"] == next(e.message for e in rows["onewrong_lab01"].exercises)


def test_feedback_shows_the_checks_words_and_no_grader_source(graded) -> None:
    _, rows, out = graded
    pages = {
        path.relative_to(out / "feedback").as_posix(): path.read_text() for path in (out / "feedback").rglob("*.html")
    }
    assert len(pages) == len(rows)
    page = pages["onewrong/lab01.html"]  # feedback/<student>/labNN.html
    assert "0 / 2" in page and "1 / 1" in page and "incorrect" in page
    import html

    assert html.escape(next(e.message for e in rows["onewrong_lab01"].exercises)) in page
    written = pages["writer/lab03.html"]
    assert "to be graded by hand" in written and "Your answer:" in written
    assert written.lower().count("to be graded by hand") == 1  # the row says it; the summary says "so far"
    assert "Exercise 01.1 (a handler that is safe to run twice)" in page  # the exercise as the learner knows it
    assert "Fix:" not in pages["garbage/lab01.html"] and "fix:" not in pages["garbage/lab01.html"]
    secrets = [".grade(", "BEGIN HIDDEN", "BEGIN SOLUTION", right("send-followup").splitlines()[-1].strip()]
    leaks = [(name, secret) for name, text in pages.items() for secret in secrets if secret in text]
    assert leaks == []


def test_manual_scores_merge_on_the_next_run(graded, tmp_path: Path) -> None:
    _, _, out = graded
    with open(out / "manual.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [(r["submission"], r["grade_id"], r["max_points"], r["score"]) for r in table] == [
        ("writer/lab03", "explain-policy", "3", "")
    ]
    assert table[0]["answer"].startswith("I chose a 60 s lease")
    table[0]["score"] = "2.5"
    filled = tmp_path / "scores.csv"
    with open(filled, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    submission = tmp_path / "class" / "writer_lab03.ipynb"
    fx.write(fx.all_right("03"), submission)
    report = grade([str(tmp_path / "class")], key=fx.SOLUTIONS, out=tmp_path / "out", limits=LIMITS, manual=filled)
    (result,) = report.results
    assert (result.points, result.max_points, result.needs_manual) == (7.5, 8, False)
    assert marks(result)["explain-policy"] == (Mark.GRADED_BY_HAND, 2.5)
    with open(tmp_path / "out" / "manual.csv", newline="") as handle:
        assert next(csv.DictReader(handle))["score"] == "2.5"


def test_manual_csv_shows_the_rubric_and_found_elements_score_and_reach_the_learner(graded, tmp_path: Path) -> None:
    _, _, out = graded
    with open(out / "manual.csv", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    rubric = row["rubric"].splitlines()
    assert len(rubric) == 5 and rubric[0].startswith("1. (1) the TTL explained by crash detection")
    assert rubric[1].startswith("2. (0.5) ") and row["found"] == ""
    feedback = (out / "feedback" / "writer" / "lab03.html").read_text()
    hidden = ("What your instructor looked for", "✓ found", "✗ not found", rubric[0].split(") ", 1)[1])
    assert not any(words in feedback for words in hidden)  # the rubric is the answer key: not before grading
    row["found"] = "1, 2"  # no score: the found elements' points are the score
    filled = tmp_path / "scores.csv"
    with open(filled, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)
    fx.write(fx.all_right("03"), tmp_path / "class" / "writer_lab03.ipynb")
    report = grade([str(tmp_path / "class")], key=fx.SOLUTIONS, out=tmp_path / "out", limits=LIMITS, manual=filled)
    (result,) = report.results
    written = next(e for e in result.exercises if e.grade_id == "explain-policy")
    assert (written.mark, written.points, written.found) == (Mark.GRADED_BY_HAND, 1.5, (1, 2))
    page = (tmp_path / "out" / "feedback" / "writer" / "lab03.html").read_text()
    assert page.count("✓ found") == 2 and page.count("✗ not found") == 3 and "What your instructor looked for" in page
    with open(tmp_path / "out" / "manual.csv", newline="") as handle:
        assert (lambda again: (again["score"], again["found"]))(next(csv.DictReader(handle))) == ("1.5", "1 2")


@pytest.mark.parametrize(("found", "score", "expected"), [("-", "", 0.0), ("1 2", "3", 3.0), ("5", "", 0.5)])
def test_found_elements_and_a_written_score(found: str, score: str, expected: float, tmp_path: Path) -> None:
    filled = tmp_path / "scores.csv"
    filled.write_text(f"submission,lab,grade_id,score,found\nw,03,explain-policy,{score},{found}\n")
    scores = ManualScores.read(filled, lab_sheets("03"))
    assert scores.scores[("w", "explain-policy")] == expected  # a written score wins over the elements


@pytest.mark.parametrize("found", ["6", "0", "one", "1 x"])
def test_a_found_element_the_rubric_does_not_have_is_refused(found: str, tmp_path: Path) -> None:
    from shopops_lab.errors import BadArgumentError

    filled = tmp_path / "scores.csv"
    filled.write_text(f"submission,lab,grade_id,score,found\nw,03,explain-policy,,{found}\n")
    with pytest.raises(BadArgumentError) as raised:
        ManualScores.read(filled, lab_sheets("03"))
    assert "line 2, found" in str(raised.value) and "from 1 to 5" in str(raised.value)


def test_written_answers_left_blank_score_zero_without_the_instructor(graded) -> None:
    _, rows, _ = graded
    assert rows["writer_lab03"].needs_manual
    blank = grade_one_lab("03", fx.submission("03", {"choose-policy": fx.RIGHT}))
    assert marks(blank)["explain-policy"] == (Mark.NOT_ATTEMPTED, 0) and not blank.needs_manual
    assert all(e.kind is Kind.AUTO or e.points == 0 for e in blank.exercises)


def lab_sheets(lab: str) -> dict:
    from shopops_lab.course.grade.key import Key
    from shopops_lab.course.grade.sheets import Sheet

    return {lab: Sheet.of(Key.load(fx.SOLUTIONS, labs={lab}).masters[lab])}


def grade_one_lab(lab: str, nb: nbformat.NotebookNode):
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        path = fx.write(nb, Path(scratch) / f"x_lab{lab}.ipynb")
        (result,) = grade([str(path)], key=fx.SOLUTIONS, out=Path(scratch) / "out", limits=LIMITS).results
    return result


def test_without_fork_each_child_warms_itself_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where fork is missing (Windows), a fresh interpreter per submission loads the kit and
    takes the checks before the learner's code runs: the same scores, only slower."""
    import multiprocessing

    from shopops_lab.course.grade import pool

    monkeypatch.setattr(pool, "_context", lambda: multiprocessing.get_context("spawn"))
    fx.write(fx.all_right("01"), tmp_path / "in" / "right_lab01.ipynb")
    fx.write(one_wrong(REBIND), tmp_path / "in" / "rebinder_lab01.ipynb")
    report = grade([str(tmp_path / "in")], key=fx.SOLUTIONS, out=tmp_path / "out", jobs=2, limits=LIMITS)
    assert {r.submission.name: r.points for r in report.results} == {"rebinder_lab01": 1, "right_lab01": 4}


@pytest.mark.parametrize("fate", ["SIGSTOP", "SIGKILL"])
def test_a_zygote_that_stops_answering_costs_no_grade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fate: str
) -> None:
    """The learner's processes are forked from the zygote; one that no longer answers (stopped
    by a learner of the grader's own user, or gone) is left alone, and each learner process
    is a fresh interpreter instead: the same scores."""
    import os
    import signal

    from shopops_lab.course.grade import zygote

    started = zygote.Zygote.start

    def stuck() -> zygote.Zygote | None:
        found = started()
        assert found is not None
        os.kill(found.process.pid, getattr(signal, fate))
        return found

    monkeypatch.setattr(zygote, "START_SECONDS", 0.5)
    monkeypatch.setattr(zygote.Zygote, "start", staticmethod(stuck))
    fx.write(fx.all_right("01"), tmp_path / "in" / "right_lab01.ipynb")
    fx.write(one_wrong(REBIND), tmp_path / "in" / "rebinder_lab01.ipynb")
    report = grade([str(tmp_path / "in")], key=fx.SOLUTIONS, out=tmp_path / "out", jobs=2, limits=LIMITS)
    assert {r.submission.name: r.points for r in report.results} == {"rebinder_lab01": 1, "right_lab01": 4}


# Lab 00's right answer, right only in a learner process that carries its own lab's modules
# (lab 00's checks, not lab 07's) and loads another of the kit's when the learner's code asks.
ITS_OWN_LAB = """
import sys
CARRIED = sorted(set(sys.modules) & {"shopops_lab.checks.lab07", "shopops_lab.checks.recovery_world", "site"})
LOADED = "shopops_lab.checks.lab00" in sys.modules
def enqueue_first_case(queue):
    if CARRIED or not LOADED or not sys.flags.no_site:
        raise RuntimeError(f"this process carries {CARRIED}, lab 00's checks loaded: {LOADED}")
    from shopops_lab.checks import lab07
    if not callable(lab07.exercise.result):
        raise RuntimeError("lab 07's checks did not load on use")
    return queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")
"""


@pytest.mark.parametrize("forked", [True, False], ids=["from the zygote", "fresh interpreter"])
def test_a_learner_process_loads_its_labs_modules_and_the_rest_on_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forked: bool
) -> None:
    """Before the learner's first cell its process loads what its lab uses (the master's
    imports and its checks), forked from a zygote told the key's labs or started fresh, in
    both cases an interpreter started without `site` (its .pth files cost a start 15 to
    20 ms); anything else of the kit loads when the learner's code imports it."""
    from shopops_lab.course.grade import zygote

    if not forked:
        monkeypatch.setattr(zygote, "usable", lambda: False)
    elif not zygote.usable():
        pytest.skip("the zygote needs fork and passing sockets (Linux)")
    fx.write(fx.submission("00", {"warmup-answer": ITS_OWN_LAB}), tmp_path / "in" / "a_lab00.ipynb")
    report = grade([str(tmp_path / "in")], key=fx.SOLUTIONS, out=tmp_path / "out", jobs=1, limits=LIMITS)
    (result,) = report.results
    assert marks(result)["warmup-test"][0] is Mark.CORRECT, [(e.grade_id, e.message) for e in result.exercises]


def test_without_root_the_learner_runs_as_the_graders_user_and_is_still_graded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the grader cannot switch uid (not root, not Linux), the learner's process runs as
    the grader's own user, unconfined by the file system, and every score is the same."""
    from shopops_lab.course.grade import confinement

    monkeypatch.setattr(confinement, "can_drop", lambda: False)
    monkeypatch.setattr(confinement, "can_hide", lambda: False)
    fx.write(fx.all_right("01"), tmp_path / "in" / "right_lab01.ipynb")
    fx.write(one_wrong(REBIND), tmp_path / "in" / "rebinder_lab01.ipynb")
    report = grade([str(tmp_path / "in")], key=fx.SOLUTIONS, out=tmp_path / "out", jobs=2, limits=LIMITS)
    assert {r.submission.name: r.points for r in report.results} == {"rebinder_lab01": 1, "right_lab01": 4}


# Lab 00's right answer, right only in a process that may run on one core alone.
ON_ONE_CORE = """
import os
def enqueue_first_case(queue):
    if len(os.sched_getaffinity(0)) != 1:
        raise RuntimeError(f"this process may run on cores {sorted(os.sched_getaffinity(0))}")
    return queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")
"""


@pytest.mark.skipif(
    len(confinement.cores()) < 2, reason="pinning needs Linux and 2 cores this process may use (taskset -p shows them)"
)
def test_each_submission_graded_at_once_keeps_a_core_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judge and its learner take turns, so each slot grading a submission has one core,
    which its judge and its learner's processes keep: the first two slots, the first two
    cores (a slot that helps another submission keeps its own core too)."""
    from shopops_lab.course.grade import pool

    cores: list[tuple[int, int | None]] = []
    start = pool.Pool._start

    def noted(self, run) -> None:
        cores.append((run.slot, run.core))
        start(self, run)

    monkeypatch.setattr(pool.Pool, "_start", noted)
    for name in "ab":
        fx.write(fx.submission("00", {"warmup-answer": ON_ONE_CORE}), tmp_path / "in" / f"{name}_lab00.ipynb")
    report = grade([str(tmp_path / "in")], key=fx.SOLUTIONS, out=tmp_path / "out", jobs=2, limits=LIMITS)
    for result in report.results:
        assert marks(result)["warmup-test"][0] is Mark.CORRECT, [(e.grade_id, e.message) for e in result.exercises]
    first, second = confinement.cores()[:2]
    assert cores[:2] == [(0, first), (1, second)] and set(cores) <= {(0, first), (1, second)}, cores


def test_pinning_keeps_a_process_and_its_forks_on_one_core() -> None:
    """`pin` is what a judge and each learner process do first; None (no core to keep, or an
    OS that cannot pin) leaves the process where it was."""
    import os

    allowed = confinement.cores()
    if not allowed:
        pytest.skip("this OS cannot pin a process to a core (Linux can)")
    assert [confinement.core_for(slot, allowed) for slot in range(2 * len(allowed))] == [*allowed, *allowed]
    assert confinement.core_for(0, ()) is None
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pin in a throwaway child, then ask its own fork where it may run
        confinement.pin(None)
        unpinned = os.sched_getaffinity(0) == set(allowed)
        confinement.pin(allowed[-1])
        grandchild = os.fork()
        if grandchild == 0:
            os.write(writer, f"{unpinned} {sorted(os.sched_getaffinity(0))}".encode())
            os._exit(0)
        os.waitpid(grandchild, 0)
        os._exit(0)
    os.waitpid(pid, 0)
    os.close(writer)
    assert os.read(reader, 200).decode() == f"True {[allowed[-1]]}"
    os.close(reader)


def _row(result) -> tuple:
    exercises = [(e.grade_id, e.mark, e.points, e.message, e.evidence) for e in result.exercises]
    return result.status, result.reason, exercises, result.notes


@pytest.mark.parametrize(
    ("answers", "limits"),
    [
        ({"send-followup": fx.RIGHT, "what-next": fx.RIGHT}, LIMITS),
        ({"send-followup": HANG, "what-next": fx.RIGHT}, HANG_LIMITS),  # one judge's step hangs, the other's does not
    ],
    ids=["right", "one-exercise-hangs"],
)
def test_one_judge_grades_a_submission_however_many_slots_are_free(
    answers, limits, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A free slot never starts a second judge for a submission being graded (work stealing
    did not pay at a class's size, see test_grade_parts.py): one or two slots, one judge
    (started again only after a stop) and the same row."""
    from shopops_lab.course.grade import pool

    started: list[bool] = []
    original = pool.Pool._start

    def start(self, run) -> None:
        started.append(bool(run.stopped))  # a start after a stop replays the cells that ran
        original(self, run)

    monkeypatch.setattr(pool.Pool, "_start", start)
    fx.write(fx.submission("01", answers), tmp_path / "in" / "alone_lab01.ipynb")
    rows = {}
    for jobs in (1, 2):
        started.clear()
        report = grade([str(tmp_path / "in")], key=fx.SOLUTIONS, out=tmp_path / f"out{jobs}", jobs=jobs, limits=limits)
        (result,) = report.results
        rows[jobs] = _row(result)
        assert started.count(False) == 1, started  # one first start, whatever the slots
    assert rows[1] == rows[2]
    marks = {grade_id: mark for grade_id, mark, *_ in rows[2][2]}
    first = Mark.CORRECT if answers["send-followup"] == fx.RIGHT else Mark.TIMEOUT
    assert (marks["send-followup-test"], marks["what-next-test"]) == (first, Mark.CORRECT)


def test_a_step_an_earlier_stop_blocks_is_scored_as_blocked_whatever_was_said_for_it() -> None:
    """A step blocked by an earlier stopped step scores as blocked even where a verdict for it
    came in (the row says what a judge that never ran it says); a step's own verdict, sent
    before its own timer stopped it, stands."""
    from shopops_lab.course.grade.pool import Pool, _Run
    from shopops_lab.course.grade.rebuild import Plan, PlannedCell, Role

    def step(index: int, role: Role, reads: set[str]) -> PlannedCell:
        binds = frozenset({"f"} if role is Role.ANSWER else ())
        return PlannedCell(index, f"c{index}", role, "", binds, frozenset(reads))

    plan = Plan("01", (step(0, Role.ANSWER, set()), step(1, Role.TEST, {"f"}), step(2, Role.TEST, {"f"})), (), (), ())
    run = _Run(submission=None, master=None, plan=plan, started=0.0)  # type: ignore[arg-type]
    run.stopped[1] = "did not finish within 2 s"
    run.results[2] = ["correct", "a verdict the stop makes moot", []]
    run.results[1] = ["correct", "said before its own timer stopped it", []]
    judged = Pool(key=None, limits=HANG_LIMITS, jobs=2)  # type: ignore[arg-type]
    blocked = plan.blocked(run.stopped)
    later = judged._exercise(run, 2, "c2", 1.0, blocked)
    assert (later.mark, later.points) == (Mark.TIMEOUT, 0.0)
    assert later.message == "Not checked: cell c1, which this exercise depends on, did not finish within 2 s."
    itself = judged._exercise(run, 1, "c1", 1.0, blocked)  # its own verdict, sent before it stopped, stands
    assert (itself.mark, itself.message) == (Mark.CORRECT, "said before its own timer stopped it")


def test_a_kit_value_from_a_module_the_lab_never_loads_is_judged_not_refused(tmp_path: Path) -> None:
    """The grader loads only what the key's labs use. A policy that returns a kit enum from a
    module lab 07 never imports (jobs) still crosses as that value, and the check says what
    came back, as the notebook would: not "sent something it should not have". Run as the
    instructor runs it, in a fresh interpreter, where nothing else has loaded that module."""
    policy = "from shopops_lab.jobs import JobState\ndef my_policy(signals):\n    return JobState.QUEUED"
    policy_row = fx.graded_from_the_command_line("07", {"my-policy": policy}, tmp_path)["my-policy-test"]
    assert policy_row["mark"] == "incorrect", policy_row
    assert "returned the JobState" in policy_row["message"] and "return a decision" in policy_row["message"]


def test_links_fifos_and_linked_folders_get_a_row_or_a_line_and_nothing_is_followed(tmp_path: Path) -> None:
    """A class folder holding a link to the key named as a submission, a FIFO (which would
    block a reader for ever) and a link to a folder outside it: the first two get an invalid
    row saying what they are, the folder is listed as not followed, and the honest file beside
    them is graded."""
    import os

    outside = tmp_path / "outside"
    fx.write(fx.all_right("01"), outside / "eve_lab01.ipynb")
    room = tmp_path / "in"
    fx.write(fx.all_right("01"), room / "right_lab01.ipynb")
    (room / "mallory_lab01.ipynb").symlink_to(fx.master_path("01"))
    os.mkfifo(room / "fifo_lab01.ipynb")
    (room / "linked").symlink_to(outside, target_is_directory=True)
    report = grade([str(room)], key=fx.SOLUTIONS, out=tmp_path / "out", jobs=1, limits=LIMITS)
    rows = {r.submission.student: r for r in report.results}
    assert set(rows) == {"right", "mallory", "fifo"}, rows
    assert rows["right"].status is Status.GRADED and rows["right"].points == 4
    assert rows["mallory"].status is Status.INVALID and "symbolic link" in rows["mallory"].reason
    assert str(fx.master_path("01")) in rows["mallory"].reason and rows["mallory"].points == 0
    assert rows["fifo"].status is Status.INVALID and "is a FIFO" in rows["fifo"].reason
    (linked,) = [item for item in report.listed if item.file.endswith("/linked")]
    assert "not followed" in linked.detail
    assert any("linked" in warning and "not followed" in warning for warning in report.warnings), report.warnings
    with open(tmp_path / "out" / "files.csv") as handle:
        assert any(row["file"].endswith("/linked") and row["outcome"] == "refused" for row in csv.DictReader(handle))
