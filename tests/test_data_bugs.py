"""Regression tests for the data bugs of issue 12: calls that lost or corrupted data in
the very mechanisms the course teaches. Each test fails on the code before its fix."""

from __future__ import annotations

import copy
import math

import pytest

from shopops_lab.checker import check
from shopops_lab.checkpoint import Checkpoint, CheckpointStore
from shopops_lab.clock import FakeClock
from shopops_lab.effects import EmailAdapter
from shopops_lab.errors import (
    BadArgumentError,
    IdempotencyConflictError,
    ShopOpsError,
    StaleTokenError,
    UnknownLeaseError,
)
from shopops_lab.events import EventKind, EventLog
from shopops_lab.fencing import NaiveResultStore, TokenFence
from shopops_lab.jobs import JobStore
from shopops_lab.outbox import Broker, Dispatcher, IdempotentConsumer, NaiveConsumer, OutboxStore
from shopops_lab.states import ItemState
from shopops_lab.worker.queue import InMemoryQueue, Outcome


def queue_state(q: InMemoryQueue) -> tuple:
    return q.items(), q.counts(), q.log.to_dicts()


# --------------------------------------------------------------------------- leases of another queue


def two_queues_holding_item_0001() -> tuple[InMemoryQueue, InMemoryQueue, object, object]:
    qa, qb = InMemoryQueue(clock=FakeClock()), InMemoryQueue(clock=FakeClock())
    qa.enqueue(case_id="O-1001")
    qb.enqueue(case_id="O-1001")
    return qa, qb, qa.acquire("W1"), qb.acquire("W1")


@pytest.mark.parametrize("op", ["ack", "nack", "heartbeat"])
def test_a_lease_from_another_queue_is_refused_and_the_real_holder_still_settles(op):
    qa, qb, lease_a, lease_b = two_queues_holding_item_0001()
    assert lease_a.item_id == lease_b.item_id == "item-0001" and lease_a.token == lease_b.token == 1
    before = queue_state(qa)
    with pytest.raises(UnknownLeaseError, match="not granted by this queue"):
        getattr(qa, op)(lease_b)
    assert queue_state(qa) == before
    qa.ack(lease_a)  # the real holder's ack is accepted
    qb.ack(lease_b)  # and qb's own lease still works in qb
    assert qa.item("item-0001").state is qb.item("item-0001").state is ItemState.DONE


def test_copies_of_a_lease_are_still_the_queues_lease():
    q = InMemoryQueue(clock=FakeClock())
    q.enqueue(case_id="O-1001")
    lease = q.acquire("W1")
    assert q.heartbeat(copy.deepcopy(lease)) is True
    q.ack(copy.copy(lease))
    assert q.item(lease.item_id).state is ItemState.DONE


# --------------------------------------------------------------------------- the idempotent consumer


@pytest.mark.parametrize("consumer_class", [IdempotentConsumer, NaiveConsumer])
def test_a_consumer_whose_effect_fails_once_retries_the_message(consumer_class):
    outbox, broker = OutboxStore(), Broker()
    outbox.commit({"id": "O-1001", "status": "refunded"}, {"topic": "refund.issued", "payload": {"amount": 20}})
    Dispatcher(outbox, broker).dispatch_once()
    refunds, failures = [], ["payment gateway timed out"]

    def refund(delivery):
        if failures:
            raise RuntimeError(failures.pop())
        refunds.append(delivery.message_id)

    consumer = consumer_class(refund)
    with pytest.raises(RuntimeError, match="timed out"):
        consumer.consume(broker)
    assert consumer.position == 0 and consumer.applied == [] and refunds == []
    assert consumer.consume(broker) == 1
    assert refunds == ["out-0001"] and consumer.applied == ["out-0001"] and consumer.position == 1
    assert consumer.consume(broker) == 0 and refunds == ["out-0001"]


# --------------------------------------------------------------------------- idempotency keys


