"""Lab 08: real worker processes on an SQLite file, killed with SIGKILL or frozen, on a plan.

The learner writes `handle(lease, shop)`: refund the order the lease names and ack it, so
that a SIGKILL anywhere leaves every order refunded once. The check runs the
handler in real worker processes (forked, so the notebook's own function runs in them), one
order per schedule, and every schedule happens exactly as planned: each worker stops at
every call it makes into the shop and moves on only when the check says so, and a lease
runs out when the check moves the clock, never because a machine was slow. It plays the
delivery whole, a SIGKILL right after each of the handler's steps, and a freeze at each step
outside a transaction until the lease runs out and a second worker takes the order over
(whole, or stopped at each of its own steps while the frozen one wakes up stale and
finishes). What decides is the money: every order credited once, the amount its
delivery carries, never how the handler is spelled. A failure is shown as the schedule that
broke it; a planned stop that did not happen voids the run ("not judged"), never passes it.

`replay(handle, schedule)` tells one schedule's story, `run_refunds(handle, seed=...)` runs
one order per named stop, and `stop_map(run, ...)` draws that: one cell per stop, coloured by
how its order ended. In a browser-only notebook (JupyterLite) nothing here can start a
process; `processes_available()` says so, the check says where to run it, and the lab shows
the recorded runs in `RECORDED` (and draws those in `RECORDED_RUNS`) instead.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import cycle
from pathlib import Path
from typing import Any, Literal

from shopops_lab import arguments
from shopops_lab.chaos.plan import Kill, KillPoint
from shopops_lab.chaos.run import run_chaos
from shopops_lab.chaos.schedules import How, Played, Player, Schedule, explore
from shopops_lab.chaos.steps import Pause, Stepper, StepsError
from shopops_lab.checks import answers
from shopops_lab.checks.base import Exercise, NotAttempted, NotJudged, Wrong, is_stub, named
from shopops_lab.checks.lab08_sql import (
    frozen_holder,
    postgres_available,
    postgres_claim,
    race,
    replay_claim,
    sqlite_claim,
)
from shopops_lab.checks.sealed import behind, seal
from shopops_lab.clock import FakeClock
from shopops_lab.errors import ShopOpsError
from shopops_lab.states import ItemState
from shopops_lab.store import Store, open_store
from shopops_lab.viz.dot import Diagram
from shopops_lab.viz.stop_map import Outcome, Stop
from shopops_lab.viz.stop_map import stop_map as draw_stop_map
from shopops_lab.worker.queue import Lease, Queue

# What the checks import when first used (a browser's Python may lack sqlite3): the grader
# loads these before any submission, so no judge imports them while it grades.
ON_USE = ("shopops_lab.store.sqlite", "shopops_lab.chaos.claims", "sqlite3", "psycopg")

__all__ = [
    "RECORDED",
    "RECORDED_RUNS",
    "STOPS",
    "RefundRun",
    "Shop",
    "ShopTransaction",
    "chaos_summary",
    "exercise",
    "frozen_holder",
    "postgres_available",
    "postgres_claim",
    "processes_available",
    "race",
    "replay",
    "replay_claim",
    "run_refunds",
    "show",
    "show_postgres",
    "sqlite_claim",
    "stop_map",
    "story",
    "table",
]

LEASE_SECONDS = 30.0  # on the clock the check moves: a lease runs out only when a schedule says so
MAX_ATTEMPTS = 4
PATIENCE = 60.0  # seconds a worker may stay silent before the run is void (never a verdict)
AMOUNTS = (12.5, 20.0, 35.0, 49.9)
# The named stops of the lab's demonstration, each on its own order: what each one catches.
STOPS = (
    ("after_credit", False),  # credit committed, ack not: a redelivery credits again
    ("after_ack", False),  # ack committed, credit not yet: the order is never refunded
    ("after_commit", False),  # your transaction committed, and whatever comes after it did not
    ("after_acquire", True),  # frozen past its lease; wakes up stale after a takeover
    ("after_handler", False),
)  # all done: dying now must cost nothing
# What a worker had just done at each point, for the messages.
_AFTER = {
    "after_acquire": "acquiring the order, before your handler ran",
    "after_refunded": "reading shop.refunded",
    "after_credit": "a shop.credit",
    "after_ack": "a shop.ack",
    "after_commit": "one of your transactions committed",
    "after_handler": "your handler returned",
}


def processes_available() -> bool:
    """False in a browser-only notebook (JupyterLite: no processes), True where this lab can fork workers."""
    return sys.platform != "emscripten" and hasattr(os, "fork")


class Shop:
    """What a handler gets: the shop's database, seen through four calls.

    * `shop.credit(order, amount)` refunds `amount` to `order`: one committed write of its own,
      or part of your transaction when you are inside one;
    * `shop.ack(lease)` acknowledges the delivery (refused if the lease is no longer yours):
      the same;
    * `shop.refunded(order)` reads what `order` has been refunded so far;
    * `with shop.transaction():` makes everything inside one transaction: all of it commits
      when the block ends, or none of it, if the worker dies (or anything raises) inside.

    Each call is a point where the check may stop the worker (`pause`), and says what it did.
    The shop keeps no attributes: the database, the queue and the pause stay out of the
    handler's reach (`checks.sealed`), so a handler cannot write the refunds table itself.
    """

    __slots__ = ("__weakref__",)

    def __init__(self, store: Store, queue: Queue, pause: Pause | None = None) -> None:
        seal(self, _Behind(store, queue, pause))

    def credit(self, order: str, amount: float) -> None:
        store = behind(self).store
        with store.atomic:
            refund = store.get(_REFUNDS, order) or {"refunded": 0.0, "credits": 0}
            store.put(
                _REFUNDS, order, {"refunded": round(refund["refunded"] + amount, 2), "credits": refund["credits"] + 1}
            )
        del store  # nothing the handler could reach from a traceback of the stop below
        _stop(self, "after_credit", f"shop.credit({order!r}, {_money(amount)})")

    def ack(self, lease: Lease) -> None:
        try:
            behind(self).queue.ack(lease)
        except ShopOpsError as refused:
            _note(self, f"shop.ack(lease) is refused: {type(refused).__name__}")
            raise refused.with_traceback(None) from None  # the queue's frames stay here
        _stop(self, "after_ack", "shop.ack(lease)")

    def transaction(self) -> ShopTransaction:
        """`with shop.transaction():` everything inside commits together, or not at all."""
        return seal(ShopTransaction(), self)

    def refunded(self, order: str) -> float:
        """What `order` has been refunded so far."""
        refund = behind(self).store.get(_REFUNDS, order)
        found = 0.0 if refund is None else refund["refunded"]
        _stop(self, "after_refunded", f"shop.refunded({order!r}) -> {_money(found)}")
        return found

    def __repr__(self) -> str:
        return "<shop: credit, ack, refunded, transaction>"


class ShopTransaction:
    """One `with shop.transaction():` block (nested blocks join the outermost one)."""

    __slots__ = ("__weakref__", "_outermost")

    def __enter__(self) -> None:
        shop = behind(self)
        atomic = behind(shop).store.atomic
        self._outermost = not atomic.open
        atomic.__enter__()

    def __exit__(self, kind: Any, error: Any, tb: Any) -> Literal[False]:
        shop = behind(self)
        behind(shop).store.atomic.__exit__(kind, error, tb)
        if self._outermost and kind is not None:
            _note(shop, "its transaction rolls back: nothing in it is kept")
        elif self._outermost:
            _stop(shop, "after_commit", "commits its transaction")
        return False


@dataclass(frozen=True)
class _Behind:
    """What a Shop acts on, kept out of its reach."""

    store: Store
    queue: Queue
    pause: Pause | None


def _note(shop: Shop, words: str) -> None:
    pause = behind(shop).pause
    if pause is not None:
        pause.note(words)


def _stop(shop: Shop, point: str, words: str) -> None:
    pause = behind(shop).pause
    if pause is not None:
        pause.note(words)
        pause.at(point)


def _money(amount: Any) -> str:
    return f"{amount:.2f}" if isinstance(amount, (int, float)) else repr(amount)


_REFUNDS = "refund"  # the shop's table: order -> {"refunded": total, "credits": how many}
_NO_REFUND = {"refunded": 0.0, "credits": 0}


class _Refunds:
    """The workload: each worker process hands every lease to `handle(lease, shop)`."""

    def __init__(self, handle: Callable[[Lease, Shop], Any]) -> None:
        self.handle = handle

    def prepare(self, store: Store, queue: Queue, pause: Pause, name: str) -> Callable[[Lease], Any]:
        shop = Shop(store, queue, pause)
        return lambda lease: self.handle(lease, shop)


@dataclass
class RefundRun:
    """What one run did: per order its amount, what was credited and how often, the item's
    end, the stop planned on it and whether it happened (with why it mattered), and its story."""

    seed: int
    orders: dict[str, float] = field(default_factory=dict)  # order -> amount asked for
    refunds: dict[str, dict] = field(default_factory=dict)  # order -> {"refunded", "credits"}
    ends: dict[str, str] = field(default_factory=dict)  # order -> its item's final state
    stops: dict[str, Kill] = field(default_factory=dict)  # order -> the stop planned on it
    happened: set[str] = field(default_factory=set)  # orders whose stop happened
    errors: dict[str, str] = field(default_factory=dict)  # order -> the last error of a dead item
    whys: dict[str, str] = field(default_factory=dict)  # order -> what its schedule did, in words
    stories: dict[str, tuple[str, ...]] = field(default_factory=dict)  # order -> its schedule, line by line
    recorded: bool = False  # True: stored with the lab, not run here

    def outcome(self, order: str) -> Outcome:
        """How `order` ended: from what the database holds, never from timing."""
        refund = self.refunds.get(order, _NO_REFUND)
        if self.ends[order] == ItemState.DEAD.value:
            return Outcome.DEAD
        if refund["credits"] > 1:
            return Outcome.REPEATED
        if refund["credits"] == 0:
            return Outcome.NEVER
        return Outcome.ONCE if refund["refunded"] == self.orders[order] else Outcome.WRONG_AMOUNT

    def problem(self, order: str) -> str | None:
        """What went wrong with `order` (None: refunded once), with the schedule that did it."""
        amount, refund, outcome = self.orders[order], self.refunds.get(order, _NO_REFUND), self.outcome(order)
        why = f": {self.whys[order]}" if order in self.whys else ""
        if outcome is Outcome.DEAD:
            error = self.errors.get(order, "")
            paid = f" (after {refund['credits']} credit(s))" if refund["credits"] else ""
            if error.startswith("lease expired"):
                return (
                    f"order {order} ended in the dead-letter queue{paid}: no delivery of it was ever "
                    "acknowledged, so each one's lease ran out."
                )
            return (
                f"order {order} ended in the dead-letter queue{paid}: your handler raised "
                f"{error.split(':')[0] or 'an error'} on every delivery."
            )
        if outcome is Outcome.REPEATED:
            return (
                f"order {order} was refunded {refund['credits']} times, {refund['refunded']:.2f} "
                f"instead of {amount:.2f}{why}."
            )
        if outcome is Outcome.NEVER:
            return f"order {order} was never refunded, yet its delivery was acknowledged{why}."
        if outcome is Outcome.WRONG_AMOUNT:
            return (
                f"order {order} was refunded {refund['refunded']:.2f}, but it asked for {amount:.2f}: "
                "credit the amount its delivery carries."
            )
        return None

    def problems(self) -> list[str]:
        """Every order not refunded once, in words, with the stop that caused it."""
        return [found for order in self.orders if (found := self.problem(order))]

    def stop_rows(self) -> list[Stop]:
        """One row per stop, in the order a delivery reaches them: what `stop_map` draws."""
        rows = []
        for order, kill in sorted(self.stops.items(), key=lambda pair: list(_AFTER).index(pair[1].point)):
            refund = self.refunds.get(order, _NO_REFUND)
            rows.append(
                Stop(
                    point=kill.point,
                    paused=kill.pause,
                    reached=order in self.happened,
                    order=order,
                    asked=self.orders[order],
                    refunded=refund["refunded"],
                    credits=refund["credits"],
                    outcome=self.outcome(order),
                )
            )
        return rows

    def lines(self) -> list[str]:
        rows = []
        for order, amount in self.orders.items():
            refund = self.refunds.get(order, _NO_REFUND)
            stop = self.stops.get(order)
            what = (
                "worker ran it whole"
                if stop is None
                else f"worker {'paused' if stop.pause else 'killed'} {stop.point}"
                if order in self.happened
                else f"worker ({stop.point} planned, never reached)"
            )
            rows.append(
                f"{order}: asked {amount:6.2f}, refunded {refund['refunded']:6.2f} in "
                f"{refund['credits']} credit(s); item {self.ends[order]}; {what}"
            )
        return rows


class _Lab:
    """A fresh SQLite file, the check's own view of it, and the worker processes that run
    `handle` on it: plays schedules, one order each, and records how each order ended."""

    def __init__(self, handle: Callable[[Lease, Shop], Any], amounts: Iterator[float], seed: int = 0) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="shopops-lab08-"))
        url = f"sqlite:///{self.folder / 'shop.db'}?synchronous=normal"
        self.store = open_store(url)
        self.queue = Queue(store=self.store, lease_seconds=LEASE_SECONDS, max_attempts=MAX_ATTEMPTS, clock=FakeClock())
        self.steps = Stepper(
            url, _Refunds(handle), lease_seconds=LEASE_SECONDS, max_attempts=MAX_ATTEMPTS, patience=PATIENCE
        )
        self.player = Player(self.steps, self.queue)
        self.amounts, self.run = amounts, RefundRun(seed=seed)
        self._order_of: dict[str, str] = {}  # item id -> its order

    def new_item(self) -> str:
        """A new order to refund, queued: its item's id."""
        order = f"O-{1001 + len(self._order_of)}"
        self.run.orders[order] = amount = next(self.amounts)
        item_id = self.queue.enqueue(
            case_id=order, tenant_id="store_northline", kind="refund", payload={"order": order, "amount": amount}
        )
        self._order_of[item_id] = order
        return item_id

    def record(self, played: Played, planned: str | None = None) -> str:
        """Note how `played`'s order ended, from what the database holds; return the order."""
        order, run = self._order_of[played.item_id], self.run
        item = self.queue.item(played.item_id)
        run.ends[order] = item.state.value
        if item.last_error:
            run.errors[order] = item.last_error
        refund = self.store.get(_REFUNDS, order)
        if refund is not None:
            run.refunds[order] = refund
        run.stories[order] = played.story
        stop = played.stop
        point = stop.point if stop is not None else planned
        if point is not None:
            run.stops[order] = Kill(
                item_id=played.item_id,
                attempt=1,
                point=point,
                pause=played.schedule.how is How.FREEZE,
            )
        if stop is not None:
            run.happened.add(order)
        run.whys[order] = _why(played)
        return order

    def __enter__(self) -> _Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.steps.close()
            self.store.close()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def _why(played: Played) -> str:
    """What `played`'s schedule did to the order, in one phrase."""
    stop, how = played.stop, played.schedule.how
    if stop is None:
        return "with no worker stopped at all"
    first = f"W1 was {'killed' if how is How.KILL else 'frozen'} right after {_AFTER[stop.point]}"
    if how is How.KILL:
        if played.second:
            return f"{first}, and the order was delivered again"
        return f"{first}, and the order was never delivered again: its ack had committed"
    if played.schedule.second is None:
        return (
            f"{first}; its lease ran out, W2 took the order over and ran your handler to the end, and then "
            "W1 woke up with its stale lease and went on"
        )
    other = played.second[played.schedule.second].point
    return (
        f"{first}; its lease ran out and W2 took the order over; W2 stopped right after {_AFTER[other]} while "
        "W1 woke up with its stale lease and finished, then W2 went on"
    )


