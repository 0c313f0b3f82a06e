"""A work queue with per-case leases, expiry, fencing tokens and a DLQ, on any store.

The shape follows real queues: a claimed item is invisible until its lease expires
(SQS's visibility timeout), the claim count decides when an item is dead-lettered
(SQS's maxReceiveCount), and a dead item can be replayed (redrive). Two rules make
it a *case* queue: at most one live lease per `case_id`, and items of one case are
served first-in first-out, while other cases keep flowing.

Every rule lives here, once. Where the items are kept is the store's business
(`shopops_lab.store`): in this process (`InMemoryQueue`, the labs' default), in an
SQLite file shared by processes, or in PostgreSQL shared by machines
(`Queue(store="sqlite:///shopops.db")`). Each call is one transaction of the store, so
a fencing check and the write it guards, or an expiry and the lease that follows it,
happen together or not at all.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol, cast

from shopops_lab import arguments
from shopops_lab.arguments import MAX_TIME
from shopops_lab.clock import Clock, component_clock, resolve
from shopops_lab.errors import (
    BadArgumentError,
    LeaseExpiredError,
    LeaseSettledError,
    NotInDLQError,
    StaleTokenError,
    UnknownItemError,
    UnknownLeaseError,
)
from shopops_lab.events import EventKind, EventLog, EventRow
from shopops_lab.fencing import TokenFence
from shopops_lab.payloads import flat_copy, json_copy
from shopops_lab.states import TRANSITIONS, ItemState, check_transition
from shopops_lab.store import MemoryStore, Store, bind_transactions, open_store, store_for, transaction
from shopops_lab.store.base import ItemRow

__all__ = ["InMemoryQueue", "Item", "Lease", "Outcome", "Priority", "Queue", "QueueId"]

# Members looked up once: reading one off the Enum class costs ~20x a global (bench_queue.py).
_READY, _LEASED, _DONE, _DEAD = ItemState.READY, ItemState.LEASED, ItemState.DONE, ItemState.DEAD
_ENQUEUED, _LEASED_EVENT, _ACKED = EventKind.ENQUEUED, EventKind.LEASED, EventKind.ACKED
_HEARTBEAT = EventKind.HEARTBEAT


class Priority(IntEnum):
    """Lower is served first. Approval resumes (a human already said yes and the
    customer is waiting) go before ordinary work, and bulk outreach goes last, so
    it is the first thing to wait when the system is saturated."""

    APPROVAL = 0
    NORMAL = 1
    BULK = 2


# The three events of every cycle are EventRows made from a tuple in EventRow's field order: with
# keywords, EventRow(...) cost bench_queue.py's cycle ~28% more instructions than plain tuples did
# (made so, ~7%). test_clock_events.py pins the field order, so a new field shifts none of them.
# A Lease is made the same way (its fields in order, the queue's id last), without NamedTuple's
# Python-level __new__.
_row = _lease = tuple.__new__  # _row(EventRow, values), _lease(Lease, values)

# An event with nothing more to say shares EventRow's empty, read-only info, as one made by name
# does. An ack's row then keeps no dict of its own: every container a cycle keeps, even an empty
# dict the collector never walks, counts towards its next pass (bench_queue.py's cycle: 11% fewer).
_NO_INFO = EventRow._field_defaults["info"]
# What an enqueued event says besides its item (the tenant, the kind, the priority) is the same
# for many items: one read-only mapping for each such triple, shared by their events, instead of
# a dict kept per item. Every container a cycle keeps counts towards the collector's next pass
# (bench_queue.py). The table stops growing at _SHARED_INFOS triples; later ones get their own.
_ENQUEUED_INFOS: dict[tuple[str, str, int], Mapping[str, Any]] = {}
_SHARED_INFOS = 1_024
_PRIORITIES = {int(p): p for p in Priority}  # an int -> its Priority name, without an Enum call
DUE = "due"  # what a store's lease_next answers when a lease is due (see Store)
# What every store keeps as a priority: PostgreSQL's INTEGER column, the narrowest.
MIN_PRIORITY, MAX_PRIORITY = -(2**31), 2**31 - 1
_PRIORITY_FIX = (
    f"pass a Priority (APPROVAL, NORMAL, BULK) or an int from {MIN_PRIORITY:,} to {MAX_PRIORITY:,}; "
    "lower is served first"
)


class _SaysDue(Protocol):
    """A store that keeps `due_from`: no lease is due before it (see `Store.due_leases`)."""

    due_from: float


class Outcome(StrEnum):
    """What `process_one` did with one delivery."""

    OK = "ok"  # the handler returned and the ack was accepted
    RETRIED = "retried"  # the handler raised; the item is ready again
    DEAD = "dead"  # the handler raised on the last allowed attempt; the item is in the DLQ
    EMPTY = "empty"  # nothing could be acquired
    LOST = "lost"  # the lease expired or was taken over while the handler ran


class QueueId:
    """Which queue granted a lease, compared by identity. Item ids are counters, so two
    queues both have an `item-0001`; the lease carries its queue's `QueueId` so that one
    queue never settles another's item. Copies of a lease keep it (it copies as itself)."""

    __slots__ = ()

    def __copy__(self) -> QueueId:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> QueueId:
        return self

    def __repr__(self) -> str:
        return "QueueId()"  # the same text for every queue: notebook outputs stay stable


