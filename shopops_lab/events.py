"""The append-only event log: the one record that metrics, the checker and the pictures read.

Every component that changes something a learner might ask about (the queue, the channel
adapters, the simulator's workers) appends here. Events are frozen; `seq` orders them.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple

from shopops_lab import arguments
from shopops_lab.arguments import MAX_TIME
from shopops_lab.errors import BadArgumentError
from shopops_lab.payloads import DIGITS, frozen, json_copy

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_row = tuple.__new__  # _row(EventRow, values): a row from a tuple in field order, without keywords
_PLAIN = frozenset({str, bool, type(None)})  # info values stored as they are, with finite short numbers
_INF, _BIG = float("inf"), 10**DIGITS  # a finite float; an int short enough to write (as payloads checks)


class EventKind(StrEnum):
    # the queue
    ENQUEUED = "enqueued"
    LEASED = "leased"
    HEARTBEAT = "heartbeat"
    EXPIRED = "expired"
    ACKED = "acked"
    NACKED = "nacked"
    DEAD_LETTERED = "dead_lettered"
    REPLAYED = "replayed"
    STALE_REJECTED = "stale_rejected"
    # side effects, as the channel adapters see them
    CONTACT_SENT = "contact_sent"
    CONTACT_DEDUPED = "contact_deduped"
    EFFECT_UNKNOWN = "effect_unknown"
    EFFECT_FAILED = "effect_failed"
    # workers and stores, as the simulator sees them
    HANDLER_STARTED = "handler_started"
    HANDLER_FAILED = "handler_failed"
    WORKER_CRASHED = "worker_crashed"
    WORKER_PAUSED = "worker_paused"
    WORKER_RESUMED = "worker_resumed"
    ACK_LOST = "ack_lost"
    CHECKPOINT_WRITTEN = "checkpoint_written"
    STALE_WRITE_ACCEPTED = "stale_write_accepted"
    GATEWAY_CALL = "gateway_call"
    THROTTLED = "throttled"
    # durable jobs
    JOB_SUBMITTED = "job_submitted"
    JOB_CLAIMED = "job_claimed"
    JOB_STEP_CONFIRMED = "job_step_confirmed"
    JOB_STATE_CHANGED = "job_state_changed"
    # checkpoints and receipts
    STEP_RAN = "step_ran"
    INTENT_RECORDED = "intent_recorded"
    RECEIPT_RECORDED = "receipt_recorded"
    EFFECT_RECONCILED = "effect_reconciled"
    # the outbox
    OUTBOX_COMMITTED = "outbox_committed"
    OUTBOX_PUBLISHED = "outbox_published"
    OUTBOX_MARKED_SENT = "outbox_marked_sent"
    MESSAGE_APPLIED = "message_applied"
    MESSAGE_DEDUPED = "message_deduped"
    # the simulator's own vocabulary
    FAULT_INJECTED = "fault_injected"  # a named fault struck (what, where, explicit or random)
    LEASE_LOST = "lease_lost"  # a worker learned it no longer owns its item and stopped
    DELIVERED_TWICE = "delivered_twice"  # the broker handed a copy of a live lease to a second worker


def _needs_freezing(info: dict[str, Any]) -> bool:
    """True unless every `info` value is a plain scalar that is stored as it is: text, a bool,
    None, a finite float or an int short enough to write. One pass over the values, as
    every event of a simulation comes through here (bench_sim.py)."""
    for value in info.values():
        kind = value.__class__
        if kind is float:
            if not -_INF < value < _INF:
                return True
        elif kind is int:
            if not -_BIG < value < _BIG:
                return True
        elif kind not in _PLAIN:
            return True
    return False


class EventRow(NamedTuple):
    """One event as the log stores it, before it is numbered: what `appender()` takes and
    `rows()` gives. Write and read it by name (`EventRow(time=t, kind=...)`, `row.kind`), never
    by position, so a field added later shifts nobody. A named tuple, not a dataclass: it costs
    a plain tuple's memory and about its speed on the queue's hot path (bench_queue.py)."""

    time: float
    kind: EventKind
    item_id: str | None = None
    case_id: str | None = None
    worker_id: str | None = None
    token: int | None = None
    attempt: int | None = None
    info: Mapping[str, Any] = _EMPTY


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """One thing that happened, at `time` on the clock, numbered by `seq` (0, 1, 2, ...)."""

    seq: int
    time: float
    kind: EventKind
    item_id: str | None = None
    case_id: str | None = None
    worker_id: str | None = None
    token: int | None = None
    attempt: int | None = None
    info: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, compare=False, hash=False)

    @classmethod
    def from_row(cls, seq: int, row: EventRow) -> Event:
        """The event of a stored row (`EventLog.rows()`), numbered `seq`: what the log itself
        builds when it is read, for a reader of rows that needs an Event for a few of them."""
        return _event(seq, row)

    def as_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready dict (kind as its string, info copied)."""
        row = {name: getattr(self, name) for name in _FIELDS}
        row["kind"] = self.kind.value
        row["info"] = json_copy(self.info, "info")  # nested values were frozen on append
        return row

    def __str__(self) -> str:
        parts = [f"#{self.seq}", f"t={_number(self.time)}", self.kind.value]
        for name in ("item_id", "case_id", "worker_id", "token", "attempt"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name.removesuffix('_id')}={value}")
        parts.extend(f"{k}={_number(v)}" for k, v in sorted(self.info.items()))
        return " ".join(parts)


