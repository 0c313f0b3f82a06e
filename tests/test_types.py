"""The type checker runs as a test: `mypy` with the [tool.mypy] config in pyproject.toml
(basic for the whole package, strict for the stores, the queue, events, fencing, the check
seam and the grader), and it must find nothing.

Every module is checked: no override excuses one (`ignore_errors`), so there is no list of
modules whose errors go unreported, and none may come back.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec("mypy") is None:
        how = "the type check needs mypy: .venv/bin/pip install -r requirements.txt (it lists mypy)"
        if os.environ.get("CI"):
            pytest.fail(how)
        pytest.skip(how)
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True, text=True)


def test_mypy_finds_no_type_error_in_the_package() -> None:
    found = mypy()  # the files and options come from pyproject.toml, as for a plain `.venv/bin/mypy`
    assert found.returncode == 0, f"mypy found type errors:\n{found.stdout}{found.stderr}"


def test_no_module_is_excused() -> None:
    """No override turns a module's errors off or leaves its bodies unchecked: the whole
    package is checked, as plain `mypy` from the checkout checks it."""
    assert CONFIG["files"] == ["shopops_lab"] and CONFIG["check_untyped_defs"] is True
    assert not CONFIG.get("ignore_errors", False)
    for override in CONFIG.get("overrides", []):
        assert not override.get("ignore_errors", False), override["module"]
        assert override.get("check_untyped_defs", True), override["module"]
        assert override.get("follow_imports", "normal") != "skip", override["module"]


def test_the_check_has_teeth_on_the_kits_own_annotations(tmp_path: Path) -> None:
    """A wrong call into a checked module is an error: the package's annotations are read
    (py.typed ships them to anyone who installs the kit, too)."""
    assert (ROOT / "shopops_lab" / "py.typed").exists()
    wrong = tmp_path / "wrong_call.py"
    wrong.write_text("from shopops_lab.clock import FakeClock\n\nFakeClock().advance('soon')\n")
    found = mypy(str(wrong))
    assert found.returncode == 1 and '"advance" of "FakeClock" has incompatible type "str"' in found.stdout, (
        found.stdout + found.stderr
    )
