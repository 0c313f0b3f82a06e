"""A check made of parts (lab 07's burst days) is judged whole by the submission's one judge,
in order: the verdict is the first part that did not pass, else the summary. Judges forked
from the warm grader and judges started fresh (no fork) give the same row.

(Judges of one submission used to share its parts on idle slots. At a class's size, 30
submissions a lab on 2 cores, that work stealing did not pay: lab 04 16.4 s with it against
16.1 s without, lab 05 19.1 against 16.9, lab 07 93.8 against 85.4, medians of 3 interleaved
on a loaded machine; a slot is idle only at a class's last submission. It was taken out.)"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import grade_fixtures as fx
import pytest

from shopops_lab.course.grade import pool
from shopops_lab.course.grade.judge import Limits
from shopops_lab.course.grade.results import Mark
from shopops_lab.course.grade.run import grade

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
def test_a_check_of_parts_gives_the_verdict_of_one_run_in_order(
    policy, mark: Mark, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fx.write(fx.submission("07", {"my-policy": policy}), tmp_path / "in" / "policy_lab07.ipynb")
    forked = grade([str(tmp_path / "in")], key=fx.SOLUTIONS, out=tmp_path / "forked", jobs=2, limits=LIMITS)
    monkeypatch.setattr(pool, "_context", lambda: multiprocessing.get_context("spawn"))
    fresh = grade([str(tmp_path / "in")], key=fx.SOLUTIONS, out=tmp_path / "fresh", jobs=2, limits=LIMITS)
    (one,), (other,) = forked.results, fresh.results
    assert _row(one) == _row(other)
    policy_row = next(e for e in one.exercises if e.grade_id == "my-policy-test")
    assert policy_row.mark is mark and words in policy_row.message, policy_row.message
