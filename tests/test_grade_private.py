"""Grading from a folder only its owner may enter, and what the grader says when a learner's
process cannot start for a reason of the grader's own.

A course kept under /root, or cloned into a `mktemp -d` folder, sits behind a folder of mode
700. As root, the learner's process runs under a uid of its own and reads files as a stranger
would: whatever it imports after that (its lab's modules are loaded before; anything else,
the kit's or Python's, on first use) must still be readable (`view.py` opens the walls in the
process's own mount namespace). As an ordinary user, the learner runs as that user. Here the
kit is copied into such a folder and graded from there, by the real command line, as root
and as an ordinary user; the learner's answer imports, after the drop, a kit module its lab
does not preload, a standard-library module nothing loaded, and a module of a package that
lies behind the wall, as a virtualenv kept in the course folder would.

When the learner's process cannot start (it cannot confine itself, read the kit or enter its
scratch folder) no learner code has run: the row says the grader failed, charges nothing,
and the command says so in one line and exits 1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import grade_fixtures as fx
import pytest

from shopops_lab.course.grade import confinement, judge
from shopops_lab.course.grade.judge import Limits
from shopops_lab.course.grade.results import Mark, Status
from shopops_lab.course.grade.run import grade

LIMITS = Limits(cell_seconds=60.0, notebook_seconds=600.0, memory_mb=512)
ORDINARY_UID = 0x6F000000 + os.getpid() % 2**16  # no account's: an ordinary user made for the test

# Lab 00's answer, right only where the kit is the private copy and the imports after the
# uid drop all work.
FROM_THE_PRIVATE_KIT = """
import sys
def enqueue_first_case(queue):
    import shopops_lab
    if not shopops_lab.__file__.startswith({kit!r}):
        raise RuntimeError(f"the kit graded with is {{shopops_lab.__file__}}")
    from shopops_lab.checks import lab07           # a kit module lab 00 does not preload
    import tomllib                                 # Python's own, loaded by nothing before
    import behind_the_wall                         # a package kept in the private folder
    assert callable(lab07.exercise.result) and tomllib.loads("a = 1") == {{"a": 1}}
    assert behind_the_wall.WORD == "reachable"
    return queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")
