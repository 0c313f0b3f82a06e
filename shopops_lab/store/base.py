"""What the engine asks of the place that keeps its state.

The engine (queue, jobs, checkpoints, outbox, effects) owns every rule: who may lease what,
when a token is stale, when an item is dead-lettered. A store keeps rows, answers questions
about them, and makes a group of changes happen together or not at all:

    with store.atomic:          # one transaction: all of it is kept, or none of it
        row = store.next_ready(None)
        ...

That split (huey's `storage.py` in spirit: one interface, several implementations, one test
suite for all) is what lets the contract suite hold every backend to the same behaviour.

Three kinds of state sit behind the interface:

* queue items, as `ItemRow`s the engine changes and hands back with `write_item`;
* records: small JSON documents by (kind, key) for jobs, checkpoints, the outbox and
  idempotency records, plus named counters for readable ids (`job-0001`);
* the event log (`store.log`), which every component appends to and the checker reads.

A store is used by one thread at a time; processes and machines share a database by each
opening their own store on the same URL. A store that pays for each statement (a round trip
on PostgreSQL, a trip through the driver on SQLite) may also offer `lease_next`, `ack_live` and
`add_logged`, the queue's usual acquire, ack and enqueue as one statement each; the queue uses
them when they are there and takes the long way otherwise.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from types import MethodType, TracebackType
from typing import Any, Protocol, TypeVar, overload

from shopops_lab.errors import ConnectionLostError, Kept, ShopOpsError, StoreError, StoreFailedError
from shopops_lab.events import EventLog
from shopops_lab.states import ItemState
from shopops_lab.store.patience import Patience

__all__ = [
    "ItemRow",
    "Store",
    "StoreFailedError",
    "bind_transactions",
    "item_id",
    "item_seq",
    "once",
    "retried",
    "transact",
    "transaction",
    "transactional_methods",
]


def item_id(seq: int) -> str:
    """The readable id of the `seq`-th item: item-0001, ..., item-12345. Padded by `zfill`, at
    half the cost of a `:04d` format (every enqueue names its item)."""
    return f"item-{str(seq).zfill(4)}"


def item_seq(item_id: str) -> int | None:
    """The inverse of `item_id`, or None for a string no item ever had as its id."""
    digits = item_id[5:] if item_id.startswith("item-") else ""
    if (
        not 4 <= len(digits) <= 18
        or not digits.isascii()
        or not digits.isdigit()
        or (len(digits) > 4 and digits[0] == "0")
    ):  # 18 digits: still a 64-bit integer
        return None
    return int(digits)


class ItemRow:
    """One queue item as the store keeps it. The engine changes the fields and calls
    `store.write_item(row, source)`; nobody outside the engine ever sees a row (the queue
    hands out frozen `Item` snapshots). An item's place in its line (its case's line, or the
    dead-letter queue) is the store's own business: the memory store chains a case's ready
    items through `behind` (the next one in line); other stores leave it unset."""

    __slots__ = (
        "seq",
        "id",
        "case_id",
        "tenant_id",
        "kind",
        "payload",
        "flat",
        "priority",
        "state",
        "attempts",
        "token",
        "worker_id",
        "expires_at",
        "lease_seconds",
        "enqueued_at",
        "last_error",
        "dead_at",
        "replays",
        "ended_by",
        "behind",
    )
    # The slots' types (annotations only: a slot cannot also have a class-level value).
    seq: int
    id: str
    case_id: str
    tenant_id: str
    kind: str
    payload: dict[str, Any]
    flat: bool  # every payload value a str, int, bool or None: dict(payload) is a deep copy
    priority: int
    state: ItemState
    attempts: int
    token: int
    worker_id: str | None
    expires_at: float | None
    lease_seconds: float
    enqueued_at: float
    last_error: str | None
    dead_at: float | None
    replays: int
    ended_by: str | None
    behind: ItemRow | None

    def __repr__(self) -> str:
        return f"ItemRow({self.id}, case {self.case_id}, {self.state.value}, token {self.token})"

    def __deepcopy__(self, memo: dict[int, Any]) -> ItemRow:
        """The row's own copy at a fifth of `copy.deepcopy`'s cost (a world copied to go on
        from, by the schedule explorer, copies every row): its fields are values, its payload
        is copied as `flat` says, and the row behind it in line goes through `memo`."""
        twin = ItemRow.__new__(ItemRow)
        memo[id(self)] = twin
        for name in ItemRow.__slots__:
            value = getattr(self, name, _UNSET)
            if value is not _UNSET:
                setattr(twin, name, value)
        if hasattr(self, "payload"):
            twin.payload = dict(self.payload) if self.flat else copy.deepcopy(self.payload, memo)
        if getattr(self, "behind", None) is not None:
            twin.behind = copy.deepcopy(self.behind, memo)
        return twin


_UNSET = object()


class Transaction(Protocol):
    """`store.atomic`: a reentrant block (see `Store.atomic`) that says whether one is open,
    for a caller that must know whether it stands inside a transaction (a stepped worker
    reporting where it stopped, lab 08's outermost block)."""

    def __enter__(self) -> None: ...

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None, /
    ) -> None: ...

    @property
    def open(self) -> bool:
        """True inside a block (at any depth)."""


