"""Lab 05's world for the schedule explorer: one job, two workers, a queue that redelivers
what was not acknowledged, and a crash at any kit call of the learner's run.

Each delivery runs the learner's `run(job_id, env)` whole, as one step of a worker
(`shopops_lab.explore`). The env it gets is a worker's (`WorkerEnv`: receipts and lookup,
no inbox) whose every kit call (claim, resume, load, save, make, send, lookup, ack) asks
the schedule first, so the explorer can kill the process before the call (the request is
lost) or after it (the reply is lost). The queue's moves: a lease that runs out makes the
job deliverable again (a crashed worker, or one that returned without acking), a run that
raised gives it back at once, and the queue may hand one delivery to both workers before
anyone acks (a duplicate). An acknowledged job is never delivered again. A restarted
worker runs `restart(answer)`: nothing it kept in memory survives.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from shopops_lab.checkpoint import Checkpoint
from shopops_lab.checks.base import attempt, describe, error_text
from shopops_lab.effects import ProviderFault, SendResult
from shopops_lab.explore import Bound, Move, Run, Scenario, copied
from shopops_lab.recovery import Env, WorkerEnv, _WorkerCheckpoints

__all__ = ["WORKERS", "bound", "scenario"]

WORKERS = ("W1", "W2")
BUDGET = {"crash": 1, "expiry": 1, "duplicate": 1, "delivery": 3}


def bound(setting: str) -> Bound:
    return Bound(
        words=f"2 workers, a crash at any kit call, a lease expiry, a duplicate delivery and up to 3 "
        f"deliveries, with {setting}",
        budget=BUDGET,
        max_steps=8,
    )


class _GatedCheckpoints(_WorkerCheckpoints):
    __slots__ = ("_run",)

    def __init__(self, store: Any, run: Run) -> None:
        super().__init__(store)
        self._run = run

    def load(self, job_id: str) -> Checkpoint | None:
        return _gated(self._run, ("env", "checkpoints", "load"), self._store, job_id)

    def save(self, job_id: str, checkpoint: Checkpoint, *, token: int, now: float | None = None) -> Checkpoint:
        return _gated(self._run, ("env", "checkpoints", "save"), self._store, job_id, checkpoint, token=token, now=now)


class _GatedEnv(WorkerEnv):
    """A worker's env whose kit calls are fault points of the schedule, each recorded
    (`Run.recorded`, with `note`, the one other call that changes the world) so that a crashed
    copy of the run replays them instead of the learner's code."""

    __slots__ = ("_run",)

    def __init__(self, env: Env, run: Run) -> None:
        self._run = run
        super().__init__(env)
        run.facade(env=self)

    def _worker_checkpoints(self) -> _GatedCheckpoints:
        return _GatedCheckpoints(self._env.checkpoints, self._run)

    def claim(self, job_id: str) -> int:
        return _gated(self._run, ("env", "claim"), self._env, job_id)

    def resume(self, job_id: str) -> Checkpoint:
        return _gated(self._run, ("env", "resume"), self._env, job_id)

    def make(self, job_id: str, step_id: str) -> str:
        return _gated(self._run, ("env", "make"), self._env, job_id, step_id)

    def send(self, job_id: str, step_id: str, op_id: str, *, body: str = "") -> SendResult:
        return _gated(self._run, ("env", "send"), self._env, job_id, step_id, op_id, body=body)

    def lookup(self, op_id: str) -> SendResult:
        return _gated(self._run, ("env", "lookup"), self._env, op_id)

    def ack(self, job_id: str, *, token: int, result: Any = None) -> None:
        _gated(self._run, ("env", "ack"), self._env, job_id, token=token, result=result)

    def note(self, line: str) -> None:
        with self._run.recorded(("env", "note"), (line,), {}):
            super().note(line)


def _gated(run: Run, path: tuple[str, ...], target: Any, *args: Any, **kwargs: Any) -> Any:
    """The learner's `facade.<path>(*args, **kwargs)`, made on `target` (the env or the store
    behind the facade) by the same name: recorded, then between the schedule's two fault
    points of that name."""
    point = path[-1]
    with run.recorded(path, args, kwargs, gate=True):
        run.enter(point)
        result = getattr(target, point)(*args, **kwargs)
        run.leave(point)
    return result


FIRST_JOB = "O-1001"  # another job's world starts after this one's email went out on the same provider


