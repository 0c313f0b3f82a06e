"""Where the engine keeps its state, chosen by a URL.

    open_store("memory:")                            # this process only: the labs' default
    open_store("sqlite:///shopops.db")               # one file, several processes on one machine
    open_store("sqlite:////var/lib/shopops/run.db")  # the same, with an absolute path (four slashes)
    open_store("postgresql://user@host:5432/shopops")  # many machines

Every backend implements the protocol in `shopops_lab.store.base` and passes the same
contract suite (tests/test_store_contract.py).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit, urlunsplit

from shopops_lab.errors import BadArgumentError
from shopops_lab.events import EventLog, component_log
from shopops_lab.store.base import ItemRow, Store, bind_transactions, item_id, transaction
from shopops_lab.store.memory import MemoryStore

__all__ = [
    "ItemRow",
    "MemoryStore",
    "Store",
    "URL_FORMS",
    "bind_transactions",
    "item_id",
    "open_store",
    "redact",
    "store_for",
    "transaction",
]

URL_FORMS = "memory:, sqlite:///relative/path.db, sqlite:////absolute/path.db or postgresql://user@host:5432/dbname"


def open_store(url: str, *, wait: bool = False) -> Store:
    """The store `url` names, opened (and set up, if the database is new and empty). A
    database of another program or schema version is refused and left as it is. A server
    that does not answer is an error at once, unless `wait`: then it is waited for with the
    store's patience (a worker started while its database restarts). docs/operators.md says
    what each backend promises across a restart."""
    if not isinstance(url, str) or not url.strip():
        raise BadArgumentError(field="url", problem=f"is {url!r}", fix=f"pass one of {URL_FORMS}")
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "memory":
        if url.strip() != "memory:":
            raise BadArgumentError(field="url", problem=f"is {url!r}", fix="write just memory: (it takes no path)")
        return MemoryStore()
    if scheme == "sqlite":
        return _sqlite(url)
    if scheme in ("postgresql", "postgres"):
        from shopops_lab.store.postgres import PostgresStore

        return PostgresStore(url, target=redact(url), wait=wait)
    raise BadArgumentError(
        field="url", problem=f"is {redact(url)!r}, which names no known store", fix=f"pass one of {URL_FORMS}"
    )


def store_for(store: Store | str | None, log: EventLog | None) -> Store:
    """The store a component keeps its state in: the one given (a Store, or a URL to open),
    or a new memory store writing to `log`. A store brings its own log (the database's
    history), so `log=` goes only with the memory default."""
    if store is None:
        return MemoryStore(log=component_log(log))
    if log is not None:
        raise BadArgumentError(
            field="log",
            problem="was given together with a store",
            fix="leave log out: the component writes to its store's log (store.log)",
        )
    if isinstance(store, str):
        return open_store(store)
    if not all(callable(getattr(store, name, None)) for name in ("next_ready", "write_item", "put", "scan")):
        raise BadArgumentError(
            field="store",
            problem=f"is {store!r}, not a store",
            fix="pass a URL such as 'sqlite:///shopops.db', or open_store(url)",
        )
    return store


def _sqlite(url: str) -> Store:
    from shopops_lab.store.sqlite import SYNCHRONOUS, SQLiteStore

    parts = urlsplit(url)
    if not url.startswith("sqlite:///") or parts.netloc:
        raise BadArgumentError(
            field="url",
            problem=f"is {url!r}",
            fix="write three slashes before a relative path (sqlite:///shopops.db) "
            "and four before an absolute one (sqlite:////tmp/shopops.db)",
        )
    path = parts.path[1:]
    if not path or path.endswith("/"):
        raise BadArgumentError(
            field="url",
            problem=f"is {url!r}, which names no file",
            fix="end it with a file name, e.g. sqlite:///shopops.db",
        )
    options = parse_qs(parts.query, keep_blank_values=True)
    synchronous = options.pop("synchronous", ["full"])
    if options or len(synchronous) != 1 or synchronous[0].lower() not in SYNCHRONOUS:
        raise BadArgumentError(
            field="url",
            problem=f"has the options {parts.query!r}",
            fix="use only ?synchronous=full (the default: survives a power cut) "
            "or ?synchronous=normal (survives a killed process, faster)",
        )
    return SQLiteStore(path, synchronous=synchronous[0].lower(), url=url)


def redact(url: str) -> str:
    """`url` without its password, fit for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