class Store(Protocol):
    """The storage protocol. `MemoryStore`, `SQLiteStore` and `PostgresStore` implement it;
    `open_store(url)` picks one."""

    url: str
    patience: Patience
    """How long a call the database failed for a moment (a restart, a lock, one bad read) is
    tried again, when it is safe to (see `bind_transactions`)."""
    shared: bool
    """True when other connections (threads, processes, machines) may write the same data
    (SQL); False for memory (one thread of one process). A decision on a shared store is one
    atomic statement or is taken under a lock; see `put_new` and `get`."""

    # Read-only members (properties here, plain attributes in the stores), so a store may
    # hold a subclass: the SQL stores' log is a DatabaseLog, each store's transaction its own.
    @property
    def log(self) -> EventLog: ...

    @property
    def atomic(self) -> Transaction:
        """Reentrant: a block inside a block joins the outer transaction. Leaving the outer
        block normally commits everything in it; leaving it with any exception (a crash, a
        refused write, a bug) rolls all of it back, as in any database: records, counters,
        events and queue items alike, on every backend. A block of yours is never run twice:
        if the database fails under it, the error says whether anything was kept."""

    # ------------------------------------------------------------------ queue items
    def add_item(self, row: ItemRow) -> None:
        """Store a new ready item at the back of its case's line; sets `row.seq` and `row.id`."""

    def get_item(self, item_id: str) -> ItemRow | None:
        """The item (locked for this transaction where the backend locks), or None."""

    def next_ready(self, max_priority: int | None) -> ItemRow | None:
        """The item to serve next: among cases with no leased item, the first ready item of
        each case's line; of those, the lowest (priority, seq); None if there is none or it
        is less urgent than `max_priority`. Nothing changes until `write_item`."""

    def due_leases(self, t: float) -> list[ItemRow]:
        """Leased items whose lease ends at or before `t`, by (expires_at, seq). The caller
        ends each of them in the same transaction (a store may forget it answered them).
        A store may also keep `due_from`, a time before which this answers nothing (it may
        be early, never late); the queue then asks only from that time on (the memory store)."""

    def write_item(self, row: ItemRow, source: ItemState) -> None:
        """Keep the engine's change to `row`, which moved from `source` to `row.state` (or
        stayed leased with a new deadline). An item back to ready from a lease goes to the
        front of its case's line; a replayed one to the back; a dead one to the end of the
        dead-letter queue."""

    def item_rows(self, state: ItemState | None = None) -> list[ItemRow]:
        """Every item (or those in `state`), in enqueue order."""

    def dead_rows(self) -> list[ItemRow]:
        """Dead items, in the order they died."""

    def item_counts(self) -> dict[ItemState, int]:
        """How many items are in each state, every state present."""

    def item_count(self, state: ItemState) -> int:
        """How many items are in `state`."""

    # ------------------------------------------------------------------ records
    def get(self, kind: str, key: str) -> Any:
        """The JSON value stored under (kind, key), or None. Inside a transaction the row,
        if it exists, stays locked until the end (SELECT ... FOR UPDATE), so what was read
        can decide a write; a key that does not exist yet is taken with `put_new`."""

    def put(self, kind: str, key: str, value: Any) -> None:
        """Store `value` (JSON) under (kind, key), replacing any earlier value."""

    def put_new(self, kind: str, key: str, value: Any) -> bool:
        """Store `value` only if (kind, key) is free: True if stored, False if it was taken.
        One statement (INSERT ... ON CONFLICT DO NOTHING): of any number of
        concurrent callers exactly one gets True, and a caller that gets False waits for the
        taker's transaction to end, so a `get` after it reads the taker's committed value.
        The primitive under every idempotency record and every first claim."""

    def scan(self, kind: str) -> list[tuple[str, Any]]:
        """Every (key, value) of `kind`, in the order the keys were first stored."""

    def next_number(self, name: str) -> int:
        """1, 2, 3, ... per `name`: readable ids that never repeat."""

    def close(self) -> None:
        """Let go of files and connections."""

    def __enter__(self) -> Store:
        """`with open_store(url) as store:` closes the store when the block ends."""

    def __exit__(self, *exc: object) -> None: ...


_Method = TypeVar("_Method", bound=Callable[..., Any])
_T = TypeVar("_T")


@overload
def transaction(method: _Method) -> _Method: ...
@overload
def transaction(
    method: None = None, *, checks_first: bool = False, calls_out: bool = False
) -> Callable[[_Method], _Method]: ...
def transaction(
    method: Callable[..., Any] | None = None, *, checks_first: bool = False, calls_out: bool = False
) -> Any:
    """Mark a method of a component (an object with a `store`) as one transaction of that
    store, where the method is defined: `bind_transactions` in the component's `__init__`
    wraps every marked method, so none can be forgotten in a list kept elsewhere.

    `checks_first=True` says the method makes every check before its first write, so on a
    store no other thread or process writes (memory) nothing could ever need undoing: there
    it is called directly, at full speed (the queue's hot path). `calls_out=True` says it
    runs the caller's code (an effect) inside: any exception, a refusal too, then rolls the
    whole call back (see `bind_transactions` for the refusals an engine call keeps)."""

    def mark(function: _Method) -> _Method:
        function.__transaction__ = Marked(checks_first=checks_first, calls_out=calls_out)  # type: ignore[attr-defined]
        return function

    return mark if method is None else mark(method)


