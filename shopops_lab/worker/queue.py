"""An in-memory work queue with per-case leases, expiry, fencing tokens and a DLQ.

The shape follows real queues: a claimed item is invisible until its lease expires
(SQS's visibility timeout), the claim count decides when an item is dead-lettered
(SQS's maxReceiveCount), and a dead item can be replayed (redrive). Two rules make
it a *case* queue: at most one live lease per `case_id`, and items of one case are
served first-in first-out, while other cases keep flowing.

Lookups are O(log n): cases that can be served sit in a heap keyed by their head
item's (priority, arrival), and leases sit in a heap keyed by expiry, so neither
`acquire` nor expiry scans the queue.
"""
from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Any, Callable, Mapping, NamedTuple

from shopops_lab import arguments
from shopops_lab.arguments import MAX_TIME
from shopops_lab.clock import Clock
from shopops_lab.errors import (
    BadArgumentError,
    LeaseExpiredError,
    LeaseSettledError,
    NotInDLQError,
    StaleTokenError,
    UnknownItemError,
    UnknownLeaseError,
)
from shopops_lab.events import EventKind, EventLog
from shopops_lab.payloads import is_flat, json_copy
from shopops_lab.states import TRANSITIONS, ItemState, check_transition

__all__ = ["InMemoryQueue", "Item", "Lease", "Outcome", "Priority", "QueueId"]

# Looked up once: reading a member off an Enum class costs a descriptor call, on every hot path.
_READY, _LEASED, _DONE, _DEAD = ItemState.READY, ItemState.LEASED, ItemState.DONE, ItemState.DEAD
_ENQUEUED, _LEASED_EVENT, _ACKED = EventKind.ENQUEUED, EventKind.LEASED, EventKind.ACKED


class Priority(IntEnum):
    """Lower is served first. Approval resumes (a human already said yes and the
    customer is waiting) go before ordinary work, and bulk outreach goes last, so
    it is the first thing to wait when the system is saturated."""

    APPROVAL = 0
    NORMAL = 1
    BULK = 2


_PRIORITIES = {int(p): p for p in Priority}  # an int -> its Priority name, without an Enum call


class Outcome(StrEnum):
    """What `process_one` did with one delivery."""

    OK = "ok"            # the handler returned and the ack was accepted
    RETRIED = "retried"  # the handler raised; the item is ready again
    DEAD = "dead"        # the handler raised on the last allowed attempt; the item is in the DLQ
    EMPTY = "empty"      # nothing could be acquired
    LOST = "lost"        # the lease expired or was taken over while the handler ran


class QueueId:
    """Which queue granted a lease, compared by identity. Item ids are counters, so two
    queues both have an `item-0001`; the lease carries its queue's `QueueId` so that one
    queue never settles another's item. Copies of a lease keep it (it copies as itself)."""

    __slots__ = ()

    def __copy__(self) -> "QueueId":
        return self

    def __deepcopy__(self, memo: dict) -> "QueueId":
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


class _Record:
    """The queue's own mutable row for an item; callers only ever see `Item` snapshots."""

    __slots__ = ("flat", "id", "seq", "case_id", "tenant_id", "kind", "payload", "priority", "state",
                 "attempts", "token", "worker_id", "expires_at", "lease_seconds", "enqueued_at",
                 "last_error", "dead_at", "replays", "ended_by")

    def snapshot(self) -> Item:
        leased = self.state is _LEASED
        return Item(id=self.id, case_id=self.case_id, tenant_id=self.tenant_id, kind=self.kind,
                    payload=json_copy(self.payload), priority=self.priority, state=self.state,
                    attempts=self.attempts, token=self.token,
                    worker_id=self.worker_id if leased else None,
                    lease_expires_at=self.expires_at if leased else None,
                    enqueued_at=self.enqueued_at, last_error=self.last_error,
                    dead_at=self.dead_at, replays=self.replays)


class _Case:
    __slots__ = ("ready", "leased")

    def __init__(self) -> None:
        self.ready: deque[_Record] = deque()
        self.leased: _Record | None = None


