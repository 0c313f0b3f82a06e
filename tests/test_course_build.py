"""The student-notebook generator: what it cuts, what it tags and locks, what it refuses,
how --check sees drift, that writes are atomic, and that --execute runs both copies."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from shopops_lab.course import add_arguments, cells, run
from shopops_lab.course import build as build_module
from shopops_lab.course.build import answer_dependent_cells, build_notebooks, build_student
from shopops_lab.course.errors import NotebookExecutionError, NotebookInvalidError
from shopops_lab.errors import BadArgumentError

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_DIR = ROOT / "tests" / "fixtures" / "course"
FIXTURES = FIXTURE_DIR / "solutions"
DEMO_TAGGED = {3, 4, 5, 7, 8, 9}  # a visible test, cells naming answers, a stub at module level, needs_answer
SECOND_TAGGED = {2}  # the visible test; the class runs, the hidden-only test shows nothing


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def tagged(nb: nbformat.NotebookNode) -> set[int]:
    return {i for i, c in enumerate(nb.cells) if "raises-exception" in c.metadata.get("tags", [])}


@pytest.fixture
def course(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch copy of the fixture masters in solutions/, cwd at its root."""
    shutil.copytree(FIXTURES, tmp_path / "solutions")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def demo() -> nbformat.NotebookNode:
    return build_student(read(FIXTURES / "01_demo.ipynb"))


def test_committed_fixtures_match_their_generator() -> None:
    sys.path.insert(0, str(FIXTURE_DIR))
    try:
        import make_fixtures
    finally:
        sys.path.remove(str(FIXTURE_DIR))
    for name, make in make_fixtures.FIXTURES.items():
        assert (FIXTURES / name).read_text(encoding="utf-8") == nbformat.writes(make()) + "\n", (
            f"rerun make_fixtures.py for {name}"
        )


def test_solution_region_replaced_at_its_indentation(demo: nbformat.NotebookNode) -> None:
    assert demo.cells[2].source == (
        "def restock(stock, qty):\n"
        '    """Stock after adding qty units."""\n'
        "    if not isinstance(qty, int):\n"
        '        raise TypeError("qty must be an int")\n'
        "    # YOUR CODE HERE\n"
        "    raise NotImplementedError()"
    )
    assert demo.cells[7].source == "# YOUR CODE HERE\nraise NotImplementedError()"
    second = build_student(read(FIXTURES / "02_second.ipynb"))
    assert (
        "        if by:\n            # YOUR CODE HERE\n            raise NotImplementedError()\n"
        "        return self.count" in second.cells[1].source
    )


def test_written_answers_become_the_text_stub(demo: nbformat.NotebookNode) -> None:
    assert demo.cells[10].source == "Why must a restock refuse a negative quantity?\n\nYOUR ANSWER HERE"
    second = build_student(read(FIXTURES / "02_second.ipynb"))
    assert second.cells[4].source == "YOUR ANSWER HERE"  # no markers: the whole cell


def test_hidden_tests_and_answers_do_not_reach_students(demo: nbformat.NotebookNode) -> None:
    assert demo.cells[3].source == "assert restock(2, 3) == 5"
    second = build_student(read(FIXTURES / "02_second.ipynb"))
    assert second.cells[3].source == ""
    for nb in (demo, second):
        text = nbformat.writes(nb)
        for leaked in (
            "HIDDEN",
            "SOLUTION",
            "restock(0, 0)",
            "stock + qty",
            "LIMIT = 10",
            "silently remove",
            "self.count += by",
            "bump(5)",
        ):
            assert leaked not in text


def test_outputs_and_execution_counts_are_cleared() -> None:
    master = read(FIXTURES / "01_demo.ipynb")
    master.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="old\n")]
    master.cells[1].execution_count = 4
    student = build_student(master)
    assert student.cells[1].outputs == [] and student.cells[1].execution_count is None


def test_raises_exception_only_on_cells_that_raise_in_the_student_copy(demo: nbformat.NotebookNode) -> None:
    assert tagged(demo) == DEMO_TAGGED
    assert tagged(build_student(read(FIXTURES / "02_second.ipynb"))) == SECOND_TAGGED
    assert all(c.cell_type == "code" for i, c in enumerate(demo.cells) if i in DEMO_TAGGED)