def run_refunds(
    handle: Callable[[Lease, Shop], Any], *, seed: int, stops: tuple[tuple[str, bool], ...] = STOPS
) -> RefundRun:
    """Refund one order per named stop in `stops` with `handle` in real worker processes on a
    fresh SQLite file: W1 is killed at the stop's first point of that name (or, paused, frozen
    there until W2 took the order over), then the order is delivered until it is done; `seed`
    draws the amounts. A stop the handler never reaches is marked so."""
    arguments.whole("seed", seed, None, "pass a whole number, e.g. seed=4")
    rng = random.Random(seed)
    amounts = [rng.choice(AMOUNTS) for _ in stops]
    with _Lab(handle, iter(amounts), seed) as lab:
        for point, pause in stops:
            played = lab.player.play(Schedule(How.FREEZE if pause else How.KILL, point), lab.new_item())
            lab.record(played, planned=point)
        return lab.run


def replay(handle, schedule: str = "run") -> str:
    """The story of one schedule the check plays with your `handle` (as its message names it)."""
    plan = Schedule.parse(schedule)
    if not processes_available():
        return _NO_PROCESSES
    if is_stub(handle):
        return "handle still raises NotImplementedError: write it first."
    try:
        with _Lab(handle, cycle(AMOUNTS)) as lab:
            for played in explore(lab.player, lab.new_item):
                order = lab.record(played)
                if played.schedule == plan:
                    verdict = lab.run.problem(order) or f"order {order} refunded once."
                    return "\n".join(
                        [f"schedule {plan.id}, two worker processes, order {order}:", *played.story, verdict]
                    )
    except StepsError as void:
        return f"this replay is void: {void}"
    return (
        f"the check does not play {plan.id} with your handler: it stops a worker only at the points your "
        "handler passes, and freezes one only outside a transaction while the order is still its own."
    )


