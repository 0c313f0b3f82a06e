"""The job store, the checkpoint store and the outbox against reference models, driven by
Hypothesis through random runs of their operations, with bad calls and readers that
tamper with what they were handed mixed in.

Each model is the rules written the slow, obvious way. After every step the store and
its model must agree, and three things must hold whatever the sequence: a refused call
(bad input, a stale token, a conflict) changed nothing but the refusal's own log line;
changing a snapshot a store handed out changed nothing in the store; and the teaching
invariants (tokens and versions only grow, a message is applied once by the idempotent
consumer however often it is delivered, a failed effect is retried, not lost).

Every machine runs on every backend: memory (the full profile) and SQLite and PostgreSQL
(fewer, shorter runs: each example empties one database, and every call is a transaction).
The PostgreSQL machines skip, saying how to run them, when SHOPOPS_POSTGRES_URL is unset.

Profiles as in test_queue_stateful.py: HYPOTHESIS_PROFILE=ci (default) or dev (quick).
"""

from __future__ import annotations

import atexit
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from store_backends import BACKENDS, Backend

from shopops_lab.checkpoint import Checkpoint, CheckpointStore
from shopops_lab.clock import FakeClock
from shopops_lab.errors import (
    BadArgumentError,
    BudgetExhaustedError,
    IdempotencyConflictError,
    JobLeasedError,
    JobNotRunningError,
    SimulatedCrash,
    StaleTokenError,
    TransitionError,
    VersionConflictError,
)
from shopops_lab.events import EventKind
from shopops_lab.jobs import JOB_TRANSITIONS, JobState, JobStore
from shopops_lab.outbox import Broker, Dispatcher, IdempotentConsumer, NaiveConsumer, OutboxStore
from shopops_lab.store import open_store

