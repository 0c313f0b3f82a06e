"""The database failing under a call: each cause is its own error with its own fix, in one
line; what passes (a lock let go, one failed read, a lost connection) is waited out or run
again where that is safe, and said where it is not. SQLite's causes are told by their result
codes; PostgreSQL's lost connections are real (`pg_terminate_backend`), and the moments when a
connection breaks right after the server did (or did not) run a statement are made exactly.

Waits run on a fake clock: `Patience(clock=..., sleep=...)` moves it instead of sleeping."""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace

import pytest
from store_backends import Backend, free_port, needs_psycopg, postgres_url

from shopops_lab.clock import FakeClock
from shopops_lab.errors import (
    ConnectionLostError,
    Kept,
    StoreCorruptError,
    StoreError,
    StoreFailedError,
    StoreFullError,
    StoreLockedError,
    StoreOpenError,
)
from shopops_lab.events import EventKind
from shopops_lab.jobs import JobStore
from shopops_lab.states import ItemState
from shopops_lab.store import open_store
from shopops_lab.store.patience import Patience
from shopops_lab.store.postgres import PostgresStore
from shopops_lab.store.sqlite import SQLiteStore, _failed
from shopops_lab.worker.queue import Queue


class Waits:
    """A patience on a fake clock that notes every wait and runs `then` (once) on the first."""

    def __init__(self, seconds: float = 10.0, then=None) -> None:
        self.clock, self.slept, self.then = FakeClock(), [], then
        self.patience = Patience(seconds=seconds, clock=self.clock.now, sleep=self.sleep)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.clock.advance(seconds)
        then, self.then = self.then, None
        if then is not None:
            then()


def coded(code: int, name: str, text: str) -> sqlite3.OperationalError:
    """An error as SQLite raises it: its words, and its result code."""
    error = sqlite3.OperationalError(text)
    error.sqlite_errorcode, error.sqlite_errorname = code, name
    return error


# ---------------------------------------------------------------------- SQLite: told by the code
@pytest.mark.parametrize(
    "code, name, words, cause, says",
    [  # the words are another cause's on purpose: only the code may decide
        (13, "SQLITE_FULL", "database is locked", StoreFullError, "free some space"),
        (5, "SQLITE_BUSY", "database or disk is full", StoreLockedError, "fuser"),
        (517, "SQLITE_BUSY_SNAPSHOT", "disk I/O error", StoreLockedError, "fuser"),
        (11, "SQLITE_CORRUPT", "database is locked", StoreCorruptError, "restore it from a copy"),
        (8, "SQLITE_READONLY", "database is locked", StoreFailedError, "chmod u+w"),
        (266, "SQLITE_IOERR_READ", "database is locked", StoreFailedError, "check the disk"),
    ],
)
def test_sqlite_errors_are_told_by_their_code_never_their_words(code, name, words, cause, says):
    error = _failed("/srv/shopops.db", coded(code, name, words), 30)
    assert type(error) is cause and says in error.fix and "\n" not in str(error)
    assert error.retry is (cause is StoreLockedError or name.startswith("SQLITE_IOERR"))


def hold_the_write_lock(path) -> sqlite3.Connection:
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


def test_a_lock_held_while_opening_says_locked_and_who_to_look_for_not_the_path(tmp_path):
    path = tmp_path / "held.db"
    SQLiteStore(path).close()
    other = hold_the_write_lock(path)
    waits = Waits(seconds=1)
    with pytest.raises(StoreLockedError) as caught:
        SQLiteStore(path, busy_seconds=0.01, patience=waits.patience)
    message = str(caught.value)
    assert "stayed locked: another process held it locked for more than 0.01 s while it was being opened" in message
    assert f"fuser {path}" in message and "path and its permissions" not in message
    assert waits.slept == [0.05, 0.1, 0.2, 0.4]  # tried again until the next wait would pass 1 s
    other.rollback()
    other.close()


