"""Lab 02: after the fix, bring the dead letters back and finish them, without a retry storm.

The replay check explores: every DLQ of 0 to 3 items in every order of items the fix
repairs and items it does not, with the replay job's process dying before or after any
queue call it makes (then the job runs again, before or after a lease it held runs out),
and DLQs of every size from 4 to 12 and of 40 and 130 items. At the end of every schedule
each repaired item must be done, each still-broken one back in the DLQ after a replay,
and no run of the function may replay an item twice (a retry storm by hand). The
knowledge check compares the learner's prediction with a real queue on every delivery
list of up to 6 deliveries, for every max_attempts from 1 to 5.
"""

from __future__ import annotations

import copy
import functools
import itertools
from collections.abc import Callable
from typing import Any, NamedTuple

from shopops_lab.checks import answers
from shopops_lab.checks.base import Exercise, Wrong, _where, call_each, describe, error_text, named
from shopops_lab.clock import FakeClock
from shopops_lab.explore import Bound, Move, Replayed, Run, Scenario, copied, explore, refuse
from shopops_lab.explore import replay as replay_schedule
from shopops_lab.states import ItemState
from shopops_lab.worker.queue import InMemoryQueue, Lease, Outcome


def _some(cases: list[str], shown: int = 5) -> str:
    """'O-2003, O-2007' or 'O-2003, ..., O-2011 and 35 more': a long list stays one line."""
    if len(cases) <= shown:
        return ", ".join(cases)
    return f"{', '.join(cases[:shown])} and {len(cases) - shown} more"


def _dead_letters(n: int) -> str:
    return f"{n} dead letter{'' if n == 1 else 's'}"


class _Stop(BaseException):
    """Raised into the learner's loop once the check has seen enough (a retry storm, or a
    runaway loop). A BaseException, so an `except Exception` around the loop cannot
    swallow it; every later queue call raises it again. (A bare `except:` inside an endless
    loop swallows even this: such a loop is stopped only by the kernel.)"""


# The scope searched: every DLQ of up to SMALL items in every order of items the fix repairs
# ("fixed") and items it does not ("broken"), with the replay job's process dying before or after
# any queue call; and DLQs of every size past that up to 12, and of 40 and 130 items (sizes no loop
# with a number written in survives), each run once without a crash.
SMALL = 3
SIZES = (*range(SMALL + 1, 13), 40, 130)
SHAPES = (
    *(shape for n in range(SMALL + 1) for shape in itertools.product(("fixed", "broken"), repeat=n)),
    *(("fixed",) * n for n in SIZES),
)
BOUND = Bound(
    words=f"every DLQ of 0 to {SMALL} items in every order of fixed and still-broken ones, the replay "
    "job's process dying before or after any queue call (then run again, a lease it held running out "
    f"first or not), and DLQs of every size from {SMALL + 1} to 12 and of 40 and 130 items",
    budget={"crash": 1, "expiry": 1},
)
_POINTS = ("replay_dlq", "process_one", "acquire", "ack", "nack")


def _shape_name(shape: tuple[str, ...]) -> str:
    if not shape:
        return "DLQ: empty"
    return f"DLQ: {len(shape)} fixed" if len(shape) > SMALL else f"DLQ: {', '.join(shape)}"


class Poisoned(NamedTuple):
    """What `poisoned_queue` sets up, in this order."""

    queue: InMemoryQueue
    dead: list[str]  # the dead items' cases, in DLQ order
    broken: set[str]  # the cases the fix does not repair
    handler: Callable[[Lease], None]  # the fixed handler
    handled: dict[str, int]  # case -> runs of the fixed handler


def poisoned_queue(shape: tuple[str, ...], clock: FakeClock | None = None) -> Poisoned:
    """A queue (on `clock`, else a new FakeClock) on which the items of `shape` used the old
    schema and died (one more item failed once on a timeout and then went through: not dead).
    Returns it, the dead items' cases in DLQ order, the cases the fix does not repair, and
    the fixed handler with the dict (case -> runs) it counts in."""
    queue = InMemoryQueue(lease_seconds=30, max_attempts=3, clock=FakeClock() if clock is None else clock)
    flaky = "O-2001"
    cases = [f"O-{2002 + n}" for n in range(len(shape))]
    queue.enqueue(
        case_id=flaky, tenant_id="store_northline", kind="refund_review", payload={"order_id": flaky, "total": 10}
    )
    for case in cases:
        queue.enqueue(
            case_id=case,
            tenant_id="store_northline",
            kind="refund_review",
            payload={"order": {"id": case, "total": 16}},
        )
    timed_out: set[str] = set()

    def old_handler(lease):
        if lease.case_id == flaky and not timed_out:
            timed_out.add(flaky)
            raise TimeoutError("the payments API did not answer")
        if "order_id" not in lease.payload:
            raise KeyError("order_id")

    while queue.process_one("W1", old_handler) != Outcome.EMPTY:
        pass
    broken = {case for case, kind in zip(cases, shape, strict=True) if kind == "broken"}
    handled: dict[str, int] = {}
    return Poisoned(queue, cases, broken, fixed_handler(broken, handled), handled)


