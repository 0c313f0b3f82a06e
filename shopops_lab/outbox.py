"""The outbox: a state change and the message announcing it, committed together.

Writing a row and then publishing to a broker leaves a window: crash between the two
and the row says "refunded" while nobody is ever told. The outbox closes it by
recording the outgoing message in one local transaction together with the state change; a
separate `Dispatcher` later publishes what is pending and marks it sent.

That only moves the duplicate problem. The dispatcher can publish and then crash
before marking the message sent, so the next dispatch publishes it again. The
receiving side must therefore dedupe on the message id (`IdempotentConsumer`);
`NaiveConsumer` applies every delivery, to show the difference.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shopops_lab import arguments
from shopops_lab.clock import Clock, component_clock, resolve
from shopops_lab.errors import BadArgumentError, SimulatedCrash
from shopops_lab.events import EventKind, EventLog, component_log
from shopops_lab.payloads import frozen, json_copy
from shopops_lab.store import Store, bind_transactions, store_for, transaction

__all__ = ["Broker", "Delivery", "Dispatcher", "IdempotentConsumer", "NaiveConsumer", "OutboxMessage", "OutboxStore"]


@dataclass(frozen=True, kw_only=True, slots=True)
class OutboxMessage:
    """A message waiting in (or sent from) the outbox. `sent_at` is None until marked."""

    id: str
    topic: str
    payload: Mapping[str, Any]
    created_at: float
    sent_at: float | None = None
    origin: Any = field(default=None, repr=False, compare=False)  # the outbox it came from (its store)


@dataclass(frozen=True, kw_only=True, slots=True)
class Delivery:
    """One copy of a message as the broker handed it out. `seq` numbers the copies;
    `message_id` is the outbox's id, the same on every copy of one message."""

    seq: int
    message_id: str
    topic: str
    payload: Mapping[str, Any]
    key: str | None = field(default=None, repr=False)
    """What a consumer dedupes on: the message id, qualified by its outbox when the broker
    carries messages of more than one (each numbers its own from out-0001)."""

    @property
    def dedupe_key(self) -> str:
        return self.message_id if self.key is None else self.key


class OutboxStore:
    """A local database with two tables: `rows` (the application's state, by id) and
    the outbox. `commit` writes to both or to neither: one transaction of `store` (in this
    process by default, or a database given as a Store or a URL)."""

    def __init__(
        self, *, clock: Clock | None = None, log: EventLog | None = None, store: Store | str | None = None
    ) -> None:
        self.clock: Clock = component_clock(clock)
        self.store: Store = store_for(store, log)
        self.log = self.store.log
        bind_transactions(self, self.store)

    @transaction
    def commit(self, state_change: Mapping[str, Any], message: Mapping[str, Any], *, now: float | None = None) -> str:
        """Apply `state_change` ({"id": row id, field: value, ...}) and record `message`
        ({"topic": ..., "payload": {...}}) as one transaction; returns the message id
        (`out-0001`). Both are checked before anything is written."""
        change = json_copy(state_change, "state_change")
        if (
            not isinstance(change, dict)
            or not isinstance(change.get("id"), str)
            or not change["id"].strip()
            or not arguments.storable(change["id"])
        ):
            raise BadArgumentError(
                field="state_change",
                problem=f"is {state_change!r}",
                fix="pass a dict with the row's 'id', e.g. {'id': 'O-1001', 'status': 'refunded'}",
            )
        body = json_copy(message, "message")
        if not isinstance(body, dict) or not isinstance(body.get("topic"), str) or not body["topic"].strip():
            raise BadArgumentError(
                field="message",
                problem=f"is {message!r}",
                fix="pass a dict with a 'topic', e.g. {'topic': 'refund.issued', 'payload': {...}}",
            )
        payload = body.get("payload", {})
        if not isinstance(payload, dict) or set(body) - {"topic", "payload"}:
            raise BadArgumentError(
                field="message",
                problem=f"has keys {sorted(body)} and payload {payload!r}",
                fix="pass only 'topic' and a dict 'payload'",
            )
        t = resolve(self.clock, now)
        # everything is valid: the transaction cannot fail halfway from here
        row_id = change.pop("id")
        if not self.store.put_new(_ROWS, row_id, change):  # a new row is one INSERT; a known one is read locked
            self.store.put(_ROWS, row_id, {**self.store.get(_ROWS, row_id), **change})
        message_id = f"out-{self.store.next_number('out'):04d}"
        self.store.put(
            _MESSAGES, message_id, {"topic": body["topic"], "payload": payload, "created_at": t, "sent_at": None}
        )
        self.log.append(EventKind.OUTBOX_COMMITTED, t, item_id=message_id, case_id=row_id, topic=body["topic"])
        return message_id

    def pending(self) -> list[OutboxMessage]:
        """Messages not yet marked sent, oldest first."""
        return [m for m in self.messages() if m.sent_at is None]

    @transaction
    def mark_sent(self, message_id: str, *, now: float | None = None) -> OutboxMessage:
        record = self.store.get(_MESSAGES, message_id) if isinstance(message_id, str) else None
        if record is None:
            raise BadArgumentError(
                field="message_id",
                problem=f"is {message_id!r}, not in this outbox",
                fix="pass an id returned by commit() or listed by pending()",
            )
        t = resolve(self.clock, now)
        if record["sent_at"] is None:
            record = {**record, "sent_at": t}
            self.store.put(_MESSAGES, message_id, record)
            self.log.append(EventKind.OUTBOX_MARKED_SENT, t, item_id=message_id)
        return _message(message_id, record, self.store.url if self.store.shared else self.store)

    def messages(self) -> list[OutboxMessage]:
        origin = self.store.url if self.store.shared else self.store  # one outbox per database
        return [_message(message_id, record, origin) for message_id, record in self.store.scan(_MESSAGES)]

    def row(self, row_id: str) -> dict[str, Any] | None:
        """A copy of one row of application state, or None."""
        row = self.store.get(_ROWS, arguments.text("row_id", row_id, "the row's id, e.g. 'O-1001'"))
        return None if row is None else json_copy(row, "row")

    def rows(self) -> dict[str, dict[str, Any]]:
        """A copy of every row, by id."""
        return {row_id: json_copy(row, "row") for row_id, row in sorted(self.store.scan(_ROWS))}

    def __repr__(self) -> str:
        return (
            f"OutboxStore({len(self.store.scan(_ROWS))} rows, {len(self.pending())} pending "
            f"of {len(self.messages())} messages)"
        )