def test_a_lock_let_go_while_opening_is_waited_out(tmp_path):
    path = tmp_path / "held.db"
    SQLiteStore(path).close()
    other = hold_the_write_lock(path)
    waits = Waits(then=other.rollback)  # the other process lets go while the store waits
    store = SQLiteStore(path, busy_seconds=0.01, patience=waits.patience)
    assert waits.slept == [0.05] and store.get("x", "y") is None
    store.close()
    other.close()


def test_a_busy_database_is_waited_out_and_the_call_happens_once(tmp_path):
    path = tmp_path / "busy.db"
    waits = Waits()
    store = SQLiteStore(path, busy_seconds=0.01, patience=waits.patience)
    queue = Queue(store=store, clock=FakeClock())
    other = hold_the_write_lock(path)
    waits.then = other.rollback  # another process holds the file, and lets go during the first wait
    assert queue.enqueue(case_id="O-1001") == "item-0001"
    assert waits.slept == [0.05] and len(queue) == 1 and len(store.log) == 1
    other.execute("BEGIN IMMEDIATE")  # and now it never lets go
    with pytest.raises(StoreLockedError, match="while this call waited to write") as caught:
        queue.enqueue(case_id="O-1002")
    assert caught.value.retry and sum(waits.slept) > 9  # tried for the patience's 10 s, then said so
    other.rollback()
    assert len(queue) == 1 and queue.enqueue(case_id="O-1002") == "item-0002"
    store.close()
    other.close()


class FailsOnce:
    """The store's cursor (every statement runs on it), failing one statement (the first that
    starts with `prefix`) with `error`."""

    def __init__(self, connection: sqlite3.Cursor, prefix: str, error: sqlite3.Error) -> None:
        self._connection, self._prefix, self._error = connection, prefix, error

    def execute(self, sql, params=()):
        if self._error is not None and sql.startswith(self._prefix):
            error, self._error = self._error, None
            raise error
        return self._connection.execute(sql, params)

    def __getattr__(self, name):
        return getattr(self._connection, name)


def test_a_read_or_write_the_disk_failed_once_is_run_again_and_happens_once(tmp_path):
    waits = Waits()
    store = SQLiteStore(tmp_path / "io.db", patience=waits.patience)
    queue = Queue(store=store, clock=FakeClock())
    queue.enqueue(case_id="O-1001")
    lease = queue.acquire("W1")
    store._cursor = FailsOnce(store._cursor, "INSERT INTO events", coded(10, "SQLITE_IOERR", "disk I/O error"))
    assert queue.nack(lease, "boom") is ItemState.READY  # the item went back, then its event failed
    assert waits.slept == [0.05]
    assert [event.kind for event in store.log][2:] == [EventKind.NACKED]


def test_a_commit_the_disk_failed_is_not_run_again(tmp_path):
    """A failed COMMIT may have reached the file: the call is reported, never run twice."""
    waits = Waits()
    store = SQLiteStore(tmp_path / "io.db", patience=waits.patience)
    queue = Queue(store=store, clock=FakeClock())
    queue.enqueue(case_id="O-1001")
    lease = queue.acquire("W1")
    store._cursor = FailsOnce(store._cursor, "COMMIT", coded(10, "SQLITE_IOERR", "disk I/O error"))
    with pytest.raises(StoreFailedError, match="the disk failed a read or write") as caught:
        queue.nack(lease, "boom")
    assert not caught.value.retry and waits.slept == []
    assert queue.nack(lease, "boom") is ItemState.READY  # rolled back; the store goes on


@pytest.mark.parametrize("decision", ["add_logged", "lease_next", "ack_live"])
def test_a_statement_that_is_its_own_transaction_is_not_run_again_when_the_disk_failed_it(tmp_path, decision):
    """The usual enqueue, acquire and ack are one statement each, their own COMMIT: a failed
    read or write in it may have been that COMMIT's, so it is reported, never run twice."""
    waits = Waits()
    store = SQLiteStore(tmp_path / "io.db", patience=waits.patience)
    queue = Queue(store=store, clock=FakeClock())
    queue.enqueue(case_id="O-1001")
    queue.enqueue(case_id="O-1002")
    lease = queue.acquire("W1")
    calls = {
        "add_logged": (lambda: queue.enqueue(case_id="O-1003"), EventKind.ENQUEUED),
        "lease_next": (lambda: queue.acquire("W2"), EventKind.LEASED),
        "ack_live": (lambda: queue.ack(lease), EventKind.ACKED),
    }
    call, logged = calls[decision]
    store._cursor = FailsOnce(store._cursor, f"INSERT INTO temp.{decision}", coded(10, "SQLITE_IOERR", "disk I/O"))
    with pytest.raises(StoreFailedError, match="the disk failed a read or write") as caught:
        call()
    assert not caught.value.retry and waits.slept == []
    call()  # this one failed before SQLite ran it: nothing was kept, and the store goes on
    assert [event.kind for event in store.log][3:] == [logged]


