"""The specification of lab 05's check: receipt-based recovery, crashed at every point, with
lost replies and lost requests, a refused send, a second job and a changed plan; run as a
worker, which has receipts and lookup but no view of the provider's inbox."""

from __future__ import annotations

from pathlib import Path

import nbformat
from check_accuracy import Spec, accuracy_tests, refused
from notebook_answers import answers

from shopops_lab.checkpoint import Checkpoint, Receipt
from shopops_lab.checks import lab05
from shopops_lab.effects import SendStatus
from shopops_lab.errors import EffectFailedError, JobNotRunningError, ShopOpsError, TransitionError
from shopops_lab.jobs import JobState
from shopops_lab.recovery import ReceiptRunner

MASTER = Path(__file__).resolve().parent.parent / "solutions" / "05_checkpoints_and_receipts.ipynb"


def _body(cp):
    return cp.artifacts["summarize"]


# ---------------------------------------------------------------------------- right, written differently


def run_with_a_helper_per_write(job_id, env):
    """Receipt and confirmation in two writes; a receipt already written is reused."""
    token = env.claim(job_id)
    cp = env.resume(job_id)

    def save(checkpoint):
        return env.checkpoints.save(job_id, checkpoint, token=token)

    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if not step.effect:
            cp = save(cp.confirm(step.id, env.make(job_id, step.id)))
            continue
        op = cp.op_for(step.id) or env.op_id(job_id, step.id)
        receipt = cp.receipts.get(op)
        if receipt is None:
            known = env.lookup(op) if op in cp.intents else None
            if known is None:
                cp = save(cp.intend(op, step.id))
            if known is None or known.status is not SendStatus.OK:
                known = env.send(job_id, step.id, op, body=_body(cp))
                if known.status is SendStatus.UNKNOWN:
                    known = env.lookup(op)
            if known.status is not SendStatus.OK:
                raise EffectFailedError(step=step.id, job_id=job_id, status=known.status.value, op_id=op)
            receipt = Receipt(op_id=op, step=step.id, message_id=known.message_id, via="lookup")
            cp = save(cp.receive(receipt))
        cp = save(cp.confirm(step.id, receipt.message_id))
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    return cp.artifacts["publish"]


def asks_on_the_next_run(job_id, env):
    """An unknown outcome is not settled now: the run gives up, and the next delivery asks."""
    token = env.claim(job_id)
    cp = env.resume(job_id)
    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if not step.effect:
            cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)
            continue
        op_id, outcome = cp.op_for(step.id), None
        if op_id is None:
            op_id = env.op_id(job_id, step.id)
            cp = env.checkpoints.save(job_id, cp.intend(op_id, step.id), token=token)
        else:
            found = env.lookup(op_id)
            outcome = found if found.status is SendStatus.OK else None
        if outcome is None:
            outcome = env.send(job_id, step.id, op_id, body=_body(cp))
        if outcome.status is not SendStatus.OK:
            raise EffectFailedError(step=step.id, job_id=job_id, status=outcome.status.value, op_id=op_id)
        done = cp.receive(Receipt(op_id=op_id, step=step.id, message_id=outcome.message_id))
        cp = env.checkpoints.save(job_id, done.confirm(step.id, outcome.message_id), token=token)
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    return cp.artifacts["publish"]


# ---------------------------------------------------------------------------- wrong, as learners write them


def _step_then_checkpoint(job_id, env, key):
    """The lesson's naive loop: do each step, then checkpoint it; `key(token, step)` names the send."""
    token = env.claim(job_id)
    cp = env.resume(job_id)
    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if step.effect:
            artifact = env.send(job_id, step.id, key(token, step), body="summary").message_id
        else:
            artifact = env.make(job_id, step.id)
        cp = env.checkpoints.save(job_id, cp.confirm(step.id, artifact), token=token)
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    return cp.artifacts["publish"]


def one_key_per_attempt(job_id, env):
    """The key names the attempt, so every restart is a new email."""
    return _step_then_checkpoint(job_id, env, lambda token, step: f"{job_id}:{step.id}:{token}")


def stable_key_resend(job_id, env):
    """A stable key, so the provider dedupes, but no intent and no lookup."""
    return _step_then_checkpoint(job_id, env, lambda token, step: env.op_id(job_id, step.id))