@pytest.mark.parametrize(
    "change, field",
    [
        ({"case_id": "O-2002"}, "case_id"),
        ({"to": "bob@example.com"}, "to"),
        ({"body": "Your refund was declined"}, "body"),
    ],
)
def test_an_idempotency_key_reused_for_a_different_request_is_a_conflict_on_every_backend(backend, change, field):
    """As Stripe does: a key names one request. The same key with another case, recipient or
    body is refused, naming the key and the difference, and nothing is sent or logged."""
    email = EmailAdapter(clock=FakeClock(), store=backend.open())
    sent = {"case_id": "O-1001", "to": "jordan@example.com", "body": "Your refund is on its way"}
    first = email.send("O-1001:email:3", **sent)
    log_before = email.provider.log.to_dicts()
    with pytest.raises(IdempotencyConflictError, match=f"{field} was") as err:
        email.send("O-1001:email:3", **{**sent, **change})
    assert err.value.key == "O-1001:email:3" and isinstance(err.value, ShopOpsError)
    assert "'O-1001:email:3'" in str(err.value) and "use a new key for a different request" in str(err.value)
    assert email.provider.log.to_dicts() == log_before and len(email.ledger) == 1
    repeat = email.send("O-1001:email:3", **sent)
    assert repeat.deduped and repeat.message_id == first.message_id and len(email.ledger) == 1
    other = email.send("O-1001:email:4", **{**sent, **change})  # a new key for the different request
    assert not other.deduped and other.message_id == "msg-0002"


def test_a_retry_after_a_refused_delivery_may_carry_another_body(backend):
    """Nothing reached the customer, so the key has no request to be a repeat of yet."""
    email = EmailAdapter(clock=FakeClock(), store=backend.open())
    email.provider.inject("fail")
    assert email.send("O-1001:email:1", case_id="O-1001", body="draft-v1").status.value == "failed"
    sent = email.send("O-1001:email:1", case_id="O-1001", body="draft-v2")
    assert sent.status.value == "ok" and not sent.deduped
    with pytest.raises(IdempotencyConflictError, match="body was 'draft-v2', now 'draft-v1'"):
        email.send("O-1001:email:1", case_id="O-1001", body="draft-v1")


# --------------------------------------------------------------------------- half-applied calls

BAD_TIMES = [math.nan, math.inf, -math.inf, "5", True, 1e20]


@pytest.mark.parametrize("now", BAD_TIMES)
def test_naive_result_store_claim_with_a_bad_time_issues_no_token(now):
    store = NaiveResultStore(clock=FakeClock())
    with pytest.raises(BadArgumentError):
        store.claim("job-1", "A", now=now)
    assert store.current_token("job-1") is None and len(store.log) == 0
    assert store.claim("job-1", "A") == 1


@pytest.mark.parametrize("now", BAD_TIMES)
def test_checkpoint_store_claim_save_and_migrate_with_a_bad_time_change_nothing(now):
    store = CheckpointStore(clock=FakeClock())
    token = store.claim("O-1001")
    store.save("O-1001", Checkpoint.start("v1"), token=token)
    before = (store.token("O-1001"), store.history("O-1001"), store.log.to_dicts())
    with pytest.raises(BadArgumentError):
        store.claim("O-1001", now=now)
    with pytest.raises(BadArgumentError):
        store.save("O-1001", Checkpoint.start("v1").confirm("fetch", "source-v1"), token=token, now=now)
    with pytest.raises(BadArgumentError):
        store.migrate("O-1001", "v2", lambda cp: cp, now=now)
    assert (store.token("O-1001"), store.history("O-1001"), store.log.to_dicts()) == before


@pytest.mark.parametrize("now", BAD_TIMES)
def test_dispatch_with_a_bad_time_publishes_nothing_so_the_next_dispatch_publishes_once(now):
    outbox, broker = OutboxStore(), Broker()
    outbox.commit({"id": "O-1001", "status": "refunded"}, {"topic": "refund.issued"})
    dispatcher = Dispatcher(outbox, broker)
    with pytest.raises(BadArgumentError):
        dispatcher.dispatch_once(now=now)
    assert broker.deliveries == [] and len(outbox.pending()) == 1
    assert dispatcher.dispatch_once() == ["out-0001"] and len(broker.deliveries) == 1


