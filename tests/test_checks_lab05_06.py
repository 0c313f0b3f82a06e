"""The learner checks of labs 05 and 06: the masters' answers pass, the pristine student
stubs are "not attempted", and plausible wrong answers are "incorrect" with a message
that names what went wrong (the crash point and invariant, the message and delivery)."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from shopops_lab.checkpoint import Checkpoint, Receipt
from shopops_lab.checks import lab05, lab06
from shopops_lab.checks.base import Verdict
from shopops_lab.course.build import build_student
from shopops_lab.effects import SendStatus
from shopops_lab.errors import EffectFailedError

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


# ---------------------------------------------------------------------- lab 05: wrong answers
def one_key_per_attempt(job_id, env):
    """The lesson's loop: do the step, then checkpoint it; the key names the attempt."""
    token = env.claim(job_id)
    cp = env.resume(job_id)
    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if step.effect:
            artifact = env.send(job_id, step.id, f"{job_id}:{step.id}:{token}", body="summary").message_id
        else:
            artifact = env.make(job_id, step.id)
        cp = env.checkpoints.save(job_id, cp.confirm(step.id, artifact), token=token)
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    return cp.artifacts["publish"]


def stable_key_resend(job_id, env):
    """A stable key, so the provider dedupes, but no intent and no lookup."""
    token = env.claim(job_id)
    cp = env.resume(job_id)
    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if step.effect:
            artifact = env.send(job_id, step.id, env.op_id(job_id, step.id), body="summary").message_id
        else:
            artifact = env.make(job_id, step.id)
        cp = env.checkpoints.save(job_id, cp.confirm(step.id, artifact), token=token)
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    return cp.artifacts["publish"]


def _receipted(job_id, env, *, trust_intent=False, resend_after_failed_lookup=True, resume=None):
    token = env.claim(job_id)
    cp = (resume or env.resume)(job_id)
    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if not step.effect:
            cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)
            continue
        op_id = cp.op_for(step.id) or env.op_id(job_id, step.id)
        if op_id in cp.intents and trust_intent:
            message_id = op_id  # "the intent is there, so the email went out"
        else:
            outcome = None
            if op_id in cp.intents:
                outcome = env.lookup(op_id)
            else:
                cp = env.checkpoints.save(job_id, cp.intend(op_id, step.id), token=token)
            if outcome is None or (outcome.status is SendStatus.FAILED and resend_after_failed_lookup):
                outcome = env.send(job_id, step.id, op_id, body=cp.artifacts["summarize"])
            if outcome.status is SendStatus.UNKNOWN:
                outcome = env.lookup(op_id)
            if outcome.status is not SendStatus.OK:
                raise EffectFailedError(step=step.id, job_id=job_id, status=outcome.status.value, op_id=op_id)
            message_id = outcome.message_id
        receipt = Receipt(op_id=op_id, step=step.id, message_id=message_id)
        cp = env.checkpoints.save(job_id, cp.receive(receipt).confirm(step.id, message_id), token=token)
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    return cp.artifacts["publish"]


def intent_means_sent(job_id, env):
    return _receipted(job_id, env, trust_intent=True)


def failed_lookup_is_final(job_id, env):
    return _receipted(job_id, env, resend_after_failed_lookup=False)


def ignores_the_plan_version(job_id, env):
    """Reads the store directly, so a v1 checkpoint is resumed under v2 without a word."""
    return _receipted(job_id, env, resume=lambda j: env.checkpoints.load(j) or Checkpoint.start(env.workflow.version))


def swallows_the_crash(job_id, env):
    try:
        return answer_from(LAB05, "receipt-run", "run")(job_id, env)
    except Exception:
        return "carried on"


# ---------------------------------------------------------------------- lab 05: verdicts
def test_lab05_master_answer_is_correct():
    run = answer_from(LAB05, "receipt-run", "run")
    result = lab05.exercise.result(run)
    assert result.verdict is Verdict.CORRECT, str(result)
    assert "54 crash points explored in 4 settings" in result.message
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


