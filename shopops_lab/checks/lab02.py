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
        self.last: Outcome | None = None
        self.replays: dict[str, int] = {}

    def process_one(self, worker_id, handler, **kwargs):
        self.calls += 1
        if self.calls > self._budget:
            raise Wrong(f"process_one was called {self.calls} times for {len(self._queue)} items: the loop does "
                        "not stop. Stop when it returns 'empty'.")
        self.last = self._queue.process_one(worker_id, handler, **kwargs)
        return self.last

    def replay_dlq(self, item_id, **kwargs):
        self.replays[item_id] = self.replays.get(item_id, 0) + 1
        if self.replays[item_id] > 1:
            item = self._queue.item(item_id)  # known: its first replay succeeded
            raise Wrong(f"{item.case_id} ({item_id}) was replayed {self.replays[item_id]} times: it failed again "
                        "after the fix, and replaying it over and over is a retry storm by hand. Replay each dead "
                        "item once, then leave whatever fails again in the DLQ for a human to look at.")
        return self._queue.replay_dlq(item_id, **kwargs)

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
    broken = queue.item(next(i.id for i in queue.items() if i.case_id == dead[0]))
    unfinished = [i.case_id for i in queue.items() if i.state is not ItemState.DONE and i.case_id != broken.case_id]
    if unfinished:
        stop = f" after process_one returned {view.last.value!r}" if view.last is not None else ""
        raise Wrong(f"with {broken.case_id} still failing after the fix (seed 9), your function stopped{stop} and left "
                    f"{', '.join(unfinished)} unfinished. One bad item must not hold up the rest: keep going until "
                    "process_one returns 'empty'; the failing item goes back to the DLQ by itself.")
    if broken.state is not ItemState.DEAD or broken.replays != 1:
        raise Wrong(f"{broken.case_id} still fails after the fix (seed 9); it should be replayed once and end back in "
                    f"the DLQ for a human, but it is {broken.state.value} after {broken.replays} replays.")
    return (f"in {len(SEEDS)} seeded runs every dead letter was replayed once and finished, and with one item "
            "still broken your loop stopped instead of storming.")


exercise = Exercise(
    id="02.1", title="replay the DLQ after the fix", run=_run,
    hints=("Two phases: first bring every dead item back, then let a worker work until nothing is left.",
           "queue.dlq_items() lists the dead items; queue.replay_dlq(item.id) sends one back; "
           "queue.process_one(worker_id, handler) returns 'empty' when nothing is left.",
           "Shape: for item in queue.dlq_items(): replay it; then loop process_one(...) until it returns 'empty'."),
)


# ---------------------------------------------------------------------------- knowledge check

_FIXED = ((["ok"], 3), (["fail", "ok"], 3), (["crash", "crash"], 3), (["fail", "fail", "fail"], 3),
          (["crash", "fail", "crash"], 3), (["fail", "crash", "ok"], 3), (["crash", "ok"], 2),
          (["crash", "crash", "ok"], 2), (["fail"] * 6, 5), (["crash"] * 5 + ["ok"], 5), ([], 3),
          (["fail"], 1), (["crash", "crash"], 4))


def replay_deliveries(deliveries, max_attempts: int) -> str:
    """Where one item ends on a real queue when its deliveries go as listed ("ok": handled
    and acked, "fail": the handler raised, "crash": the worker died and the lease ran out)."""
    clock = FakeClock()
    queue = InMemoryQueue(lease_seconds=30, max_attempts=max_attempts, clock=clock)
    item_id = queue.enqueue(case_id="O-1003", tenant_id="store_northline", kind="refund_review")
    for outcome in deliveries:
        lease = queue.acquire("W1")
        if lease is None:
            break  # done or dead: the queue delivers it no more
        if outcome == "ok":
            queue.ack(lease)
        elif outcome == "fail":
            queue.nack(lease, "KeyError: 'order_id'")
        else:
            clock.advance(31)
        queue._expire_leases()
    return queue.item(item_id).state.value


def _misread(deliveries, max_attempts: int, *, crashes_count: bool, limit_extra: int) -> str:
    """The two usual misreadings: crashes that use no attempt, and one attempt too many."""
    used = 0
    for outcome in deliveries:
        if outcome == "ok":
            return "done"
        if outcome == "fail" or crashes_count:
            used += 1
        if used >= max_attempts + limit_extra:
            return "dead"
    return "ready"


def _cases():
    yield from _FIXED
    for seed in SEEDS:
        rng = random.Random(seed)
        for _ in range(6):
            yield [rng.choice(("fail", "crash", "crash", "ok")) for _ in range(rng.randint(1, 7))], rng.randint(1, 5)


def _knowledge(where_does_it_end) -> str:
    for deliveries, limit in _cases():
        got = call_answer(where_does_it_end, list(deliveries), limit)
        if got not in ("ready", "done", "dead"):
            raise Wrong(f"for {deliveries} the function returned {got!r}; return the item's state: 'ready', 'done' "
                        "or 'dead'.")
        truth = replay_deliveries(deliveries, limit)
        if got == truth:
            continue
        said = f"for deliveries {deliveries} with max_attempts={limit} your function says {got!r}"
        if got == _misread(deliveries, limit, crashes_count=False, limit_extra=0):
            raise Wrong(f"{said}, as if a crash did not use up an attempt. The queue counts deliveries, and it "
                        "cannot tell a crashed worker from a slow one.")
        if got == _misread(deliveries, limit, crashes_count=True, limit_extra=1):
            raise Wrong(f"{said}, which allows one delivery more than max_attempts.")
        raise Wrong(f"{said}, but a real queue ends elsewhere. Play the list through by hand: one delivery per entry.")
    return "your predictions match a real queue on every sequence, crashes included."


knowledge = Exercise(
    id="02.2", title="where does the item end?", run=_knowledge,
    hints=("Each entry of the list is one delivery, and every delivery starts with an acquire.",
           "Attempts are counted on acquire, so 'crash' uses one just like 'fail'. Once the item is done or "
           "dead, the queue delivers it no more, so later entries do not matter.",
           "Shape: count deliveries as you walk the list; 'ok' means done; reaching max_attempts without an "
           "'ok' means dead; running out of entries first means ready."),
)
