"""The nbgrader v3 cell-metadata schema and the notebook rules around it.

Each bad case is one thing nbgrader 0.9.6 would reject, mis-grade or silently mangle; the
test proves validation names the cell and the field instead. The last tests run the same
validation over every real notebook in solutions/ and notebooks/.
"""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
import pytest
from jsonschema import Draft202012Validator

from shopops_lab.course import cells
from shopops_lab.course.build import build_student
from shopops_lab.course.errors import NotebookInvalidError
from shopops_lab.course.metadata import Problem, check_cell_metadata, load_schema, validate_notebook
from shopops_lab.errors import BadArgumentError

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "course" / "solutions"
MASTERS = sorted((ROOT / "solutions").glob("*.ipynb"))
STUDENTS = sorted((ROOT / "notebooks").glob("*.ipynb"))

READ_ONLY = {"schema_version": 3, "grade": False, "grade_id": "intro", "locked": True, "solution": False}
ANSWER = {"schema_version": 3, "grade": False, "grade_id": "answer-1", "locked": False, "solution": True}
TEST = {"schema_version": 3, "grade": True, "grade_id": "test_1", "locked": True, "solution": False, "points": 2}
WRITTEN = {"schema_version": 3, "grade": True, "grade_id": "why", "locked": False, "solution": True, "points": 1.5}
TASK = {
    "schema_version": 3,
    "grade": False,
    "grade_id": "task-1",
    "locked": True,
    "solution": False,
    "task": True,
    "points": 3,
}


def with_(base: dict, **changes: object) -> dict:
    meta = dict(base)
    for key, value in changes.items():
        if value is DROP:
            meta.pop(key, None)
        else:
            meta[key] = value
    return meta


DROP = object()


def fields(findings: list[tuple[str, str, str]]) -> set[str]:
    return {field for field, _, _ in findings}


def test_schema_is_valid_draft_2020_12() -> None:
    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["properties"]) == {"schema_version", "grade", "grade_id", "locked", "solution", "points", "task"}


@pytest.mark.parametrize(
    "meta",
    [READ_ONLY, ANSWER, TEST, WRITTEN, TASK, with_(TEST, points=0), with_(ANSWER, task=False)],
    ids=["read-only", "answer", "test", "written", "task", "zero-points", "task-false"],
)
def test_schema_accepts_good_metadata(meta: dict) -> None:
    assert check_cell_metadata(meta) == []


BAD = {
    "missing schema_version": (with_(READ_ONLY, schema_version=DROP), "metadata.nbgrader.schema_version"),
    "missing grade": (with_(READ_ONLY, grade=DROP), "metadata.nbgrader.grade"),
    "missing grade_id": (with_(READ_ONLY, grade_id=DROP), "metadata.nbgrader.grade_id"),
    "missing locked": (with_(ANSWER, locked=DROP), "metadata.nbgrader.locked"),
    "missing solution": (with_(ANSWER, solution=DROP), "metadata.nbgrader.solution"),
    "missing points on graded": (with_(TEST, points=DROP), "metadata.nbgrader.points"),
    "missing points on task": (with_(TASK, points=DROP), "metadata.nbgrader.points"),
    "old schema_version": (with_(READ_ONLY, schema_version=2), "metadata.nbgrader.schema_version"),
    "grade not bool": (with_(READ_ONLY, grade="no"), "metadata.nbgrader.grade"),
    "grade as 0": (with_(READ_ONLY, grade=0), "metadata.nbgrader.grade"),
    "locked not bool": (with_(READ_ONLY, locked=1), "metadata.nbgrader.locked"),
    "grade_id not str": (with_(READ_ONLY, grade_id=7), "metadata.nbgrader.grade_id"),
    "points as string": (with_(TEST, points="2"), "metadata.nbgrader.points"),
    "points as bool": (with_(TEST, points=True), "metadata.nbgrader.points"),
    "negative points": (with_(TEST, points=-1), "metadata.nbgrader.points"),
    "grade_id with space": (with_(ANSWER, grade_id="my answer"), "metadata.nbgrader.grade_id"),
    "grade_id with dot": (with_(ANSWER, grade_id="q1.a"), "metadata.nbgrader.grade_id"),
    "empty grade_id": (with_(ANSWER, grade_id=""), "metadata.nbgrader.grade_id"),
    "points on ungraded": (with_(ANSWER, points=1), "metadata.nbgrader.points"),
    "extra key": (with_(READ_ONLY, colour="red"), "metadata.nbgrader.colour"),
    "release-only checksum": (with_(TEST, checksum="0" * 32), "metadata.nbgrader.checksum"),
    "release-only cell_type": (with_(TEST, cell_type="code"), "metadata.nbgrader.cell_type"),
    "not an object": ("locked", "metadata.nbgrader"),
}


