"""The learner checks of lab 07: a backpressure policy judged by playing burst day, and
which pieces make up the contract that survives a crash.

Each wrong policy is one a learner plausibly writes (no backpressure at all, shedding bulk
while intake still floods the gateway, shedding for good, approvals only, everyone waits
when p95 is high, a p95-only throttle, waiting for ever); the tests prove the check calls
each one incorrect and that its message names what went wrong with the run's numbers and
seed, never the answer. Sound policies of different shapes pass. The last test runs the
checks against the real notebooks: the master's answers pass, the student's stubs read as
"not attempted".
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from notebook_answers import answers

from shopops_lab.backpressure import BackpressurePolicy, NoBackpressure, acquire, wait
from shopops_lab.checks import lab07
from shopops_lab.checks.base import Verdict
from shopops_lab.course.build import build_student
from shopops_lab.worker.queue import Priority

ROOT = Path(__file__).resolve().parent.parent
LAB07 = ROOT / "solutions" / "07_burst_day.ipynb"
CAPACITY = 10


def stub(*args, **kwargs):
    raise NotImplementedError()


# --------------------------------------------------------------------------- policies a learner writes

def cap_at_capacity(signals):
    return acquire(max_priority=Priority.APPROVAL) if signals.in_flight >= CAPACITY else acquire()


def wait_when_full(signals):
    return wait(2) if signals.in_flight >= CAPACITY else acquire()


def cap_with_bulk_shed(signals):
    if signals.in_flight >= CAPACITY:
        return acquire(max_priority=Priority.APPROVAL)
    if signals.gateway_p95 > 40:
        return acquire(max_priority=Priority.NORMAL)
    return acquire()


def shed_bulk_when_full(signals):
    """Sheds bulk at capacity, but intake still takes every free slot."""
    return acquire(max_priority=Priority.NORMAL) if signals.in_flight >= CAPACITY else acquire()


def shed_bulk_while_deep(signals):
    """Sheds bulk while the queue is long; after intake, the queue is bulk, so for ever."""
    return acquire(max_priority=Priority.NORMAL) if signals.depth > 500 else acquire()


def approvals_only(signals):
    return acquire(max_priority=Priority.APPROVAL)


def stop_the_world(signals):
    return wait(5) if signals.gateway_p95 > 40 else acquire()


def approvals_only_when_slow(signals):
    return acquire(max_priority=Priority.APPROVAL) if signals.gateway_p95 > 45 else acquire()


def always_wait(signals):
    return wait(1)


def forgets_to_return(signals):
    if signals.in_flight >= CAPACITY:
        return acquire(max_priority=Priority.APPROVAL)


def returns_the_function(signals):
    return acquire


def divides_by_in_flight(signals):
    return acquire() if 100 / (signals.in_flight) else wait(1)


def refuses_later(signals):
    return acquire() if signals.now < 60 else "acquire"


# --------------------------------------------------------------------------- exercise 7.1

@pytest.mark.parametrize("policy", [cap_at_capacity, wait_when_full, cap_with_bulk_shed,
                                    BackpressurePolicy(p95_budget=40, p95_hard=60, max_in_flight=10)],
                         ids=["cap", "wait-when-full", "cap-and-shed-bulk", "kit-policy"])
def test_sound_policies_of_different_shapes_are_correct(policy):
    result = lab07.exercise.result(policy)
    assert result.verdict is Verdict.CORRECT, str(result)
    assert "in 3 burst days (3,000 items, seeds 3, 5, 8" in result.message
    assert "no customer was contacted twice" in result.message


@pytest.mark.parametrize("policy, expected", [
    (NoBackpressure(), ["incorrect. the gateway melted: 46 model calls timed out (limit 15)",
                        "with up to 22 calls in flight on a gateway that serves 10 at full speed",
                        "(seed 3, 3,000 items)", "✗ gateway:   46 of 3,066 calls timed out",
                        "replay the whole run: run('burst_day', seed=3, items=3000, policy=NoBackpressure())"]),
    (shed_bulk_when_full, ["the gateway melted: 45 model calls timed out (limit 15)", "up to 20 calls in flight",
                           "(seed 3, 3,000 items)"]),
    (shed_bulk_while_deep, [("work left undone: by the end of the day (t=21,600 s) 1,228 of 3,000 items were "
                             "never finished, done so far: bulk outreach 0 of 1,228 (0%)"),
                            "also: the gateway melted", "print(lab07.trial(shed_bulk_while_deep, seed=3))"]),
    (approvals_only, ["work left undone", "bulk outreach 0 of 1,228 (0%), intake 0 of 1,638 (0%)",
                      "✓ approvals: 134 done"]),
    (stop_the_world, [("approvals starved: their p95 from arrival to done was 382 s, over the 90 s budget "
                       "(the slowest, case O-3958, took 518 s), while 1,226 bulk outreach items were finished "
                       "during those overdue waits (seed 3, 3,000 items)"),
                      "also: too slow: the last item was settled at t=10,888 s (3 h 01 min)"]),
    (approvals_only_when_slow, [("too slow: the last item was settled at t=7,467 s (2 h 04 min), past the limit "
                                 "of t=5,400 s (1 h 30 min); on average only 6.6 model calls were in flight "
                                 "although the gateway serves 10 at full speed")]),
    (always_wait, ["the workers kept waking up without getting work done: the run was stopped at t=10,200 s",
                   "with 3,000 items unfinished (seed 3, 3,000 items)", "✗ approvals: 0 done, 134 unfinished"]),
], ids=["no-backpressure", "shed-bulk-at-capacity", "shed-bulk-for-good", "approvals-only", "stop-the-world",
        "p95-only", "always-wait"])
def test_each_plausible_wrong_policy_is_named_with_its_numbers(policy, expected):
    result = lab07.exercise.result(policy)
    assert result.verdict is Verdict.INCORRECT
    text = str(result)
    for phrase in expected:
        assert phrase in text, text
    assert "in_flight >=" not in text and "max_priority=Priority.APPROVAL" not in text   # never the answer


@pytest.mark.parametrize("policy, expected", [
    (forgets_to_return, "your policy returned None for Signals(gateway_p95=0.0, depth=3000, in_flight=0, now=0.0)"),
    (returns_the_function, "your policy returned the function acquire for Signals("),
    (divides_by_in_flight, "your policy raised ZeroDivisionError: division by zero when a worker asked it at t=0"),
    (refuses_later, "during burst day (seed 3) your policy was refused: policy returned 'acquire'. Fix: return"),
    (acquire(), "the check got Decision(max_priority=None, wait_seconds=0.0, reason=''); pass the policy function"),
], ids=["returns-none", "returns-function", "raises", "bad-return-later", "a-decision-not-a-policy"])
def test_broken_policies_are_explained_before_or_during_the_day(policy, expected):
    result = lab07.exercise.result(policy)
    assert result.verdict is Verdict.INCORRECT
    assert expected in result.message, result.message
    assert " at 0x" not in str(result)   # no memory addresses


def test_grade_is_silent_when_correct_and_raises_the_message_otherwise():
    assert lab07.exercise.grade(cap_at_capacity) is None
    with pytest.raises(AssertionError, match=r"incorrect\. the gateway melted: 46 model calls timed out"):
        lab07.exercise.grade(NoBackpressure())


def test_the_stub_is_not_attempted():
    assert lab07.exercise.result(stub).verdict is Verdict.NOT_ATTEMPTED
    assert lab07.exercise.result(None).verdict is Verdict.NOT_ATTEMPTED
    with pytest.raises(AssertionError, match="not attempted"):
        lab07.exercise.grade(stub)


def test_trial_shows_every_measurement_against_its_limit():
    day = lab07.trial(cap_at_capacity, seed=3)
    assert day.problems() == []
    text = str(day)
    assert text.splitlines()[0] == "burst day, seed 3, 3,000 items, policy cap_at_capacity"
    assert "✓ work:      all 3,000 settled (2,998 done, 2 dead-lettered), the last at t=3,200 s (limit 5,400 s)" in text
    assert "✓ approvals: 134 done, p95 41 s from arrival to done (limit 90 s)" in text
    assert "✓ gateway:   2 of 3,021 calls timed out (limit 15)" in text
    assert "✓ customers: 0 double contacts" in text
    assert "replay: run('burst_day', seed=3, items=3000, policy=cap_at_capacity)" in text
    assert str(lab07.trial(cap_at_capacity, seed=3)) == text   # the same day, replayed from its seed


def test_stricter_limits_turn_a_sound_day_into_named_problems():
    strict = lab07.Limits(approval_p95=30, timeouts=1, finish_by=3000)
    problems = lab07.trial(cap_at_capacity, seed=3, limits=strict).problems()
    assert [p.split(":")[0] for p in problems] == ["approvals starved", "the gateway melted", "too slow"]


# --------------------------------------------------------------------------- exercise 7.2

def test_the_four_pieces_are_the_contract_in_any_collection():
    for shape in (set, frozenset, list, tuple):
        result = lab07.knowledge.result(lambda shape=shape: shape(sorted(lab07.CONTRACT)))
        assert result.verdict is Verdict.CORRECT, str(result)
    assert lab07.knowledge.grade(lambda: set(lab07.CONTRACT)) is None


@pytest.mark.parametrize("extra", sorted(set(lab07.PIECES) - lab07.CONTRACT))
def test_each_distractor_is_explained(extra):
    result = lab07.knowledge.result(lambda: set(lab07.CONTRACT) | {extra})
    assert result.verdict is Verdict.INCORRECT
    assert result.message.startswith(f"{extra!r} is not part of the contract: ")


@pytest.mark.parametrize("missing, lab", [("at_least_once_delivery", "lab 01"), ("idempotency_keys", "lab 01"),
                                          ("fencing_tokens", "lab 04"), ("checkpoints", "lab 05")])
def test_a_missing_piece_is_described_by_what_goes_wrong_without_it(missing, lab):
    result = lab07.knowledge.result(lambda: set(lab07.CONTRACT) - {missing})
    assert result.verdict is Verdict.INCORRECT
    assert result.message.startswith("1 piece is missing: without it, ") and f"({lab})" in result.message
    assert missing not in result.message


def test_the_contract_rejects_wrong_shapes_and_unknown_labels():
    assert lab07.knowledge.result(stub).verdict is Verdict.NOT_ATTEMPTED
    text = lab07.knowledge.result(lambda: "checkpoints").message
    assert "returned 'checkpoints'; return a set of labels" in text
    unknown = lab07.knowledge.result(lambda: {"fencing", "checkpoints"}).message
    assert unknown.startswith("'fencing' is not among the labels; use the keys of lab07.PIECES: at_least_once_delivery")
    two = lab07.knowledge.result(lambda: {"fencing_tokens", "checkpoints"}).message
    assert two.startswith("2 pieces are missing. One of them: without it, ")


# --------------------------------------------------------------------------- the notebooks


def test_master_answers_pass_and_student_stubs_are_not_attempted(capsys):
    master = nbformat.read(LAB07, as_version=4)
    graded = [c.source for c in master.cells if c.metadata["nbgrader"]["grade"] and c.cell_type == "code"]
    checks = [(lab07.exercise, "my_policy"), (lab07.knowledge, "the_contract")]
    assert len(graded) == len(checks)
    solved, pristine = answers(master), answers(build_student(master))
    capsys.readouterr()  # the set-up cell prints its settings
    for exercise, name in checks:
        assert any(f"grade({name})" in g for g in graded)
        assert exercise.result(solved[name]).verdict is Verdict.CORRECT
        assert exercise.result(pristine[name]).verdict is Verdict.NOT_ATTEMPTED
