"""The crash explorer: every crash point a runner passes, restarted, checked.

The receipt runner passes every point; the naive runner fails exactly where a side
effect happened but its checkpoint was not written. A function written the way lab 05
asks (`run(job_id, env)`) is checked the same way."""

from __future__ import annotations

import sys

import pytest

from shopops_lab.checkpoint import Checkpoint, Receipt, Step, Workflow
from shopops_lab.crash import DEFAULT_INVARIANTS, ExplorationReport, Invariant, explore
from shopops_lab.effects import ProviderFault, SendStatus
from shopops_lab.errors import BadArgumentError, EffectFailedError, ShopOpsError
from shopops_lab.recovery import CrashPoint, Env, NaiveCheckpointRunner, ReceiptRunner

ALL_POINTS = [
    "(no crash)",
    "before_effect(fetch)",
    "after_effect(fetch)",
    "after_checkpoint(fetch)",
    "before_effect(summarize)",
    "after_effect(summarize)",
    "after_checkpoint(summarize)",
    "after_intent(publish)",
    "before_effect(publish)",
    "after_effect(publish)",
    "after_checkpoint(publish)",
    "before_ack",
    "after_ack",
]
INVARIANTS = ["effect_exactly_once", "artifacts_reused", "plan_version_kept", "completed", "no_blind_resend"]


def learners_run(job_id, env):
    """What a lab 05 answer looks like: receipt-based recovery as a plain function."""
    token = env.claim(job_id)
    cp = env.resume(job_id)
    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if not step.effect:
            cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)
            continue
        op = cp.op_for(step.id) or env.op_id(job_id, step.id)
        outcome = env.lookup(op) if op in cp.intents else None
        if outcome is None:
            cp = env.checkpoints.save(job_id, cp.intend(op, step.id), token=token)
        if outcome is None or outcome.status is SendStatus.FAILED:
            outcome = env.send(job_id, step.id, op, body=cp.artifacts["summarize"])
        if outcome.status is SendStatus.UNKNOWN:
            outcome = env.lookup(op)
        if outcome.status is not SendStatus.OK:
            raise EffectFailedError(step=step.id, job_id=job_id, status=outcome.status.value, op_id=op)
        receipt = Receipt(op_id=op, step=step.id, message_id=outcome.message_id)
        cp = env.checkpoints.save(job_id, cp.receive(receipt).confirm(step.id, receipt.message_id), token=token)
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    return cp.artifacts["publish"]


def failing(report: ExplorationReport) -> dict[str, list[str]]:
    return {row.label: sorted(row.violations) for row in report.failures}


# ---------------------------------------------------------------------- the two runners
def test_receipt_runner_passes_every_crash_point():
    report = explore(ReceiptRunner())
    assert [row.label for row in report.results] == ALL_POINTS
    assert report.passed and report.failures == () and report.first_failure is None
    assert report.invariants == tuple(INVARIANTS)
    assert all(all(row.held.values()) for row in report.results)
    assert str(report).endswith(f"all {len(ALL_POINTS)} rows passed.")


def test_naive_runner_fails_exactly_between_the_publish_and_its_checkpoint():
    report = explore(NaiveCheckpointRunner())
    assert "after_intent(publish)" not in [row.label for row in report.results]  # it records no intents
    assert failing(report) == {"after_effect(publish)": ["effect_exactly_once"]}
    first = report.first_failure
    assert first.point == CrashPoint.after_effect("publish")
    assert first.violations["effect_exactly_once"] == "publish reached the customer 2 times (msg-0001, msg-0002)"
    assert first.outcomes == (
        "run 1 crashed at after_effect(publish)",
        "run 2 returned 'msg-0002'",
        "run 3 returned 'msg-0002'",
    )
    trace = list(first.trace)
    crash_at = trace.index("CRASH at after_effect(publish)")
    assert trace[crash_at - 1] == "send publish O-1001:publish:try-1 -> ok msg-0001"
    assert "send publish O-1001:publish:try-2 -> ok msg-0002" in trace[crash_at:]
    text = str(report)
    assert "1 of 12 rows broke an invariant:" in text
    assert "trace of the first failure, after_effect(publish):" in text
    assert "  CRASH at after_effect(publish)" in text


