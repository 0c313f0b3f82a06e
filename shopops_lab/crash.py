"""The crash explorer: stop a runner at every point it passes, restart it, and check
what the customer and the checkpoint store saw.

How `explore(run)` works:

1. A clean run on fresh stores lists the crash points the runner passes, in order:
   before and after each step's action, after each checkpoint write (named by what the
   write added: an intent, a receipt, a confirmed step), before and after the ack.
2. For each point (and once without a crash): fresh stores (`Env`), a run that crashes
   there, then restarts until a run returns (at most MAX_RUNS runs in all), then one
   more delivery of the finished job (a duplicate the queue handed out before the ack;
   it must change nothing). A crash is a process death: the next run is the runner as a
   freshly started process has it (`checks.base.restart`: nothing it kept in memory
   survives). An acknowledged job is never delivered again, as on a real queue: a run
   that acked and then died leaves whatever it had not done undone.
3. Each invariant reads what happened and either holds or says what broke.

`run` is any callable `run(job_id, env)`, e.g. `ReceiptRunner()` or a function you
write (see `shopops_lab.recovery.Env` for what it may call). Crashes are injected by
the Env, so the function needs no crash code; a function with a third parameter
`crash_at=None` works too. Everything is deterministic: the same exploration gives the
same report, character for character.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from shopops_lab.checkpoint import PUBLISH_WORKFLOW, Workflow
from shopops_lab.checks.base import restart
from shopops_lab.effects import ProviderFault
from shopops_lab.errors import BadArgumentError, SimulatedCrash
from shopops_lab.recovery import CrashPoint, Env

__all__ = ["DEFAULT_INVARIANTS", "ExplorationReport", "Invariant", "Observation", "PointResult", "explore"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Observation:
    """Everything an invariant may read after one crash point's runs."""

    job_id: str
    workflow: Workflow
    env: Env
    outcomes: tuple[str, ...]  # one line per run: "crashed at ...", "returned ...", "raised ..."
    finished: bool  # the last run returned normally


@dataclass(frozen=True, kw_only=True, slots=True)
class Invariant:
    """A property every crash point must keep. `check` returns None when it holds,
    else one line saying what broke, with the evidence."""

    name: str
    check: Callable[[Observation], str | None]
    about: str = ""


def _effect_exactly_once(obs: Observation) -> str | None:
    problems = []
    for step in obs.workflow.steps:
        if step.effect:
            delivered = obs.env.deliveries(obs.job_id, step.id)
            if len(delivered) != 1:
                problems.append(
                    f"{step.id} reached the customer {len(delivered)} times"
                    + (f" ({', '.join(delivered)})" if delivered else "")
                )
    return "; ".join(problems) or None


def _artifacts_reused(obs: Observation) -> str | None:
    if obs.env.regenerated:
        return f"{obs.env.regenerated[0]} ran again after it was confirmed"
    first: dict[str, str] = {}
    for checkpoint in obs.env.checkpoints.history(obs.job_id):
        for step, artifact in checkpoint.artifacts.items():
            if first.setdefault(step, artifact) != artifact:
                return f"{step} was replaced after it was confirmed: {first[step]} then {artifact}"
    return None


def _plan_version_kept(obs: Observation) -> str | None:
    for checkpoint in obs.env.checkpoints.history(obs.job_id):
        if checkpoint.workflow_version != obs.workflow.version:
            return (
                f"a checkpoint was written under {checkpoint.workflow_version}, "
                f"but the workflow is {obs.workflow.version}"
            )
    return None


def _completed(obs: Observation) -> str | None:
    checkpoint = obs.env.checkpoints.load(obs.job_id)
    done = checkpoint.completed if checkpoint is not None else ()
    acked = any(job_id == obs.job_id for job_id, _, _ in obs.env.acks)
    if acked and done != obs.workflow.step_ids:
        return (
            f"the job was acknowledged with the checkpoint confirming only [{', '.join(done)}], and a queue "
            "never delivers an acknowledged job again: the rest is never done"
        )
    if not obs.finished and not acked:  # died after its ack: the job is done all the same
        return f"the last run did not finish: {obs.outcomes[-1]}"
    if done != obs.workflow.step_ids:
        return f"the checkpoint confirms [{', '.join(done)}], not [{', '.join(obs.workflow.step_ids)}]"
    if not any(job_id == obs.job_id for job_id, _, _ in obs.env.acks):
        return "the job was never acknowledged"
    return None


def _no_blind_resend(obs: Observation) -> str | None:
    if obs.env.blind_resends:
        return f"{obs.env.blind_resends[0]} was sent again without looking it up first"
    return None


