"""Round trip through real nbgrader 0.9.6, in a virtualenv of its own so its pins never
touch ours: generate_assignment from our masters, then autograde three submissions.

* the master itself, submitted as if a student wrote it  -> every autograded point
* nbgrader's own release copy, untouched                 -> no autograded point
* our build_student copy, untouched                      -> no autograded point

It also proves the nbgrader behaviours the validator guards against (a trailing number is
partial credit, stderr scores 0, 'END SOLUTION' is matched anywhere in a line) and that
our generator cuts exactly what nbgrader cuts.

The venv is built once per machine under the temp dir, keyed by nbgrader version, Python
version and the kit's notebook extras; delete it to rebuild. Without PyPI access the tests
skip, saying to `pip install nbgrader==0.9.6`.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest

from shopops_lab.course.build import build_student

NBGRADER_VERSION = "0.9.6"
ROOT = Path(__file__).resolve().parent.parent
# The masters to round-trip: two of the course's own labs (a function answer, a class answer).
ROUNDTRIP_MASTERS: tuple[Path, ...] = (ROOT / "solutions" / "01_leases_and_redelivery.ipynb",
                                       ROOT / "solutions" / "04_fencing_tokens.ipynb")
ASSIGNMENT = "roundtrip"
STUDENTS = ("master", "release", "kit")
NAMES = [path.stem for path in ROUNDTRIP_MASTERS]


# --- the nbgrader virtualenv ------------------------------------------------------------

def _kit_extras() -> list[str]:
    """The notebooks extra from pyproject.toml: what masters may import besides the kit."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return list(project.get("optional-dependencies", {}).get("notebooks", []))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder at a time per venv (parallel pytest runs share the cache)."""
    try:
        import fcntl
    except ImportError:  # no flock here: build without a lock
        yield
        return
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _skip_install(step: str, detail: str) -> None:
    pytest.skip(
        f"nbgrader round trip needs its own venv with `pip install nbgrader=={NBGRADER_VERSION}`, "
        f"and {step} failed (no network to PyPI?): {detail.strip()[-500:]}"
    )


@pytest.fixture(scope="session")
def nbgrader_python() -> Path:
    """Python of a cached venv holding nbgrader, ipykernel and the kit's notebook extras."""
    packages = [f"nbgrader=={NBGRADER_VERSION}", "ipykernel", *_kit_extras()]
    key = hashlib.sha256("\n".join([sys.version, *packages]).encode()).hexdigest()[:10]
    cache = Path(os.environ.get("SHOPOPS_NBGRADER_CACHE", tempfile.gettempdir()))
    venv = cache / f"shopops-lab-nbgrader-{NBGRADER_VERSION}-py{sys.version_info[0]}{sys.version_info[1]}-{key}"
    ready = venv / ".shopops-lab-ready"
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / f"{venv.name}.lock"):
        if not ready.exists():
            shutil.rmtree(venv, ignore_errors=True)
            made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
            if made.returncode != 0:
                _skip_install("python -m venv", made.stderr)
            python = _venv_python(venv)
            pip = subprocess.run(
                [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *packages],
                capture_output=True, text=True, timeout=900,
            )
            if pip.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                _skip_install("pip install", pip.stderr or pip.stdout)
            ready.write_text("\n".join(packages) + "\n")
    return _venv_python(venv)


# --- one course, graded once for the whole module ---------------------------------------

@dataclass(frozen=True)
class Graded:
    """Per student, per notebook, per grade_id: (auto_score, max_score, autograded?)."""

    scores: dict[str, dict[str, dict[str, tuple[float | None, float, bool]]]]
    course: Path
    validator_errors: list[str]


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
        value = {"schema_version": 3, "grade": grade, "grade_id": grade_id, "locked": not solution, "solution": solution}
        return {"nbgrader": value | ({"points": points} if points is not None else {})}

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("### BEGIN SOLUTION\nanswer = 1\n### END SOLUTION\nnote = 'see END SOLUTION'\nkept = 2", metadata=meta("probe-answer", grade=False, solution=True)),
        nbformat.v4.new_code_cell("0.5", metadata=meta("partial", grade=True, solution=False, points=2)),
        nbformat.v4.new_code_cell("import sys\nprint('just a warning', file=sys.stderr)", metadata=meta("stderr", grade=True, solution=False, points=1)),
        nbformat.v4.new_code_cell("assert answer == 1", metadata=meta("plain", grade=True, solution=False, points=1)),
    ]
    return nb