def _receipted(
    job_id,
    env,
    *,
    trust_intent=False,
    resend_after_failed_lookup=True,
    resume=None,
    unknown_means_sent=False,
    fresh_op_id=False,
    inbox=None,
    returns=None,
    id_from_lookup=False,
):
    """A receipt runner with one mistake switched on."""
    token = env.claim(job_id)
    cp = (resume or env.resume)(job_id)
    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if not step.effect:
            cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)
            continue
        op_id = env.op_id(job_id, step.id) if fresh_op_id else cp.op_for(step.id) or env.op_id(job_id, step.id)
        if op_id in cp.intents and trust_intent:
            message_id = op_id  # "the intent is there, so the email went out"
        else:
            outcome = None
            if op_id in cp.intents:
                outcome = inbox(env, op_id) if inbox else env.lookup(op_id)
            else:
                cp = env.checkpoints.save(job_id, cp.intend(op_id, step.id), token=token)
            if outcome is None or (outcome.status is SendStatus.FAILED and resend_after_failed_lookup):
                outcome = env.send(job_id, step.id, op_id, body=_body(cp))
            if outcome.status is SendStatus.UNKNOWN and not unknown_means_sent:
                outcome = env.lookup(op_id)
            if outcome.status is SendStatus.FAILED:
                raise EffectFailedError(step=step.id, job_id=job_id, status=outcome.status.value, op_id=op_id)
            message_id = outcome.message_id or op_id
        receipt = Receipt(op_id=op_id, step=step.id, message_id=message_id)
        cp = env.checkpoints.save(job_id, cp.receive(receipt).confirm(step.id, message_id), token=token)
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    if id_from_lookup:
        return env.lookup(cp.op_for("publish")).message_id
    return cp.artifacts["publish"] if returns is None else returns


def resends_on_unknown(job_id, env):
    """Takes a timeout for a failure and sends again at once: lab 06's mistake."""
    token = env.claim(job_id)
    cp = env.resume(job_id)
    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if not step.effect:
            cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)
            continue
        op_id = cp.op_for(step.id) or env.op_id(job_id, step.id)
        outcome = env.lookup(op_id) if op_id in cp.intents else None
        if outcome is None:
            cp = env.checkpoints.save(job_id, cp.intend(op_id, step.id), token=token)
        while outcome is None or outcome.status is not SendStatus.OK:
            outcome = env.send(job_id, step.id, op_id, body=_body(cp))
            if outcome.status is SendStatus.FAILED:
                raise EffectFailedError(step=step.id, job_id=job_id, status=outcome.status.value, op_id=op_id)
        receipt = Receipt(op_id=op_id, step=step.id, message_id=outcome.message_id)
        cp = env.checkpoints.save(job_id, cp.receive(receipt).confirm(step.id, outcome.message_id), token=token)
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    return cp.artifacts["publish"]


def intent_means_sent(job_id, env):
    return _receipted(job_id, env, trust_intent=True)


def failed_lookup_is_final(job_id, env):
    return _receipted(job_id, env, resend_after_failed_lookup=False)


def unknown_means_sent(job_id, env):
    """The issue's guess: a lost reply is taken as a delivery, never looked up."""
    return _receipted(job_id, env, unknown_means_sent=True)


def unknown_means_sent_and_the_id_is_asked_for_later(job_id, env):
    """The same guess, with the message id fetched at the end: only a lost request shows it."""
    return _receipted(job_id, env, unknown_means_sent=True, id_from_lookup=True)


def ignores_the_plan_version(job_id, env):
    """Reads the store directly, so a v1 checkpoint is resumed under v2 without a word."""
    return _receipted(job_id, env, resume=lambda j: env.checkpoints.load(j) or Checkpoint.start(env.workflow.version))


def forgets_the_operation_it_started(job_id, env):
    """Makes the operation id afresh on every run, so a migrated job gets a new key."""
    return _receipted(job_id, env, fresh_op_id=True)


def returns_nothing(job_id, env):
    _receipted(job_id, env)


def reads_the_inbox(job_id, env):
    """Asks the provider's ledger instead of lookup: a real worker has no such thing."""

    def inbox(env, op_id):
        sent = [c for c in env.adapter.ledger.contacts(job_id) if c.idem_key == op_id]
        return env.lookup(op_id) if sent else env.lookup(op_id)

    return _receipted(job_id, env, inbox=inbox)


