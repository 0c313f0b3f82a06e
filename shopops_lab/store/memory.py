"""The memory store: dicts, deques and heaps in this process. The default for the labs and
the simulator (nothing to set up, runs in the browser) and the fastest backend; nothing
survives the process.

Lookups are O(log n): cases that can be served sit in a heap keyed by their head item's
(priority, seq), and leases in a heap keyed by deadline, so neither `next_ready` nor
`due_leases` scans the queue. Heap entries are never removed early; an entry that no longer
matches its row is skipped when it reaches the top. A case's line of ready items is a chain
through the rows themselves (`row.behind`), so a burst of one-item cases allocates no
container per case (a deque each cost ~700 bytes) and a drained case leaves nothing behind.
"""
from __future__ import annotations

import heapq
from typing import Any

from shopops_lab.events import EventLog
from shopops_lab.states import ItemState
from shopops_lab.store.base import ItemRow

__all__ = ["MemoryStore"]

_READY, _LEASED, _DONE, _DEAD = ItemState.READY, ItemState.LEASED, ItemState.DONE, ItemState.DEAD
_NONE: list[ItemRow] = []  # never appended to


class _NoTransaction:
    """One process's memory has nothing to roll back: a block is just a block."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class MemoryStore:
    """Every piece of state in plain Python structures, for one thread of one process."""

    url = "memory:"
    transactional = False  # nothing to roll back, so the engine skips transactions altogether

    def __init__(self, *, log: EventLog | None = None) -> None:
        self.log = log if log is not None else EventLog()
        self.atomic = _NoTransaction()
        self._items: dict[str, ItemRow] = {}
        self.get_item = self._items.get  # the answer is the dict's own lookup: no Python call on every ack
        self._heads: dict[str, ItemRow] = {}  # case -> the first ready item of its line
        self._tails: dict[str, ItemRow] = {}  # case -> the last; rows in between link by `behind`
        self._held: set[str] = set()                  # cases with a live lease
        self._available: list[tuple[int, int, str]] = []      # (priority, seq, case_id)
        self._expiry: list[tuple[float, int, int, str]] = []  # (expires_at, seq, token, item_id)
        self._dead: dict[str, ItemRow] = {}
        self._counts = {state: 0 for state in ItemState}
        self._records: dict[str, dict[str, Any]] = {}
        self._numbers: dict[str, int] = {}

    # ------------------------------------------------------------------ queue items
    def add_item(self, row: ItemRow) -> None:
        row.seq = seq = len(self._items) + 1
        row.id = f"item-{seq:04d}"  # item_id(seq), written out: this runs on every enqueue
        self._items[row.id] = row
        self._counts[_READY] += 1
        self._make_ready(row, front=False)

    def next_ready(self, max_priority: int | None) -> ItemRow | None:
        available = self._available
        if not available or (max_priority is not None and available[0][0] > max_priority):
            return None
        return self._heads[available[0][2]]

    def due_leases(self, t: float) -> list[ItemRow]:
        heap = self._expiry
        if not heap or heap[0][0] > t:
            return _NONE  # the usual answer, on every call of the queue: made once
        due, items = [], self._items
        while heap and heap[0][0] <= t:
            expires_at, _, token, key = heapq.heappop(heap)
            row = items[key]
            if row.state is _LEASED and row.token == token and row.expires_at == expires_at:
                if not due or due[-1] is not row:  # a heartbeat that kept the deadline pushed a twin
                    due.append(row)
            # else settled, re-leased or extended since: an old entry
        return due

    def write_item(self, row: ItemRow, source: ItemState) -> None:
        target = row.state
        if source is _READY:  # leased: next_ready answered from the top of the heap
            heapq.heappop(self._available)
            case_id = row.case_id
            if row.behind is None:
                del self._heads[case_id], self._tails[case_id]
            else:
                self._heads[case_id] = row.behind
                row.behind = None
            self._held.add(case_id)
            heapq.heappush(self._expiry, (row.expires_at, row.seq, row.token, row.id))
        elif target is _DONE:
            self._release(row)
        elif target is _LEASED:
            self._extended(row)
            return
        elif target is _READY:
            self._returned(row) if source is _LEASED else self._replayed(row)
        else:
            self._buried(row)
        counts = self._counts
        counts[source] -= 1
        counts[target] += 1

    def item_rows(self, state: ItemState | None = None) -> list[ItemRow]:
        return [row for row in self._items.values() if state is None or row.state is state]

    def dead_rows(self) -> list[ItemRow]:
        return list(self._dead.values())

    def item_counts(self) -> dict[ItemState, int]:
        return dict(self._counts)

    def item_count(self, state: ItemState) -> int:
        return self._counts[state]

    # ------------------------------------------------------------------ records
    def get(self, kind: str, key: str) -> Any:
        return self._records.get(kind, {}).get(key)

    def put(self, kind: str, key: str, value: Any) -> None:
        self._records.setdefault(kind, {})[key] = value

    def put_new(self, kind: str, key: str, value: Any) -> bool:
        records = self._records.setdefault(kind, {})
        if key in records:
            return False
        records[key] = value
        return True

    def scan(self, kind: str) -> list[tuple[str, Any]]:
        return list(self._records.get(kind, {}).items())

    def next_number(self, name: str) -> int:
        number = self._numbers[name] = self._numbers.get(name, 0) + 1
        return number

    def close(self) -> None:
        """Nothing to let go of."""

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._items)} items, {len(self.log)} events)"

    # ------------------------------------------------------------------ the lines
    def _extended(self, row: ItemRow) -> None:
        heapq.heappush(self._expiry, (row.expires_at, row.seq, row.token, row.id))

    def _returned(self, row: ItemRow) -> None:
        self._held.discard(row.case_id)
        self._make_ready(row, front=True)

    def _buried(self, row: ItemRow) -> None:
        self._dead[row.id] = row
        self._release(row)

    def _replayed(self, row: ItemRow) -> None:
        del self._dead[row.id]
        self._make_ready(row, front=False)

    def _make_ready(self, row: ItemRow, *, front: bool) -> None:
        """Queue `row` in its case's line and offer the case if it just became servable."""
        case_id = row.case_id
        head = self._heads.get(case_id)
        if head is None:
            row.behind = None
            self._heads[case_id] = self._tails[case_id] = row
        elif front:
            row.behind = head
            self._heads[case_id] = row
        else:
            row.behind = None
            self._tails[case_id].behind = row
            self._tails[case_id] = row
            return  # the case's head is unchanged: it is offered already, or held
        if case_id not in self._held:
            heapq.heappush(self._available, (row.priority, row.seq, case_id))

    def _release(self, row: ItemRow) -> None:
        """The case's lease is over: offer its next item, if any."""
        case_id = row.case_id
        self._held.discard(case_id)
        head = self._heads.get(case_id)
        if head is not None:
            heapq.heappush(self._available, (head.priority, head.seq, case_id))