def fixed_handler(broken: set[str], handled: dict[str, int]) -> Callable[[Lease], None]:
    """The handler after the fix: still fails on the `broken` cases, counts in `handled`."""

    def fixed_handler(lease):
        if lease.case_id in broken:
            raise ValueError("schema still unsupported")
        order_id = lease.payload.get("order_id") or lease.payload["order"]["id"]
        handled[order_id] = handled.get(order_id, 0) + 1

    return fixed_handler


class _Replay:
    """One schedule's world: the operator picks the DLQ, then the replay job R runs the
    learner's function (again after a crash, or after a lease it held ran out). The queue
    and the handler's count are the check's; R gets a view of the queue (`_view`)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.clock = FakeClock()  # the queue's: the check moves it to let a lease run out
        self._queue: InMemoryQueue | None = None  # set up by the operator's first move
        self.shape: tuple[str, ...] = ()
        self.state = "set-up"  # set-up, ready, ran, crashed
        self.runs = 0
        self.expired_since = False  # a lease ran out after R's last run: its item waits again
        self.problem: str | None = None
        self.calls: dict[str, int] = {}
        self.replayed: dict[str, int] = {}  # item id -> replays in the current run
        self.last: Outcome | None = None

    @property
    def queue(self) -> InMemoryQueue:
        """The check's queue. Every move but the operator's set-up comes after it (`moves`)."""
        assert self._queue is not None, "the queue is read only once the operator's move set it up"
        return self._queue

    def clone(self, run: Run) -> _Replay:
        """This schedule's state, copied to go on from: R's copy of the answer twinned in its
        process (it holds nothing of this world's between runs), then the queue and its
        clock copied together, and a fixed handler of the copy's own counting in its copy."""
        run.twin()
        twin = copy.copy(self)
        twin.run = run
        if self._queue is None:  # the operator has not set the queue up yet
            twin.clock = copied(self.clock)
        else:
            twin.clock, twin._queue, twin.handled = copied((self.clock, self._queue, self.handled))
            twin.handler = fixed_handler(self.still_broken, twin.handled)
        twin.calls, twin.replayed = dict(self.calls), dict(self.replayed)
        return twin

    def moves(self) -> list[Move]:
        if self._queue is None:
            return [
                Move(_shape_name(shape), "operator", functools.partial(self._set_up, shape), peer="queue")
                for shape in SHAPES
            ]
        moves = []
        if self.state in ("ready", "crashed") or (self.state == "ran" and self.expired_since and self._waiting()):
            moves.append(
                Move("R replays and drains" if self.runs == 0 else "R runs again", "R", self._job, peer="queue")
            )
        if self.queue.leases():
            moves.append(Move("leases expire", "clock", self._expire, peer="queue", cost="expiry"))
        return moves

    def _waiting(self) -> bool:
        return bool(self.queue.items(ItemState.READY))

    def fingerprint(self) -> Any:
        if self._queue is None:
            return None
        if len(self.shape) > SMALL:  # no fault on a large DLQ: one schedule, nothing to merge
            return (self.shape, self.state, self.runs, len(self.queue.log))
        items = tuple((i.id, i.state.value, i.attempts, i.replays, i.token) for i in self.queue.items())
        return (self.shape, self.state, self.runs, self.expired_since, items, tuple(sorted(self.handled.items())))

    def broken(self) -> str | None:
        return self.problem

    def crashed(self, actor: str) -> str | None:
        self.state = "crashed"
        held = self.queue.leases()
        return f"its lease on {held[0].id} stays until it runs out" if held else None

    def _set_up(self, shape: tuple[str, ...], run: Run) -> str:
        self.shape = shape
        self._queue, self.dead, self.still_broken, self.handler, self.handled = poisoned_queue(shape, self.clock)
        if self.queue.counts()[ItemState.DEAD] != len(shape):
            raise AssertionError("scenario set-up failed")  # the kit's bug, not the learner's
        self.state = "ready"
        if not shape:
            return "the DLQ is empty (one item failed once on a timeout and went through)"
        broken = f", {len(self.still_broken)} still broken after the fix" if self.still_broken else ""
        return (
            f"{_dead_letters(len(shape))} in the DLQ ({', '.join(self.dead[:SMALL])}"
            f"{' ...' if len(shape) > SMALL else ''}){broken}"
        )

    @property
    def where(self) -> str:
        size = _dead_letters(len(self.shape)) if self.shape else "an empty DLQ"
        return size + (f", {_some(sorted(self.still_broken))} still broken after the fix" if self.still_broken else "")

    def _job(self, run: Run) -> str:
        self.runs += 1
        self.state, self.expired_since, self.calls, self.replayed, self.last = "crashed", False, {}, {}, None
        view, handler = _view(run, self), _handed(run, self.handler)
        run.facade(queue=view, handler=handler)  # each records R's calls (`Run.recorded`)
        try:
            called = run.call(run.answer("R"), view, handler)
        except _Stop:
            return f"R runs your function: stopped by the check after {sum(self.calls.values())} queue calls"
        self.state = "ran"
        if called.error is not None and self.problem is None:
            self.problem = f"your function raised {error_text(called.error)}{_where(called.error)} ({self.where})."
        left = self.queue.counts()[ItemState.DEAD]
        return f"R runs your function: it {self.stopped()}; {left} left in the DLQ"

    def _expire(self, run: Run) -> str:
        self.clock.advance(31)
        expired = self.queue.expire_leases()
        self.expired_since = self.state == "ran"
        return f"31 s pass: the lease on {', '.join(expired)} runs out"

    def spend(self, call: str) -> None:
        """Count one queue call of the current run; a loop that does not end is stopped."""
        if self.problem is not None:
            raise _Stop()
        self.calls[call] = self.calls.get(call, 0) + 1
        if sum(self.calls.values()) > 20 * len(self.queue) + 100:
            items = f"{len(self.queue)} item{'' if len(self.queue) == 1 else 's'}"
            self.problem = (
                f"your function made {sum(self.calls.values()) - 1} queue calls for {items} and was "
                f"stopped by the check ({self.where}; the last process_one returned "
                f"{self.last.value if self.last is not None else 'nothing'!r}): the loop does not end. "
                "Stop when process_one returns 'empty'."
            )
            raise _Stop()

    def replaying(self, item_id: str) -> None:
        """One replay in this run; a second replay of an item in one run is a storm by hand."""
        self.replayed[item_id] = self.replayed.get(item_id, 0) + 1
        if self.replayed[item_id] > 1:
            item = self.queue.item(item_id)
            deaths = len(self.queue.log.where("dead_lettered", item_id=item_id))
            self.problem = (
                f"{item.case_id} ({item_id}) was replayed {self.replayed[item_id]} times in one run of "
                f"your function and died {deaths} times ({self.where}): it still fails after the fix, "
                "and replaying it over and over is a retry storm by hand. Replay each dead item once, "
                "then leave whatever fails again in the DLQ for a human."
            )
            raise _Stop()

    def stopped(self) -> str:
        """Where the learner's loop stopped, in words: its calls and the last outcome."""
        runs, takes = self.calls.get("process_one", 0), self.calls.get("acquire", 0)
        if not runs and not takes:
            return "stopped without processing anything"
        parts = [
            f"{n} {name} call{'s' if n > 1 else ''}" for name, n in (("process_one", runs), ("acquire", takes)) if n
        ]
        said = ""
        if self.last is not None:
            said = f", which returned {self.last.value!r}" if runs == 1 else f", the last returning {self.last.value!r}"
        return f"stopped after {' and '.join(parts)}{said}"

    def finished(self) -> str | None:
        items = self.queue.items()
        left = [i.case_id for i in items if i.state is ItemState.DEAD and i.case_id not in self.still_broken]
        if left:
            n = len(self.shape)
            verb = "is" if len(left) == 1 else "are"
            still = (
                f"the one dead letter is still in the DLQ ({self.where}): {left[0]}"
                if n == 1
                else f"{len(left)} of the {n} dead letters {verb} still in the DLQ ({self.where}): {_some(left)}"
            )
            return (
                f"after your function, {still}. Replay every dead item once the handler is fixed, however many "
                "there are."
            )
        not_done = [i.case_id for i in items if i.state is not ItemState.DONE and i.case_id not in self.still_broken]
        if not_done:
            were = "1 item was" if len(not_done) == 1 else f"{len(not_done)} items were"
            held = " and held by a broken-off lease" if self.queue.leases() else ""
            rerun = (
                f" This was run {self.runs} of your function: a run after a crash starts from nothing the last "
                "one kept, so ask the queue what is left."
                if self.runs > 1
                else ""
            )
            return (
                f"{were} replayed but not processed{held} ({self.where}): {_some(not_done)}; your function "
                f"{self.stopped()}. Drive the queue until it is empty.{rerun}"
            )
        for case in sorted(self.still_broken):
            item = next(i for i in items if i.case_id == case)
            if item.state is not ItemState.DEAD or item.replays < 1:
                return (
                    f"{case} still fails after the fix ({self.where}); it should be replayed once and end back in "
                    f"the DLQ for a human, but it is {item.state.value} after {item.replays} replays; your "
                    f"function {self.stopped()}."
                )
        return None


def _view(run: Run, world: _Replay) -> Any:
    """What the learner's function is handed: the queue calls a replay job needs, each
    counted, and (on a small DLQ) each a point where the job's process may die. The queue
    itself and its log stay with the check."""
    queue = world.queue
    small = len(world.shape) <= SMALL

    def call(point: str, *args: Any, **kwargs: Any) -> Any:
        """R's `queue.<point>(*args, **kwargs)`: recorded (`Run.recorded`), counted, and on a
        small DLQ between two fault points."""
        with run.recorded(("queue", point), args, kwargs):
            world.spend(point)
            if small:
                run.enter(point)
            result = getattr(queue, point)(*args, **kwargs)
            if small:
                run.leave(point)
        return result

    class Queue:
        """The queue, for a replay job: dlq_items(), replay_dlq(item_id), process_one(worker_id,
        handler), acquire(worker_id), ack(lease), nack(lease, error), item(item_id), items(state)."""

        __slots__ = ()

        def dlq_items(self):
            return queue.dlq_items()

        def replay_dlq(self, item_id, **kwargs):
            with run.recorded(("queue", "replay_dlq"), (item_id,), kwargs):
                world.spend("replay_dlq")
                if small:
                    run.enter("replay_dlq")
                queue.replay_dlq(item_id, **kwargs)
                world.replaying(item_id)
                if small:
                    run.leave("replay_dlq")

        def process_one(self, worker_id, handler, **kwargs):
            world.last = call("process_one", worker_id, handler, **kwargs)
            return world.last

        def acquire(self, worker_id, **kwargs):
            return call("acquire", worker_id, **kwargs)

        def ack(self, lease, **kwargs):
            return call("ack", lease, **kwargs)

        def nack(self, lease, error=None, **kwargs):
            return call("nack", lease, error, **kwargs)

        def item(self, item_id):
            return queue.item(item_id)

        def items(self, state=None):
            return queue.items(state)

        def __len__(self):
            return len(queue)

        def __repr__(self) -> str:
            return f"<Queue: {len(queue.dlq_items())} in the DLQ, {queue.depth} waiting>"

    return Queue()


def _handed(run: Run, handler: Callable[[Lease], None]) -> Callable[[Lease], None]:
    """The fixed handler as R is handed it: a call R makes itself is recorded (one the
    queue makes inside R's process_one is the queue's)."""

    @functools.wraps(handler)
    def handed(lease: Lease) -> None:
        with run.recorded(("handler",), (lease,), {}):
            handler(lease)

    return handed


def scenario() -> Scenario:
    return Scenario(name="replay the DLQ", bound=BOUND, start=_Replay)


def replay(replay_and_drain, schedule: str) -> Replayed:
    """Play one schedule (as the check's message writes it) with your function: print it
    for the steps, or call .diagram() for the picture."""
    return replay_schedule(scenario(), replay_and_drain, schedule)


def _run(replay_and_drain) -> str:
    found = explore(scenario(), replay_and_drain)
    refuse(found, f'lab02.replay({named(replay_and_drain, "replay_and_drain")}, "{{schedule}}")')
    return (
        f"{found.summary}: every dead letter was replayed once and finished, a still-broken one went back to "
        "the DLQ instead of storming, and a crashed run finished on its next run."
    )


exercise = Exercise(
    id="02.1",
    title="replay the DLQ after the fix",
    answer="replay_and_drain",
    run=_run,
    hints=(
        "Two phases: first bring every dead item back, then let a worker work until nothing is left.",
        "queue.dlq_items() lists the dead items; queue.replay_dlq(item_id) sends one back; "
        "queue.process_one(worker_id, handler) returns 'empty' when nothing is left.",
        "Replay is a decision about every dead letter there is (none, one or hundreds), made once for each; draining "
        "is a worker taking turns until the queue says nothing is left, however many turns that takes. A replayed "
        "item that is still broken fails again: let the queue's own rules send it back, and catch nothing yourself.",
    ),
)


# ---------------------------------------------------------------------------- knowledge check

# The scope of the knowledge check: every list of up to LONGEST deliveries, for every max_attempts
# from 1 to MOST_ATTEMPTS, in order of length (the first one a prediction gets wrong is a short one).
LONGEST, MOST_ATTEMPTS = 6, 5


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


def _misread(
    deliveries, max_attempts: int, *, crashes_count: bool = True, limit_extra: int = 0, fail_is_final: bool = False
) -> str:
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
    (
        "as if a crash did not use up an attempt. The queue counts deliveries, and it cannot tell a crashed "
        "worker from a slow one",
        dict(crashes_count=False),
    ),
    ("as if max_attempts allowed one delivery more than it does", dict(limit_extra=1)),
    ("as if max_attempts allowed one delivery fewer than it does", dict(limit_extra=-1)),
    (
        "as if one failure sent the item straight to the DLQ. A failed delivery uses an attempt; the item "
        "dies only when the attempts run out",
        dict(fail_is_final=True),
    ),
)