class Lease(NamedTuple):
    """A claim on one item, as granted. `token` fences every write made under it;
    heartbeats move the store's deadline, not this snapshot's `expires_at`; `queue`
    names the queue that granted it (a lease of another queue is refused).

    Immutable like the kit's dataclasses, but a NamedTuple: one is made on every
    acquire, and building it costs a fifth of a frozen dataclass's."""

    item_id: str
    case_id: str
    tenant_id: str
    kind: str
    worker_id: str
    token: int
    attempt: int
    leased_at: float
    expires_at: float
    payload: Mapping[str, Any]
    queue: QueueId | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Item:
    """A snapshot of one queued item and where it stands."""

    id: str
    case_id: str
    tenant_id: str
    kind: str
    payload: Mapping[str, Any]
    priority: int
    state: ItemState
    attempts: int
    token: int
    worker_id: str | None
    lease_expires_at: float | None
    enqueued_at: float
    last_error: str | None
    dead_at: float | None
    replays: int


def _snapshot(row: ItemRow) -> Item:
    leased = row.state is _LEASED
    return Item(
        id=row.id,
        case_id=row.case_id,
        tenant_id=row.tenant_id,
        kind=row.kind,
        payload=json_copy(row.payload),
        priority=_PRIORITIES.get(row.priority, row.priority),
        state=row.state,
        attempts=row.attempts,
        token=row.token,
        worker_id=row.worker_id if leased else None,
        lease_expires_at=row.expires_at if leased else None,
        enqueued_at=row.enqueued_at,
        last_error=row.last_error,
        dead_at=row.dead_at,
        replays=row.replays,
    )