DEFAULT_INVARIANTS: tuple[Invariant, ...] = (
    Invariant(
        name="effect_exactly_once",
        check=_effect_exactly_once,
        about="each customer-visible step reached the customer exactly once",
    ),
    Invariant(
        name="artifacts_reused",
        check=_artifacts_reused,
        about="no step ran again, or changed its artifact, after it was confirmed",
    ),
    Invariant(
        name="plan_version_kept",
        check=_plan_version_kept,
        about="every checkpoint was written under the workflow's own version",
    ),
    Invariant(
        name="completed", check=_completed, about="the job finished: every step confirmed, the delivery acknowledged"
    ),
    Invariant(
        name="no_blind_resend",
        check=_no_blind_resend,
        about="an operation whose outcome was not a known failure was looked up, not sent again",
    ),
)


@dataclass(frozen=True, kw_only=True, slots=True)
class PointResult:
    """One row of the report: a crash point (None for the run without a crash)."""

    point: CrashPoint | None
    held: Mapping[str, bool]
    violations: Mapping[str, str]  # invariant (or "explorer") -> what broke
    outcomes: tuple[str, ...]
    trace: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.violations

    @property
    def label(self) -> str:
        return "(no crash)" if self.point is None else str(self.point)


@dataclass(frozen=True, kw_only=True, slots=True)
class ExplorationReport:
    """Which crash points broke which invariants, with the trace of the first failure."""

    runner: str
    workflow: Workflow
    faults: tuple[str, ...]
    invariants: tuple[str, ...]
    results: tuple[PointResult, ...]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> tuple[PointResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    @property
    def first_failure(self) -> PointResult | None:
        failures = self.failures
        return failures[0] if failures else None

    def result(self, point: CrashPoint | str | None) -> PointResult:
        """The row of `point` ('after_effect(publish)', a CrashPoint, or None)."""
        wanted = CrashPoint.parse(point) if isinstance(point, str) else point
        for row in self.results:
            if row.point == wanted:
                return row
        raise BadArgumentError(
            field="point",
            problem=f"{point!s} was not explored",
            fix=f"use one of: {', '.join(r.label for r in self.results)}",
        )

    def table(self) -> str:
        """A fixed-width table: one row per crash point, one column per invariant."""
        first = max(len("crash point"), *(len(r.label) for r in self.results))
        widths = [first, *(max(4, len(name)) for name in self.invariants)]
        header = ["crash point", *self.invariants]
        lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(), "  ".join("-" * w for w in widths)]
        for row in self.results:
            cells = [row.label, *("ok" if row.held[name] else "FAIL" for name in self.invariants)]
            line = "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
            if "explorer" in row.violations:
                line += f"  ! {row.violations['explorer']}"
            lines.append(line)
        return "\n".join(lines)

    def __str__(self) -> str:
        faults = ", ".join(self.faults) if self.faults else "none"
        lines = [
            f"crash exploration of {self.runner} on workflow {self.workflow}, faults: {faults}",
            "",
            self.table(),
            "",
        ]
        failures = self.failures
        if not failures:
            lines.append(f"all {len(self.results)} rows passed.")
            return "\n".join(lines)
        lines.append(f"{len(failures)} of {len(self.results)} rows broke an invariant:")
        for row in failures:
            for name, what in row.violations.items():
                lines.append(f"  {row.label}: {name}: {what}")
        first = failures[0]
        lines += ["", f"trace of the first failure, {first.label}:"]
        lines += [f"  {line}" for line in first.trace]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"ExplorationReport(runner={self.runner!r}, {len(self.results)} rows, {len(self.failures)} failing)"


