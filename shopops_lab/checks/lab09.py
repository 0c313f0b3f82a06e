"""Lab 09 (the capstone): the whole worker, one piece of code judged three ways.

The learner writes `async def work(lease, kit)`: one delivery of one case, start to ack
(`shopops_lab.worker.kit` documents the seven calls). The same function is then judged

* by the explorer (09.1): every schedule of two workers on one case within the bound of
  `worker_world.SETTINGS` (a crash before or after any kit call with a lost request or reply
  of a send; a model call that outlasts the lease; a poison case), the shortest breaking
  schedule named, with the line that replays it (`replay`);
* by the simulator (09.2): burst days of `ITEMS` cases for 20 workers with the chapter's
  faults turned up (`day`), the kit's worker replaced by the learner's, judged from the
  event log by the anomaly checker and the provider's ledger: no customer emailed twice,
  nothing lost, every dead letter a poison case with its reason, approvals within limit;
* by real processes (09.3): worker processes running the learner's code on an SQLite file
  (PostgreSQL where SHOPOPS_POSTGRES_URL is set), moved one kit call at a time and
  SIGKILLed or frozen at planned points as in lab 08 (`processes`): every order emailed
  once, a poison order dead-lettered with its reason. Where no process can be started (a
  browser's Python) this judge says so and judges nothing; the other two still run.

`verdicts(work)` shows the three side by side, each with its evidence. A failure names the
broken promise and the evidence, never what to write; `explored.hint(4, work)` (the last
hint) runs the search on the learner's own worker and tells its shortest breaking schedule.
"""

from __future__ import annotations

import dataclasses
import html
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

from shopops_lab import arguments
from shopops_lab.checker import is_approval
from shopops_lab.checks.base import Exercise, NotAttempted, NotJudged, Result, Verdict, Wrong, is_stub, restart
from shopops_lab.checks.driven import Delivery
from shopops_lab.checks.lab07 import LIMITS, burst_day
from shopops_lab.checks.worker_world import MOST_CALLS, SETTINGS, Setting, scenario
from shopops_lab.clock import FakeClock
from shopops_lab.effects import EmailAdapter, SendResult
from shopops_lab.errors import BadArgumentError, KitMisuseError
from shopops_lab.events import EventKind, collector_paused
from shopops_lab.explore import Replayed, explore, refuse
from shopops_lab.explore import replay as replay_schedule
from shopops_lab.metrics import percentile
from shopops_lab.sim import Simulation
from shopops_lab.sim.agents import agent_program
from shopops_lab.sim.faults import FaultRates
from shopops_lab.states import ItemState
from shopops_lab.widgets.quiz import Quiz
from shopops_lab.worker.backend import Drafts, KitBackend, is_poison
from shopops_lab.worker.kit import Finished, Reply
from shopops_lab.worker.queue import Lease, Queue

# What the checks import when first used (a browser's Python may lack sqlite3): the grader
# loads these before any submission, so no judge imports them while it grades.
ON_USE = ("shopops_lab.store.sqlite",)

__all__ = [
    "DAYS",
    "ITEMS",
    "KILL_QUIZ",
    "SHAPE_QUIZ",
    "Day",
    "Verdicts",
    "at_scale",
    "day",
    "explored",
    "in_processes",
    "naive_work",
    "processes",
    "processes_available",
    "replay",
    "verdicts",
]

ITEMS = 3000  # each burst day's cases, the size lab 07's check plays
DAYS = (3, 9)  # the seeds of the graded days: spikes early (9) and mid-morning (3)
# The chapter's faults, turned up ten times over lab 07's burst day, so a day of 3,000 cases
# holds dozens of each: kills and pauses mid call and around a send, dropped replies, lost
# acks, duplicate deliveries, and poison payloads.
CHAOS = FaultRates(
    kill_worker=0.02, pause_worker=0.01, lose_ack=0.01, drop_reply=0.02, deliver_twice=0.01, poison=0.005
)
MAX_STEPS = 300_000  # a sound day of 3,000 cases takes about 18,000 worker wake-ups
_CHUNK = 600.0


# ------------------------------------------------------------------ the kit's naive worker
async def naive_work(lease: Lease, kit: Any) -> None:
    """The kit's first try: draft while heartbeating, email, ack. No checkpoint, and a key
    made fresh for every attempt, so a redelivery cannot be told from new work."""
    draft = []
    while (chunk := await kit.next_chunk()) is not None:
        draft.append(chunk)
        if not await kit.heartbeat():
            return
    await kit.send(f"{lease.case_id}:attempt-{lease.attempt}", "".join(draft))
    await kit.ack()