def test_a_lease_that_a_float_cannot_time_is_refused():
    q = InMemoryQueue(lease_seconds=30, clock=FakeClock())
    q.enqueue(case_id="O-1001")
    with pytest.raises(BadArgumentError, match="can time exactly") as err:
        q.acquire("W1", now=1e20)  # 1e20 + 30 == 1e20: a lease of no length
    assert err.value.field == "now"
    assert q.depth == 1 and len(q.log) == 1


# --------------------------------------------------------------------------- snapshots


def test_changing_a_jobs_params_or_result_changes_nothing_in_the_store():
    store = JobStore(clock=FakeClock())
    job = store.submit("O-1001:refund", {"case_id": "O-1001", "lines": [{"sku": "A", "qty": 1}]})
    job.params["lines"][0]["qty"] = 99
    claim = store.claim(job.id, "A", lease_seconds=30)
    done = store.complete(job.id, token=claim.token, result={"refund": {"amount": 20}})
    done.result["refund"]["amount"] = 0
    store.get(job.id).result["refund"]["amount"] = -1
    assert store.get(job.id).result == {"refund": {"amount": 20}}
    assert store.get(job.id).params["lines"] == [{"sku": "A", "qty": 1}]
    again = store.submit("O-1001:refund", {"case_id": "O-1001", "lines": [{"sku": "A", "qty": 1}]})
    assert again.id == job.id  # the honest retry is still the same request


def test_outbox_rows_and_deliveries_cannot_be_changed_by_their_readers():
    outbox, broker = OutboxStore(), Broker()
    outbox.commit(
        {"id": "O-1001", "refund": {"amount": 20}}, {"topic": "refund.issued", "payload": {"lines": [{"sku": "A"}]}}
    )
    outbox.row("O-1001")["refund"]["amount"] = 0
    outbox.rows()["O-1001"]["refund"]["amount"] = 0
    assert outbox.row("O-1001") == {"refund": {"amount": 20}}
    Dispatcher(outbox, broker).dispatch_once()
    seen = []

    def tamper(delivery):
        delivery.payload["lines"][0]["sku"] = "Z"

    with pytest.raises(TypeError):
        IdempotentConsumer(tamper).consume(broker)
    NaiveConsumer(lambda d: seen.append(d.payload["lines"][0]["sku"])).consume(broker)
    assert seen == ["A"] and outbox.messages()[0].payload["lines"][0]["sku"] == "A"


def test_the_info_passed_to_event_log_append_stays_the_callers():
    log = EventLog()
    meta = {"lines": [{"sku": "A"}], "note": "first"}
    log.append(EventKind.STEP_RAN, 1.0, **meta)
    meta["lines"][0]["sku"] = "Z"
    meta["lines"].append("more")
    assert log.to_dicts()[0]["info"] == {"lines": [{"sku": "A"}], "note": "first"}


# --------------------------------------------------------------------------- process_one


def one_item_queue() -> InMemoryQueue:
    q = InMemoryQueue(max_attempts=1, clock=FakeClock())
    q.enqueue(case_id="O-1001")
    return q


def test_process_one_without_a_handler_is_refused_before_any_attempt():
    q = one_item_queue()
    before = queue_state(q)
    with pytest.raises(BadArgumentError, match="handler") as err:
        q.process_one("W1", None)
    assert err.value.field == "handler" and queue_state(q) == before
    assert q.process_one("W1", lambda lease: None) == Outcome.OK


def test_a_handler_error_that_cannot_be_printed_is_recorded_whole():
    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no text")

    q = InMemoryQueue(max_attempts=2, clock=FakeClock())
    q.enqueue(case_id="O-1001")

    def handler(lease):
        raise Unprintable()

    assert q.process_one("W1", handler) == Outcome.RETRIED
    item = q.item("item-0001")
    assert item.state is ItemState.READY and item.worker_id is None
    assert item.last_error == "Unprintable: <Unprintable whose str() raised>"
    assert q.process_one("W1", lambda lease: None) == Outcome.OK


