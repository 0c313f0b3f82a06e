"""The learner checks of lab 03 (a lease policy judged on every situation of its lease) and lab 04 (a fenced
result store, and which control rejects a stale completion): how their messages are
built, and the real notebooks (the master's answers pass, the student copy's stubs read
as "not attempted"). Right and wrong answers: tests/test_check_accuracy_lab03.py, _lab04.py.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from notebook_answers import answers

from shopops_lab.checks import lab03, lab04
from shopops_lab.checks.base import Verdict
from shopops_lab.checks.lab03 import HeartbeatPolicy
from shopops_lab.course.build import build_student
from shopops_lab.errors import BadArgumentError
from shopops_lab.fencing import NaiveResultStore

ROOT = Path(__file__).resolve().parent.parent
LAB03 = ROOT / "solutions" / "03_heartbeats_and_ttl_design.ipynb"
LAB04 = ROOT / "solutions" / "04_fencing_tokens.ipynb"


def policy(ttl, every, tolerance):
    return lambda: HeartbeatPolicy(ttl=ttl, heartbeat_interval=every, missed_tolerance=tolerance)


def stub(*args, **kwargs):
    raise NotImplementedError()


# --------------------------------------------------------------------------- lab 03


def test_lab03_names_the_broken_promise_then_the_shortest_situation():
    result = lab03.exercise.result(policy(20, 15, 0))
    assert result.message.startswith(
        "W1's lease ran out at t=20 while its model call was still running (calls take up to 120 s), and W7 took "
        "the case over at t=20 (token 2): heartbeat 1 (held up 5 s) reached the queue at t=20, 20 s after the last "
        "renewal, not before the 20 s deadline. The shortest schedule that shows it (1 step): heartbeat 1 is 5 s late."
    )
    assert result.evidence == (
        "1. t=15 W1 sends heartbeat 1, held up 5 s; the lease runs out at t=20: W7 acquires O-1001 (token 2)",
    )
    chosen = HeartbeatPolicy(ttl=20, heartbeat_interval=15, missed_tolerance=0)
    assert lab03.replay_policy(chosen, "heartbeat 1 is 4 s late").problem is None  # a policy, or choose_policy
    assert "W1's lease ran out at t=20" in str(lab03.replay_policy(chosen, "heartbeat 1 is lost · heartbeat 2 lands"))


def test_lab03_a_policy_without_heartbeats_is_told_why_no_ttl_works():
    result = lab03.exercise.result(policy(30, None, 0))
    assert "without heartbeats the lease must outlast the slowest call (120 s), and then a dead worker's case " in (
        result.message
    )
    assert result.evidence == ("1. the lease runs out at t=30: W7 acquires O-1001 (token 2)",)
    assert "lost heartbeat" not in result.message


def test_lab03_the_load_limit_comes_first():
    """Arithmetic, before any situation is played: a policy that also breaks other promises hears this one."""
    result = lab03.exercise.result(policy(300, 4, 0))
    assert result.message == (
        "your policy (ttl 300 s, heartbeat every 4 s, tolerates 0 lost in a row) sends 15 heartbeats per worker per "
        "minute (limit 12): that is load on the queue for no progress; heartbeat at most every 5 s."
    )


def test_lab03_judges_the_values_not_the_object():
    """A subclass's own methods take no part: the kit's evaluator runs on its three values."""

    class Flattering(HeartbeatPolicy):
        def evaluate(self, *args, **kwargs):
            raise AssertionError("the check must not call the learner's evaluate")

    assert lab03.exercise.result(lambda: Flattering(ttl=60, heartbeat_interval=15, missed_tolerance=2)).correct
    assert not lab03.exercise.result(lambda: Flattering(ttl=30, heartbeat_interval=None, missed_tolerance=0)).correct


def test_lab03_not_attempted_and_crash():
    assert lab03.exercise.result(stub).verdict is Verdict.NOT_ATTEMPTED
    crashed = lab03.exercise.result(lambda: HeartbeatPolicy(ttl=-1, heartbeat_interval=None, missed_tolerance=0))
    assert crashed.verdict is Verdict.INCORRECT and "BadArgumentError: ttl is -1" in crashed.message
    with pytest.raises(AssertionError, match="not attempted"):
        lab03.exercise.grade(stub)
    with pytest.raises(AssertionError, match="limit 90 s"):
        lab03.exercise.grade(policy(130, None, 1))


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"ttl": 0, "heartbeat_interval": 10, "missed_tolerance": 1}, "ttl"),
        ({"ttl": float("inf"), "heartbeat_interval": 10, "missed_tolerance": 1}, "ttl"),
        ({"ttl": True, "heartbeat_interval": 10, "missed_tolerance": 1}, "ttl"),
        ({"ttl": 60, "heartbeat_interval": 0, "missed_tolerance": 1}, "heartbeat_interval"),
        ({"ttl": 60, "heartbeat_interval": "15", "missed_tolerance": 1}, "heartbeat_interval"),
        ({"ttl": 60, "heartbeat_interval": 15, "missed_tolerance": 1.5}, "missed_tolerance"),
        ({"ttl": 60, "heartbeat_interval": 15, "missed_tolerance": -1}, "missed_tolerance"),
    ],
)
def test_heartbeat_policy_refuses_bad_fields_by_name(fields, field):
    with pytest.raises(BadArgumentError) as err:
        HeartbeatPolicy(**fields)
    assert err.value.field == field


def test_heartbeat_policy_is_a_frozen_record_that_simulates_itself():
    chosen = HeartbeatPolicy(ttl=60, heartbeat_interval=15, missed_tolerance=2)
    with pytest.raises(AttributeError):
        chosen.ttl = 30
    assert str(chosen) == "ttl 60 s, heartbeat every 15 s, tolerates 2 lost in a row"
    assert str(HeartbeatPolicy(ttl=30, heartbeat_interval=None, missed_tolerance=0)).startswith(
        "ttl 30 s, no heartbeats"
    )
    report = chosen.evaluate(seed=7)
    assert (report.ttl, report.heartbeat_interval, report.seed, report.runs) == (60, 15, 7, 2000)
    assert report.absorbs_missed == 2 and report.heartbeats_per_worker_per_min == 4
    assert chosen.evaluate(seed=7) == report  # same seed, same numbers
    assert lab03.problems(report) == []


def test_lab03_hints_come_in_three_levels(capsys):
    assert len(lab03.exercise.hints) == 3
    lab03.exercise.hint(1)
    lab03.exercise.hint(9)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Hint 1 of 3 (hint(2) says more): Without heartbeats")
    assert out[1].startswith("Hint 3 of 3, your counterexample: there is no choose_policy in this notebook yet.")
    assert out[2] == f"The shape of a fix: {lab03.exercise.hints[-1]}"


# --------------------------------------------------------------------------- lab 04


class Stub(NaiveResultStore):
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        raise NotImplementedError()


def test_lab04_not_attempted_only_for_the_stub_itself():
    assert lab04.exercise.result(Stub).verdict is Verdict.NOT_ATTEMPTED

    class CallsAHelperThatIsNotWritten(NaiveResultStore):
        def complete(self, job_id, result, *, token, worker_id=None, now=None):
            self.check_token(job_id, token)

        def check_token(self, job_id, token):
            raise NotImplementedError()

    deeper = lab04.exercise.result(CallsAHelperThatIsNotWritten)
    assert deeper.verdict is Verdict.INCORRECT
    assert "the store refused X's write with token 0 with NotImplementedError" in deeper.message


def test_lab04_a_hint_asked_for_in_words_is_a_friendly_message(capsys):
    lab04.exercise.hint("two")
    assert capsys.readouterr().out == (
        "hint() takes a number: hint(1) is a nudge, up to hint(3), the counterexample for your own answer. It got "
        "the str 'two'.\n"
    )


def test_lab04_the_store_token_check_is_the_control():
    assert lab04.knowledge.result(lambda: "store_token_check").verdict is Verdict.CORRECT
    assert lab04.knowledge.result(stub).verdict is Verdict.NOT_ATTEMPTED
    with pytest.raises(AssertionError, match="does not reject"):
        lab04.knowledge.grade(lambda: "lease_expiry")


# --------------------------------------------------------------------------- the notebooks


@pytest.mark.parametrize(
    "path, checks",
    [
        (LAB03, [(lab03.exercise, "choose_policy"), (lab03.loop, "draft_with_heartbeats")]),
        (LAB04, [(lab04.exercise, "FencedResultStore"), (lab04.knowledge, "rejecting_control")]),
    ],
    ids=["lab03", "lab04"],
)
def test_master_answers_pass_and_student_stubs_are_not_attempted(path, checks, capsys):
    master = nbformat.read(path, as_version=4)
    graded = [c.source for c in master.cells if c.metadata["nbgrader"]["grade"] and c.cell_type == "code"]
    assert len(graded) == len(checks)
    solved, pristine = answers(master), answers(build_student(master))
    capsys.readouterr()  # the set-up cell prints its settings
    for exercise, name in checks:
        assert any(f"grade({name})" in g for g in graded)
        assert exercise.result(solved[name]).verdict is Verdict.CORRECT
        assert exercise.result(pristine[name]).verdict is Verdict.NOT_ATTEMPTED
