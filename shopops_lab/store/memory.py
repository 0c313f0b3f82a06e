"""The memory store: dicts, deques and heaps in this process. The default for the labs and
the simulator (nothing to set up, runs in the browser) and the fastest backend; nothing
survives the process.

Lookups are O(log n): cases that can be served sit in a heap keyed by their head item's
(priority, seq), and leases in a heap keyed by deadline, so neither `next_ready` nor
`due_leases` scans the queue. Heap entries are never removed early; an entry that no longer
matches its row (the case was leased, or its head changed) is dropped when it reaches the
top. A case's line of ready items is a chain through the rows themselves (`row.behind`), so
a burst of one-item cases allocates no container per case (a deque each cost ~700 bytes)
and a drained case leaves nothing behind. `due_from`, the first deadline in the heap, tells
the queue when no lease can be due without a call (see `Store.due_leases`).
"""

from __future__ import annotations

import copy
import heapq
from typing import Any

from shopops_lab.events import EventLog
from shopops_lab.states import ItemState
from shopops_lab.store.base import ItemRow, item_id
from shopops_lab.store.patience import Patience

__all__ = ["MemoryStore"]

# Members looked up once: reading one off the Enum class costs ~20x a global (bench_queue.py).
_READY, _LEASED, _DONE = ItemState.READY, ItemState.LEASED, ItemState.DONE
_NONE: list[ItemRow] = []  # never appended to
_INF = float("inf")


class _Transaction:
    """`store.atomic` for memory: reentrant; leaving the outer block with an exception undoes
    everything written in it: records, counters, events, and queue items (each row as it was
    when the block first handed it out, the lines and tables that hold it). Outside a block
    nothing is noted (`undo` is None), so the queue's hot path pays nothing. It knows the
    store's log, not the store: no reference cycle keeps a store alive (while a block that
    touched items is open, its undo list holds the store, and lets go when the block ends)."""

    __slots__ = ("_log", "_depth", "_log_mark", "undo", "noted", "lines")

    def __init__(self, log: EventLog) -> None:
        self._log = log
        self._depth = 0
        self._log_mark = 0
        # While a block is open: (table, key, old value) for a dict; (set, member, was in it)
        # for a set; (row, _ROW, its slots' values) for an item row.
        self.undo: list[tuple[Any, Any, Any]] | None = None
        self.noted: set[int] = set()  # the rows saved in `undo` in this block (by id)
        self.lines: MemoryStore | None = None  # the store whose items the open block wrote

    def __enter__(self) -> None:
        if self._depth == 0:
            self.undo = []
            self._log_mark = len(self._log._rows)
        self._depth += 1

    def __exit__(self, kind: type | None, error: BaseException | None, tb: Any) -> None:
        self._depth -= 1
        if self._depth:
            return
        undo, self.undo = self.undo, None
        store, self.lines, self.noted = self.lines, None, set()
        if kind is not None:
            restored: list[ItemRow] = []
            for table, key, old in reversed(undo or ()):
                if key is _ROW:
                    _restore(table, old)
                    restored.append(table)
                elif isinstance(table, set):
                    if old:
                        table.add(key)
                    else:
                        table.discard(key)
                elif old is _ABSENT:
                    table.pop(key, None)
                else:
                    table[key] = old
            if store is not None:
                store._reoffer(restored)
            del self._log._rows[self._log_mark :]
            del self._log._events[self._log_mark :]

    @property
    def open(self) -> bool:
        return self._depth > 0

    def __deepcopy__(self, memo: dict[int, Any]) -> _Transaction:
        """What `copy.deepcopy` makes of it, slot by slot, without its generic path (a store is
        copied for each world the explorer goes on from)."""
        twin = _Transaction.__new__(_Transaction)
        memo[id(self)] = twin
        twin._log = copy.deepcopy(self._log, memo)
        twin._depth, twin._log_mark = self._depth, self._log_mark
        twin.undo = None if self.undo is None else copy.deepcopy(self.undo, memo)
        twin.noted = {id(copy.deepcopy(row, memo)) for row, key, _ in self.undo or () if key is _ROW}
        twin.lines = copy.deepcopy(self.lines, memo)
        return twin


