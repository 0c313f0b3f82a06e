"""The README's examples run, and its commands exist: a newcomer copies them first."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from shopops_lab.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def run_block(source: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "README.md", "exec"), {"__name__": "readme"})
    return out.getvalue()


def test_the_readme_has_its_examples():
    assert len(PYTHON_BLOCKS) >= 2


def test_the_engine_example_shows_one_email_and_a_rejected_stale_ack():
    out = run_block(PYTHON_BLOCKS[0])
    assert out.splitlines()[0] == "1 2"
    assert "acked" in out and "stale_rejected" in out


def test_the_simulator_example_names_the_double_contact_and_the_replay():
    out = run_block(PYTHON_BLOCKS[1])
    assert "double_contact" in out
    assert "shopops-lab simulate burst_day --seed 7 --adapter naive" in out


@pytest.mark.parametrize("command", sorted(set(re.findall(r"\.venv/bin/shopops-lab ([^\n#]+?)\s*(?:#|\n)", README))))
def test_every_cli_command_in_the_readme_parses(command):
    """Each documented command is a real subcommand with real options (--help stops before running)."""
    words = command.split()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main([words[0], "--help"]) == 0
        from shopops_lab.cli import build_parser

        build_parser().parse_args(words)


def test_the_two_commands_are_the_makefiles():
    makefile = (Path(__file__).resolve().parent.parent / "Makefile").read_text(encoding="utf-8")
    for target in ("lab", "test", "doctor", "setup", "clean"):
        assert re.search(rf"^{target}:", makefile, flags=re.M), target
        assert f"make {target}" in README
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in ci


def test_the_module_table_names_every_module_of_the_package_and_no_other():
    table = README.split("What is where", 1)[1].split("\n\n", 2)[1]
    named = {name for row in table.splitlines()[2:] for name in re.findall(r"`([\w.]+)`", row.split("|")[1])}
    package = ROOT / "shopops_lab"
    modules = {path.stem for path in package.glob("*.py") if not path.stem.startswith("_")}
    modules |= {path.parent.name for path in package.glob("*/__init__.py")}
    assert {name.split(".")[0] for name in named} == modules
