"""`shopops-lab grade` as an instructor meets it: every lab's master earns every point and its
student notebook none, usage errors are one line with the fix (exit 2) and write nothing,
and a run shows a progress bar and ends with a one-line summary (exit 0)."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import grade_fixtures as fx
import pytest

from shopops_lab import cli
from shopops_lab.course.grade import command
from shopops_lab.course.grade.confinement import Confinement
from shopops_lab.course.grade.judge import Limits
from shopops_lab.course.grade.results import Kind, Mark, Status
from shopops_lab.course.grade.run import grade

PATIENT = Limits(cell_seconds=900, notebook_seconds=3600)  # right answers are judged, not timed

LABS = sorted(path.name[:2] for path in fx.SOLUTIONS.glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture(scope="module")
def every_lab(tmp_path_factory: pytest.TempPathFactory):
    """Each lab's master, and its student notebook, submitted as they are."""
    root = tmp_path_factory.mktemp("every-lab")
    for lab in LABS:
        path = fx.master_path(lab)
        fx.write(fx.master(lab), root / "class" / f"master_{path.name}")
        fx.write(fx.submission(lab), root / "class" / f"pristine_{path.name}")
    report = grade([str(root / "class")], key=fx.SOLUTIONS, out=root / "out", jobs=2, limits=PATIENT)
    return {result.submission.name: result for result in report.results}


@pytest.mark.parametrize("lab", LABS)
def test_every_labs_master_earns_every_autograded_point(every_lab, lab: str) -> None:
    result = every_lab[f"master_{fx.master_path(lab).stem}"]
    assert result.status is Status.GRADED, result.reason
    autos = [e for e in result.exercises if e.kind is Kind.AUTO]
    assert autos and all(e.mark is Mark.CORRECT and e.points == e.max_points for e in autos), [
        (e.grade_id, e.message) for e in autos
    ]
    assert all(e.mark is Mark.BY_HAND for e in result.exercises if e.kind is Kind.MANUAL)


@pytest.mark.parametrize("lab", LABS)
def test_every_labs_student_notebook_earns_nothing(every_lab, lab: str) -> None:
    result = every_lab[f"pristine_{fx.master_path(lab).stem}"]
    assert result.status is Status.GRADED and result.points == 0 and not result.needs_manual
    assert {e.mark for e in result.exercises} == {Mark.NOT_ATTEMPTED}
    assert result.restored == ()


# --- the command line ---------------------------------------------------------------------


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def grade_with_manual_scores(submission: Path, tmp_path: Path, scores: Path) -> tuple[int, str, str]:
    return run_cli(
        "grade", str(submission), "--key", str(fx.SOLUTIONS), "--out", str(tmp_path / "out"), "--manual", str(scores)
    )


@pytest.fixture()
def one_submission(tmp_path: Path) -> Path:
    return fx.write(fx.submission("01", {"send-followup": fx.RIGHT}), tmp_path / "in" / "alice_lab01.ipynb")


def test_a_run_prints_a_summary_line_and_exits_0(one_submission: Path, tmp_path: Path) -> None:
    code, out, err = run_cli(
        "grade", str(one_submission.parent), "--key", str(fx.SOLUTIONS), "--out", str(tmp_path / "out"), "--jobs", "1"
    )
    assert code == 0, err
    walls = re.escape(Confinement.detect().describe())  # as grades.json says: "uid drop, ..., Landlock ABI 7"
    assert re.fullmatch(
        r"graded 1, timeout 0, invalid 0, error 0: 1 submission in \d+\.\d s "
        rf"\(\d+\.\d\d s each, 1 at a time, confined: {walls}\) -> \S+grades\.csv\n",
        out,
    ), out
    assert json.loads((tmp_path / "out" / "grades.json").read_text())["confinement"] == Confinement.detect().describe()
    with open(tmp_path / "out" / "grades.csv", newline="") as handle:
        (row,) = [r for r in csv.DictReader(handle) if r["submission"] != "max"]
    assert (row["student"], row["points"]) == ("alice", "1")


