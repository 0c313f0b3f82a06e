"""Opening a store: the URL forms, and every database that is not ours (another program's,
another schema version, a damaged file) refused by name with nothing changed; a folder that
does not exist or a server that does not answer named with its fix."""

from __future__ import annotations

import sqlite3
import sys

import pytest
from store_backends import free_port, needs_psycopg, postgres_url, with_schema

from shopops_lab.errors import BadArgumentError, ForeignStoreError, StoreCorruptError, StoreOpenError
from shopops_lab.store import MemoryStore, open_store, redact
from shopops_lab.store.sql import CASE_LINES
from shopops_lab.store.sqlite import SQLiteStore, _open_error


@pytest.mark.parametrize(
    "url, words",
    [
        (None, "memory:, sqlite:///"),
        ("", "memory:"),
        ("mysql://localhost/db", "names no known store"),
        ("shopops.db", "names no known store"),
        ("memory:/x", "takes no path"),
        ("sqlite://shopops.db", "three slashes"),
        ("sqlite:///", "names no file"),
        ("sqlite:///runs/", "names no file"),
        ("sqlite:///x.db?synchronous=off", "synchronous=normal"),
        ("sqlite:///x.db?cache=1", "synchronous=full"),
    ],
)
def test_a_url_that_names_no_store_is_refused_with_the_forms_that_work(url, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadArgumentError) as caught:
        open_store(url)
    assert caught.value.field == "url" and words in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_the_three_url_forms(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert isinstance(open_store("memory:"), MemoryStore)
    relative = open_store("sqlite:///relative.db")
    absolute = open_store(f"sqlite:///{tmp_path / 'absolute.db'}?synchronous=normal")
    assert isinstance(relative, SQLiteStore) and (tmp_path / "relative.db").is_file()
    assert (relative.synchronous, absolute.synchronous) == ("full", "normal")
    assert absolute.path == tmp_path / "absolute.db"


def test_a_password_never_reaches_a_message():
    assert (
        redact("postgresql://class:s3cret@db.example:5432/shopops") == "postgresql://class:***@db.example:5432/shopops"
    )
    assert redact("postgresql://class@db.example/shopops") == "postgresql://class@db.example/shopops"
    with pytest.raises(BadArgumentError) as caught:
        open_store("mysql://class:s3cret@db.example/shopops")
    assert "s3cret" not in str(caught.value)


# ---------------------------------------------------------------------- SQLite files
def test_a_missing_folder_is_named_with_the_command_that_makes_it(tmp_path):
    with pytest.raises(StoreOpenError) as caught:
        open_store(f"sqlite:///{tmp_path / 'runs' / 'today.db'}")
    assert f"the folder {tmp_path / 'runs'} does not exist" in str(caught.value)
    assert f"mkdir -p {tmp_path / 'runs'}" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_an_sqlite_library_without_returning_is_refused_by_version_before_the_file_is_made(tmp_path, monkeypatch):
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 34, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.34.1")
    with pytest.raises(StoreOpenError) as caught:
        open_store(f"sqlite:///{tmp_path / 'shopops.db'}")
    assert "SQLite library is version 3.34.1; the store needs 3.35 or newer" in str(caught.value)
    assert "newer SQLite" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_folder_where_the_file_should_be_is_refused(tmp_path):
    (tmp_path / "shopops.db").mkdir()
    with pytest.raises(StoreOpenError, match="that is a folder, not a file"):
        open_store(f"sqlite:///{tmp_path / 'shopops.db'}")


def refused_unchanged(path, error=ForeignStoreError) -> str:
    before = path.read_bytes()
    with pytest.raises(error) as caught:
        open_store(f"sqlite:///{path}")
    assert path.read_bytes() == before, "a refused file must be left exactly as it was"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no journal or WAL left beside it
    return str(caught.value)


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("order O-1001: refund approved\n")
    message = refused_unchanged(path)
    assert "is not an SQLite database" in message and str(path) in message


def test_another_programs_database_is_refused_by_its_tables(tmp_path):
    path = tmp_path / "crm.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT)")
        db.execute("INSERT INTO customers (email) VALUES ('jordan@example.com')")
    db.close()
    message = refused_unchanged(path)
    assert "holds another program's tables (customers)" in message and "left exactly as it is" in message


def make_ours(path, **meta):
    SQLiteStore(path, synchronous="normal").close()
    with sqlite3.connect(path) as db:
        for key, value in meta.items():
            db.execute("UPDATE shopops_meta SET value = ? WHERE key = ?", (value, key))
        db.execute("PRAGMA journal_mode = DELETE")  # a single file again, so bytes can be compared
    db.close()


def test_another_schema_version_is_refused_not_migrated(tmp_path):
    path = tmp_path / "old.db"
    make_ours(path, schema_version="0")
    message = refused_unchanged(path)
    assert "has schema version 0" in message and "reads schema version 1 or 2" in message
    assert "the ShopOps Lab version that wrote it" in message


def test_a_store_of_another_program_with_our_table_names_is_refused(tmp_path):
    path = tmp_path / "other.db"
    make_ours(path, program="not-shopops")
    assert "was written by 'not-shopops'" in refused_unchanged(path)


def test_a_store_missing_a_table_is_refused_as_damaged(tmp_path):
    path = tmp_path / "damaged.db"
    make_ours(path)
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE records")
    db.close()
    assert "is damaged: table records is missing" in refused_unchanged(path)


def test_a_corrupt_store_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "torn.db"
    make_ours(path)
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the schema page, overwritten
    path.write_bytes(bytes(data))
    message = refused_unchanged(path, StoreCorruptError)
    assert "is damaged" in message and "it was not changed" in message and "restore it from a copy" in message


