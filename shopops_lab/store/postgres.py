"""The PostgreSQL store: workers on many machines share one database
(`postgresql://user@host:5432/dbname`). Needs psycopg 3 (`pip install 'psycopg[binary]'`).

Each call of the engine is one transaction at READ COMMITTED. A worker looking for work asks
for the next free item `FOR UPDATE SKIP LOCKED`, so two workers never wait on (or take) the
same row; a write under a lease reads its item `FOR UPDATE` first, so the fencing check and
the write it guards happen under one lock. Every transaction takes that one blocking lock
before anything else and then only skips, so two transactions never wait on each other in a
circle.

The tables live in the connection's current schema (`public` unless the URL says otherwise,
e.g. `?options=-csearch_path%3Dclass_a`), so a class can share one server.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shopops_lab.errors import StoreOpenError
from shopops_lab.store.base import StoreFailedError, item_id
from shopops_lab.store.sql import ITEM_COLUMNS, SQLStore, schema

__all__ = ["PostgresStore"]

_INSERT_ITEM = (f"INSERT INTO items ({ITEM_COLUMNS}, id, position)"
                f" VALUES ({', '.join(['%s'] * 18)}, nextval('item_position'))")
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
            raise StoreOpenError(target=self.target, reason="the psycopg package is not installed",
                                 fix=_INSTALL) from None
        self._error, self._integrity = psycopg.Error, psycopg.IntegrityError
        try:
            self._connection = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as error:
            raise StoreOpenError(target=self.target, reason=_first_line(error),
                                 fix="start the server, or correct the host, port, user and database in the URL "
                                     "(a throwaway one for tests: sh scripts/postgres.sh start /tmp/pg)") from None
        try:
            with self.atomic:
                self._execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
                self._adopt()
        except BaseException:
            self._connection.close()
            raise

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
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
        return schema(auto_key="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", item_key="BIGINT PRIMARY KEY",
                      real="DOUBLE PRECISION") + ["CREATE SEQUENCE item_seq", "CREATE SEQUENCE item_position"]

    def _insert_item(self, columns: tuple) -> int:
        seq = self._execute("SELECT nextval('item_seq')").fetchone()[0]
        self._send(_INSERT_ITEM, (seq, *columns, item_id(seq)))
        return seq

    def close(self) -> None:
        self._connection.close()


def _failed(target: str, error: Exception) -> StoreOpenError:
    """A kit error for what the server refused in the middle of a run."""
    state = getattr(error, "sqlstate", None) or ""
    if state.startswith("40"):  # serialization failure, deadlock: the server rolled the transaction back
        return StoreFailedError(target=target, reason=f"the server aborted the transaction: {_first_line(error)}",
                                fix="run the call again: nothing of it was kept")
    if state.startswith("08") or not state:  # the connection itself
        return StoreOpenError(target=target, reason=f"the connection failed: {_first_line(error)}",
                              fix="check that the server is running and reachable, then open the store again")
    return StoreFailedError(target=target, reason=f"the server refused a statement: {_first_line(error)}",
                            fix="check the server's disk, permissions and settings (its log says more)")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
