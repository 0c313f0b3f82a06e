"""Lab 05: a job's states, and recovering a workflow with operation receipts, each judged on
every schedule in a bound. Three graded steps, in the notebook's order:

* 05.1 `finish_job(jobs, job_id, do_step)`: moves a job through its states and stops when the
  job store refuses a move (a person cancelled it), played with a cancellation before each call;
* 05.2 `run_with_intent(job_id, env)`: records the intent and decides from the checkpoint, on
  the schedules below with a healthy provider (two jobs);
* 05.3 `run(job_id, env)`: also reconciles an unknown outcome by lookup, on all the settings.

For 05.3 (and 05.2, with its settings) the check searches every schedule of two workers
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

from shopops_lab import arguments
from shopops_lab.checkpoint import PUBLISH_WORKFLOW, Workflow
from shopops_lab.checks import answers, recovery_world
from shopops_lab.checks.base import Exercise, Wrong, attempt, describe, error_text, named, restart, watching
from shopops_lab.clock import FakeClock
from shopops_lab.crash import DEFAULT_INVARIANTS, ExplorationReport, Invariant, Observation, explore
from shopops_lab.effects import ProviderFault
from shopops_lab.errors import JobNotRunningError, ShopOpsError, SimulatedCrash, TransitionError
from shopops_lab.events import EventKind
from shopops_lab.explore import Replayed
from shopops_lab.explore import explore as search
from shopops_lab.explore import replay as replay_schedule
from shopops_lab.jobs import JOB_TRANSITIONS, JobState, JobStore
from shopops_lab.recovery import CrashPoint, Env, ReceiptRunner

__all__ = [
    "INTENT_SETTINGS",
    "SETTINGS",
    "exercise",
    "exploration",
    "intent",
    "replay",
    "states",
]

# (how a message names the setting, faults, job id)
SETTINGS = (
    ("a healthy email provider", (), "O-1001"),
    ("a lost reply (the email went out, the answer never came back)", (ProviderFault.DROP_REPLY,), "O-1001"),
    (
        "a lost request (the send timed out before reaching the provider: nothing went out)",
        (ProviderFault.LOSE_REQUEST,),
        "O-1001",
    ),
    ("a refused send (the provider said no, nothing went out)", (ProviderFault.FAIL,), "O-1001"),
    (
        "a lost reply on a second job, A-1002, after O-1001's email went out on the same provider",
        (ProviderFault.DROP_REPLY,),
        "A-1002",
    ),
)


class _AsWorker:
    """The learner's run as the check calls it: with a worker's view of each Env, and
    what every run returned noted, for the `returns_message_id` promise."""

    def __init__(self, run: Any, returned: weakref.WeakKeyDictionary[Env, list[Any]] | None = None) -> None:
        self.run = run
        self.__name__ = getattr(run, "__name__", "run")
        self.returned: weakref.WeakKeyDictionary[Env, list[Any]] = (
            weakref.WeakKeyDictionary() if returned is None else returned
        )

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
            return None  # effect_exactly_once says what went wrong
        for result in self.returned.get(obs.env, ()):
            if type(result) is not str or result != delivered[0]:  # a str, not a look-alike
                return (
                    f"a run that finished returned {describe(result)}, but the email that reached the "
                    f"customer is {delivered[0]}"
                )
        return None


def exploration(run: Any, faults=(), job_id: str = "O-1001") -> ExplorationReport:
    """Explore `run` the way the check does: as a worker (no inbox), with every promise."""
    worker = _AsWorker(run)
    invariants = (
        *DEFAULT_INVARIANTS,
        Invariant(
            name="returns_message_id",
            check=worker.returns_message_id,
            about="every run that finished returned the email's message id",
        ),
    )
    return explore(worker, faults=faults, job_id=job_id, invariants=invariants, fresh=_AsWorker.restarted)


def _probe(run) -> None:
    """One plain run on fresh stores: the pristine stub raises NotImplementedError here,
    and a run that hands the job to the kit's ReceiptRunner (its own receipt recovery,
    watched where the run runs) is told so."""
    fresh = restart(run)  # a copy: the learner's own memory stays as it was
    with watching(fresh, ReceiptRunner._perform) as handed:
        attempt(fresh, "O-1001", Env().for_worker())
    if handed:
        raise Wrong(
            "your run hands the job to the kit's ReceiptRunner, which already implements this recovery: "
            "the exercise is to write it yourself, with env's calls and the checkpoint's methods."
        )


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
        raise Wrong(
            f"your run never reached {crash}, so the changed-plan scenario could not stop it there: "
            "confirm each step in the checkpoint as soon as it is done.",
            env.trace,
        )
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
        raise Wrong(
            f"{story}; your run {'carried on' if not refused else 'raised, but only after running ' + ran} "
            "instead of refusing the v1 checkpoint. A changed plan is refused until someone "
            "migrates the checkpoint explicitly.",
            env.trace,
        )
    env.checkpoints.migrate("O-1001", "v2", lambda checkpoint: checkpoint)
    env.note("--- run 3, after migrating the checkpoint to v2 ---")
    returned, exc = attempt(restart(run), "O-1001", env.for_worker())
    if exc is not None:  # the learner's error, with the trace
        raise Wrong(f"{story}; after the checkpoint was migrated to v2, your run raised {error_text(exc)}", env.trace)
    sent = env.deliveries("O-1001", "publish")
    if env.regenerated or len(sent) != 1:
        what = (
            f"{env.regenerated[0]} ran again"
            if env.regenerated
            else f"publish reached the customer {len(sent)} times ({', '.join(sent) or 'never'})"
        )
        raise Wrong(
            f"{story}; after the migration to v2, {what}: a migrated checkpoint keeps its confirmed steps "
            "and the operations it already started.",
            env.trace,
        )
    if type(returned) is not str or returned != sent[0]:
        raise Wrong(
            f"{story}; after the migration your run finished and returned {describe(returned)}, but the email "
            f"that reached the customer is {sent[0]}: return its message id.",
            env.trace,
        )


def replay(run: Any, schedule: str, faults=(), job_id: str = "O-1001") -> Replayed:
    """Play one schedule from the check's message with `run`, step by step: what each
    worker did, and what broke. `print()` it, or `.diagram()` for the space-time picture."""
    faults = tuple(ProviderFault(f) for f in faults)
    setting = next((name for name, f, job in SETTINGS if f == faults and job == job_id), "your settings")
    return replay_schedule(recovery_world.scenario(setting, faults, job_id), run, schedule)


def _searched(run, setting: str, faults, job_id: str, name: str = "run") -> int:
    """Every schedule of the setting within the bound; the shortest breaking one is refused."""
    found = search(recovery_world.scenario(setting, faults, job_id), run)
    if found.counterexample is None:
        return found.schedules
    counter = found.counterexample
    args = "".join(
        [
            f", faults={[f.value for f in faults]!r}" if faults else "",
            f", job_id={job_id!r}" if job_id != "O-1001" else "",
        ]
    )
    n = len(counter.events)
    steps = f"{n} step{'s' if n != 1 else ''}"
    raise Wrong(
        f"with {setting}: {counter.problem} The shortest schedule that shows it ({steps}"
        f", searched within {found.bound.words.split(', with ')[0]}): {counter.words}. Replay it: "
        f"print(lab05.replay({name}, {counter.words!r}{args}))",
        counter.lines,
        counterexample=counter,
    )


def _probed(run) -> int:
    """The first part of 05.2 and 05.3: one plain run (the stub shows up here). It searched no schedule."""
    _probe(run)
    return 0


def _setting(setting: str, faults, job_id: str, name: str = "run"):
    """The part that searches one setting: what it finds is how many schedules it searched."""

    def searched(run) -> int:
        return _searched(run, setting, faults, job_id, named(run, name))

    return searched


def _changed_plans(run) -> int:
    """The last part of 05.3: the workflow's version changed under half-done jobs."""
    for crash in CHANGED_PLAN_CRASHES:
        _changed_plan(run, crash)
    return 0


