"""Lab 05: recover a workflow with operation receipts, judged on every schedule in a bound.

The learner writes `run(job_id, env)`. The check searches every schedule of two workers
within a stated bound (`shopops_lab.explore`, with the world of
`shopops_lab.checks.recovery_world`): the worker's process may die at any kit call it makes
(before the call: the request is lost; after it: the reply is lost), a lease may run out,
the queue may hand the first delivery to both workers, and a run that raised is delivered
again; an acknowledged job never is, and a restarted worker runs the answer afresh
(`restart`: nothing it kept in memory survives). It does so with a healthy provider, a lost
reply, a lost request, a refused send, and on a second job; then it changes the workflow
version under half-done jobs. The runner gets what a real worker has (receipts and
`lookup`, no inbox) and must return the message id of the email that reached the
customer. A failure names the setting and the broken promise, then the shortest schedule
that breaks it and the line that replays it (`replay(run, schedule)`): what happened,
never what to write. `exploration(run, ...)` shows the crash-point table of one setting.
"""
from __future__ import annotations

import weakref
from typing import Any

from shopops_lab.checkpoint import PUBLISH_WORKFLOW, Workflow
from shopops_lab.checks import recovery_world
from shopops_lab.checks.base import Exercise, Wrong, attempt, describe, error_text, restart, watching
from shopops_lab.crash import DEFAULT_INVARIANTS, ExplorationReport, Invariant, Observation, explore
from shopops_lab.effects import ProviderFault
from shopops_lab.errors import SimulatedCrash
from shopops_lab.explore import Replayed
from shopops_lab.explore import explore as search
from shopops_lab.explore import replay as replay_schedule
from shopops_lab.recovery import CrashPoint, Env, ReceiptRunner
from shopops_lab.widgets.quiz import Quiz

__all__ = ["CHECKPOINT_QUIZ", "INTENT_QUIZ", "SETTINGS", "exercise", "exploration", "replay"]

# (how a message names the setting, faults, job id)
SETTINGS = (
    ("a healthy email provider", (), "O-1001"),
    ("a lost reply (the email went out, the answer never came back)", (ProviderFault.DROP_REPLY,), "O-1001"),
    ("a lost request (the send timed out before reaching the provider: nothing went out)",
     (ProviderFault.LOSE_REQUEST,), "O-1001"),
    ("a refused send (the provider said no, nothing went out)", (ProviderFault.FAIL,), "O-1001"),
    ("a lost reply on job A-1002", (ProviderFault.DROP_REPLY,), "A-1002"),
)
class _AsWorker:
    """The learner's run as the check calls it: with a worker's view of each Env, and
    what every run returned noted, for the `returns_message_id` promise."""

    def __init__(self, run: Any, returned: weakref.WeakKeyDictionary[Env, list[Any]] | None = None) -> None:
        self.run = run
        self.__name__ = getattr(run, "__name__", "run")
        self.returned: weakref.WeakKeyDictionary[Env, list[Any]] = (
            weakref.WeakKeyDictionary() if returned is None else returned)

    def restarted(self) -> _AsWorker:
        """The learner's run as a new worker process has it (nothing it kept in memory
        survives), still noting what every run returned."""
        return _AsWorker(restart(self.run), self.returned)

    def __call__(self, job_id: str, env: Env) -> Any:
        result = self.run(job_id, env.for_worker())
        self.returned.setdefault(env, []).append(result)
        return result

    def returns_message_id(self, obs: Observation) -> str | None:
        step = [s for s in obs.workflow.steps if s.effect][-1]
        delivered = obs.env.deliveries(obs.job_id, step.id)
        if len(delivered) != 1:
            return None   # effect_exactly_once says what went wrong
        for result in self.returned.get(obs.env, ()):
            if type(result) is not str or result != delivered[0]:   # a str, not a look-alike
                return (f"a run that finished returned {describe(result)}, but the email that reached the "
                        f"customer is {delivered[0]}")
        return None


def exploration(run: Any, faults=(), job_id: str = "O-1001") -> ExplorationReport:
    """Explore `run` the way the check does: as a worker (no inbox), with every promise."""
    worker = _AsWorker(run)
    invariants = (*DEFAULT_INVARIANTS, Invariant(name="returns_message_id", check=worker.returns_message_id,
                                                 about="every run that finished returned the email's message id"))
    return explore(worker, faults=faults, job_id=job_id, invariants=invariants, fresh=_AsWorker.restarted)


