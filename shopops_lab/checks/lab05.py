"""Lab 05: recover a workflow with operation receipts, verified at every crash point.

The learner writes `run(job_id, env)`. The check crashes it at every point it passes
(`shopops_lab.crash.explore`), with a healthy provider, with a lost reply and with a
refused send, on two jobs; then it changes the workflow version under a half-done job.
A failure names the setting, the crash point, the broken invariant and the trace of
that row: what happened, never what to write.
"""
from __future__ import annotations

from shopops_lab.checkpoint import PUBLISH_WORKFLOW, CrashPoint, Env, Workflow
from shopops_lab.checks.base import Exercise, NotAttempted, Wrong, call_answer
from shopops_lab.crash import ExplorationReport, explore
from shopops_lab.effects import Fault

# (how a message names the setting, faults, job id, how to replay it)
SETTINGS = (
    ("a healthy email provider", (), "O-1001", "print(explore(run))"),
    ("a lost reply (the email went out, the answer never came back)", (Fault.DROP_REPLY,), "O-1001",
     "print(explore(run, faults=['drop_reply']))"),
    ("a refused send (the provider said no, nothing went out)", (Fault.FAIL,), "O-1001",
     "print(explore(run, faults=['fail']))"),
    ("a lost reply on job A-1002", (Fault.DROP_REPLY,), "A-1002",
     "print(explore(run, faults=['drop_reply'], job_id='A-1002'))"),
)
MAX_TRACE = 40

# One nudge per invariant: what the broken promise means, not how to keep it.
WHY = {
    "effect_exactly_once": "After the restart your run could not tell whether the email had already gone out.",
    "artifacts_reused": "A step that was already confirmed ran again; a confirmed artifact must be reused, "
                        "or it no longer matches what was approved.",
    "plan_version_kept": "A checkpoint was written under a different workflow version than the one running.",
    "completed": "The job must end with every step confirmed in the checkpoint and the delivery acknowledged.",
    "no_blind_resend": "The restart sent an operation again while its earlier outcome was not a known failure: "
                       "find out what happened to it before sending.",
    "explorer": "The explorer could not crash your run as planned.",
}
NEVER_SENT = "The restart treated the email as sent without any proof that it was."
FIRST = ("explorer", "completed")  # a run that cannot finish (or be crashed) is told before anything else


def _probe(run) -> None:
    """One plain run on fresh stores: the pristine stub raises NotImplementedError here."""
    try:
        call_answer(run, "O-1001", Env())
    except NotAttempted:
        raise
    except Exception:  # anything else is judged, with its trace, by the exploration
        pass


def _failure(report: ExplorationReport, setting: str, replay: str) -> Wrong:
    row = report.first_failure
    name = next(n for n in (*FIRST, *row.violations) if n in row.violations)
    what = row.violations[name].rstrip(".")
    never_sent = name == "effect_exactly_once" and " 0 times" in what
    why = NEVER_SENT if never_sent else WHY.get(name, "")
    where = "without a crash" if row.point is None else f"crashing at {row.label}"
    more = len(report.failures) - 1
    message = (f"with {setting}, {where}, {name} broke: {what}. {why}"
               + (f" ({more} more crash point{'s' if more > 1 else ''} failed too.)" if more > 0 else "")
               + f" See every row: {replay}")
    trace = list(row.trace)
    if len(trace) > MAX_TRACE:
        trace = trace[:MAX_TRACE] + [f"... {len(row.trace) - MAX_TRACE} more lines ({replay})"]
    return Wrong(message, [f"trace of {row.label}:", *trace])


