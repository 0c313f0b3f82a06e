"""Side effects the customer can see, and the adapters that make them safe to repeat.

A `Provider` stands in for the outside service (an email or SMS gateway). It can fail,
or deliver and then lose its reply, which leaves the caller not knowing whether the
customer was contacted: the *unknown* outcome. A `ChannelAdapter` sends through it
with an idempotency key (the provider dedupes on it, like an Idempotency-Key header),
so a redelivered job that sends again gets the first message id back instead of a
second message. `NaiveAdapter` ignores the key, to show what goes wrong without one.
Every delivery is written to the `ContactLedger` and the event log.
"""
from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass
from enum import StrEnum

from shopops_lab.clock import Clock, FakeClock
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import EventKind, EventLog
from shopops_lab.store import MemoryStore, Store

__all__ = ["ChannelAdapter", "Contact", "ContactLedger", "EmailAdapter", "Fault", "NaiveAdapter",
           "NaiveEmailAdapter", "NaiveSmsAdapter", "Provider", "SendResult", "SendStatus", "SmsAdapter"]


class SendStatus(StrEnum):
    OK = "ok"            # delivered, and we know the message id
    FAILED = "failed"    # the provider refused: nothing reached the customer
    UNKNOWN = "unknown"  # the reply was lost: it may or may not have been delivered


class Fault(StrEnum):
    """What the provider does to the next delivery, when told to misbehave."""

    FAIL = "fail"              # refuse without delivering
    DROP_REPLY = "drop_reply"  # deliver, then lose the reply


@dataclass(frozen=True, kw_only=True, slots=True)
class SendResult:
    status: SendStatus
    op_id: str
    message_id: str | None = None
    deduped: bool = False  # True when a repeat of `op_id` returned the first message


@dataclass(frozen=True, kw_only=True, slots=True)
class Contact:
    """One message that really reached a customer."""

    message_id: str
    channel: str
    case_id: str
    to: str
    idem_key: str
    time: float
    worker_id: str | None


class ContactLedger:
    """Every message a customer received, so a lesson can count them per case. It lives in
    a store: in this process by default, or in a database every worker process shares."""

    __slots__ = ("store",)

    def __init__(self, *, store: Store | None = None) -> None:
        self.store: Store = store if store is not None else MemoryStore()

    def record(self, contact: Contact) -> None:
        self.store.put("contact", contact.message_id, asdict(contact))

    def contacts(self, case_id: str | None = None) -> list[Contact]:
        return [Contact(**row) for _, row in self.store.scan("contact")
                if case_id is None or row["case_id"] == case_id]

    def duplicates(self) -> dict[tuple[str, str], list[Contact]]:
        """(case_id, idem_key) -> contacts, for every intent the customer got more than once."""
        by_intent: dict[tuple[str, str], list[Contact]] = {}
        for contact in self.contacts():
            by_intent.setdefault((contact.case_id, contact.idem_key), []).append(contact)
        return {key: group for key, group in sorted(by_intent.items()) if len(group) > 1}

    def __len__(self) -> int:
        return len(self.store.scan("contact"))

    def __repr__(self) -> str:
        return f"ContactLedger({len(self)} contacts, {len(self.duplicates())} duplicated intents)"