def _probe(run) -> None:
    """One plain run on fresh stores: the pristine stub raises NotImplementedError here,
    and a run that hands the job to the kit's ReceiptRunner (its own receipt recovery,
    watched where the run runs) is told so."""
    fresh = restart(run)   # a copy: the learner's own memory stays as it was
    with watching(fresh, ReceiptRunner._perform) as handed:
        attempt(fresh, "O-1001", Env().for_worker())
    if handed:
        raise Wrong("your run hands the job to the kit's ReceiptRunner, which already implements this recovery: "
                    "the exercise is to write it yourself, with env's calls and the checkpoint's methods.")


def _deliver(run, env: Env) -> BaseException | None:
    """One delivery of O-1001 to the learner's run as a worker; what it raised, if anything:
    the planned crash (control flow, so `attempt` lets it through), a refusal, or the
    learner's error."""
    try:
        return attempt(run, "O-1001", env.for_worker())[1]
    except SimulatedCrash as crash:
        return crash


# Where a v1 worker dies before v2 is deployed: with the summary confirmed, and right
# after its email went out (the intent is saved, the receipt is not).
CHANGED_PLAN_CRASHES = (CrashPoint.after_checkpoint("summarize"), CrashPoint.after_effect("publish"))


def _changed_plan(run, crash: CrashPoint) -> None:
    """Half-done under v1, then v2 is deployed: refuse; after an explicit migration, finish
    with one email, without regenerating the summary, returning the email's message id."""
    env = Env()
    env.arm(crash)
    env.note(f"--- run 1, workflow v1, crashes at {crash} ---")
    _deliver(restart(run), env)
    if env.crashed_at is None:
        raise Wrong(f"your run never reached {crash}, so the changed-plan scenario could not stop it there: "
                    "confirm each step in the checkpoint as soon as it is done.", env.trace)
    stored = env.checkpoints.load("O-1001")
    done = ", ".join(stored.completed) if stored is not None and stored.completed else "nothing"
    story = f"O-1001 was half done under workflow v1 (stopped at {crash}, confirmed: {done}) when v2 was deployed"
    env.workflow = Workflow(version="v2", steps=PUBLISH_WORKFLOW.steps)
    env.arm(None)
    effects = len(env.effects)
    env.note("--- run 2, workflow v2 deployed, checkpoint not migrated ---")
    refused = _deliver(restart(run), env) is not None
    if not refused or len(env.effects) != effects:
        ran = ", ".join(env.effects[effects:]) or "nothing"
        raise Wrong(f"{story}; your run {'carried on' if not refused else 'raised, but only after running ' + ran} "
                    "instead of refusing the v1 checkpoint. A changed plan is refused until someone "
                    "migrates the checkpoint explicitly.", env.trace)
    env.checkpoints.migrate("O-1001", "v2", lambda checkpoint: checkpoint)
    env.note("--- run 3, after migrating the checkpoint to v2 ---")
    returned, exc = attempt(restart(run), "O-1001", env.for_worker())
    if exc is not None:  # the learner's error, with the trace
        raise Wrong(f"{story}; after the checkpoint was migrated to v2, your run raised {error_text(exc)}",
                    env.trace)
    sent = env.deliveries("O-1001", "publish")
    if env.regenerated or len(sent) != 1:
        what = (f"{env.regenerated[0]} ran again" if env.regenerated
                else f"publish reached the customer {len(sent)} times ({', '.join(sent) or 'never'})")
        raise Wrong(f"{story}; after the migration to v2, {what}: a migrated checkpoint keeps its confirmed steps "
                    "and the operations it already started.", env.trace)
    if type(returned) is not str or returned != sent[0]:
        raise Wrong(f"{story}; after the migration your run finished and returned {describe(returned)}, but the email "
                    f"that reached the customer is {sent[0]}: return its message id.", env.trace)


def replay(run: Any, schedule: str, faults=(), job_id: str = "O-1001") -> Replayed:
    """Play one schedule from the check's message with `run`, step by step: what each
    worker did, and what broke. `print()` it, or `.diagram()` for the space-time picture."""
    faults = tuple(ProviderFault(f) for f in faults)
    setting = next((name for name, f, job in SETTINGS if f == faults and job == job_id), "your settings")
    return replay_schedule(recovery_world.scenario(setting, faults, job_id), run, schedule)


