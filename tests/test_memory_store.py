"""The memory store's own promise beyond the contract every store keeps: a burst costs its
items and nothing per case, so the labs' and the simulator's large runs stay small."""

from __future__ import annotations

import copy
import gc
import tracemalloc
import weakref

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from shopops_lab.clock import FakeClock
from shopops_lab.events import EventKind
from shopops_lab.states import ItemState
from shopops_lab.store.memory import MemoryStore
from shopops_lab.worker.queue import InMemoryQueue


def test_a_case_costs_no_memory_beyond_its_items_waiting_or_drained():
    """A burst of one-item cases keeps what one long case keeps, while it waits and once
    drained: the items and their history, and nothing per case but its offer in the heap
    while it waits (a line per case once cost ~700 bytes each, and stayed after the case
    was done)."""

    def retained(cases: int) -> tuple[int, int]:
        q = InMemoryQueue(clock=FakeClock())
        names = [f"O-{n % cases:05d}" for n in range(2_000)]
        tracemalloc.start()
        for name in names:
            q.enqueue(case_id=name, payload={"n": 1})
        gc.collect()  # what is kept, not what the collector has yet to reclaim (its timing varies)
        waiting = tracemalloc.get_traced_memory()[0]
        while (lease := q.acquire("W1")) is not None:
            q.ack(lease)
        gc.collect()
        drained = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert q.depth == 0 and len(q) == 2_000
        return waiting, drained

    one_case, many_cases = retained(1), retained(2_000)
    # A waiting case's offer in the heap of servable cases (a 3-tuple and a list slot) is all it adds.
    assert many_cases[0] - one_case[0] < 2_000 * 150 and many_cases[1] < one_case[1] * 1.1, (one_case, many_cases)


def test_any_case_can_be_leased_and_the_heap_top_is_never_assumed():
    """The servable cases sit in a heap; leasing one that is not on top (as the store contract
    allows) leaves its offer there, and next_ready drops it instead of serving it again. A row
    behind the first of its case's line is refused before anything changes."""
    q = InMemoryQueue(clock=FakeClock())
    a, b, b2 = q.enqueue(case_id="A"), q.enqueue(case_id="B"), q.enqueue(case_id="B")
    store: MemoryStore = q.store  # type: ignore[assignment]
    second, behind = store.get_item(b), store.get_item(b2)
    assert second is not None and behind is not None and store.next_ready(None).id == a
    behind.state = ItemState.LEASED
    with pytest.raises(RuntimeError, match="not first in its case's line"):
        store.write_item(behind, ItemState.READY)
    behind.state = ItemState.READY
    assert store.next_ready(None).id == a and store.item_counts()[ItemState.READY] == 3
    second.state, second.token, second.attempts, second.expires_at = ItemState.LEASED, 1, 1, 30.0
    store.write_item(second, ItemState.READY)  # case B leased out of the heap's order
    assert store.next_ready(None).id == a
    lease = q.acquire("W1")
    assert lease is not None and lease.item_id == a and q.acquire("W2") is None  # B is held: b2 waits
    second.state = ItemState.DONE  # B's lease ends, as an ack ends it
    store.write_item(second, ItemState.LEASED)
    assert store.next_ready(None).id == b2


def test_a_deadline_left_by_a_rolled_back_block_is_dropped_when_it_comes_due():
    """A block that added and leased an item, then rolled back, leaves the lease's deadline in
    the expiry heap (entries are never removed early): when it comes due it names no item, and
    is dropped like any old entry (it once raised KeyError from every later call)."""
    clock = FakeClock()
    q = InMemoryQueue(clock=clock, lease_seconds=30)
    with pytest.raises(RuntimeError):
        with q.store.atomic:
            q.enqueue(case_id="O-1")
            q.acquire("W1")
            raise RuntimeError("undo the block")
    clock.advance(31)
    assert q.expire_leases() == [] and len(q) == 0
    item = q.enqueue(case_id="O-1")  # the same id again: the rolled-back one never was
    lease = q.acquire("W1")
    assert lease is not None and lease.item_id == item
    clock.advance(31)
    assert q.expire_leases() == [item]