def explore(
    run: Callable[..., Any],
    workflow: Workflow | None = None,
    *,
    invariants: Iterable[Invariant] = DEFAULT_INVARIANTS,
    faults: Iterable[ProviderFault | str] = (),
    job_id: str = "O-1001",
    fresh: Callable[[Any], Any] = restart,
) -> ExplorationReport:
    """Crash `run` at every point it passes on `workflow` and check `invariants` after
    each recovery. `faults` are injected into the provider of every fresh Env, e.g.
    `faults=[ProviderFault.DROP_REPLY]` makes the first delivery lose its reply. Every run
    is `fresh(run)`, the runner as a new process has it (a check that wraps the learner's
    function restarts the function inside its wrapper)."""
    if not callable(run):
        raise BadArgumentError(
            field="run",
            problem=f"is {run!r}",
            fix="pass a callable run(job_id, env), e.g. ReceiptRunner() or your function",
        )
    if not isinstance(job_id, str) or not job_id:
        raise BadArgumentError(field="job_id", problem=f"is {job_id!r}", fix="pass a case id, e.g. 'O-1001'")
    workflow = PUBLISH_WORKFLOW if workflow is None else workflow
    if not isinstance(workflow, Workflow):
        raise BadArgumentError(
            field="workflow",
            problem=f"is a {type(workflow).__name__}",
            fix="pass a Workflow, or leave it out for fetch, summarize, publish",
        )
    invariants = tuple(invariants) if isinstance(invariants, (list, tuple)) else ()
    if not invariants or not all(isinstance(i, Invariant) for i in invariants):
        raise BadArgumentError(
            field="invariants",
            problem=f"is {invariants!r}",
            fix="pass Invariant(name=..., check=...) objects, e.g. DEFAULT_INVARIANTS",
        )
    discovery = Env(workflow, faults=faults)  # checks the faults too
    faults = discovery.faults

    def new_env() -> Env:
        return Env(workflow, faults=faults)

    discovery.arm(None)
    _deliver(run, job_id, discovery, fresh)
    points = [None, *discovery.reached]
    results = tuple(_explore_point(run, job_id, workflow, point, new_env(), invariants, fresh) for point in points)
    return ExplorationReport(
        runner=_name(run),
        workflow=workflow,
        faults=tuple(f.value for f in faults),
        invariants=tuple(i.name for i in invariants),
        results=results,
    )


def _explore_point(
    run: Callable[..., Any],
    job_id: str,
    workflow: Workflow,
    point: CrashPoint | None,
    env: Env,
    invariants: tuple[Invariant, ...],
    fresh: Callable[[Any], Any],
) -> PointResult:
    env.arm(point)
    outcomes = _deliver(run, job_id, env, fresh)
    finished = outcomes[-1][1]
    if finished:  # a duplicate handed out before the ack runs after it: it must change nothing
        outcomes.append(_attempt(fresh(run), job_id, env, len(outcomes) + 1))
        finished = outcomes[-1][1]
    problems = {}
    if point is not None and env.crashed_at is None:
        problems["explorer"] = "the runner never reached this point (is it deterministic?)"
    swallowed = [n for n, (line, _) in enumerate(outcomes, 1) if line.endswith(_SWALLOWED)]
    if swallowed:
        problems["explorer"] = f"run {swallowed[0]} caught the crash at {env.crashed_at}; let SimulatedCrash propagate"
    obs = Observation(
        job_id=job_id, workflow=workflow, env=env, outcomes=tuple(line for line, _ in outcomes), finished=finished
    )
    held = {}
    for invariant in invariants:
        broke = invariant.check(obs)
        held[invariant.name] = broke is None
        if broke is not None:
            problems[invariant.name] = broke
    ordered = {name: problems[name] for name in [*(i.name for i in invariants), "explorer"] if name in problems}
    return PointResult(
        point=point,
        held=MappingProxyType(held),
        violations=MappingProxyType(ordered),
        outcomes=obs.outcomes,
        trace=tuple(env.trace),
    )


MAX_RUNS = 3
_SWALLOWED = " (after catching the crash)"


def _deliver(run: Callable[..., Any], job_id: str, env: Env, fresh: Callable[[Any], Any]) -> list[tuple[str, bool]]:
    """Deliver the job until a run returns, at most MAX_RUNS times (a crash, a failed
    effect and a retry fit); returns each run's (outcome line, returned normally). Each
    run is a fresh process (`restart`); an acknowledged job is not delivered again."""
    outcomes: list[tuple[str, bool]] = []
    while len(outcomes) < MAX_RUNS:
        outcomes.append(_attempt(fresh(run), job_id, env, len(outcomes) + 1))
        if outcomes[-1][1]:
            break
        if _acked(env, job_id):
            env.note(f"{job_id} was acknowledged: the queue does not deliver it again")
            break
    return outcomes


def _acked(env: Env, job_id: str) -> bool:
    return any(acked == job_id for acked, _, _ in env.acks)


def _attempt(run: Callable[..., Any], job_id: str, env: Env, n: int) -> tuple[str, bool]:
    """One delivery of the job to the runner; returns (what happened, returned normally)."""
    env.note(f"--- run {n} ---")
    crashed_before = env.crashed_at
    try:
        result = run(job_id, env)
    except SimulatedCrash:
        line, finished = f"run {n} crashed at {env.crashed_at}", False
    except Exception as exc:  # a learner's runner may raise anything; the report shows it
        line, finished = f"run {n} raised {type(exc).__name__}: {exc}", False
    else:
        line, finished = f"run {n} returned {result!r}", True
        if env.crashed_at is not crashed_before:
            line += _SWALLOWED
    env.note(line)
    return line, finished


def _name(run: Callable[..., Any]) -> str:
    return getattr(run, "__name__", None) or type(run).__name__
