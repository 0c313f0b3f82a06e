"""Lab 02: after the fix, bring the dead letters back and finish them, without a retry storm."""
from __future__ import annotations

import random

from shopops_lab.checks.base import Exercise, Wrong, call_answer, describe
from shopops_lab.clock import FakeClock
from shopops_lab.states import ItemState
from shopops_lab.widgets.quiz import Quiz
from shopops_lab.worker.queue import InMemoryQueue, Outcome


class _Runaway(BaseException):
    """Raised into the learner's loop once it has used up its budget of queue calls. A
    BaseException, so an `except Exception` around the loop cannot swallow it; the
    check then judges what the queue's own records say happened. (A bare `except:` inside
    an endless loop swallows even this: such a loop is stopped only by the kernel.)"""


class _Budgeted:
    """The learner's view of the queue: the real one, with a cap on the calls that do work
    (process_one, acquire, replay_dlq), so a loop that never stops is ended, not hung."""

    def __init__(self, queue: InMemoryQueue, budget: int) -> None:
        self._queue, self._budget = queue, budget
        self.calls: dict[str, int] = {}
        self.last: Outcome | None = None   # what process_one returned last

    def _spend(self, call: str) -> None:
        self.calls[call] = self.calls.get(call, 0) + 1
        if sum(self.calls.values()) > self._budget:
            raise _Runaway()

    def process_one(self, worker_id, handler, **kwargs):
        self._spend("process_one")
        self.last = self._queue.process_one(worker_id, handler, **kwargs)
        return self.last

    def acquire(self, worker_id, **kwargs):
        self._spend("acquire")
        return self._queue.acquire(worker_id, **kwargs)

    def replay_dlq(self, item_id, **kwargs):
        self._spend("replay_dlq")
        return self._queue.replay_dlq(item_id, **kwargs)

    def stopped(self) -> str:
        """Where the learner's loop stopped, in words: its calls and the last outcome."""
        runs, takes = self.calls.get("process_one", 0), self.calls.get("acquire", 0)
        if not runs and not takes:
            return "stopped without processing anything"
        parts = [f"{n} {name} call{'s' if n > 1 else ''}"
                 for name, n in (("process_one", runs), ("acquire", takes)) if n]
        said = ""
        if self.last is not None:
            said = f", which returned {self.last.value!r}" if runs == 1 else f", the last returning {self.last.value!r}"
        return f"stopped after {' and '.join(parts)}{said}"

    def __getattr__(self, name):
        return getattr(self._queue, name)


def _storm(queue: InMemoryQueue, seed: int) -> Wrong | None:
    """A retry storm by hand, read from the queue's log: an item replayed more than once."""
    replays: dict[str, int] = {}
    for event in queue.log.where("replayed"):
        replays[event.item_id] = replays.get(event.item_id, 0) + 1
    stormed = sorted((item_id for item_id, n in replays.items() if n > 1), key=lambda i: (-replays[i], i))
    if not stormed:
        return None
    item = queue.item(stormed[0])
    deaths = len(queue.log.where("dead_lettered", item_id=item.id))
    return Wrong(f"{item.case_id} ({item.id}) was replayed {replays[item.id]} times (seed {seed}) and died "
                 f"{deaths} times: it still fails after the fix, and replaying it over and over is a retry storm "
                 "by hand. Replay each dead item once, then leave whatever fails again in the DLQ for a human.")


def _call(replay_and_drain, queue: InMemoryQueue, handler, seed: int) -> _Budgeted:
    """Run the learner's function on a budgeted view; a runaway loop ends in a verdict."""
    view = _Budgeted(queue, budget=20 * len(queue))
    try:
        call_answer(replay_and_drain, view, handler)
    except _Runaway:
        storm = _storm(queue, seed)
        if storm is not None:
            raise storm from None
        raise Wrong(f"your function made {sum(view.calls.values())} queue calls for {len(queue)} items and was "
                    f"stopped by the check (seed {seed}; the last process_one returned "
                    f"{view.last.value if view.last is not None else 'nothing'!r}): the loop does not end. Stop "
                    "when process_one returns 'empty'.") from None
    storm = _storm(queue, seed)
    if storm is not None:
        raise storm
    return view