@pytest.mark.parametrize(
    "settle, outcome, state",
    [
        (lambda q, lease: q.ack(lease), Outcome.OK, ItemState.DONE),
        (lambda q, lease: q.nack(lease, error="bad address"), Outcome.DEAD, ItemState.DEAD),
    ],
)
@pytest.mark.parametrize("then_raise", [False, True])
def test_a_handler_that_settles_its_own_lease_is_taken_at_its_word(settle, outcome, state, then_raise):
    q = one_item_queue()

    def handler(lease):
        settle(q, lease)
        if then_raise:
            raise RuntimeError("after settling")

    assert q.process_one("W1", handler) == outcome
    assert q.item("item-0001").state is state


# =========================================================================== issue 18


def test_two_outboxes_through_one_broker_and_one_consumer_lose_no_message():
    first, second, broker = OutboxStore(), OutboxStore(), Broker()
    ids = [
        first.commit({"id": "O-1001", "status": "refunded"}, {"topic": "refund.issued"}),
        second.commit({"id": "A-1002", "status": "refunded"}, {"topic": "refund.issued"}),
    ]
    assert ids == ["out-0001", "out-0001"]  # each outbox numbers its own
    Dispatcher(first, broker).dispatch_once()
    Dispatcher(second, broker).dispatch_once()
    applied = []
    consumer = IdempotentConsumer(lambda d: applied.append((d.message_id, d.payload)))
    assert consumer.consume(broker) == 2 and len(applied) == 2
    assert consumer.processed == {"out-0001", "outbox-2/out-0001"}
    Dispatcher(first, broker).dispatch_once()  # nothing pending; a redelivery is still deduped
    broker.publish(first.messages()[0])
    broker.publish(second.messages()[0])
    assert consumer.consume(broker) == 0 and len(applied) == 2


def test_a_job_store_refuses_the_token_of_another_job_store():
    mine, theirs = JobStore(clock=FakeClock()), JobStore(clock=FakeClock())
    for jobs in (mine, theirs):
        jobs.submit("O-1001:refund")
    claim = mine.claim("job-0001", "A", lease_seconds=30)
    foreign = theirs.claim("job-0001", "B", lease_seconds=30)
    assert foreign.token == claim.token == 1 and repr(foreign.token) == "1"
    with pytest.raises(BadArgumentError, match="another job store"):
        mine.complete("job-0001", token=foreign.token, result="theirs")
    assert mine.get("job-0001").state.value == "running"
    assert mine.complete("job-0001", token=claim.token, result="mine").result == "mine"
    assert mine.get("job-0001").result == "mine"


def test_worker_notes_refuse_another_queues_lease_and_a_time_in_the_past():
    qa, qb, lease_a, lease_b = two_queues_holding_item_0001()
    before = len(qa.log)
    for note in (qa.worker_resumed, qa.worker_paused, lambda lease: qa.worker_crashed("W1", lease)):
        with pytest.raises(UnknownLeaseError, match="not granted by this queue"):
            note(lease_b)
    qa.worker_paused(lease_a, now=100)
    with pytest.raises(BadArgumentError, match="earlier than t=100"):
        qa.worker_crashed("W1", lease_a, now=0)
    assert [e.time for e in qa.log.events[before:]] == [100.0]


@pytest.mark.parametrize("version", ["v 2", "", " v2", "v2\n", "v/2"])
def test_migrate_refuses_a_version_no_workflow_could_have(version):
    checkpoints = CheckpointStore(clock=FakeClock())
    token = checkpoints.claim("O-1001")
    checkpoints.save("O-1001", Checkpoint.start("v1").confirm("fetch", "source-v1"), token=token)
    with pytest.raises(BadArgumentError, match="to_version"):
        checkpoints.migrate("O-1001", version, lambda cp: cp)
    assert checkpoints.token("O-1001") == token and len(checkpoints.history("O-1001")) == 1


@pytest.mark.parametrize("token", [math.nan, True, 1.5, "1", None])
def test_the_fence_refuses_what_is_not_a_token(token):
    fence = TokenFence("job")
    fence.claim("job-0001")
    with pytest.raises(BadArgumentError, match="token"):
        fence.check("job-0001", token, t=0.0, op="complete")
    assert len(fence.log) == 0


def test_the_naive_result_store_has_no_current_token_before_a_claim():
    """Lab 04's store says None, not 0, for a job nobody claimed: no token is current yet."""
    store = NaiveResultStore(clock=FakeClock())
    assert store.current_token("job-1") is None
    assert store.claim("job-1", "W7") == 1 and store.current_token("job-1") == 1
    assert store.current_token("job-2") is None


