"""The memory store's own promise beyond the contract every store keeps: a burst costs its
items and nothing per case, so the labs' and the simulator's large runs stay small."""

from __future__ import annotations

import tracemalloc

import pytest

from shopops_lab.clock import FakeClock
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
        waiting = tracemalloc.get_traced_memory()[0]
        while (lease := q.acquire("W1")) is not None:
            q.ack(lease)
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