@pytest.mark.parametrize("answer, expected, trace_line", [
    (one_key_per_attempt,
     "with a healthy email provider, crashing at after_effect(publish), effect_exactly_once broke: publish "
     "reached the customer 2 times (msg-0001, msg-0002). After the restart your run could not tell whether the "
     "email had already gone out.",
     "send publish O-1001:publish:2 -> ok msg-0002"),
    (stable_key_resend,
     "with a healthy email provider, crashing at after_effect(publish), no_blind_resend broke: O-1001:publish:v1 "
     "was sent again without looking it up first.",
     "resend O-1001:publish:v1 without a lookup (last known: ok)"),
    (intent_means_sent,
     "with a healthy email provider, crashing at after_intent(publish), effect_exactly_once broke: publish "
     "reached the customer 0 times. The restart treated the email as sent without any proof that it was.",
     "CRASH at after_intent(publish)"),
    (failed_lookup_is_final,
     "with a healthy email provider, crashing at after_intent(publish), completed broke: the last run did not "
     "finish: run 3 raised EffectFailedError: The publish effect of O-1001 came back failed (operation "
     "O-1001:publish:v1), so the step is not confirmed. The next run must find out what happened before it tries "
     "again. The job must end with every step confirmed",
     "lookup O-1001:publish:v1 -> failed"),
    (swallows_the_crash,
     "with a healthy email provider, crashing at before_effect(fetch), explorer broke: run 1 caught the crash at "
     "before_effect(fetch); let SimulatedCrash propagate.",
     "run 1 returned 'carried on' (after catching the crash)"),
])
def test_lab05_wrong_answers_name_the_crash_point_and_invariant(answer, expected, trace_line):
    result = lab05.exercise.result(answer)
    assert result.verdict is Verdict.INCORRECT
    assert result.message.startswith(expected), result.message
    assert result.message.endswith("See every row: print(explore(run))")
    assert result.evidence[0].startswith("trace of ")
    assert trace_line in result.evidence
    with pytest.raises(AssertionError) as raised:
        lab05.exercise.grade(answer)
    assert expected in str(raised.value)


def test_lab05_a_lost_reply_is_checked_on_its_own():
    def trusts_every_reply(job_id, env):  # never reconciles an unknown outcome
        token = env.claim(job_id)
        cp = env.resume(job_id)
        for step in env.workflow.steps:
            if step.id in cp.completed:
                continue
            if not step.effect:
                cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)
                continue
            op_id = cp.op_for(step.id) or env.op_id(job_id, step.id)
            if op_id in cp.intents:
                outcome = env.lookup(op_id)
                if outcome.status is SendStatus.FAILED:
                    outcome = env.send(job_id, step.id, op_id)
            else:
                cp = env.checkpoints.save(job_id, cp.intend(op_id, step.id), token=token)
                outcome = env.send(job_id, step.id, op_id)
            message_id = outcome.message_id or "unknown"  # a lost reply taken for an answer
            cp = env.checkpoints.save(job_id, cp.receive(Receipt(op_id=op_id, step=step.id, message_id=message_id))
                                      .confirm(step.id, message_id), token=token)
        env.ack(job_id, token=token, result=cp.artifacts["publish"])
        return cp.artifacts["publish"]

    result = lab05.exercise.result(trusts_every_reply)
    assert result.verdict is Verdict.INCORRECT
    assert result.message.startswith("with a refused send (the provider said no, nothing went out), without a "
                                     "crash, effect_exactly_once broke: publish reached the customer 0 times.")
    assert "print(explore(run, faults=['fail']))" in result.message


def test_lab05_a_changed_plan_must_be_refused():
    result = lab05.exercise.result(ignores_the_plan_version)
    assert result.verdict is Verdict.INCORRECT
    assert result.message.startswith("O-1001 was half done under workflow v1 (confirmed: fetch, summarize) when "
                                     "v2 was deployed; your run carried on instead of refusing the v1 checkpoint.")
    assert "--- run 2, workflow v2 deployed, checkpoint not migrated ---" in result.evidence
    assert "send publish O-1001:publish:v2 -> ok msg-0001" in result.evidence


def test_lab05_not_a_function():
    result = lab05.exercise.result("run")
    assert result.verdict is Verdict.INCORRECT and "pass your function itself" in result.message


# ---------------------------------------------------------------------- lab 06: answers
def applies_everything(delivery, processed, apply):
    apply(delivery)
    return True


def dedupes_on_the_delivery_number(delivery, processed, apply):
    if delivery.seq in processed:
        return False
    apply(delivery)
    processed.add(delivery.seq)
    return True


def marks_before_applying(delivery, processed, apply):
    if delivery.message_id in processed:
        return False
    processed.add(delivery.message_id)
    apply(delivery)
    return True


def swallows_the_failure(delivery, processed, apply):
    if delivery.message_id in processed:
        return False
    try:
        apply(delivery)
    except ConnectionError:
        return False
    processed.add(delivery.message_id)
    return True


def dedupes_on_the_payload(delivery, processed, apply):
    key = (delivery.payload["case_id"], delivery.payload["amount"])
    if key in processed:
        return False
    apply(delivery)
    processed.add(key)
    return True


def test_lab06_master_answer_is_correct():
    handle = answer_from(LAB06, "idempotent-handle", "handle")
    result = lab06.exercise.result(handle)
    assert result.verdict is Verdict.CORRECT, str(result)
    assert "every one of 22 refunds was applied exactly once" in result.message
    assert lab06.exercise.grade(handle) is None