@dataclass(frozen=True, slots=True)
class Marked:
    """How a method was marked with `transaction`."""

    checks_first: bool
    calls_out: bool


def transactional_methods(cls: type) -> dict[str, Marked]:
    """The names of `cls`'s methods marked with `transaction`, and how each was marked."""
    found = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            how = getattr(value, "__transaction__", None)
            if how is not None:
                found[name] = how
            elif name in found and callable(value):
                del found[name]  # overridden without the mark
    return found


def bind_transactions(component: Any, store: Store) -> None:
    """Make each of `component`'s methods marked with `transaction` run as one transaction
    of `store`, by setting a wrapper on the instance.

    What an error does to the call's transaction is decided per error class
    (`ShopOpsError.refusal`): a refusal of the engine's (a stale token, a lease that is over)
    keeps what its own transaction did before refusing (the engine checks before it writes,
    so that is only the record of the refusal and the expiries it ran into); every other
    error (bad input, a failing database, a bug) rolls the whole call back.

    A call the database failed for a moment with nothing kept (`StoreError.retry`: a lost
    connection before the COMMIT, a lock held too long, a deadlock the server broke) is run
    again, with the store's `patience`, unless it runs the caller's code (`calls_out`: an
    effect cannot be taken back). A call made inside a transaction of yours has no
    transaction of its own: its refusal, like any error, rolls your whole transaction back,
    and it is never run again on its own (the rest of your block was rolled back with it)."""
    for name, how in transactional_methods(type(component)).items():
        if store.shared or not how.checks_first:
            wrap = _whole if how.calls_out else _in_transaction
            # Bound to the instance as a method, and reading `self.store` when called, so a
            # copy of the component (copy.deepcopy) runs on its own store, not the original's.
            setattr(component, name, MethodType(wrap(getattr(type(component), name)), component))


def _in_transaction(function: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(function)
    def in_transaction(self: Any, *args: Any, **kwargs: Any) -> Any:
        return transact(self.store, lambda: function(self, *args, **kwargs))

    return in_transaction


def transact(store: Store, call: Callable[[], _T], *, idempotent: bool = False) -> _T:
    """`call()` as one transaction of `store` (inside a transaction of the caller's: joining
    it, and never run again on its own). Run again, with the store's patience, when the
    database failed it for a moment with nothing kept (`StoreError.retry`); if `idempotent`
    (running it twice is running it once), also when its COMMIT was lost on its way. A
    refusal of the engine's (`ShopOpsError.refusal`) keeps its record and is raised; any
    other error rolls the call back."""
    if store.atomic.open:
        return _one_try(store, call)
    return retried(store, lambda: _one_try(store, call), idempotent=idempotent)


def retried(store: Store, call: Callable[[], _T], *, idempotent: bool = False) -> _T:
    """`call()`, run again with the store's patience while the database fails it for a moment
    with nothing kept (`StoreError.retry`; if `idempotent`, also a COMMIT lost on its way)."""
    tries = None
    while True:
        try:
            return call()
        except ConnectionLostError as lost:
            if not (lost.retry or (idempotent and lost.outcome is Kept.UNKNOWN)):
                raise
            last: StoreError = lost
        except StoreError as error:
            if not error.retry:
                raise
            last = error
        tries = tries or store.patience.tries()
        if next(tries, None) is None:
            raise last


def _one_try(store: Store, call: Callable[[], _T]) -> _T:
    """One run of `call` in one transaction; a refusal is raised after its record is kept."""
    refused = None
    with store.atomic:
        try:
            return call()
        except ShopOpsError as error:
            if not error.refusal:
                raise
            refused = error
    raise refused


def once(store: Store, kind: str, key: str, write: Callable[[], _T]) -> _T:
    """`write()` (changes to `store`) and the record (kind, key) of its result, in one
    transaction, exactly once: a later call with the same key, or a try whose COMMIT was lost
    on its way, finds the record and returns the first result instead of writing again. Call
    it outside any transaction (it needs its own, to run again); the result must be JSON."""
    if store.atomic.open:
        raise RuntimeError("once() runs its own transaction: call it outside store.atomic")

    def first() -> _T:
        if store.put_new(kind, key, None):  # taken: this try writes (a concurrent one waits, then reads)
            result = write()
            store.put(kind, key, {"result": result})
            return result
        kept: dict[str, Any] = store.get(kind, key)
        return kept["result"]  # type: ignore[no-any-return]

    return transact(store, first, idempotent=True)


def _whole(function: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(function)
    def in_transaction(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.store.atomic:
            return function(self, *args, **kwargs)

    return in_transaction