# How many orders died, by seed: from none to far more than any loop written with a number
# in it, so only a loop that runs until the DLQ (and then the queue) is empty finishes them.
DLQ_SIZES = {1: 1, 2: 7, 3: 0, 4: 40, 5: 130}
SEEDS = tuple(DLQ_SIZES)
BROKEN_SEED, BROKEN_SIZE = 9, 7


def poisoned_queue(seed: int, *, size: int | None = None, one_still_broken: bool = False):
    """A queue where `size` orders used the old schema and died (by default, the seed's
    number), some others failed once on a timeout and then went through, and the rest were
    fine; returns it, the dead cases and the fixed handler, with the list it records in."""
    rng = random.Random(seed)
    size = DLQ_SIZES.get(seed, 3) if size is None else size
    queue = InMemoryQueue(lease_seconds=30, max_attempts=3, clock=FakeClock())
    cases = [f"O-{2001 + n}" for n in range(size + rng.randint(3, 6))]
    old = set(rng.sample(cases, k=size))
    flaky = set(rng.sample(sorted(set(cases) - old), k=2))   # failed once, then done: not dead
    for case in cases:
        payload = {"order": {"id": case, "total": 10 + len(case)}} if case in old else {"order_id": case, "total": 10}
        queue.enqueue(case_id=case, tenant_id="store_northline", kind="refund_review", payload=payload)
    timed_out: set[str] = set()

    def old_handler(lease):
        if lease.case_id in flaky and lease.case_id not in timed_out:
            timed_out.add(lease.case_id)
            raise TimeoutError("the payments API did not answer")
        if "order_id" not in lease.payload:
            raise KeyError("order_id")

    while queue.process_one("W1", old_handler) != Outcome.EMPTY:
        pass
    handled: list[str] = []
    still_broken = {min(old)} if one_still_broken and old else set()

    def fixed_handler(lease):
        if lease.case_id in still_broken:
            raise ValueError("schema still unsupported")
        order_id = lease.payload.get("order_id") or lease.payload["order"]["id"]
        handled.append(order_id)

    return queue, sorted(old), fixed_handler, handled


def _some(cases: list[str], shown: int = 5) -> str:
    """'O-2003, O-2007' or 'O-2003, ..., O-2011 and 35 more': a long list stays one line."""
    if len(cases) <= shown:
        return ", ".join(cases)
    return f"{', '.join(cases[:shown])} and {len(cases) - shown} more"


def _dead_letters(n: int) -> str:
    return f"{n} dead letter{'' if n == 1 else 's'}"


def _drained(replay_and_drain, seed: int) -> None:
    """One seeded DLQ, replayed and drained by the learner's function, judged by the queue."""
    queue, dead, fixed, handled = poisoned_queue(seed)
    if sorted(item.case_id for item in queue.dlq_items()) != dead:
        raise AssertionError("scenario set-up failed")  # the kit's bug, not the learner's
    size = f"seed {seed}, {_dead_letters(len(dead))}"
    view = _call(replay_and_drain, queue, fixed, seed)
    left = [item.case_id for item in queue.dlq_items()]
    if left:
        still = (f"the one dead letter is still in the DLQ ({size}): {left[0]}" if len(dead) == 1 else
                 f"{len(left)} of the {len(dead)} dead letters are still in the DLQ ({size}): {_some(left)}")
        raise Wrong(f"after your function, {still}. Replay every dead item once the handler is fixed, however "
                    "many there are.")
    not_done = [item.case_id for item in queue.items() if item.state is not ItemState.DONE]
    if not_done:
        were = "1 item was" if len(not_done) == 1 else f"{len(not_done)} items were"
        raise Wrong(f"{were} replayed but not processed ({size}): {_some(not_done)}; your "
                    f"function {view.stopped()}. Drive the queue until it is empty.")
    if sorted(handled) != dead:
        twice = sorted({c for c in handled if handled.count(c) > 1})
        raise Wrong(f"the fixed handler ran {len(handled)} times for {len(set(handled))} orders, but {len(dead)} "
                    f"needed it ({size})" + (f"; {_some(twice)} more than once" if twice else "") + ".")
    replays = {item.case_id: item.replays for item in queue.items() if item.replays}
    if sorted(replays) != dead or any(n != 1 for n in replays.values()):
        odd = sorted(set(replays) ^ set(dead)) or sorted(c for c, n in replays.items() if n != 1)
        raise Wrong(f"each dead item should be replayed exactly once ({size}); not so for {_some(odd)}.")