def test_dependency_is_transitive_and_cleared_by_a_clean_rebinding() -> None:
    nb = cells.notebook(
        [
            cells.answer("### BEGIN SOLUTION\nrate = 3\n### END SOLUTION", "rate"),
            cells.code("price = rate * 2"),  # names the answer
            cells.code("def total():\n    return price"),  # names a dependent cell, inside a def
            cells.code("price = 10"),  # clean rebinding
            cells.code("print(price)"),  # fine again
            cells.code("import math\nprint(math.pi)"),  # never touched
        ],
        lab="09",
        version="1",
        title="deps",
    )
    assert answer_dependent_cells(nb) == {0, 1, 2}


def test_checks_and_hidden_tests_run_in_the_student_copy_and_stubs_at_module_level_do_not() -> None:
    nb = cells.notebook(
        [
            cells.answer("def send(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION", "send"),
            cells.code("lab.exercise.check(send)\nlab.exercise.hint(1)"),  # check() never raises
            cells.test(
                "# graded by a hidden test\n### BEGIN HIDDEN TESTS\nlab.exercise.grade(send)\n### END HIDDEN TESTS",
                "send-test",
                1,
            ),  # the student sees a comment
            cells.test("lab.exercise.grade(send)", "send-visible", 1),  # a visible test still raises
            cells.code("print(send(1))"),  # calls the stub
            cells.code("lab.replay(send, seed=1)"),  # passes it to other code
            cells.answer("### BEGIN SOLUTION\nrate = 3\n### END SOLUTION", "rate"),  # a stub at module level
            cells.code("if lab.exercise.answered(send):\n    shown = send(2)\n    print(shown)"),  # guarded
            cells.code("print(shown)"),  # unguarded: shown is missing
            cells.code("if lab.exercise.answered(send):\n    print(shown)"),  # guarded again
            cells.code("seen = None\nif lab.exercise.answered(send):\n    seen = send(3)"),  # a default first
            cells.code("print(seen)"),  # defined either way
            cells.code("if lab.exercise.answered(send):\n    later = send(4)\nfor _ in []:\n    later = 0"),
            cells.code("print(later)"),  # a loop binding is not sure
        ],
        lab="09",
        version="1",
        title="run all",
    )
    assert answer_dependent_cells(nb) == {3, 4, 5, 6, 8, 13}


def test_cells_are_locked_except_answers(demo: nbformat.NotebookNode) -> None:
    for cell in demo.cells:
        answer = cell.metadata.nbgrader.solution
        assert cell.metadata.editable is answer
        assert cell.metadata.deletable is False


def test_build_is_deterministic_and_keeps_master_ids() -> None:
    master = read(FIXTURES / "01_demo.ipynb")
    first, second = build_student(master), build_student(master)
    assert nbformat.writes(first) == nbformat.writes(second)
    assert [c.id for c in first.cells] == [c.id for c in master.cells]
    assert first.metadata == master.metadata


def test_invalid_master_is_refused_naming_cell_and_field(course: Path) -> None:
    master = read(course / "solutions" / "01_demo.ipynb")
    master.cells[3].metadata.nbgrader.pop("points")
    nbformat.write(master, course / "solutions" / "01_demo.ipynb")
    with pytest.raises(NotebookInvalidError) as caught:
        build_notebooks("solutions", "notebooks")
    message = str(caught.value)
    assert "solutions/01_demo.ipynb, cell 3, metadata.nbgrader.points" in message
    assert 'Fix: add "points"' in message
    assert not (course / "notebooks").exists(), "an invalid master must stop the whole build"


def test_master_with_raises_exception_tag_is_refused() -> None:
    master = read(FIXTURES / "01_demo.ipynb")
    master.cells[4].metadata["tags"] = ["raises-exception"]
    with pytest.raises(NotebookInvalidError, match="cell 4, metadata.tags"):
        build_student(master, name="01_demo.ipynb")


def test_build_writes_then_reports_up_to_date(course: Path) -> None:
    report = build_notebooks("solutions", "notebooks")
    assert report.lines() == ["notebooks/01_demo.ipynb: written", "notebooks/02_second.ipynb: written"]
    assert report.ok
    assert read(course / "notebooks" / "01_demo.ipynb") == build_student(read(FIXTURES / "01_demo.ipynb"))
    again = build_notebooks("solutions", "notebooks")
    assert again.lines() == ["notebooks/01_demo.ipynb: up to date", "notebooks/02_second.ipynb: up to date"]


