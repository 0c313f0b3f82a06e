"""Side effects the customer can see, and the adapters that make them safe to repeat.

A `Provider` stands in for the outside service (an email or SMS gateway). It can fail,
deliver and then lose its reply, or lose the request before it arrives; the last two
look the same to the caller, who does not know whether the customer was contacted: the
*unknown* outcome, which only `lookup` settles. A `ChannelAdapter` sends through it
with an idempotency key (the provider dedupes on it, like an Idempotency-Key header),
so a redelivered job that sends again gets the first message id back instead of a
second message. `NaiveAdapter` ignores the key, to show what goes wrong without one.
Every delivery is written to the `ContactLedger` and the event log.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shopops_lab import arguments
from shopops_lab.clock import Clock, component_clock, resolve
from shopops_lab.errors import BadArgumentError, IdempotencyConflictError
from shopops_lab.events import EventKind, EventLog, component_log
from shopops_lab.payloads import itself, state_copy
from shopops_lab.store import MemoryStore, Store, bind_transactions, transaction

__all__ = [
    "ChannelAdapter",
    "Contact",
    "ContactLedger",
    "EmailAdapter",
    "Fault",
    "NaiveAdapter",
    "NaiveEmailAdapter",
    "NaiveSmsAdapter",
    "Provider",
    "ProviderFault",
    "SendResult",
    "SendStatus",
    "SmsAdapter",
]


class SendStatus(StrEnum):
    OK = "ok"  # delivered, and we know the message id
    FAILED = "failed"  # the provider refused: nothing reached the customer
    UNKNOWN = "unknown"  # no reply came back: it may or may not have been delivered


class ProviderFault(StrEnum):
    """What the provider does to the next delivery, when told to misbehave."""

    FAIL = "fail"  # refuse without delivering
    DROP_REPLY = "drop_reply"  # deliver, then lose the reply: unknown to the caller, but sent
    LOSE_REQUEST = "lose_request"  # the request never arrives: unknown to the caller, and nothing sent


Fault = ProviderFault  # the name lab 05 imports; the simulator has a Fault of its own


@dataclass(frozen=True, kw_only=True, slots=True)
class SendResult:
    __deepcopy__ = itself

    status: SendStatus
    op_id: str
    message_id: str | None = None
    deduped: bool = False  # True when a repeat of `op_id` returned the first message


@dataclass(frozen=True, kw_only=True, slots=True)
class Contact:
    """One message that really reached a customer."""

    __deepcopy__ = itself

    message_id: str
    channel: str
    case_id: str
    to: str
    idem_key: str
    time: float
    worker_id: str | None


_CONTACTS = "contact"  # the ledger's records: message id -> the contact


def _a_store(value: object) -> Store:
    if not callable(getattr(value, "put", None)) or not callable(getattr(value, "scan", None)):
        raise BadArgumentError(
            field="store",
            problem=f"is {value!r}, not a store",
            fix="pass a store from shopops_lab.store.open_store(url), or leave it out",
        )
    return value  # type: ignore[return-value]


class ContactLedger:
    """Every message a customer received, so a lesson can count them per case. It lives in
    a store: in this process by default, or in a database every worker process shares."""

    __slots__ = ("store",)

    def __init__(self, *, store: Store | None = None) -> None:
        self.store: Store = MemoryStore() if store is None else _a_store(store)

    def record(self, contact: Contact) -> None:
        arguments.instance("contact", contact, Contact, "pass a Contact (providers record what they deliver)")
        self._keep(
            {  # flat, so no asdict (a deep copy, on a hot path)
                "message_id": contact.message_id,
                "channel": contact.channel,
                "case_id": contact.case_id,
                "to": contact.to,
                "idem_key": contact.idem_key,
                "time": contact.time,
                "worker_id": contact.worker_id,
            }
        )

    def _keep(self, row: dict[str, Any]) -> None:
        """Store one contact as its flat row (`Contact`'s fields, in order): the provider hands
        its own checked values straight here, with no `Contact` built only to be taken apart."""
        self.store.put(_CONTACTS, row["message_id"], row)

    def contacts(self, case_id: str | None = None) -> list[Contact]:
        return [Contact(**row) for _, row in self.store.scan(_CONTACTS) if case_id is None or row["case_id"] == case_id]

    def any_case_twice(self) -> bool:
        """Did any case's customer get more than one message? Read from the rows, no `Contact`
        built: a judge asks after every stretch of a long day."""
        cases = [row["case_id"] for _, row in self.store.scan(_CONTACTS)]
        return len(cases) != len(set(cases))

    def duplicates(self) -> dict[tuple[str, str], list[Contact]]:
        """(case_id, idem_key) -> contacts, for every intent the customer got more than once."""
        by_intent: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for _, row in self.store.scan(_CONTACTS):  # rows, not Contacts: most intents are sent once
            by_intent.setdefault((row["case_id"], row["idem_key"]), []).append(row)
        return {key: [Contact(**row) for row in group] for key, group in sorted(by_intent.items()) if len(group) > 1}

    def __len__(self) -> int:
        return len(self.store.scan(_CONTACTS))

    def __repr__(self) -> str:
        return f"ContactLedger({len(self)} contacts, {len(self.duplicates())} duplicated intents)"


class Provider:
    """A fake external channel: numbers messages (`msg-0001`), dedupes on operation id
    when asked to, and misbehaves on cue (`inject`). What it delivered lives in its ledger's
    store, next to its record of each operation (what the provider would keep in its own
    database), and both are written in one transaction with the delivery's event."""

    __deepcopy__ = state_copy  # the explorer copies one for each schedule it goes on from

    def __init__(
        self,
        channel: str = "email",
        *,
        prefix: str = "msg",
        ledger: ContactLedger | None = None,
        log: EventLog | None = None,
        clock: Clock | None = None,
        store: Store | None = None,
    ) -> None:
        self.channel = arguments.text("channel", channel, "the channel's name, e.g. 'email'")
        self.prefix = arguments.text("prefix", prefix, "the message ids' prefix, e.g. 'msg'")
        if ledger is not None:
            arguments.instance("ledger", ledger, ContactLedger, "pass a ContactLedger to share, or leave it out")
            if store is not None and ledger.store is not store:
                raise BadArgumentError(
                    field="ledger",
                    problem="keeps its contacts in another store",
                    fix="pass store= or ledger=, or a ledger made on the same store",
                )
        self.ledger = (
            ledger
            if ledger is not None
            else ContactLedger(store=MemoryStore(log=component_log(log)) if store is None else store)
        )
        self.store = self.ledger.store
        self.log = self.store.log if log is None else component_log(log)
        self.clock: Clock = component_clock(clock)
        self._operations = f"{self.channel} operation"  # the provider's own idempotency records
        self._faults: deque[ProviderFault] = deque()
        bind_transactions(self, self.store)

    def inject(self, fault: ProviderFault | str, times: int = 1) -> None:
        """Make the next `times` deliveries suffer `fault`."""
        if fault not in ProviderFault._value2member_map_ and not isinstance(fault, ProviderFault):
            raise BadArgumentError(
                field="fault", problem=f"is {fault!r}", fix=f"pass one of {', '.join(f.value for f in ProviderFault)}"
            )
        arguments.whole("times", times, 1, "pass a whole number >= 1")
        self._faults.extend([ProviderFault(fault)] * times)

    @transaction
    def deliver(
        self,
        op_id: str,
        *,
        case_id: str,
        to: str,
        idem_key: str,
        dedupe: bool,
        worker_id: str | None = None,
        now: float | None = None,
        body: str = "",
    ) -> SendResult:
        """Deliver one message for operation `op_id`; with `dedupe`, a repeat of a delivered
        operation returns its first message id, and a repeat for another case, recipient or
        body is refused (IdempotencyConflictError), as Stripe refuses a reused key with other
        parameters: a key names one request. The comparison reads the operation's record under
        the lock its INSERT or SELECT ... FOR UPDATE took, so the operation's record, the
        decision, the contact and its event are one transaction."""
        arguments.text("op_id", op_id, "the operation's id, e.g. the send's idempotency key")
        t = resolve(self.clock, now)
        first = self._first(op_id, case_id, to, body) if dedupe else None
        if first is not None:
            sent = {"case_id": case_id, "to": to, "body": body}
            changed = [field for field in sent if first.get(field, sent[field]) != sent[field]]
            if changed:
                field = changed[0]
                raise IdempotencyConflictError(
                    key=op_id, difference=f"{field} was {first[field]!r}, now {sent[field]!r}"
                )
            self.log.append(
                EventKind.CONTACT_DEDUPED,
                t,
                case_id=case_id,
                worker_id=worker_id,
                channel=self.channel,
                message_id=first["message_id"],
                idem_key=idem_key,
            )
            return SendResult(status=SendStatus.OK, op_id=op_id, message_id=first["message_id"], deduped=True)
        fault = self._faults.popleft() if self._faults else None
        if fault is ProviderFault.FAIL:
            self.log.append(
                EventKind.EFFECT_FAILED,
                t,
                case_id=case_id,
                worker_id=worker_id,
                channel=self.channel,
                idem_key=idem_key,
                op_id=op_id,
            )
            return SendResult(status=SendStatus.FAILED, op_id=op_id)
        if fault is ProviderFault.LOSE_REQUEST:  # the caller times out; the provider never saw it
            self.log.append(
                EventKind.EFFECT_UNKNOWN,
                t,
                case_id=case_id,
                worker_id=worker_id,
                channel=self.channel,
                idem_key=idem_key,
                op_id=op_id,
                lost="request",
            )
            return SendResult(status=SendStatus.UNKNOWN, op_id=op_id)
        message_id = f"{self.prefix}-{self.store.next_number(self.prefix):04d}"
        self.store.put(self._operations, op_id, {"message_id": message_id, "case_id": case_id, "to": to, "body": body})
        self.ledger._keep(
            {
                "message_id": message_id,
                "channel": self.channel,
                "case_id": case_id,
                "to": to,
                "idem_key": idem_key,
                "time": t,
                "worker_id": worker_id,
            }
        )
        self.log.append(
            EventKind.CONTACT_SENT,
            t,
            case_id=case_id,
            worker_id=worker_id,
            channel=self.channel,
            message_id=message_id,
            idem_key=idem_key,
            to=to,
        )
        if fault is ProviderFault.DROP_REPLY:
            self.log.append(
                EventKind.EFFECT_UNKNOWN,
                t,
                case_id=case_id,
                worker_id=worker_id,
                channel=self.channel,
                idem_key=idem_key,
                op_id=op_id,
            )
            return SendResult(status=SendStatus.UNKNOWN, op_id=op_id)
        return SendResult(status=SendStatus.OK, op_id=op_id, message_id=message_id)

    def _first(self, op_id: str, case_id: str, to: str, body: str) -> dict | None:
        """The record of the delivered operation `op_id`, or None if this call is to deliver it.
        The operation's record is taken first, with one INSERT only one of any concurrent
        calls wins; the others wait for its transaction and read what it delivered. A record
        without a message id is an attempt that delivered nothing (refused, or lost on its way)."""
        if self.store.put_new(
            self._operations, op_id, {"message_id": None, "case_id": case_id, "to": to, "body": body}
        ):
            return None
        first = self.store.get(self._operations, op_id)
        return first if first["message_id"] is not None else None

    def lookup(self, op_id: str) -> str | None:
        """The message id delivered for `op_id`, or None if nothing was delivered."""
        sent = self.store.get(self._operations, arguments.text("op_id", op_id, "the operation id you sent with"))
        return None if sent is None else sent["message_id"]


class ChannelAdapter:
    """Sends through a provider with an idempotency key: a repeat of the key returns the
    first message id and the customer hears nothing new."""

    __deepcopy__ = state_copy  # the explorer copies one for each schedule it goes on from

    channel = "email"
    prefix = "msg"
    dedupes = True

    def __init__(
        self,
        provider: Provider | None = None,
        *,
        ledger: ContactLedger | None = None,
        log: EventLog | None = None,
        clock: Clock | None = None,
        store: Store | None = None,
    ) -> None:
        if provider is not None:
            arguments.instance("provider", provider, Provider, "pass a Provider(...), or leave it out for a fresh one")
        self.provider = (
            provider
            if provider is not None
            else Provider(self.channel, prefix=self.prefix, ledger=ledger, log=log, clock=clock, store=store)
        )
        self._ops = 0

    @property
    def ledger(self) -> ContactLedger:
        return self.provider.ledger

    def send(
        self,
        idem_key: str,
        *,
        case_id: str,
        to: str = "customer",
        body: str = "",
        worker_id: str | None = None,
        now: float | None = None,
    ) -> SendResult:
        """Deliver `body` to `to` for `case_id`, at most once per `idem_key`. A repeat of the
        same request returns the first message id; the key reused for a different request
        (another case, recipient or body) is refused with IdempotencyConflictError."""
        arguments.text("idem_key", idem_key, "the send's idempotency key, e.g. idem_key='O-1001:email:3'")
        arguments.text("case_id", case_id, "the case this message is about, e.g. case_id='O-1001'")
        arguments.text("to", to, "the recipient, e.g. to='jordan@example.com'")
        if not isinstance(body, str):
            raise BadArgumentError(
                field="body",
                problem=f"is {arguments.a(type(body).__name__)}, not text",
                fix="pass the message text as a string, e.g. body='Your refund is on its way'",
            )
        if worker_id is not None:
            arguments.text("worker_id", worker_id, "the sending worker's name, e.g. 'W1', or leave it out")
        return self.provider.deliver(
            self._op_id(idem_key),
            case_id=case_id,
            to=to,
            idem_key=idem_key,
            dedupe=self.dedupes,
            worker_id=worker_id,
            now=now,
            body=body,
        )

    def lookup(self, op_id: str) -> SendResult:
        """Reconcile an unknown outcome: ask the provider whether `op_id` was delivered."""
        arguments.text("op_id", op_id, "the operation id you sent with")
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
