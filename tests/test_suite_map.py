"""The map of the suite stays true: tests/README.md names every test file and every module
of the package, and the parallel run keeps together what must run together."""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from conftest import NOTEBOOK_RUNS, SECONDS_FILE, SHARED, SLOW_FILES, longest_first, worker_scope

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
    named = {
        name.split(".")[0]
        for row in table.splitlines()
        if row.startswith("| `")
        for name in re.findall(r"`([\w.]+)`", row.split("|")[1])
    }
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


@pytest.mark.parametrize(
    "nodeid, scope",
    [
        ("solutions/04_fencing_tokens.ipynb::Cell 3", "solutions/04_fencing_tokens.ipynb"),  # one kernel per notebook
        ("notebooks/04_fencing_tokens.ipynb::Cell 3", "notebooks/04_fencing_tokens.ipynb"),
        ("tests/test_queue.py::test_x[memory]", "tests/test_queue.py"),  # a file: its module fixtures built once
        ("tests/test_lite.py::test_x", "offline-site"),  # the built site: one worker builds it once
        ("tests/test_browser.py::test_lab[00]", "offline-site"),
    ],
)
def test_a_worker_runs_whole_what_shares_a_kernel_a_fixture_or_a_site(nodeid: str, scope: str) -> None:
    assert worker_scope(nodeid) == scope


def test_the_longest_units_start_first_and_unknown_ones_by_their_number_of_tests() -> None:
    queue = {"a.py": ["t"], "b.py": ["t"] * 3, "site": ["t"], "c.py": ["t"] * 2}
    order = list(longest_first(queue, {"site": 90.0, "a.py": 4.0}))
    assert order == ["site", "a.py", "b.py", "c.py"]


def test_the_committed_seconds_name_only_units_that_exist() -> None:
    """A renamed file would keep a stale entry and start late again: refresh with --record-seconds."""
    root = TESTS.parent
    for scope in json.loads(SECONDS_FILE.read_text(encoding="utf-8")):
        assert scope in SHARED.values() or (root / scope).exists(), scope