# ------------------------------------------------------------------ 09.1 the explorer
def replay(work: Any, setting: str, schedule: str) -> Replayed:
    """One schedule of `setting` (as the check's message names both) played with `work`:
    print it for its steps, or call .diagram() for the picture."""
    return replay_schedule(scenario(_setting(setting)), work, schedule)


def _setting(name: str) -> Setting:
    for setting in SETTINGS:
        if setting.name == name:
            return setting
    raise BadArgumentError(
        field="setting",
        problem=f"is {name!r}",
        fix=f"pass one of {', '.join(repr(s.name) for s in SETTINGS)}, as the check's message names it",
    )


def _explored(work: Any) -> str:
    if is_stub(work):
        raise NotAttempted()
    schedules = states = 0
    for setting in SETTINGS:
        found = explore(scenario(setting), work)
        refuse(found, f'lab09.replay(work, "{setting.name}", "{{schedule}}")')
        schedules, states = schedules + found.schedules, states + found.states
    return (
        f"checked all {schedules:,} schedules of two workers on one case, in four settings (a crash before or "
        "after any kit call; a send whose request or reply is lost; a model call that outlasts the lease; a "
        "poison case with a crash): every customer emailed once, nothing acknowledged before its email went out, "
        "a refused heartbeat obeyed at once, every unknown outcome looked up, and the poison case failed on "
        "every delivery, so the queue dead-letters it."
    )


# ------------------------------------------------------------------ 09.2 the simulator
@dataclass(frozen=True)
class Day:
    """One burst day with the learner's worker: what it did to the customers and the queue,
    and the evidence (the checker's report, the double contacts, the dead letters)."""

    seed: int
    items: int
    end: float
    stopped: bool
    done: int
    dead: int
    unsettled: int
    doubled: tuple[str, ...]  # one line per customer emailed more than once
    never_emailed: tuple[str, ...]  # cases acknowledged whose customer never heard
    wrongly_dead: tuple[str, ...]  # dead letters that are not poison, or whose reason is a lease expiry
    poison_done: tuple[str, ...]  # poison cases marked done
    anomalies: tuple[str, ...]  # the checker's, one line each
    approval_p95: float | None
    misused: tuple[str, ...]
    checker: str  # the checker's summary line

    @property
    def replay_line(self) -> str:
        return f"lab09.day(work, seed={self.seed})"

    def problems(self) -> list[str]:
        """Every broken promise, one sentence each, the customer's first."""
        found = []
        if self.misused:
            found.append(f"a worker misused its kit: {self.misused[0]}")
        if self.doubled:
            found.append(f"{len(self.doubled)} customer(s) were emailed more than once: {self.doubled[0]}")
        if self.never_emailed:
            found.append(
                f"{len(self.never_emailed)} case(s) were acknowledged, yet their customer was never emailed: "
                f"{self.never_emailed[0]}"
            )
        if self.stopped:
            found.append(
                f"the day was stopped at t={self.end:,.0f} s after {MAX_STEPS:,} worker wake-ups, with "
                f"{self.unsettled:,} cases unsettled: the workers kept busy without finishing them"
            )
        elif self.unsettled:
            found.append(f"{self.unsettled:,} cases were never settled (neither done nor dead-lettered)")
        if self.poison_done:
            found.append(f"a poison case was marked done: {self.poison_done[0]}")
        if self.wrongly_dead:
            found.append(f"{len(self.wrongly_dead)} dead letter(s) not explained by a poison payload: {self.wrongly_dead[0]}")
        if self.anomalies:
            found.append(f"the checker found: {self.anomalies[0]}")
        if self.approval_p95 is not None and self.approval_p95 > LIMITS.approval_p95:
            found.append(
                f"approvals were late: p95 from arrival to done {self.approval_p95:,.0f} s, over the "
                f"{LIMITS.approval_p95:g} s limit"
            )
        return found

    def lines(self) -> list[str]:
        p95 = "none done" if self.approval_p95 is None else f"p95 {self.approval_p95:,.0f} s"
        return [
            f"cases: {self.done:,} done, {self.dead} dead-lettered, {self.unsettled} unsettled, by t={self.end:,.0f} s",
            f"customers emailed twice: {len(self.doubled)}; acknowledged but never emailed: {len(self.never_emailed)}",
            f"dead letters not explained by a poison payload: {len(self.wrongly_dead)}",
            f"approvals: {p95} (limit {LIMITS.approval_p95:g} s)",
            f"checker: {self.checker}",
        ]

    def __str__(self) -> str:
        head = f"burst day, seed {self.seed}: {self.items:,} cases, 20 workers running your work, chaos turned up"
        return "\n".join([head, *(f"  {line}" for line in self.lines()), f"  replay: {self.replay_line}"])