def _summary(found: list[int]) -> str:
    schedules = sum(found)
    return (
        f"checked all {schedules:,} schedules of {recovery_world.bound('').words.split(', with ')[0]}, in "
        f"{len(SETTINGS)} settings (healthy, lost reply, lost request, refused send, a second job on the same "
        f"provider): the email reached the customer once, no step was redone, nothing was resent blind, the job was "
        f"acknowledged only once done and every run returned the email's message id; and a changed workflow was "
        f"refused until migrated, then finished without a second email."
    )


# ------------------------------------------------------------------ 05.2: intent, and a decision from the checkpoint
# The first step of the recovery: a healthy provider (a send is answered, or the worker dies),
# so what a restart must decide comes from the checkpoint alone. The same world and bound as
# 05.3, on two jobs.
INTENT_SETTINGS = (
    ("a healthy email provider", (), "O-1001"),
    ("a healthy email provider, on a second job, A-1002, after O-1001's email went out on it", (), "A-1002"),
)


def _intent_summary(found: list[int]) -> str:
    schedules = sum(found)
    return (
        f"checked all {schedules:,} schedules of {recovery_world.bound('').words.split(', with ')[0]}, with a "
        f"healthy provider on two jobs, the second after the first on the same provider: the email reached the "
        f"customer once, nothing was sent again without being looked up first, no step was redone, the job was "
        f"acknowledged only once done, and every run returned the email's message id."
    )


