"""What SQLite and PostgreSQL share: the schema, the statements, and the rules for opening a
database that might not be ours.

The schema is versioned in a table of its own (`shopops_meta`: program and schema version).
An empty database is set up; a database this kit wrote with the same schema is used; any
other database (another program's tables, another schema version, a damaged set of tables)
is refused by name and left exactly as it was: nothing is migrated silently. A dialect may
read more than one version (SQLite reads 1 and 2: the same tables, its lines indexed two ways,
and statements that serve both), and always sets a new database up with its newest.

Per-case exclusivity has a second guard in the schema itself: a unique index on the case of
every leased item, so even a bug in a query could not hand out two live leases on one case.
The same small index lists the live leases when the queue looks for expired ones. Items are
found by `seq` (an item's id is `item_id(seq)`), so the readable id needs no index of its own.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from shopops_lab.arguments import storable
from shopops_lab.errors import ForeignStoreError
from shopops_lab.events import Event, EventKind, EventLog, EventRow
from shopops_lab.json_text import dumps
from shopops_lab.payloads import frozen, is_flat
from shopops_lab.states import ItemState
from shopops_lab.store.base import ItemRow, item_id, item_seq
from shopops_lab.store.patience import Patience

__all__ = ["PROGRAM", "SCHEMA_VERSION", "SQLStore", "TABLES"]

PROGRAM = "shopops-lab"
SCHEMA_VERSION = 1
TABLES = ("shopops_meta", "items", "events", "records", "counters")

_STATES = {state.value: state for state in ItemState}
_KINDS = {kind.value: kind for kind in EventKind}
# The columns a row is read from, in `_item_row`'s order. A new row also has `id` (item_id(seq),
# for readers of the table) and `position`, its place in its line: the database draws it and
# compares it, so Python never holds it.
ITEM_COLUMNS = (
    "seq, case_id, tenant_id, kind, payload, priority, state, attempts, token, worker_id, "
    "expires_at, lease_seconds, enqueued_at, last_error, dead_at, replays, ended_by"
)


# Schema version 1's case lines: the ready items of each case in their order and, apart, the
# one-lease-per-case guard (which also lists the leases, for the look for expired ones).
CASE_LINES = (
    "CREATE UNIQUE INDEX items_one_lease_per_case ON items (case_id) WHERE state = 'leased'",
    "CREATE INDEX items_case_line ON items (case_id, position) WHERE state = 'ready'",
)


def schema(*, auto_key: str, item_key: str, real: str, case_lines: Sequence[str] = CASE_LINES) -> list[str]:
    """The tables and indexes, in a dialect's words for an auto-numbered key, the items' key
    (numbered by the store) and a double, with the indexes of the case lines (`CASE_LINES`, or
    a dialect's own). The state check is spelled with OR: SQLite checks an IN list of more than
    two values through a temporary index built on every write."""
    return [
        "CREATE TABLE shopops_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"""CREATE TABLE items (
            seq {item_key}, id TEXT NOT NULL,
            case_id TEXT NOT NULL, tenant_id TEXT NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL,
            priority INTEGER NOT NULL,
            state TEXT NOT NULL CHECK (state = 'ready' OR state = 'leased' OR state = 'done' OR state = 'dead'),
            attempts INTEGER NOT NULL, token INTEGER NOT NULL, worker_id TEXT,
            expires_at {real}, lease_seconds {real} NOT NULL, enqueued_at {real} NOT NULL,
            last_error TEXT, dead_at {real}, replays INTEGER NOT NULL, ended_by TEXT,
            position BIGINT NOT NULL)""",
        *case_lines,
        "CREATE INDEX items_serve_order ON items (priority, seq) WHERE state = 'ready'",
        "CREATE INDEX items_dead_line ON items (position) WHERE state = 'dead'",
        f"""CREATE TABLE events (
            seq {auto_key}, time {real} NOT NULL, kind TEXT NOT NULL, item_id TEXT, case_id TEXT,
            worker_id TEXT, token INTEGER, attempt INTEGER, info TEXT NOT NULL)""",
        f"""CREATE TABLE records (
            seq {auto_key}, kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
            UNIQUE (kind, key))""",
        "CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)",
    ]


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement the stores run, in one dialect's words. Written once here with `?`
    placeholders and translated when a dialect's class is made, never per call, so the hot
    paths hand the driver the same string each time (and its statement cache hits)."""

    insert_meta: str
    get_item: str
    next_ready: str
    next_urgent: str
    due_leases: str
    write_item: str
    to_back_of_case: str
    to_leased: str
    to_dead_line: str
    all_items: str
    items_in_state: str
    dead_items: str
    item_counts: str
    item_count: str
    get: str
    put: str
    put_new: str
    scan: str
    next_number: str
    insert_event: str
    count_events: str
    events_after: str


def statements(
    *,
    placeholder: str,
    lock: str,
    skip_locked: str,
    back_of_case: str,
    back_of_dead_line: str,
    leased_place: str,
    in_serving_order: str,
) -> Statements:
    """The statements with a dialect's placeholder and locking clauses, and its expressions for
    a place behind every other item of the updated row's case line or of the dead-letter line,
    and for the place a leased item takes in its case's line ("": it keeps its own), and its
    words for reading the ready items by the serving-order index ("": the planner's choice)."""
    # The driver describes every column of a query on every execute, rows or none: a query that
    # is usually empty (due leases) asks for the least it can, and sorts nothing (SQLite would
    # open a sorter for it on every call).
    select = f"SELECT {ITEM_COLUMNS} FROM items"
    write = (
        "UPDATE items SET state = ?, attempts = ?, token = ?, worker_id = ?, expires_at = ?,"
        " lease_seconds = ?, last_error = ?, dead_at = ?, replays = ?, ended_by = ?{} WHERE seq = ?"
    )
    ready = (
        f"{select} AS i{in_serving_order} WHERE i.state = 'ready'{{urgent}}"
        " AND NOT EXISTS (SELECT 1 FROM items AS o WHERE o.case_id = i.case_id AND o.state = 'ready'"
        " AND o.position < i.position)"
        " AND NOT EXISTS (SELECT 1 FROM items AS l WHERE l.case_id = i.case_id AND l.state = 'leased')"
        f" ORDER BY i.priority, i.seq LIMIT 1{skip_locked}"
    )
    texts = {
        "insert_meta": "INSERT INTO shopops_meta (key, value) VALUES (?, ?), (?, ?)",
        "get_item": f"{select} WHERE seq = ?{lock}",
        "next_ready": ready.format(urgent=""),
        "next_urgent": ready.format(urgent=" AND i.priority <= ?"),
        "due_leases": f"SELECT expires_at, seq FROM items WHERE state = 'leased' AND expires_at <= ?{skip_locked}",
        "write_item": write.format(""),
        "to_back_of_case": write.format(f", position = {back_of_case}"),
        "to_leased": write.format(f", position = {leased_place}" if leased_place else ""),
        "to_dead_line": write.format(f", position = {back_of_dead_line}"),
        "all_items": f"{select} ORDER BY seq",
        "items_in_state": f"{select} WHERE state = ? ORDER BY seq",
        "dead_items": f"{select} WHERE state = 'dead' ORDER BY position",
        "item_counts": "SELECT state, count(*) FROM items GROUP BY state",
        "item_count": "SELECT count(*) FROM items WHERE state = ?",
        "get": f"SELECT value FROM records WHERE kind = ? AND key = ?{lock}",
        "put": (
            "INSERT INTO records (kind, key, value) VALUES (?, ?, ?)"
            " ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value"
        ),
        "put_new": "INSERT INTO records (kind, key, value) VALUES (?, ?, ?) ON CONFLICT (kind, key) DO NOTHING",
        "scan": "SELECT key, value FROM records WHERE kind = ? ORDER BY seq",
        "next_number": (
            "INSERT INTO counters (name, value) VALUES (?, 1)"
            " ON CONFLICT (name) DO UPDATE SET value = counters.value + 1 RETURNING value"
        ),
        "insert_event": (
            "INSERT INTO events (time, kind, item_id, case_id, worker_id, token, attempt, info)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        ),
        "count_events": "SELECT count(*) FROM events WHERE seq <= ?",
        "events_after": (
            "SELECT seq, time, kind, item_id, case_id, worker_id, token, attempt, info FROM events"
            " WHERE seq > ? ORDER BY seq"
        ),
    }
    return Statements(**{name: text.replace("?", placeholder) for name, text in texts.items()})


class _Transaction:
    """`store.atomic`: reentrant; the outermost block begins, and commits on a normal exit or
    rolls back on any exception (see `Store.atomic`)."""

    __slots__ = ("_store", "_depth")

    def __init__(self, store: SQLStore) -> None:
        self._store = store
        self._depth = 0

    def __enter__(self) -> None:
        if self._depth == 0:
            self._store._begin()
        self._depth += 1

    def __exit__(self, kind: type | None, error: BaseException | None, tb: Any) -> None:
        self._depth -= 1
        if self._depth:
            return
        self._store._end(commit=kind is None)

    @property
    def open(self) -> bool:
        return self._depth > 0


class DatabaseLog(EventLog):
    """The store's event log. Appends go into the database, inside the current transaction;
    reads first fetch whatever any process has committed since, so the log is the database's
    whole history in `seq` order."""

    __slots__ = ("_store", "_last")

    def __init__(self, store: SQLStore) -> None:
        super().__init__()
        self._store = store
        self._last = 0  # the database seq of the newest row fetched

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
        """Record one event, checked as every log checks it; returns -1: the database numbers it
        (read `seq` back from the log)."""
        super().append(
            kind, time, item_id=item_id, case_id=case_id, worker_id=worker_id, token=token, attempt=attempt, **info
        )
        return self._store._insert_event(self._rows.pop())  # the cache holds only what the database returned

    def appender(self) -> Callable[[EventRow], object]:
        return self._store._insert_event

    def _sync(self) -> None:
        rows = self._rows
        if self._store._count_events(self._last) != len(rows):
            rows.clear()  # a write with a lower seq committed after a later one was read: start over
            del self._events[:]
            self._last = 0
        for seq, row in self._store._events_after(self._last):
            rows.append(row)
            self._last = seq

    def forget(self, count: int) -> None:
        """A rolled-back transaction's rows, read before it ended, are not history."""
        if len(self._rows) > count:
            self._rows.clear()
            del self._events[:]
            self._last = 0

    def __len__(self) -> int:
        self._sync()
        return len(self._rows)

    @property
    def events(self) -> list[Event]:
        self._sync()
        return super().events

    def __iter__(self) -> Iterator[Event]:
        self._sync()
        return super().__iter__()

    def __getitem__(self, index: int) -> Event:
        self._sync()
        return super().__getitem__(index)

    def rows(self) -> Iterator[EventRow]:
        self._sync()
        return super().rows()

    @property
    def last(self) -> Event | None:
        self._sync()
        return super().last


class SQLStore(ABC):
    """The statements both SQL backends run. A dialect sets the placeholders, the locking
    clauses and how numbers are drawn; everything else is here, once."""

    dialect = "sql"
    shared = True  # other connections write the same database: decisions are atomic statements or locked
    lock = ""  # appended to a SELECT that the transaction will change
    skip_locked = ""  # the same, for a SELECT any free row answers (other workers skip ours)
    placeholder = "?"
    back_of_case = ""  # an expression: a place behind every item in the updated row's case line
    back_of_dead_line = ""  # the same, behind every dead item
    leased_place = ""  # an expression: the place a leased item takes in its case's line ("": its own)
    in_serving_order = ""  # after the next ready item's table: read it through the serving-order index
    schema_version = SCHEMA_VERSION  # what a new database is set up with
    schema_versions: tuple[int, ...] = (SCHEMA_VERSION,)  # what an existing one may have, oldest first

    _sql: Statements  # this dialect's statements, made once per subclass
    patience: Patience  # how long a call the database failed for a moment is tried again (set by a dialect)

    def __init_subclass__(cls, **settings: Any) -> None:
        super().__init_subclass__(**settings)
        cls._sql = statements(
            placeholder=cls.placeholder,
            lock=cls.lock,
            skip_locked=cls.skip_locked,
            back_of_case=cls.back_of_case,
            back_of_dead_line=cls.back_of_dead_line,
            leased_place=cls.leased_place,
            in_serving_order=cls.in_serving_order,
        )

    def __init__(self, url: str, target: str) -> None:
        self.url = url
        self.target = target  # the database as named in messages (no password)
        self.atomic = _Transaction(self)
        self.log = DatabaseLog(self)
        self._rows: dict[int, ItemRow] = {}  # rows read in this transaction: one object per item
        self._log_mark = 0

    # ------------------------------------------------------------------ the dialect's part
    @abstractmethod
    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement and return its cursor, for the rows it answers."""

    def _send(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one statement whose answer nobody reads (a backend may send it later, with
        the next statement or the commit, in the same transaction)."""
        self._execute(sql, params)

    @abstractmethod
    def _start(self) -> None:
        """Begin a transaction that holds its write lock until `_finish`."""

    @abstractmethod
    def _finish(self, commit: bool) -> None:
        """Commit (`commit=True`) or roll back the open transaction."""

    @abstractmethod
    def _tables(self) -> set[str]:
        """The names of the database's tables (ours or anyone's), to decide whether to adopt it."""

    @abstractmethod
    def _insert_item(self, columns: tuple[Any, ...]) -> int:
        """Insert a new item with `columns` (case_id to ended_by, as in `ITEM_COLUMNS`): the
        store draws its number (`seq`; its id is `item_id(seq)`) and a place behind every
        item of its case's line (ready and leased), and returns the number."""

    @abstractmethod
    def _schema(self) -> list[str]:
        """The schema's statements in this dialect's words."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection; the store cannot be used afterwards."""

    def _end(self, *, commit: bool) -> None:
        try:
            self._finish(commit)
        finally:
            self._rows.clear()
            if not commit:
                self.log.forget(self._log_mark)

    def _begin(self) -> None:
        self._start()
        self._log_mark = len(self.log._rows)

    # ------------------------------------------------------------------ opening
    def _adopt(self) -> None:
        """Inside the opening transaction: set up an empty database, accept our own, refuse
        anything else by name."""
        tables = self._tables()
        if not tables:
            for statement in self._schema():
                self._execute(statement)
            self._execute(self._sql.insert_meta, ("program", PROGRAM, "schema_version", str(self.schema_version)))
            return
        reads = self.versions_read()
        fix = "point the URL at a new file or an empty database; this one was not changed"
        if "shopops_meta" not in tables:
            shown = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
            raise ForeignStoreError(
                target=self.target, found=f"holds another program's tables ({shown})", expected=reads, fix=fix
            )
        meta = dict(self._execute("SELECT key, value FROM shopops_meta").fetchall())
        if meta.get("program") != PROGRAM:
            raise ForeignStoreError(
                target=self.target, found=f"was written by {meta.get('program')!r}", expected=reads, fix=fix
            )
        if meta.get("schema_version") not in {str(version) for version in self.schema_versions}:
            raise ForeignStoreError(
                target=self.target,
                found=f"has schema version {meta.get('schema_version')}",
                expected=reads,
                fix="open it with the ShopOps Lab version that wrote it, or start a new database",
            )
        missing = [name for name in TABLES if name not in tables]
        if missing:
            raise ForeignStoreError(
                target=self.target,
                found=f"is damaged: table {', '.join(missing)} is missing",
                expected=reads,
                fix=fix,
            )

    @classmethod
    def versions_read(cls) -> str:
        """The schema versions this dialect opens, for a message: "1", "1 or 2"."""
        return " or ".join(map(str, cls.schema_versions))

    # ------------------------------------------------------------------ queue items
    def add_item(self, row: ItemRow) -> None:
        row.seq = self._insert_item(item_values(row))
        row.id = item_id(row.seq)
        if self.atomic.open:
            self._rows[row.seq] = row

    def get_item(self, item_id: str) -> ItemRow | None:
        seq = item_seq(item_id)
        rows = [] if seq is None else self._items(self._sql.get_item, (seq,))
        return rows[0] if rows else None

    def next_ready(self, max_priority: int | None) -> ItemRow | None:
        rows = (
            self._items(self._sql.next_ready)
            if max_priority is None
            else self._items(self._sql.next_urgent, (int(max_priority),))
        )
        return rows[0] if rows else None

    def due_leases(self, t: float) -> list[ItemRow]:
        due = self._execute(self._sql.due_leases, (t,)).fetchall()  # almost always none
        return [self._items(self._sql.get_item, (seq,))[0] for _, seq in sorted(due)] if due else []

    def write_item(self, row: ItemRow, source: ItemState) -> None:
        state = row.state
        if state is ItemState.DEAD and source is ItemState.LEASED:
            statement = self._sql.to_dead_line
        elif state is ItemState.READY and source is ItemState.DEAD:  # a replay: to the back of its case
            statement = self._sql.to_back_of_case
        elif state is ItemState.LEASED and source is ItemState.READY:  # the dialect's place for a lease
            statement = self._sql.to_leased
        else:  # any other change keeps the item's place (back from a lease: the front of its case)
            statement = self._sql.write_item
        self._send(
            statement,
            (
                state.value,
                row.attempts,
                row.token,
                row.worker_id,
                row.expires_at,
                row.lease_seconds,
                row.last_error,
                row.dead_at,
                row.replays,
                row.ended_by,
                row.seq,
            ),
        )

    def item_rows(self, state: ItemState | None = None) -> list[ItemRow]:
        if state is None:
            return self._items(self._sql.all_items)
        return self._items(self._sql.items_in_state, (state.value,))

    def dead_rows(self) -> list[ItemRow]:
        return self._items(self._sql.dead_items)

    def item_counts(self) -> dict[ItemState, int]:
        counts = {state: 0 for state in ItemState}
        for state, n in self._execute(self._sql.item_counts).fetchall():
            counts[_STATES[state]] = n
        return counts

    def item_count(self, state: ItemState) -> int:
        count: int = self._execute(self._sql.item_count, (state.value,)).fetchone()[0]
        return count

    def _items(self, sql: str, params: Sequence[Any] = ()) -> list[ItemRow]:
        """Rows as `ItemRow`s; inside a transaction the same item is always the same object,
        so a change the engine made to it earlier in the transaction is not lost."""
        cached = self._rows if self.atomic.open else {}
        found = []
        for values in self._execute(sql, params).fetchall():
            row = cached.get(values[0])
            if row is None:
                row = cached[values[0]] = _item_row(values)
            found.append(row)
        return found

    # ------------------------------------------------------------------ records
    def get(self, kind: str, key: str) -> Any:
        if not (key.isascii() and "\x00" not in key) and not storable(key):
            return None  # no row can have this key (a NUL, a lone surrogate): absent, as in memory
        found = self._execute(self._sql.get, (kind, key)).fetchone()
        return None if found is None else json.loads(found[0])

    def put(self, kind: str, key: str, value: Any) -> None:
        self._send(self._sql.put, (kind, key, dumps(value)))

    def put_new(self, kind: str, key: str, value: Any) -> bool:
        cursor = self._execute(self._sql.put_new, (kind, key, dumps(value)))
        return bool(cursor.rowcount == 1)

    def scan(self, kind: str) -> list[tuple[str, Any]]:
        rows = self._execute(self._sql.scan, (kind,))
        return [(key, json.loads(value)) for key, value in rows.fetchall()]

    def next_number(self, name: str) -> int:
        number: int = self._execute(self._sql.next_number, (name,)).fetchone()[0]
        return number

    # ------------------------------------------------------------------ events
    def _insert_event(self, row: EventRow) -> int:
        """Write one event row; -1 for its seq, which the database gives it."""
        kind = row.kind
        self._send(
            self._sql.insert_event,
            (
                row.time,
                kind.value if isinstance(kind, EventKind) else str(kind),
                row.item_id,
                row.case_id,
                row.worker_id,
                row.token,
                row.attempt,
                dumps(row.info),
            ),
        )
        return -1

    def _count_events(self, upto: int) -> int:
        count: int = self._execute(self._sql.count_events, (upto,)).fetchone()[0]
        return count

    def _events_after(self, seq: int) -> list[tuple[int, EventRow]]:
        rows = self._execute(self._sql.events_after, (seq,)).fetchall()
        return [
            (
                s,
                EventRow(
                    time=time,
                    kind=_KINDS[kind],
                    item_id=item,
                    case_id=case,
                    worker_id=worker,
                    token=token,
                    attempt=attempt,
                    info=_info(info),
                ),
            )
            for s, time, kind, item, case, worker, token, attempt, info in rows
        ]

    def __enter__(self) -> SQLStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target})"