_set = object.__setattr__


def _event(seq: int, row: EventRow) -> Event:
    """The `Event` of a stored row, filled in slot by slot as `Event(...)` would fill it, at
    about half its cost: a full read of a day's log builds 23,000, the checker 17,000 (bench_checks.py)."""
    event = object.__new__(Event)
    _set(event, "seq", seq)
    _set(event, "time", row.time)
    _set(event, "kind", row.kind)
    _set(event, "item_id", row.item_id)
    _set(event, "case_id", row.case_id)
    _set(event, "worker_id", row.worker_id)
    _set(event, "token", row.token)
    _set(event, "attempt", row.attempt)
    info = row.info  # kept as it is when already read-only (the queue shares one among events)
    _set(event, "info", info if info.__class__ is MappingProxyType else MappingProxyType(info) if info else _EMPTY)
    return event


def _kind(kind: EventKind | str) -> EventKind:
    try:
        return EventKind(kind)
    except ValueError:
        raise BadArgumentError(
            field="kind",
            problem=f"is {kind!r}, not an event kind",
            fix="pass an EventKind, e.g. EventKind.LEASED or 'leased'",
        ) from None


def _number(value: Any) -> Any:
    """Floats as a person writes them: 168.747, not 168.74699999999999; 30, not 30.0."""
    return format(value, ".10g") if isinstance(value, float) else value


_FIELDS = ("seq", "time", "kind", "item_id", "case_id", "worker_id", "token", "attempt", "info")


