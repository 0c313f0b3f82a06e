"""One style check for the package, its tests and its benchmarks: ruff, configured in
pyproject.toml (import order, lines up to 120 characters, pyflakes, bugbear, pyupgrade), and
one formatter, `ruff format`, whose output is the only layout the code has."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def ruff(
    *args: str, given: str | None = None, command: tuple[str, ...] = ("check", "--output-format", "concise")
) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("ruff") is None:
        how = "the style check needs ruff: .venv/bin/pip install -r requirements.txt (it lists ruff)"
        if os.environ.get("CI"):
            pytest.fail(how)
        pytest.skip(how)
    return subprocess.run(
        [sys.executable, "-m", "ruff", *command, "--no-cache", *args],
        cwd=ROOT,
        input=given,
        capture_output=True,
        text=True,
    )


def test_ruff_finds_nothing_to_fix_in_the_package_tests_and_benchmarks():
    found = ruff("shopops_lab", "tests", "benchmarks")
    assert found.returncode == 0, f"ruff found style problems (`ruff check --fix` mends some):\n{found.stdout}"


def test_the_code_is_laid_out_by_the_formatter():
    found = ruff("shopops_lab", "tests", "benchmarks", "scripts", command=("format", "--check"))
    assert found.returncode == 0, f"run `ruff format shopops_lab tests benchmarks scripts`:\n{found.stdout}"


def test_the_projects_rules_are_the_ones_in_force():
    fine = f"import os\n\nprint(os.sep, '{'y' * 102}')\n"  # a line of 119 characters
    assert ruff("--stdin-filename", "shopops_lab/example.py", "-", given=fine).returncode == 0
    too_long = fine.replace("y" * 102, "y" * 104)  # 121
    unsorted = "import sys\nimport os\n\nprint(os.sep, sys.argv)\n"
    assert "E501" in ruff("--stdin-filename", "shopops_lab/example.py", "-", given=too_long).stdout
    assert "I001" in ruff("--stdin-filename", "shopops_lab/example.py", "-", given=unsorted).stdout
