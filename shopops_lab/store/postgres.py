"""The PostgreSQL store: workers on many machines share one database
(`postgresql://user@host:5432/dbname`). Needs psycopg 3 (`pip install 'psycopg[binary]'`).

Each call of the engine is one transaction at READ COMMITTED. A worker looking for work asks
for the next free item `FOR UPDATE SKIP LOCKED`, so two workers never wait on (or take) the
same row; a write under a lease reads its item `FOR UPDATE` first, so the fencing check and
the write it guards happen under one lock. When no lease is due, the usual acquire and ack are
one statement each (`lease_next`, `ack_live`): one round trip, the fenced write and its event.

A record decision (a first claim, an idempotency record) is one `INSERT ... ON CONFLICT DO
NOTHING`, which waits for a concurrent insert of the same key to commit; a read that decides
a write locks its row. A call locks the record it is about first, then its token, then a
counter, in that order everywhere; a deadlock the server breaks anyway is a kit error that
says to run the call again.

A server that goes away (restarted, failed over, a connection killed) is reconnected to
with the store's `patience` (backoff, up to 60 s by default). What the caller learns depends
on where the connection broke: before a transaction's COMMIT, the server rolled it all back,
and a call of the kit's own (a `@transaction` method) runs again by itself; at the COMMIT, or
in a statement that is its own transaction, the change may have been kept: the one-statement
acquire and ack look at the database to find out, anything else says that it cannot know
(`ConnectionLostError`, `retry` False). A read is simply read again. docs/operators.md says
what this promises across a restart.

The tables live in the connection's current schema (`public` unless the URL says otherwise,
e.g. `?options=-csearch_path%3Dclass_a`), so a class can share one server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shopops_lab.errors import (
    ConnectionLostError,
    Kept,
    StoreError,
    StoreFailedError,
    StoreLockedError,
    StoreOpenError,
)
from shopops_lab.json_text import dumps
from shopops_lab.store.base import item_id, item_seq, transact
from shopops_lab.store.patience import Patience
from shopops_lab.store.sql import ITEM_COLUMNS, SQLStore, item_values, schema

__all__ = ["PostgresStore"]

_ITEM_ID = "'item-' || CASE WHEN n.seq < 10000 THEN lpad(n.seq::text, 4, '0') ELSE n.seq::text END"  # item_id(seq)
_INSERT_ITEM = (
    f"INSERT INTO items ({ITEM_COLUMNS}, id, position) VALUES ({', '.join(['%s'] * 18)}, nextval('item_position'))"
)
# The usual enqueue, acquire and ack, each one statement in autocommit (one round trip): the
# item with its ENQUEUED event; a fenced write that happens only if the lease is still the one
# the caller holds ("UPDATE ... WHERE token = ... RETURNING"), with its event, and only when
# no lease anywhere is due (an expiry is the engine's business, in Python: then nothing is
# written and the caller takes the long way).
_ADD_LOGGED = (
    "WITH n AS (SELECT nextval('item_seq') AS seq),"
    f" item AS (INSERT INTO items ({ITEM_COLUMNS}, id, position) SELECT n.seq, {', '.join(['%s'] * 16)},"
    f" {_ITEM_ID}, nextval('item_position') FROM n RETURNING seq, id, case_id),"
    " logged AS (INSERT INTO events (time, kind, item_id, case_id, worker_id, token, attempt, info)"
    " SELECT %s, 'enqueued', id, case_id, NULL, NULL, NULL, %s FROM item)"
    " SELECT seq FROM item"
)
_DUE = "SELECT 1 FROM items WHERE state = 'leased' AND expires_at <= %(t)s LIMIT 1"
_LEASE_NEXT = (
    f"WITH due AS ({_DUE}),"
    " pick AS (SELECT i.seq FROM items AS i WHERE i.state = 'ready'{urgent} AND NOT EXISTS (SELECT 1 FROM due)"
    " AND NOT EXISTS (SELECT 1 FROM items AS o WHERE o.case_id = i.case_id AND o.state = 'ready'"
    " AND o.position < i.position)"
    " AND NOT EXISTS (SELECT 1 FROM items AS l WHERE l.case_id = i.case_id AND l.state = 'leased')"
    " ORDER BY i.priority, i.seq LIMIT 1 FOR UPDATE SKIP LOCKED),"
    " leased AS (UPDATE items SET state = 'leased', attempts = items.attempts + 1, token = items.token + 1,"
    " worker_id = %(worker)s, lease_seconds = %(seconds)s, expires_at = %(expires)s, ended_by = NULL"
    " FROM pick WHERE items.seq = pick.seq"
    " RETURNING items.id, items.case_id, items.tenant_id, items.kind, items.payload, items.token, items.attempts),"
    " logged AS (INSERT INTO events (time, kind, item_id, case_id, worker_id, token, attempt, info)"
    " SELECT %(t)s, 'leased', id, case_id, %(worker)s, token, attempts, %(info)s FROM leased)"
    " SELECT EXISTS (SELECT 1 FROM due), leased.* FROM (SELECT 1) AS one LEFT JOIN leased ON true"
)
# After a lost connection: the lease this worker's acquire would have taken, if it was kept.
_LEASE_KEPT = (
    "SELECT false, id, case_id, tenant_id, kind, payload, token, attempts FROM items"
    " WHERE state = 'leased' AND worker_id = %(worker)s AND expires_at = %(expires)s ORDER BY seq DESC LIMIT 1"
)
_ACK_LIVE = (
    f"WITH due AS ({_DUE}),"
    " acked AS (UPDATE items SET state = 'done', ended_by = 'acked' WHERE seq = %(seq)s AND case_id = %(case)s"
    " AND token = %(token)s AND state = 'leased' AND NOT EXISTS (SELECT 1 FROM due) RETURNING id, case_id, attempts),"
    " logged AS (INSERT INTO events (time, kind, item_id, case_id, worker_id, token, attempt, info)"
    " SELECT %(t)s, 'acked', id, case_id, %(worker)s, %(token)s, attempts, '{{}}' FROM acked)"
    " SELECT count(*) FROM acked"
)
_ACK_KEPT = "SELECT state, ended_by, token FROM items WHERE seq = %(seq)s AND case_id = %(case)s"
DUE = "due"  # lease_next's answer when a lease is due: expire it first, the long way (the queue's DUE)
_LEASE_NEXT_ANY = _LEASE_NEXT.format(urgent="")
_LEASE_NEXT_URGENT = _LEASE_NEXT.format(urgent=" AND i.priority <= %(priority)s")
_ACK_LIVE = _ACK_LIVE.format()
_SETUP_LOCK = 0x5709_0915  # an advisory lock: two processes opening a new database take turns
_INSTALL = "pip install 'psycopg[binary]>=3.2,<4'  (or: pip install 'shopops-lab[postgres]')"
_START_IT = (
    "start the server, or correct the host, port, user and database in the URL "
    "(a throwaway one for tests: sh scripts/postgres.sh start /tmp/pg)"
)
# SQLSTATEs that mean the connection is over: class 08 (connection exception), and the server
# shutting down, crashing or not yet up (57P01, 57P02, 57P03).
_GONE = ("57P01", "57P02", "57P03")


class PostgresStore(SQLStore):
    dialect = "postgresql"
    lock = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    placeholder = "%s"
    # One sequence numbers every line's places: concurrent writers never draw the same one.
    back_of_case = back_of_dead_line = "nextval('item_position')"

    def __init__(
        self, url: str, *, target: str | None = None, patience: Patience | None = None, wait: bool = False
    ) -> None:
        """Open the database at `url`. A server that does not answer is an error at once (a
        wrong URL is said now), unless `wait`: then it is tried with the store's `patience`
        (a worker started while its database restarts)."""
        super().__init__(url, target or url)
        self.patience = patience or Patience()
        self._pending: list[tuple[str, Any]] = []  # statements held back, in order
        self._lost: ConnectionLostError | None = None  # the open transaction's connection broke
        self._broken: BaseException | None = None  # what broke the connection: reconnect before the next statement
        try:
            import psycopg
        except ImportError:
            raise StoreOpenError(
                target=self.target, reason="the psycopg package is not installed", fix=_INSTALL
            ) from None
        self._psycopg = psycopg
        self._error, self._integrity = psycopg.Error, psycopg.IntegrityError
        self._connection = self._connect(wait=wait)
        try:
            if wait:  # setting up twice is setting up once: a COMMIT lost to a restart is run again
                transact(self, self._set_up, idempotent=True)
            else:
                with self.atomic:
                    self._set_up()
        except BaseException:
            self._connection.close()
            raise

    def _set_up(self) -> None:
        """Take the setup lock, then set up an empty database or accept our own (`_adopt`)."""
        self._execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
        self._adopt()

    # ------------------------------------------------------------------ the connection
    def _connect(self, *, wait: bool, lost: BaseException | None = None) -> Any:
        """A new connection; tried with the store's patience if `wait` (or after `lost`, the
        error that broke the last one)."""
        tries = None
        while True:
            try:
                return self._psycopg.connect(self.url, autocommit=True, connect_timeout=10)
            except self._error as error:
                if not wait:
                    raise StoreOpenError(target=self.target, reason=_first_line(error), fix=_START_IT) from None
                tries = tries or self.patience.tries()
                if next(tries, None) is None:
                    waited = f"{self.patience.seconds:g} s"
                    if lost is None:
                        reason = f"the server did not answer for {waited} ({_first_line(error)})"
                        raise StoreOpenError(target=self.target, reason=reason, fix=_START_IT) from None
                    raise ConnectionLostError(
                        target=self.target,
                        reason=f"{_first_line(lost)}, and the server did not come back within {waited} "
                        f"({_first_line(error)})",
                        outcome=Kept.NOT_SENT,
                        fix="start the server (or mend the network), then run again",
                    ) from None

    def _reconnect(self, lost: BaseException) -> None:
        """Replace the connection `lost` broke, waiting for the server with the store's patience."""
        try:
            self._connection.close()
        except self._error:
            pass
        self._connection = self._connect(wait=True, lost=lost)
        self._broken = None

    # ------------------------------------------------------------------ statements
    def _execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> Any:
        if self._lost is not None and self.atomic.open:
            raise self._lost  # this transaction ended with its connection: nothing more runs in it
        while True:
            if self._broken is not None:
                self._reconnect(self._broken)
            pending, self._pending = self._pending, []
            try:
                if not pending:
                    return self._connection.execute(sql, params)
                return self._pipeline(pending, sql, params)
            except self._integrity:
                raise  # a broken rule of the schema is a bug of the kit's, shown as it is
            except self._error as error:
                failure = self._failure(error, sql, pending)
                if failure is not None:
                    raise failure from None
                # a read outside any transaction, on a connection that broke: read again

    def _pipeline(self, pending: list[tuple[str, Any]], sql: str, params: Any) -> Any:
        """What was held back and `sql`, in one round trip. An error inside the block is kept
        until the block is left, so the driver has nothing to complain about on stderr."""
        connection, failure, cursor = self._connection, None, None
        try:
            with connection.pipeline():
                try:
                    for held, values in pending:
                        connection.execute(held, values)
                    cursor = connection.execute(sql, params)
                except self._error as error:
                    failure = error
        except self._error as error:
            failure = failure or error
        if failure is not None:
            raise failure
        return cursor

    def _failure(self, error: Exception, sql: str, pending: list[tuple[str, Any]]) -> StoreError | None:
        """The kit's error for what broke `sql`, or None if it is a read to run again."""
        state = getattr(error, "sqlstate", None) or ""
        if self._connection.broken or self._connection.closed or state.startswith("08") or state in _GONE:
            self._broken = error
            committing = sql == "COMMIT"
            if not self.atomic.open and sql.lstrip().startswith("SELECT"):
                return None  # a read changes nothing: read it again on a new connection
            if self.atomic.open and not committing:  # the server never saw a COMMIT: it rolled all of it back
                self._lost = ConnectionLostError(
                    target=self.target,
                    reason=_first_line(error),
                    outcome=Kept.NOTHING,
                    fix="run the call again once the server is back (the kit's own calls do, by themselves)",
                    retry=True,
                )
                return self._lost
            return ConnectionLostError(
                target=self.target,
                reason=f"{_first_line(error)} (while {'committing' if committing else 'a change was on its way'})",
                outcome=Kept.UNKNOWN,
                fix="once the server is back, read what the database holds before you do it again",
            )
        if state.startswith("40"):  # serialization failure, deadlock: the server rolled the transaction back
            return StoreLockedError(
                target=self.target,
                reason=f"the server broke a conflict between transactions ({_first_line(error)})",
                fix="run the call again: nothing of it was kept (the kit's own calls do, by themselves)",
                retry=True,
            )
        return StoreFailedError(
            target=self.target,
            reason=f"the server refused a statement: {_first_line(error)}",
            fix="check the server's disk, permissions and settings (its log says more)",
        )

    def _send(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Inside a transaction, hold a statement without an answer until the next one that
        has one (or the commit): a round trip to the server saved per write."""
        if self.atomic.open:
            self._pending.append((sql, params))
        else:
            self._execute(sql, params)

    def _start(self) -> None:
        self._lost = None
        self._pending.append(("BEGIN", ()))  # sent with the transaction's first statement

    def _finish(self, commit: bool) -> None:
        lost, self._lost = self._lost, None
        if lost is not None:  # the server rolled this transaction back when its connection broke
            self._pending.clear()
            if commit:
                raise lost  # a caller that went on after the loss cannot commit what is gone
            return
        if commit:
            try:
                self._execute("COMMIT")  # the held statements go with it: an error may show only now
            except BaseException:
                self._pending.clear()
                self._abandon()
                raise
        elif self._pending and self._pending[0][0] == "BEGIN":
            self._pending.clear()  # nothing reached the server: nothing to undo there
        else:
            self._pending.clear()
            if self._broken is None:
                try:
                    self._connection.execute("ROLLBACK")
                except self._error as error:
                    self._broken = error  # gone as it was rolled back: the server rolled it back itself

    def _abandon(self) -> None:
        """Roll back whatever a failed COMMIT left open, so the next call starts clean (an
        aborted transaction would refuse every statement after it)."""
        from psycopg import pq

        if self._broken is not None:
            return  # the connection is gone: the server rolled back (or committed) on its own
        try:
            if self._connection.info.transaction_status != pq.TransactionStatus.IDLE:
                self._connection.execute("ROLLBACK")
        except self._error as error:
            self._broken = error

    def _decided(self, sql: str, params: Mapping[str, Any], look: Callable[[], Any]) -> Any:
        """The one row of `sql`, a decision that is its own transaction. If the connection
        broke on its way (kept or not, nobody knows), reconnect and `look()` at the database:
        the row the decision answered if it was kept, or None if it was not (then run it again).
        A conflict the server broke is run again too; both with the store's patience."""
        tries = None
        while True:
            try:
                return self._execute(sql, params).fetchone()
            except ConnectionLostError as lost:
                last: StoreError = lost
                row = look()
                if row is not None:
                    return row
            except StoreError as error:
                if not error.retry:
                    raise
                last = error
            tries = tries or self.patience.tries()
            if next(tries, None) is None:
                raise last

    def _tables(self) -> set[str]:
        rows = self._execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()
        return {name for (name,) in rows}

    def _schema(self) -> list[str]:
        return schema(
            auto_key="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
            item_key="BIGINT PRIMARY KEY",
            real="DOUBLE PRECISION",
        ) + ["CREATE SEQUENCE item_seq", "CREATE SEQUENCE item_position"]

    # ------------------------------------------------------------------ one round trip each
    def lease_next(self, worker_id: str, t: float, seconds: float, max_priority: int | None) -> Any:
        """Lease the item `next_ready` would answer, with its LEASED event, in one statement:
        (id, case_id, tenant_id, kind, payload, token, attempts) of the item leased; None if
        none is ready; `DUE` if some lease is due (nothing was written: expire first). A lease
        taken while the connection broke is found again by its worker and deadline."""
        if self.atomic.open:
            return DUE  # inside a transaction of the caller's: the long way, in it
        statement = _LEASE_NEXT_URGENT if max_priority is not None else _LEASE_NEXT_ANY
        params = {
            "t": t,
            "worker": worker_id,
            "seconds": seconds,
            "expires": t + seconds,
            "info": dumps({"expires_at": t + seconds}),
            "priority": max_priority,
        }
        due, *row = self._decided(statement, params, lambda: self._execute(_LEASE_KEPT, params).fetchone())
        if due:
            return DUE
        return None if row[0] is None else (*row[:4], json.loads(row[4]), *row[5:])

    def ack_live(self, item_id: str, case_id: str, token: int, worker_id: str, t: float) -> bool:
        """Settle the leased item `item_id` as acked, with its ACKED event, in one statement,
        if `token` is still its lease's and no lease anywhere is due; False (nothing written)
        otherwise: the caller then takes the long way, which says why. An ack sent while the
        connection broke is looked up: kept, or sent again while the lease is still live."""
        seq = item_seq(item_id)
        if seq is None or self.atomic.open:
            return False
        params = {"t": t, "seq": seq, "case": case_id, "token": token, "worker": worker_id}

        def look() -> tuple[int] | None:
            found = self._execute(_ACK_KEPT, params).fetchone()
            if found is not None and found[2] == token:
                if found[0] == "done" and found[1] == "acked":
                    return (1,)  # kept
                if found[0] == "leased":
                    return None  # not kept, and still ours: ack again
            return (0,)  # the lease is over: the long way says how

        acked: int = self._decided(_ACK_LIVE, params, look)[0]
        return acked == 1

    def add_logged(self, row: Any, info: Mapping[str, Any]) -> None:
        """Insert the new item `row` with its ENQUEUED event (`info`, at `row.enqueued_at`), in
        one statement outside any transaction; sets `row.seq` and `row.id`. A connection that
        breaks on its way leaves it unknown whether the item was kept: that is said
        (`ConnectionLostError`), never guessed (a second try could enqueue it twice)."""
        found = self._execute(_ADD_LOGGED, (*item_values(row), row.enqueued_at, dumps(info))).fetchone()
        row.seq = found[0]
        row.id = item_id(row.seq)

    def _insert_item(self, columns: tuple[Any, ...]) -> int:
        seq: int = self._execute("SELECT nextval('item_seq')").fetchone()[0]
        self._send(_INSERT_ITEM, (seq, *columns, item_id(seq)))
        return seq

    def close(self) -> None:
        self._connection.close()


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
