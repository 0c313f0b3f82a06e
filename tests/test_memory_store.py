"""The memory store's own promise beyond the contract every store keeps: a burst costs its
items and nothing per case, so the labs' and the simulator's large runs stay small."""
from __future__ import annotations

import tracemalloc

from shopops_lab.clock import FakeClock
from shopops_lab.worker.queue import InMemoryQueue


def test_a_case_costs_no_memory_beyond_its_items_waiting_or_drained():
    """A burst of one-item cases keeps what one long case keeps, while it waits and once
    drained: the items and their history, and nothing per case (a line per case once cost
    ~700 bytes each, and stayed after the case was done)."""

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
    assert many_cases[0] < one_case[0] * 1.1 and many_cases[1] < one_case[1] * 1.1, (one_case, many_cases)
