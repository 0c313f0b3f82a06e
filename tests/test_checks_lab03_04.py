"""The learner checks of lab 03 (a lease policy judged by simulation) and lab 04 (a fenced
result store, and which control rejects a stale completion).

Each wrong answer is one a learner plausibly writes; the test proves the check calls it
incorrect and that its message names what went wrong with numbers, without the answer.
The last tests run the checks against the real notebooks: the master's answers pass, and
the student copy's stubs read as "not attempted".
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
from shopops_lab.errors import BadArgumentError, ShopOpsError, StaleTokenError
from shopops_lab.fencing import NaiveResultStore

ROOT = Path(__file__).resolve().parent.parent
LAB03 = ROOT / "solutions" / "03_heartbeats_and_ttl_design.ipynb"
LAB04 = ROOT / "solutions" / "04_fencing_tokens.ipynb"


def policy(ttl, every, tolerance):
    return lambda: HeartbeatPolicy(ttl=ttl, heartbeat_interval=every, missed_tolerance=tolerance)


def stub(*args, **kwargs):
    raise NotImplementedError()


# --------------------------------------------------------------------------- lab 03

@pytest.mark.parametrize("ttl, every, tolerance", [(60, 15, 2), (40, 10, 2), (90, 5, 16), (30, 6, 3)])
def test_lab03_policies_within_every_limit_are_correct(ttl, every, tolerance):
    result = lab03.exercise.result(policy(ttl, every, tolerance))
    assert result.verdict is Verdict.CORRECT, str(result)
    assert f"ttl {ttl:g} s" in result.message and "4 seeded simulations" in result.message
    lab03.exercise.grade(policy(ttl, every, tolerance))  # returns quietly


@pytest.mark.parametrize("ttl, every, tolerance, expected", [
    (30, None, 0, ["healthy workers lose their lease in 11.05% of calls (limit 0.10%)",
                   "outlast the slowest call (120 s)"]),
    (130, None, 1, ["a dead worker's case can wait 130 s before redelivery (limit 90 s)"]),
    (120, 20, 1, ["can wait 120 s before redelivery (limit 90 s)"]),
    (30, 2, 3, ["30 heartbeats per worker per minute (limit 12)"]),
    (30, 10, 2, ["does not survive 2 lost heartbeat(s) in a row", "lands 30 s after the last renewal"]),
    (20, 15, 0, ["promises to survive 0 lost heartbeat(s) in a row", "plan for at least 1"]),
    (30, 40, 1, ["the first heartbeat comes after the deadline"]),
], ids=["short-no-heartbeat", "long-no-heartbeat", "ttl-too-long", "flooding", "dishonest-tolerance",
        "no-tolerance", "interval-past-ttl"])
def test_lab03_each_broken_limit_is_named_with_its_numbers(ttl, every, tolerance, expected):
    result = lab03.exercise.result(policy(ttl, every, tolerance))
    assert result.verdict is Verdict.INCORRECT
    text = str(result)
    for phrase in expected:
        assert phrase in text, text
    assert "seed 1" in result.message
    assert "HeartbeatPolicy(ttl=60" not in text and "ttl 60 s" not in text  # never the model answer


def test_lab03_lists_every_broken_limit_and_the_measured_numbers():
    result = lab03.exercise.result(policy(30, None, 0))
    assert result.message.endswith("breaks 2 limits in the simulation with seed 1 (2000 model calls, "
                                   "p50 8 s, p99 90 s, max 120 s):")
    assert result.evidence[0].startswith("- healthy workers lose their lease")
    assert result.evidence[1].startswith("- the policy promises to survive 0")
    assert "  spurious expiry:  11.05% of healthy calls (2000 simulated, 1.0% of heartbeats lost)" in result.evidence


def test_lab03_not_attempted_wrong_type_and_crash():
    assert lab03.exercise.result(stub).verdict is Verdict.NOT_ATTEMPTED
    wrong = lab03.exercise.result(lambda: {"ttl": 60, "heartbeat_interval": 15})
    assert wrong.verdict is Verdict.INCORRECT
    assert "returned dict" in wrong.message and "return a HeartbeatPolicy(" in wrong.message
    crashed = lab03.exercise.result(lambda: HeartbeatPolicy(ttl=-1, heartbeat_interval=None, missed_tolerance=0))
    assert crashed.verdict is Verdict.INCORRECT and "BadArgumentError: ttl is -1" in crashed.message
    with pytest.raises(AssertionError, match="not attempted"):
        lab03.exercise.grade(stub)
    with pytest.raises(AssertionError, match="limit 90 s"):
        lab03.exercise.grade(policy(130, None, 1))


@pytest.mark.parametrize("fields, field", [
    ({"ttl": 0, "heartbeat_interval": 10, "missed_tolerance": 1}, "ttl"),
    ({"ttl": float("inf"), "heartbeat_interval": 10, "missed_tolerance": 1}, "ttl"),
    ({"ttl": True, "heartbeat_interval": 10, "missed_tolerance": 1}, "ttl"),
    ({"ttl": 60, "heartbeat_interval": 0, "missed_tolerance": 1}, "heartbeat_interval"),
    ({"ttl": 60, "heartbeat_interval": "15", "missed_tolerance": 1}, "heartbeat_interval"),
    ({"ttl": 60, "heartbeat_interval": 15, "missed_tolerance": 1.5}, "missed_tolerance"),
    ({"ttl": 60, "heartbeat_interval": 15, "missed_tolerance": -1}, "missed_tolerance"),
])
def test_heartbeat_policy_refuses_bad_fields_by_name(fields, field):
    with pytest.raises(BadArgumentError) as err:
        HeartbeatPolicy(**fields)
    assert err.value.field == field


def test_heartbeat_policy_is_a_frozen_record_that_simulates_itself():
    chosen = HeartbeatPolicy(ttl=60, heartbeat_interval=15, missed_tolerance=2)
    with pytest.raises(AttributeError):
        chosen.ttl = 30
    assert str(chosen) == "ttl 60 s, heartbeat every 15 s, tolerates 2 lost in a row"
    assert str(HeartbeatPolicy(ttl=30, heartbeat_interval=None, missed_tolerance=0)).startswith("ttl 30 s, no heartbeats")
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
    assert out[1].startswith("Hint 3 of 3: Shape:")


# --------------------------------------------------------------------------- lab 04

class Fenced(NaiveResultStore):
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        current = self.current_token(job_id)
        if token != current:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class OnlyOlder(NaiveResultStore):
    """Refuses older tokens, but lets a forged, larger one through."""

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        current = self.current_token(job_id)
        if token < current:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class RefusesTheHolder(NaiveResultStore):
    """Off by one: refuses the current token too."""

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        current = self.current_token(job_id)
        if token <= current:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class WritesThenRefuses(NaiveResultStore):
    """Checks after writing: the stale result is already in."""

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)
        current = self.current_token(job_id)
        if token != current:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)


class SwappedTokens(NaiveResultStore):
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        current = self.current_token(job_id)
        if token != current:
            raise StaleTokenError(what=f"job {job_id}", token=current, current=token)
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class WrongError(NaiveResultStore):
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        if token != self.current_token(job_id):
            raise ShopOpsError(detail="no")
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class Stub(NaiveResultStore):
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        raise NotImplementedError()


def test_lab04_a_store_that_refuses_every_token_but_the_current_one_is_correct():
    result = lab04.exercise.result(Fenced)
    assert result.verdict is Verdict.CORRECT, str(result)
    lab04.exercise.grade(Fenced)


@pytest.mark.parametrize("store, expected", [
    (NaiveResultStore, ["worker A completed job-0001 with token", "the store accepted it (seed 1)",
                        "written by ('A', "]),
    (OnlyOlder, ["a token the store never issued (", "refuse every token except the current one"]),
    (RefusesTheHolder, ["B holds the current token", "was refused with StaleTokenError"]),
    (WritesThenRefuses, ["a refused write must change nothing", "written by ('A', "]),
    (SwappedTokens, ["should say which token A carried and which one is current"]),
    (WrongError, ["refused, but with ShopOpsError; raise StaleTokenError"]),
], ids=["naive", "only-older", "refuses-holder", "writes-then-refuses", "swapped-tokens", "wrong-error"])
def test_lab04_each_plausible_mistake_is_named(store, expected):
    result = lab04.exercise.result(store)
    assert result.verdict is Verdict.INCORRECT
    text = str(result)
    for phrase in expected:
        assert phrase in text, text
    with pytest.raises(AssertionError):
        lab04.exercise.grade(store)


def test_lab04_not_attempted_and_not_a_class():
    assert lab04.exercise.result(Stub).verdict is Verdict.NOT_ATTEMPTED
    assert lab04.exercise.result(None).verdict is Verdict.NOT_ATTEMPTED
    instance = lab04.exercise.result(Fenced())
    assert instance.verdict is Verdict.INCORRECT and "an instance of Fenced" in instance.message
    other = lab04.exercise.result(dict)
    assert other.verdict is Verdict.INCORRECT and "the check got dict" in other.message


def test_lab04_stale_error_evidence_names_both_tokens():
    result = lab04.exercise.result(SwappedTokens)
    assert "(token=3, current=4); it said token=4, current=3 (seed 1)" in result.message


@pytest.mark.parametrize("label", [c for c in lab04.CONTROLS if c != "store_token_check"])
def test_lab04_each_wrong_control_says_why_it_cannot_reject(label):
    result = lab04.knowledge.result(lambda: label)
    assert result.verdict is Verdict.INCORRECT
    assert result.message.startswith(f"{label!r} does not reject")
    assert "store_token_check" not in result.message


def test_lab04_the_store_token_check_is_the_control():
    assert lab04.knowledge.result(lambda: "store_token_check").verdict is Verdict.CORRECT
    assert lab04.knowledge.result(stub).verdict is Verdict.NOT_ATTEMPTED
    unknown = lab04.knowledge.result(lambda: "the store")
    assert unknown.verdict is Verdict.INCORRECT and "one of the labels in lab04.CONTROLS" in unknown.message
    with pytest.raises(AssertionError, match="does not reject"):
        lab04.knowledge.grade(lambda: "lease_expiry")


# --------------------------------------------------------------------------- the notebooks


@pytest.mark.parametrize("path, checks", [
    (LAB03, [(lab03.exercise, "choose_policy")]),
    (LAB04, [(lab04.exercise, "FencedResultStore"), (lab04.knowledge, "rejecting_control")]),
], ids=["lab03", "lab04"])
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
