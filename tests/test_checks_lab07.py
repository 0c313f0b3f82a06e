"""The learner checks of lab 07: how a burst day is measured and shown, the seeded gateway
spikes, the rules asked directly, and the contract's messages; and the real notebooks (the
master's answers pass, the student's stubs read as "not attempted"). Right and wrong
policies: tests/test_check_accuracy_lab07.py.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from functools import cache
from pathlib import Path

import nbformat
import pytest
from notebook_answers import answers

from shopops_lab.backpressure import acquire
from shopops_lab.checks import lab07
from shopops_lab.checks.base import Verdict, Wrong
from shopops_lab.course.build import build_student
from shopops_lab.sim.faults import FaultKind
from shopops_lab.worker.queue import Priority

ROOT = Path(__file__).resolve().parent.parent
LAB07 = ROOT / "solutions" / "07_burst_day.ipynb"
CAPACITY = 10
CONTRACT = frozenset({"at_least_once_delivery", "idempotency_keys", "fencing_tokens", "checkpoints"})
PROVEN_SEEDS = range(1, 14)  # thirteen days: the graded ones and ten more


def stub(*args, **kwargs):
    raise NotImplementedError()


def cap_at_capacity(signals):
    return acquire(max_priority=Priority.APPROVAL) if signals.in_flight >= CAPACITY else acquire()


@cache
def day_of(seed):
    """One burst day under the master's policy, played once per test session (warm state
    shared by the tests that read it)."""
    return lab07.trial(cap_at_capacity, seed=seed)


def test_the_stub_is_not_attempted_and_a_policy_that_calls_a_stub_is_incorrect():
    assert lab07.exercise.result(stub).verdict is Verdict.NOT_ATTEMPTED
    with pytest.raises(AssertionError, match="not attempted"):
        lab07.exercise.grade(stub)
    deeper = lab07.exercise.result(lambda signals: stub(signals))
    assert deeper.verdict is Verdict.INCORRECT and "raised NotImplementedError when a worker asked" in deeper.message


def test_each_graded_day_has_a_spike_of_its_own_and_the_same_seed_the_same_spike():
    def spike(seed):
        (found,) = [f for f in lab07.burst_day(seed).faults if f.kind is FaultKind.GATEWAY_SPIKE]
        return found.at, found.duration, found.factor

    spikes = [spike(seed) for seed in lab07.SEEDS]
    for n in range(2):  # the start and the length each differ between the graded days
        assert len({s[n] for s in spikes}) == len(lab07.SEEDS), spikes
    assert len({s[2] for s in spikes}) > 1, spikes  # and not all are as strong
    assert spikes[0] == (900.0, 900.0, 4.0)  # the notebook's seed is the story's day: 4x from t=900 s for 900 s
    assert spike(5) == spike(5)
    assert lab07.burst_day(3).rates == lab07.get_scenario("burst_day").rates  # the chaos stays


def test_the_rules_are_asked_on_a_grid_in_three_orders():
    asked = []

    def listens(signals):
        asked.append(signals)
        raise KeyError("enough")

    assert lab07._rules(cap_at_capacity) == 3 * len(lab07._grid())
    with pytest.raises(Wrong, match="KeyError: 'enough' when the check asked about the rules"):
        lab07._rules(listens)
    assert asked == lab07._grid()[:1]


def test_trial_shows_every_measurement_against_its_limit_and_limits_name_each_problem():
    day = day_of(3)
    assert day.problems() == []
    text = str(day)
    assert text.splitlines()[0] == (
        "burst day, seed 3, 3,000 items, policy cap_at_capacity, gateway spike 4x slower from t=900 s for 900 s"
    )
    assert "✓ work:      all 3,000 settled (2,998 done, 2 dead-lettered), the last at t=3,200 s (limit 5,400 s)" in text
    assert "✓ approvals: 134 done, p95 41 s from arrival to done (limit 120 s)" in text
    assert "✓ gateway:   2 of 3,021 calls timed out (limit 15)" in text
    assert "✓ customers: 0 double contacts" in text
    assert "replay: run(lab07.burst_day(3), seed=3, items=3000, policy=cap_at_capacity)" in text
    assert str(lab07.trial(cap_at_capacity, seed=3)) == text  # the same day, replayed from its seed
    strict = lab07.Limits(approval_p95=30, timeouts=1, finish_by=3000)
    problems = dataclasses.replace(day, limits=strict).problems()
    assert [p.split(":")[0] for p in problems] == ["the gateway melted", "approvals late", "too slow"]


def test_a_number_just_over_its_limit_never_reads_as_the_limit():
    over = dataclasses.replace(day_of(3), approval_p95=120.04, finished_at=5400.4)
    problems = over.problems()
    assert "their p95 from arrival to done was 120.04 s, over the 120 s limit" in problems[0]
    assert "the last item was settled at t=5,400.4 s" in problems[1]
    assert "p95 120.04 s from arrival to done (limit 120 s)" in over.lines()[1]
    assert lab07._past(89.6, 90) == "90" and lab07._past(121.2, 90) == "121"


def test_the_timed_out_calls_come_first_whatever_else_broke():
    melted = dataclasses.replace(
        day_of(3),
        timeouts=40,
        approval_p95=300.0,
        finished_at=6000.0,
        kinds={**day_of(3).kinds, "bulk_outreach": (1, 1228)},
    )
    problems = melted.problems()
    assert problems[0].startswith("the gateway melted: 40 model calls timed out (limit 15)")
    assert [p.split(":")[0] for p in problems[1:]] == ["work left undone", "approvals late"]


def test_a_day_asks_the_policy_once_per_distinct_signals():
    """A pure policy's answer is remembered by value: a repeat costs no call (in the grader,
    no crossing to the learner's process). A policy that is not pure is asked again after
    the day (tests/test_check_accuracy_lab07.py: counts_its_calls)."""
    asked = Counter()

    def counting(signals):
        asked[signals] += 1
        return cap_at_capacity(signals)

    assert lab07.trial(counting, seed=3).lines() == day_of(3).lines()
    assert set(asked.values()) == {1} and len(asked) > 5000


def test_the_check_states_what_it_covers():
    result = lab07.exercise.result(cap_at_capacity)
    assert result.correct and result.message.startswith(f"checked {lab07.scope()}. ")
    assert "270 signals" in lab07.scope() and "seeds 3, 9, 13" in lab07.scope()
    assert lab07.STARVED_AFTER == lab07.get_scenario("burst_day").approval_wait_budget  # one definition


@pytest.mark.parametrize("seed", PROVEN_SEEDS)
def test_the_masters_policy_keeps_every_limit_on_every_seed_with_room_to_spare(seed):
    """The graded seeds are three of these; a right policy must pass whichever it meets.
    Room: approvals within 90% of their budget, timeouts within two thirds of theirs."""
    day = day_of(seed)
    assert day.problems() == [], str(day)
    assert day.approval_p95 <= 0.9 * lab07.LIMITS.approval_p95, str(day)
    assert day.timeouts <= 2 * lab07.LIMITS.timeouts / 3, str(day)
    assert set(lab07.SEEDS) <= set(PROVEN_SEEDS)


# --------------------------------------------------------------------------- exercise 7.2


def test_the_four_pieces_are_the_contract_in_any_collection():
    for shape in (set, frozenset, list, tuple):
        result = lab07.knowledge.result(lambda shape=shape: shape(sorted(CONTRACT)))
        assert result.verdict is Verdict.CORRECT, str(result)
    assert lab07.knowledge.grade(lambda: set(CONTRACT)) is None
    assert not hasattr(lab07, "CONTRACT")  # no answer in reach


@pytest.mark.parametrize("extra", sorted(set(lab07.PIECES) - CONTRACT))
def test_each_distractor_is_explained(extra):
    result = lab07.knowledge.result(lambda: set(CONTRACT) | {extra})
    assert result.verdict is Verdict.INCORRECT
    assert result.message.startswith(f"{extra!r} is not part of the contract: ")


@pytest.mark.parametrize("missing", sorted(CONTRACT))
def test_a_missing_piece_is_described_by_what_goes_wrong_without_it_never_named(missing):
    result = lab07.knowledge.result(lambda: set(CONTRACT) - {missing})
    assert result.verdict is Verdict.INCORRECT
    assert result.message.startswith("1 piece is missing: without it, ")
    named = {missing, *missing.split("_"), "lab 0"} - {"at", "least", "once"}  # nor the lab whose title names it
    assert not [word for word in named if word in result.message], result.message


def test_the_contract_rejects_wrong_shapes_and_unknown_labels():
    assert lab07.knowledge.result(stub).verdict is Verdict.NOT_ATTEMPTED
    text = lab07.knowledge.result(lambda: "checkpoints").message
    assert "returned the str 'checkpoints'; return a set of labels" in text
    unknown = lab07.knowledge.result(lambda: {"fencing", "checkpoints"}).message
    assert unknown.startswith("'fencing' is not among the labels; use the keys of lab07.PIECES: at_least_once_delivery")
    two = lab07.knowledge.result(lambda: {"fencing_tokens", "checkpoints"}).message
    assert two.startswith("2 pieces are missing. One of them: without it, ")


# --------------------------------------------------------------------------- the notebooks


def test_master_answers_pass_and_student_stubs_are_not_attempted(capsys):
    master = nbformat.read(LAB07, as_version=4)
    graded = [c.source for c in master.cells if c.metadata["nbgrader"]["grade"] and c.cell_type == "code"]
    checks = [
        (lab07.exercise, "my_policy"),
        (lab07.knowledge, "the_contract"),
        (lab07.chaos, "assert_no_double_contact"),
        (lab07.vitals, "vital_signs"),
        (lab07.invent, "MyChaosTest"),
    ]
    assert len(graded) == len(checks)
    solved, pristine = answers(master), answers(build_student(master))
    capsys.readouterr()  # the set-up cell prints its settings
    for exercise, name in checks:
        assert any(f"grade({name})" in g for g in graded)
        assert exercise.result(solved[name]).verdict is Verdict.CORRECT
        assert exercise.result(pristine[name]).verdict is Verdict.NOT_ATTEMPTED