class RecoveryWorld:
    """One schedule's world: fresh stores, the job ready, no worker started. For a job other
    than FIRST_JOB the provider has already delivered FIRST_JOB's email, sent by a clean run of
    the learner's code (`before`), so an operation id that does not name its job collides."""

    def __init__(
        self, run: Run, job_id: str, faults: Sequence[ProviderFault], before: tuple[Env, frozenset[str]] | None = None
    ) -> None:
        self.run, self.job_id = run, job_id
        if before is None:
            self.env, self.others = Env(faults=faults), frozenset[str]()
        else:
            self.env, self.others = copied(before[0]), before[1]
            self.env.faults = tuple(faults)
            for fault in faults:
                self.env.adapter.provider.inject(fault)
        self.status = "ready"  # ready | held | acked
        self.holders: tuple[str, ...] = ()  # duplicate deliveries handed out, not yet run
        self.lease = False  # a lease outstanding that only expiry gives back
        self.returned: list[tuple[str, Any]] = []
        self.last = "no run yet"
        self.deliveries = 0  # runs the queue started (a duplicate counts once)
        self._started = 0  # where the running step's trace begins

    # ------------------------------------------------------------------ the explorer's side
    def clone(self, run: Run) -> RecoveryWorld:
        """This schedule's state, copied to go on from: the workers' copies of the answer
        twinned in their process first (they hold nothing of this world's between runs),
        then the stores, the provider and the queue's view copied here."""
        run.twin()
        twin = copy.copy(self)
        twin.run, twin.env, twin.returned = run, copied(self.env), list(self.returned)
        return twin

    def moves(self) -> list[Move]:
        job = self.job_id
        if self.holders:
            return [Move(f"{w} runs {job} (duplicate)", w, self._runs(w), peer="stores") for w in self.holders]
        found = []
        if self.status == "ready":
            found += [Move(f"{w} runs {job}", w, self._runs(w), peer="stores", cost="delivery") for w in WORKERS]
            if not self.deliveries:  # the first delivery may go out twice, before anyone can ack it
                found.append(
                    Move(
                        f"queue hands {job} to {' and '.join(WORKERS)}",
                        "queue",
                        self._duplicate,
                        peer=WORKERS[0],
                        cost="duplicate",
                    )
                )
        elif self.status == "held" and self.lease:
            found.append(Move(f"{job}'s lease expires", "queue", self._expire, cost="expiry"))
        return found

    alike = WORKERS  # both run fresh copies of the answer on the same env: the code cannot tell them apart

    def actor_print(self, worker: str) -> Hashable:
        """`worker`'s part of the state: whether it holds a duplicate delivery, what its runs returned."""
        return worker in self.holders, tuple(repr(value) for who, value in self.returned if who == worker)

    def fingerprint(self) -> Hashable:
        """What the future depends on: the queue's view, the stored checkpoint (its token
        aside), what was made, sent and known; not the history, so schedules that reach the
        same state by different crashes are searched once. Each worker's part is in
        `actor_print`: the explorer counts W1 and W2 as alike (`alike`), so a state and its
        mirror image (W2 where W1 was) are searched once too."""
        env = self.env
        records = env.checkpoints.records(self.job_id)
        checkpoint = _picture(records[-1]) if records else None
        provider = env.adapter.provider
        return (
            self.status,
            len(self.holders),
            self.lease,
            self.deliveries,
            checkpoint,
            tuple(sorted(env._known.items())),
            tuple(sorted((k, tuple(v)) for k, v in env._deliveries.items())),
            tuple(sorted(env._made.items())),
            tuple(env.blind_resends),
            tuple(env.regenerated),
            bool(env.acks),
            tuple(provider._faults),
            len(env.adapter.ledger),
        )

    def crashed(self, actor: str) -> str:
        """The process died inside its run: what that run had done by then, for the step's words."""
        self.last = f"{actor}'s process died"
        self._settle(raised=False)
        did = "; ".join(self.env.trace[self._started :])
        return f"before that: {did}" if did else "it had done nothing yet"

    def broken(self) -> str | None:
        env, job = self.env, self.job_id
        shared = sorted(self.others & env.asked)
        if shared:
            return (
                f"your run used the operation id {shared[0]!r} for {job}, but {FIRST_JOB}'s email had already gone "
                f"out under that id on this provider: the provider (and a lookup) answer for {FIRST_JOB}'s email, "
                f"not for {job}'s. An operation id names the job as well as the step."
            )
        sent = env.deliveries(job, "publish")
        if len(sent) > 1:
            return f"the email reached the customer {len(sent)} times ({', '.join(sent)})."
        if env.blind_resends:
            return (
                f"{env.blind_resends[0]} was sent again without being looked up first: an earlier run's "
                "outcome for it was not a known failure."
            )
        if env.regenerated:
            return f"{env.regenerated[0]} ran again after it was confirmed: a confirmed artifact must be reused."
        saved = sum(line.startswith("checkpoint token") for line in env.trace[self._started :])
        for record in env.checkpoints.records(job)[-saved:] if saved else ():  # this step's writes
            if record["workflow_version"] != env.workflow.version:
                return (
                    f"a checkpoint was written under {record['workflow_version']}, but the workflow is "
                    f"{env.workflow.version}."
                )
        for worker, value in self.returned:
            if len(sent) == 1 and (type(value) is not str or value != sent[0]):
                return (
                    f"{worker}'s run finished and returned {describe(value)}, but the email that reached the "
                    f"customer is {sent[0]}: return its message id."
                )
        return None

    def finished(self) -> str | None:
        env, job = self.env, self.job_id
        stored = env.checkpoints.load(job)
        done = stored.completed if stored is not None else ()
        sent = env.deliveries(job, "publish")
        if self.status == "acked" and done != env.workflow.step_ids:
            return (
                f"the job was acknowledged with the checkpoint confirming only [{', '.join(done)}]; a queue never "
                "delivers an acknowledged job again, so the rest is never done and the customer never hears."
            )
        if self.status != "acked":
            return f"the job was never finished and acknowledged: {self.last}."
        if not sent:
            return (
                "the checkpoint confirms publish, but the email reached the customer 0 times: your run treated "
                "it as sent without any proof that it was."
            )
        return None

    # ------------------------------------------------------------------ moves
    def _runs(self, worker: str) -> Callable[[Run], str]:
        def act(run: Run) -> str:
            if worker in self.holders:
                self.holders = tuple(w for w in self.holders if w != worker)
            elif self.status == "ready":
                self.status, self.deliveries = "held", self.deliveries + 1
            start = self._started = len(self.env.trace)
            called = run.call(run.answer(worker), self.job_id, _GatedEnv(self.env, run))
            if called.error is not None:
                self.last = f"{worker}'s run raised {error_text(called.error).rstrip('.')}"
            else:
                self.last = f"{worker}'s run returned {describe(called.value)} without acknowledging the job"
                self.returned.append((worker, called.value))
            self._settle(raised=called.error is not None)
            did = "; ".join(self.env.trace[start:]) or "nothing"
            ending = f"raised {error_text(called.error)}" if called.error is not None else f"returned {called.value!r}"
            return f"{worker} runs {self.job_id}: {did}; {ending}"

        return act

    def _settle(self, *, raised: bool) -> None:
        """After a run (or its process's death): where the delivery stands now."""
        if self.status == "acked" or any(job == self.job_id for job, _, _ in self.env.acks):
            self.status, self.lease = "acked", False
        elif self.holders:
            self.lease = True
        elif raised:
            self.status, self.lease = "ready", False  # a nack: the queue hands it out again
        else:
            self.lease = True  # only the lease running out gives it back

    def _duplicate(self, run: Run) -> str:
        self.status, self.holders, self.deliveries = "held", WORKERS, self.deliveries + 1
        return f"the queue hands {self.job_id} to {' and '.join(WORKERS)} before anyone acks it"

    def _expire(self, run: Run) -> str:
        self.status, self.lease = "ready", False
        return f"{self.job_id}'s lease runs out: the queue may deliver it again"