class _Pool:
    """Each simulated worker's process: its own copy of the answer (fresh after a death)."""

    def __init__(self, work: Any) -> None:
        self.work = work
        self.copies: dict[str, Any] = {}

    def begin(self, name: str, lease: Lease) -> Delivery:
        copy = self.copies.get(name)
        if copy is None:
            copy = self.copies[name] = restart(self.work)
        return Delivery(copy, lease)

    def died(self, name: str) -> None:
        self.copies.pop(name, None)


def day(work: Any, *, seed: int = DAYS[0], items: int = ITEMS) -> Day:
    """Play burst day (`items` cases, 20 workers, the chapter's faults turned up; the gateway
    spike of `seed`, as lab 07 draws it) with `work` as every worker's delivery, and measure it."""
    arguments.whole("seed", seed, None, "pass a whole number, e.g. seed=3")
    arguments.whole("items", items, 1, "pass how many cases arrive, e.g. items=3000", most=100_000)
    misused: list[str] = []
    program = agent_program(_Pool(work), lambda worker, error: misused.append(f"{worker} {error}"))
    scenario_ = dataclasses.replace(burst_day(seed), rates=CHAOS)
    with collector_paused():
        sim = Simulation(scenario_, seed=seed, items=items, program=program)
        t, stopped = 0.0, False
        while not sim.done:
            t += _CHUNK
            sim.run_until(t)
            if sim.steps > MAX_STEPS and not sim.done:
                stopped = True
                break
        return _measured(sim, seed, items, stopped, misused)


def _measured(sim: Simulation, seed: int, items: int, stopped: bool, misused: list[str]) -> Day:
    world = sim.world
    queue = world.queue
    contacts = world.adapter.ledger.contacts()
    per_case = Counter(c.case_id for c in contacts)
    doubled = tuple(
        f"case {case} was emailed {n} times: "
        + ", ".join(f"{c.message_id} at t={c.time:,.0f} by {c.worker_id} under key {c.idem_key}" for c in contacts if c.case_id == case)
        for case, n in sorted(per_case.items())
        if n > 1
    )
    wrongly_dead, poison_done, never_emailed = [], [], []
    for item in queue.items():
        poison = is_poison(item.payload)
        if item.state is ItemState.DONE and not poison and not per_case[item.case_id]:
            never_emailed.append(f"case {item.case_id} (its last delivery was attempt {item.attempts})")
        if item.state is ItemState.DEAD and (not poison or (item.last_error or "").startswith("lease expired")):
            why = "its payload is sound" if not poison else "its last attempt only ran out of lease"
            wrongly_dead.append(f"case {item.case_id} ({why}; last error: {item.last_error})")
        elif item.state is ItemState.DONE and poison:
            poison_done.append(f"case {item.case_id} has a payload no worker can handle, yet it was acknowledged")
    verdict = sim.verdict()
    anomalies = tuple(a.message for a in verdict.anomalies if a.name.value != "double_contact")
    arrived: dict[str, float] = {}
    waits = []
    for row in world.log.rows():
        if row.kind is EventKind.ENQUEUED and is_approval(row.info):
            arrived[row.item_id] = row.time
        elif row.kind is EventKind.ACKED and row.item_id in arrived:
            waits.append(row.time - arrived.pop(row.item_id))
    counts = queue.counts()
    return Day(
        seed=seed,
        items=items,
        end=round(sim.now, 3),
        stopped=stopped,
        done=counts[ItemState.DONE],
        dead=counts[ItemState.DEAD],
        unsettled=counts[ItemState.READY] + counts[ItemState.LEASED],
        doubled=doubled,
        never_emailed=tuple(never_emailed),
        wrongly_dead=tuple(wrongly_dead),
        poison_done=tuple(poison_done),
        anomalies=anomalies,
        approval_p95=percentile(sorted(waits), 95) if waits else None,
        misused=tuple(dict.fromkeys(misused)),
        checker=verdict.summary,
    )


def _day_part(seed: int) -> Callable[[Any], Day]:
    def part(work: Any) -> Day:
        if is_stub(work):
            raise NotAttempted()
        found = day(work, seed=seed)
        problems = found.problems()
        if problems:
            raise Wrong(
                f"on burst day (seed {seed}, {ITEMS:,} cases, 20 workers running your work): {problems[0]}. "
                f"Replay it: print({found.replay_line})",
                tuple(str(found).splitlines()),
            )
        return found

    part.__name__ = f"burst day {seed}"
    return part