class _LabFourAnswer(NaiveResultStore):
    """Lab 04's natural answer: only the current token writes (None before any claim)."""

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        if token != self.current_token(job_id):
            raise StaleTokenError(what=job_id, token=token, current=self.current_token(job_id))
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


def test_a_write_the_naive_store_accepts_before_any_claim_is_named_as_such():
    store = NaiveResultStore(clock=FakeClock())
    store.complete("job-1", {"decision": "refund"}, token=0, worker_id="X")
    (anomaly,) = check(store.log).anomalies
    assert "with token 0, but nobody had claimed it, so no token was current" in anomaly.message


def _decision(call, *args, **kwargs) -> str:
    try:
        call(*args, **kwargs)
    except StaleTokenError:
        return "refused"
    return "accepted"


@pytest.mark.parametrize("claims", [0, 1, 2, 3])
def test_the_kit_fence_and_lab_04s_answer_decide_every_token_alike(claims):
    fence, lab = TokenFence("job"), _LabFourAnswer(clock=FakeClock())
    for n in range(claims):
        fence.claim("job-1")
        lab.claim("job-1", f"W{n}")
    assert fence.current_token("job-1") == lab.current_token("job-1")
    for token in range(-1, claims + 2):
        decisions = [
            _decision(fence.check, "job-1", token, t=0.0, op="complete"),
            _decision(lab.complete, "job-1", {"by": token}, token=token),
        ]
        assert decisions[0] == decisions[1] == ("accepted" if claims and token == claims else "refused"), token


@pytest.mark.parametrize(("claims", "token"), [(0, 1), (0, 0), (1, 2), (1, 0), (1, -1), (2, 3)])
def test_the_fence_accepts_only_the_current_token_as_lab_04_teaches(claims, token):
    fence = TokenFence("job")
    for _ in range(claims):
        fence.claim("job-0001")
    with pytest.raises(StaleTokenError) as refused:
        fence.check("job-0001", token, t=0.0, op="complete")
    assert (refused.value.token, refused.value.current) == (token, claims)
    assert [e.kind for e in fence.log] == [EventKind.STALE_REJECTED]
    assert fence.current_token("job-0001") == (claims or None)


def test_a_never_claimed_key_has_no_current_token_and_a_claimed_one_passes():
    fence = TokenFence("job")
    assert fence.current_token("job-0001") is None and fence.current("job-0001") == 0
    token = fence.claim("job-0001")
    fence.check("job-0001", token, t=0.0, op="complete")
    assert fence.current_token("job-0001") == 1 and len(fence.log) == 0


@pytest.mark.parametrize(
    ("first", "second"),
    [({"approve": 1}, {"approve": True}), ({"amount": 1}, {"amount": 1.0}), ({"lines": [0]}, {"lines": [False]})],
)
def test_requests_whose_json_differs_are_different_requests_on_every_backend(backend, first, second):
    jobs = JobStore(clock=FakeClock(), store=backend.open())
    jobs.submit("O-1001:refund", first)
    with pytest.raises(IdempotencyConflictError):
        jobs.submit("O-1001:refund", second)
    assert len(jobs) == 1 and jobs.submit("O-1001:refund", first).id == "job-0001"


def test_opening_a_sqlite_store_never_opens_its_file_outside_sqlite(tmp_path, monkeypatch):
    """Closing any descriptor of a database file drops every POSIX lock the process holds on
    it, so another process could reset the WAL under this process's other connections."""
    import builtins
    import io
    import pathlib

    from shopops_lab.store import open_store

    path = tmp_path / "shared.db"
    keeper = open_store(f"sqlite:///{path}")
    opened = []
    real_open = builtins.open

    def spy(file, *args, **kwargs):
        if str(file).startswith(str(path)):
            opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy)
    monkeypatch.setattr(io, "open", spy)
    monkeypatch.setattr(pathlib.Path, "open", lambda self, *a, **k: spy(self, *a, **k))
    open_store(f"sqlite:///{path}").close()
    keeper.close()
    assert opened == []