class _Mark:
    """A marker in an undo list that stays itself when the list is copied."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __copy__(self) -> _Mark:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Mark:
        return self

    def __repr__(self) -> str:
        return self.name


_ABSENT = _Mark("absent")  # the old value of a key that was not there
_ROW = _Mark("row")  # the key of an undo entry that holds a row's slots
_FLAT_TABLES = frozenset({"_held", "_available", "_expiry", "_counts", "_numbers"})  # of values that never change


class _Counts:
    """How many items are in each state: one slot per state, named by its value. Every item
    write moves one item between two of them. The hot edges (an enqueue, acquire's and ack's
    edges) change their two by name: a slot costs about half a dict entry keyed by an enum
    member, and a cycle made five such changes (bench_queue.py). Other edges, and the undo
    journal, go by state: `counts[state]`."""

    __slots__ = ("ready", "leased", "done", "dead")

    def __init__(self) -> None:
        self.ready = self.leased = self.done = self.dead = 0

    def __getitem__(self, state: ItemState) -> int:
        count: int = getattr(self, state)  # a state is a str: its value names its slot
        return count

    def __setitem__(self, state: ItemState, count: int) -> None:
        setattr(self, state, count)

    def __copy__(self) -> _Counts:
        twin = _Counts.__new__(_Counts)
        twin.ready, twin.leased, twin.done, twin.dead = self.ready, self.leased, self.done, self.dead
        return twin

    def __deepcopy__(self, memo: dict[int, Any]) -> _Counts:
        twin = memo[id(self)] = self.__copy__()  # numbers only; entered in memo, as a dict's copy was
        return twin


assert _Counts.__slots__ == tuple(state.value for state in ItemState), "a slot per state, named by its value"
_STATES = tuple(ItemState)


class MemoryStore:
    """Every piece of state in plain Python structures, for one thread of one process."""

    url = "memory:"
    shared = False  # one thread of one process: nobody else can write between a read and a write
    patience = Patience()  # never needed: nothing here fails for a moment

    def __init__(self, *, log: EventLog | None = None) -> None:
        self.log = log if log is not None else EventLog()
        self.atomic = _Transaction(self.log)
        self._items: dict[str, ItemRow] = {}
        self._heads: dict[str, ItemRow] = {}  # case -> the first ready item of its line
        self._tails: dict[str, ItemRow] = {}  # case -> the last; rows in between link by `behind`
        self._held: set[str] = set()  # cases with a live lease
        self._available: list[tuple[int, int, str]] = []  # (priority, seq, case_id)
        self._expiry: list[tuple[float, int, int, str]] = []  # (expires_at, seq, token, item_id)
        # The first deadline in _expiry (inf while it is empty), kept as it changes: no lease is due
        # before it. Stale entries count too, so it may be early, never late.
        self.due_from = _INF
        self._dead: dict[str, ItemRow] = {}
        self._counts = _Counts()
        self._records: dict[str, dict[str, Any]] = {}
        self._numbers: dict[str, int] = {}

    def __deepcopy__(self, memo: dict[int, Any]) -> MemoryStore:
        """The store's own copy (the schedule explorer forks worlds that hold one): the tables
        whose entries never change in place (the heaps' tuples, the counters, the held
        cases) are copied one level deep, and the records' tables two, sharing the documents
        (a `put` replaces a document, never changes it: see `get`); everything else as
        `copy.deepcopy` copies it, rows through `memo`, so a row in two tables is one row in
        the copy too. The tables copied by hand are entered in `memo` before anything else is
        copied: a store copied inside an open block has an undo list that names them, and the
        copy's list must name the copy's own (or rolling the copy back would miss them)."""
        twin = MemoryStore.__new__(MemoryStore)
        memo[id(self)] = twin
        state = vars(self)
        by_hand: dict[str, Any] = {}
        for name in _FLAT_TABLES:
            value = state[name]
            memo[id(value)] = by_hand[name] = copy.copy(value)
        records = state["_records"]
        memo[id(records)] = by_hand["_records"] = {}
        for kind, rows in records.items():
            memo[id(rows)] = by_hand["_records"][kind] = dict(rows)
        for name, value in state.items():
            setattr(twin, name, by_hand[name] if name in by_hand else copy.deepcopy(value, memo))
        return twin

    # ------------------------------------------------------------------ queue items
    def add_item(self, row: ItemRow) -> None:
        items = self._items
        row.seq = seq = len(items) + 1
        row.id = key = item_id(seq)
        if self.atomic.undo is not None:
            self._journal(row, items, new=True)
        items[key] = row
        self._counts.ready += 1
        case_id = row.case_id  # _make_ready(row, front=False), written out: this runs on every enqueue
        row.behind = None
        tail = self._tails.get(case_id)
        self._tails[case_id] = row
        if tail is not None:
            tail.behind = row  # behind the case's line: its head, and its offer, are as they were
        else:
            self._heads[case_id] = row
            if case_id not in self._held:
                heapq.heappush(self._available, (row.priority, seq, case_id))

    def get_item(self, item_id: str) -> ItemRow | None:
        row = self._items.get(item_id)
        if row is not None and self.atomic.undo is not None:
            self._note(row)
        return row

    def next_ready(self, max_priority: int | None) -> ItemRow | None:
        available, heads = self._available, self._heads
        while available:
            priority, seq, case_id = available[0]
            head = heads.get(case_id)
            if head is not None and head.seq == seq and case_id not in self._held:
                if max_priority is not None and priority > max_priority:
                    return None
                if self.atomic.undo is not None:
                    self._note(head)
                return head
            heapq.heappop(available)  # an old offer: the case was leased, or its line changed, since
        return None

    def due_leases(self, t: float) -> list[ItemRow]:
        if t < self.due_from:
            return _NONE  # the usual answer: made once
        heap = self._expiry
        due: list[ItemRow] = []
        items = self._items
        while heap and heap[0][0] <= t:
            expires_at, _, token, key = heapq.heappop(heap)
            row = items.get(key)  # None: the item of a block rolled back after it leased it
            if row is not None and row.state is _LEASED and row.token == token and row.expires_at == expires_at:
                if not due or due[-1] is not row:  # a heartbeat that kept the deadline pushed a twin
                    due.append(row)
            # else settled, re-leased or extended since: an old entry
        self.due_from = heap[0][0] if heap else _INF
        if self.atomic.undo is not None:
            for row in due:
                self._note(row)
        return due

    def write_item(self, row: ItemRow, source: ItemState) -> None:
        if self.atomic.undo is not None:
            self._journal(row, self._dead)
        target = row.state
        if source is _READY:  # leased: the first of its case's line; the case's offer in the heap is now old
            case_id = row.case_id
            if self._heads.get(case_id) is not row:
                raise RuntimeError(
                    f"write_item leased {row.id}, which is not first in its case's line "
                    "(the queue leases only what next_ready answers)"
                )
            if row.behind is None:
                del self._heads[case_id], self._tails[case_id]
            else:
                self._heads[case_id] = row.behind
                row.behind = None
            self._held.add(case_id)
            available = self._available
            if available and available[0][1] == row.seq:  # its offer, where next_ready found it: dropped now, not
                heapq.heappop(available)  # by the next call, which would look it up first (bench_queue.py)
            assert target is _LEASED and row.expires_at is not None, "from ready, only to leased, with an expiry"
            expiry = self._expiry
            heapq.heappush(expiry, (row.expires_at, row.seq, row.token, row.id))  # _expiry_entry(row)
            self.due_from = expiry[0][0]
            counts = self._counts
            counts.ready -= 1
            counts.leased += 1
            return
        if target is _DONE:  # _release(row), written out: every ack comes here
            assert source is _LEASED, "to done, only from leased"
            case_id = row.case_id
            self._held.discard(case_id)
            head = self._heads.get(case_id)
            if head is not None:
                heapq.heappush(self._available, (head.priority, head.seq, case_id))
            counts = self._counts
            counts.leased -= 1
            counts.done += 1
            return
        if target is _LEASED:
            self._extended(row)
            return
        if target is _READY:
            self._returned(row) if source is _LEASED else self._replayed(row)
        else:
            self._buried(row)
        counts = self._counts
        counts[source] -= 1
        counts[target] += 1

    def item_rows(self, state: ItemState | None = None) -> list[ItemRow]:
        rows = [row for row in self._items.values() if state is None or row.state is state]
        if self.atomic.undo is not None:
            for row in rows:
                self._note(row)
        return rows

    def dead_rows(self) -> list[ItemRow]:
        rows = list(self._dead.values())
        if self.atomic.undo is not None:
            for row in rows:
                self._note(row)
        return rows

    def item_counts(self) -> dict[ItemState, int]:
        counts = self._counts
        return {state: counts[state] for state in _STATES}

    def item_count(self, state: ItemState) -> int:
        return self._counts[state]

    # ------------------------------------------------------------------ records
    def get(self, kind: str, key: str) -> Any:
        """The stored document itself, as a database store's is a copy: change it by `put`,
        never in place (the kit's components build a new document for each write)."""
        return self._records.get(kind, {}).get(key)

    def put(self, kind: str, key: str, value: Any) -> None:
        records = self._records.setdefault(kind, {})
        undo = self.atomic.undo
        if undo is not None:
            undo.append((records, key, records.get(key, _ABSENT)))
        records[key] = value

    def put_new(self, kind: str, key: str, value: Any) -> bool:
        records = self._records.setdefault(kind, {})
        if key in records:
            return False
        undo = self.atomic.undo
        if undo is not None:
            undo.append((records, key, _ABSENT))
        records[key] = value
        return True

    def scan(self, kind: str) -> list[tuple[str, Any]]:
        return list(self._records.get(kind, {}).items())

    def next_number(self, name: str) -> int:
        numbers = self._numbers
        undo = self.atomic.undo
        if undo is not None:
            undo.append((numbers, name, numbers.get(name, _ABSENT)))
        number = numbers[name] = numbers.get(name, 0) + 1
        return number

    def close(self) -> None:
        """Nothing to let go of."""

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._items)} items, {len(self.log)} events)"

    # ------------------------------------------------------------------ undoing a block
    def _note(self, row: ItemRow) -> None:
        """Inside a block: save `row` as it is now, once per block, before the engine changes it."""
        block = self.atomic
        if id(row) not in block.noted and block.undo is not None:
            block.lines = self
            block.noted.add(id(row))
            block.undo.append((row, _ROW, tuple(getattr(row, name, _ABSENT) for name in ItemRow.__slots__)))

    def _journal(self, row: ItemRow, table: dict[str, ItemRow], *, new: bool = False) -> None:
        """Inside a block, before an item write: save everything it may change: the row (unless
        `new`), its case's line (its ends, the row at its back, whether the case is held), the
        counts, and the row's entry in `table` (all items, or the dead ones)."""
        block = self.atomic
        undo = block.undo
        assert undo is not None
        block.lines = self
        if not new:
            self._note(row)
        case_id = row.case_id
        tail = self._tails.get(case_id)
        if tail is not None:
            self._note(tail)
        for line in (self._heads, self._tails):
            undo.append((line, case_id, line.get(case_id, _ABSENT)))
        undo.append((self._held, case_id, case_id in self._held))
        undo.append((table, row.id, table.get(row.id, _ABSENT)))
        counts = self._counts
        undo.extend((counts, state, counts[state]) for state in _STATES)

    def _reoffer(self, restored: list[ItemRow]) -> None:
        """After a rollback: the heaps may have dropped offers and deadlines the block made
        old; offer each case it touched again, and each lease it gave back its deadline (an
        offer or a deadline twice is harmless: the stale one is dropped when it reaches the top)."""
        for row in restored:
            if row.state is _LEASED and row.expires_at is not None:
                heapq.heappush(self._expiry, _expiry_entry(row))
        for case_id in {row.case_id for row in restored}:
            head = self._heads.get(case_id)
            if head is not None and case_id not in self._held:
                heapq.heappush(self._available, (head.priority, head.seq, case_id))
        self.due_from = self._expiry[0][0] if self._expiry else _INF

    # ------------------------------------------------------------------ the lines
    def _extended(self, row: ItemRow) -> None:
        heapq.heappush(self._expiry, _expiry_entry(row))
        self.due_from = self._expiry[0][0]

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


def _restore(row: ItemRow, values: tuple[Any, ...]) -> None:
    """Put back a row's slots as `_note` saved them (a slot then unset is unset again)."""
    for name, value in zip(ItemRow.__slots__, values, strict=True):
        if value is not _ABSENT:
            setattr(row, name, value)
        elif hasattr(row, name):
            delattr(row, name)


def _expiry_entry(row: ItemRow) -> tuple[float, int, int, str]:
    """A leased row's place in the expiry heap: soonest first, then by line."""
    assert row.expires_at is not None, "only a leased row has an expiry"
    return (row.expires_at, row.seq, row.token, row.id)