@pytest.mark.parametrize("meta, field", BAD.values(), ids=BAD.keys())
def test_schema_rejects_bad_metadata(meta: object, field: str) -> None:
    findings = check_cell_metadata(meta)
    assert field in fields(findings), findings
    assert all(message and fix for _, message, fix in findings)


# --- notebook rules ---------------------------------------------------------------------


def demo_master() -> nbformat.NotebookNode:
    return nbformat.read(FIXTURES / "01_demo.ipynb", as_version=4)


def problems_after(change, name: str = "solutions/01_demo.ipynb", role: str = "master") -> list[Problem]:
    nb = demo_master()
    change(nb)
    return validate_notebook(nb, name, role=role)


def at(problems: list[Problem], cell: int | None, field: str) -> Problem:
    for problem in problems:
        if problem.cell == cell and problem.field == field:
            return problem
    raise AssertionError(f"no problem at cell {cell} field {field}: {[str(p) for p in problems]}")


def test_fixture_masters_are_valid() -> None:
    for path in sorted(FIXTURES.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        assert validate_notebook(nb, path.name) == []
        assert validate_notebook(build_student(nb), path.name, role="student") == []


def test_duplicate_grade_id() -> None:
    def change(nb):
        nb.cells[8].metadata.nbgrader.grade_id = "restock-test"
        nb.cells[8].id = "another-id"

    problem = at(problems_after(change), 8, "metadata.nbgrader.grade_id")
    assert "cell 3" in problem.message


@pytest.mark.parametrize(
    "cell, text",
    [
        (0, "Write your code between BEGIN SOLUTION and the end marker."),
        (1, 'MESSAGE = "see END HIDDEN TESTS"'),
        (1, "# AUTOTEST restock(1, 2)"),
        (10, "### BEGIN SOLUTION\nThe END SOLUTION words in prose cut this line.\n### END SOLUTION"),
        (2, "x = 1  ### BEGIN SOLUTION\ny = 2\n### END SOLUTION"),
        (0, "A BEGIN MARK SCHEME would be cut too."),
    ],
    ids=["prose", "string", "autotest", "in-answer-prose", "marker-not-alone", "mark-scheme"],
)
def test_marker_words_outside_marker_lines(cell: int, text: str) -> None:
    def change(nb):
        nb.cells[cell].source = text

    problem = at(problems_after(change), cell, "source")
    assert "nbgrader matches it anywhere" in problem.message


@pytest.mark.parametrize(
    "cell, text, words",
    [
        (1, "### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "not an answer cell"),
        (2, "### BEGIN HIDDEN TESTS\nassert True\n### END HIDDEN TESTS", "hidden tests belong only in test cells"),
        (2, "### BEGIN SOLUTION\nx = 1", "nothing closes it"),
        (2, "x = 1\n### END SOLUTION", "no matching open region"),
        (2, "### BEGIN SOLUTION\n### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "still open"),
    ],
    ids=["solution-in-read-only", "hidden-in-answer", "unclosed", "unopened", "nested"],
)
def test_misplaced_markers(cell: int, text: str, words: str) -> None:
    def change(nb):
        nb.cells[cell].source = text

    assert words in at(problems_after(change), cell, "source").message


def test_notebook_level_rules() -> None:
    def change(nb):
        nb.metadata.kernelspec.name = "python3.11"
        nb.metadata.shopops_lab.lab = "07"
        nb.metadata.shopops_lab.pop("version")

    problems = problems_after(change)
    at(problems, None, "metadata.kernelspec.name")
    assert "file name says '01'" in at(problems, None, "metadata.shopops_lab.lab").message
    at(problems, None, "metadata.shopops_lab.version")
    assert at(problems_after(lambda nb: nb.metadata.pop("shopops_lab")), None, "metadata.shopops_lab")


@pytest.mark.parametrize(
    "cell, change_meta, field",
    [
        (10, {"solution": False, "locked": True}, "metadata.nbgrader.solution"),  # graded markdown, not a solution
        (10, {"grade": False, "points": DROP}, "metadata.nbgrader.grade"),  # markdown solution, not graded
        (1, {"task": True, "points": 1}, "metadata.nbgrader.task"),  # task on a code cell
        (1, {"locked": False}, "metadata.nbgrader.locked"),  # read-only but unlocked
        (2, {"locked": True}, "metadata.nbgrader.locked"),  # answer but locked
    ],
    ids=["md-grade-not-solution", "md-solution-not-grade", "code-task", "unlocked-read-only", "locked-answer"],
)
def test_cell_kind_rules(cell: int, change_meta: dict, field: str) -> None:
    def change(nb):
        meta = nb.cells[cell].metadata.nbgrader
        for key, value in change_meta.items():
            if value is DROP:
                meta.pop(key, None)
            else:
                meta[key] = value

    at(problems_after(change), cell, field)


def test_missing_nbgrader_metadata() -> None:
    assert "cells" in at(problems_after(lambda nb: nb.cells[1].metadata.pop("nbgrader")), 1, "metadata.nbgrader").fix


def test_raises_exception_tag_in_master() -> None:
    at(problems_after(lambda nb: nb.cells[4].metadata.__setitem__("tags", ["raises-exception"])), 4, "metadata.tags")


def test_trailing_value_in_test_cell() -> None:
    problem = at(
        problems_after(lambda nb: setattr(nb.cells[3], "source", "assert restock(2, 3) == 5\nrestock(1, 1)")),
        3,
        "source",
    )
    assert "partial credit" in problem.message
    at(problems_after(lambda nb: setattr(nb.cells[3], "source", "assert restock(2, 3) == 5\nlevel")), 3, "source")
    # print() displays nothing, and an assignment displays nothing
    assert problems_after(lambda nb: setattr(nb.cells[3], "source", "assert restock(2, 3) == 5\nprint('ok')")) == []
    assert problems_after(lambda nb: setattr(nb.cells[3], "source", "_ = restock(1, 1)")) == []
    # the kit's Exercise.grade() returns None, so it may end a graded cell
    assert problems_after(lambda nb: setattr(nb.cells[3], "source", "lab01.exercise.grade(restock)")) == []


def test_kit_cell_metadata() -> None:
    problems = problems_after(
        lambda nb: nb.cells[2].metadata.__setitem__("shopops_lab", {"hints": "one string", "colour": 1})
    )
    at(problems, 2, "metadata.shopops_lab.hints")
    at(problems, 2, "metadata.shopops_lab.colour")


def test_code_must_parse_but_magics_are_fine() -> None:
    at(problems_after(lambda nb: setattr(nb.cells[1], "source", "def broken(:\n    pass")), 1, "source")
    assert (
        problems_after(lambda nb: setattr(nb.cells[1], "source", "%matplotlib inline\nimport math\nSHELF = {}")) == []
    )


def test_student_role_rules() -> None:
    student = build_student(demo_master())
    assert validate_notebook(student, "notebooks/01_demo.ipynb", role="student") == []
    leaked = copy.deepcopy(student)
    leaked.cells[3].source += "\n### BEGIN HIDDEN TESTS"
    leaked.cells[1].metadata.editable = True
    problems = validate_notebook(leaked, "notebooks/01_demo.ipynb", role="student")
    at(problems, 3, "source")
    at(problems, 1, "metadata.editable")


# nbgrader 0.9.6's compute_checksum (nbgrader/utils.py), as its source has it: the reference the
# kit's own (metadata.nbgrader_checksum) must agree with. test_nbgrader_roundtrip.py compares the
# checksums real nbgrader writes into its release copies with ours, lab by lab.
def reference_checksum(cell) -> str:
    import hashlib

    def is_grade(c):
        return c.metadata["nbgrader"].get("grade", False)

    def is_solution(c):
        return c.metadata["nbgrader"].get("solution", False)

    def is_locked(c):
        if is_solution(c):
            return False
        if is_grade(c):
            return True
        return c.metadata["nbgrader"].get("locked", False)

    m = hashlib.md5()
    m.update(cell.source.encode("utf-8"))
    m.update(cell.cell_type.encode("utf-8"))
    m.update(str(is_grade(cell)).encode("utf-8"))
    m.update(str(is_solution(cell)).encode("utf-8"))
    m.update(str(is_locked(cell)).encode("utf-8"))
    m.update(cell.metadata["nbgrader"]["grade_id"].encode("utf-8"))
    if is_grade(cell):
        m.update(str(float(cell.metadata["nbgrader"]["points"])).encode("utf-8"))
    return m.hexdigest()


def test_student_copies_carry_nbgraders_checksum_and_cell_type_and_masters_none() -> None:
    master = demo_master()
    student = build_student(master)
    for cell in student.cells:
        assert cell.metadata.nbgrader["checksum"] == reference_checksum(cell)
        assert cell.metadata.nbgrader["cell_type"] == cell.cell_type
    assert not any("checksum" in cell.metadata.nbgrader for cell in master.cells)  # the build leaves the master be
    edited = copy.deepcopy(student)
    edited.cells[1].source += "\nSHELF['x'] = 1"  # a locked cell changed after the build
    assert [p.field for p in validate_notebook(edited, "n", role="student")] == ["metadata.nbgrader.checksum"]
    retyped = copy.deepcopy(student)
    retyped.cells[1].metadata.nbgrader["cell_type"] = "markdown"
    assert [p.field for p in validate_notebook(retyped, "n", role="student")] == ["metadata.nbgrader.cell_type"]
    stamped = copy.deepcopy(master)
    stamped.cells[1].metadata.nbgrader.update(student.cells[1].metadata.nbgrader)
    at(validate_notebook(stamped, "solutions/01_demo.ipynb"), 1, "metadata.nbgrader.checksum")


def test_problem_names_notebook_cell_field_and_fix() -> None:
    def change(nb):
        nb.cells[3].metadata.nbgrader.pop("points")

    text = str(at(problems_after(change), 3, "metadata.nbgrader.points"))
    assert text.startswith("solutions/01_demo.ipynb, cell 3, metadata.nbgrader.points: ")
    assert 'Fix: add "points"' in text


# --- the authoring helpers refuse what validation would refuse later --------------------


def test_cells_helpers_refuse_bad_arguments() -> None:
    with pytest.raises(BadArgumentError, match="grade_id"):
        cells.answer("x = 1", "my answer")
    with pytest.raises(BadArgumentError, match="points"):
        cells.test("assert True", "t", -1)
    with pytest.raises(BadArgumentError, match="lab"):
        cells.notebook([cells.md("# x")], lab="1", version="1", title="x")
    with pytest.raises(NotebookInvalidError, match="nbgrader matches it anywhere"):
        cells.notebook([cells.md("Type BEGIN SOLUTION here")], lab="03", version="1", title="x")


def test_cells_notebook_makes_deterministic_ids() -> None:
    nb = cells.notebook(
        [cells.md("# Title"), cells.code("x = 1"), cells.answer("y = x", "y")], lab="05", version="2", title="T"
    )
    assert [c.metadata.nbgrader.grade_id for c in nb.cells] == ["cell-05-0", "cell-05-1", "y"]
    assert [c.id for c in nb.cells] == ["cell-05-0", "cell-05-1", "y"]
    assert nb.metadata.kernelspec.name == "python3"
    assert nb.metadata.shopops_lab == {"lab": "05", "version": "2", "title": "T"}
    nbformat.validate(nb)


# --- every real course notebook ---------------------------------------------------------


@pytest.mark.parametrize("path", MASTERS + STUDENTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_course_notebook_is_valid(path: Path) -> None:
    role = "master" if path.parent.name == "solutions" else "student"
    nb = nbformat.read(path, as_version=4)
    problems = validate_notebook(nb, f"{path.parent.name}/{path.name}", role=role)
    assert not problems, "\n".join(map(str, problems))


def test_every_master_has_a_student_notebook() -> None:
    """Runs (and passes) with zero notebooks too, so the parametrized test above is never
    the only guard: masters and student notebooks come in pairs of the same name."""
    assert [p.name for p in MASTERS] == [p.name for p in STUDENTS]
