"""Lab 02: after the fix, bring the dead letters back and finish them, without a retry storm."""
from __future__ import annotations

import random

from shopops_lab.checks.base import Exercise, Wrong, call_answer
from shopops_lab.clock import FakeClock
from shopops_lab.states import ItemState
from shopops_lab.worker.queue import InMemoryQueue, Outcome

SEEDS = (1, 2, 3, 4)


class _Budgeted:
    """The learner's view of the queue: the real one, with a cap on process_one calls so a
    loop that never stops is reported instead of hanging the notebook."""

    def __init__(self, queue: InMemoryQueue, budget: int) -> None:
        self._queue, self._budget, self.calls = queue, budget, 0

    def process_one(self, worker_id, handler, **kwargs):
        self.calls += 1
        if self.calls > self._budget:
            raise Wrong(f"process_one was called {self.calls} times for {len(self._queue)} items: the loop does "
                        "not stop. Stop when it returns 'empty'.")
        return self._queue.process_one(worker_id, handler, **kwargs)

    def __getattr__(self, name):
        return getattr(self._queue, name)


def poisoned_queue(seed: int, *, one_still_broken: bool = False):
    """A queue where some orders used the old schema and died; returns it and the fixed handler."""
    rng = random.Random(seed)
    queue = InMemoryQueue(lease_seconds=30, max_attempts=3, clock=FakeClock())
    cases = [f"O-{2001 + n}" for n in range(rng.randint(4, 7))]
    old = set(rng.sample(cases, k=rng.randint(1, 3)))
    for case in cases:
        payload = {"order": {"id": case, "total": 10 + len(case)}} if case in old else {"order_id": case, "total": 10}
        queue.enqueue(case_id=case, tenant_id="store_northline", kind="refund_review", payload=payload)

    def old_handler(lease):
        if "order_id" not in lease.payload:
            raise KeyError("order_id")

    while queue.process_one("W1", old_handler) != Outcome.EMPTY:
        pass
    handled: list[str] = []
    still_broken = {min(old)} if one_still_broken else set()

    def fixed_handler(lease):
        if lease.case_id in still_broken:
            raise ValueError("schema still unsupported")
        order_id = lease.payload.get("order_id") or lease.payload["order"]["id"]
        handled.append(order_id)

    return queue, sorted(old), fixed_handler, handled


def _run(replay_and_drain) -> str:
    for seed in SEEDS:
        queue, dead, fixed, handled = poisoned_queue(seed)
        if sorted(item.case_id for item in queue.dlq_items()) != dead:
            raise AssertionError("scenario set-up failed")  # the kit's bug, not the learner's
        view = _Budgeted(queue, budget=20 * len(queue))
        call_answer(replay_and_drain, view, fixed)
        left = [item.case_id for item in queue.dlq_items()]
        if left:
            raise Wrong(f"after your function, {', '.join(left)} are still in the DLQ (seed {seed}): replay every "
                        "dead item once the handler is fixed.")
        not_done = [item.case_id for item in queue.items() if item.state is not ItemState.DONE]
        if not_done:
            raise Wrong(f"{', '.join(not_done)} were replayed but not processed (seed {seed}): drive the queue "
                        "until it is empty.")
        if sorted(handled) != dead:
            twice = sorted({c for c in handled if handled.count(c) > 1})
            raise Wrong(f"the fixed handler ran for {sorted(handled)} but only {dead} needed it (seed {seed})"
                        + (f"; {twice} more than once" if twice else "") + ".")
        replays = {item.case_id: item.replays for item in queue.items() if item.replays}
        if sorted(replays) != dead or any(n != 1 for n in replays.values()):
            raise Wrong(f"each dead item should be replayed exactly once; replays were {replays} (seed {seed}).")
    queue, dead, fixed, handled = poisoned_queue(9, one_still_broken=True)
    view = _Budgeted(queue, budget=20 * len(queue))
    call_answer(replay_and_drain, view, fixed)
    return (f"in {len(SEEDS)} seeded runs every dead letter was replayed once and finished, and with one item "
            "still broken your loop stopped instead of storming.")


exercise = Exercise(
    id="02.1", title="replay the DLQ after the fix", run=_run,
    hints=("Two phases: first bring every dead item back, then let a worker work until nothing is left.",
           "queue.dlq_items() lists the dead items; queue.replay_dlq(item.id) sends one back; "
           "queue.process_one(worker_id, handler) returns 'empty' when nothing is left.",
           "Shape: for item in queue.dlq_items(): replay it; then loop process_one(...) until it returns 'empty'."),
)
