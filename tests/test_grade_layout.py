"""`grade` run from a command line runs again with one address layout (`grade.layout`): every
process it starts, the learner's included, inherits it, unless the instructor keeps
randomization; run as a library, or where the OS refuses, nothing is run again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grade_fixtures as fx
import pytest

from shopops_lab import cli
from shopops_lab.course.grade import layout

ASKED = "from shopops_lab.course.grade import layout; layout.run_again_with_one_layout(); print(layout.fixed())"
# The learner's answer is right only in a process whose layout is fixed (ctypes: its own
# /proc files are not its to read once it runs under its own uid).
LAYOUT_ANSWER = """def enqueue_first_case(queue):
    import ctypes
    if not ctypes.CDLL(None).personality(0xFFFFFFFF) & 0x0040000:
        raise RuntimeError("this process has a layout of its own")
    return queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")"""


def _python(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in (layout.AGAIN, layout.KEEP)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **env}, check=True
    )
    return done.stdout.strip()


def _supported() -> None:
    if _python(ASKED) != "True":
        pytest.skip(
            "this OS refuses personality(ADDR_NO_RANDOMIZE) (not Linux, or a container's seccomp profile): "
            "grading runs with randomization on; run the tests on a Linux machine or VM to cover it"
        )


def test_a_process_runs_again_once_with_randomization_off() -> None:
    _supported()
    assert _python(f"import os; {ASKED}; print(os.environ['{layout.AGAIN}'])") == "True\n1"


def test_the_instructor_can_keep_randomization_and_nothing_runs_again() -> None:
    _supported()
    assert _python(ASKED, **{layout.KEEP: "1"}) == "False"


def test_a_process_told_it_ran_again_never_runs_again() -> None:
    """The mark is set before running again: whatever the OS did, there is no second time."""
    assert _python(ASKED, **{layout.AGAIN: "1"}) == "False"


def test_only_grade_asks_for_it_and_only_from_a_real_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli._one_layout(["grade", "submitted/"]) and not cli._one_layout(["doctor"])
    ran: list[bool] = []
    monkeypatch.setattr(layout, "run_again_with_one_layout", lambda: ran.append(True))
    assert cli.main(["grade", "--help"]) == 0  # a library call (argv given): the caller's process stays as it is
    assert ran == []


def test_the_command_runs_again_before_the_cli_loads() -> None:
    """The interpreter it replaces has loaded almost nothing (the console script and `python
    -m shopops_lab` both start in `__main__.main`): only grading asks, and only once."""
    _supported()
    code = (
        "import os, sys; from shopops_lab.__main__ import main; "
        "os.execv = lambda *args: (print('shopops_lab.cli' in sys.modules, 'argparse' in sys.modules), "
        "sys.stdout.flush(), os._exit(0)); sys.argv = ['shopops-lab', *sys.argv[1:]]; main()"
    )
    clean = {k: v for k, v in os.environ.items() if k not in (layout.AGAIN, layout.KEEP)}

    def run(*argv: str) -> str:
        return subprocess.run(
            [sys.executable, "-c", code, *argv], capture_output=True, text=True, env=clean, check=True
        ).stdout

    assert run("grade", "--help") == "False False\n"
    assert "usage" in run("doctor", "--help") and "usage" in run("--help")  # not grading: no second run


@pytest.mark.parametrize("keep", [False, True])
def test_the_learners_process_inherits_the_graders_layout(tmp_path: Path, keep: bool) -> None:
    """Graded as the instructor runs it: the answer is right only where its process has the
    fixed layout, so its mark says which layout the learner's process had."""
    _supported()
    env = {k: v for k, v in os.environ.items() if k not in (layout.AGAIN, layout.KEEP)}
    if keep:
        env[layout.KEEP] = "1"
    mark = fx.graded_from_the_command_line("00", {"warmup-answer": LAYOUT_ANSWER}, tmp_path, env)["warmup-test"]
    if keep:
        assert mark["mark"] == "incorrect" and "a layout of its own" in mark["message"], mark
    else:
        assert mark["mark"] == "correct", mark