def test_check_passes_in_sync_and_detects_drift(course: Path) -> None:
    build_notebooks("solutions", "notebooks")
    assert build_notebooks("solutions", "notebooks", check=True).ok

    demo_path = course / "notebooks" / "01_demo.ipynb"
    drifted = read(demo_path)
    drifted.cells[4].source += "\nprint('edited by hand')"
    drifted.cells[6].metadata["tags"] = ["raises-exception"]
    nbformat.write(drifted, demo_path)
    (course / "notebooks" / "02_second.ipynb").unlink()
    nbformat.write(build_student(read(FIXTURES / "02_second.ipynb")), course / "notebooks" / "03_orphan.ipynb")
    before = demo_path.read_bytes()

    report = build_notebooks("solutions", "notebooks", check=True)
    assert not report.ok
    assert report.lines() == [
        "notebooks/01_demo.ipynb: stale: cell 4 source differs (and 1 more)",
        "notebooks/02_second.ipynb: missing: run shopops-lab build-notebooks",
        "notebooks/03_orphan.ipynb: extra: no master solutions/03_orphan.ipynb; delete it or add the master",
    ]
    assert demo_path.read_bytes() == before, "--check writes nothing"
    assert not (course / "notebooks" / "02_second.ipynb").exists()


def test_check_ignores_outputs_but_not_notebook_metadata(course: Path) -> None:
    build_notebooks("solutions", "notebooks")
    path = course / "notebooks" / "02_second.ipynb"
    nb = read(path)
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
    nb.cells[2].execution_count = 3
    nbformat.write(nb, path)
    assert build_notebooks("solutions", "notebooks", check=True).ok
    nb.metadata.shopops_lab.version = "2"
    nbformat.write(nb, path)
    assert "notebook metadata differs (shopops_lab)" in build_notebooks("solutions", "notebooks", check=True).lines()[1]


def test_cli_functions(course: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="build-notebooks")
    add_arguments(parser)
    assert run(parser.parse_args([])) == 0
    assert capsys.readouterr().out.splitlines() == [
        "notebooks/01_demo.ipynb: written",
        "notebooks/02_second.ipynb: written",
    ]
    assert run(parser.parse_args(["--check"])) == 0
    (course / "notebooks" / "01_demo.ipynb").unlink()
    assert run(parser.parse_args(["--check", "--solutions", "solutions", "--notebooks", "notebooks"])) == 1
    assert "notebooks/01_demo.ipynb: missing" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        parser.parse_args(["--check", "--execute"])
    with pytest.raises(BadArgumentError, match="--solutions"):
        run(parser.parse_args(["--solutions", "no-such-dir"]))


def test_empty_solutions_folder_is_not_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "solutions").mkdir()
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert (
        run(
            parser.parse_args(
                ["--check", "--solutions", str(tmp_path / "solutions"), "--notebooks", str(tmp_path / "nb")]
            )
        )
        == 0
    )
    assert "nothing to build" in capsys.readouterr().out