def _run(handle) -> str:
    if not processes_available():
        raise NotJudged(_NO_PROCESSES)
    if is_stub(handle):
        raise NotAttempted()
    counts = dict.fromkeys(How, 0)
    try:
        with _Lab(handle, cycle(AMOUNTS)) as lab:
            for played in explore(lab.player, lab.new_item):
                counts[played.schedule.how] += 1
                problem = lab.run.problem(lab.record(played))
                if problem:
                    raise Wrong(
                        f"{problem} Replay it: print(lab08.replay({named(handle, 'handle')}, {played.schedule.id!r}))",
                        played.story,
                    )
    except StepsError as void:
        raise NotJudged(f"this run is void, so nothing was judged: {void}") from None
    return (
        f"checked all {sum(counts.values())} schedules of two worker processes, one order each: your handler "
        f"run whole, SIGKILLed right after each of its {counts[How.KILL]} steps, and frozen {counts[How.FREEZE]} "
        "ways (at a step outside a transaction until its lease ran out, a second worker took the order over, "
        "and the frozen one woke up stale); every order was refunded once."
    )


_NO_PROCESSES = (
    "this check needs real processes: run it in JupyterLab (your machine, JupyterHub or Binder). "
    "A browser-only notebook (JupyterLite) cannot start them, so nothing was judged here."
)