def test_the_progress_bar_draws_on_a_terminal_only() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen, log = Terminal(), io.StringIO()
    for stream in (screen, log):
        bar = command.Progress(4, stream, width=8)
        for _ in range(4):
            bar.advance()
        bar.close()
    assert "\rgrading [##......] 1/4" in screen.getvalue() and "\rgrading [########] 4/4" in screen.getvalue()
    assert log.getvalue() == ""


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--out", "OUT"],
            "error: --key is missing: the grader rebuilds every submission from its master. "
            "Fix: pass the folder of master notebooks, e.g. --key solutions/.",
        ),
        (["--key", "KEY"], "error: --out is missing. Fix: name a folder for the gradebook, e.g. --out grades/."),
        (["--key", "NOWHERE", "--out", "OUT"], "does not exist. Fix: pass the kit's solutions/ folder"),
        (["--key", "KEY", "--out", "OUT", "--jobs", "0"], "error: --jobs is 0. Fix: pass 1 or more."),
        (["--key", "KEY", "--out", "OUT", "--timeout", "0"], "error: --timeout is 0. Fix: pass a number above 0"),
        (["--key", "KEY", "--out", "OUT", "--timeout", "inf"], "error: --timeout is inf. Fix: pass a number above 0"),
        (["--key", "KEY", "--out", "OUT", "--notebook-timeout", "nan"], "error: --notebook-timeout is nan."),
        (["--key", "KEY", "--out", "OUT", "--memory", str(10**30)], "error: --memory is 1e+30. Fix: pass a number"),
    ],
)
def test_usage_errors_are_one_line_with_the_fix(
    one_submission: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    swap = {"OUT": str(tmp_path / "out"), "KEY": str(fx.SOLUTIONS), "NOWHERE": str(tmp_path / "nowhere")}
    code, out, err = run_cli("grade", str(one_submission), *[swap.get(a, a) for a in args])
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "out" / "grades.csv").exists()


def test_an_empty_folder_or_an_unwritable_out_is_a_usage_error(tmp_path: Path, one_submission: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli("grade", str(tmp_path / "empty"), "--key", str(fx.SOLUTIONS), "--out", str(tmp_path / "out"))
    assert code == 2 and "hold no .ipynb file. Fix: pass the folder the notebooks were collected into" in err
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, _, err = run_cli("grade", str(one_submission), "--key", str(fx.SOLUTIONS), "--out", str(blocker / "grades"))
    assert code == 2 and "is not a folder this user can write" in err and "Fix: pass a folder you can write to" in err


def test_a_gradebook_name_taken_by_a_folder_is_a_usage_error(tmp_path: Path, one_submission: Path) -> None:
    from shopops_lab.course.grade import gradebook

    (tmp_path / "out" / "grades.csv").mkdir(parents=True)
    (tmp_path / "out" / gradebook.MANIFEST).write_text(gradebook.manifest())  # a gradebook, else it is refused whole
    code, _, err = run_cli("grade", str(one_submission), "--key", str(fx.SOLUTIONS), "--out", str(tmp_path / "out"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "holds grades.csv, which is a folder" in err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["grades.csv", gradebook.MANIFEST]


def _key_of(tmp_path: Path, notebooks: dict[str, object]) -> Path:
    for name, nb in notebooks.items():
        fx.write(nb, tmp_path / "key" / name)
    return tmp_path / "key"


def test_a_key_of_student_notebooks_or_of_another_course_is_refused(tmp_path: Path, one_submission: Path) -> None:
    import nbformat

    students = _key_of(tmp_path / "a", {fx.master_path("01").name: fx.submission("01")})
    code, _, err = run_cli("grade", str(one_submission), "--key", str(students), "--out", str(tmp_path / "out"))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "a student notebook: no cell marks a solution" in err
    other = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "x = 1",
                metadata={
                    "nbgrader": {
                        "grade_id": "x",
                        "solution": True,
                        "grade": False,
                        "locked": False,
                        "schema_version": 3,
                    }
                },
            )
        ]
    )
    course = _key_of(tmp_path / "b", {"01_another_course.ipynb": other})
    code, _, err = run_cli("grade", str(one_submission), "--key", str(course), "--out", str(tmp_path / "out"))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "holds 01_another_course.ipynb, which is not a master notebook of this kit" in err
    assert not (tmp_path / "out").exists()


def test_a_bad_manual_score_is_refused_before_anything_runs(tmp_path: Path, one_submission: Path) -> None:
    scores = tmp_path / "scores.csv"
    scores.write_text(
        "submission,student,lab,grade_id,max_points,score,answer\nalice_lab03,alice,03,explain-policy,3,7,text\n"
    )
    code, _, err = grade_with_manual_scores(one_submission, tmp_path, scores)
    assert code == 2 and "line 2, score is '7', not a number from 0 to 3" in err
    assert not (tmp_path / "out").exists()
    scores.write_text("student,score\nalice,1\n")
    code, _, err = grade_with_manual_scores(one_submission, tmp_path, scores)
    assert code == 2 and "has no submission, grade_id column" in err