def test_the_table_has_one_fixed_width_row_per_point():
    report = explore(NaiveCheckpointRunner())
    lines = report.table().splitlines()
    assert lines[0].split() == ["crash", "point", *INVARIANTS]
    assert set(lines[1]) == {"-", " "}
    row = next(line for line in lines if line.startswith("after_effect(publish)"))
    assert row.split() == ["after_effect(publish)", "FAIL", "ok", "ok", "ok", "ok"]
    column = lines[0].index("effect_exactly_once")
    assert all(line[column : column + 4] in ("ok  ", "FAIL") for line in lines[2:])


# ---------------------------------------------------------------------- unknown outcomes
def test_with_lost_replies_the_receipt_runner_reconciles_at_every_point():
    report = explore(ReceiptRunner(), faults=[ProviderFault.DROP_REPLY])
    assert report.passed and report.faults == ("drop_reply",)
    clean = report.result(None)
    assert "send publish O-1001:publish:v1 -> unknown" in clean.trace
    assert "lookup O-1001:publish:v1 -> ok msg-0001" in clean.trace
    assert "faults: drop_reply" in str(report)


def test_with_lost_replies_the_naive_runner_contacts_twice_everywhere():
    report = explore(NaiveCheckpointRunner(), faults=["drop_reply"])
    assert len(report.failures) == len(report.results)
    assert all(sorted(row.violations) == ["effect_exactly_once"] for row in report.failures)
    assert (
        report.result("after_effect(publish)#2")
        .violations["effect_exactly_once"]
        .startswith("publish reached the customer 3 times")
    )


# ---------------------------------------------------------------------- the learner's interface
def test_a_receipt_based_function_passes_like_the_runner():
    for faults in ((), (ProviderFault.DROP_REPLY,), (ProviderFault.FAIL,)):
        report = explore(learners_run, faults=faults)
        assert report.passed, str(report)
        assert report.runner == "learners_run"


def test_a_function_with_a_crash_at_parameter_works_too():
    def run(job_id, env, crash_at=None):
        return learners_run(job_id, env)

    assert explore(run).passed


def test_resending_under_the_same_key_is_caught_even_when_the_provider_dedupes():
    def resend_run(job_id, env):
        token = env.claim(job_id)
        cp = env.resume(job_id)
        for step in env.workflow.steps:
            if step.id in cp.completed:
                continue
            if step.effect:
                result = env.send(job_id, step.id, env.op_id(job_id, step.id), body="summary")
                artifact = result.message_id
            else:
                artifact = env.make(job_id, step.id)
            cp = env.checkpoints.save(job_id, cp.confirm(step.id, artifact), token=token)
        env.ack(job_id, token=token, result=cp.artifacts["publish"])
        return cp.artifacts["publish"]

    report = explore(resend_run)
    assert failing(report) == {"after_effect(publish)": ["no_blind_resend"]}
    assert report.first_failure.violations["no_blind_resend"] == (
        "O-1001:publish:v1 was sent again without looking it up first"
    )


def test_a_runner_that_redoes_confirmed_steps_breaks_artifacts_reused():
    def forgetful_run(job_id, env):
        token = env.claim(job_id)
        cp = env.resume(job_id)
        for step in env.workflow.steps:
            if step.effect and step.id in cp.completed:
                continue
            if step.effect:
                op = cp.op_for(step.id) or env.op_id(job_id, step.id)
                cp = env.checkpoints.save(job_id, cp.intend(op, step.id), token=token)
                outcome = env.send(job_id, step.id, op, body="summary")
                cp = cp.receive(Receipt(op_id=op, step=step.id, message_id=outcome.message_id))
                cp = cp.confirm(step.id, outcome.message_id)
            else:
                artifact = env.make(job_id, step.id)  # runs again even when confirmed
                cp = Checkpoint(
                    **{
                        **{f: getattr(cp, f) for f in Checkpoint.__dataclass_fields__},
                        "artifacts": {**cp.artifacts, step.id: artifact},
                        "completed": tuple(dict.fromkeys((*cp.completed, step.id))),
                    }
                )
            cp = env.checkpoints.save(job_id, cp, token=token)
        env.ack(job_id, token=token, result=cp.artifacts["publish"])
        return cp.artifacts["publish"]

    report = explore(forgetful_run)
    row = report.result("after_checkpoint(summarize)")
    assert row.violations["artifacts_reused"] == "fetch ran again after it was confirmed"
    assert "artifacts_reused" in report.result(None).violations  # the duplicate delivery redoes them too