def sqlite_failures(tmp_path) -> dict[str, StoreError]:
    """One real failure of each cause SQLite can meet, caught."""
    found = {}
    with pytest.raises(StoreOpenError) as caught:
        open_store(f"sqlite:///{tmp_path / 'missing' / 'x.db'}")
    found["cannot open"] = caught.value
    full = Queue(store=f"sqlite:///{tmp_path / 'full.db'}", clock=FakeClock())
    pages = full.store._connection.execute("PRAGMA page_count").fetchone()[0]
    full.store._connection.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StoreFullError) as caught:
        for n in range(100):
            full.enqueue(case_id=f"O-{n}", payload={"text": "x" * 500})
    found["full"] = caught.value
    SQLiteStore(tmp_path / "locked.db").close()
    other = hold_the_write_lock(tmp_path / "locked.db")
    with pytest.raises(StoreLockedError) as caught:
        SQLiteStore(tmp_path / "locked.db", busy_seconds=0.01, patience=Waits(seconds=0.01).patience)
    other.rollback()
    found["locked"] = caught.value
    torn = Queue(store=f"sqlite:///{tmp_path / 'torn.db'}", clock=FakeClock())
    for n in range(300):
        torn.enqueue(case_id=f"O-{n}", payload={"text": "x" * 200})
    root = torn.store._connection.execute("SELECT rootpage FROM sqlite_master WHERE name = 'items'").fetchone()[0]
    torn.store.close()
    data = bytearray((tmp_path / "torn.db").read_bytes())
    data[(root - 1) * 4096 : root * 4096] = b"\xa5" * 4096
    (tmp_path / "torn.db").write_bytes(bytes(data))
    with pytest.raises(StoreCorruptError) as caught:
        Queue(store=f"sqlite:///{tmp_path / 'torn.db'}").counts()
    found["corrupt"] = caught.value
    return found


def test_each_cause_sqlite_can_meet_is_its_own_error_with_its_own_fix_in_one_line(tmp_path):
    assert_distinct(sqlite_failures(tmp_path))


def assert_distinct(found: dict[str, StoreError]) -> None:
    classes = [type(error) for error in found.values()]
    assert len(set(classes)) == len(classes), classes
    fixes = [error.fix for error in found.values()]
    assert len(set(fixes)) == len(fixes), fixes
    assert all("\n" not in str(error) and str(error).count("Fix:") == 1 for error in found.values())
    opened = [name for name, error in found.items() if isinstance(error, StoreOpenError)]
    assert opened == ["cannot open"] and sum("Cannot open" in str(error) for error in found.values()) == 1


# ---------------------------------------------------------------------- PostgreSQL: lost connections
@pytest.fixture(params=["postgresql"])
def pg(request, tmp_path):
    """A fresh PostgreSQL store's backend (skips, or in CI fails, without a server)."""
    made = Backend(request.param, tmp_path)
    yield made
    made.close()