def _days_summary(days: list[Day]) -> str:
    done = sum(d.done for d in days)
    dead = sum(d.dead for d in days)
    return (
        f"{len(days)} burst days of {ITEMS:,} cases, 20 workers each running your work among kills, pauses, "
        f"dropped replies, lost acks and duplicate deliveries: {done:,} cases done and {dead} poison cases "
        "dead-lettered with their reason, no customer emailed twice, nothing lost, approvals within "
        f"{LIMITS.approval_p95:g} s, and the checker found nothing."
    )


# ------------------------------------------------------------------ 09.3 real processes
def processes_available() -> bool:
    """False in a browser-only notebook (JupyterLite: no processes), True where workers can be forked."""
    return sys.platform != "emscripten" and hasattr(os, "fork")


_NO_PROCESSES = (
    "this judge needs real processes: run it in JupyterLab (your machine, JupyterHub or Binder). A "
    "browser-only notebook (JupyterLite) cannot start them, so nothing was judged here; the explorer and "
    "the simulator judged your worker above."
)
LEASE_SECONDS = 30.0
MAX_ATTEMPTS = 4


class _Workers:
    """What each real worker process does with a lease: run `work` on it, one kit call at a
    time, stopping after each call where the check may kill or freeze it."""

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
    or, where SHOPOPS_POSTGRES_URL names a server, a schema of its own there."""
    server = os.environ.get("SHOPOPS_POSTGRES_URL")
    if not server:
        return f"sqlite:///{folder / 'shop.db'}?synchronous=normal", lambda: None
    import psycopg

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
    each of its kit calls; W1 frozen after each call while it still holds the order, its lease
    running out, W2 taking the order and finishing, W1 waking up stale; then a poison order,
    whole and with W1 killed after each of its calls. Each order a new one."""
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
        raise NotJudged(_NO_PROCESSES)
    with _Lab(work) as lab:
        for played in _plans(lab):
            lab.record(played)
        return lab.run


def _processes(work: Any) -> str:
    from shopops_lab.chaos.schedules import How
    from shopops_lab.chaos.steps import StepsError

    if not processes_available():
        raise NotJudged(_NO_PROCESSES)
    if is_stub(work):
        raise NotAttempted()
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
        f"SIGKILLed right after each of its kit calls ({counts[How.KILL.value]} kills), and frozen after each "
        f"call while it held the order ({counts[How.FREEZE.value]} freezes: the lease ran out, a second worker "
        "took the order over, the first woke up stale); every order emailed once and acknowledged, the poison "
        "order dead-lettered with its reason."
    )


def _kind(url: str) -> str:
    return "PostgreSQL" if url.startswith("postgres") else "an SQLite file"


# ------------------------------------------------------------------ the exercises
HINTS = (
    "List what can happen between two of your awaits: the worker dies, its lease runs out while the model "
    "writes, another worker takes the case, the provider's answer never arrives. For each, what does the next "
    "delivery find in the checkpoint, and what must it do with it?",
    "The calls: kit.load() and kit.save(dict) keep what a delivery learned; kit.heartbeat() says whether the "
    "case is still yours; kit.send(key, body) returns a SendResult whose status may be UNKNOWN; kit.lookup(key) "
    "asks the provider what went out under key. The key travels in lease.payload. A worker that raises gives "
    "the delivery back.",
    "Shape: load; if the email is confirmed, ack. If an intent is saved, look the key up before anything "
    "else. Otherwise draft, heartbeating after each chunk and returning on a no; save the intent; send; "
    "settle an unknown outcome by lookup, and raise if nothing went out; save the confirmation; ack.",
    "Pass your worker: explored.hint(4, work) searches your own worker and tells its shortest breaking schedule, "
    "step by step (lab09.replay(...).diagram() draws it).",
)


@dataclass(frozen=True, kw_only=True)
class _Capstone(Exercise):
    """An exercise whose last hint, given the learner's worker, is that worker's own counterexample."""

    def hint(self, level: int = 1, *answer: Any) -> None:
        if level == len(self.hints) and len(answer) == 1 and callable(answer[0]):
            print(f"Hint {level} of {len(self.hints)}: {counterexample(answer[0])}")
            return
        super().hint(level)


