"""Recovery: run a checkpointed workflow, crash it anywhere, and resume it.

Two runners for the same workflow (fetch, summarize, publish) show the window that a
plain checkpoint leaves open:

* `NaiveCheckpointRunner` does a step and then checkpoints it. A crash after the
  publish went out but before the checkpoint was written makes the restart publish again.
* `ReceiptRunner` writes an *intent* (the operation id) before the side effect and a
  *receipt* after it. On restart, an intent without a receipt is an open question, and
  it asks the provider (`lookup(op_id)`) instead of guessing. The same question is asked
  when a reply is lost (SendStatus.UNKNOWN).

A runner is any callable `run(job_id, env)`; `Env` bundles everything it may touch and
is where crashes are injected, so a runner needs no crash code of its own (see
`shopops_lab.crash.explore`, which crashes a runner at every point it passes).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shopops_lab import arguments
from shopops_lab.checkpoint import PUBLISH_WORKFLOW, Checkpoint, CheckpointStore, Receipt, Workflow, WorkflowStep
from shopops_lab.clock import Clock, component_clock, resolve
from shopops_lab.effects import (
    ChannelAdapter,
    EmailAdapter,
    ProviderFault,
    SendResult,
    SendStatus,
)
from shopops_lab.errors import (
    BadArgumentError,
    EffectFailedError,
    SimulatedCrash,
    WorkflowVersionError,
)
from shopops_lab.events import EventKind, EventLog, component_log
from shopops_lab.payloads import itself, state_copy

__all__ = ["CrashPoint", "Env", "NaiveCheckpointRunner", "PointKind", "ReceiptRunner", "WorkerEnv"]


# ---------------------------------------------------------------------- crash points
class PointKind(StrEnum):
    BEFORE_EFFECT = "before_effect"  # the step's action is about to run
    AFTER_EFFECT = "after_effect"  # the action ran; nothing about it is checkpointed yet
    AFTER_INTENT = "after_intent"  # a checkpoint with a new intent was written
    AFTER_RECEIPT = "after_receipt"  # a checkpoint with a new receipt was written
    AFTER_CHECKPOINT = "after_checkpoint"  # a checkpoint confirming the step was written
    AFTER_SAVE = "after_save"  # any other checkpoint write
    BEFORE_ACK = "before_ack"  # all done, the delivery not yet acknowledged
    AFTER_ACK = "after_ack"  # acknowledged


@dataclass(frozen=True, kw_only=True, slots=True)
class CrashPoint:
    """A named place to stop a runner: `after_effect(publish)`. `nth` picks a later
    occurrence when a runner passes the same place more than once in one run."""

    __deepcopy__ = itself

    kind: PointKind
    step: str | None = None
    nth: int = 1

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", PointKind(self.kind))
        except ValueError:
            raise BadArgumentError(
                field="kind", problem=f"is {self.kind!r}", fix=f"use one of {', '.join(k.value for k in PointKind)}"
            ) from None
        arguments.whole("nth", self.nth, 1, "pass a whole number >= 1")

    @classmethod
    def before_effect(cls, step: str) -> CrashPoint:
        return cls(kind=PointKind.BEFORE_EFFECT, step=step)

    @classmethod
    def after_effect(cls, step: str) -> CrashPoint:
        return cls(kind=PointKind.AFTER_EFFECT, step=step)

    @classmethod
    def after_intent(cls, step: str) -> CrashPoint:
        return cls(kind=PointKind.AFTER_INTENT, step=step)

    @classmethod
    def after_receipt(cls, step: str) -> CrashPoint:
        return cls(kind=PointKind.AFTER_RECEIPT, step=step)

    @classmethod
    def after_checkpoint(cls, step: str) -> CrashPoint:
        return cls(kind=PointKind.AFTER_CHECKPOINT, step=step)

    @classmethod
    def before_ack(cls) -> CrashPoint:
        return cls(kind=PointKind.BEFORE_ACK)

    @classmethod
    def after_ack(cls) -> CrashPoint:
        return cls(kind=PointKind.AFTER_ACK)

    @classmethod
    def parse(cls, text: str) -> CrashPoint:
        """The inverse of str(): 'after_effect(publish)', 'before_ack', 'after_save#2'."""
        match = re.fullmatch(r"(\w+)(?:\(([\w-]+)\))?(?:#(\d+))?", text.strip()) if isinstance(text, str) else None
        if match is None:
            raise BadArgumentError(
                field="text", problem=f"is {text!r}", fix="write a point like 'after_effect(publish)' or 'before_ack'"
            )
        kind, step, nth = match.groups()
        return cls(kind=kind, step=step, nth=int(nth or 1))  # type: ignore[arg-type]  # __post_init__ makes a PointKind of it

    def __str__(self) -> str:
        text = self.kind.value if self.step is None else f"{self.kind.value}({self.step})"
        return text if self.nth == 1 else f"{text}#{self.nth}"


# ---------------------------------------------------------------------- the runner's world
_ARTIFACT_NAMES = {"fetch": "source", "summarize": "summary"}


class Env:
    """Everything a runner may touch, bundled so a crash can be injected at any boundary
    and a restart (calling the runner again with the same Env) sees exactly what survived.

    A runner is a callable `run(job_id, env)` that uses only:

    * `env.claim(job_id) -> token` first, once per run (a restart is a new owner);
    * `env.resume(job_id) -> Checkpoint` (the stored one, or a fresh one; refuses a
      checkpoint of another workflow version) and `env.checkpoints.save(job_id, cp, token=)`;
    * `env.make(job_id, step_id) -> artifact` for a step without customer-visible effect
      (each real run makes a new version: summary-v1, summary-v2, ...);
    * `env.send(job_id, step_id, op_id, body=) -> SendResult` for a customer-visible step,
      with `op_id` as the idempotency key (`env.op_id(job_id, step_id)` makes a stable one),
      and `env.lookup(op_id) -> SendResult` to ask whether an operation was delivered;
    * `env.ack(job_id, token=, result=)` at the end, the delivery's acknowledgement.

    Crash points sit inside these calls (before/after each make and send, after each
    checkpoint write, around the ack), so the runner needs no crash code. Do not catch
    `SimulatedCrash`: a crashed worker does not get to run its except blocks.
    """

    __deepcopy__ = state_copy  # the explorer copies one for each schedule it goes on from

    def __init__(
        self,
        workflow: Workflow = PUBLISH_WORKFLOW,
        *,
        adapter: ChannelAdapter | None = None,
        clock: Clock | None = None,
        log: EventLog | None = None,
        budgets: Mapping[str, int] | None = None,
        faults: Iterable[ProviderFault | str] = (),
    ) -> None:
        if not isinstance(workflow, Workflow):
            raise BadArgumentError(
                field="workflow",
                problem=f"is {arguments.a(type(workflow).__name__)}",
                fix="pass a Workflow(version=..., steps=[Step(...), ...])",
            )
        self.workflow = workflow
        self.clock: Clock = component_clock(clock)
        self.log = component_log(log)
        if adapter is not None:
            arguments.instance(
                "adapter", adapter, ChannelAdapter, "pass EmailAdapter(...) or another ChannelAdapter, or leave it out"
            )
        budgets = dict(Checkpoint.start(workflow.version, budgets={} if budgets is None else budgets).budgets)
        self.faults = _faults(faults)  # injected into the provider: they hit its first deliveries
        self.adapter = adapter if adapter is not None else EmailAdapter(clock=self.clock, log=self.log)
        for fault in self.faults:
            self.adapter.provider.inject(fault)
        self.budgets = budgets
        self.checkpoints = CheckpointStore(clock=self.clock, log=self.log, on_save=self._saved)
        self.trace: list[str] = []
        self.effects: list[str] = []  # steps whose action really happened, in order
        self.acks: list[tuple[str, int, Any]] = []
        self.reached: list[CrashPoint] = []  # crash points passed since the last arm()
        self.crashed_at: CrashPoint | None = None
        self.blind_resends: list[str] = []  # op ids sent again while the first outcome was not a known failure
        self.regenerated: list[str] = []  # steps made again after they were confirmed
        self._armed: CrashPoint | None = None
        self._passes: dict[tuple[PointKind, str | None], int] = {}
        self._made: dict[tuple[str, str], int] = {}
        self._deliveries: dict[tuple[str, str], list[str]] = {}
        self._known: dict[str, SendStatus] = {}
        self.asked: set[str] = set()  # every op id a send or a lookup was asked for, even one that then failed

    # ------------------------------------------------------------------ the explorer's side
    def arm(self, point: CrashPoint | str | None) -> None:
        """Crash at `point` the next time a runner passes it (None: run without a crash).
        Restarts the count of points passed."""
        self._armed = CrashPoint.parse(point) if isinstance(point, str) else point
        if self._armed is not None and not isinstance(self._armed, CrashPoint):
            raise BadArgumentError(
                field="crash_at",
                problem=f"is {arguments.a(type(point).__name__)}",
                fix="pass a CrashPoint, e.g. CrashPoint.after_effect('publish'), or None",
            )
        self._passes.clear()
        self.reached.clear()

    def note(self, line: str) -> None:
        """Add a line to the trace (runners may explain themselves here)."""
        self.trace.append(line)

    def deliveries(self, job_id: str, step_id: str) -> list[str]:
        """Message ids that really reached the customer for this job's step."""
        return list(self._deliveries.get((job_id, step_id), ()))

    def for_worker(self) -> WorkerEnv:
        """This Env as a real worker sees it: the runner's calls only, no inbox or ledger."""
        return WorkerEnv(self)

    # ------------------------------------------------------------------ the runner's side
    def claim(self, job_id: str) -> int:
        token = self.checkpoints.claim(job_id)
        self.note(f"claim {job_id} -> token {token}")
        return token

    def resume(self, job_id: str) -> Checkpoint:
        """The stored checkpoint, or a fresh one. A checkpoint of another workflow version
        is refused (WorkflowVersionError) until someone migrates it explicitly."""
        checkpoint = self.checkpoints.load(job_id)
        if checkpoint is None:
            return Checkpoint.start(self.workflow.version, budgets=self.budgets)
        if checkpoint.workflow_version != self.workflow.version:
            self.note(f"refuse: checkpoint is {checkpoint.workflow_version}, workflow is {self.workflow.version}")
            raise WorkflowVersionError(stored=checkpoint.workflow_version, current=self.workflow.version)
        return checkpoint

    def op_id(self, job_id: str, step_id: str) -> str:
        """A stable operation id: the same job, step and plan give the same id on every run."""
        return f"{job_id}:{self.workflow.step(step_id).id}:{self.workflow.version}"

    def make(self, job_id: str, step_id: str) -> str:
        """Run a step that makes an artifact. Every real run makes a new version."""
        step = self._step(step_id, effect=False)
        self._pass(PointKind.BEFORE_EFFECT, step.id)
        stored = self.checkpoints.load(job_id)
        if stored is not None and step.id in stored.completed:
            self.regenerated.append(step.id)
        n = self._made[(job_id, step.id)] = self._made.get((job_id, step.id), 0) + 1
        artifact = f"{_ARTIFACT_NAMES.get(step.id, step.id)}-v{n}"
        self.effects.append(step.id)
        self.log.append(EventKind.STEP_RAN, resolve(self.clock), case_id=job_id, step=step.id, artifact=artifact)
        self.note(f"make {step.id} -> {artifact}")
        self._pass(PointKind.AFTER_EFFECT, step.id)
        return artifact

    def send(self, job_id: str, step_id: str, op_id: str, *, body: str = "") -> SendResult:
        """Perform a customer-visible step through the adapter, `op_id` as idempotency key."""
        self.asked.add(op_id)
        step = self._step(step_id, effect=True)
        if op_id in self._known and self._known[op_id] is not SendStatus.FAILED:
            self.blind_resends.append(op_id)
            self.note(f"resend {op_id} without a lookup (last known: {self._known[op_id].value})")
        self._pass(PointKind.BEFORE_EFFECT, step.id)
        before = len(self.adapter.ledger)
        result = self.adapter.send(op_id, case_id=job_id, body=body)
        new = [c.message_id for c in self.adapter.ledger.contacts()[before:]]
        if new:
            self._deliveries.setdefault((job_id, step.id), []).extend(new)
            self.effects.append(step.id)
        self._known[op_id] = result.status
        self.note(f"send {step.id} {op_id} -> {_result(result)}")
        self._pass(PointKind.AFTER_EFFECT, step.id)
        return result

    def lookup(self, op_id: str) -> SendResult:
        """Ask the provider whether `op_id` was delivered (ok with its message id, or failed)."""
        self.asked.add(op_id)
        result = self.adapter.lookup(op_id)
        self._known[op_id] = result.status
        self.log.append(
            EventKind.EFFECT_RECONCILED,
            resolve(self.clock),
            op_id=op_id,
            status=result.status.value,
            message_id=result.message_id,
        )
        self.note(f"lookup {op_id} -> {_result(result)}")
        return result

    def ack(self, job_id: str, *, token: int, result: Any = None) -> None:
        """Acknowledge the delivery: the job is done. Fenced like a checkpoint write."""
        self._pass(PointKind.BEFORE_ACK, None)
        self.checkpoints.verify(job_id, token, op="ack")
        self.acks.append((job_id, token, result))
        self.note(f"ack {job_id} token {token}: {result}")
        self._pass(PointKind.AFTER_ACK, None)

    # ------------------------------------------------------------------ internals
    def _step(self, step_id: str, *, effect: bool) -> WorkflowStep:
        step = self.workflow.step(step_id)
        if step.effect != effect:
            use = "env.send(job_id, step_id, op_id, body=...)" if step.effect else "env.make(job_id, step_id)"
            raise BadArgumentError(
                field="step_id",
                problem=f"{step_id!r} is {'a' if step.effect else 'not a'} customer-visible step",
                fix=f"use {use}",
            )
        return step

    def _saved(self, job_id: str, before: Checkpoint | None, after: Checkpoint) -> None:
        """After every checkpoint write: trace it and offer the matching crash point."""
        old_done = before.completed if before else ()
        new_done = [s for s in after.completed if s not in old_done]
        new_receipts = [r for op, r in after.receipts.items() if not before or op not in before.receipts]
        new_intents = [(op, s) for op, s in after.intents.items() if not before or op not in before.intents]
        parts = [f"checkpoint token {after.token}: completed [{', '.join(after.completed)}]"]
        for op, step in new_intents:
            parts.append(f"+intent {op}")
            self.log.append(EventKind.INTENT_RECORDED, resolve(self.clock), case_id=job_id, op_id=op, step=step)
        for receipt in new_receipts:
            parts.append(f"+receipt {receipt.message_id} via {receipt.via}")
            self.log.append(
                EventKind.RECEIPT_RECORDED,
                resolve(self.clock),
                case_id=job_id,
                op_id=receipt.op_id,
                message_id=receipt.message_id,
                via=receipt.via,
            )
        self.note(" ".join(parts))
        if new_done:
            self._pass(PointKind.AFTER_CHECKPOINT, new_done[-1])
        elif new_receipts:
            self._pass(PointKind.AFTER_RECEIPT, new_receipts[-1].step)
        elif new_intents:
            self._pass(PointKind.AFTER_INTENT, new_intents[-1][1])
        else:
            self._pass(PointKind.AFTER_SAVE, None)

    def _pass(self, kind: PointKind, step: str | None) -> None:
        n = self._passes[(kind, step)] = self._passes.get((kind, step), 0) + 1
        point = CrashPoint(kind=kind, step=step, nth=n)
        self.reached.append(point)
        if point == self._armed:
            self._armed = None
            self.crashed_at = point
            self.note(f"CRASH at {point}")
            self.log.append(EventKind.WORKER_CRASHED, resolve(self.clock), point=str(point))
            raise SimulatedCrash(point=str(point))

    def __repr__(self) -> str:
        return (
            f"Env(workflow={self.workflow}, {len(self.adapter.ledger)} contacts, "
            f"{len(self.checkpoints.jobs())} checkpointed jobs)"
        )


