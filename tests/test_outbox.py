"""The outbox: one local transaction for state and message, a dispatcher that may
publish twice, and the consumer that makes the duplicate harmless."""

from __future__ import annotations

import pytest

from shopops_lab.clock import FakeClock
from shopops_lab.errors import BadArgumentError, SimulatedCrash
from shopops_lab.events import EventKind, EventLog
from shopops_lab.outbox import Broker, Delivery, Dispatcher, IdempotentConsumer, NaiveConsumer, OutboxStore

REFUND = {"id": "O-1001", "status": "refunded", "amount": 25}
NOTICE = {"topic": "refund.issued", "payload": {"case_id": "O-1001", "amount": 25}}


@pytest.fixture
def outbox() -> OutboxStore:
    return OutboxStore(clock=FakeClock(5), log=EventLog())


def test_commit_writes_the_state_change_and_the_message_together(outbox):
    message_id = outbox.commit(REFUND, NOTICE)
    assert message_id == "out-0001"
    assert outbox.row("O-1001") == {"status": "refunded", "amount": 25}
    [message] = outbox.pending()
    assert (message.id, message.topic, dict(message.payload), message.created_at, message.sent_at) == (
        "out-0001",
        "refund.issued",
        {"case_id": "O-1001", "amount": 25},
        5.0,
        None,
    )
    assert outbox.commit({"id": "O-1002", "status": "refunded"}, {"topic": "refund.issued"}) == "out-0002"
    assert [e.item_id for e in outbox.log.where(EventKind.OUTBOX_COMMITTED)] == ["out-0001", "out-0002"]


def test_a_later_commit_updates_the_row(outbox):
    outbox.commit(REFUND, NOTICE)
    outbox.commit({"id": "O-1001", "status": "closed"}, {"topic": "case.closed", "payload": {}})
    assert outbox.rows() == {"O-1001": {"status": "closed", "amount": 25}}


@pytest.mark.parametrize(
    "state_change, message, field",
    [
        ({"status": "refunded"}, NOTICE, "state_change"),  # no row id
        ({"id": "O-1001", "when": object()}, NOTICE, "state_change['when']"),  # not JSON
        (REFUND, {"payload": {}}, "message"),  # no topic
        (REFUND, {"topic": "refund.issued", "payload": {"ids": {1, 2}}}, "message['payload']['ids']"),
        (REFUND, {"topic": "refund.issued", "payload": "25"}, "message"),
        (REFUND, {"topic": "refund.issued", "priority": 1}, "message"),
    ],
)
def test_a_failing_commit_leaves_nothing_half_written(outbox, state_change, message, field):
    outbox.commit({"id": "O-0999", "status": "open"}, {"topic": "case.opened"})
    rows, messages = outbox.rows(), outbox.messages()
    with pytest.raises(BadArgumentError) as err:
        outbox.commit(state_change, message)
    assert err.value.field == field
    assert outbox.rows() == rows and outbox.messages() == messages
    assert outbox.row("O-1001") is None


def test_callers_cannot_change_a_committed_message(outbox):
    payload = {"case_id": "O-1001"}
    outbox.commit({"id": "O-1001"}, {"topic": "t", "payload": payload})
    payload["case_id"] = "O-9999"
    assert outbox.pending()[0].payload["case_id"] == "O-1001"
    row = outbox.row("O-1001")
    row["status"] = "changed"
    assert outbox.row("O-1001") == {}


def test_dispatch_publishes_pending_messages_once_and_marks_them_sent(outbox):
    broker = Broker()
    outbox.commit(REFUND, NOTICE)
    outbox.commit({"id": "O-1002"}, {"topic": "refund.issued"})
    dispatcher = Dispatcher(outbox, broker)
    assert dispatcher.dispatch_once(now=7) == ["out-0001", "out-0002"]
    assert outbox.pending() == [] and [m.sent_at for m in outbox.messages()] == [7.0, 7.0]
    assert dispatcher.dispatch_once() == []
    assert [(d.seq, d.message_id) for d in broker.deliveries] == [(1, "out-0001"), (2, "out-0002")]


def test_mark_sent_is_idempotent_and_checks_the_id(outbox):
    outbox.commit(REFUND, NOTICE)
    first = outbox.mark_sent("out-0001", now=6)
    assert outbox.mark_sent("out-0001", now=9) == first
    with pytest.raises(BadArgumentError) as err:
        outbox.mark_sent("out-0042")
    assert err.value.field == "message_id"


def dispatch_with_a_crash(outbox: OutboxStore, broker: Broker) -> None:
    outbox.commit(REFUND, NOTICE)
    dispatcher = Dispatcher(outbox, broker)
    with pytest.raises(SimulatedCrash) as err:
        dispatcher.dispatch_once(crash_after_publish=True)
    assert "out-0001" in err.value.point
    assert [m.id for m in outbox.pending()] == ["out-0001"]  # published, but not marked
    assert dispatcher.dispatch_once() == ["out-0001"]  # so the restart publishes it again


def test_a_dispatcher_crash_publishes_twice_and_only_the_idempotent_consumer_applies_once(outbox):
    broker = Broker()
    dispatch_with_a_crash(outbox, broker)
    assert [d.message_id for d in broker.deliveries] == ["out-0001", "out-0001"]

    refunds_told: list[str] = []
    careful = IdempotentConsumer(lambda d: refunds_told.append(d.payload["case_id"]), log=outbox.log)
    naive = NaiveConsumer()
    assert careful.consume(broker) == 1
    assert naive.consume(broker) == 2
    assert (refunds_told, careful.applied, naive.applied) == (["O-1001"], ["out-0001"], ["out-0001", "out-0001"])
    assert [e.info["delivery"] for e in outbox.log.where(EventKind.MESSAGE_DEDUPED)] == [2]
    kinds = [
        e.kind
        for e in outbox.log.where((EventKind.OUTBOX_PUBLISHED, EventKind.WORKER_CRASHED, EventKind.OUTBOX_MARKED_SENT))
    ]
    assert kinds == [
        EventKind.OUTBOX_PUBLISHED,
        EventKind.WORKER_CRASHED,
        EventKind.OUTBOX_PUBLISHED,
        EventKind.OUTBOX_MARKED_SENT,
    ]


def test_a_consumer_reads_from_its_own_position(outbox):
    broker = Broker()
    consumer = IdempotentConsumer()
    outbox.commit(REFUND, NOTICE)
    Dispatcher(outbox, broker).dispatch_once()
    assert consumer.consume(broker) == 1 and consumer.position == 1
    assert consumer.consume(broker) == 0
    assert consumer.handle(Delivery(seq=9, message_id="out-0001", topic="t", payload={})) is False
    assert repr(consumer) == "IdempotentConsumer(1 applied)"


def test_a_consumer_effect_must_be_callable():
    with pytest.raises(BadArgumentError) as err:
        IdempotentConsumer(effect="send an email")
    assert err.value.field == "effect"


def test_reprs_are_deterministic(outbox):
    broker = Broker()
    outbox.commit(REFUND, NOTICE)
    assert repr(outbox) == "OutboxStore(1 rows, 1 pending of 1 messages)"
    dispatcher = Dispatcher(outbox, broker)
    assert repr(dispatcher) == "Dispatcher(1 pending)"
    dispatcher.dispatch_once()
    assert repr(broker) == "Broker(1 deliveries)"
