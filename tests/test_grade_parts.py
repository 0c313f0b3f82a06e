"""A check made of parts (lab 07's burst days) is shared by the judges of one submission:
an idle slot's judge takes the parts nobody has taken, and the parent gives the verdict of
one run in order. The reference is a grader without fork (each judge a fresh interpreter, no
shared table), where the check runs whole, in one judge, as `Exercise.result` runs it."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import grade_fixtures as fx
import pytest

from shopops_lab.course.grade import pool
from shopops_lab.course.grade.messages import PartVerdict
from shopops_lab.course.grade.results import Mark
from shopops_lab.course.grade.run import grade
from shopops_lab.course.grade.sandbox import Limits

LIMITS = Limits(cell_seconds=120.0, notebook_seconds=600.0, memory_mb=1024)
# Tuned on the notebook's day (seed 3): it sheds only in that day's spike window, so it passes
# the rules and the first two days and melts the gateway on seed 13, the check's last part.
TUNED = """def my_policy(signals):
    if 420 <= signals.now <= 1680 and signals.in_flight >= GATEWAY_CAPACITY:
        return acquire(max_priority=Priority.APPROVAL)
    return acquire()"""
# Keeps a count, and answers differently after a while: the rules (the first part) refuse it.
COUNTS = """CALLS = []
def my_policy(signals):
    CALLS.append(1)
    if len(CALLS) > 300 and signals.in_flight >= GATEWAY_CAPACITY:
        return acquire(max_priority=Priority.APPROVAL)
    return acquire()"""


def _row(result) -> tuple:
    exercises = [(e.grade_id, e.mark, e.points, e.message, e.evidence) for e in result.exercises]
    return result.status, result.reason, exercises, result.notes


@pytest.mark.parametrize(
    ("policy", "mark", "words"),
    [
        (fx.RIGHT, Mark.CORRECT, "3 burst days"),
        (TUNED, Mark.INCORRECT, "(seed 13,"),
        (COUNTS, Mark.INCORRECT, "the same signals must always get the same decision"),
    ],
    ids=["right", "fails-the-last-part", "fails-the-first-part"],
)
def test_two_judges_share_a_check_of_parts_and_give_one_runs_verdict(
    policy, mark: Mark, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fx.write(fx.submission("07", {"my-policy": policy}), tmp_path / "in" / "policy_lab07.ipynb")
    parts: list[tuple[bool, int]] = []  # (sent by a helper?, part) for each part reported
    handle = pool.Pool._handle

    def noted(self, run, message) -> None:
        if isinstance(message, PartVerdict):
            parts.append((run.helping is not None, message.part))
        handle(self, run, message)

    monkeypatch.setattr(pool.Pool, "_handle", noted)
    shared = grade([str(tmp_path / "in")], key=fx.SOLUTIONS, out=tmp_path / "shared", jobs=2, limits=LIMITS)
    judged_by = dict((part, helper) for helper, part in parts)
    assert sorted(judged_by) == sorted({part for _, part in parts})  # no part reported twice
    if mark is Mark.CORRECT:
        assert sorted(judged_by) == [0, 1, 2, 3] and set(judged_by.values()) == {False, True}, parts

    monkeypatch.setattr(pool, "_context", lambda: multiprocessing.get_context("spawn"))
    parts.clear()
    whole = grade([str(tmp_path / "in")], key=fx.SOLUTIONS, out=tmp_path / "whole", jobs=2, limits=LIMITS)
    assert parts == []  # without fork, the check ran whole in one judge
    (one,), (other,) = shared.results, whole.results
    assert _row(one) == _row(other)
    policy_row = next(e for e in one.exercises if e.grade_id == "my-policy-test")
    assert policy_row.mark is mark and words in policy_row.message, policy_row.message


def test_a_helper_left_in_a_decided_step_is_ended_and_nobody_else() -> None:
    """Once a part fails, the parts after it cannot change the verdict: a helper judging one
    of them is ended (it holds no later step). The judge that decided it, the submission's
    first judge, and helpers elsewhere go on."""
    from shopops_lab.course.grade.pool import Pool, _Run
    from shopops_lab.course.grade.rebuild import Plan

    plan = Plan("07", (), (), (), ())
    main = _Run(submission=None, master=None, plan=plan, started=0.0)  # type: ignore[arg-type]
    main.current, main.process = 5, "running"
    stuck, elsewhere, deciding = (main.helper(slot, None) for slot in (1, 2, 3))
    stuck.current, elsewhere.current, deciding.current = 5, 9, 5
    for helper in (stuck, elsewhere, deciding):
        helper.process = "running"
    other = _Run(submission=None, master=None, plan=plan, started=0.0)  # type: ignore[arg-type]
    other.current, other.process = 5, "running"  # another submission's judge, in the same cell
    judged = Pool(key=None, limits=LIMITS, jobs=4)  # type: ignore[arg-type]
    ended: list[_Run] = []
    judged._kill = lambda run: ended.append(run)  # type: ignore[method-assign]
    judged.running = [main, stuck, elsewhere, deciding, other]
    judged._release(deciding, 5)
    assert ended == [stuck]