def _run(replay_and_drain) -> str:
    for seed in SEEDS:
        _drained(replay_and_drain, seed)
    queue, dead, fixed, handled = poisoned_queue(BROKEN_SEED, size=BROKEN_SIZE, one_still_broken=True)
    view = _call(replay_and_drain, queue, fixed, BROKEN_SEED)
    broken = queue.item(next(i.id for i in queue.items() if i.case_id == dead[0]))
    unfinished = [i.case_id for i in queue.items() if i.state is not ItemState.DONE and i.case_id != broken.case_id]
    if unfinished:
        raise Wrong(f"with {broken.case_id} still failing after the fix (seed {BROKEN_SEED}), your function "
                    f"{view.stopped()}, and left {_some(unfinished)} unfinished. One bad item must not hold up "
                    "the rest: keep going until process_one returns 'empty'; the failing item goes back to the "
                    "DLQ by itself.")
    if broken.state is not ItemState.DEAD or broken.replays != 1:
        raise Wrong(f"{broken.case_id} still fails after the fix (seed {BROKEN_SEED}); it should be replayed once and "
                    f"end back in the DLQ for a human, but it is {broken.state.value} after {broken.replays} replays.")
    sizes = sorted(DLQ_SIZES.values())
    return (f"in {len(SEEDS)} seeded runs, with DLQs of {', '.join(map(str, sizes[:-1]))} and {sizes[-1]} items, "
            "every dead letter was replayed once and finished, and with one item still broken your loop stopped "
            "instead of storming.")


exercise = Exercise(
    id="02.1", title="replay the DLQ after the fix", answer="replay_and_drain", run=_run,
    hints=("Two phases: first bring every dead item back, then let a worker work until nothing is left.",
           "queue.dlq_items() lists the dead items; queue.replay_dlq(item_id) sends one back; "
           "queue.process_one(worker_id, handler) returns 'empty' when nothing is left.",
           "Shape: one loop over every dead item, sending each back once; then a second loop that lets one "
           "worker process until the queue says it is empty. No number of turns written in: the DLQ may hold "
           "none, or hundreds."),
)


# ---------------------------------------------------------------------------- knowledge check

_FIXED = ((["ok"], 3), (["fail", "ok"], 3), (["crash", "crash"], 3), (["fail", "fail", "fail"], 3),
          (["crash", "fail", "crash"], 3), (["fail", "crash", "ok"], 3), (["crash", "ok"], 2),
          (["crash", "crash", "ok"], 2), (["fail"] * 6, 5), (["crash"] * 5 + ["ok"], 5), ([], 3),
          (["fail"], 1), (["crash", "crash"], 4))


def _replay_deliveries(deliveries, max_attempts: int) -> str:
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
        queue.expire_leases()
    return queue.item(item_id).state.value