def _environment(python: Path, scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_PATH", "PYTHONHOME")}
    env.update(
        # nbgrader's Gradebook runs the `alembic` script by name, so the venv's bin/ must
        # be first on PATH, not just its python
        PATH=str(python.parent) + os.pathsep + env.get("PATH", ""),
        PYTHONPATH=str(ROOT),  # the masters import shopops_lab from this checkout
        PYTHONHASHSEED="0",
        JUPYTER_DATA_DIR=str(scratch / "jupyter-data"),  # hide user-level kernelspecs
        JUPYTER_CONFIG_DIR=str(scratch / "jupyter-config"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    return env


def _run(python: Path, args: list[str], *, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run([str(python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    log = done.stdout + done.stderr
    if done.returncode != 0 or "| ERROR]" in log:
        pytest.fail(f"{' '.join(args[:3])} failed (exit {done.returncode}):\n{log[-4000:]}")
    return done.stdout


@pytest.fixture(scope="module")
def graded(nbgrader_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Graded:
    scratch = tmp_path_factory.mktemp("nbgrader")
    course = scratch / "course"
    db_url = f"sqlite:///{(scratch / 'gradebook.db').as_posix()}"
    course.mkdir()
    (course / "nbgrader_config.py").write_text(textwrap.dedent(f"""
        c = get_config()
        c.CourseDirectory.course_id = "shopops-lab"
        c.CourseDirectory.root = {str(course)!r}
        c.CourseDirectory.db_url = {db_url!r}
        c.Execute.timeout = 120
    """))
    env = _environment(nbgrader_python, scratch)
    source = course / "source" / ASSIGNMENT
    source.mkdir(parents=True)
    for path in ROUNDTRIP_MASTERS:
        shutil.copy(path, source / path.name)
    (course / "source" / "probe").mkdir()
    nbformat.write(_probe_notebook(), course / "source" / "probe" / "probe.ipynb")

    for assignment in (ASSIGNMENT, "probe"):
        _run(nbgrader_python, ["-m", "nbgrader", "generate_assignment", assignment, "--force"], cwd=course, env=env)

    release = course / "release" / ASSIGNMENT
    for student in STUDENTS:
        (course / "submitted" / student / ASSIGNMENT).mkdir(parents=True)
    kit_dir = course / "submitted" / "kit" / ASSIGNMENT
    for path in ROUNDTRIP_MASTERS:
        shutil.copy(path, course / "submitted" / "master" / ASSIGNMENT / path.name)
        shutil.copy(release / path.name, course / "submitted" / "release" / ASSIGNMENT / path.name)
        nbformat.write(build_student(nbformat.read(path, as_version=4), name=path.name), kit_dir / path.name)
    probe_dir = course / "submitted" / "master" / "probe"
    probe_dir.mkdir(parents=True)
    shutil.copy(course / "source" / "probe" / "probe.ipynb", probe_dir / "probe.ipynb")

    for assignment in (ASSIGNMENT, "probe"):
        _run(nbgrader_python, ["-m", "nbgrader", "autograde", assignment, "--force"], cwd=course, env=env)

    raw = json.loads(_run(nbgrader_python, ["-c", GRADEBOOK_SCRIPT, db_url, "shopops-lab"], cwd=course, env=env))
    scores = {
        f"{assignment}/{student}": {nb: {gid: tuple(v) for gid, v in grades.items()} for nb, grades in notebooks.items()}
        for assignment, students in raw.items() for student, notebooks in students.items()
    }
    checked = [str(p) for p in ROUNDTRIP_MASTERS] + [str(kit_dir / p.name) for p in ROUNDTRIP_MASTERS]
    errors = json.loads(_run(nbgrader_python, ["-c", VALIDATOR_SCRIPT, *checked], cwd=course, env=env))
    return Graded(scores, course, errors)


def _autograded(graded: Graded, student: str, name: str) -> dict[str, tuple[float | None, float]]:
    grades = graded.scores[f"{ASSIGNMENT}/{student}"][name]
    return {gid: (auto, most) for gid, (auto, most, autograded) in grades.items() if autograded}


@pytest.mark.parametrize("name", NAMES)
def test_master_as_submission_earns_every_autograded_point(graded: Graded, name: str) -> None:
    cells = _autograded(graded, "master", name)
    assert cells, f"{name} has no autograded test cell"
    assert {gid: auto for gid, (auto, _) in cells.items()} == {gid: most for gid, (_, most) in cells.items()}


@pytest.mark.parametrize("student", ["release", "kit"])
@pytest.mark.parametrize("name", NAMES)
def test_untouched_student_copy_earns_no_autograded_point(graded: Graded, name: str, student: str) -> None:
    cells = _autograded(graded, student, name)
    assert cells and all(auto == 0 for auto, _ in cells.values()), cells


@pytest.mark.parametrize("name", NAMES)
def test_our_student_copy_cuts_exactly_what_nbgrader_cuts(graded: Graded, name: str) -> None:
    master = next(p for p in ROUNDTRIP_MASTERS if p.stem == name)
    ours = build_student(nbformat.read(master, as_version=4))
    theirs = nbformat.read(graded.course / "release" / ASSIGNMENT / master.name, as_version=4)
    assert [c.source for c in ours.cells] == [c.source for c in theirs.cells]
    assert [c.cell_type for c in ours.cells] == [c.cell_type for c in theirs.cells]


def test_nbgrader_accepts_our_masters_and_student_copies(graded: Graded) -> None:
    assert graded.validator_errors == []


def test_nbgrader_behaviours_the_validator_guards_against(graded: Graded) -> None:
    probe = graded.scores["probe/master"]["probe"]
    assert probe["partial"][:2] == (0.5, 2.0), "a test cell's trailing number is read as partial credit"
    assert probe["stderr"][:2] == (0.0, 1.0), "a passing test cell that writes to stderr scores 0"
    assert probe["plain"][:2] == (1.0, 1.0)
    released = nbformat.read(graded.course / "release" / "probe" / "probe.ipynb", as_version=4).cells[0].source
    assert released == "# YOUR CODE HERE\nraise NotImplementedError()\nkept = 2", "a line merely containing END SOLUTION vanished"