exercise = Exercise(
    id="08.1",
    title="the commit that closes the crash window",
    answer="handle",
    run=_run,
    hints=(
        "A SIGKILL can land between any two of your calls, and a redelivery then runs your handler again "
        "from the top. Which two writes must never be separated by a crash? And which of your calls is the "
        "one that finds out the lease is no longer yours?",
        "shop.credit(...) and shop.ack(...) each commit on their own, unless they run in a block opened with "
        "shop.transaction() (a with-statement), where everything commits together when the block ends, or not "
        "at all. shop.ack raises StaleTokenError when another worker has taken the order over.",
        "Two writes that must agree commit together: the delivery's ack and the credit in one transaction, so a kill "
        "anywhere leaves both or neither, and nothing of the delivery comes after it. Let errors out of that block: "
        "an exception inside it rolls all of it back.",
    ),
)


# ------------------------------------------------------------------ what the lab's cells print
def story(run: RefundRun) -> str:
    """One run, order by order, then what went wrong (or that nothing did)."""
    problems = run.problems()
    return "\n".join([*run.lines(), *(problems or ["every order refunded once."])])


def stop_map(run: RefundRun | None, handler: str) -> Diagram | None:
    """`run` as a picture: one cell per stop, in the order a delivery reaches them, coloured
    by how its order ended. Drawn from what the run recorded per order (never from its
    timing), so a seed draws the same picture every time, and a recorded run says so.
    `run` None (no run to draw yet): one line saying why, and no picture."""
    if run is None:
        print(
            "Your handler's stop map needs real worker processes: open the lab in JupyterLab to draw it."
            if not processes_available()
            else "Your handler's stop map appears here once the cell above has run your handle."
        )
        return None
    arguments.instance("run", run, RefundRun, "what lab08.run_refunds(...) returned")
    arguments.text("handler", handler, "whose run this is, e.g. 'your handler'")
    title = f"stop map: {handler}, seed {run.seed}" + (" (recorded run)" if run.recorded else "")
    note = (
        "recorded run: this notebook cannot start processes, so the map is drawn from the run stored with the lab"
        if run.recorded
        else ""
    )
    return draw_stop_map(run.stop_rows(), title=title, note=note)


