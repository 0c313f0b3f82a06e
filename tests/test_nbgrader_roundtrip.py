"""Round trip through real nbgrader 0.9.6, installed exactly as docs/instructors.md tells instructors
(`pip install nbgrader==0.9.6 -e <kit>` in a virtualenv of its own, nothing else: no
PYTHONPATH, no extra packages), so a missing dependency of any lab shows here.
generate_assignment from every master, then autograde:

* every master, submitted as if a student wrote it       -> every autograded point
* our build_student copy, untouched (labs 01, 04)        -> no autograded point, and the same
  warnings nbgrader's own release copy draws: one per hidden test it restores, nothing else
* `nbgrader validate` on our copy                        -> passes; an edited locked cell is named

Our copy is nbgrader's release copy, cell for cell (sources, kinds and nbgrader metadata, the
checksums nbgrader computes included, proven below for every lab); and every lab's untouched
copy scoring nothing is proven by `shopops-lab grade` in test_grade_cli.py. Two labs (a
function answer, a class answer) show nbgrader restores the hidden tests into a student's copy
and scores them 0; each kernel costs seconds.

It also proves the nbgrader behaviours the validator guards against (a trailing number is
partial credit, stderr scores 0, 'END SOLUTION' is matched anywhere in a line) and that
our generator cuts exactly what nbgrader cuts.

The venv is built once per machine and kept in ~/.cache/shopops-lab/nbgrader/, keyed by the
requirements (tests/nbgrader_env.py). Without PyPI access the tests skip, saying how to
install nbgrader.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import nbgrader_env
import pytest

from shopops_lab.course.build import build_student

ROOT = nbgrader_env.ROOT
# Every lab of the course.
ROUNDTRIP_MASTERS: tuple[Path, ...] = tuple(sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")))
ASSIGNMENT = "roundtrip"
STUDENTS = ("master", "kit", "release")  # the masters, our student copies, nbgrader's release copies
NAMES = [path.stem for path in ROUNDTRIP_MASTERS]
# The labs whose untouched student copy nbgrader grades (see the module docstring).
UNTOUCHED_GRADED = ("01_leases_and_redelivery", "04_fencing_tokens")


@pytest.fixture(scope="session")
def nbgrader_python() -> Iterator[Path]:
    """Python of the cached venv made by the instructors' guide's install, held while the tests grade."""
    try:
        with nbgrader_env.using_venv(ROOT) as python:
            yield python
    except nbgrader_env.NbgraderUnavailable as exc:
        pytest.skip(
            f"the nbgrader round trip needs `{nbgrader_env.GUIDE_INSTALL} <this repository>` in a venv, "
            f"and that failed (no network to PyPI?): {exc}"
        )


# --- one course, graded once for the whole module ---------------------------------------


@dataclass(frozen=True)
class Graded:
    """Per student, per notebook, per grade_id: (auto_score, max_score, autograded?)."""

    scores: dict[str, dict[str, dict[str, tuple[float | None, float, bool]]]]
    course: Path
    validator_errors: list[str]
    logs: dict[str, str]  # per student, what `nbgrader autograde` logged grading their notebooks


GRADEBOOK_SCRIPT = textwrap.dedent("""
    import json, sys
    from nbgrader.api import Gradebook
    db_url, course_id = sys.argv[1], sys.argv[2]
    out = {}
    with Gradebook(db_url, course_id) as gb:
        for assignment in gb.assignments:
            for submission in assignment.submissions:
                for nb in submission.notebooks:
                    solutions = {cell.name for cell in nb.notebook.solution_cells}
                    out.setdefault(assignment.name, {}).setdefault(submission.student.id, {})[nb.name] = {
                        grade.name: (grade.auto_score, grade.max_score,
                                     grade.cell.cell_type == "code" and grade.name not in solutions)
                        for grade in nb.grades
                    }
    print(json.dumps(out))
""")

VALIDATOR_SCRIPT = textwrap.dedent("""
    import json, sys
    import nbformat
    from nbgrader.nbgraderformat.v3 import MetadataValidatorV3
    errors = []
    for path in sys.argv[1:]:
        try:
            MetadataValidatorV3().validate_nb(nbformat.read(path, as_version=4))
        except Exception as exc:
            errors.append(f"{path}: {type(exc).__name__}: {exc}")
    print(json.dumps(errors))
