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


def test_leasing_takes_next_readys_item_and_refuses_any_other():
    """`write_item` of a ready row pops the top of the servable-cases heap: the row must be
    the one `next_ready` answered, or the wrong case would leave the heap. Another ready row
    is refused before anything changes."""
    q = InMemoryQueue(clock=FakeClock())
    first, second = q.enqueue(case_id="A"), q.enqueue(case_id="B")
    store: MemoryStore = q.store  # type: ignore[assignment]
    row = store.get_item(second)
    assert row is not None and store.next_ready(None).id == first
    row.state = ItemState.LEASED
    with pytest.raises(RuntimeError, match="next_ready did not answer"):
        store.write_item(row, ItemState.READY)
    row.state = ItemState.READY
    assert store.next_ready(None).id == first and store.item_counts()[ItemState.READY] == 2
    leases = [q.acquire("W1"), q.acquire("W2")]
    assert [lease.item_id for lease in leases] == [first, second] and q.acquire("W3") is None