def test_failed_write_leaves_the_previous_file(course: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_notebooks("solutions", "notebooks")
    target = course / "notebooks" / "01_demo.ipynb"
    before = target.read_bytes()
    master = read(course / "solutions" / "01_demo.ipynb")
    master.cells[0].source += "\n\nA new paragraph."
    nbformat.write(master, course / "solutions" / "01_demo.ipynb")

    def refuse(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(build_module.os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        build_notebooks("solutions", "notebooks")
    assert target.read_bytes() == before
    assert sorted(p.name for p in (course / "notebooks").iterdir()) == ["01_demo.ipynb", "02_second.ipynb"], (
        "no temp file left"
    )


def test_invalid_master_leaves_previous_files(course: Path) -> None:
    build_notebooks("solutions", "notebooks")
    before = {p.name: p.read_bytes() for p in (course / "notebooks").iterdir()}
    master = read(course / "solutions" / "02_second.ipynb")
    master.cells[0].source = "Say BEGIN SOLUTION in prose"
    nbformat.write(master, course / "solutions" / "02_second.ipynb")
    with pytest.raises(NotebookInvalidError, match="02_second.ipynb, cell 0, source"):
        build_notebooks("solutions", "notebooks")
    assert {p.name: p.read_bytes() for p in (course / "notebooks").iterdir()} == before


def test_execute_runs_both_and_errors_only_in_tagged_cells(course: Path) -> None:
    report = build_notebooks("solutions", "notebooks", execute=True)
    assert report.lines() == [
        "solutions/01_demo.ipynb: executed",
        "notebooks/01_demo.ipynb: written",
        "solutions/02_second.ipynb: executed",
        "notebooks/02_second.ipynb: written",
    ]
    master = read(course / "solutions" / "01_demo.ipynb")
    code = [c for c in master.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    assert not any(o.output_type == "error" for c in code for o in c.outputs)
    assert master.cells[4].outputs[0].text == "level 7\n"

    student = read(course / "notebooks" / "01_demo.ipynb")
    errors = {
        i: o.ename
        for i, c in enumerate(student.cells)
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    }
    assert set(errors) <= tagged(student)
    assert errors[3] == errors[4] == errors[7] == "NotImplementedError"
    assert 2 not in errors, "the def itself runs; calling it raises"
    assert student.cells[6].outputs[0].text == "unrelated 12\n"
    # executing adds outputs only: --check still sees both copies in sync
    assert build_notebooks("solutions", "notebooks", check=True).ok
    assert "language_info" in master.metadata and master.metadata.language_info == {"name": "python"}
    # and the stored outputs are what strict nbval (make test) reproduces
    nbval(course, "solutions", "notebooks")


def nbval(cwd: Path, *paths: str) -> None:
    """Run nbval as `make test` does (strict outputs, PYTHONHASHSEED=0) on these folders."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "-p", "no:cacheprovider", "-q", *paths],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_nbval_runs_the_pristine_student_notebooks(course: Path) -> None:
    """The point of the raises-exception tags: an unanswered student notebook passes nbval."""
    build_notebooks("solutions", "notebooks")
    nbval(course, "notebooks")


def test_kernel_runs_in_an_empty_folder_with_fixed_hash_seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "secret.txt").write_text("beside the notebook")
    nb = cells.notebook(
        [cells.code("import os\nprint(sorted(os.listdir('.')), os.environ['PYTHONHASHSEED'])")],
        lab="07",
        version="1",
        title="env",
    )
    nbformat.write(nb, tmp_path / "solutions" / "07_env.ipynb")
    build_notebooks("solutions", "notebooks", execute=True)
    assert read(tmp_path / "solutions" / "07_env.ipynb").cells[0].outputs[0].text == "[] 0\n"


@pytest.mark.parametrize(
    "source, words",
    [
        ("import sys\nprint('careful', file=sys.stderr)", "wrote to stderr: 'careful'"),
        ("x = 1 / 0", "raised ZeroDivisionError"),
    ],
    ids=["stderr", "error"],
)
def test_execute_fails_naming_the_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, words: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "solutions").mkdir()
    nb = cells.notebook(
        [cells.md("# Broken"), cells.code("x = 0"), cells.code(source, grade_id="bad-cell")],
        lab="08",
        version="1",
        title="broken",
    )
    nbformat.write(nb, tmp_path / "solutions" / "08_broken.ipynb")
    before = (tmp_path / "solutions" / "08_broken.ipynb").read_bytes()
    with pytest.raises(NotebookExecutionError) as caught:
        build_notebooks("solutions", "notebooks", execute=True)
    assert str(caught.value).startswith("solutions/08_broken.ipynb cell 2 (grade_id bad-cell): ")
    assert words in str(caught.value)
    assert not (tmp_path / "notebooks").exists()
    assert (tmp_path / "solutions" / "08_broken.ipynb").read_bytes() == before


def test_check_and_execute_do_not_combine(course: Path) -> None:
    with pytest.raises(BadArgumentError, match="--check/--execute"):
        build_notebooks("solutions", "notebooks", check=True, execute=True)


def test_course_wing_imports_neither_the_engine_nor_nbformat_eagerly() -> None:
    """The wing knows notebooks, not queues: its modules import only shopops_lab.errors, the
    package's lazy names (`_lazy`, which imports nothing of the kit) and each other. And
    registering the CLI command must not need nbformat."""
    import ast

    for path in sorted((ROOT / "shopops_lab" / "course").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""] if node.level == 0 else []
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                if module.split(".")[0] == "shopops_lab":
                    assert module in (
                        "shopops_lab.errors",
                        "shopops_lab._lazy",
                        "shopops_lab.course",
                    ) or module.startswith("shopops_lab.course."), f"{path.name} imports {module}"
    script = "import sys, shopops_lab.course.command\nassert 'nbformat' not in sys.modules\n"
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT)


def test_repository_notebooks_are_in_sync() -> None:
    """notebooks/ must be exactly what `shopops-lab build-notebooks` makes from solutions/."""
    if not (ROOT / "solutions").is_dir():  # git keeps no empty folders
        assert not list((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")), "student notebooks without solutions/"
        return
    report = build_notebooks(ROOT / "solutions", ROOT / "notebooks", check=True)
    assert report.ok, "\n".join(report.lines()) + "\nrun: shopops-lab build-notebooks"


def test_lab_filter_builds_only_the_named_labs(tmp_path):
    """--lab NN builds only that lab and leaves the other students untouched (and unreported)."""
    from shopops_lab.course.build import build_notebooks

    solutions = tmp_path / "solutions"
    solutions.mkdir()
    for master in sorted(FIXTURES.glob("0*.ipynb")):
        shutil.copy(master, solutions / master.name)
    report = build_notebooks(solutions, tmp_path / "notebooks", labs=["02"])
    assert [r.path.rsplit("/", 1)[-1] for r in report.results] == ["02_second.ipynb"]
    assert sorted(p.name for p in (tmp_path / "notebooks").iterdir()) == ["02_second.ipynb"]
    with pytest.raises(BadArgumentError, match="--lab"):
        build_notebooks(solutions, tmp_path / "notebooks", labs=["2"])


def test_stored_outputs_keep_a_widgets_static_copy_but_not_its_random_view():
    from shopops_lab.course.build import WIDGET_VIEW, normalise_outputs

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("quiz")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={
                WIDGET_VIEW: {"model_id": "5f1c", "version_major": 2, "version_minor": 0},
                "text/html": "<p>Which control rejects it?</p>",
                "text/plain": "Quiz: Which control rejects it?",
            },
        )
    ]
    lonely = nbformat.v4.new_code_cell("raw")
    lonely.outputs = [nbformat.v4.new_output("display_data", data={WIDGET_VIEW: {"model_id": "9a"}})]
    nb.cells = [cell, lonely]
    normalise_outputs(nb)
    assert sorted(cell.outputs[0]["data"]) == ["text/html", "text/plain"]
    assert list(lonely.outputs[0]["data"]) == [WIDGET_VIEW]  # nothing else to show: left alone


def test_prints_split_by_timing_are_stored_as_one_output():
    from shopops_lab.course.build import normalise_outputs

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print('a'); print('b')")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="a"),
        nbformat.v4.new_output("stream", name="stdout", text="\nb\n"),
        nbformat.v4.new_output("display_data", data={"text/plain": "x"}),
        nbformat.v4.new_output("stream", name="stdout", text="c\n"),
    ]
    nb.cells = [cell]
    normalise_outputs(nb)
    assert [(o["output_type"], o.get("text")) for o in cell.outputs] == [
        ("stream", "a\nb\n"),
        ("display_data", None),
        ("stream", "c\n"),
    ]


def test_expected_errors_keep_their_message_but_not_the_machines_paths():
    from shopops_lab.course.build import normalise_outputs

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("lab01.exercise.grade(answer)")
    cell.outputs = [
        nbformat.v4.new_output(
            "error",
            ename="AssertionError",
            evalue="not attempted",
            traceback=["File /home/me/kit/checks/base.py:92", "AssertionError"],
        )
    ]
    nb.cells = [cell]
    normalise_outputs(nb)
    assert cell.outputs[0]["traceback"] == ["AssertionError: not attempted"]


@pytest.mark.parametrize("missing", ["nbformat", "jsonschema"])
def test_the_course_tools_missing_are_named_when_first_needed(missing: str) -> None:
    """build.py imports nbformat on first use (the grader reads checked masters without it):
    where it, or the jsonschema it needs, is not installed, the error names it and the fix."""
    import subprocess
    import sys

    code = (
        f"import sys; sys.modules[{missing!r}] = None\n"
        "from shopops_lab.course.build import nbformat_module\n"
        "from shopops_lab.course.errors import CourseToolsMissingError\n"
        "try:\n    nbformat_module()\nexcept CourseToolsMissingError as exc:\n    print(exc)\n"
    )
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "need the Python package nbformat" in said and "pip install" in said


def test_the_course_map_is_written_before_the_masters_run_so_lab_00_shows_it(course: Path, monkeypatch) -> None:
    """Lab 00's progress table reads the course map as it runs: a build that executes the
    masters writes the map from their text first (else lab 00 keeps the map of the last build)."""
    from shopops_lab.course import catalogue

    shown = course / "course_map.json"
    shown.write_text("{}", encoding="utf-8")  # the last build's map
    monkeypatch.setattr(catalogue, "MAP", shown)
    monkeypatch.setattr(build_module, "_ships", lambda notebooks: True)
    seen = []

    def execute(notebook, name, *, master):
        seen.append(shown.read_text(encoding="utf-8"))
        return notebook

    monkeypatch.setattr(build_module, "execute_notebook", execute)
    report = build_notebooks("solutions", "notebooks", execute=True)
    assert report.ok and seen and len(set(seen)) == 1
    assert '"labs"' in seen[0] and "01_demo.ipynb" in seen[0]  # every run saw this build's map
    assert report.lines()[-1].endswith("course_map.json: written")
