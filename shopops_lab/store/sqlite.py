"""The SQLite store: one file, from the standard library, shared by every process on one
machine. The embedded default for real runs (`sqlite:///shopops.db`).

It runs in WAL mode, so readers never wait for the writer, and every change is a
`BEGIN IMMEDIATE` transaction or one statement (a transaction of its own, which also takes the
write lock before it reads), so writers take turns and a query's answer still holds when the
transaction acts on it. The usual enqueue, acquire and ack are each one decision and its
event in one statement (`add_logged`, `lease_next`, `ack_live`, as on PostgreSQL); the queue
takes the long way, in Python, whenever a lease is due or the call is inside a transaction of
the caller's. `synchronous=FULL` (the default) makes each commit survive a power cut;
`?synchronous=normal` keeps it through a killed process, not a lost machine, and is much
faster. A new file gets schema version 2 (`LIVE_LINE`); a version-1 file is used as it is.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from shopops_lab.errors import (
    ForeignStoreError,
    StoreCorruptError,
    StoreError,
    StoreFailedError,
    StoreFullError,
    StoreLockedError,
    StoreOpenError,
)
from shopops_lab.json_text import dumps
from shopops_lab.states import ItemState
from shopops_lab.store.base import item_id, item_seq, retried, transact
from shopops_lab.store.patience import Patience
from shopops_lab.store.sql import ITEM_COLUMNS, SQLStore, schema

__all__ = ["SQLiteStore"]


# Schema version 2 (a new file): one index is each case's line, the one-lease-per-case guard
# and the list of leases. A leased item holds place 0 of its case's line, the front, where it
# stays if its lease ends; so the ready items of a case are in their order under ('ready',
# case), its lease is ('leased', case, 0) and a second one could not be written beside it, and
# all the leases come together under 'leased' (the look for expired ones reads only those).
# Version 1's two indexes (`CASE_LINES`) are written at every acquire; this one once, when the
# line is small (a queue that keeps up): a page fewer per cycle. A version-1 file keeps its
# own indexes: every statement here reads either layout, and place 0 fits both.
LIVE_LINE = (
    "CREATE UNIQUE INDEX items_live_line ON items (state, case_id, position) WHERE state = 'ready' OR state = 'leased'",
)
LEASED_PLACE = "0"
# The next ready item is read in serving order, never through the live line (its `state`
# prefix looks as good to a planner without statistics, and would read and sort every ready item).
IN_SERVING_ORDER = " INDEXED BY items_serve_order"


def _back_of_case(case: str) -> str:
    """A place behind the ready items of `case` and its leased one (which comes back to the
    front if its lease ends): two lookups on the schema's partial indexes. The leased one is
    at place 0, unless it was leased by a kit that kept its place (a version-1 file). Writers
    take turns (BEGIN IMMEDIATE), so no other writer can take the same place meanwhile."""
    return (
        f"max(coalesce((SELECT max(o.position) FROM items AS o WHERE o.case_id = {case} AND o.state = 'ready'), 0),"
        f" coalesce((SELECT l.position FROM items AS l WHERE l.case_id = {case} AND l.state = 'leased'), 0)) + 1"
    )


# One statement numbers, places and inserts a new item: no counter row written per enqueue,
# and no RETURNING (SQLite collects returned rows in a temporary table); the number is the rowid.
_NEXT_SEQ = "(SELECT coalesce(max(seq), 0) + 1 FROM items)"  # the table's last row: one step down its b-tree


def _insert_item(values: str) -> str:
    """The INSERT of an item with `values` for case_id to ended_by (ITEM_COLUMNS after seq)."""
    return (
        f"INSERT INTO items ({ITEM_COLUMNS}, id, position) VALUES ({_NEXT_SEQ}, {values},"
        f" printf('item-%04d', {_NEXT_SEQ}), {_back_of_case('?')})"
    )


_INSERT_ITEM = _insert_item(", ".join("?" * 16))
_DUE = "SELECT 1 FROM items WHERE state = 'leased' AND expires_at <= NEW.t"  # in a decision: is a lease due?
_EVENT = "INSERT INTO events (time, kind, item_id, case_id, worker_id, token, attempt, info)"
# The usual enqueue, acquire and ack are each one decision and its event in one statement, as
# on PostgreSQL: an INSERT into a view of this connection's own (TEMP: never written into the
# file, and no other connection sees it) whose INSTEAD OF trigger writes both. A statement
# outside BEGIN is a transaction of its own, which takes the write lock before it reads (as
# BEGIN IMMEDIATE does), so the decision still holds when it is written; and it is one trip
# through the driver where BEGIN, the statements and COMMIT were four or five (each trip drops
# and retakes the GIL and SQLite's mutexes). A fenced write happens only if the lease is still
# the caller's, and only when no lease anywhere is due (an expiry is the engine's business:
# then nothing is written and the queue takes the long way). An INSERT into a view leaves no
# rowid and no rows behind: what the caller reads back (a new item's number, the item leased)
# the trigger hands to `shopops_answer` (`_open`). Not RETURNING: SQLite gathers returned rows
# in a temporary table it opens on every call; nor a TEMP table: writing one costs more still.


def _decision(name: str, columns: str, body: str) -> tuple[list[str], str]:
    """The TEMP view `name` with `columns` and its INSTEAD OF trigger running `body`
    (statements that read the inserted values as NEW.column), and the INSERT that runs it."""
    count = len(columns.split(","))
    view = f"CREATE TEMP VIEW {name} ({columns}) AS SELECT {', '.join(['NULL'] * count)}"
    trigger = f"CREATE TEMP TRIGGER {name} INSTEAD OF INSERT ON {name} BEGIN {body}; END"
    return [view, trigger], f"INSERT INTO temp.{name} VALUES ({', '.join('?' * count)})"


# A new item as `enqueue` makes it (ready, never leased, nothing gone wrong) and its ENQUEUED
# event, their empty columns written as literals (the driver binds each None through its
# adapter lookup, about a quarter of a microsecond apiece); the answer is its number.
_ADD_LOGGED_VIEW, _ADD_LOGGED = _decision(
    "add_logged",
    "case_id, tenant_id, kind, payload, priority, lease_seconds, enqueued_at, info",
    _insert_item(
        "NEW.case_id, NEW.tenant_id, NEW.kind, NEW.payload, NEW.priority, 'ready', 0, 0, NULL, NULL,"
        " NEW.lease_seconds, NEW.enqueued_at, NULL, NULL, 0, NULL"
    ).replace("?", "NEW.case_id")
    + "; SELECT shopops_answer(last_insert_rowid());"
    f" {_EVENT} VALUES (NEW.enqueued_at, 'enqueued', printf('item-%04d', last_insert_rowid()), NEW.case_id,"
    " NULL, NULL, NULL, NEW.info)",
)
# The item `next_ready` would answer, leased, and its LEASED event. The event goes first,
# written from the item as it is (token and attempt one on): an UPDATE leaves no trace of the
# row it changed, an INSERT does (last_insert_rowid), so the item is then found by the id its
# event names (`printf('item-%04d', seq)` read back as its number). The answer is the item as
# leased; (NULL) if none is free and a lease is due; nothing if none is free.
_LEASE_NEXT_VIEW, _LEASE_NEXT = _decision(
    "lease_next",
    "worker_id, t, seconds, expires_at, max_priority, info",
    f"{_EVENT} SELECT NEW.t, 'leased', i.id, i.case_id, NEW.worker_id, i.token + 1, i.attempts + 1, NEW.info"
    f" FROM items AS i{IN_SERVING_ORDER} WHERE i.state = 'ready' AND i.priority <= NEW.max_priority"
    " AND NOT EXISTS (SELECT 1 FROM items AS o WHERE o.case_id = i.case_id AND o.state = 'ready'"
    " AND o.position < i.position)"
    " AND NOT EXISTS (SELECT 1 FROM items AS l WHERE l.case_id = i.case_id AND l.state = 'leased')"
    f" AND NOT EXISTS ({_DUE}) ORDER BY i.priority, i.seq LIMIT 1;"
    " UPDATE items SET state = 'leased', attempts = attempts + 1, token = token + 1, worker_id = NEW.worker_id,"
    f" lease_seconds = NEW.seconds, expires_at = NEW.expires_at, ended_by = NULL, position = {LEASED_PLACE}"
    " WHERE seq = (SELECT shopops_answer(i.seq, i.id, i.case_id, i.tenant_id, i.kind, i.payload, e.token, e.attempt)"
    " FROM events AS e JOIN items AS i ON i.seq = CAST(substr(e.item_id, 6) AS INTEGER)"
    " WHERE e.seq = last_insert_rowid() AND changes() = 1);"
    f" SELECT shopops_answer(NULL) WHERE changes() = 0 AND EXISTS ({_DUE})",
)
_ANY_PRIORITY = 2**63 - 1  # SQLite's largest integer: every priority is at most it
# The leased item settled as acked, and its ACKED event, its attempt read from the row.
_ACK_LIVE_VIEW, _ACK_LIVE = _decision(
    "ack_live",
    "seq, item_id, case_id, token, worker_id, t",
    "UPDATE items SET state = 'done', ended_by = 'acked' WHERE seq = NEW.seq AND case_id = NEW.case_id"
    f" AND token = NEW.token AND state = 'leased' AND NOT EXISTS ({_DUE});"
    f" {_EVENT} SELECT NEW.t, 'acked', NEW.item_id, case_id, NEW.worker_id, token, attempts, '{{}}' FROM items"
    " WHERE seq = NEW.seq AND changes() = 1",
)
DECISIONS = (*_ADD_LOGGED_VIEW, *_LEASE_NEXT_VIEW, *_ACK_LIVE_VIEW)
DUE = "due"  # lease_next's answer when a lease is due: expire it first, the long way (the queue's DUE)
SYNCHRONOUS = ("full", "normal")
MIN_SQLITE = (3, 35)  # UPDATE/INSERT ... RETURNING
BUSY_SECONDS = 30.0  # how long one statement waits for another connection's lock
PAGE_SIZE = 512  # bytes, for a new file (SQLite's smallest)

# SQLite's primary result codes (sqlite3.h), read from `error.sqlite_errorcode & 0xFF`: what
# went wrong is told by its code, never by its words (they change between versions).
_PERM, _BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 3, 5, 6, 8, 10, 11, 13, 14, 26


class SQLiteStore(SQLStore):
    dialect = "sqlite"
    back_of_case = _back_of_case("items.case_id")
    back_of_dead_line = "(SELECT coalesce(max(d.position), 0) + 1 FROM items AS d WHERE d.state = 'dead')"
    leased_place = LEASED_PLACE
    in_serving_order = IN_SERVING_ORDER
    schema_version = 2  # LIVE_LINE
    schema_versions = (1, 2)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "full",
        url: str | None = None,
        busy_seconds: float = BUSY_SECONDS,
        patience: Patience | None = None,
    ) -> None:
        path = Path(path)
        super().__init__(url or f"sqlite:///{path}", str(path))
        self.path = path
        self.synchronous = synchronous
        self.busy_seconds = busy_seconds
        self.patience = patience or Patience()
        _check_version(self.target)
        _check_file(path, self.target)
        tries = None
        while True:  # a file another process holds locked while it sets it up is waited for
            try:
                self._open()
                return
            except StoreError as error:
                if not error.retry:
                    raise
                tries = tries or self.patience.tries()
                if next(tries, None) is None:
                    raise

    def _open(self) -> None:
        try:
            self._connection = sqlite3.connect(self.path, isolation_level=None, timeout=self.busy_seconds)
            # One cursor runs every statement (Connection.execute makes a new one per call); each
            # caller reads its answer before the next statement.
            self._cursor = self._connection.cursor()
        except sqlite3.Error as error:
            raise _open_error(self.target, error, self.busy_seconds) from None
        try:
            # A new file gets small pages (an existing one keeps its own): every commit writes
            # whole pages, a queue's cycle commits three times and touches about thirteen, and
            # the kit's rows are small (a payload of a few fields, an event; a row of more than
            # about 470 bytes spills to an overflow page). bench_store.py: 1 KB pages gave a third
            # more cycles a second than 4 KB, and 512 bytes about 5% more than 1 KB, at NORMAL
            # and at FULL; with 20,000 items kept the two small sizes measured the same.
            self._connection.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            with self.atomic:
                self._adopt()
            # Only now, once the file is known to be ours: WAL mode is written into the file.
            self._connection.execute("PRAGMA journal_mode = WAL")
            self._connection.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
            self._answers: deque[tuple[Any, ...]] = deque(maxlen=1)  # a decision's answer (`DECISIONS`)
            self._connection.create_function("shopops_answer", -1, _answer(self._answers))
            for statement in DECISIONS:
                self._connection.execute(statement)
        except sqlite3.DatabaseError as error:
            self._connection.close()
            raise _open_error(self.target, error, self.busy_seconds) from None
        except StoreError as failed:  # what SQLite refused while the file was read: named for opening
            self._connection.close()
            raise _open_error(self.target, failed.__cause__, self.busy_seconds) from None
        except BaseException:
            self._connection.close()
            raise

    def _execute(self, sql: str, params: Sequence[Any] = (), *, committing: bool = False) -> sqlite3.Cursor:
        """Run one statement (`committing`: a statement that is its own transaction)."""
        try:
            return self._cursor.execute(sql, params)
        except sqlite3.IntegrityError:
            raise  # a broken rule of the schema is a bug of the kit's, shown as it is
        except sqlite3.Error as error:
            raise _failed(self.target, error, self.busy_seconds, committing=committing) from error
        except OverflowError as error:  # a Python int SQLite cannot bind
            raise StoreFailedError(
                target=self.target,
                reason="a whole number was wider than 64 bits",
                fix="keep numbers within ±9.2e18 (the kit refuses such numbers itself: a bug if you see this)",
            ) from error

    def _start(self) -> None:
        self._execute("BEGIN IMMEDIATE")

    def _finish(self, commit: bool) -> None:
        if not self._connection.in_transaction:
            return  # SQLite already ended it (a full disk or an I/O error rolls back by itself)
        try:
            self._cursor.execute("COMMIT" if commit else "ROLLBACK")
        except sqlite3.Error as error:
            if self._connection.in_transaction:  # a failed COMMIT leaves it open: end it
                self._connection.execute("ROLLBACK")
            # An I/O error while committing may have left the commit in the file: not run again.
            raise _failed(self.target, error, self.busy_seconds, committing=commit) from error

    def _tables(self) -> set[str]:
        rows = self._connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'"
        ).fetchall()
        return {name for (name,) in rows}

    def _schema(self) -> list[str]:
        return schema(auto_key="INTEGER PRIMARY KEY", item_key="INTEGER PRIMARY KEY", real="REAL", case_lines=LIVE_LINE)

    def _insert_item(self, columns: tuple[Any, ...]) -> int:
        case_id = columns[0]
        seq = self._execute(_INSERT_ITEM, (*columns, case_id, case_id)).lastrowid
        assert seq is not None  # an INSERT into a rowid table always sets it
        return seq

    # ------------------------------------------------------------------ one decision each
    def _decide(self, sql: str, params: Sequence[Any]) -> int:
        """Run `sql`, a `_decision` and a transaction of its own: the rows it changed. A lock
        held too long is waited for again with the store's patience; a failed read or write is
        not (it may have been the commit's)."""
        before = self._connection.total_changes
        retried(self, lambda: self._execute(sql, params, committing=True))
        return self._connection.total_changes - before

    def lease_next(self, worker_id: str, t: float, seconds: float, max_priority: int | None) -> Any:
        """Lease the item `next_ready` would answer, with its LEASED event, in one statement:
        (id, case_id, tenant_id, kind, payload, token, attempts); None if none is ready; `DUE`
        if some lease is due (nothing was written: expire first)."""
        if self.atomic.open:
            return DUE  # inside a transaction of the caller's: the long way, in it
        expires = t + seconds
        priority = _ANY_PRIORITY if max_priority is None else int(max_priority)
        self._answers.clear()
        if self._decide(_LEASE_NEXT, (worker_id, t, seconds, expires, priority, dumps({"expires_at": expires}))) == 2:
            _, item, case_id, tenant_id, kind, payload, token, attempts = self._answers[0]
            return (item, case_id, tenant_id, kind, json.loads(payload), token, attempts)
        return DUE if self._answers else None

    def ack_live(self, item_id: str, case_id: str, token: int, worker_id: str, t: float) -> bool:
        """Settle the leased item `item_id` as acked, with its ACKED event, in one statement,
        if `token` is still its lease's and no lease anywhere is due; False (nothing written)
        otherwise: the caller then takes the long way, which says why."""
        seq = item_seq(item_id)
        if seq is None or self.atomic.open:
            return False
        return self._decide(_ACK_LIVE, (seq, item_id, case_id, token, worker_id, t)) == 2

    def add_logged(self, row: Any, info: Mapping[str, Any]) -> None:
        """Insert the new item `row` with its ENQUEUED event (`info`, at `row.enqueued_at`) in
        one statement; sets `row.seq` and `row.id`."""
        if not _is_new(row):  # not as enqueue makes one: every column bound, the long way's INSERT
            transact(self, lambda: self._add_logged(row, info))
            return
        columns = (row.case_id, row.tenant_id, row.kind, dumps(row.payload), int(row.priority))
        self._decide(_ADD_LOGGED, (*columns, row.lease_seconds, row.enqueued_at, dumps(info)))
        seq = self._answers[0][0]
        row.seq, row.id = seq, item_id(seq)

    def _add_logged(self, row: Any, info: Mapping[str, Any]) -> None:
        """`add_logged`'s two statements for any row: every column bound."""
        self.add_item(row)
        self._execute(
            self._sql.insert_event, (row.enqueued_at, "enqueued", row.id, row.case_id, None, None, None, dumps(info))
        )

    def close(self) -> None:
        self._connection.close()


def _answer(answers: deque[tuple[Any, ...]]) -> Callable[..., Any]:
    """`shopops_answer(...)`: keeps its arguments in `answers` (the last call's only) and
    returns the first. A function apart, so the connection holds no reference to its store."""

    def answer(*values: Any) -> Any:
        answers.append(values)
        return values[0]

    return answer


def _is_new(row: Any) -> bool:
    """Whether `row` is an item as `enqueue` makes it: the empty columns `_ADD_LOGGED` writes."""
    return (
        row.state is ItemState.READY
        and row.attempts == 0
        and row.token == 0
        and row.replays == 0
        and row.worker_id is None
        and row.expires_at is None
        and row.last_error is None
        and row.dead_at is None
        and row.ended_by is None
    )


def _check_version(target: str) -> None:
    """The statements use RETURNING (SQLite 3.35, 2021): refuse an older library before
    touching the file, rather than fail on the first enqueue."""
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise StoreOpenError(
            target=target,
            reason=f"this Python's SQLite library is version {sqlite3.sqlite_version}; the store needs "
            f"{'.'.join(map(str, MIN_SQLITE))} or newer",
            fix="use a Python built with a newer SQLite (python.org and conda builds, Debian 12 and Ubuntu 22.04 "
            "have one), or memory: / postgresql:// instead",
        )


def _check_file(path: Path, target: str) -> None:
    """Refuse, before touching anything, what cannot be a store: a folder that does not exist,
    a folder in the file's place, a file that is not an SQLite database."""
    folder = path.parent
    if not folder.is_dir():
        raise StoreOpenError(
            target=target,
            reason=f"the folder {folder} does not exist",
            fix=f"create it first (mkdir -p {folder}) or choose a path in an existing folder",
        )
    if path.is_dir():
        raise StoreOpenError(
            target=target, reason="that is a folder, not a file", fix="name a file, e.g. sqlite:///shopops.db"
        )
    # The file's header is not read here: opening and closing the database file outside
    # SQLite would drop every POSIX lock this process's other connections hold on it (a
    # close releases them all), and another process could then reset the WAL under them,
    # losing commits. SQLite itself refuses a file that is not a database (`_open_error`).


def _code(error: BaseException | None) -> int | None:
    """SQLite's primary result code for `error`, or None for an error that carries none."""
    code = getattr(error, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


_READ_ONLY = "the file or its folder is read-only"
_MAKE_WRITABLE = "make both writable (chmod u+w), or copy the file somewhere writable"
_DAMAGED_FIX = "restore it from a copy, or start a new file (keep this one to inspect)"


def _locked(target: str, busy_seconds: float, doing: str) -> StoreLockedError:
    return StoreLockedError(
        target=target,
        reason=f"another process held it locked for more than {busy_seconds:g} s {doing}",
        fix=f"find the process holding it (fuser {target}) and let it finish, or run this again later",
        retry=True,
    )


def _failed(target: str, error: sqlite3.Error, busy_seconds: float, *, committing: bool = False) -> StoreError:
    """A kit error for what SQLite refused in the middle of a run, by its result code: the
    file, the cause and its fix. Locked and a failed read or write (nothing of the call kept)
    may pass: the call is tried again (see `bind_transactions`)."""
    code = _code(error)
    if code in (_BUSY, _LOCKED):
        return _locked(target, busy_seconds, "while this call waited to write")
    if code == _FULL:
        return StoreFullError(
            target=target,
            reason="the disk (or the file's quota) has no room for this write",
            fix="free some space on the disk that holds the file, then run again",
        )
    if code in (_CORRUPT, _NOTADB):
        return StoreCorruptError(target=target, reason=f"SQLite read a damaged page ({error})", fix=_DAMAGED_FIX)
    if code in (_READONLY, _PERM):
        return StoreFailedError(target=target, reason=_READ_ONLY, fix=_MAKE_WRITABLE)
    if code == _IOERR:
        return StoreFailedError(
            target=target,
            reason=f"the disk failed a read or write ({error})",
            fix="check the disk that holds the file (the system log says more), then run again",
            retry=not committing,
        )
    return StoreFailedError(target=target, reason=str(error), fix="check the file, its folder and the disk")


def _open_error(target: str, error: BaseException | None, busy_seconds: float = BUSY_SECONDS) -> Exception:
    """A kit error for what SQLite refused while the file was opened and read, by its code."""
    code = _code(error)
    if code in (_BUSY, _LOCKED):
        return _locked(target, busy_seconds, "while it was being opened")
    if code in (_READONLY, _PERM):
        return StoreOpenError(target=target, reason=_READ_ONLY, fix=_MAKE_WRITABLE)
    if code == _NOTADB:
        return ForeignStoreError(
            target=target,
            found="is not an SQLite database (a damaged file, or another kind)",
            expected=SQLiteStore.versions_read(),
            fix="choose another path; keep this file for whoever owns it",
        )
    if code == _CORRUPT:
        return StoreCorruptError(
            target=target, reason=f"SQLite read a damaged page ({error}); it was not changed", fix=_DAMAGED_FIX
        )
    if code == _FULL:
        return StoreFullError(
            target=target,
            reason="the disk has no room to set the file up",
            fix="free some space on the disk that holds the file, then run again",
        )
    if code == _CANTOPEN:
        return StoreOpenError(
            target=target, reason=f"SQLite cannot open the file ({error})", fix="check the path and its permissions"
        )
    return StoreOpenError(target=target, reason=str(error), fix="check the file, its folder and the disk")