MASTERS_RUN = answers(nbformat.read(MASTER, as_version=4))["run"]


def swallows_the_crash(job_id, env):
    try:
        return MASTERS_RUN(job_id, env)
    except BaseException:  # noqa: BLE001 - catches the simulated crash too, and a refused send
        return "carried on"


def acks_first(job_id, env):
    """Acknowledges the delivery as soon as it holds it, then does the work."""
    env.ack(job_id, token=env.claim(job_id), result="accepted")
    return _receipted(job_id, env)


def acks_in_finally(job_id, env):
    """'The queue must never see this job again': acks whatever happens, a failed send too."""
    token = env.claim(job_id)
    cp = env.resume(job_id)
    try:
        for step in env.workflow.steps:
            if step.id in cp.completed:
                continue
            if not step.effect:
                cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)
                continue
            op_id = cp.op_for(step.id) or env.op_id(job_id, step.id)
            outcome = env.lookup(op_id) if op_id in cp.intents else None
            if outcome is None:
                cp = env.checkpoints.save(job_id, cp.intend(op_id, step.id), token=token)
            if outcome is None or outcome.status is SendStatus.FAILED:
                outcome = env.send(job_id, step.id, op_id, body=_body(cp))
            if outcome.status is SendStatus.UNKNOWN:
                outcome = env.lookup(op_id)
            if outcome.status is not SendStatus.OK:
                raise EffectFailedError(step=step.id, job_id=job_id, status=outcome.status.value, op_id=op_id)
            receipt = Receipt(op_id=op_id, step=step.id, message_id=outcome.message_id)
            cp = env.checkpoints.save(job_id, cp.receive(receipt).confirm(step.id, receipt.message_id), token=token)
        return cp.artifacts["publish"]
    finally:
        env.ack(job_id, token=token, result=cp.artifacts.get("publish"))


IN_FLIGHT = {}  # the operations this worker started: in memory, not in the checkpoint


def remembers_in_memory(job_id, env):
    """Keeps the in-flight operation in a module-level dict instead of the checkpoint."""
    token = env.claim(job_id)
    cp = env.resume(job_id)
    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if not step.effect:
            cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)
            continue
        op_id = env.op_id(job_id, step.id)
        outcome = env.lookup(op_id) if op_id in IN_FLIGHT else None
        IN_FLIGHT[op_id] = step.id
        if outcome is None or outcome.status is SendStatus.FAILED:
            outcome = env.send(job_id, step.id, op_id, body=_body(cp))
        if outcome.status is SendStatus.UNKNOWN:
            outcome = env.lookup(op_id)
        if outcome.status is not SendStatus.OK:
            raise EffectFailedError(step=step.id, job_id=job_id, status=outcome.status.value, op_id=op_id)
        cp = env.checkpoints.save(
            job_id,
            cp.receive(Receipt(op_id=op_id, step=step.id, message_id=outcome.message_id)).confirm(
                step.id, outcome.message_id
            ),
            token=token,
        )
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    return cp.artifacts["publish"]


def keys_every_job_with_the_storys_id(job_id, env):
    """Right in every way but one: the operation id is built from the story's job, O-1001,
    so a second job on the same provider collides with the first one's email."""
    return MASTERS_RUN(job_id, _StoryKeys(env))


class _StoryKeys:
    """An env whose op_id ignores the job it is asked about (as a learner's f"O-1001:{step}" does)."""

    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        return getattr(self._env, name)

    def op_id(self, job_id, step_id):
        return self._env.op_id("O-1001", step_id)


def hands_it_to_the_kit(job_id, env):
    return ReceiptRunner()(job_id, env)


SCOPE = (
    "searched within 2 workers, a crash at any kit call, a lease expiry, a duplicate delivery and up to 3 deliveries"
)