def _changed_plan(run) -> None:
    """Half-done under v1, then v2 is deployed: refuse; after an explicit migration, finish
    with one email and without regenerating the summary."""
    env = Env()
    env.arm(CrashPoint.after_checkpoint("summarize"))
    env.note("--- run 1, workflow v1 ---")
    try:
        call_answer(run, "O-1001", env)
    except NotAttempted:
        raise
    except Exception:  # the planned crash (anything else was judged by the exploration)
        pass
    if env.crashed_at is None:
        raise Wrong("your run never wrote a checkpoint confirming summarize, so the changed-plan scenario "
                    "could not stop it half-way: confirm each step in the checkpoint as soon as it is done.")
    stored = env.checkpoints.load("O-1001")
    env.workflow = Workflow(version="v2", steps=PUBLISH_WORKFLOW.steps)
    env.arm(None)
    effects = len(env.effects)
    env.note("--- run 2, workflow v2 deployed, checkpoint not migrated ---")
    try:
        call_answer(run, "O-1001", env)
    except NotAttempted:
        raise
    except Exception:
        refused = True
    else:
        refused = False
    if not refused or len(env.effects) != effects:
        done = ", ".join(stored.completed) if stored is not None else "nothing"
        ran = ", ".join(env.effects[effects:]) or "nothing"
        raise Wrong(f"O-1001 was half done under workflow v1 (confirmed: {done}) when v2 was deployed; "
                    f"your run {'carried on' if not refused else 'raised, but only after running ' + ran} "
                    "instead of refusing the v1 checkpoint. A changed plan is refused until someone "
                    "migrates the checkpoint explicitly.", env.trace)
    env.checkpoints.migrate("O-1001", "v2", lambda checkpoint: checkpoint)
    env.note("--- run 3, after migrating the checkpoint to v2 ---")
    try:
        call_answer(run, "O-1001", env)
    except NotAttempted:
        raise
    except Exception as exc:
        raise Wrong(f"after the checkpoint was migrated to v2, your run raised {type(exc).__name__}: {exc}",
                    env.trace) from None
    sent = env.deliveries("O-1001", "publish")
    if env.regenerated or len(sent) != 1:
        what = (f"{env.regenerated[0]} ran again" if env.regenerated
                else f"publish reached the customer {len(sent)} times")
        raise Wrong(f"after the migration to v2, {what}: a migrated checkpoint keeps its confirmed steps.",
                    env.trace)


def _run(run) -> str:
    if run is None:
        raise NotAttempted()
    if not callable(run):
        raise Wrong(f"pass your function itself, run, not {type(run).__name__} {run!r}.")
    _probe(run)
    points = 0
    for setting, faults, job_id, replay in SETTINGS:
        report = explore(run, faults=faults, job_id=job_id)
        if not report.passed:
            raise _failure(report, setting, replay)
        points += len(report.results)
    _changed_plan(run)
    return (f"{points} crash points explored in {len(SETTINGS)} settings (healthy, lost reply, refused send, "
            "another job): every restart recovered with one email, no step redone and no blind resend; "
            "and a changed workflow was refused until migrated.")


exercise = Exercise(
    id="05.1", title="receipt-based recovery", run=_run,
    hints=("A restart only knows what the checkpoint store kept. Before the email goes out, what could you "
           "write down so that a restart knows an email *may* have gone out? And after it went out, what "
           "proves that it did?",
           "checkpoint.intend(op_id, step) before env.send(...); checkpoint.receive(Receipt(op_id=..., step=..., "
           "message_id=...)) and .confirm(step, message_id) after it, each saved with "
           "env.checkpoints.save(job_id, cp, token=token). env.op_id(job_id, step) gives an id that is the same "
           "on every run; cp.op_for(step) finds one already chosen. env.lookup(op_id) says ok (with the "
           "message id) or failed.",
           "Shape of a customer-visible step: op = cp.op_for(step) or env.op_id(...). If op is among cp.intents, "
           "look it up; otherwise save the intent. Send only if nothing was delivered. If the send says unknown, "
           "look it up. Not ok in the end? raise, so the next delivery tries again. Ok: save receipt + confirm "
           "in one checkpoint write. After the loop, env.ack(job_id, token=token, result=...)."),
)