settings.register_profile(
    "stores-ci",
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("stores-dev", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PROFILE = "stores-" + os.environ.get("HYPOTHESIS_PROFILE", "ci")
STEPS = 40
SQL_EXAMPLES, SQL_STEPS = (20, 25) if PROFILE == "stores-ci" else (5, 15)


class Databases:
    """One database per SQL backend for the whole module, emptied before each example."""

    def __init__(self) -> None:
        self._made: dict[str, tuple[Backend, str]] = {}
        self._open: dict[str, Any] = {}  # the store of the running example, per backend
        self._folder = tempfile.TemporaryDirectory()
        atexit.register(self.close)

    def store(self, name: str) -> Any:
        if name == "memory":
            return None  # each component's own default: a memory store
        if name not in self._made:
            backend = Backend(name, Path(self._folder.name))  # skips here, saying how, without a server
            self._made[name] = (backend, backend.url())
            self._open[name] = open_store(self._made[name][1])  # sets the database up
        backend, url = self._made[name]
        self._open.pop(name).close()  # the last example's
        backend.empty(url)
        self._open[name] = store = open_store(url)
        return store

    def close(self) -> None:
        for store in self._open.values():
            store.close()
        for backend, _ in self._made.values():
            backend.close()
        self._made.clear()
        self._folder.cleanup()


DATABASES = Databases()

Q, R, W, S, F, C = (
    JobState.QUEUED,
    JobState.RUNNING,
    JobState.WAITING_FOR_APPROVAL,
    JobState.SUCCEEDED,
    JobState.FAILED,
    JobState.CANCELLED,
)
KEYS = ("O-1001:refund", "A-1002:refund", "B-1003:email")
PARAMS = ({"case_id": "O-1001"}, {"case_id": "O-1001", "lines": [{"sku": "A", "qty": 1}]}, {"case_id": "A-1002"})
WORKERS = ("A", "B")
BAD_TIMES = (math.nan, math.inf, -math.inf, "5", True, 1e20)
index = st.integers(min_value=0, max_value=10_000)


def snapshot_of(value: Any) -> Any:
    """A comparable deep copy of what a store shows."""
    return repr(value)


# =========================================================================== the job store


@dataclass
class ModelJob:
    id: str
    key: str
    params: dict
    state: JobState = Q
    version: int = 1
    last_step: str | None = None
    token: int = 0
    owner: str | None = None
    expires_at: float | None = None
    result: Any = None
    error: str | None = None
    approval_ref: str | None = None


class JobMachine(RuleBasedStateMachine):
    backend = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.store = JobStore(clock=FakeClock(), store=DATABASES.store(self.backend))
        self.now = 0.0
        self.jobs: dict[str, ModelJob] = {}
        self.by_key: dict[str, str] = {}
        self.stale = 0

    def job(self, i: int) -> ModelJob:
        return list(self.jobs.values())[i % len(self.jobs)]

    def token_for(self, job: ModelJob, choice: str) -> int:
        return {"current": job.token, "older": job.token - 1, "never": job.token + 1}[choice]

    def expect(self, outcome: type[Exception] | None, call) -> Any:
        """Run `call`; if the model predicts a refusal, it must be that one and change nothing
        but the refusal's own log line (a stale token is logged: it is the lesson)."""
        if outcome is None:
            return call()
        before = (snapshot_of(self.store.jobs()), len(self.store.log))
        with pytest.raises(outcome):
            call()
        logged = 1 if outcome is StaleTokenError else 0
        self.stale += logged
        assert (snapshot_of(self.store.jobs()), len(self.store.log)) == (before[0], before[1] + logged)

    def fenced(self, job: ModelJob, token: int) -> type[Exception] | None:
        if not 1 <= token <= job.token:
            return BadArgumentError
        return StaleTokenError if token < job.token else None

    def move(self, job: ModelJob, target: JobState) -> type[Exception] | None:
        return None if (job.state, target) in JOB_TRANSITIONS else TransitionError

    # ------------------------------------------------------------------ rules
    @rule(key=st.sampled_from(KEYS), params=st.sampled_from(PARAMS))
    def submit(self, key, params):
        known = self.by_key.get(key)
        if known is not None and self.jobs[known].params != params:
            return self.expect(IdempotencyConflictError, lambda: self.store.submit(key, params, now=self.now))
        got = self.store.submit(key, params, now=self.now)
        if known is None:
            known = self.by_key[key] = f"job-{len(self.jobs) + 1:04d}"
            self.jobs[known] = ModelJob(id=known, key=key, params=params)
        assert got.id == known

    @precondition(lambda self: self.jobs)
    @rule(i=index, worker=st.sampled_from(WORKERS), lease=st.sampled_from([5, 30]))
    def claim(self, i, worker, lease):
        job = self.job(i)
        if job.state is R and job.owner != worker and self.now < job.expires_at:
            outcome = JobLeasedError
        else:
            outcome = self.move(job, R)
        self.expect(outcome, lambda: self.store.claim(job.id, worker, lease_seconds=lease, now=self.now))
        if outcome is None:
            job.state, job.token, job.owner, job.expires_at = R, job.token + 1, worker, self.now + lease
            job.version += 1

    @precondition(lambda self: self.jobs)
    @rule(
        i=index,
        token=st.sampled_from(["current", "older", "never"]),
        step=st.sampled_from(["fetch", "send"]),
        expected=st.sampled_from([None, "read", "old"]),
    )
    def confirm_step(self, i, token, step, expected):
        job = self.job(i)
        t = self.token_for(job, token)
        version = {None: None, "read": job.version, "old": job.version - 1}[expected]
        outcome = self.fenced(job, t)
        if outcome is None and version is not None and version != job.version:
            outcome = VersionConflictError
        if outcome is None and job.state is not R:
            outcome = JobNotRunningError
        self.expect(
            outcome, lambda: self.store.confirm_step(job.id, step, token=t, expected_version=version, now=self.now)
        )
        if outcome is None:
            job.last_step, job.version = step, job.version + 1

    @precondition(lambda self: self.jobs)
    @rule(
        i=index,
        token=st.sampled_from(["current", "older", "never"]),
        ending=st.sampled_from(["complete", "fail", "wait_for_approval"]),
    )
    def end(self, i, token, ending):
        job = self.job(i)
        t = self.token_for(job, token)
        target = {"complete": S, "fail": F, "wait_for_approval": W}[ending]
        outcome = self.fenced(job, t) or self.move(job, target)
        result = {"refund": {"amount": 20, "lines": [1, 2]}}
        calls = {
            "complete": lambda: self.store.complete(job.id, token=t, result=result, now=self.now),
            "fail": lambda: self.store.fail(job.id, token=t, error="provider refused", now=self.now),
            "wait_for_approval": lambda: self.store.wait_for_approval(job.id, token=t, now=self.now),
        }
        self.expect(outcome, calls[ending])
        if outcome is None:
            job.state, job.owner, job.expires_at, job.version = target, None, None, job.version + 1
            if target is S:
                job.result = result
            elif target is F:
                job.error = "provider refused"

    @precondition(lambda self: self.jobs)
    @rule(i=index, action=st.sampled_from(["approve", "cancel"]))
    def person(self, i, action):
        job = self.job(i)
        target = Q if action == "approve" else C
        outcome = self.move(job, target)
        call = (
            (lambda: self.store.approve(job.id, "appr-1", now=self.now))
            if action == "approve"
            else (lambda: self.store.cancel(job.id, reason="withdrawn", now=self.now))
        )
        self.expect(outcome, call)
        if outcome is None:
            job.state, job.version = target, job.version + 1
            if action == "approve":
                job.approval_ref = "appr-1"
            else:
                job.error, job.owner, job.expires_at = "withdrawn", None, None

    @rule(seconds=st.sampled_from([0, 1, 4, 10, 31]))
    def advance(self, seconds):
        self.now += seconds

    @precondition(lambda self: self.jobs)
    @rule(
        i=index,
        bad=st.sampled_from(BAD_TIMES),
        call=st.sampled_from(["submit", "claim", "confirm", "complete", "cancel"]),
    )
    def bad_time(self, i, bad, call):
        job = self.job(i)
        calls = {
            "submit": lambda: self.store.submit(job.key, job.params, now=bad),
            "claim": lambda: self.store.claim(job.id, "A", lease_seconds=5, now=bad),
            "confirm": lambda: self.store.confirm_step(job.id, "fetch", token=max(job.token, 1), now=bad),
            "complete": lambda: self.store.complete(job.id, token=max(job.token, 1), now=bad),
            "cancel": lambda: self.store.cancel(job.id, now=bad),
        }
        # a bad time is refused first, or the token (never issued) is: either way nothing changes
        self.expect(BadArgumentError, calls[call])

    @precondition(lambda self: self.jobs)
    @rule(i=index)
    def tamper(self, i):
        """A reader changes everything it was handed; the store must not notice."""
        job = self.store.get(self.job(i).id)
        if "lines" in job.params:
            job.params["lines"][0]["qty"] = 99
            job.params["lines"].append({"sku": "Z"})
        if isinstance(job.result, dict):
            job.result["refund"]["amount"] = 0
            job.result.clear()

    # ------------------------------------------------------------------ invariants
    @invariant()
    def store_and_model_agree(self):
        got = self.store.jobs()
        assert [j.id for j in got] == list(self.jobs)
        for job in got:
            m = self.jobs[job.id]
            assert (
                job.request_key,
                dict(job.params),
                job.state,
                job.version,
                job.last_step,
                job.token,
                job.owner,
                job.lease_expires_at,
                job.result,
                job.error,
                job.approval_ref,
            ) == (
                m.key,
                m.params,
                m.state,
                m.version,
                m.last_step,
                m.token,
                m.owner,
                m.expires_at,
                m.result,
                m.error,
                m.approval_ref,
            )

    @invariant()
    def every_stale_write_was_logged_once(self):
        assert len(self.store.log.where(EventKind.STALE_REJECTED)) == self.stale


# =========================================================================== the checkpoint store


class CheckpointMachine(RuleBasedStateMachine):
    JOBS = ("O-1001", "A-1002")
    STEPS = ("fetch", "summarize", "publish")

    backend = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.store = CheckpointStore(clock=FakeClock(), store=DATABASES.store(self.backend))
        self.tokens: dict[str, int] = {}
        self.history: dict[str, list[Checkpoint]] = {}
        self.stale = 0

    def observed(self) -> tuple:
        return (tuple((j, self.store.token(j), self.store.history(j)) for j in self.JOBS), len(self.store.log))

    def next_checkpoint(self, job: str, change: str) -> Checkpoint:
        last = self.history[job][-1] if self.history.get(job) else Checkpoint.start("v1", budgets={"tool_calls": 2})
        todo = [s for s in self.STEPS if s not in last.completed]
        if change == "confirm" and todo:
            return last.confirm(todo[0], f"{todo[0]}-artifact")
        if change == "intend":
            return last.intend(f"{job}:publish:v1", "publish")
        return last.spend("tool_calls")  # BudgetExhaustedError once spent: a value error, no store involved

    @rule(job=st.sampled_from(JOBS))
    def claim(self, job):
        assert self.store.claim(job) == self.tokens.get(job, 0) + 1
        self.tokens[job] = self.tokens.get(job, 0) + 1

    @rule(
        job=st.sampled_from(JOBS),
        token=st.sampled_from(["current", "older", "never"]),
        change=st.sampled_from(["confirm", "intend", "spend"]),
    )
    def save(self, job, token, change):
        current = self.tokens.get(job, 0)
        t = {"current": current, "older": current - 1, "never": current + 1}[token]
        try:
            checkpoint = self.next_checkpoint(job, change)
        except BudgetExhaustedError:
            return
        before = self.observed()
        if not 1 <= t <= current:
            with pytest.raises(BadArgumentError):
                self.store.save(job, checkpoint, token=t)
            assert self.observed() == before
        elif t < current:
            with pytest.raises(StaleTokenError):
                self.store.save(job, checkpoint, token=t)
            self.stale += 1
            assert self.observed()[0] == before[0]
        else:
            stored = self.store.save(job, checkpoint, token=t)
            assert stored.token == t and stored.completed == checkpoint.completed
            self.history.setdefault(job, []).append(stored)

    @rule(job=st.sampled_from(JOBS), fn=st.sampled_from(["same", "confirm", "junk"]))
    def migrate(self, job, fn):
        functions = {"same": lambda cp: cp, "confirm": lambda cp: cp.approve("appr-1"), "junk": lambda cp: None}
        before = self.observed()
        if not self.history.get(job) or fn == "junk":
            with pytest.raises(BadArgumentError):
                self.store.migrate(job, "v2", functions[fn])
            assert self.observed() == before
            return
        stored = self.store.migrate(job, "v2", functions[fn])
        self.tokens[job] += 1
        assert stored.workflow_version == "v2" and stored.token == self.tokens[job]
        self.history[job].append(stored)

    @rule(job=st.sampled_from(JOBS), bad=st.sampled_from(BAD_TIMES), call=st.sampled_from(["claim", "save", "migrate"]))
    def bad_time(self, job, bad, call):
        before = self.observed()
        calls = {
            "claim": lambda: self.store.claim(job, now=bad),
            "save": lambda: self.store.save(
                job, Checkpoint.start("v1"), token=max(self.tokens.get(job, 0), 1), now=bad
            ),
            "migrate": lambda: self.store.migrate(job, "v2", lambda cp: cp, now=bad),
        }
        with pytest.raises(BadArgumentError):
            calls[call]()
        assert self.observed() == before

    @rule(job=st.sampled_from(JOBS))
    def tamper(self, job):
        checkpoint = self.store.load(job)
        if checkpoint is not None:
            with pytest.raises(TypeError):
                checkpoint.artifacts["fetch"] = "forged"  # read-only all the way: nothing to write through
            with pytest.raises(TypeError):
                checkpoint.budgets["tool_calls"] = 99

    @invariant()
    def store_and_model_agree(self):
        for job in self.JOBS:
            assert self.store.token(job) == self.tokens.get(job, 0)
            assert list(self.store.history(job)) == self.history.get(job, [])
            tokens = [cp.token for cp in self.store.history(job)]
            assert tokens == sorted(tokens)  # no write under an older token got in
        assert len(self.store.log.where(EventKind.STALE_REJECTED)) == self.stale


# =========================================================================== the outbox


@dataclass
class ModelOutbox:
    rows: dict[str, dict] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    deliveries: list[str] = field(default_factory=list)


class OutboxMachine(RuleBasedStateMachine):
    backend = "memory"

    def __init__(self) -> None:
        super().__init__()
        store = DATABASES.store(self.backend)
        self.outbox, self.broker = OutboxStore(clock=FakeClock(), store=store), Broker()
        self.dispatcher = Dispatcher(self.outbox, self.broker)
        self.fail_next = {"idempotent": False, "naive": False}
        self.effects: dict[str, list[str]] = {"idempotent": [], "naive": []}
        self.consumers = {
            "idempotent": IdempotentConsumer(self.effect("idempotent"), store=store),
            "naive": NaiveConsumer(self.effect("naive")),
        }
        self.model = ModelOutbox()
        self.positions = {"idempotent": 0, "naive": 0}

    def effect(self, name: str):
        def apply(delivery):
            if self.fail_next[name]:
                self.fail_next[name] = False
                raise RuntimeError("payment gateway timed out")
            self.effects[name].append(delivery.message_id)

        return apply

    def observed(self) -> tuple:
        return (
            self.outbox.rows(),
            self.outbox.messages(),
            len(self.outbox.log),
            list(self.broker.deliveries),
            {n: (c.position, list(c.applied)) for n, c in self.consumers.items()},
        )

    @rule(
        row=st.sampled_from(["O-1001", "A-1002"]),
        status=st.sampled_from(["refunded", "paid"]),
        amount=st.sampled_from([5, 20]),
    )
    def commit(self, row, status, amount):
        message_id = self.outbox.commit(
            {"id": row, "status": status, "detail": {"amount": amount}},
            {"topic": f"order.{status}", "payload": {"lines": [{"amount": amount}]}},
        )
        self.model.rows.setdefault(row, {}).update({"status": status, "detail": {"amount": amount}})
        assert message_id == f"out-{len(self.model.pending) + len(self.model.sent) + 1:04d}"
        self.model.pending.append(message_id)

    @rule(crash=st.booleans())
    def dispatch(self, crash):
        if crash and self.model.pending:
            with pytest.raises(SimulatedCrash):
                self.dispatcher.dispatch_once(crash_after_publish=True)
            self.model.deliveries.append(self.model.pending[0])  # published, never marked sent
            return
        assert self.dispatcher.dispatch_once() == self.model.pending
        self.model.deliveries += self.model.pending
        self.model.sent += self.model.pending
        self.model.pending = []

    @rule(name=st.sampled_from(["idempotent", "naive"]), fail=st.booleans())
    def consume(self, name, fail):
        consumer, model_position = self.consumers[name], self.positions[name]
        ahead = self.model.deliveries[model_position:]
        applies = list(ahead)
        if name == "idempotent":  # the first copy of each message not handled before
            seen = set(self.model.deliveries[:model_position])
            applies = [m for i, m in enumerate(ahead) if m not in seen and m not in ahead[:i]]
        self.fail_next[name] = fail and bool(applies)
        if self.fail_next[name]:
            first = ahead.index(applies[0])
            with pytest.raises(RuntimeError):
                consumer.consume(self.broker)
            self.positions[name] = model_position + first  # stops at the failed one, to retry it
            return
        assert consumer.consume(self.broker) == len(applies)
        self.positions[name] = len(self.model.deliveries)

    @rule(bad=st.sampled_from(BAD_TIMES), call=st.sampled_from(["commit", "dispatch", "mark_sent"]))
    def bad_time(self, bad, call):
        before = self.observed()
        calls = {
            "commit": lambda: self.outbox.commit({"id": "O-1001", "status": "x"}, {"topic": "t"}, now=bad),
            "dispatch": lambda: self.dispatcher.dispatch_once(now=bad),
            "mark_sent": lambda: self.outbox.mark_sent("out-0001", now=bad),
        }
        with pytest.raises(BadArgumentError):
            calls[call]()
        assert self.observed() == before

    @rule(
        message=st.sampled_from(
            [
                {"topic": " "},
                {"topic": "t", "payload": [1]},
                {"topic": "t", "x": 1},
                {"topic": "t", "payload": {"amount": math.inf}},
            ]
        )
    )
    def bad_commit(self, message):
        before = self.observed()
        with pytest.raises(BadArgumentError):
            self.outbox.commit({"id": "O-1001", "status": "lost"}, message)
        assert self.observed() == before

    @rule()
    def tamper(self):
        for row in [*self.outbox.rows().values(), *(r for r in [self.outbox.row("O-1001")] if r)]:
            row["detail"]["amount"] = -1
        for delivery in self.broker.deliveries:
            with pytest.raises(TypeError):
                delivery.payload["lines"][0]["amount"] = -1

    @invariant()
    def outbox_and_model_agree(self):
        assert self.outbox.rows() == dict(sorted(self.model.rows.items()))
        assert [m.id for m in self.outbox.pending()] == self.model.pending
        assert [d.message_id for d in self.broker.deliveries] == self.model.deliveries
        assert {n: c.position for n, c in self.consumers.items()} == self.positions

    @invariant()
    def the_idempotent_consumer_applies_each_message_once_and_loses_none(self):
        consumer = self.consumers["idempotent"]
        handled = self.model.deliveries[: consumer.position]
        assert self.effects["idempotent"] == consumer.applied == list(dict.fromkeys(handled))
        assert consumer.processed == set(handled)
        assert self.effects["naive"] == self.model.deliveries[: self.consumers["naive"].position]


def on_every_backend(machine: type[RuleBasedStateMachine]) -> dict[str, Any]:
    """The machine's test case on each backend: TestJobMachineMemory, ...Sqlite, ...Postgresql."""
    cases = {}
    for name in BACKENDS:
        runs = (
            machine if name == "memory" else type(f"{machine.__name__}On{name.title()}", (machine,), {"backend": name})
        )
        examples, steps = (None, STEPS) if name == "memory" else (SQL_EXAMPLES, SQL_STEPS)
        profile = settings.get_profile(PROFILE)
        runs.TestCase.settings = settings(
            profile, stateful_step_count=steps, max_examples=examples or profile.max_examples
        )
        cases[f"Test{machine.__name__}{name.title()}"] = runs.TestCase
    return cases


for _machine in (JobMachine, CheckpointMachine, OutboxMachine):
    globals().update(on_every_backend(_machine))