def terminate(store) -> None:
    """Kill the store's server process, as a restart or an administrator would."""
    import psycopg

    with psycopg.connect(postgres_url(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (store._connection.info.backend_pid,))


def test_a_connection_lost_inside_a_block_is_one_line_nothing_on_stderr_and_the_store_goes_on(pg, capfd):
    store = pg.open()
    with pytest.raises(ConnectionLostError) as caught, store.atomic:
        store.put("job", "job-0001", {"state": "running"})
        terminate(store)
        store.put("job", "job-0002", {"state": "running"})
        store.get("job", "job-0001")  # the held writes go with this read: the server is gone
    error = caught.value
    assert error.outcome is Kept.NOTHING and error.retry
    assert not isinstance(error, StoreOpenError) and "Cannot open" not in str(error)
    assert "This call's changes were rolled back." in str(error) and str(error).count("Fix:") == 1
    assert capfd.readouterr().err == ""  # nothing from the driver ("error ignored terminating ...")
    assert store.get("job", "job-0001") is None  # the store reconnected; the block was rolled back
    with store.atomic:
        store.put("job", "job-0001", {"state": "queued"})
    assert store.get("job", "job-0001") == {"state": "queued"}


def test_a_lost_connection_is_a_cause_of_its_own_beside_sqlites(pg, tmp_path):
    store = pg.open()
    with pytest.raises(ConnectionLostError) as caught, store.atomic:
        store.put("job", "job-0001", {"state": "running"})
        terminate(store)
        store.get("job", "job-0001")
    assert_distinct({**sqlite_failures(tmp_path), "connection lost": caught.value})


def test_a_commit_whose_connection_broke_says_it_cannot_know_and_nothing_else_on_stderr(pg, capfd):
    """The held writes go with the COMMIT; the connection is gone: whether the server got as
    far as the COMMIT nobody can tell, so the error says so (psycopg's own complaint about its
    broken pipeline, "error ignored terminating <psycopg.Pipeline [BAD]>", never reaches stderr)."""
    store = pg.open()
    with pytest.raises(ConnectionLostError) as caught, store.atomic:
        store.put("job", "job-0001", {"state": "running"})
        terminate(store)
        store.put("job", "job-0002", {"state": "running"})
    assert caught.value.outcome is Kept.UNKNOWN and "while committing" in str(caught.value)
    assert not isinstance(caught.value, StoreOpenError) and str(caught.value).count("Fix:") == 1
    assert capfd.readouterr().err == ""
    assert store.scan("job") == []  # here it was not kept (the server was gone before the COMMIT)


def test_a_block_that_goes_on_after_its_connection_broke_cannot_commit(pg):
    store = pg.open()
    with pytest.raises(ConnectionLostError), store.atomic:
        store.put("job", "a", 1)
        terminate(store)
        with pytest.raises(ConnectionLostError):
            store.get("job", "a")
        store.put("job", "b", 2)  # on a new connection this would be kept alone: refused instead
    assert store.scan("job") == []


def test_a_kit_call_broken_before_its_commit_runs_again_by_itself_once(pg):
    store = pg.open()
    store.patience = Waits().patience
    jobs = JobStore(store=store, clock=FakeClock())
    terminate(store)  # the call's BEGIN and first statement meet a dead connection
    job = jobs.submit("O-1001:refund")
    assert [j.id for j in jobs.jobs()] == [job.id] and jobs.get(job.id).state.value == "queued"


class BreaksAtSetup(PostgresStore):
    """A store whose first connection breaks at the COMMIT of its setup, after the server ran
    it (the answer lost): the server restarting just as a worker opens its store."""

    def _connect(self, *, wait, lost=None):
        connection = super()._connect(wait=wait, lost=lost)
        if not getattr(self, "broke", False):
            self.broke, self.patience = True, Waits().patience
            return DiesAround(SimpleNamespace(_connection=connection), "COMMIT", after=True)
        return connection


def test_a_store_opened_with_wait_sets_up_again_when_its_setups_commit_is_lost(pg):
    url = pg.url()
    pg.open(url)  # the database exists and is the kit's
    store = BreaksAtSetup(url, wait=True)  # no error: the setup runs again on a new connection
    assert store.broke and not isinstance(store._connection, DiesAround)
    store.put("job", "job-0001", {"state": "queued"})
    assert store.get("job", "job-0001") == {"state": "queued"}
    store.close()
    with pytest.raises(ConnectionLostError) as caught:  # without wait, said at once
        BreaksAtSetup(url, wait=False)
    assert caught.value.outcome is Kept.UNKNOWN


class DiesAround:
    """The store's connection, breaking at the first statement that starts with `prefix`:
    before the server sees it, or right after the server ran it (its answer lost)."""

    def __init__(self, store, prefix: str, *, after: bool) -> None:
        self._connection, self._prefix, self._after, self.armed = store._connection, prefix, after, True

    def execute(self, sql, params=()):
        if self.armed and sql.startswith(self._prefix):
            import psycopg

            self.armed = False
            if self._after:
                self._connection.execute(sql, params)
            self._connection.close()
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return self._connection.execute(sql, params)

    def __getattr__(self, name):
        return getattr(self._connection, name)


def patient_queue(pg: Backend) -> tuple:
    """A store of `pg` that waits on a fake clock, and a queue on it."""
    store = pg.open()
    store.patience = Waits().patience
    return store, Queue(store=store, clock=FakeClock())


@pytest.mark.parametrize("after", [True, False], ids=["kept", "not kept"])
def test_an_acquire_whose_answer_was_lost_finds_out_whether_it_was_kept(pg, after):
    store, queue = patient_queue(pg)
    queue.enqueue(case_id="O-1001")
    queue.enqueue(case_id="O-1002")
    store._connection = DiesAround(store, "WITH due AS", after=after)
    lease = queue.acquire("W1")
    assert (lease.item_id, lease.token, lease.attempt) == ("item-0001", 1, 1)
    assert [e.item_id for e in store.log.where(EventKind.LEASED)] == ["item-0001"]  # leased once
    queue.ack(lease)
    assert queue.counts()[ItemState.DONE] == 1 and queue.counts()[ItemState.READY] == 1


@pytest.mark.parametrize("after", [True, False], ids=["kept", "not kept"])
def test_an_ack_whose_answer_was_lost_finds_out_whether_it_was_kept(pg, after):
    store, queue = patient_queue(pg)
    queue.enqueue(case_id="O-1001")
    lease = queue.acquire("W1")
    store._connection = DiesAround(store, "WITH due AS", after=after)
    queue.ack(lease)  # no error either way: kept, or sent again while the lease was still live
    assert queue.item(lease.item_id).state is ItemState.DONE
    assert len(store.log.where(EventKind.ACKED)) == 1


def test_an_enqueue_whose_answer_was_lost_says_it_cannot_know(pg):
    store, queue = patient_queue(pg)
    store._connection = DiesAround(store, "WITH n AS", after=True)
    with pytest.raises(ConnectionLostError) as caught:
        queue.enqueue(case_id="O-1001")
    assert caught.value.outcome is Kept.UNKNOWN and not caught.value.retry
    assert "look before you do it again" in str(caught.value)
    assert len(queue) == 1  # it was kept: a second try would have made two


def test_opening_waits_for_a_server_only_when_asked_and_then_says_how_long():
    needs_psycopg()
    from shopops_lab.store.postgres import PostgresStore

    url = f"postgresql://class@127.0.0.1:{free_port()}/shopops"
    waits = Waits(seconds=1)
    with pytest.raises(StoreOpenError, match="start the server") as caught:
        PostgresStore(url, patience=waits.patience)
    assert waits.slept == [] and "did not answer" not in str(caught.value)
    with pytest.raises(StoreOpenError, match=r"the server did not answer for 1 s \(") as caught:
        PostgresStore(url, patience=waits.patience, wait=True)
    assert waits.slept == [0.05, 0.1, 0.2, 0.4]


def test_a_server_that_does_not_come_back_is_said_after_the_patience(pg):
    store = pg.open()
    waits = Waits(seconds=1)
    store.patience = waits.patience
    terminate(store)
    store.url = f"postgresql://class@127.0.0.1:{free_port()}/shopops"  # the server is not there any more
    with pytest.raises(ConnectionLostError) as caught:
        Queue(store=store, clock=FakeClock()).counts()  # a read: reconnecting is all it needs
    assert caught.value.outcome is Kept.NOT_SENT and "did not come back within 1 s" in str(caught.value)
    assert waits.slept == [0.05, 0.1, 0.2, 0.4]