def test_lab06_pristine_stub_is_not_attempted():
    stub = answer_from(LAB06, "idempotent-handle", "handle", student=True)
    assert lab06.exercise.result(stub).verdict is Verdict.NOT_ATTEMPTED
    assert lab06.replay(stub, seed=1) == "handle still raises NotImplementedError: write it first."


@pytest.mark.parametrize("answer, expected, evidence", [
    (applies_everything,
     "out-0001 (refund 35.00 for O-1001) was applied twice, by delivery #1 and again by #2 (seed 1). #2 is a copy "
     "of the same message: the dispatcher crashed after publishing #1, before marking it sent, so it published "
     "the message again.",
     "#2 out-0001 (refund 35.00 for O-1001): handle returned True - refund applied"),
    (dedupes_on_the_delivery_number,
     "out-0001 (refund 35.00 for O-1001) was applied twice, by delivery #1 and again by #2 (seed 1).",
     "dispatcher published out-0001 as #1 and crashed before marking it sent"),
    (marks_before_applying,
     "delivery #7 of out-0003 (refund 12.50 for O-1002) was skipped although out-0003 had never been applied "
     "(seed 1): its first apply failed (payments API timed out), and a message whose apply failed has not been "
     "processed yet.",
     "#7 out-0003 (refund 12.50 for O-1002): handle returned False"),
    (swallows_the_failure,
     "on delivery #5 of out-0003, apply raised ConnectionError (payments API timed out) but handle returned "
     "False, so the consumer acknowledges the delivery and the refund never happens (seed 1).",
     "#5 out-0003 (refund 12.50 for O-1002): handle returned False - apply failed (payments API timed out) and "
     "the error was swallowed"),
    (dedupes_on_the_payload,
     "delivery #4 of out-0002 (refund 35.00 for O-1001) was skipped although out-0002 had never been applied "
     "(seed 1): only out-0001, a different message with the same case and amount, had been applied.",
     "#4 out-0002 (refund 35.00 for O-1001): handle returned False"),
])
def test_lab06_wrong_answers_name_the_message_and_delivery(answer, expected, evidence):
    result = lab06.exercise.result(answer)
    assert result.verdict is Verdict.INCORRECT
    assert result.message.startswith(expected), result.message
    assert result.message.endswith("Replay it: print(lab06.replay(handle, seed=1))")
    assert evidence in result.evidence
    with pytest.raises(AssertionError) as raised:
        lab06.exercise.grade(answer)
    assert expected in str(raised.value)


def test_lab06_the_return_value_and_the_processed_record_are_checked():
    def returns_nothing(delivery, processed, apply):
        if delivery.message_id not in processed:
            apply(delivery)
            processed.add(delivery.message_id)

    seen: set = set()

    def keeps_its_own_set(delivery, processed, apply):
        if delivery.message_id in seen:
            return False
        apply(delivery)
        seen.add(delivery.message_id)
        return True

    quiet = lab06.exercise.result(returns_nothing)
    assert quiet.message.startswith("handle returned None for delivery #1 of out-0001, which it applied: return "
                                    "True when you apply a message and False when you skip a duplicate.")
    private = lab06.exercise.result(keeps_its_own_set)
    assert private.message.startswith("after every delivery, processed does not hold out-0001, out-0002, "
                                      "out-0003, out-0004 (it holds []): record the id of every message you apply")


def test_lab06_replay_tells_the_story_and_is_deterministic():
    handle = answer_from(LAB06, "idempotent-handle", "handle")
    story = lab06.replay(handle, seed=3)
    assert story == lab06.replay(handle, seed=3)
    lines = story.splitlines()
    assert lines[0] == "scenario seed 3"
    assert lines[-1] == "every message applied exactly once."
    assert "dispatcher published out-0001 as #1 and crashed before marking it sent" in lines
    assert any("apply failed (payments API timed out); handle raised ConnectionError" in line for line in lines)
    assert lab06.replay(applies_everything, seed=3).endswith(
        "refunds applied per message: out-0001 x2, out-0002 x1, out-0003 x2, out-0004 x1\n"
        "problem: out-0001 (refund 35.00 for O-1001) was applied twice, by delivery #1 and again by #2 (seed 3). "
        "#2 is a copy of the same message: the dispatcher crashed after publishing #1, before marking it sent, so it "
        "published the message again.")


def test_lab06_applying_twice_in_one_call_is_caught():
    def applies_twice(delivery, processed, apply):
        if delivery.message_id in processed:
            return False
        apply(delivery)
        apply(delivery)  # "to be sure"
        processed.add(delivery.message_id)
        return True

    result = lab06.exercise.result(applies_twice)
    assert result.verdict is Verdict.INCORRECT
    assert result.message.startswith("out-0001 (refund 35.00 for O-1001) was applied 2 times, all by delivery #1 "
                                     "(seed 1): call apply once per message.")