def test_a_score_for_no_submission_is_a_warning(tmp_path: Path, one_submission: Path) -> None:
    scores = tmp_path / "scores.csv"
    scores.write_text("submission,grade_id,score\nbob_lab03,explain-policy,2\n")
    code, out, err = grade_with_manual_scores(one_submission, tmp_path, scores)
    assert code == 0 and "warning: " in err and "bob_lab03 explain-policy matches no written answer" in err


def test_a_real_command_line_ends_at_once_with_every_line_and_file_written(
    tmp_path: Path, one_submission: Path
) -> None:
    """From a real command line `grade` skips the interpreter's teardown: nothing it prints
    or writes may be lost by that, and its status is the command's."""
    scores = tmp_path / "scores.csv"
    scores.write_text("submission,grade_id,score\nbob_lab03,explain-policy,2\n")
    out = tmp_path / "out"
    args = [str(one_submission), "--key", str(fx.SOLUTIONS), "--out", str(out), "--manual", str(scores)]
    done = subprocess.run(
        [sys.executable, "-m", "shopops_lab", "grade", *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("graded 1, timeout 0, invalid 0, error 0: 1 submission in ") and done.stdout.endswith(
        "grades.csv\n"
    )
    assert "warning: " in done.stderr and "bob_lab03 explain-policy matches no written answer" in done.stderr
    with open(out / "grades.csv", newline="") as handle:
        (row,) = [r for r in csv.DictReader(handle) if r["submission"] != "max"]
    assert (row["student"], row["points"]) == ("alice", "1")
    refused = subprocess.run(
        [sys.executable, "-m", "shopops_lab", "grade", *args, "--jobs", "0"], capture_output=True, text=True, timeout=60
    )
    assert (refused.returncode, refused.stdout) == (2, "") and refused.stderr.startswith("error: --jobs is 0")


def test_the_instructors_points_table_matches_the_masters() -> None:
    """docs/instructors.md's points per lab, autograded and by hand (the README's course table
    gives the totals: `test_docs.py`)."""
    from shopops_lab.course.grade.key import Key

    readme = (fx.ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    table = {
        lab: (auto, hand, total, share)
        for lab, auto, hand, total, share in re.findall(
            r"^\s*\| (\d\d) \| (\d+) \| (\d+) \| (\d+) \| (\d+)% \|$", readme, flags=re.M
        )
    }
    expected = {}
    for lab, master in Key.load(fx.SOLUTIONS).masters.items():
        hand, total = master.manual_points, master.max_points
        expected[lab] = (f"{total - hand:g}", f"{hand:g}", f"{total:g}", f"{round(100 * hand / total)}")
    assert table == expected


def test_a_lab_whose_imports_fail_here_is_refused_before_grading(tmp_path: Path, one_submission: Path) -> None:
    """The install, not the learner, would lose the points (nbgrader scores it 0 silently)."""
    from shopops_lab.course import cells

    nb = fx.master("01")
    nb.cells.insert(1, cells.code("import shopops_missing_dependency", grade_id="needs-more"))
    fx.write(nb, tmp_path / "key" / fx.master_path("01").name)
    code, out, err = run_cli(
        "grade", str(one_submission), "--key", str(tmp_path / "key"), "--out", str(tmp_path / "out")
    )
    assert code == 2 and out == ""
    assert "error: Lab 01's master imports shopops_missing_dependency, which this Python cannot import" in err
    assert "nothing was graded. Fix: install the kit with its dependencies:" in err and "-m pip install -e" in err
    assert not (tmp_path / "out").exists()


def _instructors_lab(tmp_path: Path, stem: str, cells: list) -> Any:
    """A lab an instructor wrote with the kit's cell helpers, as the master `tmp_path/key/<stem>`;
    its student version."""
    import nbformat

    from shopops_lab.course import cells as make
    from shopops_lab.course.build import build_student

    master = make.notebook(cells, lab=stem[:2], version="1", title=stem[3:].title())
    (tmp_path / "key").mkdir()
    nbformat.write(master, tmp_path / "key" / f"{stem}.ipynb")
    return build_student(master)


def test_a_plain_test_cell_uses_the_masters_imports_as_the_judges_own(tmp_path: Path) -> None:
    """A test cell the kit's checks do not back runs in the judge, with the modules the
    master imports as the judge's own (the grader loads them), not whatever the learner
    bound to their names."""
    import sys

    from shopops_lab.course import cells

    assert "colorsys" not in sys.modules  # else the judge would have it whatever the grader loads
    student = _instructors_lab(
        tmp_path,
        "43_hues",
        [
            cells.code("import colorsys", grade_id="imports"),
            cells.answer(
                "def hue(rgb):\n    ### BEGIN SOLUTION\n    return colorsys.rgb_to_hsv(*rgb)[0]\n    ### END SOLUTION",
                "hue",
            ),
            cells.test("assert hue((0, 1, 0)) == colorsys.rgb_to_hsv(0, 1, 0)[0]", "hue-test", 2),
        ],
    )
    right = fx.twin(student)
    right.cells[1].source = "def hue(rgb):\n    return colorsys.rgb_to_hsv(*rgb)[0]"
    fx.write(right, tmp_path / "in" / "right_lab43.ipynb")
    forger = fx.twin(right)  # a wrong answer with a `colorsys` of its own that agrees with it
    fake = "class colorsys:\n    rgb_to_hsv = staticmethod(lambda *rgb: (0.5, 0, 0))\n\n"
    forger.cells[1].source = fake + "def hue(rgb):\n    return 0.5"
    fx.write(forger, tmp_path / "in" / "forger_lab43.ipynb")
    code, out, err = run_cli(
        "grade", str(tmp_path / "in"), "--key", str(tmp_path / "key"), "--out", str(tmp_path / "out")
    )
    assert code == 0, err
    with open(tmp_path / "out" / "grades.csv", newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["submission"] != "max"]
    assert sorted((row["student"], row["points"]) for row in rows) == [("forger", "0"), ("right", "2")], rows


def test_a_plain_assert_test_cell_is_graded_as_nbgrader_grades_it(tmp_path: Path) -> None:
    """A lab an instructor writes without the kit's checks: its test cell passes unless it raises."""
    from shopops_lab.course import cells

    student = _instructors_lab(
        tmp_path,
        "42_doubling",
        [
            cells.md("# Doubling"),
            cells.answer("def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION", "double"),
            cells.test("assert double(21) == 42, 'double(21) should be 42'", "double-test", 2),
        ],
    )
    fx.write(student, tmp_path / "in" / "pristine_lab42.ipynb")
    wrong = fx.twin(student)
    wrong.cells[1].source = "def double(x):\n    return x + 2"
    fx.write(wrong, tmp_path / "in" / "wrong_lab42.ipynb")
    right = fx.twin(student)
    right.cells[1].source = "def double(x):\n    return x * 2"
    fx.write(right, tmp_path / "in" / "right_lab42.ipynb")
    for name, forged in FORGED_DOUBLES.items():  # each passed the cell when it ran in the learner's process
        forger = fx.twin(student)
        forger.cells[1].source = forged
        fx.write(forger, tmp_path / "in" / f"{name}_lab42.ipynb")
    report = grade([str(tmp_path / "in")], key=tmp_path / "key", out=tmp_path / "out", limits=Limits(cell_seconds=10))
    rows = {r.submission.student: r.exercises[0] for r in report.results}
    assert {student: (e.mark, e.points) for student, e in rows.items()} == {
        "pristine": (Mark.NOT_ATTEMPTED, 0),
        "wrong": (Mark.INCORRECT, 0),
        "right": (Mark.CORRECT, 2),
        **{name: (Mark.INCORRECT, 0) for name in FORGED_DOUBLES},
    }
    assert rows["wrong"].message == "AssertionError: double(21) should be 42"
    assert rows["intequal"].message == "AssertionError: double(21) should be 42"  # it arrived as the int 0


def test_the_judge_runs_with_the_cyclic_collector_off_and_collects_past_its_bound(tmp_path: Path, monkeypatch) -> None:
    """An instructor's own test cell runs in the judge, so it sees the judge's collector: off
    (see judge._collect_if_large); past COLLECT_ABOVE_MB the judge collects after each cell."""
    import gc

    from shopops_lab.course import cells
    from shopops_lab.course.grade import judge

    student = _instructors_lab(
        tmp_path,
        "43_collector",
        [
            cells.md("# The judge's collector"),
            cells.answer("def one():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION", "one"),
            cells.test("import gc\nassert one() == 1 and not gc.isenabled(), 'the collector is on'", "one-test", 1),
        ],
    )
    right = fx.twin(student)
    right.cells[1].source = "def one():\n    return 1"
    fx.write(right, tmp_path / "in" / "right_lab43.ipynb")
    report = grade([str(tmp_path / "in")], key=tmp_path / "key", out=tmp_path / "out", limits=Limits(cell_seconds=10))
    (result,) = report.results
    assert (result.exercises[0].mark, result.exercises[0].message) == (Mark.CORRECT, "")

    starts: list[str] = []
    was_enabled = gc.isenabled()
    gc.disable()
    gc.callbacks.append(watch := lambda phase, info: starts.append(phase) if phase == "start" else None)
    try:
        monkeypatch.setattr(judge, "COLLECT_ABOVE_MB", 10**9)
        judge._collect_if_large()
        assert starts == []
        monkeypatch.setattr(judge, "COLLECT_ABOVE_MB", 0)
        judge._collect_if_large()
        assert starts == ["start"]
    finally:
        gc.callbacks.remove(watch)
        if was_enabled:
            gc.enable()


FORGED_DOUBLES = {
    "alwaysequal": "class Yes:\n    def __eq__(self, other):\n        return True\n\ndef double(x):\n    return Yes()",
    "intequal": (
        "class Yes(int):\n    def __eq__(self, other):\n        return True\n\ndef double(x):\n    return Yes(0)"
    ),
    "nocompile": (
        "import builtins\n_c = builtins.compile\n"  # every later cell with an assert runs `pass`
        "builtins.compile = lambda text, *a, **k: _c('pass' if 'assert' in str(text) else text, *a, **k)\n"
        "def double(x):\n    return 0"
    ),
}


# An instructor's own hidden tests, added to a copy of lab 01's key: the kit's check inside more
# code, and a plain assert on the learner's function.
OWN_TESTS = {
    "my-knowledge-test": (
        "# graded when your notebook is graded\n### BEGIN HIDDEN TESTS\nlab01.knowledge.grade(what_can_happen_next)\n"
        "assert 'w1_stopped' not in what_can_happen_next()\n### END HIDDEN TESTS"
    ),
    "my-plain-test": (
        "# graded when your notebook is graded\n### BEGIN HIDDEN TESTS\n"
        "def labels():\n    return what_can_happen_next()\nassert len(labels()) >= 2\n### END HIDDEN TESTS"
    ),
}


REWORDED = (
    "# graded when your notebook is graded\n### BEGIN HIDDEN TESTS\n"
    "found = lab01.knowledge.result(what_can_happen_next)\n"
    'assert found.correct, "In our course\'s words: " + found.message\n### END HIDDEN TESTS'
)


def test_an_instructors_own_tests_in_a_copy_of_the_key_grade_as_the_kits_do(tmp_path: Path) -> None:
    """Added to a copy of the key, they say "not attempted" of an untouched answer (however the
    test reaches the stub), "incorrect" of a wrong one, and pass a right one."""
    from shopops_lab.course import cells

    nb = fx.master("01")
    fx.cell(nb, "what-next-test").source = REWORDED  # the kit's check, in the instructor's words
    at = nb.cells.index(fx.cell(nb, "what-next-test")) + 1
    for offset, (grade_id, source) in enumerate(OWN_TESTS.items()):
        nb.cells.insert(at + offset, cells.test(source, grade_id, 1))
    fx.write(nb, tmp_path / "key" / fx.master_path("01").name)
    released = fx.submission("01")  # the kit's student notebook: the instructor's tests are not in it
    fx.write(released, tmp_path / "in" / "pristine_lab01.ipynb")
    wrong = "def what_can_happen_next():\n    return {'w1_stopped'}"
    fx.write(fx.submission("01", {"what-next": wrong}), tmp_path / "in" / "wrong_lab01.ipynb")
    fx.write(fx.submission("01", {"what-next": fx.RIGHT}), tmp_path / "in" / "right_lab01.ipynb")
    report = grade([str(tmp_path / "in")], key=tmp_path / "key", out=tmp_path / "out", limits=PATIENT)
    every = {r.submission.student: {e.grade_id: (e.mark, e.message) for e in r.exercises} for r in report.results}
    marks = {
        student: {gid: found for gid, found in rows.items() if gid in OWN_TESTS} for student, rows in every.items()
    }
    assert every["wrong"]["what-next-test"] == (
        Mark.INCORRECT,
        "AssertionError: In our course's words: 'w1_stopped' cannot happen: a lease is a record in the queue, "
        "not a signal to the worker: nothing interrupts W1's code.",
    )
    assert (
        every["pristine"]["what-next-test"][0] is Mark.NOT_ATTEMPTED
        and every["right"]["what-next-test"][0] is Mark.CORRECT
    )
    stub = "Not attempted: the answer is still the stub."
    assert marks["pristine"] == {grade_id: (Mark.NOT_ATTEMPTED, stub) for grade_id in OWN_TESTS}
    assert marks["wrong"]["my-knowledge-test"][0] is Mark.INCORRECT
    assert marks["wrong"]["my-plain-test"][0] is Mark.INCORRECT
    assert marks["right"] == {grade_id: (Mark.CORRECT, "") for grade_id in OWN_TESTS}