class Queue:
    """Per-case leased work queue on a store. See the module docstring for the rules.

    `store` is a `Store` or a URL (`memory:`, `sqlite:///path.db`, `postgresql://...`);
    by default the items live in this process. Several `Queue`s on one database (one per
    process or machine) are one queue."""

    def __init__(
        self,
        lease_seconds: float = 30,
        max_attempts: int = 5,
        clock: Clock | None = None,
        *,
        log: EventLog | None = None,
        store: Store | str | None = None,
    ) -> None:
        self.lease_seconds = arguments.seconds("lease_seconds", lease_seconds, _SECONDS_FIX)
        arguments.whole(
            "max_attempts", max_attempts, 1, "pass a whole number >= 1 (how many deliveries before the DLQ)"
        )
        self.clock: Clock = component_clock(clock)
        self.store: Store = store_for(store, log)
        self.max_attempts = max_attempts
        self.id = QueueId()
        self._fence = TokenFence("item", store=self.store)
        self.log = self.store.log
        self._append_event = self.log.appender()  # hot events as EventRows, unchecked (bench_queue.py)
        # A store that can lease and ack in one statement each (round trips saved on PostgreSQL, driver trips on SQLite)
        self._lease_next = getattr(self.store, "lease_next", None)
        self._ack_live = getattr(self.store, "ack_live", None)
        self._add_logged = getattr(self.store, "add_logged", None)  # and an enqueue in one
        # A store that says when the next lease can be due (`due_from`: memory) spares acquire and
        # ack a due_leases call before then; the call, even to answer "none", was 1.5% of a cycle each.
        self._due: _SaysDue | None = cast(_SaysDue, self.store) if hasattr(self.store, "due_from") else None
        # On memory no bound method is kept on the instance (`self.ack = self._ack` once saved a
        # call per ack): one is a reference cycle, and a dropped queue, with all its rows and
        # events, then waited for the cyclic collector, whose full passes walked it (bench_queue.py).
        bind_transactions(self, self.store)
        self._last_time = _EARLIEST  # no time seen yet: the earliest any call may have (see _time)

    def __deepcopy__(self, memo: dict[int, Any]) -> Queue:
        """A copy on a copy of its store (the schedule explorer forks worlds holding a memory
        queue). `copy.deepcopy` shares a builtin's bound method as it is, so the hot-path
        appender is taken again from the copy's own log: else the copy's events would land
        in the original's."""
        twin = object.__new__(type(self))
        memo[id(self)] = twin
        for name, value in vars(self).items():
            setattr(twin, name, copy.deepcopy(value, memo))
        twin._append_event = twin.log.appender()
        return twin

    @classmethod
    def open(cls, url: str, **settings: Any) -> Queue:
        """The queue kept at `url` (`Queue.open("sqlite:///shopops.db", lease_seconds=30)`)."""
        return cls(store=open_store(url), **settings)

    # ------------------------------------------------------------------ producing
    def enqueue(
        self,
        *,
        case_id: str | None = None,
        tenant_id: str = "default",
        kind: str = "task",
        payload: Mapping[str, Any] | None = None,
        priority: int = Priority.NORMAL,
        now: float | None = None,
    ) -> str:
        """Add one item for `case_id` and return its id (`item-0001`, ...). One transaction
        (`_add`): on the SQL stores, outside a transaction of the caller's, one statement (`add_logged`)."""
        if not (  # the usual arguments pass in one test, allocating nothing; the checks below name the field
            type(case_id) is str
            and type(tenant_id) is str
            and type(kind) is str
            and case_id.isascii()
            and tenant_id.isascii()
            and kind.isascii()
            and case_id
            and tenant_id
            and kind
            and not case_id.isspace()
            and not tenant_id.isspace()
            and not kind.isspace()
            and "\x00" not in case_id
            and "\x00" not in tenant_id
            and "\x00" not in kind
        ):
            arguments.text("case_id", case_id, "the case this work belongs to, e.g. case_id='O-1001'")
            arguments.text("tenant_id", tenant_id, "the store the case belongs to, e.g. tenant_id='store_northline'")
            arguments.text("kind", kind, "what the item asks for, e.g. kind='contact_send'")
        assert case_id is not None  # checked just above
        if priority.__class__ is not Priority:  # the usual value, checked in one test
            arguments.whole("priority", priority, MIN_PRIORITY, _PRIORITY_FIX, most=MAX_PRIORITY)
            priority = _PRIORITIES.get(priority, priority)  # an int kept as its Priority's name, if it has one
        body, flat = flat_copy({} if payload is None else payload)
        if body.__class__ is not dict:
            raise BadArgumentError(
                field="payload",
                problem=f"is {arguments.a(type(payload).__name__)}",
                fix="pass a dict, e.g. payload={'idem_key': 'O-1001:email:3'}",
            )
        row = ItemRow()  # one field a statement: a tuple assignment builds and unpacks a tuple
        row.case_id = case_id
        row.tenant_id = tenant_id
        row.kind = kind
        row.payload = body
        row.flat = flat
        row.priority = priority
        row.state = _READY
        row.attempts = row.token = row.replays = 0
        row.worker_id = row.expires_at = row.last_error = row.dead_at = row.ended_by = None
        row.lease_seconds = self.lease_seconds
        row.enqueued_at = self._time(now)
        key = (tenant_id, kind, priority)
        info = _ENQUEUED_INFOS.get(key)
        if info is None:
            info = MappingProxyType({"tenant_id": tenant_id, "kind": kind, "priority": int(priority)})
            if len(_ENQUEUED_INFOS) < _SHARED_INFOS:
                _ENQUEUED_INFOS[key] = info
        add = self._add_logged
        if add is not None and not self.store.atomic.open:
            add(row, info)
            return row.id
        return self._add(row, info)

    @transaction(checks_first=True)
    def _add(self, row: ItemRow, info: Mapping[str, Any]) -> str:
        """`enqueue` after its checks, the long way: the item, then its event."""
        self.store.add_item(row)
        self._append_event(_row(EventRow, (row.enqueued_at, _ENQUEUED, row.id, row.case_id, None, None, None, info)))
        return row.id

    # ------------------------------------------------------------------ consuming
    def acquire(
        self,
        worker_id: str,
        *,
        now: float | None = None,
        lease_seconds: float | None = None,
        max_priority: int | None = None,
    ) -> Lease | None:
        """Lease the next item of a case nobody holds, or None.

        `max_priority` serves only items at least that urgent (used to shed bulk work
        under backpressure); `lease_seconds` overrides the queue's lease for this claim.
        One transaction: on the SQL stores, when no lease is due, one statement (`lease_next`).
        """
        if (
            type(worker_id) is not str
            or not worker_id.isascii()
            or not worker_id
            or worker_id.isspace()
            or "\x00" in worker_id
        ):
            arguments.text("worker_id", worker_id, "the worker's name, e.g. 'W1'")
        seconds = (
            self.lease_seconds
            if lease_seconds is None
            else arguments.seconds("lease_seconds", lease_seconds, _SECONDS_FIX)
        )
        if max_priority is not None and max_priority.__class__ is not Priority:  # a Priority is in range
            arguments.whole(
                "max_priority",
                max_priority,
                MIN_PRIORITY,
                "pass a Priority (e.g. Priority.NORMAL to shed BULK) or leave it out",
                most=MAX_PRIORITY,
            )
        t = self._time(now)
        if self._lease_next is not None:
            got = self._lease_next(worker_id, t, seconds, max_priority)
            if got != DUE:
                if got is None:
                    return None
                item, case_id, tenant_id, kind, payload, token, attempts = got
                return _lease(
                    Lease,
                    (item, case_id, tenant_id, kind, worker_id, token, attempts, t, t + seconds, payload, self.id),
                )
        return self._acquire(worker_id, t, seconds, max_priority)

    @transaction(checks_first=True)
    def _acquire(self, worker_id: str, t: float, seconds: float, max_priority: int | None) -> Lease | None:
        """`acquire` after its checks, the long way: expire what is due, then lease."""
        store, says = self.store, self._due
        if says is None or says.due_from <= t:
            due = store.due_leases(t)
            if due:
                self._expire(due, t)
        row = store.next_ready(max_priority)
        if row is None:
            return None
        row.attempts += 1
        row.token += 1
        row.worker_id = worker_id
        row.lease_seconds = seconds
        row.expires_at = t + seconds
        row.ended_by = None
        row.state = _LEASED  # next_ready answers a ready row: the edge acquire, in the table (_HOT)
        store.write_item(row, _READY)
        self._append_event(
            _row(
                EventRow,
                (
                    t,
                    _LEASED_EVENT,
                    row.id,
                    row.case_id,
                    worker_id,
                    row.token,
                    row.attempts,
                    {"expires_at": row.expires_at},
                ),
            )
        )
        payload = row.payload
        return _lease(
            Lease,
            (
                row.id,
                row.case_id,
                row.tenant_id,
                row.kind,
                worker_id,
                row.token,
                row.attempts,
                t,
                row.expires_at,
                dict(payload) if row.flat else json_copy(payload),
                self.id,
            ),
        )

    @transaction(checks_first=True)
    def heartbeat(self, lease: Lease, *, now: float | None = None) -> bool:
        """Extend a live lease to now + its lease time. False once the lease is lost
        (expired, settled, or claimed by someone newer): stop side effects then."""
        row = self._granted(lease)
        t = self._time(now)
        self._expire(self.store.due_leases(t), t)
        try:
            self._live(lease, row, "heartbeat", t)
        except (StaleTokenError, LeaseExpiredError, LeaseSettledError):
            return False
        row.expires_at = t + row.lease_seconds
        self.store.write_item(row, _LEASED)
        self._append_event(
            _row(
                EventRow,
                (
                    t,
                    _HEARTBEAT,
                    row.id,
                    row.case_id,
                    lease.worker_id,
                    lease.token,
                    row.attempts,
                    {"expires_at": row.expires_at},
                ),
            )
        )
        return True

    def ack(self, lease: Lease, *, now: float | None = None) -> None:
        """Mark the item done. Raises StaleTokenError if a newer claim exists, and
        LeaseExpiredError / LeaseSettledError if this lease is over. One transaction: on the
        SQL stores, when the lease is live and none is due, one statement (`ack_live`)."""
        if (
            self._ack_live is not None
            and lease.__class__ is Lease
            and lease.queue is self.id
            and lease.item_id.__class__ is str
            and lease.case_id.__class__ is str
            and lease.token.__class__ is int
            and lease.worker_id.__class__ is str
        ):
            last = self._last_time
            if self._ack_live(lease.item_id, lease.case_id, lease.token, lease.worker_id, self._time(now)):
                return
            self._last_time = last  # nothing was written: the long way checks the lease before taking the time
        self._ack(lease, now)

    @transaction(checks_first=True)
    def _ack(self, lease: Lease, now: float | None) -> None:
        """`ack`, the long way (`now` passed by position: a call with a keyword costs more)."""
        row = self._granted(lease)
        t = self._time(now)
        store, says = self.store, self._due
        if says is None or says.due_from <= t:
            due = store.due_leases(t)
            if due:
                self._expire(due, t)
        if lease.token != row.token or row.state is not _LEASED:
            self._live(lease, row, "ack", t)  # the lease is over: it raises the reason
        row.ended_by = "acked"
        row.state = _DONE  # a live lease's row is leased: the edge ack, in the table (_HOT)
        store.write_item(row, _LEASED)
        self._append_event(
            _row(EventRow, (t, _ACKED, row.id, row.case_id, lease.worker_id, lease.token, row.attempts, _NO_INFO))
        )

    @transaction(checks_first=True)
    def nack(self, lease: Lease, error: object = None, *, now: float | None = None) -> ItemState:
        """Give the item back after a failure. It is ready again, or dead if this was its
        last allowed attempt. Returns the item's new state."""
        row = self._granted(lease)
        described = _describe(error)
        t = self._time(now)
        self._expire(self.store.due_leases(t), t)
        self._live(lease, row, "nack", t)
        row.ended_by = "nacked"
        row.last_error = described
        self.log.append(
            EventKind.NACKED,
            t,
            item_id=row.id,
            case_id=row.case_id,
            worker_id=lease.worker_id,
            token=lease.token,
            attempt=row.attempts,
            error=row.last_error,
        )
        return self._end_attempt(row, t)

    def process_one(self, worker_id: str, handler: Callable[[Lease], Any], *, now: float | None = None) -> Outcome:
        """Acquire, run `handler(lease)`, then ack; nack if it raises. The handler must be
        safe to run twice: an expired lease means the same item comes back. A handler
        that settles its own lease (acks or nacks it) is taken at its word. The handler
        runs outside any transaction: it may take long, and may crash."""
        if not callable(handler):
            raise BadArgumentError(
                field="handler",
                problem=f"is {handler!r}, not a function",
                fix="pass a function that takes the Lease, e.g. def handle(lease): ...",
            )
        lease = self.acquire(worker_id, now=now)
        if lease is None:
            return Outcome.EMPTY
        try:
            handler(lease)
        except Exception as exc:  # the handler's failure is data for the nack
            try:
                state = self.nack(lease, error=exc, now=self._settle_time(now))
            except (StaleTokenError, LeaseExpiredError):
                return Outcome.LOST
            except LeaseSettledError:
                return self._settled_by_handler(lease)
            return Outcome.DEAD if state is _DEAD else Outcome.RETRIED
        try:
            self.ack(lease, now=self._settle_time(now))
        except (StaleTokenError, LeaseExpiredError):
            return Outcome.LOST
        except LeaseSettledError:
            return self._settled_by_handler(lease)
        return Outcome.OK

    def _settled_by_handler(self, lease: Lease) -> Outcome:
        """What the handler made of its own lease when it acked or nacked it itself."""
        row = self.store.get_item(lease.item_id)
        assert row is not None  # a lease's item is never deleted
        if row.ended_by == "acked":
            return Outcome.OK
        return Outcome.DEAD if row.state is _DEAD else Outcome.RETRIED

    @transaction(checks_first=True)
    def expire_leases(self, now: float | None = None) -> list[str]:
        """Return every lease whose deadline has passed to the queue (or the DLQ if it
        was the last attempt). The queue also does this on each call; lessons call it
        directly to force an expiry. Returns the expired item ids."""
        t = self._time(now)
        return self._expire(self.store.due_leases(t), t)

    def _expire_leases(self, now: float | None = None) -> list[str]:
        """`expire_leases` under the name the labs first met it by."""
        return self.expire_leases(now)

    # ------------------------------------------------------------------ what only the worker knows
    @transaction(checks_first=True)
    def worker_crashed(
        self, worker_id: str, lease: Lease | None = None, *, case_id: str | None = None, now: float | None = None
    ) -> None:
        """Note that `worker_id` died (holding `lease`, or working on `case_id`), for the
        timeline and the checker. Nothing changes in the queue: the lease runs out on its own."""
        self._note(EventKind.WORKER_CRASHED, worker_id, lease, case_id, now)

    @transaction(checks_first=True)
    def worker_paused(self, lease: Lease, *, now: float | None = None) -> None:
        """Note that the worker holding `lease` froze (a long GC pause, a stalled call)."""
        self._note(
            EventKind.WORKER_PAUSED,
            None,
            arguments.instance("lease", lease, Lease, "pass the Lease the paused worker holds"),
            None,
            now,
        )

    @transaction(checks_first=True)
    def worker_resumed(self, lease: Lease, *, now: float | None = None) -> None:
        """Note that the worker holding `lease` runs again, not knowing how long it was gone."""
        self._note(
            EventKind.WORKER_RESUMED,
            None,
            arguments.instance("lease", lease, Lease, "pass the Lease the resumed worker holds"),
            None,
            now,
        )

    def _note(
        self, kind: EventKind, worker_id: str | None, lease: Lease | None, case_id: str | None, now: float | None
    ) -> None:
        if lease is not None:
            self._granted(lease)  # a lease this queue granted, not another queue's with the same item id
            worker_id, case_id = worker_id or lease.worker_id, lease.case_id
        arguments.text("worker_id", worker_id, "the worker's name, e.g. 'W1'")
        if case_id is not None:
            arguments.text("case_id", case_id, "the case it was working on, e.g. 'O-1001', or leave it out")
        self.log.append(
            kind,
            self._time(now),
            item_id=None if lease is None else lease.item_id,
            case_id=case_id,
            worker_id=worker_id,
        )  # time never runs backwards here either

    # ------------------------------------------------------------------ the DLQ
    def dlq_items(self) -> list[Item]:
        """Dead items, oldest death first, with their last error and attempt count."""
        return [_snapshot(row) for row in self.store.dead_rows()]

    @transaction(checks_first=True)
    def replay_dlq(self, item_id: str, *, now: float | None = None) -> None:
        """Send a dead item back to ready with its attempts reset (after a fix)."""
        row = self.store.get_item(item_id) if isinstance(item_id, str) else None
        if row is None:
            raise UnknownItemError(item_id=item_id)
        if row.state is not _DEAD:
            raise NotInDLQError(item_id=item_id, state=row.state.value)
        t = self._time(now)
        row.attempts = 0
        row.replays += 1
        row.dead_at = None
        self._move(row, _READY)
        self.log.append(
            EventKind.REPLAYED, t, item_id=row.id, case_id=row.case_id, replays=row.replays, last_error=row.last_error
        )

    # ------------------------------------------------------------------ reading
    def item(self, item_id: str) -> Item:
        row = self.store.get_item(item_id) if isinstance(item_id, str) else None
        if row is None:
            raise UnknownItemError(item_id=item_id)
        return _snapshot(row)

    def items(self, state: ItemState | str | None = None) -> list[Item]:
        """Snapshots in enqueue order, optionally only those in `state`."""
        wanted = (
            None if state is None else arguments.member("state", state, ItemState, ", or leave it out for every item")
        )
        return [_snapshot(row) for row in self.store.item_rows(wanted)]

    def leases(self) -> list[Item]:
        """Items currently leased, in enqueue order."""
        return self.items(_LEASED)

    def counts(self) -> dict[ItemState, int]:
        """How many items are in each state (every state present, zeros included)."""
        return self.store.item_counts()

    @property
    def depth(self) -> int:
        """Items waiting to be acquired."""
        return self.store.item_count(_READY)

    def __len__(self) -> int:
        return sum(self.store.item_counts().values())

    def __repr__(self) -> str:
        counts = ", ".join(f"{s.value}={n}" for s, n in self.store.item_counts().items())
        where = "" if isinstance(self.store, MemoryStore) else f"{self.store.url}, "
        return (
            f"{type(self).__name__}({where}lease_seconds={self.lease_seconds:g}, "
            f"max_attempts={self.max_attempts}, {counts})"
        )

    # ------------------------------------------------------------------ internals
    def _time(self, now: float | None) -> float:
        """The time of this call. Time never runs backwards inside the queue: a clock
        reading behind a `now=` already used counts as that time (so forcing an expiry
        with `now=` works with a frozen clock), and an explicit `now=` in the past is refused."""
        if now is None:
            t = self.clock.now()
            if t.__class__ is float and self._last_time <= t <= MAX_TIME:  # the usual reading, in one test
                self._last_time = t
                return t
            if t.__class__ is not float or not _EARLIEST <= t <= MAX_TIME:
                t = resolve(self.clock)
            if t < self._last_time:
                t = self._last_time
        else:
            t = arguments.moment("now", now)
            if t < self._last_time:
                raise BadArgumentError(
                    field="now",
                    problem=f"is {now:g}, earlier than t={self._last_time:g} already seen",
                    fix="time only moves forward; pass a later now= or advance the clock",
                )
        self._last_time = t
        return t

    def _settle_time(self, now: float | None) -> float | None:
        """The time to settle a delivery that started at `now=`: no earlier than anything
        the handler made the queue see meanwhile (a heartbeat with a later `now=`)."""
        return None if now is None else max(now, self._last_time)

    def _move(self, row: ItemRow, target: ItemState) -> None:
        """Walk one edge of the transition table and have the store keep the row."""
        source = row.state
        if (source, target) not in _EDGES:
            check_transition(f"item {row.id}", source, target)  # raises TransitionError
        row.state = target
        self.store.write_item(row, source)

    def _end_attempt(self, row: ItemRow, t: float) -> ItemState:
        """After a failed or expired attempt: back to the front of its case, or dead."""
        if row.attempts >= self.max_attempts:
            row.dead_at = t
            self._move(row, _DEAD)
            self.log.append(
                EventKind.DEAD_LETTERED,
                t,
                item_id=row.id,
                case_id=row.case_id,
                worker_id=row.worker_id,
                token=row.token,
                attempt=row.attempts,
                error=row.last_error,
                enqueued_at=row.enqueued_at,
            )
            return _DEAD
        self._move(row, _READY)
        return _READY

    def _expire(self, due: list[ItemRow], t: float) -> list[str]:
        """End the leases the store found due at `t`: back to the front of the case, or dead."""
        expired = []
        for row in due:
            expires_at = row.expires_at
            row.ended_by = "expired"
            row.last_error = f"lease expired at t={expires_at:g} (worker {row.worker_id}, attempt {row.attempts})"
            self.log.append(
                EventKind.EXPIRED,
                t,
                item_id=row.id,
                case_id=row.case_id,
                worker_id=row.worker_id,
                token=row.token,
                attempt=row.attempts,
                expires_at=expires_at,
            )
            self._end_attempt(row, t)
            expired.append(row.id)
        return expired

    def _granted(self, lease: Lease) -> ItemRow:
        """The row behind a lease this queue really granted. Checked before the call's
        time is taken, so a wrong argument changes nothing (not even expiries)."""
        if not isinstance(lease, Lease):
            raise BadArgumentError(
                field="lease",
                problem=f"is {arguments.a(type(lease).__name__)}",
                fix="pass the Lease object that acquire() returned",
            )
        if lease.queue is not self.id:
            raise UnknownLeaseError(
                reason=f"lease on {lease.item_id} was not granted by this queue (item ids repeat across queues)"
            )
        item_id = lease.item_id  # a Lease's field is read through a descriptor: once, not twice
        row = self.store.get_item(item_id) if isinstance(item_id, str) else None
        if row is None:
            raise UnknownLeaseError(reason=f"no item {item_id} in this queue")
        token = lease.token
        if (
            lease.case_id != row.case_id
            or not (token.__class__ is int or arguments.is_whole(token))
            or not 1 <= token <= row.token
        ):
            raise UnknownLeaseError(
                reason=f"item {lease.item_id} never granted token {lease.token} for case {lease.case_id}"
            )
        return row

    def _live(self, lease: Lease, row: ItemRow, op: str, t: float) -> None:
        """Pass if `lease` still owns `row` at `t`; otherwise raise the precise reason. The
        item's token lives on its row (the acquire that issues it is the write that leases
        the item); the fence judges it, and is asked only when the tokens differ."""
        if lease.token != row.token:
            self._fence.check(
                row.id, lease.token, t=t, op=op, current=row.token, case_id=row.case_id, worker_id=lease.worker_id
            )
        if row.state is not _LEASED:
            if row.ended_by == "expired":
                raise LeaseExpiredError(item_id=row.id, token=lease.token, expires_at=row.expires_at)
            raise LeaseSettledError(item_id=row.id, token=lease.token, how=row.ended_by)