SPEC = Spec(
    exercise=lab05.exercise,
    right=(run_with_a_helper_per_write, asks_on_the_next_run),
    wrong=(
        refused(
            one_key_per_attempt,
            "with a healthy email provider: the email reached the customer 2 times "
            "(msg-0001, msg-0002). The shortest schedule that shows it (3 steps, " + SCOPE + "): W1 runs O-1001 "
            "(crash after send) · O-1001's lease expires · W1 runs O-1001.",
            "print(lab05.replay(one_key_per_attempt, \"W1 runs O-1001 (crash after send) · O-1001's lease expires · "
            'W1 runs O-1001"))',
            "send publish O-1001:publish:2 -> ok msg-0002",
        ),
        refused(
            stable_key_resend,
            "with a healthy email provider: O-1001:publish:v1 was sent again without being looked up first",
            "W1 runs O-1001 (crash after send) · O-1001's lease expires · W1 runs O-1001",
            "resend O-1001:publish:v1 without a lookup (last known: ok)",
        ),
        refused(
            intent_means_sent,
            "the checkpoint confirms publish, but the email reached the customer 0 times",
            "treated it as sent without any proof",
            "W1 runs O-1001 (crash after save 3)",
        ),
        refused(
            failed_lookup_is_final,
            "the job was never finished and acknowledged: W1's run raised EffectFailedError",
            "(4 steps, ",
            "lookup O-1001:publish:v1 -> failed",
        ),
        refused(
            unknown_means_sent,
            "with a lost reply (the email went out, the answer never came back): W1's run "
            "finished and returned the str 'O-1001:publish:v1', but the email that reached the customer is "
            "msg-0001",
            "(1 step, ",
            "print(lab05.replay(unknown_means_sent, 'W1 runs O-1001', faults=['drop_reply']))",
        ),
        refused(
            unknown_means_sent_and_the_id_is_asked_for_later,
            "with a lost request (the send timed out before "
            "reaching the provider: nothing went out): the checkpoint confirms publish, but the email reached "
            "the customer 0 times",
            "treated it as sent without any proof",
            "print(lab05.replay(unknown_means_sent_and_the_id_is_asked_for_later, 'W1 runs O-1001', "
            "faults=['lose_request']))",
        ),
        refused(
            ignores_the_plan_version,
            "O-1001 was half done under workflow v1 (stopped at "
            "after_checkpoint(summarize), confirmed: fetch, summarize) when v2 was deployed; your run carried on",
            "--- run 2, workflow v2 deployed, checkpoint not migrated ---",
        ),
        refused(
            forgets_the_operation_it_started,
            "(stopped at after_effect(publish), confirmed: fetch, summarize)",
            "after the migration to v2, publish reached the customer 2 times (msg-0001, msg-0002)",
            "send publish O-1001:publish:v2 -> ok msg-0002",
        ),
        refused(
            returns_nothing,
            "W1's run finished and returned None, but the email that reached the customer is "
            "msg-0001: return its message id",
            "(1 step, ",
        ),
        refused(
            reads_the_inbox,
            "W1's run raised AttributeError: a worker's env has no 'adapter'",
            "a real worker cannot see the provider's inbox",
        ),
        refused(
            acks_first,
            "the job was acknowledged with the checkpoint confirming only []; a queue never "
            "delivers an acknowledged job again",
            "(1 step, ",
            "W1 runs O-1001 (crash after ack)",
        ),
        refused(
            remembers_in_memory,
            "O-1001:publish:v1 was sent again without being looked up first",
            "W1 runs O-1001 (crash after send) · O-1001's lease expires · W1 runs O-1001",
            "resend O-1001:publish:v1 without a lookup (last known: ok)",
        ),
        refused(
            acks_in_finally,
            "with a lost request (the send timed out before reaching the provider: nothing "
            "went out): the job was "
            "acknowledged with the checkpoint confirming only [fetch, summarize]",
            "(1 step, ",
        ),
        refused(hands_it_to_the_kit, "hands the job to the kit's ReceiptRunner", "write it yourself"),
        refused(ReceiptRunner(), "hands the job to the kit's ReceiptRunner"),
        refused(resends_on_unknown, "O-1001:publish:v1 was sent again without being looked up first"),
        refused(
            keys_every_job_with_the_storys_id,
            "with a lost reply on a second job, A-1002, after O-1001's email went out on the same provider: your "
            "run used the operation id 'O-1001:publish:v1' for A-1002",
            "An operation id names the job as well as the step.",
        ),
        refused(
            swallows_the_crash,
            "with a lost request (the send timed out before reaching the provider: nothing "
            "went out): W1's run finished and returned the str 'carried on'",
        ),
    ),
    secrets=("cp.op_for(", ".intend(", "cp.receive("),
)