def _cases():
    for length in range(LONGEST + 1):
        for deliveries in itertools.product(("ok", "fail", "crash"), repeat=length):
            for limit in range(1, MOST_ATTEMPTS + 1):
                yield list(deliveries), limit


@functools.cache
def _truth() -> tuple[tuple[tuple[str, ...], int, str], ...]:
    """Where each item of the scope ends on a real queue. Each list is played once per
    process and per its first max_attempts entries: every entry is an acquire, so after
    max_attempts of them the queue delivers the item no more, and later ones cannot matter."""
    played: dict[tuple[tuple[str, ...], int], str] = {}
    for deliveries, limit in _cases():
        key = (tuple(deliveries[:limit]), limit)
        if key not in played:
            played[key] = _replay_deliveries(list(key[0]), limit)
    return tuple((tuple(d), limit, played[tuple(d[:limit]), limit]) for d, limit in _cases())


def _knowledge(where_does_it_end) -> str:
    answers, truth = [], {}
    replies = call_each(where_does_it_end, [((deliveries, limit), {}) for deliveries, limit in _cases()])
    cases = _truth()  # played after the answer replied: a stub costs nothing more
    for (deliveries, limit, real), got in zip(cases, replies, strict=True):
        if type(got) is not str or got not in ("ready", "done", "dead"):  # a str, not a look-alike
            raise Wrong(
                f"for {list(deliveries)} the function returned {describe(got)}; return the item's state: "
                "'ready', 'done' or 'dead'."
            )
        answers.append((list(deliveries), limit, got))
        truth[deliveries, limit] = real
    wrong = [(d, limit, got) for d, limit, got in answers if got != truth[tuple(d), limit]]
    if not wrong:
        return (
            f"your predictions match a real queue on all {len(answers):,} delivery lists of up to {LONGEST} "
            f"deliveries, with max_attempts from 1 to {MOST_ATTEMPTS}, crashes included."
        )
    example, limit, got = wrong[0]
    said = (
        f"for deliveries {example} with max_attempts={limit} your function says {got!r} "
        f"({len(wrong):,} of all {len(answers):,} lists of up to {LONGEST} deliveries, with max_attempts from 1 "
        f"to {MOST_ATTEMPTS}, end elsewhere on a real queue)"
    )
    for what, misreading in MISREADINGS:
        if all(got == _misread(d, limit, **misreading) for d, limit, got in answers):
            raise Wrong(f"{said}: on every sequence it answers {what}.")
    raise Wrong(f"{said}. Play that list through by hand, one delivery per entry, and compare.")


knowledge = Exercise(
    id="02.2",
    title="where does the item end?",
    answer="where_does_it_end",
    run=_knowledge,
    hints=(
        "Each entry of the list is one delivery, and every delivery starts with an acquire.",
        "Attempts are counted on acquire, so 'crash' uses one just like 'fail'. Once the item is done or "
        "dead, the queue delivers it no more, so later entries do not matter.",
        "Walk the deliveries in order and count them: the first success ends the story; a count that reaches "
        "max_attempts without one ends it in the DLQ; a list that runs out first leaves the item waiting.",
    ),
)


# Its quizzes (the right option and every explanation) are kept with the answer keys, loaded on
# first use (`checks.answers`): importing this module loads none of them.
__getattr__ = answers.lazy("lab02", ("AUTO_REPLAY_QUIZ",))