def test_a_runner_that_rewrites_the_plan_version_breaks_plan_version_kept():
    def reinterpreting_run(job_id, env):
        token = env.claim(job_id)
        cp = env.checkpoints.load(job_id) or Checkpoint.start("v0-draft")
        for step in env.workflow.steps:
            if step.id not in cp.completed and not step.effect:
                cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)
        env.ack(job_id, token=token, result=None)

    report = explore(reinterpreting_run)
    row = report.result(None)
    assert row.violations["plan_version_kept"] == "a checkpoint was written under v0-draft, but the workflow is v1"
    assert row.violations["completed"] == (
        "the job was acknowledged with the checkpoint confirming only [fetch, "
        "summarize], and a queue never delivers an acknowledged job again: the rest "
        "is never done"
    )
    assert row.violations["effect_exactly_once"] == "publish reached the customer 0 times"


def test_a_runner_that_never_acks_is_not_completed():
    def silent_run(job_id, env):
        token = env.claim(job_id)
        cp = env.resume(job_id)
        for step in env.workflow.steps:
            if step.id not in cp.completed:
                if step.effect:
                    artifact = env.send(job_id, step.id, env.op_id(job_id, step.id)).message_id
                else:
                    artifact = env.make(job_id, step.id)
                cp = env.checkpoints.save(job_id, cp.confirm(step.id, artifact), token=token)

    row = explore(silent_run).result(None)
    assert row.violations == {"completed": "the job was never acknowledged"}


def test_a_runner_that_keeps_raising_is_reported_with_its_error():
    def broken_run(job_id, env):
        env.claim(job_id)
        raise KeyError("summarize")

    row = explore(broken_run).result(None)
    assert row.violations["completed"] == "the last run did not finish: run 3 raised KeyError: 'summarize'"
    assert row.outcomes == tuple(f"run {n} raised KeyError: 'summarize'" for n in (1, 2, 3))


def test_catching_refusals_lets_the_crash_through():
    def careful_run(job_id, env):  # catches the kit's refusals, as a worker should
        try:
            return ReceiptRunner()(job_id, env)
        except ShopOpsError:
            return "carried on"

    report = explore(careful_run)
    row = report.result("after_effect(publish)")
    assert "explorer" not in row.violations
    assert not any("caught the crash" in outcome for outcome in row.outcomes)


def test_swallowing_the_crash_is_reported():
    def swallowing_run(job_id, env):
        try:
            return ReceiptRunner()(job_id, env)
        except BaseException:  # noqa: BLE001 - the mistake under test: catching even a death
            return "carried on"

    report = explore(swallowing_run)
    row = report.result("after_effect(publish)")
    assert "run 1 caught the crash at after_effect(publish)" in row.violations["explorer"]
    assert row.outcomes[0] == "run 1 returned 'carried on' (after catching the crash)"
    assert "! run 1 caught the crash" in report.table()


def test_a_point_the_runner_no_longer_passes_is_reported():
    def moody_run(job_id, env):  # keeps a count outside its process (a crash cannot wipe it)
        calls = sys.modules[__name__].__dict__.setdefault("moody_calls", [])
        calls.append(job_id)
        if len(calls) == 1:
            env.checkpoints.save(job_id, Checkpoint.start(env.workflow.version), token=env.claim(job_id))
        return ReceiptRunner()(job_id, env)

    row = explore(moody_run).result("after_save")
    assert row.violations["explorer"] == "the runner never reached this point (is it deterministic?)"