class WorkerEnv:
    """What a real worker has, and nothing more: the runner's calls of an `Env` (claim,
    resume, op_id, make, send, lookup, ack, note, the workflow) and its job's checkpoints
    (load, save, token, history). The provider's inbox, the contact ledger, the event log
    and the explorer's records are not here: a worker knows what was delivered from its
    receipts, or by asking the provider with `lookup(op_id)`. Crashes still happen, as in
    the Env underneath."""

    __slots__ = ("_env", "_checkpoints")
    # Never changed for the env's life: where the env is handed to another process (the
    # grader's), they go with it, and reading one is not a round trip.
    _FIXED = ("workflow", "checkpoints")

    def __init__(self, env: Env) -> None:
        self._env = env
        self._checkpoints = self._worker_checkpoints()

    def _worker_checkpoints(self) -> _WorkerCheckpoints:
        return _WorkerCheckpoints(self._env.checkpoints)

    @property
    def workflow(self) -> Workflow:
        return self._env.workflow

    @property
    def checkpoints(self) -> _WorkerCheckpoints:
        return self._checkpoints

    def claim(self, job_id: str) -> int:
        return self._env.claim(job_id)

    def resume(self, job_id: str) -> Checkpoint:
        return self._env.resume(job_id)

    def op_id(self, job_id: str, step_id: str) -> str:
        return self._env.op_id(job_id, step_id)

    def make(self, job_id: str, step_id: str) -> str:
        return self._env.make(job_id, step_id)

    def send(self, job_id: str, step_id: str, op_id: str, *, body: str = "") -> SendResult:
        return self._env.send(job_id, step_id, op_id, body=body)

    def lookup(self, op_id: str) -> SendResult:
        return self._env.lookup(op_id)

    def ack(self, job_id: str, *, token: int, result: Any = None) -> None:
        self._env.ack(job_id, token=token, result=result)

    def note(self, line: str) -> None:
        self._env.note(line)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"a worker's env has no {name!r}: a real worker cannot see the provider's inbox, the "
            "contact ledger or the explorer's records. It knows what its checkpoint says, and asks "
            "env.lookup(op_id) what happened to an operation."
        )

    def __repr__(self) -> str:
        return f"WorkerEnv(workflow={self._env.workflow})"