(
    test_a_right_answer_written_differently_is_accepted,
    test_a_plausible_wrong_answer_is_refused_with_its_evidence,
    test_the_specification_has_enough_right_and_wrong_answers,
) = accuracy_tests(SPEC)


# ============================================================================ 05.2: record the intent, decide
# from the checkpoint (a healthy provider: every schedule of the same bound, on two jobs)


def decides_from_the_checkpoint_only(job_id, env):
    """Right for 05.2, written differently: one branch per row of the lab's table, and a send's
    reply taken as it comes (a healthy provider answers every send it receives)."""
    token = env.claim(job_id)
    cp = env.resume(job_id)
    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if not step.effect:
            cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)
            continue
        op_id = cp.op_for(step.id)
        if op_id is None:  # no intent: certainly not sent
            op_id = env.op_id(job_id, step.id)
            cp = env.checkpoints.save(job_id, cp.intend(op_id, step.id), token=token)
            message_id, via = env.send(job_id, step.id, op_id, body=_body(cp)).message_id, "reply"
        else:  # an intent, no receipt: ask
            found = env.lookup(op_id)
            if found.status is SendStatus.OK:
                message_id, via = found.message_id, "lookup"
            else:
                message_id, via = env.send(job_id, step.id, op_id, body=_body(cp)).message_id, "reply"
        cp = env.checkpoints.save(
            job_id, cp.receive(Receipt(op_id=op_id, step=step.id, message_id=message_id, via=via)), token=token
        )
        cp = env.checkpoints.save(job_id, cp.confirm(step.id, message_id), token=token)
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    return cp.artifacts["publish"]


def intent_after_the_send(job_id, env):
    """Writes the intent once the send has returned: a crash during the send leaves no trace."""
    token = env.claim(job_id)
    cp = env.resume(job_id)
    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if not step.effect:
            cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)
            continue
        op_id = cp.op_for(step.id) or env.op_id(job_id, step.id)
        reply = env.lookup(op_id) if op_id in cp.intents else env.send(job_id, step.id, op_id, body=_body(cp))
        cp = env.checkpoints.save(job_id, cp.intend(op_id, step.id), token=token)
        receipt = Receipt(op_id=op_id, step=step.id, message_id=reply.message_id)
        cp = env.checkpoints.save(job_id, cp.receive(receipt).confirm(step.id, reply.message_id), token=token)
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    return cp.artifacts["publish"]


def hard_codes_the_job(job_id, env):
    """Right for O-1001 only: the job id of the story is written into the run."""
    return MASTERS_RUN("O-1001", env) if job_id == "O-1001" else _receipted("O-1001", env)


INTENT = Spec(
    exercise=lab05.intent,
    right=(decides_from_the_checkpoint_only, run_with_a_helper_per_write, asks_on_the_next_run, MASTERS_RUN),
    wrong=(
        refused(
            one_key_per_attempt,
            "with a healthy email provider: the email reached the customer 2 times",
            "W1 runs O-1001 (crash after send) · O-1001's lease expires · W1 runs O-1001",
            'print(lab05.replay(one_key_per_attempt, "W1 runs O-1001 (crash after send)',
        ),
        refused(stable_key_resend, "O-1001:publish:v1 was sent again without being looked up first"),
        refused(
            intent_after_the_send,
            "O-1001:publish:v1 was sent again without being looked up first",
            "W1 runs O-1001 (crash after send) · O-1001's lease expires · W1 runs O-1001",
        ),
        refused(
            intent_means_sent,
            "the checkpoint confirms publish, but the email reached the customer 0 times",
            "(crash after save 3)",
        ),
        refused(
            failed_lookup_is_final, "the job was never finished and acknowledged", "lookup O-1001:publish:v1 -> failed"
        ),
        refused(acks_first, "the job was acknowledged with the checkpoint confirming only []", "(crash after ack)"),
        refused(remembers_in_memory, "O-1001:publish:v1 was sent again without being looked up first"),
        refused(returns_nothing, "W1's run finished and returned None"),
        refused(
            hard_codes_the_job,
            "with a healthy email provider, on a second job, A-1002, after O-1001's email went out on it:",
            "job_id='A-1002'",
        ),
        refused(
            keys_every_job_with_the_storys_id,
            "your run used the operation id 'O-1001:publish:v1' for A-1002, but O-1001's email had already gone out",
            "(1 step, ",
        ),
        refused(hands_it_to_the_kit, "hands the job to the kit's ReceiptRunner"),
    ),
    secrets=("cp.op_for(", ".intend(", "cp.receive("),
)