def _misread(deliveries, max_attempts: int, *, crashes_count: bool = True, limit_extra: int = 0,
             fail_is_final: bool = False) -> str:
    """A plausible misreading of the rules, played through like the real thing."""
    used = 0
    for outcome in deliveries:
        if outcome == "ok":
            return "done"
        if outcome == "fail" and fail_is_final:
            return "dead"
        if outcome == "fail" or crashes_count:
            used += 1
        if used >= max_attempts + limit_extra:
            return "dead"
    return "ready"


# (what the answer did, as the message says it, and the misreading that does exactly that)
MISREADINGS = (
    ("as if a crash did not use up an attempt. The queue counts deliveries, and it cannot tell a crashed "
     "worker from a slow one", dict(crashes_count=False)),
    ("as if max_attempts allowed one delivery more than it does", dict(limit_extra=1)),
    ("as if max_attempts allowed one delivery fewer than it does", dict(limit_extra=-1)),
    ("as if one failure sent the item straight to the DLQ. A failed delivery uses an attempt; the item "
     "dies only when the attempts run out", dict(fail_is_final=True)),
)


def _cases():
    yield from _FIXED
    for seed in (1, 2, 3, 4):
        rng = random.Random(seed)
        for _ in range(6):
            yield [rng.choice(("fail", "crash", "crash", "ok")) for _ in range(rng.randint(1, 7))], rng.randint(1, 5)


def _knowledge(where_does_it_end) -> str:
    answers = []
    for deliveries, limit in _cases():
        got = call_answer(where_does_it_end, list(deliveries), limit)
        if type(got) is not str or got not in ("ready", "done", "dead"):   # a str, not a look-alike
            raise Wrong(f"for {deliveries} the function returned {describe(got)}; return the item's state: 'ready', "
                        "'done' or 'dead'.")
        answers.append((deliveries, limit, got))
    wrong = [(d, limit, got) for d, limit, got in answers if got != _replay_deliveries(d, limit)]
    if not wrong:
        return "your predictions match a real queue on every sequence, crashes included."
    deliveries, limit, got = wrong[0]
    said = (f"for deliveries {deliveries} with max_attempts={limit} your function says {got!r} "
            f"({len(wrong)} of {len(answers)} sequences end elsewhere on a real queue)")
    for what, misreading in MISREADINGS:
        if all(got == _misread(d, limit, **misreading) for d, limit, got in answers):
            raise Wrong(f"{said}: on every sequence it answers {what}.")
    raise Wrong(f"{said}. Play that list through by hand, one delivery per entry, and compare.")


knowledge = Exercise(
    id="02.2", title="where does the item end?", answer="where_does_it_end", run=_knowledge,
    hints=("Each entry of the list is one delivery, and every delivery starts with an acquire.",
           "Attempts are counted on acquire, so 'crash' uses one just like 'fail'. Once the item is done or "
           "dead, the queue delivers it no more, so later entries do not matter.",
           "Shape: count deliveries as you walk the list; 'ok' means done; reaching max_attempts without an "
           "'ok' means dead; running out of entries first means ready."),
)


# ------------------------------------------------------------------ quizzes
# Kept here, not in the notebook, so the cell that shows a quiz does not show its answer.

AUTO_REPLAY_QUIZ = Quiz(
    "To save the on-call engineer's time, someone proposes a job that replays the whole DLQ every "
    "5 minutes. What happens to a payload that no handler can read yet?",
    ["The retries fix it eventually.",
     "It fails max_attempts times every 5 minutes, for ever, and nobody is told.",
     "It is handled once and acked.",
     "The queue refuses to replay an item twice."],
    answer_index=1,
    explanations=[
        "Retries help with bad luck, not bad data: the same payload fails the same way every time.",
        "Automatic replay turns the DLQ back into a retry storm, just slower, and hides the problem that needs "
        "a person.",
        "Nothing about the payload or the handler changed, so nothing about the outcome changes.",
        "The queue replays an item as often as it is told to (watch the replays count); the judgement has to be human.",
    ],
)
