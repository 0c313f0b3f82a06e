"""The learner checks of labs 05 and 06: the masters' answers pass, the pristine student
stubs are "not attempted", the runner sees only what a worker can, and lab 06's replay
tells a scenario's story (the dispatcher's and the consumer's). Right and wrong answers:
tests/test_check_accuracy_lab05.py, _lab06.py."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

from shopops_lab.checks import lab05, lab06
from shopops_lab.checks.base import Verdict
from shopops_lab.course.build import build_student
from shopops_lab.errors import ShopOpsError

SOLUTIONS = Path(__file__).resolve().parent.parent / "solutions"
LAB05 = SOLUTIONS / "05_checkpoints_and_receipts.ipynb"
LAB06 = SOLUTIONS / "06_outbox.ipynb"


def answer_from(path: Path, grade_id: str, name: str, *, student: bool = False):
    """The function an answer cell defines, after the notebook's set-up cell ran: the
    master's answer, or (student=True) the stub the generated student notebook holds."""
    nb = nbformat.read(path, as_version=4)
    if student:
        nb = build_student(nb)
    source = {cell.metadata["nbgrader"]["grade_id"]: cell.source for cell in nb.cells}
    namespace: dict = {}
    exec(compile(source["setup"], f"{path.name}:setup", "exec"), namespace)
    exec(compile(source[grade_id], f"{path.name}:{grade_id}", "exec"), namespace)
    return namespace[name]


# ---------------------------------------------------------------------- lab 05: verdicts
def test_lab05_master_answer_is_correct():
    run = answer_from(LAB05, "receipt-run", "run")
    result = lab05.exercise.result(run)
    assert result.verdict is Verdict.CORRECT, str(result)
    assert result.message.startswith(
        "checked all 1,098 schedules of 2 workers, a crash at any kit call, a lease "
        "expiry, a duplicate delivery and up to 3 deliveries, in 5 settings"
    )
    assert lab05.exercise.grade(run) is None


def test_lab05_pristine_stub_is_not_attempted(capsys):
    stub = answer_from(LAB05, "receipt-run", "run", student=True)
    with pytest.raises(NotImplementedError):
        stub("O-1001", None)
    assert lab05.exercise.result(stub).verdict is Verdict.NOT_ATTEMPTED
    lab05.exercise.check(stub)
    assert "not attempted" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="not attempted"):
        lab05.exercise.grade(stub)


def test_lab05_the_runner_gets_a_workers_view_of_the_env():
    """What a real worker cannot see is not handed to the runner: no inbox, no ledger, no log."""
    seen, master = {}, answer_from(LAB05, "receipt-run", "run")

    def looks_around(job_id, env):  # writes to the test's own record: a restart would wipe its memory
        seen = sys.modules[__name__].__dict__.setdefault("SEEN_BY_THE_RUNNER", {})
        seen["env"], seen["store"] = type(env).__name__, type(env.checkpoints).__name__
        for name in ("adapter", "deliveries", "effects", "trace", "log"):
            seen[name] = hasattr(env, name)
        seen["store log"] = hasattr(env.checkpoints, "log")
        return master(job_id, env)

    assert lab05.exercise.result(looks_around).correct
    seen = sys.modules[__name__].__dict__.pop("SEEN_BY_THE_RUNNER")
    assert seen.pop("env") in ("WorkerEnv", "_GatedEnv")  # the explorer's worker env is a WorkerEnv too
    assert seen.pop("store") in ("_WorkerCheckpoints", "_GatedCheckpoints")
    assert seen == {
        "adapter": False,
        "deliveries": False,
        "effects": False,
        "trace": False,
        "log": False,
        "store log": False,
    }


def test_lab05_exploration_replays_a_setting_as_the_check_ran_it():
    run = answer_from(LAB05, "receipt-run", "run")
    report = lab05.exploration(run, faults=["lose_request"])
    assert report.passed and report.runner == "run"
    assert report.invariants[-1] == "returns_message_id"
    assert any("send publish O-1001:publish:v1 -> unknown" in line for row in report.results for line in row.trace)