# ---------------------------------------------------------------------- options and inputs
def test_custom_invariants_and_workflows():
    workflow = Workflow(
        version="v7", steps=[Step(id="draft"), Step(id="email", effect=True), Step(id="sms", effect=True)]
    )
    at_most_two = Invariant(
        name="two_contacts",
        about="the customer hears twice at most",
        check=lambda obs: None if len(obs.env.adapter.ledger) <= 2 else "too many",
    )

    def two_step_run(job_id, env):
        token = env.claim(job_id)
        cp = env.resume(job_id)
        for step in env.workflow.steps:
            if step.id in cp.completed:
                continue
            if step.effect:
                op = cp.op_for(step.id) or env.op_id(job_id, step.id)
                outcome = env.lookup(op) if op in cp.intents else None
                if outcome is None:
                    cp = env.checkpoints.save(job_id, cp.intend(op, step.id), token=token)
                if outcome is None or outcome.status is SendStatus.FAILED:
                    outcome = env.send(job_id, step.id, op, body=cp.artifacts["draft"])
                cp = cp.receive(Receipt(op_id=op, step=step.id, message_id=outcome.message_id))
                artifact = outcome.message_id
            else:
                artifact = env.make(job_id, step.id)
            cp = env.checkpoints.save(job_id, cp.confirm(step.id, artifact), token=token)
        env.ack(job_id, token=token, result=cp.artifacts["sms"])
        return cp.artifacts["sms"]

    report = explore(two_step_run, workflow, invariants=[*DEFAULT_INVARIANTS, at_most_two], job_id="O-2002")
    assert report.passed
    assert report.invariants[-1] == "two_contacts"
    assert "after_effect(sms)" in [row.label for row in report.results]
    assert "workflow v7 (draft, email*, sms*)" in str(report)
    assert "O-2002:email:v7" in "\n".join(report.result(None).trace)


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: explore("ReceiptRunner"), "run"),
        (lambda: explore(ReceiptRunner(), "v1"), "workflow"),
        (lambda: explore(ReceiptRunner(), job_id=""), "job_id"),
        (lambda: explore(ReceiptRunner(), invariants=[]), "invariants"),
        (lambda: explore(ReceiptRunner(), invariants=["effect_exactly_once"]), "invariants"),
        (lambda: explore(ReceiptRunner()).result("after_receipt(publish)"), "point"),
        (lambda: explore(ReceiptRunner()).result("after_lunch"), "kind"),
    ],
)
def test_bad_inputs_name_the_field(call, field):
    with pytest.raises(BadArgumentError) as err:
        call()
    assert err.value.field == field


@pytest.mark.parametrize("faults", [["meteor"], [None], 7])
def test_a_bad_fault_is_refused(faults):
    with pytest.raises(BadArgumentError) as err:
        explore(ReceiptRunner(), faults=faults)
    assert err.value.field == "faults" and "drop_reply" in str(err.value)


def test_exploration_is_deterministic():
    for runner in (NaiveCheckpointRunner(), ReceiptRunner()):
        for faults in ((), (ProviderFault.DROP_REPLY,)):
            first, second = explore(runner, faults=faults), explore(runner, faults=faults)
            assert str(first) == str(second)
            assert first.results == second.results
    assert repr(explore(NaiveCheckpointRunner())) == (
        "ExplorationReport(runner='NaiveCheckpointRunner', 12 rows, 1 failing)"
    )


def test_an_env_for_each_point_so_rows_do_not_leak_into_each_other():
    report = explore(ReceiptRunner())
    for row in report.results:
        assert sum("claim O-1001 -> token 1" == line for line in row.trace) == 1
        assert row.trace[0] == "--- run 1 ---"
    assert Env().adapter.ledger.contacts() == []


# ---------------------------------------------------------------------- a crash is a process death
IN_FLIGHT = {}  # module-level memory: gone when the worker's process dies


def remembers_in_memory(job_id, env):
    """Keeps the operation it started in a module-level dict instead of the checkpoint."""
    token = env.claim(job_id)
    cp = env.resume(job_id)
    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if not step.effect:
            cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)
            continue
        op = env.op_id(job_id, step.id)
        outcome = env.lookup(op) if op in IN_FLIGHT else None
        IN_FLIGHT[op] = step.id
        if outcome is None or outcome.status is SendStatus.FAILED:
            outcome = env.send(job_id, step.id, op, body=cp.artifacts["summarize"])
        if outcome.status is SendStatus.UNKNOWN:
            outcome = env.lookup(op)
        receipt = Receipt(op_id=op, step=step.id, message_id=outcome.message_id)
        cp = env.checkpoints.save(job_id, cp.receive(receipt).confirm(step.id, receipt.message_id), token=token)
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    return cp.artifacts["publish"]


def test_memory_kept_outside_the_checkpoint_does_not_survive_a_crash():
    report = explore(remembers_in_memory)
    assert failing(report) == {"after_effect(publish)": ["no_blind_resend"]}
    row = report.result("after_effect(publish)")
    assert row.violations["no_blind_resend"] == "O-1001:publish:v1 was sent again without looking it up first"
    assert IN_FLIGHT == {}  # the check ran copies: the learner's own dict was never touched