def counterexample(work: Any) -> str:
    """`work`'s own shortest breaking schedule, in words, or what is left to look at."""
    if is_stub(work):
        return "your work is still the stub: write it first."
    for setting in SETTINGS:
        found = explore(scenario(setting), work).counterexample
        if found is not None:
            steps = "\n".join(f"  {line}" for line in found.lines)
            return (
                f"in the setting {setting.name!r}, this schedule breaks your worker ({len(found.events)} steps): "
                f"{found.problem}\n{steps}\nWhat should your worker have done differently at the step before "
                f"it broke? Draw it: lab09.replay(work, {setting.name!r}, {found.words!r}).diagram()"
            )
    return (
        "no schedule of the explorer's bound breaks your worker. Read the simulator's and the real processes' "
        "verdicts in lab09.verdicts(work): their evidence names the case."
    )


explored = _Capstone(
    id="09.1", title="the whole worker, on every schedule", answer="work", run=_explored, hints=HINTS
)
at_scale = _Capstone(
    id="09.2",
    title="the whole worker, on burst day",
    answer="work",
    parts=tuple(_day_part(seed) for seed in DAYS),
    summary=_days_summary,
    hints=HINTS,
)
in_processes = _Capstone(
    id="09.3", title="the whole worker, in real processes", answer="work", run=_processes, hints=HINTS
)
JUDGES = (explored, at_scale, in_processes)
_TITLES = ("the explorer", "the simulator", "real processes")


@dataclass(frozen=True)
class Verdicts:
    """The three judges' verdicts on one worker, side by side."""

    results: tuple[Result, ...]

    def __str__(self) -> str:
        blocks = []
        for title, result in zip(_TITLES, self.results, strict=True):
            blocks.append(f"--- {title} ---\n{result}")
        return "\n".join(blocks)

    def _repr_html_(self) -> str:
        cells = []
        for title, result in zip(_TITLES, self.results, strict=True):
            mark = {Verdict.CORRECT: "✅", Verdict.INCORRECT: "❌", Verdict.NOT_ATTEMPTED: "⏳", Verdict.NOT_JUDGED: "❔"}
            evidence = "".join(f"<li>{html.escape(line)}</li>" for line in result.evidence[:12])
            cells.append(
                f"<td style='vertical-align:top;width:33%'><b>{mark[result.verdict]} {html.escape(title)}</b>: "
                f"{html.escape(result.verdict.value)}<p>{html.escape(result.message)}</p>"
                + (f"<ol style='font-family:monospace;font-size:85%'>{evidence}</ol>" if evidence else "")
                + "</td>"
            )
        return f"<table><tr>{''.join(cells)}</tr></table>"


def verdicts(work: Any) -> Verdicts:
    """The three judges on `work`, each with its evidence."""
    return Verdicts(tuple(judge.result(work) for judge in JUDGES))


# ------------------------------------------------------------------ the knowledge check
SHAPE_QUIZ = Quiz(
    "The simulator runs twenty of your workers on one thread. Why must every kit call be awaited?",
    [
        "So the calls run faster.",
        "Each await is where your worker waits for the answer, so the driver can run the other workers, kill "
        "this one, or let its lease run out, between two of its calls.",
        "Because Python forbids plain calls inside an async def.",
        "So the kit can use threads.",
    ],
    1,
    [
        "An await adds no speed: it is a place to stop.",
        "One thread, many workers: each stops at its awaits and the driver chooses who goes on. The explorer "
        "stops a worker there to crash it; a real process is SIGKILLed there.",
        "Plain calls are allowed; but a kit call that is not awaited never happens (the kit says so).",
        "No threads anywhere: that is why it also runs in the browser.",
    ],
    hint="What can happen to a worker between two of its kit calls, and who decides?",
)

KILL_QUIZ = Quiz(
    "Your worker saved its intent, sent the email, and was SIGKILLed before it saved the confirmation. What "
    "does the next delivery do?",
    [
        "Sends again under the same key: the provider dedupes it.",
        "Acks at once: the intent proves the email went out.",
        "Looks the key up: if the email went out, it saves the confirmation and acks; if not, it sends under the "
        "same key.",
        "Sends under a new key, since the first attempt failed.",
    ],
    2,
    [
        "A resend built from a new draft is a different request: the provider refuses it, and a provider that "
        "forgets keys sends it. Ask, do not guess.",
        "An intent says an email may have gone out, not that it did: the request may have been lost.",
        "The intent is a question, and the provider knows the answer.",
        "A new key is a new email: the customer hears twice.",
    ],
    hint="What does an intent without a confirmation tell the next delivery?",
)