_ROWS, _MESSAGES = "outbox row", "outbox message"  # the two tables, as records of the store


def _message(message_id: str, record: Mapping[str, Any], origin: Any) -> OutboxMessage:
    return OutboxMessage(
        id=message_id,
        topic=record["topic"],
        payload=frozen(record["payload"]),
        created_at=record["created_at"],
        sent_at=record["sent_at"],
        origin=origin,
    )


class Broker:
    """An in-memory broker: every publish is one more delivery, duplicates included."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self._origins: list[Any] = []  # the outboxes published from, in order of their first message

    def publish(self, message: OutboxMessage) -> Delivery:
        """Hand out one more copy of `message` (its payload is read-only all the way down).
        Every outbox numbers its messages from out-0001, so a message of the second outbox
        published here carries a dedupe key of its own (`outbox-2/out-0001`): a consumer of
        this broker never takes it for the first outbox's message and drops it."""
        arguments.instance("message", message, OutboxMessage, "pass an OutboxMessage, e.g. from outbox.pending()")
        number = next(
            (
                n
                for n, seen in enumerate(self._origins, 1)
                if seen is message.origin or (isinstance(seen, str) and seen == message.origin)
            ),
            None,
        )
        if number is None:
            self._origins.append(message.origin)
            number = len(self._origins)
        delivery = Delivery(
            seq=len(self.deliveries) + 1,
            message_id=message.id,
            topic=message.topic,
            payload=message.payload,
            key=None if number == 1 else f"outbox-{number}/{message.id}",
        )
        self.deliveries.append(delivery)
        return delivery

    def __repr__(self) -> str:
        return f"Broker({len(self.deliveries)} deliveries)"


class Dispatcher:
    """Publishes pending outbox messages, then marks each one sent."""

    def __init__(self, outbox: OutboxStore, broker: Broker) -> None:
        self.outbox = arguments.instance("outbox", outbox, OutboxStore, "pass the OutboxStore to publish from")
        self.broker = arguments.instance("broker", broker, Broker, "pass the Broker to publish to, e.g. Broker()")

    def dispatch_once(self, *, crash_after_publish: bool = False, now: float | None = None) -> list[str]:
        """Publish every pending message and mark it sent; returns the ids published.
        With `crash_after_publish`, stop (SimulatedCrash) right after the first publish,
        before its mark: the message stays pending and the next dispatch publishes it again."""
        arguments.flag(
            "crash_after_publish", crash_after_publish, "pass True to crash after the first publish, or leave it out"
        )
        t = resolve(self.outbox.clock, now)  # one time for the whole pass, checked first
        published = []
        for message in self.outbox.pending():
            self.broker.publish(message)
            published.append(message.id)
            self.outbox.log.append(EventKind.OUTBOX_PUBLISHED, t, item_id=message.id, topic=message.topic)
            if crash_after_publish:
                self.outbox.log.append(EventKind.WORKER_CRASHED, t, item_id=message.id, point="after_publish")
                raise SimulatedCrash(point=f"dispatcher after publishing {message.id}")
            self.outbox.mark_sent(message.id, now=t)
        return published

    def __repr__(self) -> str:
        return f"Dispatcher({len(self.outbox.pending())} pending)"


