"""Lab 09's real processes: the learner's `work` in forked worker processes on a database,
each moved one kit call at a time, SIGKILLed or frozen on a plan (lab 08's machinery).

A worker process (`chaos.steps.Stepper`) runs `work` on each lease it acquires, through a kit
whose calls act on the shared database (an SQLite file; PostgreSQL where SHOPOPS_POSTGRES_URL
names a server, in a schema of its own, dropped afterwards): after each call that changes
something (`STOPS`) it reports and waits for the supervisor's word, so every schedule happens
exactly as planned, whatever the machine's speed (`_plans`: the delivery whole, a SIGKILL right
after each of those calls, a freeze there while the order is still the worker's, its lease
running out, a second worker taking the order and finishing, the first waking up stale; then a
poison order). What decides is what
the database holds: each order's item and the emails its customer got. In the grader each
forked worker gets a learner process of its own, where its copy of `work` runs.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

from shopops_lab.checks.base import NotJudged, Wrong, restart
from shopops_lab.checks.driven import Delivery
from shopops_lab.checks.worker_world import MOST_CALLS
from shopops_lab.clock import FakeClock
from shopops_lab.effects import EmailAdapter, SendResult
from shopops_lab.errors import KitMisuseError
from shopops_lab.states import ItemState
from shopops_lab.worker.backend import Drafts, KitBackend
from shopops_lab.worker.kit import Finished, Reply
from shopops_lab.worker.queue import Lease, Queue

__all__ = ["NO_PROCESSES", "ProcessRun", "judged", "processes", "processes_available", "story"]


def processes_available() -> bool:
    """False in a browser-only notebook (JupyterLite: no processes), True where workers can be forked."""
    return sys.platform != "emscripten" and hasattr(os, "fork")


NO_PROCESSES = (
    "this judge needs real processes: run it in JupyterLab (your machine, JupyterHub or Binder). A "
    "browser-only notebook (JupyterLite) cannot start them, so nothing was judged here; the explorer and "
    "the simulator judged your worker above."
)
# The calls after which a worker stops for the check's word: those that change what another worker or
# the customer sees (a heartbeat moves the lease). A process killed or frozen right after a read
# (load, next_chunk, lookup) leaves the database as one stopped after the call before it did.
STOPS = ("heartbeat", "save", "send", "ack")
LEASE_SECONDS = 30.0
MAX_ATTEMPTS = 4


class _Workers:
    """What each real worker process does with a lease: run `work` on it, one kit call at a
    time, stopping after each call that changes something, where the check may kill or freeze it."""

    def __init__(self, work: Any) -> None:
        self.work = work

    def prepare(self, store: Any, queue: Queue, pause: Any, name: str) -> Callable[[Lease], Any]:
        kit = KitBackend(queue=queue, adapter=EmailAdapter(clock=queue.clock, store=store), model=Drafts(2))
        answer = restart(self.work)

        def handle(lease: Lease) -> None:
            delivery = Delivery(answer, lease)
            reply = Reply()
            for _ in range(MOST_CALLS + 1):
                call = delivery.step(reply)
                if isinstance(call, Finished):
                    return
                reply = kit.perform(call, lease)
                answer_words = f"refused: {reply.refused.kind}" if reply.refused else _value(reply.value)
                pause.note(f"{call.words} -> {answer_words}")
                if call.name in STOPS:
                    pause.at(f"after_{call.name}")
            raise KitMisuseError(
                problem=f"your worker made {MOST_CALLS} kit calls in one delivery and was stopped",
                fix="end every delivery: ack, return, or raise",
            )

        return handle


def _value(value: Any) -> str:
    if isinstance(value, SendResult):
        return value.status.value + (f" {value.message_id}" if value.message_id else "")
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass
class ProcessRun:
    """What the real worker processes did: per order its schedule, how it ended, its
    customer's emails, and the story of each schedule."""

    orders: dict[str, str] = field(default_factory=dict)  # order -> its schedule's id
    ends: dict[str, str] = field(default_factory=dict)  # order -> its item's final state
    errors: dict[str, str] = field(default_factory=dict)  # order -> the last error of a dead item
    emails: dict[str, int] = field(default_factory=dict)  # order -> emails that reached its customer
    poison: set[str] = field(default_factory=set)
    stories: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def problem(self, order: str) -> str | None:
        end, emails, schedule = self.ends[order], self.emails.get(order, 0), self.orders[order]
        if emails > 1:
            return f"order {order}'s customer was emailed {emails} times (schedule {schedule})"
        if order in self.poison:
            if end == ItemState.DONE.value:
                return f"poison order {order} was acknowledged as done (schedule {schedule})"
            if end == ItemState.DEAD.value and self.errors.get(order, "").startswith("lease expired"):
                return (
                    f"poison order {order} died of expired leases, with no reason a person could act on "
                    f"(schedule {schedule}): its deliveries returned quietly instead of failing"
                )
            return None
        if end == ItemState.DEAD.value:
            return f"order {order} ended in the dead-letter queue (schedule {schedule}): {self.errors.get(order, '')}"
        if end != ItemState.DONE.value:
            return f"order {order} was never finished (schedule {schedule})"
        if emails == 0:
            return f"order {order} was acknowledged, but its customer was never emailed (schedule {schedule})"
        return None

    def lines(self) -> list[str]:
        """One line per order: its schedule, how it ended, and how many emails its customer got."""
        rows = []
        for order, schedule in self.orders.items():
            kind = "poison order" if order in self.poison else "order"
            emails = self.emails.get(order, 0)
            rows.append(
                f"{kind} {order}: schedule {schedule:<10} item {self.ends[order]:<5} "
                f"{emails} email{'s' if emails != 1 else ''}"
            )
        return rows