class _Driver:
    """A queue, its clock, and the leases it granted: `play` applies ops, `copied` forks all three."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.queue = InMemoryQueue(clock=self.clock, lease_seconds=30, max_attempts=2)
        self.leases: list = []

    def copied(self) -> _Driver:
        twin = _Driver.__new__(_Driver)
        twin.clock, twin.queue = copy.deepcopy((self.clock, self.queue))
        twin.leases = list(self.leases)  # a lease names its queue by a QueueId, which copies as itself
        return twin

    def play(self, ops: list[tuple[str, int]]) -> list[object]:
        seen: list[object] = []
        for op, n in ops:
            if op == "enqueue":
                seen.append(self.queue.enqueue(case_id=f"O-{n % 3}", payload={"n": n, "nested": {"k": [n]}}))
            elif op == "acquire":
                lease = self.queue.acquire(f"W{n % 2}")
                self.leases += [] if lease is None else [lease]
                seen.append(None if lease is None else (lease.item_id, lease.token))
            elif op in ("ack", "nack") and self.leases:
                lease = self.leases.pop(n % len(self.leases))
                seen.append(self.settle(op, lease))
            elif op == "expire":
                self.clock.advance(31)
                seen.append(self.queue.expire_leases())
            elif op == "replay":
                dead = self.queue.dlq_items()
                if dead:
                    self.queue.replay_dlq(dead[0].id)
                seen.append([item.id for item in dead])
        return seen

    def settle(self, op: str, lease) -> str:
        try:
            (self.queue.ack if op == "ack" else self.queue.nack)(lease)
        except Exception as exc:  # noqa: BLE001 - a refused settle (its lease ran out) is an outcome too
            return type(exc).__name__
        return op

    def state(self) -> tuple:
        queue = self.queue
        items = tuple((i.id, i.state, i.attempts, i.token, i.replays, dict(i.payload)) for i in queue.items())
        return items, tuple((e.kind, e.item_id, e.time, e.token) for e in queue.log.events), queue.depth


OPS = st.lists(st.tuples(st.sampled_from(["enqueue", "acquire", "ack", "nack", "expire", "replay"]), st.integers(0, 9)))


@given(before=OPS, after=OPS)
@settings(max_examples=60, deadline=None)
def test_a_deep_copy_of_a_queue_goes_on_as_the_queue_itself_would(before, after) -> None:
    """What the schedule explorer relies on when it forks a world: a copy taken at any point
    (rows, heaps and log copied in the store's own fast way) does what the original does
    from there, step for step, and neither sees the other's later steps."""
    original = _Driver()
    original.play(before)
    then = original.state()
    twin = original.copied()
    assert twin.state() == then
    assert twin.play(after) == original.play(after)
    assert twin.state() == original.state()
    replayed = _Driver()
    replayed.play(before)
    assert replayed.state() == then
    twin.play([("enqueue", 7), ("acquire", 1), ("expire", 0)])  # the copy's own steps...
    replayed.play(after)
    assert original.state() == replayed.state()  # ...never reach the original


def test_a_copy_of_a_store_and_the_store_go_on_apart() -> None:
    """The explorer's worlds hold copies of a store: a document written, replaced or added in
    one is not seen in the other, whichever is written (the copy shares the documents, which
    a write replaces, never changes)."""
    store = MemoryStore()
    store.put("fence", "job-1", {"token": 1, "holders": {"1": "W1"}})
    store.put("history", "job-1", [{"step": "a"}])
    twin = copy.deepcopy(store)
    twin.put("fence", "job-1", {"token": 2, "holders": {"1": "W1", "2": "W2"}})
    store.put("history", "job-1", [*store.get("history", "job-1"), {"step": "b"}])
    assert store.put_new("fence", "job-2", {"token": 1}) and twin.put_new("fence", "job-2", {"token": 7})
    assert store.get("fence", "job-1") == {"token": 1, "holders": {"1": "W1"}}
    assert twin.get("fence", "job-1")["token"] == 2
    assert twin.get("history", "job-1") == [{"step": "a"}] and len(store.get("history", "job-1")) == 2
    assert (store.get("fence", "job-2"), twin.get("fence", "job-2")) == ({"token": 1}, {"token": 7})
    store.log.append(EventKind.ENQUEUED, 1.0, item_id="item-0001")
    with pytest.raises(RuntimeError):  # a transaction of the copy rolled back leaves both as they were
        with twin.atomic:
            twin.put("fence", "job-1", {"token": 9})
            twin.put("new", "k", 1)
            twin.log.append(EventKind.ENQUEUED, 2.0, item_id="item-0002")
            raise RuntimeError
    assert twin.get("fence", "job-1")["token"] == 2 and twin.get("new", "k") is None
    assert store.get("fence", "job-1")["token"] == 1
    assert (len(store.log), len(twin.log)) == (1, 0)  # the copy's transaction undid the copy's log alone


def test_a_dropped_queue_is_freed_at_once_not_by_the_cyclic_collector() -> None:
    """A memory queue holds no reference to itself: dropped, it and its rows and events go
    at once, so a run that makes many queues (the explorer's worlds, a lab's reruns) does not
    leave them for the collector's full passes to walk."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        q = InMemoryQueue(clock=FakeClock())
        for case in ("O-1", "O-2"):
            q.enqueue(case_id=case, payload={"n": 1})
        q.ack(q.acquire("W1"))
        twin = copy.deepcopy(q)  # a world the explorer goes on from
        twin.ack(twin.acquire("W1"))
        gone = [weakref.ref(q), weakref.ref(q.store), weakref.ref(twin)]
        del q, twin
        assert [ref() for ref in gone] == [None, None, None]
    finally:
        if was_enabled:
            gc.enable()


class _Ticking(_Driver):
    """`_Driver` with more ways for a deadline to move: time passing a little, heartbeats, and
    a block of calls rolled back. `asks_always` takes the long way: the queue asks the store
    for due leases on every call, as it does of a store that keeps no `due_from`."""

    def __init__(self, *, asks_always: bool = False) -> None:
        super().__init__()
        if asks_always:
            self.queue._due = None

    def play(self, ops: list[tuple[str, int]]) -> list[object]:
        seen: list[object] = []
        for op, n in ops:
            if op == "tick":
                self.clock.advance(n * 4)  # 0 to 36 s: some leases of 30 s run out, some not
            elif op == "heartbeat" and self.leases:
                seen.append(self.queue.heartbeat(self.leases[n % len(self.leases)]))
            elif op == "rollback":
                granted = list(self.leases)
                try:
                    with self.queue.store.atomic:
                        self.queue.enqueue(case_id=f"O-{n % 3}")
                        # every deadline popped and its lease ended, then all of it put back
                        seen.append(super().play([("acquire", n), ("expire", n), ("ack", n)]))
                        raise RuntimeError("undo the block")
                except RuntimeError:
                    self.leases = granted  # a lease granted in the block was never granted
            else:
                seen.extend(super().play([(op, n)]))
            self.check_store()
        return seen

    def check_store(self) -> None:
        """`due_from` is the expiry heap's first deadline (so never later than a live lease's),
        and the counts are the rows' states, after every step, a rolled-back block too."""
        store: MemoryStore = self.queue.store  # type: ignore[assignment]
        assert store.due_from == min((entry[0] for entry in store._expiry), default=float("inf"))
        assert all(store.due_from <= row.expires_at for row in store.item_rows(ItemState.LEASED))
        rows = store.item_rows()
        assert store.item_counts() == {state: sum(row.state is state for row in rows) for state in ItemState}