def test_an_acknowledged_job_is_never_delivered_again():
    def acks_then_works(job_id, env):
        token = env.claim(job_id)
        env.ack(job_id, token=token, result=None)
        learners_run(job_id, env)

    report = explore(acks_then_works)
    row = report.result("before_effect(publish)")
    assert row.outcomes == ("run 1 crashed at before_effect(publish)",)  # no run 2: the job was acked
    assert row.violations["effect_exactly_once"] == "publish reached the customer 0 times"
    assert row.violations["completed"].startswith(
        "the job was acknowledged with the checkpoint confirming only [fetch, summarize], and a queue never delivers"
    )
    assert "O-1001 was acknowledged: the queue does not deliver it again" in row.trace


# ---------------------------------------------------------------------- lab 05's schedules, replayed
def test_a_schedule_from_the_check_replays_step_by_step_and_draws():
    from shopops_lab.checks import lab05

    fine = lab05.replay(learners_run, "W1 runs O-1001 (crash after send) · O-1001's lease expires · W2 runs O-1001")
    assert fine.problem is None and fine.complete
    assert [step.actor for step in fine.steps] == ["W1", "queue", "W2"]
    assert fine.steps[0].crashed and "lookup O-1001:publish:v1 -> ok msg-0001" in fine.steps[2].said
    twice = lab05.replay(
        remembers_in_memory, "W1 runs O-1001 (crash after send) · O-1001's lease expires · W1 runs O-1001"
    )
    assert twice.problem.startswith("O-1001:publish:v1 was sent again without being looked up first")
    assert str(twice).splitlines()[-1].startswith("broken: O-1001:publish:v1 was sent again")
    assert twice.diagram() is not None


def test_a_duplicate_first_delivery_runs_on_both_workers_and_changes_nothing():
    from shopops_lab.checks import lab05

    both = lab05.replay(
        learners_run, "queue hands O-1001 to W1 and W2 · W1 runs O-1001 (duplicate) · W2 runs O-1001 (duplicate)"
    )
    assert both.problem is None and both.complete
    assert "skip" not in both.steps[2].said and "send" not in both.steps[2].said  # the second run repeats nothing


def test_after_an_ack_the_queue_offers_nothing_more():
    from shopops_lab.checks import lab05

    acked = lab05.replay(learners_run, "W1 runs O-1001 (crash after ack)")
    assert acked.problem is None and acked.complete  # done and acked: no lease to expire, no redelivery


def _worlds():
    from test_check_accuracy_lab06 import SPEC, remembers_in_its_own_memory

    from shopops_lab.checks import lab06, recovery_world

    lost_reply = recovery_world.scenario("a lost reply", (ProviderFault.DROP_REPLY,), "O-1001")
    return [
        (lost_reply, recovery_world.RecoveryWorld, learners_run, False),
        (lost_reply, recovery_world.RecoveryWorld, remembers_in_memory, True),
        (lab06.scenario(), lab06._Refunds, SPEC.right[0], False),
        (lab06.scenario(), lab06._Refunds, remembers_in_its_own_memory, True),
    ]


@pytest.mark.parametrize("case", range(4), ids=["05-right", "05-keeps-memory", "06-right", "06-keeps-memory"])
def test_mirror_states_are_searched_once_and_the_search_finds_the_same(case, monkeypatch):
    """Two workers (lab 05) or consumers (lab 06) run copies of the same answer on the same
    facades, so a state and its mirror image (W2 where W1 was) have mirrored futures:
    searched once, the count of schedules is the same, so is the shortest counterexample,
    through fewer states."""
    from shopops_lab.explore import explore as search

    scenario, world, answer, wrong = _worlds()[case]
    mirrored = search(scenario, answer)
    actors, fingerprint = world.alike, world.fingerprint
    monkeypatch.setattr(world, "alike", ())  # each actor by its name: its part in the fingerprint
    monkeypatch.setattr(world, "fingerprint", lambda it: (fingerprint(it), tuple(map(it.actor_print, actors))))
    named = search(scenario, answer)
    found = [None if e.counterexample is None else e.counterexample.words for e in (mirrored, named)]
    assert mirrored.schedules == named.schedules and found[0] == found[1] and (found[0] is not None) == wrong
    assert mirrored.states < named.states, (mirrored.states, named.states)