class InMemoryQueue:
    """Per-case leased work queue. See the module docstring for the rules."""

    def __init__(self, lease_seconds: float = 30, max_attempts: int = 5,
                 clock: Clock | None = None, *, log: EventLog | None = None) -> None:
        self.lease_seconds = arguments.seconds("lease_seconds", lease_seconds, _SECONDS_FIX)
        arguments.whole("max_attempts", max_attempts, 1, "pass a whole number >= 1 (how many deliveries before the DLQ)")
        self.clock: Clock = arguments.clock(clock)
        self.log = arguments.log(log)
        self.max_attempts = max_attempts
        self.id = QueueId()
        self._record = self.log.appender()  # hot events skip append()'s keyword handling
        self._records: dict[str, _Record] = {}
        self._cases: dict[str, _Case] = {}
        self._available: list[tuple[int, int, str]] = []          # (priority, seq, case_id)
        self._expiry: list[tuple[float, int, int, str]] = []      # (expires_at, seq, token, item_id)
        self._dead: dict[str, _Record] = {}
        self._counts = {state: 0 for state in ItemState}
        self._last_time = float("-inf")

    # ------------------------------------------------------------------ producing
    def enqueue(self, *, case_id: str | None = None, tenant_id: str = "default",
                kind: str = "task", payload: Mapping[str, Any] | None = None,
                priority: int = Priority.NORMAL, now: float | None = None) -> str:
        """Add one item for `case_id` and return its id (`item-0001`, ...)."""
        if not (type(case_id) is str and type(tenant_id) is str and type(kind) is str
                and case_id.strip() and tenant_id.strip() and kind.strip()):
            arguments.text("case_id", case_id, "the case this work belongs to, e.g. case_id='O-1001'")
            arguments.text("tenant_id", tenant_id, "the store the case belongs to, e.g. tenant_id='store_northline'")
            arguments.text("kind", kind, "what the item asks for, e.g. kind='contact_send'")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise BadArgumentError(field="priority", problem=f"is {priority!r}",
                                   fix="pass a Priority (APPROVAL, NORMAL, BULK) or an int; lower is served first")
        body = json_copy({} if payload is None else payload)
        if not isinstance(body, dict):
            raise BadArgumentError(field="payload", problem=f"is {arguments.a(type(payload).__name__)}",
                                   fix="pass a dict, e.g. payload={'idem_key': 'O-1001:email:3'}")
        t = self._time(now)
        rec = _Record()
        rec.seq = len(self._records) + 1
        rec.id = f"item-{rec.seq:04d}"
        rec.case_id, rec.tenant_id, rec.kind, rec.payload = case_id, tenant_id, kind, body
        rec.flat = is_flat(body)
        rec.priority = _PRIORITIES.get(priority, priority)
        rec.state, rec.attempts, rec.token, rec.worker_id = _READY, 0, 0, None
        rec.expires_at, rec.lease_seconds, rec.enqueued_at = None, self.lease_seconds, t
        rec.last_error, rec.dead_at, rec.replays, rec.ended_by = None, None, 0, None
        self._records[rec.id] = rec
        self._counts[_READY] += 1
        self._make_ready(rec, front=False)
        self._record((t, _ENQUEUED, rec.id, case_id, None, None, None,
                      {"tenant_id": tenant_id, "kind": kind, "priority": int(priority)}))
        return rec.id

    # ------------------------------------------------------------------ consuming
    def acquire(self, worker_id: str, *, now: float | None = None,
                lease_seconds: float | None = None, max_priority: int | None = None) -> Lease | None:
        """Lease the next item of a case nobody holds, or None.

        `max_priority` serves only items at least that urgent (used to shed bulk work
        under backpressure); `lease_seconds` overrides the queue's lease for this claim.
        """
        if type(worker_id) is not str or not worker_id.strip():
            arguments.text("worker_id", worker_id, "the worker's name, e.g. 'W1'")
        seconds = self.lease_seconds if lease_seconds is None else arguments.seconds("lease_seconds", lease_seconds, _SECONDS_FIX)
        if max_priority is not None and (isinstance(max_priority, bool) or not isinstance(max_priority, int)):
            raise BadArgumentError(field="max_priority", problem=f"is {max_priority!r}",
                                   fix="pass a Priority (e.g. Priority.NORMAL to shed BULK) or leave it out")
        t = self._time(now)
        self._expire(t)
        if not self._available:
            return None
        if max_priority is not None and self._available[0][0] > max_priority:
            return None
        _, _, case_id = heapq.heappop(self._available)
        case = self._cases[case_id]
        rec = case.ready.popleft()
        self._move(rec, _LEASED)
        case.leased = rec
        rec.attempts += 1
        rec.token += 1
        rec.worker_id = worker_id
        rec.lease_seconds = seconds
        rec.expires_at = t + seconds
        rec.ended_by = None
        heapq.heappush(self._expiry, (rec.expires_at, rec.seq, rec.token, rec.id))
        self._record((t, _LEASED_EVENT, rec.id, rec.case_id, worker_id, rec.token, rec.attempts,
                      {"expires_at": rec.expires_at}))
        payload = rec.payload
        return Lease(rec.id, rec.case_id, rec.tenant_id, rec.kind, worker_id, rec.token, rec.attempts, t,
                     rec.expires_at, dict(payload) if rec.flat else json_copy(payload), self.id)

    def heartbeat(self, lease: Lease, *, now: float | None = None) -> bool:
        """Extend a live lease to now + its lease time. False once the lease is lost
        (expired, settled, or claimed by someone newer): stop side effects then."""
        rec = self._granted(lease)
        t = self._time(now)
        self._expire(t)
        try:
            self._live(lease, rec, "heartbeat", t)
        except (StaleTokenError, LeaseExpiredError, LeaseSettledError):
            return False
        rec.expires_at = t + rec.lease_seconds
        heapq.heappush(self._expiry, (rec.expires_at, rec.seq, rec.token, rec.id))
        self.log.append(EventKind.HEARTBEAT, t, item_id=rec.id, case_id=rec.case_id,
                        worker_id=lease.worker_id, token=lease.token, attempt=rec.attempts,
                        expires_at=rec.expires_at)
        return True

    def ack(self, lease: Lease, *, now: float | None = None) -> None:
        """Mark the item done. Raises StaleTokenError if a newer claim exists, and
        LeaseExpiredError / LeaseSettledError if this lease is over."""
        rec = self._granted(lease)
        t = self._time(now)
        self._expire(t)
        self._live(lease, rec, "ack", t)
        self._move(rec, _DONE)
        rec.ended_by = "acked"
        self._release(rec)
        self._record((t, _ACKED, rec.id, rec.case_id, lease.worker_id, lease.token, rec.attempts, {}))

    def nack(self, lease: Lease, error: object = None, *, now: float | None = None) -> ItemState:
        """Give the item back after a failure. It is ready again, or dead if this was its
        last allowed attempt. Returns the item's new state."""
        rec = self._granted(lease)
        described = _describe(error)
        t = self._time(now)
        self._expire(t)
        self._live(lease, rec, "nack", t)
        rec.ended_by = "nacked"
        rec.last_error = described
        self.log.append(EventKind.NACKED, t, item_id=rec.id, case_id=rec.case_id,
                        worker_id=lease.worker_id, token=lease.token, attempt=rec.attempts,
                        error=rec.last_error)
        return self._end_attempt(rec, t)

    def process_one(self, worker_id: str, handler: Callable[[Lease], Any], *,
                    now: float | None = None) -> Outcome:
        """Acquire, run `handler(lease)`, then ack; nack if it raises. The handler must be
        safe to run twice: an expired lease means the same item comes back. A handler
        that settles its own lease (acks or nacks it) is taken at its word."""
        if not callable(handler):
            raise BadArgumentError(field="handler", problem=f"is {handler!r}, not a function",
                                   fix="pass a function that takes the Lease, e.g. def handle(lease): ...")
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
        rec = self._records[lease.item_id]
        if rec.ended_by == "acked":
            return Outcome.OK
        return Outcome.DEAD if rec.state is _DEAD else Outcome.RETRIED

    def _expire_leases(self, now: float | None = None) -> list[str]:
        """Return every lease whose deadline has passed to the queue (or the DLQ if it
        was the last attempt). The queue also does this on each call; lessons call it
        directly to force an expiry. Returns the expired item ids."""
        return self._expire(self._time(now))

    # ------------------------------------------------------------------ the DLQ
    def dlq_items(self) -> list[Item]:
        """Dead items, oldest death first, with their last error and attempt count."""
        return [rec.snapshot() for rec in self._dead.values()]

    def replay_dlq(self, item_id: str, *, now: float | None = None) -> None:
        """Send a dead item back to ready with its attempts reset (after a fix)."""
        rec = self._records.get(item_id) if isinstance(item_id, str) else None
        if rec is None:
            raise UnknownItemError(item_id=item_id)
        if rec.state is not _DEAD:
            raise NotInDLQError(item_id=item_id, state=rec.state.value)
        t = self._time(now)
        self._move(rec, _READY)
        del self._dead[item_id]
        rec.attempts = 0
        rec.replays += 1
        rec.dead_at = None
        self._make_ready(rec, front=False)
        self.log.append(EventKind.REPLAYED, t, item_id=rec.id, case_id=rec.case_id,
                        replays=rec.replays, last_error=rec.last_error)

    # ------------------------------------------------------------------ reading
    def item(self, item_id: str) -> Item:
        rec = self._records.get(item_id) if isinstance(item_id, str) else None
        if rec is None:
            raise UnknownItemError(item_id=item_id)
        return rec.snapshot()

    def items(self, state: ItemState | str | None = None) -> list[Item]:
        """Snapshots in enqueue order, optionally only those in `state`."""
        wanted = None if state is None else arguments.member("state", state, ItemState,
                                                             ", or leave it out for every item")
        return [r.snapshot() for r in self._records.values() if wanted is None or r.state is wanted]

    def leases(self) -> list[Item]:
        """Items currently leased, in enqueue order."""
        return self.items(_LEASED)

    def counts(self) -> dict[ItemState, int]:
        """How many items are in each state (every state present, zeros included)."""
        return dict(self._counts)

    @property
    def depth(self) -> int:
        """Items waiting to be acquired."""
        return self._counts[_READY]

    def __len__(self) -> int:
        return len(self._records)

    def __repr__(self) -> str:
        counts = ", ".join(f"{s.value}={n}" for s, n in self._counts.items())
        return (f"InMemoryQueue(lease_seconds={self.lease_seconds:g}, "
                f"max_attempts={self.max_attempts}, {counts})")

    # ------------------------------------------------------------------ internals
    def _time(self, now: float | None) -> float:
        """The time of this call. Time never runs backwards inside the queue: a clock
        reading behind a `now=` already used counts as that time (so forcing an expiry
        with `now=` works with a frozen clock), and an explicit `now=` in the past is refused."""
        if now is None:
            t = self.clock.now()
            if t.__class__ is not float or not _EARLIEST <= t <= MAX_TIME:  # one cheap test for the usual reading
                t = arguments.time_of(None, self.clock)
            if t < self._last_time:
                t = self._last_time
        else:
            t = arguments.moment("now", now)
            if t < self._last_time:
                raise BadArgumentError(field="now", problem=f"is {now:g}, earlier than t={self._last_time:g} already seen",
                                       fix="time only moves forward; pass a later now= or advance the clock")
        self._last_time = t
        return t

    def _settle_time(self, now: float | None) -> float | None:
        """The time to settle a delivery that started at `now=`: no earlier than anything
        the handler made the queue see meanwhile (a heartbeat with a later `now=`)."""
        return None if now is None else max(now, self._last_time)

    def _move(self, rec: _Record, target: ItemState) -> None:
        if (rec.state, target) not in _EDGES:
            check_transition(f"item {rec.id}", rec.state, target)  # raises TransitionError
        self._counts[rec.state] -= 1
        self._counts[target] += 1
        rec.state = target

    def _make_ready(self, rec: _Record, *, front: bool) -> None:
        """Queue `rec` in its case and offer the case if it just became servable."""
        case = self._cases.get(rec.case_id)
        if case is None:
            case = self._cases[rec.case_id] = _Case()
        was_empty = not case.ready
        if front:
            case.ready.appendleft(rec)
        else:
            case.ready.append(rec)
        if case.leased is None and (was_empty or front):
            self._offer(rec.case_id, case)

    def _offer(self, case_id: str, case: _Case) -> None:
        """Put a servable case in the heap, keyed by its head item."""
        head = case.ready[0]
        heapq.heappush(self._available, (head.priority, head.seq, case_id))

    def _release(self, rec: _Record) -> None:
        """The case's lease is over: offer its next item, if any."""
        case = self._cases[rec.case_id]
        case.leased = None
        if case.ready:
            self._offer(rec.case_id, case)

    def _end_attempt(self, rec: _Record, t: float) -> ItemState:
        """After a failed or expired attempt: back to the front of its case, or dead."""
        if rec.attempts >= self.max_attempts:
            self._move(rec, _DEAD)
            rec.dead_at = t
            self._dead[rec.id] = rec
            self._release(rec)
            self.log.append(EventKind.DEAD_LETTERED, t, item_id=rec.id, case_id=rec.case_id,
                            worker_id=rec.worker_id, token=rec.token, attempt=rec.attempts,
                            error=rec.last_error, enqueued_at=rec.enqueued_at)
            return _DEAD
        self._cases[rec.case_id].leased = None
        self._move(rec, _READY)
        self._make_ready(rec, front=True)
        return _READY

    def _expire(self, t: float) -> list[str]:
        expired = []
        heap = self._expiry
        while heap and heap[0][0] <= t:
            expires_at, _, token, item_id = heapq.heappop(heap)
            rec = self._records[item_id]
            if rec.state is not _LEASED or rec.token != token or rec.expires_at != expires_at:
                continue  # settled, re-leased or extended since: an old entry
            rec.ended_by = "expired"
            rec.last_error = f"lease expired at t={expires_at:g} (worker {rec.worker_id}, attempt {rec.attempts})"
            self.log.append(EventKind.EXPIRED, t, item_id=rec.id, case_id=rec.case_id,
                            worker_id=rec.worker_id, token=rec.token, attempt=rec.attempts,
                            expires_at=expires_at)
            self._end_attempt(rec, t)
            expired.append(item_id)
        return expired

    def _granted(self, lease: Lease) -> _Record:
        """The record behind a lease this queue really granted. Checked before the call's
        time is taken, so a wrong argument changes nothing (not even expiries)."""
        if not isinstance(lease, Lease):
            raise BadArgumentError(field="lease", problem=f"is {arguments.a(type(lease).__name__)}",
                                   fix="pass the Lease object that acquire() returned")
        if lease.queue is not self.id:
            raise UnknownLeaseError(reason=f"lease on {lease.item_id} was not granted by this queue "
                                           "(item ids repeat across queues)")
        rec = self._records.get(lease.item_id) if isinstance(lease.item_id, str) else None
        if rec is None:
            raise UnknownLeaseError(reason=f"no item {lease.item_id} in this queue")
        token = lease.token
        if (lease.case_id != rec.case_id or isinstance(token, bool) or not isinstance(token, int)
                or token > rec.token or token < 1):
            raise UnknownLeaseError(reason=f"item {lease.item_id} never granted token {lease.token} "
                                           f"for case {lease.case_id}")
        return rec

    def _live(self, lease: Lease, rec: _Record, op: str, t: float) -> None:
        """Pass if `lease` still owns `rec` at `t`; otherwise raise the precise reason."""
        if lease.token < rec.token:
            self.log.append(EventKind.STALE_REJECTED, t, item_id=rec.id, case_id=rec.case_id,
                            worker_id=lease.worker_id, token=lease.token, op=op, current=rec.token)
            raise StaleTokenError(what=f"item {rec.id}", token=lease.token, current=rec.token)
        if rec.state is not _LEASED:
            if rec.ended_by == "expired":
                raise LeaseExpiredError(item_id=rec.id, token=lease.token, expires_at=rec.expires_at)
            raise LeaseSettledError(item_id=rec.id, token=lease.token, how=rec.ended_by)


_EARLIEST = -MAX_TIME
_EDGES = frozenset(TRANSITIONS)  # the table's edges, for a quick membership test on every move
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
        return f"{type(error).__name__}: {text}"
    return text
