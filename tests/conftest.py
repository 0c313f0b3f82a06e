"""Fixtures shared by more than one test module, and how the suite is sorted:

* marks: `slow` (left out by `make test-fast`) on the suites listed below, with the mark
  of their kind (`browser`, `lite`, `nbgrader`, `grading`, `postgres`, `notebooks`),
  registered in pyproject.toml;
* workers: `make test` runs `pytest -n <cores + 1> --dist loadfile`: each test file (each notebook)
  runs whole in one worker, in order, so a notebook's cells share their kernel and a
  module-scoped fixture is built once. SHARED puts files that share one thing in one worker.

tests/README.md maps labs and modules to tests.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_backends import BACKENDS, DURABLE, Backend

ROOT = Path(__file__).resolve().parent.parent
# The grader remembers the masters it checked (`grade.checked`): the suite keeps its records in
# a folder of its own, never in the user's cache (every grading run of the suite, subprocesses
# included, shares it).
os.environ.setdefault("SHOPOPS_GRADE_CACHE", tempfile.mkdtemp(prefix="shopops-grade-cache-"))
# Every passing check records its exercise (`shopops_lab.progress`): the suite's checks, its
# notebooks' kernels and its browsers' JupyterLab record in a file of the run's own, never in the
# user's ~/.config.
os.environ.setdefault("SHOPOPS_PROGRESS", str(Path(tempfile.mkdtemp(prefix="shopops-progress-")) / "progress.jsonl"))

# Whole files `make test-fast` leaves out, with the mark that says why. One list: add a file
# here rather than a mark in the file.
SLOW_FILES: dict[str, str] = {
    "test_browser.py": "browser",  # every lab in JupyterLab, and the Lite site, in headless Chromium
    "test_browser_learner.py": "browser",  # a learner's keyboard walk of a counterexample, help and progress
    "test_hub.py": "browser",  # a class on a real JupyterHub: two students in Chromium, an instructor grading
    "test_lite.py": "lite",  # builds the offline JupyterLite site (npm; PyPI the first time)
    "test_nbgrader_roundtrip.py": "nbgrader",  # real nbgrader, in its own cached venv, grades every lab
    "test_grade_explorer.py": "grading",  # the explored checks of every lab judged across the grader's processes
    "test_grade_accuracy.py": "grading",  # every accuracy-suite answer of the explored checks, judged across them
    "test_grade_parts.py": "grading",  # lab 07's check of parts, shared by two judges and run whole without fork
}
# Single tests that grade every lab's master and student notebook end to end: the `grading`
# kind. (test_grade.py and test_grade_attacks.py stay quick: they grade one lab, hostile cases.)
GRADING_RUNS: frozenset[str] = frozenset(
    {
        "test_grade_cli.py::test_every_labs_master_earns_every_autograded_point",
        "test_grade_cli.py::test_every_labs_student_notebook_earns_nothing",
        "test_grade_term.py::test_a_term_graded_hand_scored_regraded_and_exported_loses_nothing",
    }
)
# Single tests that run whole notebooks in kernels, as nbval does: the `notebooks` kind.
NOTEBOOK_RUNS: frozenset[str] = frozenset(
    {
        "test_course_build.py::test_execute_runs_both_and_errors_only_in_tagged_cells",
        "test_course_build.py::test_nbval_runs_the_pristine_student_notebooks",
        "test_notebooks.py::test_stored_diagrams_hold_under_nbval_without_graphviz",
        "test_grade_rebuild.py::test_a_kernel_leaves_the_records_in_the_saved_notebook_and_the_grader_notes_them",
    }
)
# Files that share one thing run in one worker, one after the other: the session-scoped Lite
# site is built once (not once per worker), and two Chromiums never fight for two cores.
# (xdist's own `xdist_group` mark does not work with pytest 9.2: xdist 3.8 renames the item
# through an attribute pytest no longer reads; hence this table and the scheduler below.)
SHARED: dict[str, str] = {
    "test_browser.py": "offline-site",
    "test_browser_learner.py": "offline-site",
    "test_lite.py": "offline-site",
}


def worker_scope(nodeid: str) -> str:
    """The unit one worker runs whole: the file (or notebook), or the SHARED group of its file."""
    path = nodeid.split("::", 1)[0]
    return SHARED.get(path.rsplit("/", 1)[-1], path)


# How long each unit took in the last run on this machine (pytest's cache), else as measured
# on a 2-core machine when this file was last refreshed (`make test PYTEST_ARGS=--record-seconds`).
# The scheduler starts the longest units first, so no long file starts last and runs alone.
SECONDS_FILE = Path(__file__).with_name("scope_seconds.json")
SECONDS_KEY = "shopops-lab/scope-seconds"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-seconds", action="store_true", help=f"write each unit's measured seconds to {SECONDS_FILE.name}"
    )


def known_seconds(config: pytest.Config) -> dict[str, float]:
    """Each unit's last measured seconds: this machine's last run over the committed table."""
    seconds = json.loads(SECONDS_FILE.read_text()) if SECONDS_FILE.exists() else {}
    cache = getattr(config, "cache", None)  # absent under -p no:cacheprovider
    cached = cache.get(SECONDS_KEY, {}) if cache is not None else {}
    return {**seconds, **cached}


def longest_first(workqueue: dict[str, Any], seconds: dict[str, float]) -> dict[str, Any]:
    """The units, longest first (unknown ones by their number of tests, after the known)."""

    def cost(item: tuple[str, Any]) -> tuple[float, int]:
        scope, nodeids = item
        return (-seconds.get(scope, 0.0), -len(nodeids))

    return dict(sorted(workqueue.items(), key=cost))


@pytest.hookimpl(optionalhook=True)  # called only when pytest-xdist runs the tests
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedFileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_scope(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            if not getattr(self, "_sorted", False):  # once, when the queue is first built
                self.workqueue = type(self.workqueue)(longest_first(dict(self.workqueue), known_seconds(self.config)))
                self._sorted = True
            super()._assign_work_unit(node)

    return SharedFileScheduling(config, log)


_unit_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Adds up each unit's seconds (setup, call and teardown) as reports reach the controller."""
    scope = worker_scope(report.nodeid)
    _unit_seconds[scope] = _unit_seconds.get(scope, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput") or not _unit_seconds:
        return  # a worker: its reports reach the controller, which keeps the sums
    measured = {scope: round(sec, 1) for scope, sec in sorted(_unit_seconds.items())}
    cache = getattr(session.config, "cache", None)
    if cache is not None:
        cache.set(SECONDS_KEY, {**known_seconds(session.config), **measured})
    if session.config.getoption("--record-seconds"):
        SECONDS_FILE.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        kinds = []
        if item.path.suffix == ".ipynb" or f"{item.path.name}::{item.name}" in NOTEBOOK_RUNS:
            kinds.append("notebooks")  # an nbval cell, or a test running notebooks in kernels
        elif item.path.name in SLOW_FILES:
            kinds.append(SLOW_FILES[item.path.name])
        elif f"{item.path.name}::{getattr(item, 'originalname', item.name)}" in GRADING_RUNS:
            kinds.append("grading")
        if "postgres" in item.nodeid.lower():
            kinds.append("postgres")  # a case on the PostgreSQL server (it skips without one)
        for kind in kinds:
            item.add_marker(kind)
        if kinds:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path) -> Iterator[Backend]:
    """A fresh store of each kind in turn: memory, SQLite, PostgreSQL."""
    made = Backend(request.param, tmp_path)
    yield made
    made.close()


@pytest.fixture(params=DURABLE)
def durable(request, tmp_path) -> Iterator[Backend]:
    """A fresh store of each kind that survives its process: SQLite, PostgreSQL."""
    made = Backend(request.param, tmp_path)
    yield made
    made.close()


@pytest.fixture(scope="session")
def offline_site(tmp_path_factory) -> Path:
    """The course as an offline JupyterLite site, built once per test run (test_lite checks
    its files, test_browser runs it). Needs jupyterlite (requirements.txt), npm and PyPI the
    first time; downloads are cached in ~/.cache/shopops-lab/lite."""
    pytest.importorskip(
        "jupyterlite_core", reason="the Lite build needs jupyterlite-core: .venv/bin/pip install -r requirements.txt"
    )
    from shopops_lab.course.errors import LiteBuildError
    from shopops_lab.course.lite import build_site

    out = tmp_path_factory.mktemp("lite") / "site"
    try:
        build_site(out, offline=True, notebooks_dir=ROOT / "notebooks")
    except LiteBuildError as err:
        if os.environ.get("CI"):  # CI installs npm and reaches PyPI: there the build must work
            raise
        pytest.skip(f"the offline JupyterLite site could not be built here: {err}")
    return out