def test_a_read_only_database_is_named_with_its_fix():
    refused = sqlite3.OperationalError("attempt to write a readonly database")
    refused.sqlite_errorcode, refused.sqlite_errorname = 8, "SQLITE_READONLY"  # as SQLite raises it
    error = _open_error("/srv/shopops.db", refused)
    assert isinstance(error, StoreOpenError)
    assert "the file or its folder is read-only" in str(error) and "chmod u+w" in str(error)


def test_two_stores_on_one_new_file_set_it_up_once(tmp_path):
    path = tmp_path / "shared.db"
    first, second = SQLiteStore(path), SQLiteStore(path)
    with first.atomic:
        first.put("job", "job-0001", {"state": "queued"})
    assert second.get("job", "job-0001") == {"state": "queued"}
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT key, value FROM shopops_meta ORDER BY key").fetchall() == [
            ("program", "shopops-lab"),
            ("schema_version", "2"),
        ]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    db.close()


def test_a_version_1_file_is_used_as_it_is_and_keeps_every_rule(tmp_path):
    """A file set up before the live line (schema version 1: a case line and the lease guard,
    two indexes) opens as it is and stays version 1; a lease an older kit took, which kept
    the item's own place, still has every later item of its case behind it."""
    from shopops_lab.clock import FakeClock
    from shopops_lab.worker.queue import Queue

    path = tmp_path / "v1.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("DROP INDEX items_live_line")
        for statement in CASE_LINES:
            db.execute(statement)
        db.execute("UPDATE shopops_meta SET value = '1' WHERE key = 'schema_version'")
    db.close()
    clock = FakeClock()
    q = Queue(store=f"sqlite:///{path}", clock=clock, lease_seconds=10)
    ids = [q.enqueue(case_id="O-1001", now=0.0) for _ in range(3)]
    q.ack(q.acquire("W1", now=0.0), now=0.0)
    q.ack(q.acquire("W1", now=0.0), now=0.0)
    with sqlite3.connect(path) as db:  # the third, leased by an older kit: at its own place, 3
        db.execute(
            "UPDATE items SET state = 'leased', attempts = 1, token = 1, worker_id = 'W0', expires_at = 5.0"
            " WHERE id = ? AND position = 3",
            (ids[2],),
        )
    db.close()
    later = q.enqueue(case_id="O-1001", now=1.0)  # behind the held item, not at the empty line's front
    served = []
    while (lease := q.acquire("W1", now=20.0)) is not None:  # the old lease has expired by then
        served.append(lease.item_id)
        q.ack(lease, now=20.0)
    assert served == [ids[2], later]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM shopops_meta WHERE key = 'schema_version'").fetchone() == ("1",)
        indexes = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"items_one_lease_per_case", "items_case_line"} <= indexes and "items_live_line" not in indexes
        # the one-statement enqueue, acquire and ack are the connection's own (TEMP), not the file's
        assert db.execute("SELECT name FROM sqlite_master WHERE type IN ('view', 'trigger')").fetchall() == []
    db.close()
    q.store.close()


def test_a_store_at_rest_holds_no_read_of_its_file(tmp_path):
    """Between calls the store's one cursor holds no statement open: another process can
    checkpoint the whole log and empty it (a read left open would pin it, and the log
    would grow for as long as the worker sits idle)."""
    from shopops_lab.clock import FakeClock
    from shopops_lab.worker.queue import Queue

    path = tmp_path / "rest.db"
    q = Queue(store=f"sqlite:///{path}?synchronous=normal", clock=FakeClock(), lease_seconds=1)
    for case in ("O-1", "O-2", "O-1"):
        q.enqueue(case_id=case, now=0.0)
    q.acquire("W1", now=0.0), q.acquire("W2", now=0.0)
    assert q.acquire("W3", now=5.0) is not None  # two leases were due: expired on the way
    q.store.put("job", "job-1", {"state": "queued"})
    assert q.store.get("job", "job-1") == {"state": "queued"} and len(q.log) > 5 and q.store.item_counts()
    other = sqlite3.connect(path)
    try:
        busy, _, _ = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0
    finally:
        other.close()
    assert (tmp_path / "rest.db-wal").stat().st_size == 0
    q.store.close()


# ---------------------------------------------------------------------- PostgreSQL
def test_a_server_that_does_not_answer_is_named_without_its_password():
    needs_psycopg()
    url = f"postgresql://class:s3cret@127.0.0.1:{free_port()}/shopops"
    with pytest.raises(StoreOpenError) as caught:
        open_store(url)
    message = str(caught.value)
    assert "postgresql://class:***@127.0.0.1" in message and "s3cret" not in message
    assert "start the server" in message


def test_without_psycopg_the_fix_is_the_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now fails
    with pytest.raises(StoreOpenError) as caught:
        open_store("postgresql://class@127.0.0.1/shopops")
    assert "psycopg package is not installed" in str(caught.value)
    assert "pip install 'psycopg[binary]" in str(caught.value)


def test_a_postgres_schema_of_another_program_is_refused_and_left_alone():
    server = postgres_url()  # skips (or, in CI, fails) before psycopg is needed
    import psycopg

    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute("DROP SCHEMA IF EXISTS crm_refused CASCADE")
        admin.execute("CREATE SCHEMA crm_refused")
        admin.execute("CREATE TABLE crm_refused.customers (id INTEGER PRIMARY KEY)")
        try:
            with pytest.raises(ForeignStoreError, match=r"holds another program's tables \(customers\)"):
                open_store(with_schema(server, "crm_refused"))
            tables = admin.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'crm_refused'").fetchall()
            assert tables == [("customers",)]
        finally:
            admin.execute("DROP SCHEMA crm_refused CASCADE")