""")


def _probe_notebook() -> nbformat.NotebookNode:
    """Cells our validator refuses, built by hand so nbgrader shows why it refuses them."""

    def meta(grade_id: str, *, grade: bool, solution: bool, points: float | None = None) -> dict[str, Any]:
        value = {
            "schema_version": 3,
            "grade": grade,
            "grade_id": grade_id,
            "locked": not solution,
            "solution": solution,
        }
        return {"nbgrader": value | ({"points": points} if points is not None else {})}

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell(
            "### BEGIN SOLUTION\nanswer = 1\n### END SOLUTION\nnote = 'see END SOLUTION'\nkept = 2",
            metadata=meta("probe-answer", grade=False, solution=True),
        ),
        nbformat.v4.new_code_cell("0.5", metadata=meta("partial", grade=True, solution=False, points=2)),
        nbformat.v4.new_code_cell(
            "import sys\nprint('just a warning', file=sys.stderr)",
            metadata=meta("stderr", grade=True, solution=False, points=1),
        ),
        nbformat.v4.new_code_cell("assert answer == 1", metadata=meta("plain", grade=True, solution=False, points=1)),
    ]
    return nb


def _run(python: Path, args: list[str], *, cwd: Path, env: dict[str, str], log: bool = False) -> str:
    done = nbgrader_env.run(python, args, cwd=cwd, env=env)
    said = done.stdout + done.stderr
    if done.returncode != 0 or "| ERROR]" in said:
        pytest.fail(f"{' '.join(args[:3])} failed (exit {done.returncode}):\n{said[-4000:]}")
    return said if log else done.stdout


@pytest.fixture(scope="module")
def graded(nbgrader_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Graded:
    scratch = tmp_path_factory.mktemp("nbgrader")
    course, db_url = nbgrader_env.make_course(scratch)
    env = nbgrader_env.environment(nbgrader_python, scratch)
    source = course / "source" / ASSIGNMENT
    source.mkdir(parents=True)
    for path in ROUNDTRIP_MASTERS:
        shutil.copy(path, source / path.name)
    (course / "source" / "probe").mkdir()
    nbformat.write(_probe_notebook(), course / "source" / "probe" / "probe.ipynb")

    for assignment in (ASSIGNMENT, "probe"):
        _run(nbgrader_python, ["-m", "nbgrader", "generate_assignment", assignment, "--force"], cwd=course, env=env)

    for student in STUDENTS:
        (course / "submitted" / student / ASSIGNMENT).mkdir(parents=True)
    kit_dir = course / "submitted" / "kit" / ASSIGNMENT
    for path in ROUNDTRIP_MASTERS:
        shutil.copy(path, course / "submitted" / "master" / ASSIGNMENT / path.name)
        if path.stem in UNTOUCHED_GRADED:
            nbformat.write(build_student(nbformat.read(path, as_version=4), name=path.name), kit_dir / path.name)
            shutil.copy(course / "release" / ASSIGNMENT / path.name, course / "submitted" / "release" / ASSIGNMENT)
    probe_dir = course / "submitted" / "master" / "probe"
    probe_dir.mkdir(parents=True)
    shutil.copy(course / "source" / "probe" / "probe.ipynb", probe_dir / "probe.ipynb")

    logs = {
        student: _run(
            nbgrader_python,
            ["-m", "nbgrader", "autograde", ASSIGNMENT, "--student", student, "--force"],
            cwd=course,
            env=env,
            log=True,
        )
        for student in STUDENTS
    }
    _run(nbgrader_python, ["-m", "nbgrader", "autograde", "probe", "--force"], cwd=course, env=env)

    raw = json.loads(_run(nbgrader_python, ["-c", GRADEBOOK_SCRIPT, db_url, "shopops-lab"], cwd=course, env=env))
    scores = {
        f"{assignment}/{student}": {
            nb: {gid: tuple(v) for gid, v in grades.items()} for nb, grades in notebooks.items()
        }
        for assignment, students in raw.items()
        for student, notebooks in students.items()
    }
    students = scratch / "students"
    students.mkdir()
    for path in ROUNDTRIP_MASTERS:
        nbformat.write(build_student(nbformat.read(path, as_version=4), name=path.name), students / path.name)
    checked = [str(p) for p in ROUNDTRIP_MASTERS] + [str(students / p.name) for p in ROUNDTRIP_MASTERS]
    errors = json.loads(_run(nbgrader_python, ["-c", VALIDATOR_SCRIPT, *checked], cwd=course, env=env))
    return Graded(scores, course, errors, logs)


def _autograded(graded: Graded, student: str, name: str) -> dict[str, tuple[float | None, float]]:
    grades = graded.scores[f"{ASSIGNMENT}/{student}"][name]
    return {gid: (auto, most) for gid, (auto, most, autograded) in grades.items() if autograded}


@pytest.mark.parametrize("name", NAMES)
def test_master_as_submission_earns_every_autograded_point(graded: Graded, name: str) -> None:
    cells = _autograded(graded, "master", name)
    assert cells, f"{name} has no autograded test cell"
    assert {gid: auto for gid, (auto, _) in cells.items()} == {gid: most for gid, (_, most) in cells.items()}


@pytest.mark.parametrize("name", UNTOUCHED_GRADED)
def test_untouched_student_copy_earns_no_autograded_point(graded: Graded, name: str) -> None:
    cells = _autograded(graded, "kit", name)
    assert cells and all(auto == 0 for auto, _ in cells.values()), cells


@pytest.mark.parametrize("name", NAMES)
def test_our_student_copy_is_nbgraders_release_copy_cell_for_cell(graded: Graded, name: str) -> None:
    master = next(p for p in ROUNDTRIP_MASTERS if p.stem == name)
    ours = build_student(nbformat.read(master, as_version=4))
    theirs = nbformat.read(graded.course / "release" / ASSIGNMENT / master.name, as_version=4)
    assert [c.source for c in ours.cells] == [c.source for c in theirs.cells]
    assert [c.cell_type for c in ours.cells] == [c.cell_type for c in theirs.cells]
    assert [_ours(c) for c in ours.cells] == [_ours(c) for c in theirs.cells]


def _ours(cell: nbformat.NotebookNode) -> dict[str, Any]:
    """A cell's nbgrader metadata, what nbgrader adds as it releases included (the cell's kind,
    and the checksum it computes)."""
    return dict(cell.metadata.get("nbgrader", {}))


CHECKSUM_WARNING = re.compile(r"Attribute 'checksum' for cell (\S+) has changed!")


def _hidden_tests(name: str) -> list[str]:
    master = nbformat.read(next(p for p in ROUNDTRIP_MASTERS if p.stem == name), as_version=4)
    return [c.metadata.nbgrader["grade_id"] for c in master.cells if "BEGIN HIDDEN TESTS" in c.source]


def test_an_untouched_copy_draws_only_the_warnings_nbgraders_own_release_copy_draws(graded: Graded) -> None:
    """nbgrader warns "checksum changed" for every test cell whose hidden test it puts back
    (it keeps the master's cell, hidden test and all, and compares): its own release copy
    draws those too. Our copy draws exactly those, and none for any other cell."""
    ours = sorted(CHECKSUM_WARNING.findall(graded.logs["kit"]))
    assert ours == sorted(CHECKSUM_WARNING.findall(graded.logs["release"]))
    assert ours == sorted(gid for name in UNTOUCHED_GRADED for gid in _hidden_tests(name)) and ours
    assert "has changed!" not in CHECKSUM_WARNING.sub("", graded.logs["kit"])  # no cell type, lock or points either


def test_nbgrader_validate_passes_our_copy_and_names_an_edited_locked_cell(graded: Graded, nbgrader_python) -> None:
    """Our copy carries nbgrader's checksums, so `nbgrader validate` (the learner's Validate
    button) checks the locked cells: an untouched copy passes, an edited one is named."""
    env = nbgrader_env.environment(nbgrader_python, graded.course.parent)
    copy = graded.course / "validate" / f"{UNTOUCHED_GRADED[0]}.ipynb"
    copy.parent.mkdir()
    shutil.copy(graded.course / "submitted" / "kit" / ASSIGNMENT / copy.name, copy)
    said = _run(nbgrader_python, ["-m", "nbgrader", "validate", str(copy)], cwd=copy.parent, env=env)
    assert "Success! Your notebook passes all the tests." in said
    edited = nbformat.read(copy, as_version=4)
    edited.cells[2].source += "\nprint('edited')"
    nbformat.write(edited, copy)
    said = _run(nbgrader_python, ["-m", "nbgrader", "validate", str(copy)], cwd=copy.parent, env=env)
    assert "THE CONTENTS OF 1 TEST CELL(S) HAVE CHANGED!" in said


def test_nbgrader_accepts_our_masters_and_student_copies(graded: Graded) -> None:
    assert graded.validator_errors == []


def test_nbgrader_behaviours_the_validator_guards_against(graded: Graded) -> None:
    probe = graded.scores["probe/master"]["probe"]
    assert probe["partial"][:2] == (0.5, 2.0), "a test cell's trailing number is read as partial credit"
    assert probe["stderr"][:2] == (0.0, 1.0), "a passing test cell that writes to stderr scores 0"
    assert probe["plain"][:2] == (1.0, 1.0)
    released = nbformat.read(graded.course / "release" / "probe" / "probe.ipynb", as_version=4).cells[0].source
    assert released == "# YOUR CODE HERE\nraise NotImplementedError()\nkept = 2", (
        "a line merely containing END SOLUTION vanished"
    )


def test_the_instructors_guide_tells_this_install() -> None:
    readme = (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    assert f"{nbgrader_env.GUIDE_INSTALL} /path/to/shopops-lab" in readme


def test_the_venv_is_cached_outside_the_temp_folder_keyed_by_what_it_installs(tmp_path: Path, monkeypatch) -> None:
    """The key follows the requirements, not the kit's code, config or checkout folder."""
    monkeypatch.delenv("SHOPOPS_NBGRADER_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert nbgrader_env.cache_dir() == tmp_path / "cache" / "shopops-lab" / "nbgrader"
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    checkout = tmp_path / "another-checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text(pyproject + "\n[tool.example]\nsetting = 1\n")
    assert nbgrader_env.requirements_key(checkout) == nbgrader_env.requirements_key(ROOT)
    (checkout / "pyproject.toml").write_text(pyproject.replace('"jsonschema>=4.21,<5"', '"jsonschema>=4.22,<5"'))
    assert nbgrader_env.requirements_key(checkout) != nbgrader_env.requirements_key(ROOT)
    assert nbgrader_env.venv_path(ROOT).parent == nbgrader_env.cache_dir()