def story(run: ProcessRun) -> str:
    """A real-process run, order by order, then what went wrong (or that nothing did)."""
    problems = [found for order in run.orders if (found := run.problem(order))]
    return "\n".join([*run.lines(), *(problems or ["every order emailed once; the poison orders dead-lettered."])])


class _Lab:
    """A fresh database, the check's view of it, and the worker processes that run `work`."""

    def __init__(self, work: Any) -> None:
        from shopops_lab.chaos.schedules import Player
        from shopops_lab.chaos.steps import Stepper
        from shopops_lab.store import open_store

        self.folder = Path(tempfile.mkdtemp(prefix="shopops-lab09-"))
        self.url, self._drop = _database(self.folder)
        self.store = open_store(self.url)
        self.queue = Queue(store=self.store, lease_seconds=LEASE_SECONDS, max_attempts=MAX_ATTEMPTS, clock=FakeClock())
        self.adapter = EmailAdapter(store=self.store)
        self.steps = Stepper(self.url, _Workers(work), lease_seconds=LEASE_SECONDS, max_attempts=MAX_ATTEMPTS)
        self.player = Player(self.steps, self.queue)
        self.run = ProcessRun()
        self._numbers = count(1)
        self._order_of: dict[str, str] = {}

    def new_item(self, poison: bool = False) -> str:
        n = next(self._numbers)
        order = f"{'P' if poison else 'O'}-{1000 + n}"
        payload = {"to": f"{order.lower()}@customers.example", "schema": 0 if poison else 1}
        if not poison:
            payload["idem_key"] = f"{order}:email:1"
        item_id = self.queue.enqueue(case_id=order, tenant_id="store_northline", kind="contact_send", payload=payload)
        self._order_of[item_id] = order
        if poison:
            self.run.poison.add(order)
        return item_id

    def record(self, played: Any) -> str:
        order = self._order_of[played.item_id]
        item = self.queue.item(played.item_id)
        self.run.orders[order] = played.schedule.id
        self.run.ends[order] = item.state.value
        if item.last_error:
            self.run.errors[order] = item.last_error
        self.run.emails[order] = len(self.adapter.ledger.contacts(order))
        self.run.stories[order] = played.story
        return order

    def __enter__(self) -> _Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.steps.close()
            self.store.close()
        finally:
            self._drop()
            shutil.rmtree(self.folder, ignore_errors=True)