def _searched(run, setting: str, faults, job_id: str) -> int:
    """Every schedule of the setting within the bound; the shortest breaking one is refused."""
    found = search(recovery_world.scenario(setting, faults, job_id), run)
    if found.counterexample is None:
        return found.schedules
    counter = found.counterexample
    args = "".join([f", faults={[f.value for f in faults]!r}" if faults else "",
                    f", job_id={job_id!r}" if job_id != "O-1001" else ""])
    n = len(counter.events)
    steps = f"{n} step{'s' if n != 1 else ''}"
    raise Wrong(f"with {setting}: {counter.problem} The shortest schedule that shows it ({steps}"
                f", searched within {found.bound.words.split(', with ')[0]}): {counter.words}. Replay it: "
                f"print(lab05.replay(run, {counter.words!r}{args}))", counter.lines)


def _run(run) -> str:
    _probe(run)
    schedules = sum(_searched(run, setting, faults, job_id) for setting, faults, job_id in SETTINGS)
    for crash in CHANGED_PLAN_CRASHES:
        _changed_plan(run, crash)
    return (f"checked all {schedules:,} schedules of {recovery_world.bound('').words.split(', with ')[0]}, in "
            f"{len(SETTINGS)} settings (healthy, lost reply, lost request, refused send, another job): the email "
            "reached the customer once, no step was redone, nothing was resent blind, the job was acknowledged only "
            "once done and every run returned the email's message id; and a changed workflow was refused until "
            "migrated, then finished without a second email.")


exercise = Exercise(
    id="05.1", title="receipt-based recovery", answer="run", run=_run,
    hints=("A restart only knows what the checkpoint store kept. Before the email goes out, what could you "
           "write down so that a restart knows an email *may* have gone out? And after it went out, what "
           "proves that it did?",
           "checkpoint.intend(op_id, step) before env.send(...); checkpoint.receive(Receipt(op_id=..., step=..., "
           "message_id=...)) and .confirm(step, message_id) after it, each saved with "
           "env.checkpoints.save(job_id, cp, token=token). env.op_id(job_id, step) gives an id that is the same "
           "on every run; cp.op_for(step) finds one already chosen. env.lookup(op_id) says ok (with the "
           "message id) or failed.",
           "Shape of a customer-visible step: reuse the operation id the checkpoint already chose, or make the "
           "stable one. An intent already stored means an earlier run may have sent: ask the provider before "
           "anything else; no intent yet: store one first. Send only when nothing was delivered, and ask again when "
           "the answer is unknown. Not delivered in the end? raise, so the next delivery tries again. Delivered: "
           "store the receipt and the confirmed step in one write. Acknowledge the job only once every step is "
           "confirmed, and return the email's message id."),
)


# ------------------------------------------------------------------ quizzes
# Kept here, not in the notebook, so the cell that shows a quiz does not show its answer.

INTENT_QUIZ = Quiz(
    "A run crashed after writing the intent O-1001:publish:v1. The restart finds the intent and no "
    "receipt. What should it do first?",
    ["Send the email again under a fresh key, to be sure it goes out.",
     "Mark publish as confirmed: the intent proves the email was sent.",
     "Look the operation up with the provider, under O-1001:publish:v1.",
     "Re-run summarize, then send the new summary."],
    2,
    ["A fresh key defeats the provider's dedupe: if the first email went out, Jordan gets two.",
     "The intent is written before the send: the worker may have died before sending anything.",
     "The intent says the email may have gone out; only the provider knows. Delivered: record the "
     "receipt. Not delivered: send under the same id.",
     "summary-v2 was never approved, and the question of the first email is still open."],
    hint="An intent without a receipt is a question, not an answer.")

CHECKPOINT_QUIZ = Quiz(
    "Which of these belongs in O-1001's checkpoint so a restart repeats nothing irreversible?",
    ["The full conversation with the model, so the agent can re-read it and decide again.",
     "The plan version, the confirmed steps with their artifacts, and intents and receipts.",
     "The worker's process id and the time it started.",
     "Only the last confirmed step: everything else can be recomputed."],
    1,
    ["A transcript explains a decision; resuming from it means deciding again, maybe differently.",
     "Those are the decisions: which plan, what is done, what it produced, what went out.",
     "A new worker resumes the job; the old worker's identity does not help it.",
     "Recomputing summarize makes summary-v2, which nobody approved; and the email needs its receipt."],
    hint="What would be different if the step ran a second time?")