class EventLog:
    """An append-only list of `Event`s with a few read helpers. Never edited in place.

    Appending is on every hot path of the queue and the simulator, so a row is kept
    as an `EventRow` and becomes an `Event` only when somebody reads it.
    """

    __slots__ = ("_rows", "_events")

    def __init__(self) -> None:
        self._rows: list[EventRow] = []
        self._events: list[Event] = []  # rows already turned into Events, a prefix of _rows

    def __deepcopy__(self, memo: dict[int, Any]) -> EventLog:
        """A copy that shares the rows and events: they never change once appended, so a
        world copied to go on from (the schedule explorer's forks) copies its log's length in
        pointers, not every row. Its lists are the copy's own, entered in `memo`, so what
        is copied with it and holds them holds the copy's."""
        twin = EventLog.__new__(EventLog)
        memo[id(self)] = twin
        twin._rows = memo.setdefault(id(self._rows), list(self._rows))
        twin._events = memo.setdefault(id(self._events), list(self._events))
        return twin

    def append(
        self,
        kind: EventKind,
        time: float,
        /,
        *,
        item_id: str | None = None,
        case_id: str | None = None,
        worker_id: str | None = None,
        token: int | None = None,
        attempt: int | None = None,
        **info: Any,
    ) -> int:
        """Record one event; returns its `seq`. The kind must be an EventKind (or its
        name), the time a finite number of seconds, and any nested `info` value JSON;
        nested values are stored read-only, so the caller's dict stays the caller's."""
        if kind.__class__ is not EventKind:
            kind = _kind(kind)
        if time.__class__ is not float or not -MAX_TIME <= time <= MAX_TIME:
            arguments.moment("time", time, "pass the event's time in seconds, e.g. clock.now()")
        if info and _needs_freezing(info):
            # nested, or a number that is NaN, infinite or too long to write: checked, and named
            info = {key: frozen(value, f"info[{key!r}]") for key, value in info.items()}
        rows = self._rows
        # A tuple in EventRow's field order: with keywords, building the row cost about as
        # much as the rest of append together (bench_sim.py; test_clock_events.py pins the order).
        rows.append(_row(EventRow, (time, kind, item_id, case_id, worker_id, token, attempt, info)))
        return len(rows) - 1

    def _materialize(self, upto: int) -> None:
        events, rows = self._events, self._rows
        for seq in range(len(events), upto):
            events.append(_event(seq, rows[seq]))

    @property
    def events(self) -> list[Event]:
        """Every event so far, in order (a new list; the log itself is not exposed)."""
        self._materialize(len(self._rows))
        return list(self._events)

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[Event]:
        self._materialize(len(self._rows))
        return iter(self._events[:])

    def __getitem__(self, index: int) -> Event:
        self._materialize(len(self._rows))
        return self._events[index]

    def appender(self) -> Callable[[EventRow], object]:
        """The fast path for hot producers (the queue): a function taking one `EventRow`, the
        very record `append` makes, stored without `append`'s checks (bench_queue.py). The
        caller vouches for the row: an EventKind, a finite float time, a fresh JSON `info` dict."""
        return self._rows.append

    def rows(self) -> Iterator[EventRow]:
        """Every event as its `EventRow`, in `seq` order, without building `Event`s: the fast
        path for readers that scan a whole simulation (metrics over hundreds of thousands of
        events; bench_metrics.py). Read fields by name; treat `info` as read-only."""
        return iter(self._rows)

    @property
    def last(self) -> Event | None:
        return self[-1] if self._rows else None

    def where(
        self,
        kind: EventKind | str | tuple[EventKind | str, ...] | None = None,
        *,
        item_id: str | None = None,
        case_id: str | None = None,
        worker_id: str | None = None,
    ) -> list[Event]:
        """The events matching every filter given, in log order."""
        kinds = None if kind is None else {_kind(k) for k in (kind if isinstance(kind, tuple) else (kind,))}
        return [
            e
            for e in self
            if (kinds is None or e.kind in kinds)
            and (item_id is None or e.item_id == item_id)
            and (case_id is None or e.case_id == case_id)
            and (worker_id is None or e.worker_id == worker_id)
        ]

    def to_dicts(self) -> list[dict[str, Any]]:
        return [e.as_dict() for e in self]

    @classmethod
    def from_dicts(cls, rows: list[Mapping[str, Any]]) -> EventLog:
        """Rebuild a log (e.g. from `--json` output) so the checker can read it again."""
        if not isinstance(rows, (list, tuple)):
            raise BadArgumentError(
                field="rows",
                problem=f"is {arguments.a(type(rows).__name__)}",
                fix="pass a list of dicts, as to_dicts() or a report's --json events give",
            )
        log = cls()
        for index, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise BadArgumentError(
                    field=f"rows[{index}]",
                    problem=f"is {row!r}, not a dict",
                    fix="pass one dict per event, as to_dicts() writes them",
                )
            if "kind" not in row or "time" not in row:
                raise BadArgumentError(
                    field=f"rows[{index}]",
                    problem="has no 'kind' or no 'time'",
                    fix="give every event a 'kind' and a 'time', as to_dicts() writes them",
                )
            info = row.get("info") or {}
            if not isinstance(info, Mapping) or not all(isinstance(key, str) for key in info):
                raise BadArgumentError(
                    field=f"rows[{index}].info",
                    problem=f"is {info!r}",
                    fix="pass the event's details as a dict with string keys, or leave it out",
                )
            fields = {k: row.get(k) for k in ("item_id", "case_id", "worker_id", "token", "attempt")}
            for key, value in fields.items():
                wanted = int if key in ("token", "attempt") else str
                if value is not None and (type(value) is bool or not isinstance(value, wanted)):
                    raise BadArgumentError(
                        field=f"rows[{index}].{key}",
                        problem=f"is {value!r}",
                        fix=f"pass {'a whole number' if wanted is int else 'a string'} or null",
                    )
            try:
                log.append(row["kind"], row["time"], **fields, **info)
            except BadArgumentError as err:  # name the row as well as its bad field
                raise BadArgumentError(field=f"rows[{index}].{err.field}", problem=err.problem, fix=err.fix) from None
        return log

    def show(self, limit: int = 20) -> str:
        """The last `limit` events, one per line, for printing in a notebook (0: none,
        only the count of those left out)."""
        arguments.whole("limit", limit, 0, "pass how many of the latest events to show, e.g. limit=20")
        events = self.events
        lines = [str(e) for e in events[len(events) - limit :]] if limit else []
        if len(events) > limit:
            lines.insert(0, f"... {len(events) - limit} earlier events")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"EventLog({len(self._rows)} events)"


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a long log is written or read, and
    restore it after. A big run keeps hundreds of thousands of rows alive, and each full
    collection would walk every row again, so the collector's share grows faster than the
    run (a 100,000-item day took 14x a 10,000-item one instead of 10x; the checker's pass
    ran about 2x slower). Nothing leaks: what is dropped meanwhile is freed by reference
    counting, except a finished world, which its own cycles keep (its parts hold each other's
    bound methods: the engine's scheduler, the wrappers `bind_transactions` sets): the
    collector frees it, with its rows, once it is back."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def component_log(value: object) -> EventLog:
    """The `log=` of a component: an EventLog to share, or a fresh one."""
    if value is None:
        return EventLog()
    log: EventLog = arguments.instance(
        "log", value, EventLog, "pass an EventLog (e.g. queue.log, to share one log), or leave it out"
    )
    return log