# ---------------------------------------------------------------------- lab 06
def applies_everything(delivery, processed, apply):
    apply(delivery)
    return True


def test_lab06_master_answer_is_correct():
    handle = answer_from(LAB06, "idempotent-handle", "handle")
    result = lab06.exercise.result(handle)
    assert result.verdict is Verdict.CORRECT, str(result)
    assert result.message.startswith("checked all 4,368 schedules of 2 consumers")
    assert lab06.exercise.grade(handle) is None


def test_lab06_pristine_stub_is_not_attempted():
    stub = answer_from(LAB06, "idempotent-handle", "handle", student=True)
    assert lab06.exercise.result(stub).verdict is Verdict.NOT_ATTEMPTED


def test_lab06_replay_tells_the_story_and_is_deterministic():
    handle = answer_from(LAB06, "idempotent-handle", "handle")
    schedule = (
        "C1 handle · C1 crash · C2 handle (apply times out) · C1 handle · C1 ack · C2 handle · C2 ack · a day later, "
        "the DLQ is replayed · C1 handle"
    )
    story = str(lab06.replay(handle, schedule))
    assert story == str(lab06.replay(handle, schedule))
    assert story.splitlines() == [
        "1. C1 takes #1 out-0001, handle returns True: refund paid",
        "2. C1's process dies; the broker delivers out-0001 again as #3",
        "3. C2 takes #2 out-0002: apply timed out after the provider paid, handle raises ConnectionError; the broker "
        "delivers out-0002 again as #4",
        "4. C1 takes #3 out-0001, handle returns False",
        "5. C1 acks #3",
        "6. C2 takes #4 out-0002, handle returns True: the provider knew the key and paid nothing more",
        "7. C2 acks #4",
        "8. a day later the payments provider has pruned its keys, and a DLQ replay delivers out-0001 again as #5",
        "9. C1 takes #5 out-0001, handle returns False",
        "nothing broken so far (the schedule stops before the end).",
    ]
    with pytest.raises(ShopOpsError, match="made no such kit call"):
        lab06.replay(
            handle,
            "C1 handle · C1 ack · C1 handle · C1 ack · a day later, the DLQ is replayed · C1 handle (apply fails)",
        )  # #3 is skipped: no apply to fail
    assert lab06.replay(
        applies_everything, "C1 handle · C1 ack · C1 handle · C1 ack · a day later, the DLQ is replayed · C1 handle"
    ).problem.startswith(
        "out-0001 (refund 35.00 for O-1001) was paid twice: by delivery #1 and again by #3, a day later"
    )


def test_lab06_master_dispatcher_is_correct_and_its_stub_not_attempted():
    dispatch = answer_from(LAB06, "outbox-dispatch", "dispatch")
    result = lab06.dispatcher.result(dispatch)
    assert result.verdict is Verdict.CORRECT, str(result)
    assert result.message.startswith("checked all 137 schedules of 1 dispatcher")
    assert lab06.dispatcher.grade(dispatch) is None
    stub = answer_from(LAB06, "outbox-dispatch", "dispatch", student=True)
    assert lab06.dispatcher.result(stub).verdict is Verdict.NOT_ATTEMPTED


def test_lab06_dispatch_replay_tells_a_crash_between_publish_and_mark():
    dispatch = answer_from(LAB06, "outbox-dispatch", "dispatch")
    story = str(
        lab06.replay_dispatch(dispatch, "D1 dispatch (crash after broker.publish) · app commits out-0002 · D1 dispatch")
    )
    assert story.splitlines() == [
        "1. D1 dispatch: D1's process dies (crash after broker.publish); in pass 1 it publishes out-0001 before "
        "dying; the next pass starts a fresh process",
        "2. the application commits out-0002 (order.closed for O-1001) with its state change",
        "3. D1 dispatch pass 2: publishes out-0001, marks out-0001 sent, publishes out-0002, marks out-0002 sent",
        "nothing broken.",
    ]
