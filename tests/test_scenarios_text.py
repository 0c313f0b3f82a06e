"""The chapter's worked scenarios, replayed with the queue and the channel adapters only.

(a) W1 dies after sending, the lease expires, W7 runs the same handler: the idempotency
    key keeps it to one email (and a naive adapter shows the double).
(b) A poison item fails five times, lands in the DLQ with its last error, and succeeds
    after the handler is fixed and the item replayed.
(c) A long handler heartbeats between chunks; a pause loses the lease, so the worker stops
    before its side effect and its late ack is fenced off.
(d) Token 4 against token 5 at the queue: the stale worker's ack is rejected.
"""

from __future__ import annotations

import pytest

from shopops_lab.clock import FakeClock
from shopops_lab.effects import ChannelAdapter, EmailAdapter, NaiveEmailAdapter, SendResult
from shopops_lab.errors import LeaseLostError, StaleTokenError
from shopops_lab.events import EventKind, EventLog
from shopops_lab.states import ItemState
from shopops_lab.worker.queue import InMemoryQueue, Lease, Outcome

IDEM_KEY = "O-1001:email:3"


def burst_day(
    adapter_class: type[ChannelAdapter], *, lease_seconds: float = 30, max_attempts: int = 5
) -> tuple[InMemoryQueue, ChannelAdapter, FakeClock]:
    """A queue and an email adapter sharing one clock and one event log."""
    clock, log = FakeClock(), EventLog()
    queue = InMemoryQueue(lease_seconds=lease_seconds, max_attempts=max_attempts, clock=clock, log=log)
    return queue, adapter_class(clock=clock, log=log), clock


def enqueue_jordans_email(queue: InMemoryQueue, **payload) -> str:
    return queue.enqueue(
        case_id="O-1001",
        tenant_id="store_northline",
        kind="contact_send",
        payload=payload or {"idem_key": IDEM_KEY, "to": "jordan@example.com"},
    )


def outreach(adapter: ChannelAdapter, runs: list[str], results: list[SendResult]):
    """The handler: draft Jordan's delay email and send it under the item's idempotency key."""

    def handler(lease: Lease) -> None:
        runs.append(lease.worker_id)
        body = f"Hi Jordan, order {lease.case_id} is delayed; here is what we are doing about it."
        results.append(
            adapter.send(
                lease.payload["idem_key"],
                case_id=lease.case_id,
                to=lease.payload["to"],
                body=body,
                worker_id=lease.worker_id,
            )
        )

    return handler


# --------------------------------------------------------------------------- (a)


def test_a_forced_expiry_delivers_twice_but_the_idempotency_key_sends_once():
    queue, email, _ = burst_day(EmailAdapter)
    enqueue_jordans_email(queue)
    runs, results = [], []
    handler = outreach(email, runs, results)

    lease = queue.acquire("W1")
    handler(lease)  # drafted and sent ... and W1 dies before its ack
    assert queue._expire_leases(now=lease.expires_at + 1) == [lease.item_id]

    redelivery = queue.acquire("W7")
    assert (redelivery.case_id, redelivery.item_id, redelivery.token, redelivery.attempt) == (
        "O-1001",
        lease.item_id,
        2,
        2,
    )
    handler(redelivery)
    queue.ack(redelivery)

    assert runs == ["W1", "W7"]  # the handler ran twice
    assert len(email.ledger.contacts("O-1001")) == 1  # Jordan got one email
    assert email.ledger.duplicates() == {}
    first, second = results
    assert (first.message_id, first.deduped) == ("msg-0001", False)
    assert (second.message_id, second.deduped) == ("msg-0001", True)  # the repeat returned the first id
    assert [e.kind for e in queue.log if e.kind in (EventKind.CONTACT_SENT, EventKind.CONTACT_DEDUPED)] == [
        EventKind.CONTACT_SENT,
        EventKind.CONTACT_DEDUPED,
    ]
    assert queue.item(lease.item_id).state is ItemState.DONE


def test_a_the_same_redelivery_through_a_naive_adapter_emails_jordan_twice():
    queue, email, _ = burst_day(NaiveEmailAdapter)
    enqueue_jordans_email(queue)
    runs, results = [], []
    handler = outreach(email, runs, results)

    lease = queue.acquire("W1")
    handler(lease)
    queue._expire_leases(now=lease.expires_at + 1)
    handler(redelivery := queue.acquire("W7"))
    queue.ack(redelivery)

    assert runs == ["W1", "W7"]
    assert [r.message_id for r in results] == ["msg-0001", "msg-0002"]
    ((intent, contacts),) = email.ledger.duplicates().items()
    assert intent == ("O-1001", IDEM_KEY)
    assert [(c.message_id, c.worker_id) for c in contacts] == [("msg-0001", "W1"), ("msg-0002", "W7")]


def test_a_the_texts_process_one_sketch_runs_the_handler_and_acks():
    queue, email, _ = burst_day(EmailAdapter)
    enqueue_jordans_email(queue)
    runs, results = [], []
    assert queue.process_one("worker-1", outreach(email, runs, results)) == "ok"
    assert runs == ["worker-1"] and len(email.ledger) == 1


# --------------------------------------------------------------------------- (b)


