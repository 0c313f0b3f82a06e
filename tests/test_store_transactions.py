"""Atomic by construction: every public method of the kit's components that changes a store
runs as one transaction of it, on SQLite and PostgreSQL, proven by running it.

The table below names every public method of every component (a new method fails
`test_the_table_names_every_public_method` until someone says how it stays atomic). Each
entry is run on a store that notes every write (records, counters, items, events) and every
transaction begun: a call that changes anything must begin exactly one transaction and make
every write inside it (or be a single statement, which is a transaction of its own); a
reading call writes nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from store_backends import DURABLE, Backend

from shopops_lab.checkpoint import Checkpoint, CheckpointStore
from shopops_lab.clock import FakeClock
from shopops_lab.effects import ContactLedger, EmailAdapter, Provider
from shopops_lab.errors import StaleTokenError
from shopops_lab.jobs import JobStore
from shopops_lab.outbox import Delivery, Dispatcher, IdempotentConsumer, OutboxStore
from shopops_lab.store import Store
from shopops_lab.store.base import transactional_methods
from shopops_lab.worker.queue import Queue

WRITES = (
    "put",
    "put_new",
    "next_number",
    "add_item",
    "write_item",
    "_insert_event",
    "lease_next",
    "ack_live",
    "add_logged",
)
# The last three: the SQL stores' acquire, ack and enqueue as one decision each: one statement
# (SQLite's runs a trigger of its connection's own), or one transaction of the store's own.
DECISIONS = ("lease_next", "ack_live", "add_logged")
COMPONENTS = (
    Queue,
    JobStore,
    CheckpointStore,
    OutboxStore,
    Dispatcher,
    IdempotentConsumer,
    Provider,
    EmailAdapter,
    ContactLedger,
)


@pytest.fixture(params=DURABLE)
def sql(request, tmp_path):
    made = Backend(request.param, tmp_path)
    yield made
    made.close()


class Noted:
    """What a store was asked to do during one call."""

    def __init__(self, store: Store) -> None:
        self.begun = 0
        self.writes: list[tuple[str, bool]] = []  # (write, inside a transaction)
        self.on = False
        begin = store._begin

        def counted_begin() -> None:
            self.begun += self.on
            begin()

        store._begin = counted_begin
        self.statements: list[bool] = []  # each writing statement sent, inside a transaction or not
        execute = store._execute

        def noted_execute(sql: str, params: Any = (), **how: Any) -> Any:
            if self.on and sql.lstrip().split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE", "WITH"):
                self.statements.append(store.atomic.open)
            return execute(sql, params, **how)

        store._execute = noted_execute
        for name in WRITES:
            if hasattr(store, name):
                setattr(store, name, self._noting(store, name, getattr(store, name)))

    def _noting(self, store: Store, name: str, method: Callable) -> Callable:
        def noted(*args: Any, **kwargs: Any) -> Any:
            if not self.on:
                return method(*args, **kwargs)
            inside, begun, written, sent = store.atomic.open, self.begun, len(self.writes), len(self.statements)
            try:
                return method(*args, **kwargs)
            finally:
                if name in DECISIONS:  # one decision and its event: one statement, or one transaction of its own
                    own, self.begun = self.begun - begun, begun
                    statements = self.statements[sent:]
                    assert (own == 1 and all(in_it for in_it in statements)) or (own == 0 and len(statements) == 1), (
                        f"{name} began {own} transactions for {len(statements)} writing statements"
                    )
                    inside = inside or own == 1
                    del self.writes[written:]  # what it wrote in its own transaction is the decision
                self.writes.append((name, inside))

        return noted

    def run(self, call: Callable[[], Any]) -> None:
        self.begun, self.writes, self.on = 0, [], True
        try:
            call()
        finally:
            self.on = False


# ---------------------------------------------------------------------- the calls, set up on a fresh store
def queue_with(store: Store, state: str = "ready") -> tuple[Queue, Any]:
    q = Queue(store=store, clock=FakeClock(), max_attempts=1)
    q.enqueue(case_id="O-1001")
    lease = q.acquire("W1") if state != "ready" else None
    if state == "dead":
        q.nack(lease, "boom")
    return q, lease


def jobs_with(store: Store, claimed: bool = True) -> tuple[JobStore, Any]:
    jobs = JobStore(store=store, clock=FakeClock())
    job = jobs.submit("O-1001:refund")
    return jobs, jobs.claim(job.id, "A", lease_seconds=30) if claimed else job


def checkpoints_with(store: Store) -> tuple[CheckpointStore, int]:
    checkpoints = CheckpointStore(store=store, clock=FakeClock())
    token = checkpoints.claim("O-1001")
    checkpoints.save("O-1001", Checkpoint.start("v1").confirm("fetch", "source-v1"), token=token)
    return checkpoints, token


def outbox_with(store: Store) -> OutboxStore:
    outbox = OutboxStore(store=store, clock=FakeClock())
    outbox.commit({"id": "O-1001", "status": "refunded"}, {"topic": "refund.issued", "payload": {}})
    return outbox


DELIVERY = Delivery(seq=1, message_id="out-0001", topic="refund.issued", payload={})
Setup = Callable[[Store], Callable[[], Any]]


def _queue(method: str, state: str = "ready") -> Setup:
    def setup(store: Store) -> Callable[[], Any]:
        q, lease = queue_with(store, state)
        calls = {
            "enqueue": lambda: q.enqueue(case_id="O-1002"),
            "acquire": lambda: q.acquire("W2"),
            "heartbeat": lambda: q.heartbeat(lease),
            "ack": lambda: q.ack(lease),
            "nack": lambda: q.nack(lease, "boom"),
            "expire_leases": lambda: q.expire_leases(now=100),
            "worker_crashed": lambda: q.worker_crashed("W1", lease),
            "worker_paused": lambda: q.worker_paused(lease),
            "worker_resumed": lambda: q.worker_resumed(lease),
            "replay_dlq": lambda: q.replay_dlq("item-0001"),
            "dlq_items": q.dlq_items,
            "item": lambda: q.item("item-0001"),
            "items": q.items,
            "leases": q.leases,
            "counts": q.counts,
            "depth": lambda: q.depth,
        }
        return calls[method]

    return setup


def _jobs(method: str, claimed: bool = True) -> Setup:
    def setup(store: Store) -> Callable[[], Any]:
        jobs, claim = jobs_with(store, claimed)
        job_id = claim.job_id if claimed else claim.id
        calls = {
            "submit": lambda: jobs.submit("O-1002:refund"),
            "claim": lambda: jobs.claim(job_id, "B", lease_seconds=5, now=60),
            "confirm_step": lambda: jobs.confirm_step(job_id, "fetch", token=claim.token),
            "complete": lambda: jobs.complete(job_id, token=claim.token, result={"ok": True}),
            "fail": lambda: jobs.fail(job_id, token=claim.token, error="boom"),
            "wait_for_approval": lambda: jobs.wait_for_approval(job_id, token=claim.token),
            "cancel": lambda: jobs.cancel(job_id),
            "get": lambda: jobs.get(job_id),
            "jobs": jobs.jobs,
        }
        if method == "approve":
            jobs.wait_for_approval(job_id, token=claim.token)
            return lambda: jobs.approve(job_id, "appr-0001")
        return calls[method]

    return setup


def _checkpoints(method: str) -> Setup:
    def setup(store: Store) -> Callable[[], Any]:
        checkpoints, token = checkpoints_with(store)
        if method == "verify":  # a stale token: the refusal is logged, in the call's own transaction
            checkpoints.claim("O-1001")
            return lambda: pytest.raises(StaleTokenError, checkpoints.verify, "O-1001", token)
        calls = {
            "claim": lambda: checkpoints.claim("O-1002"),
            "token": lambda: checkpoints.token("O-1001"),
            "load": lambda: checkpoints.load("O-1001"),
            "history": lambda: checkpoints.history("O-1001"),
            "records": lambda: checkpoints.records("O-1001"),
            "jobs": checkpoints.jobs,
            "save": lambda: checkpoints.save("O-1001", Checkpoint.start("v1").confirm("fetch", "s"), token=token),
            "migrate": lambda: checkpoints.migrate("O-1001", "v2", lambda cp: cp),
        }
        return calls[method]

    return setup


def _outbox(method: str) -> Setup:
    def setup(store: Store) -> Callable[[], Any]:
        outbox = outbox_with(store)
        calls = {
            "commit": lambda: outbox.commit({"id": "O-1001", "note": "x"}, {"topic": "t"}),
            "mark_sent": lambda: outbox.mark_sent("out-0001"),
            "pending": outbox.pending,
            "messages": outbox.messages,
            "row": lambda: outbox.row("O-1001"),
            "rows": outbox.rows,
        }
        return calls[method]

    return setup


def _consumer(method: str) -> Setup:
    def setup(store: Store) -> Callable[[], Any]:
        consumer = IdempotentConsumer(lambda delivery: None, store=store)
        return {"handle": lambda: consumer.handle(DELIVERY), "processed": lambda: consumer.processed}[method]

    return setup


def _effects(cls: type, method: str) -> Setup:
    def setup(store: Store) -> Callable[[], Any]:
        adapter = EmailAdapter(store=store, clock=FakeClock())
        adapter.send("O-1001:email:1", case_id="O-1001")
        target = {EmailAdapter: adapter, Provider: adapter.provider, ContactLedger: adapter.ledger}[cls]
        calls = {
            "send": lambda: adapter.send("O-1002:email:1", case_id="O-1002"),
            "deliver": lambda: target.deliver("op-2", case_id="O-1002", to="x", idem_key="k", dedupe=True),
            "lookup": lambda: target.lookup("O-1001:email:1"),
            "ledger": lambda: adapter.ledger,
            "inject": lambda: target.inject("fail"),
            "contacts": target.contacts if cls is ContactLedger else None,
            "duplicates": target.duplicates if cls is ContactLedger else None,
            "any_case_twice": target.any_case_twice if cls is ContactLedger else None,
            "record": lambda: target.record(target.contacts()[0]),
        }
        return calls[method]

    return setup


# One transaction each (or, for `writes=False`, no write at all).
CALLS: dict[tuple[type, str], tuple[Setup, bool]] = {
    **{
        (Queue, m): (_queue(m, s), True)
        for m, s in [
            ("enqueue", "ready"),
            ("acquire", "ready"),
            ("heartbeat", "leased"),
            ("ack", "leased"),
            ("nack", "leased"),
            ("expire_leases", "leased"),
            ("worker_crashed", "leased"),
            ("worker_paused", "leased"),
            ("worker_resumed", "leased"),
            ("replay_dlq", "dead"),
        ]
    },
    **{(Queue, m): (_queue(m, "dead"), False) for m in ("dlq_items", "item", "items", "leases", "counts", "depth")},
    **{
        (JobStore, m): (_jobs(m), True)
        for m in ("claim", "confirm_step", "complete", "fail", "wait_for_approval", "approve", "cancel")
    },
    (JobStore, "submit"): (_jobs("submit", claimed=False), True),
    **{(JobStore, m): (_jobs(m), False) for m in ("get", "jobs")},
    **{(CheckpointStore, m): (_checkpoints(m), True) for m in ("claim", "verify", "save", "migrate")},
    **{(CheckpointStore, m): (_checkpoints(m), False) for m in ("token", "load", "history", "records", "jobs")},
    **{(OutboxStore, m): (_outbox(m), True) for m in ("commit", "mark_sent")},
    **{(OutboxStore, m): (_outbox(m), False) for m in ("pending", "messages", "row", "rows")},
    (IdempotentConsumer, "handle"): (_consumer("handle"), True),
    (IdempotentConsumer, "processed"): (_consumer("processed"), False),
    (EmailAdapter, "send"): (_effects(EmailAdapter, "send"), True),
    **{(EmailAdapter, m): (_effects(EmailAdapter, m), False) for m in ("lookup", "ledger")},
    (Provider, "deliver"): (_effects(Provider, "deliver"), True),
    **{(Provider, m): (_effects(Provider, m), False) for m in ("lookup", "inject")},
    (ContactLedger, "record"): (_effects(ContactLedger, "record"), True),
    **{(ContactLedger, m): (_effects(ContactLedger, m), False) for m in ("contacts", "duplicates", "any_case_twice")},
}
# Calls made of several of the calls above, one transaction each, by design.
COMPOSED = {
    (Queue, "process_one"): "acquire, then the handler outside any transaction (it may take long), then ack or nack",
    (Queue, "open"): "opens a store (its set-up is one transaction) and makes a queue on it",
    (Dispatcher, "dispatch_once"): "publishes each message outside the store, then mark_sent, one message at a time",
    (IdempotentConsumer, "consume"): "one handle per delivery: a failed effect stops at its own delivery",
}


def public_methods(cls: type) -> set[str]:
    return {
        name
        for name, value in inspect.getmembers(cls)
        if not name.startswith("_")
        and (callable(value) or isinstance(value, property))
        and value.__class__ is not type
        and name not in {"clock", "log", "store"}
    }


def test_the_table_names_every_public_method():
    named = {key for key in (*CALLS, *COMPOSED)}
    missing = {(cls.__name__, name) for cls in COMPONENTS for name in public_methods(cls) if (cls, name) not in named}
    assert not missing, f"say how each of these stays atomic, in CALLS or COMPOSED: {sorted(missing)}"


# Writing methods without a mark of their own, and why they are still one transaction.
DELEGATES = {
    (CheckpointStore, "save"): "_write",  # marked; then on_save, after the commit
    (EmailAdapter, "send"): "Provider.deliver",
    (ContactLedger, "record"): "one statement",
    (Queue, "acquire"): "_acquire, or on PostgreSQL one statement when no lease is due",
    (Queue, "ack"): "_ack, or on PostgreSQL one statement when the lease is live and none is due",
    (Queue, "enqueue"): "_add, or on PostgreSQL one statement outside a transaction of the caller's",
}


def test_every_method_that_writes_is_marked_where_it_is_defined():
    unmarked = [
        (cls.__name__, name)
        for (cls, name), (_, writes) in CALLS.items()
        if writes and name not in transactional_methods(cls) and (cls, name) not in DELEGATES
    ]
    assert unmarked == []
    assert {"_write"} <= set(transactional_methods(CheckpointStore))
    assert {"_add", "_acquire", "_ack"} <= set(transactional_methods(Queue))


@pytest.mark.parametrize(("cls", "method"), list(CALLS), ids=[f"{c.__name__}.{m}" for c, m in CALLS])
def test_each_call_is_one_transaction(sql: Backend, cls: type, method: str):
    store = sql.open()
    noted = Noted(store)
    setup, writes = CALLS[(cls, method)]
    call = setup(store)
    noted.run(call)
    if not writes:
        assert noted.writes == [] and noted.begun == 0
        return
    assert noted.writes, "the call changed nothing: the setup is wrong"
    single_statement = noted.begun == 0 and len(noted.writes) == 1
    assert single_statement or (noted.begun == 1 and all(inside for _, inside in noted.writes)), noted.writes


def test_a_method_missing_its_mark_is_caught(sql: Backend):
    """The proof can fail: an OutboxStore whose commit lost its mark writes outside a transaction."""

    class Unmarked(OutboxStore):
        def commit(self, *args: Any, **kwargs: Any) -> str:  # overridden without @transaction
            return OutboxStore.commit(self, *args, **kwargs)

    store = sql.open()
    noted = Noted(store)
    outbox = Unmarked(store=store, clock=FakeClock())
    noted.run(lambda: outbox.commit({"id": "O-1001", "status": "refunded"}, {"topic": "t"}))
    assert noted.begun == 0 and len(noted.writes) > 1 and not any(inside for _, inside in noted.writes)