intent = Exercise(
    id="05.2",
    title="record the intent, decide from the checkpoint",
    answer="run_with_intent",
    parts=(_probed, *(_setting(*setting, "run_with_intent") for setting in INTENT_SETTINGS)),
    summary=_intent_summary,
    hints=(
        "A restart only knows what the checkpoint store kept. Before the email goes out, what could you "
        "write down so that a restart knows an email *may* have gone out? And after it went out, what "
        "proves that it did?",
        "checkpoint.intend(op_id, step) before env.send(...); checkpoint.receive(Receipt(op_id=..., step=..., "
        "message_id=...)) and .confirm(step, message_id) after it, each saved with "
        "env.checkpoints.save(job_id, cp, token=token). env.op_id(job_id, step) gives an id that is the same "
        "on every run; cp.op_for(step) finds one already chosen. env.lookup(op_id) says ok (with the "
        "message id) or failed.",
        "For a step the customer sees, the checkpoint decides. No intent stored: nothing went out yet, so store the "
        "intent first, then send. An intent with no receipt: an earlier run may have sent, so ask the provider under "
        "that same operation id, and send (under the same id) only if it says nothing went out. Receipt and "
        "confirmed step go in one write; the job is acknowledged only once every step is confirmed, and the run "
        "returns the email's message id.",
    ),
)


# ------------------------------------------------------------------ 05.3: an unknown outcome, reconciled by lookup
exercise = Exercise(
    id="05.3",
    title="reconcile an unknown outcome by lookup",
    answer="run",
    parts=(_probed, *(_setting(*setting) for setting in SETTINGS), _changed_plans),  # judged apart on idle slots
    summary=_summary,
    hints=(
        "Now the provider can time out. A send whose reply says *unknown* is neither a yes nor a no: which "
        "system knows what really happened, and under which name does it know the email?",
        "result.status is SendStatus.OK, FAILED or UNKNOWN. env.lookup(op_id) answers OK (with the message id) "
        "or FAILED. An exception your run raises makes the queue deliver the job again; a changed plan "
        "version is refused by env.resume with WorkflowVersionError.",
        "After the send, an unknown outcome is not an answer: look it up under the same operation id, and take the "
        "lookup's answer as the outcome. Delivered, by the reply or by the lookup: receipt and confirmation, as in "
        "05.2. Certainly not delivered: raise, so the next delivery decides again from the checkpoint (its intent is "
        "there, so it looks up, then sends under the same id).",
    ),
)


