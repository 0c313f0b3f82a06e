"""The map of the suite stays true: tests/README.md names every test file and every module
of the package, and the parallel run keeps together what must run together."""
from __future__ import annotations

import re
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from conftest import NOTEBOOK_RUNS, SHARED, SLOW_FILES, worker_scope

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "shopops_lab"
MAP = (TESTS / "README.md").read_text(encoding="utf-8")
NAMED = set(re.findall(r"`([^`\s]+)`", MAP))


def test_the_map_names_every_test_file() -> None:
    patterns = {name for name in NAMED if name.endswith(".py")}
    files = sorted(path.name for path in TESTS.glob("test_*.py"))
    missing = [name for name in files if not any(fnmatchcase(name, pattern) for pattern in patterns)]
    assert missing == [], "add these to tests/README.md, under their lab and their module"


def test_the_map_names_every_module_of_the_package() -> None:
    modules = {path.stem for path in PACKAGE.glob("*.py") if not path.stem.startswith("_")}
    modules |= {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    table = MAP.split("## Each module of `shopops_lab`", 1)[1]
    named = {name.split(".")[0] for row in table.splitlines() if row.startswith("| `")
             for name in re.findall(r"`([\w.]+)`", row.split("|")[1])}
    assert sorted(modules - named) == []


def test_the_slow_files_exist_and_are_in_the_map() -> None:
    for name in [*SLOW_FILES, *SHARED]:
        assert (TESTS / name).exists(), name
        assert f"`{name}`" in MAP, name


def test_each_single_slow_test_still_exists() -> None:
    """A renamed test would silently leave the `slow` set and slow down `make test-fast`."""
    for nodeid in sorted(NOTEBOOK_RUNS):
        file, name = nodeid.split("::")
        assert f"def {name}(" in (TESTS / file).read_text(encoding="utf-8"), nodeid


@pytest.mark.parametrize("nodeid, scope", [
    ("solutions/04_fencing_tokens.ipynb::Cell 3", "solutions/04_fencing_tokens.ipynb"),  # one kernel per notebook
    ("notebooks/04_fencing_tokens.ipynb::Cell 3", "notebooks/04_fencing_tokens.ipynb"),
    ("tests/test_queue.py::test_x[memory]", "tests/test_queue.py"),  # a file: its module fixtures built once
    ("tests/test_lite.py::test_x", "offline-site"),  # the built site: one worker builds it once
    ("tests/test_browser.py::test_lab[00]", "offline-site"),
])
def test_a_worker_runs_whole_what_shares_a_kernel_a_fixture_or_a_site(nodeid: str, scope: str) -> None:
    assert worker_scope(nodeid) == scope