def _database(folder: Path) -> tuple[str, Callable[[], None]]:
    """A new, empty database for one run, and how to remove it: an SQLite file in `folder`,
    or, where SHOPOPS_POSTGRES_URL names a server and psycopg can reach it (as lab 08's
    08.3 asks), a schema of its own there."""
    from shopops_lab.checks.lab08_sql import postgres_available

    if not postgres_available():
        return f"sqlite:///{folder / 'shop.db'}?synchronous=normal", lambda: None
    import psycopg

    server = os.environ["SHOPOPS_POSTGRES_URL"]

    schema = f"shopops_lab09_{os.getpid()}_{next(_SCHEMAS)}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")

    def drop() -> None:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")

    return f"{server}{'&' if '?' in server else '?'}options=-csearch_path%3D{schema}", drop


_SCHEMAS = count(1)


def _plans(lab: _Lab) -> Iterator[Any]:
    """Every schedule of the bound, shortest first: the delivery whole; W1 SIGKILLed right after
    it acquired and after each of its kit calls that changes something (`STOPS`); W1 frozen there
    while it still holds the order, its lease
    running out, W2 taking the order and finishing, W1 waking up stale; then a poison order,
    whole and with W1 killed at each of its stops. Each order a new one."""
    from shopops_lab.chaos.schedules import How, Schedule

    base = lab.player.play(Schedule(How.RUN), lab.new_item())
    yield base
    path = base.first
    for n in range(len(path)):
        yield _same(lab.player.play(Schedule(How.KILL, n), lab.new_item()), path, n)
    for n, step in enumerate(path):
        if step.held and step.point != "after_handler":
            yield _same(lab.player.play(Schedule(How.FREEZE, n), lab.new_item()), path, n)
    poisoned = lab.player.play(Schedule(How.RUN), lab.new_item(poison=True))
    yield poisoned
    for n in range(len(poisoned.first)):
        yield lab.player.play(Schedule(How.KILL, n), lab.new_item(poison=True))


def _same(played: Any, path: Any, n: int) -> Any:
    from shopops_lab.chaos.steps import StepsError

    stop = played.stop
    if stop is None or stop.point != path[n].point:
        raise StepsError(
            reason=f"W1 did not stop at its call {n} ({path[n].point}) as planned from its first run",
            fix="make the worker do the same on every first delivery (no randomness, no clock), then run it again",
        )
    return played


def processes(work: Any) -> ProcessRun:
    """Run `work` in real worker processes on a fresh database, one order per schedule (see
    `_plans`), and return what each order did."""
    if not processes_available():
        raise NotJudged(NO_PROCESSES)
    with _Lab(work) as lab:
        for played in _plans(lab):
            lab.record(played)
        return lab.run


def judged(work: Any) -> str:
    """The check's run: every schedule, stopping at the first order that went wrong (`Wrong`,
    with its schedule's story), or the summary of what was checked; a planned stop that did not
    happen voids the run (`NotJudged`)."""
    from shopops_lab.chaos.schedules import How
    from shopops_lab.chaos.steps import StepsError

    counts: Counter[str] = Counter()
    try:
        with _Lab(work) as lab:
            for played in _plans(lab):
                order = lab.record(played)
                counts[played.schedule.how.value] += 1
                problem = lab.run.problem(order)
                if problem:
                    raise Wrong(
                        f"in real worker processes on {_kind(lab.url)}: {problem}.",
                        played.story,
                    )
    except StepsError as void:
        raise NotJudged(f"this run is void, so nothing was judged: {void}") from None
    total = sum(counts.values())
    return (
        f"checked all {total} schedules of real worker processes on {_kind(lab.url)}: your worker run whole, "
        f"SIGKILLed right after it acquired and after each heartbeat, save, send and ack "
        f"({counts[How.KILL.value]} kills), and frozen at each of those stops while it held the order "
        f"({counts[How.FREEZE.value]} freezes: the lease ran out, a second worker took the order over, the first "
        "woke up stale); every order emailed once and acknowledged, the poison order dead-lettered with its reason."
    )


def _kind(url: str) -> str:
    return "PostgreSQL" if url.startswith("postgres") else "an SQLite file"