class InMemoryQueue(Queue):
    """The queue with its items in this process: what labs 00-07 and the simulator use."""

    def __init__(
        self,
        lease_seconds: float = 30,
        max_attempts: int = 5,
        clock: Clock | None = None,
        *,
        log: EventLog | None = None,
    ) -> None:
        super().__init__(lease_seconds, max_attempts, clock, log=log)


_EARLIEST = -MAX_TIME
_EDGES = frozenset(TRANSITIONS)  # the table's edges, for a quick membership test on every move
# The two edges the hot paths walk without asking (acquire leases what next_ready answered, ack
# settles a live lease): checked against the table here, once.
_HOT = {(_READY, _LEASED), (_LEASED, _DONE)}
assert _HOT <= _EDGES, "acquire and ack walk edges of the transition table"
_SECONDS_FIX = "pass a positive, finite number of seconds, e.g. 30"


def _describe(error: object) -> str | None:
    """The error as text for the item's record; an error that cannot say what it is
    (its __str__ raises) is named by its type, so a nack never fails halfway."""
    if error is None:
        return None
    try:
        text = str(error)
    except Exception:
        text = f"<{type(error).__name__} whose str() raised>"
    if isinstance(error, BaseException):
        text = f"{type(error).__name__}: {text}"
    if not arguments.storable(text):  # kept as text every store can hold: NULs and lone surrogates escaped
        text = text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
    return text