class _WorkerCheckpoints:
    """A worker's access to the checkpoint store: its job's records, not the store's log."""

    __slots__ = ("_store",)

    def __init__(self, store: CheckpointStore) -> None:
        self._store = store

    def load(self, job_id: str) -> Checkpoint | None:
        return self._store.load(job_id)

    def save(self, job_id: str, checkpoint: Checkpoint, *, token: int, now: float | None = None) -> Checkpoint:
        return self._store.save(job_id, checkpoint, token=token, now=now)

    def token(self, job_id: str) -> int:
        return self._store.token(job_id)

    def history(self, job_id: str) -> tuple[Checkpoint, ...]:
        return self._store.history(job_id)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"a worker's checkpoint store has no {name!r}: load, save, token and history are what a worker may use."
        )

    def __repr__(self) -> str:
        return "WorkerCheckpoints()"


def _result(result: SendResult) -> str:
    if result.message_id is None:
        return result.status.value
    return f"{result.status.value} {result.message_id}" + (" (deduped)" if result.deduped else "")


# ---------------------------------------------------------------------- two runners
class _Runner(ABC):
    """The loop both runners share: claim, resume, skip confirmed steps, run the rest, ack.
    Subclasses differ only in how they perform a customer-visible step."""

    @abstractmethod
    def _perform(self, job_id: str, env: Env, step: WorkflowStep, checkpoint: Checkpoint, token: int) -> Checkpoint:
        """Perform `step`'s effect and return the checkpoint that records it."""

    def run(self, job_id: str, env: Env, crash_at: CrashPoint | str | None = None) -> str:
        """Run (or resume) `job_id` to the end and return the last step's artifact (for
        publish: its message id). `crash_at` arms a crash in `env` first."""
        if crash_at is not None:
            env.arm(crash_at)
        token = env.claim(job_id)
        checkpoint = env.resume(job_id)
        for step in env.workflow.steps:
            if step.id in checkpoint.completed:
                env.note(f"skip {step.id}: confirmed as {checkpoint.artifacts[step.id]}")
                continue
            if step.effect:
                checkpoint = self._perform(job_id, env, step, checkpoint, token)
            else:
                if "tool_calls" in checkpoint.budgets:  # spent before the call, so a crash loop runs dry
                    checkpoint = env.checkpoints.save(job_id, checkpoint.spend("tool_calls"), token=token)
                artifact = env.make(job_id, step.id)
                checkpoint = env.checkpoints.save(job_id, checkpoint.confirm(step.id, artifact), token=token)
        result = checkpoint.artifacts[env.workflow.steps[-1].id]
        env.ack(job_id, token=token, result=result)
        return result

    __call__ = run

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _body(env: Env, checkpoint: Checkpoint, step: WorkflowStep) -> str:
    """What a customer-visible step sends: the artifact of the step before it."""
    index = env.workflow.steps.index(step)
    return checkpoint.artifacts.get(env.workflow.steps[index - 1].id, "") if index else ""