def test_the_first_step_is_not_the_second_a_run_that_trusts_every_reply_passes_05_2_and_is_refused_by_05_3():
    """The two graded steps judge different things: deciding from the checkpoint (05.2) does not
    make a run reconcile an unknown reply (05.3): one that takes a timeout for a delivery passes
    05.2, where every send is answered, and a lost reply refuses it in one step."""
    assert lab05.intent.result(unknown_means_sent).correct
    result = lab05.exercise.result(unknown_means_sent)
    assert not result.correct
    assert "with a lost reply (the email went out, the answer never came back):" in result.message, result.message
    assert "(1 step, " in result.message and "faults=['drop_reply']" in result.message, result.message


def test_the_intent_check_states_its_bound():
    message = lab05.intent.result(decides_from_the_checkpoint_only).message
    bound = (
        "schedules of 2 workers, a crash at any kit call, a lease expiry, a duplicate delivery and up to 3 "
        "deliveries, with a healthy provider on two jobs"
    )
    assert message.startswith("checked all ") and bound in message, message


# ============================================================================ 05.1: job states, a wrong move refused


def stops_on_any_refusal(jobs, job_id, do_step):
    """Right, written differently: each move asked through one helper that says whether the store agreed."""

    def moved(move):
        try:
            move()
        except ShopOpsError:
            return False
        return True

    claim = []
    if not moved(lambda: claim.append(jobs.claim(job_id, "worker-7", lease_seconds=30))):
        return jobs.get(job_id).state.value
    token = claim[0].token
    for step_id in ("fetch", "summarize", "publish"):
        result = do_step(step_id)
        if not moved(lambda s=step_id: jobs.confirm_step(job_id, s, token=token)):
            return jobs.get(job_id).state.value
    moved(lambda: jobs.complete(job_id, token=token, result=result))
    return jobs.get(job_id).state.value


def returns_from_inside(jobs, job_id, do_step):
    try:
        token = jobs.claim(job_id, "W1", lease_seconds=30).token
        for step_id in ("fetch", "summarize", "publish"):
            do_step(step_id)
            jobs.confirm_step(job_id, step_id, token=token)
        return jobs.complete(job_id, token=token, result="done").state
    except TransitionError:
        return JobState.CANCELLED
    except JobNotRunningError as refused:
        return JobState(refused.state)


def _moves(jobs, job_id, do_step, token):
    for step_id in ("fetch", "summarize", "publish"):
        do_step(step_id)
        jobs.confirm_step(job_id, step_id, token=token)
    jobs.complete(job_id, token=token, result="done")


def lets_the_refusal_out(jobs, job_id, do_step):
    _moves(jobs, job_id, do_step, jobs.claim(job_id, "W1", lease_seconds=30).token)
    return jobs.get(job_id).state


def looks_first(jobs, job_id, do_step):
    """Check-then-act: reads the state before each move instead of handling the store's answer."""
    if jobs.get(job_id).state is JobState.CANCELLED:
        return JobState.CANCELLED
    token = jobs.claim(job_id, "W1", lease_seconds=30).token
    for step_id in ("fetch", "summarize", "publish"):
        if jobs.get(job_id).state is JobState.CANCELLED:
            return JobState.CANCELLED
        do_step(step_id)
        jobs.confirm_step(job_id, step_id, token=token)
    jobs.complete(job_id, token=token, result="done")
    return JobState.SUCCEEDED


def carries_on_after_the_refusal(jobs, job_id, do_step):
    token = None
    try:
        token = jobs.claim(job_id, "W1", lease_seconds=30).token
    except TransitionError:
        pass
    for step_id in ("fetch", "summarize", "publish"):
        do_step(step_id)
        try:
            jobs.confirm_step(job_id, step_id, token=token or 1)
        except (TransitionError, JobNotRunningError):
            pass
    try:
        jobs.complete(job_id, token=token or 1, result="done")
    except (TransitionError, JobNotRunningError):
        pass
    return jobs.get(job_id).state