# ------------------------------------------------------------------ 05.1: job states, a wrong move refused
# The learner's `finish_job(jobs, job_id, do_step)` claims a job, runs and confirms its three
# steps, and completes it. A person may cancel the job at any moment; the job store then refuses
# the worker's next move (cancelled -> running or succeeded is not an edge of JOB_TRANSITIONS,
# and a cancelled job is not running). The check plays every moment: a cancellation just before
# each of the answer's calls (to the store or to do_step), and none. The record of what
# happened stays here: the answer gets a job store with a worker's calls, and do_step.
JOB_STEPS = ("fetch", "summarize", "publish")
_REFUSALS = (TransitionError, JobNotRunningError)
_CALL_LIMIT = 40


class _Spent(BaseException):
    """The answer kept calling after the limit: a BaseException, so its `except Exception` lets it through."""


class _JobStage:
    """One schedule: a job store with the learner's job (and a neighbour's), and the moment a
    person cancels it (before the answer's call number `cancel_at`; None: never)."""

    def __init__(self, cancel_at: int | None) -> None:
        self.jobs = JobStore(clock=FakeClock())
        self.jobs.submit("A-1002:delay-apology", {"case_id": "A-1002"})
        self.job_id = self.jobs.submit("O-1001:delay-apology", {"case_id": "O-1001"}).id
        self.cancel_at = cancel_at
        self.calls: list[str] = []  # every call the answer made, in order
        self.refused: tuple[int, str, ShopOpsError] | None = None  # (call number, call, error) of the first refusal
        self.done: list[str] = []  # steps do_step ran
        self.cancelled_before: str | None = None

    def call(self, name: str, action: Any) -> Any:
        """The answer's call `name`: the person's cancellation first, if this is its moment."""
        self.calls.append(name)
        if len(self.calls) > _CALL_LIMIT:
            raise _Spent()
        if (
            self.cancel_at == len(self.calls)
            and (self.jobs.get(self.job_id).state, JobState.CANCELLED) in JOB_TRANSITIONS
        ):  # a finished job can no longer be cancelled: the person is too late
            self.jobs.cancel(self.job_id, reason="the customer withdrew the request")
            self.cancelled_before = name
        try:
            return action()
        except _REFUSALS as exc:
            if self.refused is None:
                self.refused = (len(self.calls), name, exc)
            raise

    def facades(self) -> tuple[Any, Any]:
        stage, jobs = self, self.jobs

        class JobStore:
            """The job store, as a worker sees it: claim, confirm_step, complete, fail, get."""

            __slots__ = ()

            def claim(self, job_id, worker_id, *, lease_seconds):
                return stage.call("claim", lambda: jobs.claim(job_id, worker_id, lease_seconds=lease_seconds))

            def confirm_step(self, job_id, step_id, *, token):
                return stage.call(f"confirm_step({step_id!r})", lambda: jobs.confirm_step(job_id, step_id, token=token))

            def complete(self, job_id, *, token, result=None):
                return stage.call("complete", lambda: jobs.complete(job_id, token=token, result=result))

            def fail(self, job_id, *, token, error):
                return stage.call("fail", lambda: jobs.fail(job_id, token=token, error=error))

            def get(self, job_id):
                return stage.call("get", lambda: jobs.get(job_id))

            def __repr__(self) -> str:
                return "<JobStore: claim, confirm_step, complete, fail, get>"

        def do_step(step_id):
            """Run one step of the job (no customer-visible effect but the last); returns its artifact."""

            def run() -> str:
                arguments.choice("step_id", step_id, JOB_STEPS, f"pass one of {', '.join(JOB_STEPS)}")
                stage.done.append(step_id)
                return f"{step_id}-v1"

            return stage.call(f"do_step({step_id!r})", run)

        return JobStore(), do_step


def _job_story(stage: _JobStage) -> str:
    if stage.cancelled_before is None:
        return "when nobody cancels the job" if stage.cancel_at is None else "when a person's cancel comes too late"
    return f"when a person cancels the job just before your call number {stage.cancel_at} ({stage.cancelled_before})"