class NaiveCheckpointRunner(_Runner):
    """The lesson's loop: do the step, then checkpoint it. Each attempt sends with a key
    of its own (made from its token), as a worker does when its key names the attempt
    rather than the operation. A crash after the send but before the checkpoint write
    makes the next run send again, and the customer hears twice."""

    def _perform(self, job_id: str, env: Env, step: WorkflowStep, checkpoint: Checkpoint, token: int) -> Checkpoint:
        key = f"{job_id}:{step.id}:try-{token}"
        result = env.send(job_id, step.id, key, body=_body(env, checkpoint, step))
        if result.status is not SendStatus.OK:
            raise EffectFailedError(step=step.id, job_id=job_id, status=result.status.value, op_id=key)
        assert result.message_id is not None  # an accepted send has its message id
        return env.checkpoints.save(job_id, checkpoint.confirm(step.id, result.message_id), token=token)


class ReceiptRunner(_Runner):
    """Intent before the side effect, receipt after; an intent without a receipt is
    reconciled with `lookup(op_id)` before anything is sent again.

    The same reconciliation answers a lost reply (SendStatus.UNKNOWN). A definite
    failure leaves the intent in place and raises EffectFailedError: the next run looks
    the operation up, finds it undelivered, and sends it under the same id."""

    def _perform(self, job_id: str, env: Env, step: WorkflowStep, checkpoint: Checkpoint, token: int) -> Checkpoint:
        op_id = checkpoint.op_for(step.id) or env.op_id(job_id, step.id)
        receipt = checkpoint.receipts.get(op_id)
        if receipt is None:
            result, via = None, "reply"
            if op_id in checkpoint.intents:
                result, via = env.lookup(op_id), "lookup"  # did the earlier attempt get through?
                if result.status is not SendStatus.OK:
                    result, via = None, "reply"
            else:
                checkpoint = env.checkpoints.save(job_id, checkpoint.intend(op_id, step.id), token=token)
            if result is None:
                result = env.send(job_id, step.id, op_id, body=_body(env, checkpoint, step))
            if result.status is SendStatus.UNKNOWN:
                result, via = env.lookup(op_id), "lookup"
            if result.status is not SendStatus.OK:
                raise EffectFailedError(step=step.id, job_id=job_id, status=result.status.value, op_id=op_id)
            assert result.message_id is not None  # an accepted send has its message id
            receipt = Receipt(op_id=op_id, step=step.id, message_id=result.message_id, via=via)
            checkpoint = checkpoint.receive(receipt)
        return env.checkpoints.save(job_id, checkpoint.confirm(step.id, receipt.message_id), token=token)


# ---------------------------------------------------------------------- helpers
def _faults(faults: Iterable[ProviderFault | str]) -> tuple[ProviderFault, ...]:
    try:
        return tuple(ProviderFault(f) for f in faults)
    except (TypeError, ValueError):
        raise BadArgumentError(
            field="faults",
            problem=f"is {faults!r}",
            fix=f"pass a list of {', '.join(f.value for f in ProviderFault)}, e.g. [Fault.DROP_REPLY]",
        ) from None