def test_b_a_poison_item_fails_five_times_goes_to_the_dlq_and_succeeds_after_a_fix_and_replay():
    queue, email, clock = burst_day(EmailAdapter, max_attempts=5)
    poison = enqueue_jordans_email(queue, idemKey=IDEM_KEY, to="jordan@example.com")  # bad schema
    runs, results = [], []
    strict = outreach(email, runs, results)  # reads payload["idem_key"]: KeyError on the poison

    outcomes = []
    for _ in range(5):
        outcomes.append(queue.process_one("W1", strict))
        clock.advance(1)
    assert outcomes == ["retried"] * 4 + ["dead"]
    assert queue.process_one("W1", strict) == "empty"  # no retry storm: it stopped
    (dead,) = queue.dlq_items()
    assert (dead.id, dead.attempts, dead.enqueued_at, dead.dead_at) == (poison, 5, 0.0, 4.0)
    assert dead.last_error == "KeyError: 'idem_key'"
    assert len(email.ledger) == 0

    def fixed(lease: Lease) -> None:  # the fix: accept the legacy field name too
        key = lease.payload.get("idem_key", lease.payload.get("idemKey"))
        email.send(key, case_id=lease.case_id, to=lease.payload["to"], worker_id=lease.worker_id)

    for item in queue.dlq_items():
        queue.replay_dlq(item.id)
    assert queue.process_one("W1", fixed) == "ok"
    assert queue.dlq_items() == []
    assert queue.item(poison).state is ItemState.DONE and queue.item(poison).replays == 1
    assert [c.idem_key for c in email.ledger.contacts("O-1001")] == [IDEM_KEY]


# --------------------------------------------------------------------------- (c)


def long_handler(queue: InMemoryQueue, adapter: ChannelAdapter, lease: Lease, between_chunks) -> None:
    """Generate a reply in chunks, heartbeating after each; send only while the lease is ours."""
    for chunk in range(3):
        between_chunks(chunk)  # streaming tokens, awaiting a tool ... time passes
        if not queue.heartbeat(lease):
            raise LeaseLostError(worker_id=lease.worker_id, item_id=lease.item_id, token=lease.token)
    adapter.send(lease.payload["idem_key"], case_id=lease.case_id, to=lease.payload["to"], worker_id=lease.worker_id)


def test_c_a_lost_lease_heartbeat_stops_the_worker_before_its_side_effect():
    queue, email, clock = burst_day(EmailAdapter, lease_seconds=30)
    item_id = enqueue_jordans_email(queue)
    w1 = queue.acquire("W1")  # t=0, due at 30

    def w1_pauses_at_chunk_2(chunk: int) -> None:
        if chunk < 2:
            clock.advance(10)  # t=10, 20: each heartbeat pushes the deadline to t+30
            return
        clock.advance(45)  # a long pause: t=65, past the deadline of 50
        w7 = queue.acquire("W7")  # meanwhile the case is redelivered and finished
        long_handler(queue, email, w7, lambda _: clock.advance(1))
        queue.ack(w7)

    with pytest.raises(LeaseLostError, match="stop side effects now") as lost:
        long_handler(queue, email, w1, w1_pauses_at_chunk_2)
    assert (lost.value.worker_id, lost.value.token) == ("W1", 1)
    assert [(c.worker_id, c.message_id) for c in email.ledger.contacts("O-1001")] == [("W7", "msg-0001")]
    with pytest.raises(StaleTokenError) as stale:
        queue.ack(w1)
    assert (stale.value.token, stale.value.current) == (1, 2)
    assert queue.item(item_id).state is ItemState.DONE
    heartbeats = [(e.worker_id, e.time) for e in queue.log.where(EventKind.HEARTBEAT)]
    assert heartbeats == [("W1", 10.0), ("W1", 20.0), ("W7", 66.0), ("W7", 67.0), ("W7", 68.0)]


def test_c_without_heartbeats_the_key_still_prevents_a_double_but_the_work_was_wasted():
    queue, email, clock = burst_day(EmailAdapter, lease_seconds=30)
    enqueue_jordans_email(queue)
    w1 = queue.acquire("W1")
    clock.advance(65)  # W1 is paused mid-generation and never checks its lease
    w7 = queue.acquire("W7")
    long_handler(queue, email, w7, lambda _: clock.advance(1))
    queue.ack(w7)
    late = email.send(w1.payload["idem_key"], case_id=w1.case_id, to=w1.payload["to"], worker_id="W1")
    assert late.deduped and late.message_id == "msg-0001"
    assert len(email.ledger) == 1


# --------------------------------------------------------------------------- (d)


def test_d_token_4_is_rejected_once_token_5_was_issued():
    queue, _, clock = burst_day(EmailAdapter, lease_seconds=2, max_attempts=5)
    item_id = enqueue_jordans_email(queue)
    for crashing_worker, t in (("W2", 2), ("W3", 4), ("W4", 6)):  # tokens 1-3 expire unacked
        clock.set(t)
        queue.acquire(crashing_worker)
    clock.set(8)
    a = queue.acquire("A")
    assert (a.token, a.expires_at) == (4, 10.0)
    clock.set(11)
    b = queue.acquire("B")
    assert b.token == 5
    with pytest.raises(StaleTokenError, match="carries token 4, but the store's current token is 5") as err:
        queue.ack(a)
    assert (err.value.token, err.value.current) == (4, 5)
    assert queue.heartbeat(a) is False
    queue.ack(b)
    assert queue.item(item_id).state is ItemState.DONE
    rejected = queue.log.where(EventKind.STALE_REJECTED)
    assert [(e.worker_id, e.token, e.info["op"], e.info["current"]) for e in rejected] == [
        ("A", 4, "ack", 5),
        ("A", 4, "heartbeat", 5),
    ]


def test_d_process_one_reports_the_fenced_worker_as_lost():
    queue, _, clock = burst_day(EmailAdapter, lease_seconds=2)
    enqueue_jordans_email(queue)

    def a_stalls_while_b_takes_over(lease: Lease) -> None:
        clock.advance(3)
        b = queue.acquire("B")
        queue.ack(b)

    assert queue.process_one("A", a_stalls_while_b_takes_over) is Outcome.LOST
    assert queue.counts()[ItemState.DONE] == 1