def _judge_job(stage: _JobStage, returned: Any, error: BaseException | None) -> None:
    story, state = _job_story(stage), stage.jobs.get(stage.job_id).state
    if isinstance(error, _Spent) or len(stage.calls) > _CALL_LIMIT:
        raise Wrong(
            f"{story}, your code made more than {_CALL_LIMIT} calls: after a refusal, stop instead of trying again.",
            stage.calls[:12],
        )
    if stage.refused is not None:
        n, call, refusal = stage.refused
        said = f"{story}, the store refused {call} ({type(refusal).__name__}: {str(refusal).rstrip('.')})"
        if error is not None and error is refusal or isinstance(error, _REFUSALS):
            raise Wrong(
                f"{said}, and your function raised it. A refused move is the store's answer, not a crash: "
                "stop the work and report the job's state."
            )
        later = stage.calls[n:]
        if later and later != ["get"] * len(later):
            raise Wrong(
                f"{said}; then your code went on to {later[0]}. A refused move is final: nothing more may be "
                "done or written for this job.",
                stage.calls,
            )
    if error is not None:
        raise Wrong(f"{story}, your function raised {error_text(error)}", stage.calls)
    if stage.cancelled_before is None:
        log = stage.jobs.log.where(EventKind.JOB_STEP_CONFIRMED, item_id=stage.job_id)
        confirmed = [e.info.get("step") for e in log]
        if state is not JobState.SUCCEEDED or tuple(stage.done) != JOB_STEPS:
            raise Wrong(
                f"{story}, the job ended {state.value} after the steps [{', '.join(stage.done)}]: run "
                f"{', '.join(JOB_STEPS)} in order, confirm each, and complete the job.",
                stage.calls,
            )
        if tuple(confirmed) != JOB_STEPS:
            raise Wrong(
                f"{story}, the job record confirmed [{', '.join(map(str, confirmed))}] of "
                f"{', '.join(JOB_STEPS)}: confirm each step once it is done, so a worker that takes the job "
                "over knows where to resume.",
                stage.calls,
            )
    if type(returned) not in (JobState, str) or returned != state.value:
        raise Wrong(
            f"{story}, finish_job returned {describe(returned)}, but the store says the job is "
            f"{state.value}: return the job's state as the store has it."
        )


def _states(finish_job) -> str:
    plain = _JobStage(None)
    jobs, do_step = plain.facades()
    returned, error = _attempt_job(finish_job, jobs, plain, do_step)
    _judge_job(plain, returned, error)
    for moment in range(1, len(plain.calls) + 1):
        stage = _JobStage(moment)
        jobs, do_step = stage.facades()
        returned, error = _attempt_job(finish_job, jobs, stage, do_step)
        _judge_job(stage, returned, error)
    return (
        f"checked all {len(plain.calls) + 1} schedules (a person cancels the job just before any one of the "
        f"{len(plain.calls)} calls your function makes when left alone, or never): the job moved queued, running, "
        "succeeded when left alone, and each refused move stopped the work and was reported as the job's state."
    )


def _attempt_job(finish_job, jobs: Any, stage: _JobStage, do_step: Any) -> tuple[Any, BaseException | None]:
    try:
        return attempt(restart(finish_job), jobs, stage.job_id, do_step)
    except _Spent as spent:
        return None, spent


states = Exercise(
    id="05.1",
    title="a wrong move, refused",
    answer="finish_job",
    run=_states,
    hints=(
        "Which edges leave `cancelled` in the job's transition table? What does the store do when a worker "
        "asks for a move that is not an edge?",
        "jobs.claim(...) on a cancelled job and jobs.complete(...) raise TransitionError; jobs.confirm_step(...) "
        "on a job that is not running raises JobNotRunningError. jobs.get(job_id).state is the job's state.",
        "The store's refusal is an answer, not a crash, and any of your moves can be the one refused: treat them all "
        "alike. The first refusal ends the work (nothing more done or written), and the job's state as the store "
        "reports it is what you return. Looking first does not help: the person can cancel right after you looked.",
    ),
)


# Its quizzes (the right option and every explanation) are kept with the answer keys, loaded on
# first use (`checks.answers`): importing this module loads none of them.
__getattr__ = answers.lazy("lab05", ("INTENT_QUIZ", "CHECKPOINT_QUIZ"))
