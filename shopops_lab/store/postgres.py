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

The tables live in the connection's current schema (`public` unless the URL says otherwise,
e.g. `?options=-csearch_path%3Dclass_a`), so a class can share one server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from shopops_lab.errors import StoreOpenError
from shopops_lab.store.base import StoreFailedError, item_id, item_seq
from shopops_lab.store.sql import ITEM_COLUMNS, SQLStore, dumps, schema

__all__ = ["PostgresStore"]

_INSERT_ITEM = (
    f"INSERT INTO items ({ITEM_COLUMNS}, id, position) VALUES ({', '.join(['%s'] * 18)}, nextval('item_position'))"
)
# The usual acquire and ack, each one statement in autocommit (one round trip): a fenced write
# that happens only if the lease is still the one the caller holds ("UPDATE ... WHERE token =
# ... RETURNING"), with its event, and only when no lease anywhere is due (an expiry is the
# engine's business, in Python: then nothing is written and the caller takes the long way).
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
_ACK_LIVE = (
    f"WITH due AS ({_DUE}),"
    " acked AS (UPDATE items SET state = 'done', ended_by = 'acked' WHERE seq = %(seq)s AND case_id = %(case)s"
    " AND token = %(token)s AND state = 'leased' AND NOT EXISTS (SELECT 1 FROM due) RETURNING id, case_id, attempts),"
    " logged AS (INSERT INTO events (time, kind, item_id, case_id, worker_id, token, attempt, info)"
    " SELECT %(t)s, 'acked', id, case_id, %(worker)s, %(token)s, attempts, '{{}}' FROM acked)"
    " SELECT count(*) FROM acked"
)
DUE = "due"  # lease_next's answer when a lease is due: expire it first, the long way (the queue's DUE)
_LEASE_NEXT_ANY = _LEASE_NEXT.format(urgent="")
_LEASE_NEXT_URGENT = _LEASE_NEXT.format(urgent=" AND i.priority <= %(priority)s")
_ACK_LIVE = _ACK_LIVE.format()
_SETUP_LOCK = 0x5709_0915  # an advisory lock: two processes opening a new database take turns
_INSTALL = "pip install 'psycopg[binary]>=3.2,<4'  (or: pip install 'shopops-lab[postgres]')"


class PostgresStore(SQLStore):
    dialect = "postgresql"
    lock = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    placeholder = "%s"
    # One sequence numbers every line's places: concurrent writers never draw the same one.
    back_of_case = back_of_dead_line = "nextval('item_position')"

    def __init__(self, url: str, *, target: str | None = None) -> None:
        super().__init__(url, target or url)
        self._pending: list[tuple[str, Sequence[Any]]] = []  # statements held back, in order
        try:
            import psycopg
        except ImportError:
            raise StoreOpenError(
                target=self.target, reason="the psycopg package is not installed", fix=_INSTALL
            ) from None
        self._error, self._integrity = psycopg.Error, psycopg.IntegrityError
        try:
            self._connection = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as error:
            raise StoreOpenError(
                target=self.target,
                reason=_first_line(error),
                fix="start the server, or correct the host, port, user and database in the URL "
                "(a throwaway one for tests: sh scripts/postgres.sh start /tmp/pg)",
            ) from None
        try:
            with self.atomic:
                self._execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
                self._adopt()
        except BaseException:
            self._connection.close()
            raise

    def _execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> Any:
        connection = self._connection
        try:
            if not self._pending:
                return connection.execute(sql, params)
            pending, self._pending = self._pending, []
            with connection.pipeline():  # what was held back goes in the same round trip
                for held, values in pending:
                    connection.execute(held, values)
                cursor = connection.execute(sql, params)
            return cursor
        except self._integrity:
            raise  # a broken rule of the schema is a bug of the kit's, shown as it is
        except self._error as error:
            raise _failed(self.target, error) from error

    def _send(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Inside a transaction, hold a statement without an answer until the next one that
        has one (or the commit): a round trip to the server saved per write."""
        if self.atomic.open:
            self._pending.append((sql, params))
        else:
            self._execute(sql, params)

    def _start(self) -> None:
        self._pending.append(("BEGIN", ()))  # sent with the transaction's first statement

    def _finish(self, commit: bool) -> None:
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
            self._execute("ROLLBACK")

    def _abandon(self) -> None:
        """Roll back whatever a failed COMMIT left open, so the next call starts clean (an
        aborted transaction would refuse every statement after it)."""
        from psycopg import pq

        try:
            if self._connection.info.transaction_status != pq.TransactionStatus.IDLE:
                self._connection.execute("ROLLBACK")
        except self._error:
            pass  # the connection is gone: the server rolled back

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
        none is ready; `DUE` if some lease is due (nothing was written: expire first)."""
        if self.atomic.open:
            return DUE  # inside a transaction of the caller's: the long way, in it
        statement = _LEASE_NEXT_URGENT if max_priority is not None else _LEASE_NEXT_ANY
        due, *row = self._execute(
            statement,
            {
                "t": t,
                "worker": worker_id,
                "seconds": seconds,
                "expires": t + seconds,
                "info": dumps({"expires_at": t + seconds}),
                "priority": max_priority,
            },
        ).fetchone()
        if due:
            return DUE
        return None if row[0] is None else (*row[:4], json.loads(row[4]), *row[5:])

    def ack_live(self, item_id: str, case_id: str, token: int, worker_id: str, t: float) -> bool:
        """Settle the leased item `item_id` as acked, with its ACKED event, in one statement,
        if `token` is still its lease's and no lease anywhere is due; False (nothing written)
        otherwise: the caller then takes the long way, which says why."""
        seq = item_seq(item_id)
        if seq is None or self.atomic.open:
            return False
        acked: int = self._execute(
            _ACK_LIVE, {"t": t, "seq": seq, "case": case_id, "token": token, "worker": worker_id}
        ).fetchone()[0]
        return acked == 1

    def _insert_item(self, columns: tuple[Any, ...]) -> int:
        seq: int = self._execute("SELECT nextval('item_seq')").fetchone()[0]
        self._send(_INSERT_ITEM, (seq, *columns, item_id(seq)))
        return seq

    def close(self) -> None:
        self._connection.close()


def _failed(target: str, error: Exception) -> StoreOpenError:
    """A kit error for what the server refused in the middle of a run."""
    state = getattr(error, "sqlstate", None) or ""
    if state.startswith("40"):  # serialization failure, deadlock: the server rolled the transaction back
        return StoreFailedError(
            target=target,
            reason=f"the server aborted the transaction: {_first_line(error)}",
            fix="run the call again: nothing of it was kept",
        )
    if state.startswith("08") or not state:  # the connection itself
        return StoreOpenError(
            target=target,
            reason=f"the connection failed: {_first_line(error)}",
            fix="check that the server is running and reachable, then open the store again",
        )
    return StoreFailedError(
        target=target,
        reason=f"the server refused a statement: {_first_line(error)}",
        fix="check the server's disk, permissions and settings (its log says more)",
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
