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
opening their own store on the same URL.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from functools import wraps
from typing import Any, Protocol

from shopops_lab.errors import ShopOpsError, SimulatedCrash, StoreOpenError
from shopops_lab.events import EventLog
from shopops_lab.states import ItemState

__all__ = ["ItemRow", "Store", "item_id", "item_seq", "one_transaction_per_call"]


def item_id(seq: int) -> str:
    """The readable id of the `seq`-th item: item-0001, ..., item-12345."""
    return f"item-{seq:04d}"


def item_seq(item_id: str) -> int | None:
    """The inverse of `item_id`, or None for a string no item ever had as its id."""
    digits = item_id[5:] if item_id.startswith("item-") else ""
    if len(digits) < 4 or not digits.isascii() or not digits.isdigit() or (len(digits) > 4 and digits[0] == "0"):
        return None
    return int(digits)


class ItemRow:
    """One queue item as the store keeps it. The engine changes the fields and calls
    `store.write_item(row, source)`; nobody outside the engine ever sees a row (the queue
    hands out frozen `Item` snapshots). An item's place in its line (its case's line, or the
    dead-letter queue) is the store's own business: the memory store chains a case's ready
    items through `behind` (the next one in line); other stores leave it unset."""

    __slots__ = ("seq", "id", "case_id", "tenant_id", "kind", "payload", "flat", "priority", "state",
                 "attempts", "token", "worker_id", "expires_at", "lease_seconds", "enqueued_at",
                 "last_error", "dead_at", "replays", "ended_by", "behind")

    def __repr__(self) -> str:
        return f"ItemRow({self.id}, case {self.case_id}, {self.state.value}, token {self.token})"


class Store(Protocol):
    """The storage protocol. `MemoryStore`, `SQLiteStore` and `PostgresStore` implement it;
    `open_store(url)` picks one."""

    url: str
    log: EventLog
    transactional: bool
    """False for a store with nothing to roll back (memory): the engine then runs its calls
    directly, without entering `atomic`."""
    atomic: AbstractContextManager[Any]
    """Reentrant: a block inside a block joins the outer transaction. Leaving the outer block
    normally commits everything in it; leaving it with any exception (a crash, a refused
    write, a bug) rolls all of it back, as in any database."""

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
        ends each of them in the same transaction (a store may forget it answered them)."""

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
        """The JSON value stored under (kind, key), or None."""

    def put(self, kind: str, key: str, value: Any) -> None:
        """Store `value` (JSON) under (kind, key), replacing any earlier value."""

    def put_new(self, kind: str, key: str, value: Any) -> bool:
        """Store `value` only if (kind, key) is free: True if stored, False if it was taken.
        The primitive under every idempotency record."""

    def scan(self, kind: str) -> list[tuple[str, Any]]:
        """Every (key, value) of `kind`, in the order the keys were first stored."""

    def next_number(self, name: str) -> int:
        """1, 2, 3, ... per `name`: readable ids that never repeat."""

    def close(self) -> None:
        """Let go of files and connections."""


def one_transaction_per_call(component: Any, store: Store, names: Iterable[str]) -> None:
    """Make each of `component`'s methods `names` run as one transaction of `store`, by
    setting a wrapper on the instance. A store with nothing to roll back (memory) is left
    alone, so its components call their methods directly, at full speed.

    A call that the engine refuses (a stale token, a lease that is over) keeps what its own
    transaction did before refusing: the engine checks before it writes, so that is only the
    record of the refusal and the expiries it ran into, as in memory. A call made inside a
    transaction of yours has no transaction of its own: its refusal, like any error, rolls
    your whole transaction back."""
    if not store.transactional:
        return
    for name in names:
        setattr(component, name, _in_transaction(store.atomic, getattr(component, name)))


def _in_transaction(atomic: Any, method: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(method)
    def in_transaction(*args: Any, **kwargs: Any) -> Any:
        refused = None
        with atomic:
            try:
                return method(*args, **kwargs)
            except (SimulatedCrash, StoreOpenError):
                raise
            except ShopOpsError as refusal:  # commit the refusal's record, then raise it
                refused = refusal
        raise refused
    return in_transaction
