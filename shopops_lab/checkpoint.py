"""Checkpoints and receipts: what a resumed workflow needs so it does not repeat what the
customer saw.

A checkpoint records decisions, not conversation: the workflow version it was written
under, the steps confirmed so far, the artifact each one produced, the receipts of side
effects, intents recorded just before a side effect, what is left of each budget, and
approval references. It lives in a `CheckpointStore`, outside the worker, so it survives
the worker's crash; every write carries a fencing token.

How a workflow is run, crashed and recovered (crash points, `Env`, the two runners) is in
`shopops_lab.recovery`; its names are importable from here too, as the labs do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from shopops_lab import arguments
from shopops_lab.clock import Clock, component_clock, resolve
from shopops_lab.errors import BadArgumentError, BudgetExhaustedError
from shopops_lab.events import EventKind, EventLog
from shopops_lab.fencing import TokenFence
from shopops_lab.payloads import itself, state_copy
from shopops_lab.store import Store, bind_transactions, store_for, transaction

__all__ = ["Checkpoint", "CheckpointStore", "PUBLISH_WORKFLOW", "Receipt", "Step", "Workflow", "WorkflowStep"]


# ---------------------------------------------------------------------- the plan
@dataclass(frozen=True, kw_only=True, slots=True)
class WorkflowStep:
    """One step of a workflow. `effect=True` means the customer can see it happen
    (a message goes out), so it must never run twice; other steps make artifacts."""

    __deepcopy__ = itself

    id: str
    effect: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", self.id):
            raise BadArgumentError(
                field="Step.id",
                problem=f"is {self.id!r}",
                fix="use letters, digits, '_' or '-', e.g. Step(id='publish')",
            )
        arguments.flag("Step.effect", self.effect, "pass True for a customer-visible side effect, else False")


Step = WorkflowStep  # the shorter name the labs and tests write


@dataclass(frozen=True, kw_only=True, slots=True)
class Workflow:
    """A versioned plan. The version is part of every operation id, so a checkpoint
    written under one plan is never silently resumed under another."""

    __deepcopy__ = itself

    version: str
    steps: tuple[WorkflowStep, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.version, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", self.version):
            raise BadArgumentError(
                field="Workflow.version", problem=f"is {self.version!r}", fix="pass a short label such as 'v1'"
            )
        steps = tuple(self.steps) if isinstance(self.steps, (list, tuple)) else None
        if not steps or not all(isinstance(s, WorkflowStep) for s in steps):
            raise BadArgumentError(
                field="Workflow.steps",
                problem=f"is {self.steps!r}",
                fix="pass a non-empty list of Step(id=..., effect=...)",
            )
        ids = [s.id for s in steps]
        if len(set(ids)) != len(ids):
            raise BadArgumentError(
                field="Workflow.steps",
                problem=f"repeats a step id ({', '.join(ids)})",
                fix="give every step its own id",
            )
        object.__setattr__(self, "steps", steps)

    @property
    def step_ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.steps)

    def step(self, step_id: str) -> WorkflowStep:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise BadArgumentError(
            field="step_id",
            problem=f"is {step_id!r}, not a step of workflow {self.version}",
            fix=f"use one of {', '.join(self.step_ids)}",
        )

    def __str__(self) -> str:
        return f"{self.version} ({', '.join(s.id + ('*' if s.effect else '') for s in self.steps)})"


PUBLISH_WORKFLOW = Workflow(
    version="v1",
    steps=(WorkflowStep(id="fetch"), WorkflowStep(id="summarize"), WorkflowStep(id="publish", effect=True)),
)


# ---------------------------------------------------------------------- the record
@dataclass(frozen=True, kw_only=True, slots=True)
class Receipt:
    """Proof that a side effect happened: the provider's id for it. `via` says how we
    learned it: from the send's reply, or by looking the operation up afterwards."""

    __deepcopy__ = itself

    op_id: str
    step: str
    message_id: str
    via: str = "reply"

    def __post_init__(self) -> None:
        for name in ("op_id", "step", "message_id"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise BadArgumentError(
                    field=f"Receipt.{name}", problem=f"is {getattr(self, name)!r}", fix="pass a non-empty string"
                )
        if self.via not in ("reply", "lookup"):
            raise BadArgumentError(field="Receipt.via", problem=f"is {self.via!r}", fix="pass 'reply' or 'lookup'")


@dataclass(frozen=True, kw_only=True, slots=True)
class Checkpoint:
    """What a resumed worker needs to go on without repeating irreversible work.
    Immutable: the `confirm`/`intend`/`receive`/`spend`/`approve` methods return a new one."""

    __deepcopy__ = itself

    workflow_version: str
    completed: tuple[str, ...] = ()
    artifacts: Mapping[str, str] = field(default_factory=dict)  # step -> artifact id
    receipts: Mapping[str, Receipt] = field(default_factory=dict)  # op id -> receipt
    intents: Mapping[str, str] = field(default_factory=dict)  # op id -> step
    budgets: Mapping[str, int] = field(default_factory=dict)  # name -> what is left
    approval_refs: tuple[str, ...] = ()
    token: int = 0  # the token that wrote it

    def __post_init__(self) -> None:
        self._check(_FIELDS)

    def _check(self, names: Collection[str]) -> None:
        """Check the fields `names` and keep them in their read-only form, in the order of
        the fields (so the first problem named is the same whichever fields are checked)."""
        if "workflow_version" in names:
            arguments.text("workflow_version", self.workflow_version, "the workflow's version, e.g. 'v1'")
        if "completed" in names:
            completed = arguments.strings("completed", self.completed)
            if len(set(completed)) != len(completed):
                raise BadArgumentError(
                    field="completed", problem=f"repeats a step ({', '.join(completed)})", fix="confirm each step once"
                )
            object.__setattr__(self, "completed", completed)
        if "approval_refs" in names:
            object.__setattr__(self, "approval_refs", arguments.strings("approval_refs", self.approval_refs))
        for name, kind in (("artifacts", str), ("intents", str), ("receipts", Receipt), ("budgets", int)):
            if name in names:
                object.__setattr__(self, name, arguments.mapping(name, getattr(self, name), kind))
        if "receipts" in names:
            for op_id, receipt in self.receipts.items():
                if receipt.op_id != op_id:
                    raise BadArgumentError(
                        field=f"receipts[{op_id!r}]",
                        problem=f"holds the receipt of {receipt.op_id!r}",
                        fix="key each receipt by its own op_id",
                    )
        if "budgets" in names:
            for name, left in self.budgets.items():
                arguments.whole(f"budgets[{name!r}]", left, 0, "pass a whole number >= 0")
        if "token" in names:
            arguments.whole("token", self.token, 0, "pass a whole number >= 0")

    def _with(self, **changes: Any) -> Checkpoint:
        """`replace(self, **changes)`, checking only what changes: the other fields were
        checked when this checkpoint was made and cannot change since (a resumed worker
        derives several checkpoints per step, and a check's explorer plays thousands)."""
        if type(self) is not Checkpoint:  # a subclass may hold more than these fields
            return replace(self, **changes)
        twin = object.__new__(Checkpoint)
        for name in _FIELDS:
            object.__setattr__(twin, name, changes[name] if name in changes else getattr(self, name))
        twin._check(changes)
        return twin

    @classmethod
    def start(cls, workflow_version: str, *, budgets: Mapping[str, int] | None = None) -> Checkpoint:
        """The checkpoint of a job nothing has happened to yet."""
        return cls(workflow_version=workflow_version, budgets={} if budgets is None else budgets)

    def confirm(self, step: str, artifact: str) -> Checkpoint:
        """`step` is done and produced `artifact` (an artifact id, or a message id for an effect)."""
        arguments.text("step", step, "the id of the step you finished, e.g. 'summarize'")
        arguments.text("artifact", artifact, "the id of what the step made, e.g. 'summary-v1'")
        if step in self.completed:
            raise BadArgumentError(
                field="step",
                problem=f"{step!r} is already confirmed",
                fix="skip confirmed steps and reuse their artifacts",
            )
        return self._with(completed=self.completed + (step,), artifacts={**self.artifacts, step: artifact})

    def intend(self, op_id: str, step: str) -> Checkpoint:
        """About to perform operation `op_id` for `step`: written before the side effect."""
        arguments.text("op_id", op_id, "the operation id you are about to send with")
        arguments.text("step", step, "the step the operation performs, e.g. 'publish'")
        return self._with(intents={**self.intents, op_id: step})

    def receive(self, receipt: Receipt) -> Checkpoint:
        """The side effect happened; here is the provider's proof."""
        arguments.instance("receipt", receipt, Receipt, "pass a Receipt(op_id=..., step=..., message_id=...)")
        return self._with(receipts={**self.receipts, receipt.op_id: receipt})

    def spend(self, budget: str, amount: int = 1) -> Checkpoint:
        """Take `amount` from `budget`; BudgetExhaustedError if not enough is left."""
        arguments.whole("amount", amount, 1, "pass how much to spend, a whole number >= 1 (a spend never refills)")
        if not isinstance(budget, str) or budget not in self.budgets:
            raise BadArgumentError(
                field="budget",
                problem=f"is {budget!r}, which this checkpoint does not track",
                fix=f"use one of {sorted(self.budgets)} or start the checkpoint with it",
            )
        left = self.budgets[budget]
        if left < amount:
            raise BudgetExhaustedError(budget=budget, remaining=left, wanted=amount)
        return self._with(budgets={**self.budgets, budget: left - amount})

    def approve(self, approval_ref: str) -> Checkpoint:
        """Remember a person's approval (of the artifacts as they are now)."""
        arguments.text("approval_ref", approval_ref, "the approval's id, e.g. 'appr-0007'")
        return self._with(approval_refs=self.approval_refs + (approval_ref,))

    def op_for(self, step: str) -> str | None:
        """The operation id already chosen for `step` (by a receipt or an intent), if any.
        Reusing it keeps an in-flight operation's identity across restarts and migrations."""
        for op_id, receipt in self.receipts.items():
            if receipt.step == step:
                return op_id
        for op_id, intended in self.intents.items():
            if intended == step:
                return op_id
        return None

    def __repr__(self) -> str:
        return (
            f"Checkpoint(workflow_version={self.workflow_version!r}, completed={self.completed!r}, "
            f"artifacts={dict(self.artifacts)!r}, receipts={dict(self.receipts)!r}, "
            f"intents={dict(self.intents)!r}, budgets={dict(self.budgets)!r}, "
            f"approval_refs={self.approval_refs!r}, token={self.token})"
        )


class CheckpointStore:
    """The durable home of checkpoints: in this process by default, or in a database
    (`store=`, a Store or a URL) that outlives every worker.

    It is also the fencing authority: `claim` issues each new owner of a job a token one
    above the last, and `save` refuses a token older than the newest issued. A runner's
    memory does not survive a crash; what is here does.
    """

    def __deepcopy__(self, memo: dict[int, Any]) -> CheckpointStore:
        """The explorer copies one for each schedule it goes on from (`state_copy`), sharing
        the last record of each job and the checkpoint built from it (`_latest`): a record
        never changes once stored (the memory store's copy shares it too), nor does a
        Checkpoint."""
        memo.setdefault(id(self._latest), dict(self._latest))
        return state_copy(self, memo)

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        log: EventLog | None = None,
        on_save: Callable[[str, Checkpoint | None, Checkpoint], None] | None = None,
        store: Store | str | None = None,
    ) -> None:
        self.clock: Clock = component_clock(clock)
        if on_save is not None:
            arguments.callable_("on_save", on_save, "pass a function (job_id, before, after), or leave it out")
        self.store: Store = store_for(store, log)
        self.log = self.store.log
        self._on_save = on_save
        self._fence = TokenFence("checkpoint", what="the checkpoint of {key}", store=self.store)
        self._latest: dict[str, tuple[Mapping[str, Any], Checkpoint]] = {}  # job -> its last record, as built
        bind_transactions(self, self.store)

    @transaction
    def claim(self, job_id: str, *, now: float | None = None) -> int:
        """A new owner for `job_id`: its token, larger than every earlier one."""
        _job_id(job_id)
        t = resolve(self.clock, now)
        token = self._fence.claim(job_id)
        self.log.append(EventKind.JOB_CLAIMED, t, item_id=job_id, token=token)
        return token

    def token(self, job_id: str) -> int:
        """The newest token issued for `job_id` (0 before the first claim)."""
        return self._fence.current(_job_id(job_id))

    @transaction
    def verify(self, job_id: str, token: int, *, op: str = "write", now: float | None = None) -> None:
        """Raise StaleTokenError (and log it) unless `token` is the newest issued."""
        current = self.token(job_id)
        if not arguments.is_whole(token) or not 1 <= token <= current:
            raise BadArgumentError(
                field="token",
                problem=f"is {token!r}, which was never issued for {job_id}",
                fix="pass the token that claim() returned",
            )
        if not isinstance(op, str):
            raise BadArgumentError(field="op", problem=f"is {op!r}", fix="name the write, e.g. op='save'")
        self._fence.check(job_id, token, t=resolve(self.clock, now), op=op, current=current)

    def load(self, job_id: str) -> Checkpoint | None:
        """The latest checkpoint of `job_id`, or None if nothing was saved yet."""
        records = self.records(job_id)
        if not records:
            return None
        kept = self._latest.get(job_id)
        if kept is not None and kept[0] == records[-1]:  # the record it was built from, unchanged: records never change
            return kept[1]
        checkpoint = _checkpoint(records[-1])
        self._latest[job_id] = (records[-1], checkpoint)
        return checkpoint

    def save(self, job_id: str, checkpoint: Checkpoint, *, token: int, now: float | None = None) -> Checkpoint:
        """Write `checkpoint` under `token`; a stale token writes nothing. Returns what was stored."""
        before, stored = self._write(job_id, checkpoint, token, now)
        if self._on_save is not None:  # after the write is kept: a crash here must not undo it
            self._on_save(job_id, before, stored)
        return stored

    @transaction
    def _write(
        self, job_id: str, checkpoint: Checkpoint, token: int, now: float | None
    ) -> tuple[Checkpoint | None, Checkpoint]:
        if not isinstance(checkpoint, Checkpoint):
            raise BadArgumentError(
                field="checkpoint",
                problem=f"is {arguments.a(type(checkpoint).__name__)}",
                fix="pass a Checkpoint, e.g. Checkpoint.start('v1').confirm('fetch', 'source-v1')",
            )
        t = resolve(self.clock, now)
        self.verify(job_id, token, op="save", now=t)
        before = self.load(job_id)
        stored = checkpoint._with(token=token)
        self._append(job_id, stored)
        self.log.append(
            EventKind.CHECKPOINT_WRITTEN, t, item_id=job_id, token=token, completed=",".join(stored.completed)
        )
        return before, stored

    @transaction
    def migrate(
        self, job_id: str, to_version: str, fn: Callable[[Checkpoint], Checkpoint], *, now: float | None = None
    ) -> Checkpoint:
        """Move `job_id`'s checkpoint to workflow `to_version` through `fn`, explicitly.
        The migration takes ownership (a new token), so a worker still running the old
        plan can no longer write."""
        t = resolve(self.clock, now)
        self.token(job_id)  # the token's row first, locked, as every write here takes it: no deadlock with save
        current = self.load(job_id)
        if current is None:
            raise BadArgumentError(
                field="job_id",
                problem=f"{job_id!r} has no checkpoint to migrate",
                fix="migrate a job that has run under the old version",
            )
        if not isinstance(to_version, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", to_version):
            raise BadArgumentError(
                field="to_version",
                problem=f"is {to_version!r}",
                fix="pass the new version as a short label (letters, digits, '_', '.', '-'), e.g. 'v2'",
            )
        if not callable(fn):
            raise BadArgumentError(
                field="fn", problem=f"is {fn!r}", fix="pass a function Checkpoint -> Checkpoint, e.g. lambda cp: cp"
            )
        migrated = fn(current)
        if not isinstance(migrated, Checkpoint):
            raise BadArgumentError(
                field="fn",
                problem=f"returned a {type(migrated).__name__}",
                fix="return a Checkpoint (the old one, or one made from it)",
            )
        stored = replace(migrated, workflow_version=to_version)  # checks the version before the claim
        token = self.claim(job_id, now=t)
        stored = stored._with(token=token)
        self._append(job_id, stored)
        self.log.append(
            EventKind.CHECKPOINT_WRITTEN,
            t,
            item_id=job_id,
            token=token,
            completed=",".join(stored.completed),
            migrated_from=current.workflow_version,
            migrated_to=to_version,
        )
        return stored

    def history(self, job_id: str) -> tuple[Checkpoint, ...]:
        """Every checkpoint ever stored for `job_id`, oldest first."""
        return tuple(map(_checkpoint, self.records(job_id)))

    def records(self, job_id: str) -> Sequence[Mapping[str, Any]]:
        """Every checkpoint stored for `job_id` as the store keeps it (a JSON document each,
        oldest first), for a reader that compares states after every step (the checks'
        explorer) without building a validated `Checkpoint` from each."""
        return self.store.get(_HISTORY, _job_id(job_id)) or ()

    def jobs(self) -> list[str]:
        return sorted(job_id for job_id, _ in self.store.scan(_HISTORY))

    def _append(self, job_id: str, checkpoint: Checkpoint) -> None:
        record = _record(checkpoint)
        self.store.put(_HISTORY, job_id, [*(self.store.get(_HISTORY, job_id) or ()), record])
        self._latest[job_id] = (record, checkpoint)

    def __repr__(self) -> str:
        return f"CheckpointStore({len(self.jobs())} jobs)"


_FIELDS = tuple(f.name for f in fields(Checkpoint))
_HISTORY = "checkpoints"  # the records: job id -> every checkpoint stored for it, oldest first


def _record(checkpoint: Checkpoint) -> dict[str, Any]:
    """A checkpoint as a JSON document for the store."""
    return {
        "workflow_version": checkpoint.workflow_version,
        "completed": list(checkpoint.completed),
        "artifacts": dict(checkpoint.artifacts),
        "receipts": {
            op: {"op_id": r.op_id, "step": r.step, "message_id": r.message_id, "via": r.via}
            for op, r in checkpoint.receipts.items()
        },
        "intents": dict(checkpoint.intents),
        "budgets": dict(checkpoint.budgets),
        "approval_refs": list(checkpoint.approval_refs),
        "token": checkpoint.token,
    }


def _checkpoint(record: Mapping[str, Any]) -> Checkpoint:
    return Checkpoint(
        **{
            **record,
            "completed": tuple(record["completed"]),
            "approval_refs": tuple(record["approval_refs"]),
            "receipts": {op: Receipt(**r) for op, r in record["receipts"].items()},
        }
    )


# ---------------------------------------------------------------------- helpers
def _job_id(job_id: object) -> str:
    return arguments.text("job_id", job_id, "the job's id, e.g. 'O-1001'")
