"""The backends every contract test runs on (conftest.py makes them the `backend` and
`durable` fixtures): memory, SQLite (a file in the test's own folder) and PostgreSQL (a
schema of its own on the server named by SHOPOPS_POSTGRES_URL, dropped afterwards).

Locally the PostgreSQL cases skip, saying how to run them; under CI (CI=true) a missing
server is a failure, because `.ci/run` starts one.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import socket
from pathlib import Path

import pytest

from shopops_lab.store import Store, open_store

BACKENDS = ("memory", "sqlite", "postgresql")
DURABLE = ("sqlite", "postgresql")
POSTGRES_ENV = "SHOPOPS_POSTGRES_URL"
HOW_TO_RUN_POSTGRES = (
    "PostgreSQL tests need a server and psycopg: run `sh scripts/postgres.sh start /tmp/shopops-pg` "
    "(Debian/Ubuntu: sudo apt-get install postgresql) and `.venv/bin/pip install 'psycopg[binary]'`, then "
    "`SHOPOPS_POSTGRES_URL=<the URL it prints> make test`; stop it with `sh scripts/postgres.sh stop /tmp/shopops-pg`"
)

_schemas = itertools.count(1)


def postgres_url() -> str:
    """The server's URL, or skip (locally) / fail (in CI) saying how to get one."""
    url = os.environ.get(POSTGRES_ENV)
    if url and importlib.util.find_spec("psycopg") is not None:
        return url
    if os.environ.get("CI"):
        pytest.fail(
            f"{POSTGRES_ENV} or psycopg is missing, but CI must run the PostgreSQL tests. {HOW_TO_RUN_POSTGRES}"
        )
    pytest.skip(HOW_TO_RUN_POSTGRES)


def needs_psycopg() -> None:
    """Skip (locally) / fail (in CI) a test that needs psycopg but no server."""
    if importlib.util.find_spec("psycopg") is None:
        if os.environ.get("CI"):
            pytest.fail(f"psycopg is missing, but CI must run the PostgreSQL tests. {HOW_TO_RUN_POSTGRES}")
        pytest.skip(HOW_TO_RUN_POSTGRES)


def free_port() -> int:
    """A local port nothing listens on (a server that does not answer)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def with_schema(url: str, schema: str) -> str:
    """`url` with the connection's search path set to `schema`."""
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


class Backend:
    """Fresh, empty databases of one kind; everything made is removed at the end."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name = name
        self.folder = folder
        self.durable = name in DURABLE
        self._opened: list[Store] = []
        self._schemas: list[str] = []
        self._files = itertools.count(1)
        self._admin = None
        if name == "postgresql":
            self._server = postgres_url()  # skips (or, in CI, fails) before psycopg is needed
            import psycopg

            self._admin = psycopg.connect(self._server, autocommit=True)

    def url(self) -> str:
        """The URL of a new, empty database."""
        if self.name == "memory":
            return "memory:"
        if self.name == "sqlite":
            return f"sqlite:///{self.folder / f'store-{next(self._files)}.db'}?synchronous=normal"
        schema = f"contract_{os.getpid()}_{next(_schemas)}"
        self._admin.execute(f"CREATE SCHEMA {schema}")
        self._schemas.append(schema)
        return with_schema(self._server, schema)

    def empty(self, url: str) -> None:
        """Make the database at `url` empty again, as if new (much faster than a new one)."""
        tables = "DELETE FROM items; DELETE FROM events; DELETE FROM records; DELETE FROM counters"
        if self.name == "sqlite":
            import sqlite3

            with sqlite3.connect(url.removeprefix("sqlite:///").split("?")[0]) as db:
                db.executescript(f"PRAGMA synchronous = OFF; {tables}")
            db.close()
        elif self.name == "postgresql":
            schema = url.rsplit("%3D", 1)[1]
            self._admin.execute(
                f"SET search_path TO {schema}; {tables}; ALTER SEQUENCE item_seq RESTART;"
                " ALTER SEQUENCE item_position RESTART; ALTER TABLE events ALTER COLUMN seq RESTART;"
                " ALTER TABLE records ALTER COLUMN seq RESTART"
            )

    def open(self, url: str | None = None) -> Store:
        store = open_store(url or self.url())
        self._opened.append(store)
        return store

    def close(self) -> None:
        for store in self._opened:
            store.close()
        if self._admin is not None:
            for schema in self._schemas:
                self._admin.execute(f"DROP SCHEMA {schema} CASCADE")
            self._admin.close()