def table(path: str, sql: str) -> None:
    """Print a query's rows under their column names, aligned (numbers as a person writes them),
    from the SQLite file at `path`, opened read-only: any SQLite client would show the same."""
    import sqlite3  # here, not at import: a browser's Python may not have it

    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        cursor = db.execute(sql)
        head = [column[0] for column in cursor.description]
        rows = [
            ["NULL" if v is None else f"{v:g}" if isinstance(v, float) else str(v) for v in row]
            for row in cursor.fetchall()
        ]
    finally:
        db.close()
    widths = [max(len(x) for x in column) for column in zip(head, *rows)]
    for row in [head, *rows]:
        print("  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip())


def chaos_summary(url: str, *, adapter: str) -> str:
    """A chaos run on the empty database at `url` (24 emails, 3 workers, 12 SIGKILLs, seed 8),
    in the words that do not depend on timing, with its dead letters as rows."""
    report = run_chaos(url, items=24, workers=3, kills=12, seed=8, adapter=adapter, lease_seconds=2.0)
    windows = {k.item_id for k in report.killed if k.point in (KillPoint.AFTER_SEND, KillPoint.IN_ACK)}
    with open_store(url) as store:
        case_of = {row.id: row.case_id for row in store.item_rows()}
        dead = [(row.id, row.attempts, row.last_error) for row in store.dead_rows()]
    lines = [
        f"{adapter} adapter: {report.items} emails, {report.workers} worker processes, "
        f"{report.kills} SIGKILLs ({', '.join(f'{n} {p.value}' for p, n in _points(report.killed))})",
        f"  done {report.done}, dead-lettered {report.dead_lettered}, lost {report.lost}",
        f"  kills between a send and its record: {len(windows)}",
    ]
    if report.double_contacts:  # a stall could add a double of its own: say what the kills caused
        named = {case_of[item] for item in windows} <= set(report.doubled_cases)
        lines.append(f"  each of those kills emailed a customer twice, and the checker names every one: {named}")
    else:
        lines.append("  customers emailed twice: none")
    lines.append(f"  the checker on the database's history: {'valid' if report.valid else 'INVALID'}")
    lines += [f"  dead letter {item}: {attempts} attempts, {error}" for item, attempts, error in dead]
    return "\n".join(lines)


def _points(killed: tuple[Kill, ...]) -> list[tuple[KillPoint, int]]:
    return [(point, n) for point in KillPoint if (n := sum(1 for k in killed if k.point == point))]


# ------------------------------------------------------------------ the knowledge check


# ------------------------------------------------------------------ the recorded runs, for JupyterLite
def _kill(n: int, point: str) -> Kill:
    return Kill(item_id=f"item-{n:04d}", attempt=1, point=point)


RECORDED_RUNS: dict[str, RefundRun] = {  # the outcomes behind the recordings that have a picture
    "naive": RefundRun(
        seed=4,
        recorded=True,
        orders={"O-1001": 20.0, "O-1002": 35.0, "O-1003": 12.5},
        refunds={
            "O-1001": {"refunded": 40.0, "credits": 2},
            "O-1002": {"refunded": 35.0, "credits": 1},
            "O-1003": {"refunded": 12.5, "credits": 1},
        },
        ends={"O-1001": "done", "O-1002": "done", "O-1003": "done"},
        stops={
            "O-1001": _kill(1, "after_credit"),
            "O-1002": _kill(2, "after_handler"),
            "O-1003": _kill(3, "after_ack"),
        },
        whys={"O-1001": "W1 was killed right after a shop.credit, and the order was delivered again"},
        happened={"O-1001", "O-1002", "O-1003"},
    ),
}

RECORDED: dict[str, str] = {  # what the live cells print (a test holds them to the master's stored outputs)
    "file-rows": (
        "id         case_id  state   worker_id  token  attempts  expires_at\n"
        "item-0001  O-1001   leased  W1         1      1         30\n"
        "item-0002  O-1002   ready   NULL       0      0         NULL\n"
        "item-0003  O-1003   ready   NULL       0      0         NULL"
    ),
    "file-stale": (
        "W1's ack: Stale fencing token for item item-0001: this write carries token 1, but the store's current token "
        "is 2. Another worker claimed it after you; stop and do not write.\n"
        "id         state  worker_id  token  attempts\n"
        "item-0001  done   W2         2      2\n"
        "seq  time  kind            item_id    worker_id  token\n"
        "1    0     enqueued        item-0001  NULL       NULL\n"
        "4    0     leased          item-0001  W1         1\n"
        "5    31    expired         item-0001  W1         1\n"
        "6    31    leased          item-0001  W2         2\n"
        "7    31    stale_rejected  item-0001  W1         1\n"
        "8    31    acked           item-0001  W2         2"
    ),
    "naive": story(RECORDED_RUNS["naive"]),
    "claim-race": (
        "1. P1: SELECT id, token FROM queue WHERE state = 'ready' OR (sta... -> ('item-0001', 0)\n"
        "2. P2: SELECT id, token FROM queue WHERE state = 'ready' OR (sta... -> ('item-0001', 0)\n"
        "3. P1: UPDATE queue SET state = 'leased', worker_id = ?, token =... -> done\n"
        "4. P2: UPDATE queue SET state = 'leased', worker_id = ?, token =... -> done\n"
        "   P1's claim returned ('item-0001', 1)\n"
        "   P2's claim returned ('item-0001', 1)\n"
        "   the table: item-0001 leased, held by P2 under token 1"
    ),
    "claim-race-postgres": (
        "1. P1: SELECT id, token FROM queue WHERE state = 'ready' OR (sta... -> ('item-0001', 0)\n"
        "2. P2: SELECT id, token FROM queue WHERE state = 'ready' OR (sta... -> ('item-0001', 0)\n"
        "3. P1: UPDATE queue SET state = 'leased', worker_id = %s, token ... -> done\n"
        "4. P2: UPDATE queue SET state = 'leased', worker_id = %s, token ... -> waits for a lock another worker holds\n"
        "5. P1: COMMIT (the kit's, as the claim returns) -> committed\n"
        "6. P2: UPDATE queue SET state = 'leased', worker_id = %s, token ... -> done\n"
        "7. P2: COMMIT (the kit's, as the claim returns) -> committed\n"
        "   P1's claim returned ('item-0001', 1)\n"
        "   P2's claim returned ('item-0001', 1)\n"
        "   the table: item-0001 leased, held by P2 under token 1"
    ),
    "chaos": (
        "idempotent adapter: 24 emails, 3 worker processes, 12 SIGKILLs (5 after_acquire, 5 after_send, 1 in_ack, 1 "
        "after_ack)\n"
        "  done 23, dead-lettered 1, lost 0\n"
        "  kills between a send and its record: 5\n"
        "  customers emailed twice: none\n"
        "  the checker on the database's history: valid\n"
        "  dead letter item-0008: 5 attempts, TemplateError: the order's template cannot be rendered\n"
        "naive adapter: 24 emails, 3 worker processes, 12 SIGKILLs (5 after_acquire, 5 after_send, 1 in_ack, 1 "
        "after_ack)\n"
        "  done 23, dead-lettered 1, lost 0\n"
        "  kills between a send and its record: 5\n"
        "  each of those kills emailed a customer twice, and the checker names every one: True\n"
        "  the checker on the database's history: INVALID\n"
        "  dead letter item-0008: 5 attempts, TemplateError: the order's template cannot be rendered"
    ),
}


def show_postgres(name: str, live: Callable[[], Any]) -> None:
    """Run `live` (which prints) where a PostgreSQL server is at hand (`SHOPOPS_POSTGRES_URL`)
    and this notebook can start processes; elsewhere print its recorded output, saying so."""
    if processes_available() and postgres_available():
        live()
        return
    print(f"(recorded on PostgreSQL 15: set SHOPOPS_POSTGRES_URL to run it here)\n{RECORDED[name]}")


def show(name: str, live: Callable[[], Any]) -> Any:
    """Run `live` (which prints) where this notebook can start processes and open database
    files, and return what it returns; in a browser-only notebook, print its recorded output
    and return its recorded run, if it has one (for `stop_map`), else None."""
    if processes_available():
        return live()
    print(f"(recorded run: this notebook cannot start processes)\n{RECORDED[name]}")
    return RECORDED_RUNS.get(name)


# Its quizzes (the right option and every explanation) are kept with the answer keys, loaded on
# first use (`checks.answers`): importing this module loads none of them.
__getattr__ = answers.lazy("lab08", ("CRASH_QUIZ",))