class _Consumer(ABC):
    """Reads the broker from its own position (an offset), like a consumer group."""

    def __init__(
        self,
        effect: Callable[[Delivery], Any] | None = None,
        *,
        log: EventLog | None = None,
        clock: Clock | None = None,
    ) -> None:
        if effect is not None and not callable(effect):
            raise BadArgumentError(
                field="effect", problem=f"is {effect!r}", fix="pass a function that takes a Delivery, or leave it out"
            )
        self.effect = effect
        self.log = component_log(log)
        self.clock: Clock = component_clock(clock)
        self.applied: list[str] = []  # message ids, once per application of the effect
        self.position = 0

    def consume(self, broker: Broker) -> int:
        """Handle every delivery not seen yet; returns how many were applied. The position
        moves past a delivery only once it is handled: if the effect raises, the error
        propagates and the next `consume` tries the same delivery again."""
        arguments.instance("broker", broker, Broker, "pass the Broker to read, e.g. consumer.consume(broker)")
        applied = 0
        while self.position < len(broker.deliveries):
            applied += self.handle(broker.deliveries[self.position])
            self.position += 1
        return applied

    @abstractmethod
    def handle(self, delivery: Delivery) -> bool:
        """Apply `delivery` unless this consumer's rule says not; True if it was applied."""

    def _apply(self, delivery: Delivery) -> None:
        t = resolve(self.clock)
        if self.effect is not None:
            self.effect(delivery)
        self.applied.append(delivery.message_id)
        self.log.append(EventKind.MESSAGE_APPLIED, t, item_id=delivery.message_id, delivery=delivery.seq)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.applied)} applied)"


class IdempotentConsumer(_Consumer):
    """Applies each message once: a durable record of processed message ids (in `store`,
    this process's memory by default) turns a duplicate delivery into a no-op. The record
    is written in the same transaction as the effect's event."""

    def __init__(
        self,
        effect: Callable[[Delivery], Any] | None = None,
        *,
        log: EventLog | None = None,
        clock: Clock | None = None,
        store: Store | str | None = None,
    ) -> None:
        self.store: Store = store_for(store, log)
        super().__init__(effect, log=self.store.log, clock=clock)
        bind_transactions(self, self.store)

    @property
    def processed(self) -> set[str]:
        """The message ids applied so far (a copy)."""
        return {message_id for message_id, _ in self.store.scan(_PROCESSED)}

    @transaction(calls_out=True)
    def handle(self, delivery: Delivery) -> bool:
        """Apply `delivery` unless its message id was processed before; True if applied.
        The id is marked first, with one INSERT only one of any concurrent consumers wins
        (the others wait for it to commit, then dedupe); the mark, the effect's event and
        whatever the effect writes to this store are one transaction, so a failed effect
        leaves no mark and is retried."""
        _delivery(delivery)
        if not self.store.put_new(_PROCESSED, delivery.dedupe_key, delivery.seq):
            self.log.append(
                EventKind.MESSAGE_DEDUPED, resolve(self.clock), item_id=delivery.message_id, delivery=delivery.seq
            )
            return False
        self._apply(delivery)
        return True


_PROCESSED = "processed message"  # the consumer's idempotency records: message id -> the copy applied


class NaiveConsumer(_Consumer):
    """Applies every delivery, duplicates included. For contrast only."""

    def handle(self, delivery: Delivery) -> bool:
        _delivery(delivery)
        self._apply(delivery)
        return True


def _delivery(value: object) -> None:
    delivery: Delivery = arguments.instance("delivery", value, Delivery, "pass a Delivery from broker.deliveries")
    arguments.text("delivery.message_id", delivery.message_id, "the outbox's id of the message, e.g. 'out-0001'")
    if delivery.key is not None:
        arguments.text("delivery.key", delivery.key, "the key the broker gave the delivery, or leave it out")