TICKING = st.lists(
    st.tuples(
        st.sampled_from(["enqueue", "acquire", "ack", "nack", "expire", "replay", "tick", "heartbeat", "rollback"]),
        st.integers(0, 9),
    ),
    max_size=60,
)


@given(ops=TICKING)
@example(ops=[("enqueue", 0), ("acquire", 0), ("rollback", 0)])  # a lease expired in a block, then given back
@example(ops=[("enqueue", 0), ("acquire", 0), ("tick", 5), ("heartbeat", 0), ("tick", 5), ("acquire", 0)])
@settings(max_examples=100, deadline=None)
def test_the_queue_skips_asking_for_due_leases_only_while_none_can_be_due(ops) -> None:
    """The memory store keeps `due_from`, its expiry heap's first deadline, and the queue's
    acquire and ack ask it for due leases only from then on: every answer, row and event is
    what asking on every call gives, whatever the clock, heartbeats and rollbacks did."""
    quick, always = _Ticking(), _Ticking(asks_always=True)
    assert quick.play(ops) == always.play(ops)
    assert quick.state() == always.state()


def test_a_store_copied_inside_an_open_block_rolls_its_own_tables_back():
    """A queue copied while a block is open carries the block into the copy: rolling the copy
    back restores the copy's counts, held cases and records, not tables nobody holds (the
    copy once kept the block's lease in its counts and held cases, and its record)."""
    q = InMemoryQueue(clock=FakeClock())
    item = q.enqueue(case_id="O-1")
    with pytest.raises(RuntimeError):
        with q.store.atomic:
            q.acquire("W1")
            q.store.put("notes", "O-1", {"seen": 1})
            twin = copy.deepcopy(q)
            raise RuntimeError("undo the block")
    twin.store.atomic.__exit__(RuntimeError, RuntimeError("undo the copy's block"), None)
    assert (
        twin.store.item_counts()
        == q.store.item_counts()
        == {
            ItemState.READY: 1,
            ItemState.LEASED: 0,
            ItemState.DONE: 0,
            ItemState.DEAD: 0,
        }
    )
    assert twin.store.get("notes", "O-1") is None
    lease = twin.acquire("W2")
    assert lease is not None and lease.item_id == item