def _picture(record: Mapping[str, Any]) -> Hashable:
    """A stored checkpoint, its token aside, as a hashable value."""
    return (
        record["workflow_version"],
        tuple(record["completed"]),
        tuple(sorted(record["artifacts"].items())),
        tuple(sorted(record["intents"].items())),
        tuple(sorted((op, tuple(sorted(receipt.items()))) for op, receipt in record["receipts"].items())),
        tuple(sorted(record["budgets"].items())),
        tuple(record["approval_refs"]),
    )


def _first_job_done(run: Run) -> tuple[Env, frozenset[str]]:
    """A provider that has delivered FIRST_JOB's email: a clean run of the learner's code (a
    fresh copy, outside any schedule), and the operation ids it used there, forgotten by the
    env (a new job's run knows nothing of them) but kept to tell a collision."""
    env = Env()
    attempt(run.fresh(), FIRST_JOB, env.for_worker())
    used = frozenset(env.asked)
    env._known.clear()
    env.asked.clear()
    env.trace.clear()
    return env, used


def scenario(
    setting: str, faults: Sequence[ProviderFault], job_id: str, worlds: list[RecoveryWorld] | None = None
) -> Scenario:
    """The scenario of one setting; `worlds` (if given) collects every world started, so a
    check can show the last one's trace."""

    earlier: list[tuple[Env, frozenset[str]]] = []  # FIRST_JOB done, once per search: every world starts from it

    def start(run: Run) -> RecoveryWorld:
        if job_id != FIRST_JOB and not earlier:
            earlier.append(_first_job_done(run))
        world = RecoveryWorld(run, job_id, faults, earlier[0] if earlier else None)
        if worlds is not None:
            worlds[:] = [world]
        return world

    return Scenario(name=f"lab 05, {setting}", bound=bound(setting), start=start)