"""


def _private_kit(tmp_path: Path, owner: int | None = None) -> tuple[Path, Path, Path]:
    """A mode-700 folder holding a copy of the kit, its masters, a package and a class:
    (the folder, the kit's copy, the package folder)."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    kit = private / "course"
    shutil.copytree(fx.ROOT / "shopops_lab", kit / "shopops_lab", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(fx.SOLUTIONS, kit / "solutions")
    packages = private / "packages"
    packages.mkdir()
    (packages / "behind_the_wall.py").write_text('WORD = "reachable"\n')
    answer = FROM_THE_PRIVATE_KIT.format(kit=str(kit))
    fx.write(fx.submission("00", {"warmup-answer": answer}), private / "in" / "ada_lab00.ipynb")
    if owner is not None:
        for path in (private, *private.rglob("*")):
            os.chown(path, owner, owner)
    os.chmod(private, 0o700)
    return private, kit, packages


def _grade_command(private: Path, kit: Path, packages: Path) -> tuple[list[str], dict[str, str]]:
    """The real command line, run from the kit's copy (so `python -m` imports the copy)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COV_"))},
        "PYTHONPATH": str(packages),
        "HOME": str(private),
        "SHOPOPS_GRADE_CACHE": str(private / "cache"),
    }
    command = [
        sys.executable,
        "-m",
        "shopops_lab",
        "grade",
        str(private / "in"),
        "--key",
        str(kit / "solutions"),
        "--out",
        str(private / "out"),
        "--jobs",
        "1",
    ]
    return command, env


def _graded(private: Path) -> dict[str, Any]:
    (row,) = json.loads((private / "out" / "grades.json").read_text())["submissions"]
    return row


def _exercise(row: dict[str, Any], grade_id: str) -> dict[str, Any]:
    return next(e for e in row["exercises"] if e["grade_id"] == grade_id)


needs_root_and_namespaces = pytest.mark.skipif(
    not (confinement.can_drop() and confinement.can_hide()),
    reason="grading as root with a uid drop needs Linux, root and mount namespaces (run the suite as root, "
    "as .ci/run does, e.g. sudo make test)",
)


@needs_root_and_namespaces
def test_a_kit_in_a_private_folder_is_graded_as_root(tmp_path: Path) -> None:
    private, kit, packages = _private_kit(tmp_path)
    command, env = _grade_command(private, kit, packages)
    done = subprocess.run(command, cwd=kit, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    row = _graded(private)
    assert row["status"] == "graded", row
    warmup = _exercise(row, "warmup-test")
    assert warmup["mark"] == "correct", warmup["message"]


@pytest.mark.skipif(sys.platform != "linux", reason="a private folder and a uid are Linux's here")
def test_a_kit_in_a_private_folder_is_graded_as_an_ordinary_user(tmp_path: Path) -> None:
    """As root the test becomes an ordinary user for the command; run as an ordinary user,
    it grades as that user."""
    from shopops_lab.course.grade import view

    root = confinement.can_drop()
    if root and not confinement.can_hide():
        pytest.skip("becoming an ordinary user who can read this Python needs mount namespaces (root on Linux)")
    private, kit, packages = _private_kit(tmp_path, owner=ORDINARY_UID if root else None)
    command, env = _grade_command(private, kit, packages)
    if root:
        needs = [*view.needed("/"), str(private)]
        command = [sys.executable, "-c", fx.AS_ORDINARY_USER, json.dumps(needs), str(ORDINARY_UID), *command]
    done = subprocess.run(command, cwd=kit, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    row = _graded(private)
    assert row["status"] == "graded", row
    assert _exercise(row, "warmup-test")["mark"] == "correct", _exercise(row, "warmup-test")["message"]


@needs_root_and_namespaces
def test_a_kit_the_learner_cannot_read_is_the_graders_failure_in_one_line(tmp_path: Path) -> None:
    """Without a mount namespace of its own, the learner's uid cannot cross the private folder:
    its process says so before any learner code, and the row charges nothing."""
    private, kit, packages = _private_kit(tmp_path)
    command, env = _grade_command(private, kit, packages)
    no_view = (
        "import sys, runpy; from shopops_lab.course.grade import confinement; "
        "confinement.can_hide = lambda: False; sys.argv = ['shopops-lab', *sys.argv[1:]]; "
        "runpy.run_module('shopops_lab', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", no_view, *command[3:]], cwd=kit, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 1, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert "the grader failed on 1 submission (ada_lab00)" in line and "charged nothing" in line, line
    assert "cannot read" in line and str(kit) in line and "chmod o+rx" in line, line
    row = _graded(private)
    assert row["status"] == Status.GRADER_ERROR.value, row
    warmup = _exercise(row, "warmup-test")
    assert warmup["mark"] == Mark.NOT_GRADED.value and warmup["points"] is None, warmup
    assert "ended the grading process" not in json.dumps(row), row
    (feedback_page,) = (private / "out" / "feedback").rglob("*.html")
    feedback = feedback_page.read_text()
    assert "The grader itself failed" in feedback and "nothing was taken off" in feedback


def _broken_config(change: dict[str, Any]) -> Any:
    real = judge._learner_config

    def config(job: Any, warm: Any) -> dict[str, Any]:
        return {**real(job, warm), **change}

    return config


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            {"scratch": "/nonexistent/shopops-scratch"},
            "could not enter its scratch folder /nonexistent/shopops-scratch",
        ),
        ({"uid": -2}, "could not take uid -2"),
    ],
    ids=["cannot enter its scratch folder", "cannot confine itself"],
)
def test_a_learner_process_that_cannot_start_is_the_graders_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, Any], said: str
) -> None:
    monkeypatch.setattr(judge, "_learner_config", _broken_config(change))
    fx.write(fx.all_right("01"), tmp_path / "in" / "right_lab01.ipynb")
    report = grade([str(tmp_path / "in")], key=fx.SOLUTIONS, out=tmp_path / "out", jobs=1, limits=LIMITS)
    (result,) = report.results
    assert report.grader_failures() == [result]
    assert result.status is Status.GRADER_ERROR and said in result.reason, result.reason
    auto = [e for e in result.exercises if e.kind.value == "auto"]
    assert auto and all(e.mark is Mark.NOT_GRADED and e.points is None for e in auto), auto
    assert all("Your answer" not in e.message for e in result.exercises), result.exercises
    assert not result.needs_manual or any(e.mark is Mark.BY_HAND for e in result.exercises)