def item_values(row: ItemRow) -> tuple[Any, ...]:
    """A new item's columns, case_id to ended_by, as `ITEM_COLUMNS` lists them after `seq`."""
    return (
        row.case_id,
        row.tenant_id,
        row.kind,
        dumps(row.payload),
        int(row.priority),
        row.state.value,
        row.attempts,
        row.token,
        row.worker_id,
        row.expires_at,
        row.lease_seconds,
        row.enqueued_at,
        row.last_error,
        row.dead_at,
        row.replays,
        row.ended_by,
    )


def _info(text: str) -> dict[str, Any]:
    """An event's info as the log keeps it: nested values read-only, as every log hands them out."""
    info = json.loads(text)
    return {
        key: value if isinstance(value, (str, int, float, bool, type(None))) else frozen(value, "info")
        for key, value in info.items()
    }


def _item_row(values: Sequence[Any]) -> ItemRow:
    row = ItemRow()
    (
        row.seq,
        row.case_id,
        row.tenant_id,
        row.kind,
        payload,
        row.priority,
        state,
        row.attempts,
        row.token,
        row.worker_id,
        row.expires_at,
        row.lease_seconds,
        row.enqueued_at,
        row.last_error,
        row.dead_at,
        row.replays,
        row.ended_by,
    ) = values
    row.id = item_id(row.seq)
    row.payload = json.loads(payload)
    row.flat = is_flat(row.payload)
    row.state = _STATES[state]
    return row