class Provider:
    """A fake external channel: numbers messages (`msg-0001`), dedupes on operation id
    when asked to, and misbehaves on cue (`inject`). What it delivered is kept in its
    ledger's store, with the record of each operation, in one transaction."""

    def __init__(self, channel: str = "email", *, prefix: str = "msg",
                 ledger: ContactLedger | None = None, log: EventLog | None = None,
                 clock: Clock | None = None, store: Store | None = None) -> None:
        if store is not None and ledger is not None and ledger.store is not store:
            raise BadArgumentError(field="ledger", problem="keeps its contacts in another store",
                                   fix="pass either store= or ledger=, or a ledger on the same store")
        self.channel = channel
        self.prefix = prefix
        self.ledger = ledger if ledger is not None else ContactLedger(
            store=store if store is not None else MemoryStore(log=log))
        self.store = self.ledger.store
        self.log = log if log is not None else self.store.log
        self.clock = clock if clock is not None else FakeClock()
        self._faults: deque[Fault] = deque()

    def inject(self, fault: Fault | str, times: int = 1) -> None:
        """Make the next `times` deliveries suffer `fault`."""
        if fault not in Fault._value2member_map_ and not isinstance(fault, Fault):
            raise BadArgumentError(field="fault", problem=f"is {fault!r}",
                                   fix=f"pass one of {', '.join(f.value for f in Fault)}")
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise BadArgumentError(field="times", problem=f"is {times!r}", fix="pass a whole number >= 1")
        self._faults.extend([Fault(fault)] * times)

    def deliver(self, op_id: str, *, case_id: str, to: str, idem_key: str, dedupe: bool,
                worker_id: str | None = None, now: float | None = None) -> SendResult:
        t = self.clock.now() if now is None else now
        with self.store.atomic:  # the operation's record, the contact and its event: all or none
            sent = self.store.get(self._kind, op_id) if dedupe else None
            if sent is not None:
                self.log.append(EventKind.CONTACT_DEDUPED, t, case_id=case_id, worker_id=worker_id,
                                channel=self.channel, message_id=sent, idem_key=idem_key)
                return SendResult(status=SendStatus.OK, op_id=op_id, message_id=sent, deduped=True)
            fault = self._faults.popleft() if self._faults else None
            if fault is Fault.FAIL:
                self.log.append(EventKind.EFFECT_FAILED, t, case_id=case_id, worker_id=worker_id,
                                channel=self.channel, idem_key=idem_key, op_id=op_id)
                return SendResult(status=SendStatus.FAILED, op_id=op_id)
            message_id = f"{self.prefix}-{self.store.next_number(self.prefix):04d}"
            self.store.put(self._kind, op_id, message_id)
            self.ledger.record(Contact(message_id=message_id, channel=self.channel, case_id=case_id,
                                       to=to, idem_key=idem_key, time=t, worker_id=worker_id))
            self.log.append(EventKind.CONTACT_SENT, t, case_id=case_id, worker_id=worker_id,
                            channel=self.channel, message_id=message_id, idem_key=idem_key, to=to)
        if fault is Fault.DROP_REPLY:
            self.log.append(EventKind.EFFECT_UNKNOWN, t, case_id=case_id, worker_id=worker_id,
                            channel=self.channel, idem_key=idem_key, op_id=op_id)
            return SendResult(status=SendStatus.UNKNOWN, op_id=op_id)
        return SendResult(status=SendStatus.OK, op_id=op_id, message_id=message_id)

    def lookup(self, op_id: str) -> str | None:
        """The message id delivered for `op_id`, or None if nothing was delivered."""
        return self.store.get(self._kind, op_id)

    @property
    def _kind(self) -> str:
        return f"{self.channel} operation"  # the provider's own idempotency records


class ChannelAdapter:
    """Sends through a provider with an idempotency key: a repeat of the key returns the
    first message id and the customer hears nothing new."""

    channel = "email"
    prefix = "msg"
    dedupes = True

    def __init__(self, provider: Provider | None = None, *, ledger: ContactLedger | None = None,
                 log: EventLog | None = None, clock: Clock | None = None, store: Store | None = None) -> None:
        self.provider = provider if provider is not None else Provider(
            self.channel, prefix=self.prefix, ledger=ledger, log=log, clock=clock, store=store)
        self._ops = 0

    @property
    def ledger(self) -> ContactLedger:
        return self.provider.ledger

    def send(self, idem_key: str, *, case_id: str, to: str = "customer", body: str = "",
             worker_id: str | None = None, now: float | None = None) -> SendResult:
        """Deliver `body` to `to` for `case_id`, at most once per `idem_key`."""
        for field, value in (("idem_key", idem_key), ("case_id", case_id), ("to", to)):
            if not isinstance(value, str) or not value:
                raise BadArgumentError(field=field, problem=f"is {value!r}",
                                       fix="pass a non-empty string, e.g. idem_key='O-1001:email:3'")
        return self.provider.deliver(self._op_id(idem_key), case_id=case_id, to=to,
                                     idem_key=idem_key, dedupe=self.dedupes,
                                     worker_id=worker_id, now=now)

    def lookup(self, op_id: str) -> SendResult:
        """Reconcile an unknown outcome: ask the provider whether `op_id` was delivered."""
        message_id = self.provider.lookup(op_id)
        if message_id is None:
            return SendResult(status=SendStatus.FAILED, op_id=op_id)
        return SendResult(status=SendStatus.OK, op_id=op_id, message_id=message_id)

    def _op_id(self, idem_key: str) -> str:
        return idem_key

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.ledger)} contacts)"


class EmailAdapter(ChannelAdapter):
    channel, prefix = "email", "msg"


class SmsAdapter(ChannelAdapter):
    channel, prefix = "sms", "sms"


class NaiveAdapter(ChannelAdapter):
    """Ignores the idempotency key: every call is a new message. For contrast only."""

    dedupes = False

    def _op_id(self, idem_key: str) -> str:
        self._ops += 1
        return f"{idem_key}#{self._ops}"


class NaiveEmailAdapter(NaiveAdapter):
    channel, prefix = "email", "msg"


class NaiveSmsAdapter(NaiveAdapter):
    channel, prefix = "sms", "sms"