def marks_it_failed(jobs, job_id, do_step):
    """Answers the refusal with another move: cancelled -> failed is not an edge either."""
    token = None
    try:
        token = jobs.claim(job_id, "W1", lease_seconds=30).token
        _moves(jobs, job_id, do_step, token)
    except (TransitionError, JobNotRunningError) as refused:
        try:
            jobs.fail(job_id, token=token or 1, error=str(refused))
        except (TransitionError, JobNotRunningError):
            pass
    return jobs.get(job_id).state


def claims_again(jobs, job_id, do_step):
    """Takes the refusal for a lost lease, and claims again until the store agrees."""
    while True:
        try:
            _moves(jobs, job_id, do_step, jobs.claim(job_id, "W1", lease_seconds=30).token)
            return jobs.get(job_id).state
        except (TransitionError, JobNotRunningError):
            continue


def reports_success_whatever_happens(jobs, job_id, do_step):
    try:
        _moves(jobs, job_id, do_step, jobs.claim(job_id, "W1", lease_seconds=30).token)
    except (TransitionError, JobNotRunningError):
        pass
    return "succeeded"


def catches_only_the_transition_error(jobs, job_id, do_step):
    try:
        _moves(jobs, job_id, do_step, jobs.claim(job_id, "W1", lease_seconds=30).token)
    except TransitionError:
        pass
    return jobs.get(job_id).state


def skips_the_confirmations(jobs, job_id, do_step):
    try:
        token = jobs.claim(job_id, "W1", lease_seconds=30).token
        for step_id in ("fetch", "summarize", "publish"):
            do_step(step_id)
        jobs.complete(job_id, token=token, result="done")
    except (TransitionError, JobNotRunningError):
        pass
    return jobs.get(job_id).state


def hard_codes_the_job_id(jobs, job_id, do_step):
    try:
        _moves(jobs, "job-0001", do_step, jobs.claim("job-0001", "W1", lease_seconds=30).token)
    except (TransitionError, JobNotRunningError):
        pass
    return jobs.get("job-0001").state


STATES = Spec(
    exercise=lab05.states,
    right=(stops_on_any_refusal, returns_from_inside, answers(nbformat.read(MASTER, as_version=4))["finish_job"]),
    wrong=(
        refused(
            lets_the_refusal_out,
            "when a person cancels the job just before your call number 1 (claim), the "
            "store refused claim (TransitionError: job job-0002 cannot move from cancelled to running",
            "and your function raised it",
        ),
        refused(
            looks_first,
            "just before your call number 2 (claim)",
            "the store refused claim",
            "and your function raised it",
        ),
        refused(
            carries_on_after_the_refusal,
            "the store refused claim",
            "then your code went on to do_step('fetch')",
            "A refused move is final",
        ),
        refused(marks_it_failed, "then your code went on to fail"),
        refused(claims_again, "your code made more than 40 calls", "stop instead of trying again"),
        refused(
            reports_success_whatever_happens,
            "finish_job returned the str 'succeeded', but the store says the job is cancelled",
        ),
        refused(
            catches_only_the_transition_error,
            "the store refused confirm_step('fetch') (JobNotRunningError",
            "and your function raised it",
        ),
        refused(
            skips_the_confirmations,
            "when nobody cancels the job, the job record confirmed [] of fetch, summarize, publish",
        ),
        refused(hard_codes_the_job_id, "when nobody cancels the job"),
    ),
    secrets=("except (TransitionError", "jobs.get(job_id).state"),
)

(
    test_05_1_and_05_2_right_answers_written_differently_are_accepted,
    test_05_1_and_05_2_plausible_wrong_answers_are_refused_with_their_evidence,
    test_05_1_and_05_2_specifications_have_enough_right_and_wrong_answers,
) = accuracy_tests(INTENT, STATES)


def test_the_states_check_plays_a_cancellation_before_every_call_and_states_it():
    message = lab05.states.result(stops_on_any_refusal).message
    assert message.startswith(
        "checked all 10 schedules (a person cancels the job just before any one of the 9 calls "
        "your function makes when left alone, or never)"
    ), message
