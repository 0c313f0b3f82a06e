"""Lab 07: a backpressure policy for burst day, judged by running the day.

The learner writes `my_policy(signals)`, returning `acquire(...)` or `wait(...)`. The
check first asks the policy about a grid of signals, in three different orders, and
holds it to the lab's two rules directly: the same signals always get the same decision
(no memory, no randomness), and no worker is told to wait while work is queued (a wait
holds approvals back with everything else). Then it plays `burst_day` (3,000 items, its
chaos, and a gateway spike whose start, length and strength the seed decides, so a
policy that sheds by the clock instead of by a signal meets a spike it did not expect)
on three seeds, two more than the notebook plays (a right policy passes on every seed,
tests/test_checks_lab07.py plays thirteen), and holds the policy to four promises, each
measured from the event log (a failure names the decisive one first: timed-out model
calls, which slow everything else down):

- work gets done: every item done or dead-lettered, the last one within `finish_by`;
- approvals are not late: 95 of 100 approval resumes done within `approval_p95` seconds
  of arriving (room for a 5x spike from the first minute), and none starved (the checker's
  `approval_starved`: more than STARVED_AFTER seconds in line while less urgent work went ahead);
- the gateway does not melt: at most `timeouts` model calls time out;
- no customer is contacted twice, and the checker finds nothing else.

A day asks the policy once per distinct `Signals` (the rules make it a pure function of them;
in the grader each call crosses to the learner's process) and, after the day, asks a sample
again, so a policy that keeps state is refused whether or not the grid caught it. `scope()`
says all of this in words, and the check's message starts with it.

There is no single right policy, only these limits. `trial(policy, seed=...)` runs one day
and shows every measurement against its limit, so a learner can try ideas before the
check. A failure names the limit, the numbers, the seed and the line that replays it; a
policy that raises is told the seed, the time and the signals it raised on.

Exercise 7.3, the chaos test's assertion, lives in `checks.lab07_chaos` (`lab07.chaos`); 7.4, the
vital signs from a log, in `checks.lab07_vitals` (`lab07.vitals`); 7.5, a failure and an invariant
of the learner's own, in `checks.lab07_invent` (`lab07.invent`, `lab07.trial_fault`).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

from shopops_lab import arguments
from shopops_lab.backpressure import Decision, Signals, as_policy, describe_policy
from shopops_lab.checker import Anomaly, is_approval
from shopops_lab.checker.starvation import DEFAULT_APPROVAL_WAIT_BUDGET
from shopops_lab.checks import answers
from shopops_lab.checks.base import Exercise, Wrong, attempt, attempt_each, call_answer, describe, error_text
from shopops_lab.checks.lab07_chaos import chaos
from shopops_lab.checks.lab07_invent import invent, trial_fault
from shopops_lab.checks.lab07_vitals import vitals
from shopops_lab.errors import ShopOpsError
from shopops_lab.events import EventKind, EventLog, collector_paused
from shopops_lab.metrics import Summary, percentile
from shopops_lab.sim import Simulation
from shopops_lab.sim.faults import Fault, FaultKind
from shopops_lab.sim.scenarios import APPROVAL, BULK, INTAKE, Scenario, get_scenario
from shopops_lab.states import ItemState
from shopops_lab.worker.queue import Priority

__all__ = [
    "ITEMS",
    "LIMITS",
    "PIECES",
    "SEEDS",
    "STARVED_AFTER",
    "Limits",
    "Trial",
    "burst_day",
    "chaos",
    "exercise",
    "invent",
    "knowledge",
    "scope",
    "trial",
    "trial_fault",
    "vitals",
]

SCENARIO = "burst_day"
ITEMS = 3000  # a shorter burst than the story's 10,000, so the check takes about a second
# The notebook plays seed 3, the story's day (its spike 4x from t=900 s); the check two more days,
# whose spikes come first thing (9: 4.5x from t=0) and late (13: from t=2,340 s), so shedding by
# the clock meets a spike it missed.
SEEDS = (3, 9, 13)
CHUNK = 300.0  # simulated seconds between looks at the wake-up count
MAX_STEPS = 200_000  # a sound day of 3,000 items takes about 12,000 worker wake-ups
# One definition across the checker and this lab: an approval is *late* when the p95 of its
# arrival-to-done time is over `Limits.approval_p95`, and *starved* when it waited in line longer
# than this while less urgent work was handed out ahead of it (the checker's approval_starved).
STARVED_AFTER = DEFAULT_APPROVAL_WAIT_BUDGET
_KIND_NAMES = {INTAKE: "intake", BULK: "bulk outreach", APPROVAL: "approvals"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """What ShopOps promises on burst day (the exercise's grading limits)."""

    # Seconds from an approval's arrival to done, for 95 of 100 of them. A spike of 5x from the
    # first minute slows every call, the approvals' own included: a sound policy then reaches
    # about 106 s, so the budget leaves it room (tests/test_checks_lab07.py plays 12 seeds).
    approval_p95: float = 120.0
    timeouts: int = 15  # model calls that may time out in one day (0.5% of 3,000 items)
    finish_by: float = 5400.0  # every item done or dead-lettered by then (90 minutes)

    def __str__(self) -> str:
        return (
            f"every item done or dead-lettered by t={self.finish_by:,.0f} s; approvals: p95 from arrival "
            f"to done <= {self.approval_p95:g} s and none starved; at most {self.timeouts} model calls "
            "timed out; no customer contacted twice"
        )


LIMITS = Limits()


def burst_day(seed: int) -> Scenario:
    """The `burst_day` scenario with the gateway spike of `seed`: when it starts, how long
    it lasts and how much slower the gateway gets all come from the seed, so the graded
    days differ and a policy must read its signals, not the clock. The notebook's seed
    (SEEDS[0]) is the story's own day: its spike is the one the story tells (4x slower from
    t=900 s for 900 s), so the day the lab shows and the day `trial` plays agree."""
    arguments.whole("seed", seed, None, "pass a whole number, e.g. seed=3")
    if seed == SEEDS[0]:
        return get_scenario(SCENARIO)
    rng = random.Random(f"gateway spike {seed}")
    spike = Fault(
        FaultKind.GATEWAY_SPIKE,
        at=float(rng.randrange(0, 2700, 60)),
        duration=float(rng.randrange(420, 1500, 60)),
        factor=round(rng.uniform(2.5, 5.0), 1),
    )
    base = get_scenario(SCENARIO)
    others = tuple(f for f in base.faults if f.kind is not FaultKind.GATEWAY_SPIKE)
    return dataclasses.replace(base, faults=(*others, spike))


@dataclass(frozen=True, kw_only=True, slots=True)
class Trial:
    """One burst day under one policy, measured. Build it with `trial(policy, seed=...)`;
    `problems()` lists the limits it breaks, `str()` shows every measurement."""

    seed: int
    items: int
    policy: str
    capacity: int | None  # calls the gateway serves at full speed
    end: float  # when the run stopped (the day's end if work was left)
    stopped: bool  # cut short: the workers woke up too often
    steps: int  # worker wake-ups and other events handled
    kinds: dict[str, tuple[int, int]]  # kind -> (settled: done or dead-lettered, total)
    done: int
    dead_lettered: int
    finished_at: float | None  # when the last item was settled; None if some never were
    approvals: int  # approval resumes done
    approval_p95: float | None  # seconds from arrival to done, nearest rank
    slowest: tuple[str, float] | None  # (case, seconds) of the slowest approval
    bulk_while_overdue: int  # bulk items finished while an approval was past its budget
    calls: int
    timeouts: int
    gateway_p95: float | None
    max_in_flight: int
    mean_in_flight: float  # call-seconds per second until the last item settled
    double_contacts: int
    anomalies: dict[str, int] = field(default_factory=dict)  # checker anomaly name -> count
    first_anomaly: dict[str, str] = field(default_factory=dict)  # name -> its first message
    replay: str = ""
    spike: str = ""  # the gateway spike of this seed, in words
    limits: Limits = LIMITS

    @property
    def unfinished(self) -> int:
        return sum(total - settled for settled, total in self.kinds.values())

    def problems(self) -> list[str]:
        """Every limit this day breaks, one sentence each (empty when all hold), the decisive
        one first: timed-out model calls explain slow approvals and unfinished work, not the
        other way round."""
        lim, found = self.limits, []
        if self.timeouts > lim.timeouts:
            gateway = "" if self.capacity is None else f" on a gateway that serves {self.capacity} at full speed"
            found.append(
                f"the gateway melted: {self.timeouts} model calls timed out (limit {lim.timeouts}), "
                f"its p95 reached {_s(self.gateway_p95)}, with up to {self.max_in_flight} calls in "
                f"flight{gateway}; every timeout held a worker for the whole timeout and then sent "
                "its item round again"
            )
        if self.stopped:
            found.append(
                f"the workers kept waking up without getting work done: the run was stopped at "
                f"t={self.end:,.0f} s after {self.steps:,} wake-ups (a sound day of {self.items:,} items "
                f"needs about {self.items * 4:,}), with {self.unfinished:,} items unfinished"
            )
        elif self.unfinished:
            short = [
                f"{_KIND_NAMES.get(kind, kind)} {settled:,} of {total:,} ({_pct(settled, total)})"
                for kind, (settled, total) in sorted(self.kinds.items())
                if settled < total
            ]
            found.append(
                f"work left undone: by the end of the day (t={self.end:,.0f} s) {self.unfinished:,} of "
                f"{self.items:,} items were never finished, done so far: {', '.join(short)}; "
                "shedding is for while the gateway is full, not for good"
            )
        if self.approval_p95 is not None and self.approval_p95 > lim.approval_p95:
            case, seconds = self.slowest or ("?", 0.0)
            found.append(
                f"approvals late: their p95 from arrival to done was "
                f"{_past(self.approval_p95, lim.approval_p95)} s, over "
                f"the {lim.approval_p95:g} s limit (the slowest, case {case}, took {seconds:,.0f} s), "
                f"while {self.bulk_while_overdue:,} bulk outreach items were finished during those "
                "overdue waits"
            )
        if self.anomalies.get("approval_starved"):
            found.append(
                f"approvals starved: the checker found {self.anomalies['approval_starved']} approval(s) "
                f"that waited more than {STARVED_AFTER:g} s in line while less urgent work went ahead: "
                f"{self.first_anomaly['approval_starved']}"
            )
        if (
            not self.stopped
            and not self.unfinished
            and self.finished_at is not None
            and self.finished_at > lim.finish_by
        ):
            room = "" if self.capacity is None else f" although the gateway serves {self.capacity} at full speed"
            found.append(
                f"too slow: the last item was settled at t={_past(self.finished_at, lim.finish_by)} s "
                f"({_clock(self.finished_at)}), past the limit of t={lim.finish_by:,.0f} s "
                f"({_clock(lim.finish_by)}); on average only {self.mean_in_flight:.1f} model calls were "
                f"in flight{room}: work was held back that the gateway had room for"
            )
        if self.double_contacts or self.anomalies.get("double_contact"):
            found.append(
                f"customers were contacted twice ({self.double_contacts} case(s)): "
                f"{self.first_anomaly.get('double_contact', '')}".rstrip(": ")
            )
        others = sorted(set(self.anomalies) - {"approval_starved", "double_contact", "lost_item"})
        for name in others:
            found.append(f"the checker found {name} x{self.anomalies[name]}: {self.first_anomaly[name]}")
        return found

    def lines(self) -> list[str]:
        """The measurements, one per promise, marked with whether the limit holds."""
        lim = self.limits
        settled = self.items - self.unfinished
        if self.stopped:
            work = (
                f"stopped at t={self.end:,.0f} s after {self.steps:,} wake-ups; {settled:,} of {self.items:,} settled"
            )
        elif self.unfinished:
            work = f"{settled:,} of {self.items:,} settled by the end of the day (t={self.end:,.0f} s)"
        else:
            work = (
                f"all {self.items:,} settled ({self.done:,} done, {self.dead_lettered} dead-lettered), "
                f"the last at t={_past(_last_settled(self), lim.finish_by)} s (limit {lim.finish_by:,.0f} s)"
            )
        work_ok = (
            not self.stopped
            and not self.unfinished
            and self.finished_at is not None
            and self.finished_at <= lim.finish_by
        )
        waiting = self.kinds.get(APPROVAL, (0, 0))
        approvals_ok = (
            (self.approval_p95 is None or self.approval_p95 <= lim.approval_p95)
            and not self.anomalies.get("approval_starved")
            and waiting[0] == waiting[1]
        )
        dead, left = waiting[0] - self.approvals, waiting[1] - waiting[0]
        approvals = (
            f"{self.approvals} done"
            + (f", {dead} dead-lettered" if dead else "")
            + (f", {left} unfinished" if left else "")
            + f", p95 {_s(self.approval_p95, lim.approval_p95)} from arrival to done "
            f"(limit {lim.approval_p95:g} s)"
        )
        if self.anomalies.get("approval_starved"):
            approvals += f", {self.anomalies['approval_starved']} starved"
        cap = "" if self.capacity is None else f", it serves {self.capacity} at full speed"
        gateway = (
            f"{self.timeouts} of {self.calls:,} calls timed out (limit {lim.timeouts}), p95 "
            f"{_s(self.gateway_p95)}, up to {self.max_in_flight} in flight{cap}"
        )
        others = {k: v for k, v in self.anomalies.items() if k not in ("approval_starved", "lost_item")}
        customers = f"{self.double_contacts} double contacts" + (
            "; checker: " + ", ".join(f"{k} x{v}" for k, v in sorted(others.items())) if others else ""
        )
        customers_ok = not self.double_contacts and not others
        return [
            f"{_mark(work_ok)} work:      {work}",
            f"{_mark(approvals_ok)} approvals: {approvals}",
            f"{_mark(self.timeouts <= lim.timeouts)} gateway:   {gateway}",
            f"{_mark(customers_ok)} customers: {customers}",
        ]

    def __str__(self) -> str:
        head = f"burst day, seed {self.seed}, {self.items:,} items, policy {self.policy}" + (
            f", {self.spike}" if self.spike else ""
        )
        return "\n".join([head, *(f"  {line}" for line in self.lines()), f"  replay: {self.replay}"])


def trial(policy: Any, *, seed: int = SEEDS[0], items: int = ITEMS, limits: Limits = LIMITS) -> Trial:
    """Play burst day (`items` items, with its chaos and the spike of `seed`, see
    `burst_day`) under `policy` and measure it against `limits`. A run whose workers wake
    up more than MAX_STEPS times is cut short."""
    return _day(_Watched(policy), seed, items, limits)


class _Watched:
    """The policy as the simulator calls it, watched: the first signals it raised on, and
    the first time it told a worker to wait while work was queued.

    The lab's rules make a policy a pure function of its signals, so the day asks it once per
    distinct `Signals` value and remembers the answer (`seen`, in the order first asked): a
    learner's policy in the grader is a call across a process boundary, and a repeat costs
    one for nothing. A policy that is not pure is not helped by this: `_audit` asks it again."""

    def __init__(self, policy: Any) -> None:
        self.name = describe_policy(policy)
        self._decide = as_policy(policy)
        self.raised: tuple[Signals, BaseException] | None = None
        self.waited: tuple[Signals, Decision] | None = None
        self.seen: dict[Signals, Decision] = {}
        self.asked = 0  # calls that reached the policy

    def __call__(self, signals: Signals) -> Decision:
        known = self.seen.get(signals)
        if known is not None:
            return known
        self.asked += 1
        try:
            decision = self._decide(signals)
        except Exception as exc:
            self.raised = self.raised or (signals, exc)
            raise
        if decision.waits and signals.depth and self.waited is None:
            self.waited = (signals, decision)
        self.seen[signals] = decision
        return decision


AUDIT = 10  # per decision the day gave: its first and its last observations, asked again after the day


def _audit(policy: Any, watched: _Watched, seed: int) -> int:
    """Ask the policy again, after the day, about observations the day already asked it, the
    latest first: a policy that kept state (a counter, a latch, a moving threshold) answers an
    early observation differently once the day has changed its state. For every decision the
    day gave, its first and last AUDIT observations; returns how many were asked."""
    by_decision: dict[Decision, list[Signals]] = {}
    for signals, decision in watched.seen.items():
        by_decision.setdefault(decision, []).append(signals)
    sample = {s: None for group in by_decision.values() for s in (*group[:AUDIT], *group[-AUDIT:])}
    for signals in sorted(sample, key=lambda s: s.now, reverse=True):
        during = watched.seen[signals]
        again = _ask(policy, signals, f"when the check asked again after burst day (seed {seed})")
        if again != during:
            raise Wrong(
                f"for {_shown(signals)} your policy answered {_said(during)} during burst day (seed {seed}) "
                f"at t={signals.now:,.0f} s, and {_said(again)} when the check asked again after the day: "
                "the same signals must always get the same decision. No memory between calls (a counter, a "
                "flag that stays set, a threshold that moves) and no randomness, so every run replays from "
                "its seed."
            )
    return len(sample)


@dataclass(frozen=True, slots=True)
class _Judged:
    """What a check reads of a day: its log, the checker's anomalies and the queue's and the
    ledger's counts (a `Report` without the vital signs, which the check measures itself)."""

    log: EventLog
    anomalies: tuple[Anomaly, ...]
    done: int
    dead_lettered: int
    double_contacts: int


def _day(watched: _Watched, seed: int, items: int, limits: Limits) -> Trial:
    with collector_paused():  # one pause for the whole day, not one per chunk (see collector_paused)
        sim = Simulation(burst_day(seed), seed=seed, items=items, policy=watched)
        t, stopped = 0.0, False
        while not sim.done:
            t += CHUNK
            sim.run_until(t)
            if sim.steps > MAX_STEPS and not sim.done:
                stopped = True
                break
        counts = sim.world.queue.counts()
        report = _Judged(
            log=sim.log,
            anomalies=sim.verdict().anomalies,
            done=counts[ItemState.DONE],
            dead_lettered=counts[ItemState.DEAD],
            double_contacts=len(sim.world.adapter.ledger.duplicates()),
        )
    spike = next(f for f in sim.scenario.faults if f.kind is FaultKind.GATEWAY_SPIKE)
    return _measure(
        sim,
        report,
        stopped,
        limits,
        policy=watched.name,
        replay=f"run(lab07.burst_day({seed}), seed={seed}, items={items}, policy={watched.name})",
        spike=(f"gateway spike {spike.factor:g}x slower from t={spike.at:,.0f} s for {spike.duration:,.0f} s"),
    )


def _measure(
    sim: Simulation, report: Any, stopped: bool, limits: Limits, *, policy: str, replay: str, spike: str
) -> Trial:
    kind_of: dict[str, str] = {}
    arrived: dict[str, float] = {}  # approval item -> arrival time
    case_of: dict[str, str] = {}
    settled_at: dict[str, float] = {}
    approval_done: dict[str, float] = {}
    bulk_acks: list[float] = []
    calls = timeouts = max_in_flight = 0
    call_seconds = 0.0
    latencies: list[float] = []
    for row in report.log.rows():
        time, kind, item_id, case_id, info = row.time, row.kind, row.item_id, row.case_id, row.info
        if kind is EventKind.ENQUEUED:
            kind_of[item_id] = info.get("kind", "")
            if is_approval(info):
                arrived[item_id] = time
                case_of[item_id] = case_id
        elif kind is EventKind.ACKED or kind is EventKind.DEAD_LETTERED:
            settled_at.setdefault(item_id, time)
            if kind is EventKind.ACKED:
                if item_id in arrived:
                    approval_done.setdefault(item_id, time)
                elif kind_of.get(item_id) == BULK:
                    bulk_acks.append(time)
        elif kind is EventKind.GATEWAY_CALL:
            calls += 1
            seconds = float(info.get("seconds", 0.0))
            call_seconds += seconds
            latencies.append(seconds)
            timeouts += bool(info.get("timed_out"))
            max_in_flight = max(max_in_flight, int(info.get("in_flight", 0)) + 1)  # counted before this one left
    kinds: dict[str, tuple[int, int]] = {}
    for item_id, kind in kind_of.items():
        settled, total = kinds.get(kind, (0, 0))
        kinds[kind] = (settled + (item_id in settled_at), total + 1)
    unfinished = len(kind_of) - len(settled_at)
    finished_at = max(settled_at.values()) if settled_at and not unfinished else None
    waits = sorted((done - arrived[item], item) for item, done in approval_done.items())
    approval_p95 = percentile([w for w, _ in waits], 95) if waits else None
    slowest = (case_of[waits[-1][1]], waits[-1][0]) if waits else None
    overdue = [
        (arrived[item] + limits.approval_p95, approval_done.get(item, sim.now))
        for item in arrived
        if approval_done.get(item, sim.now) - arrived[item] > limits.approval_p95
    ]
    bulk_while_overdue = sum(1 for t in bulk_acks if any(start < t <= end for start, end in overdue))
    anomalies: dict[str, int] = {}
    first: dict[str, str] = {}
    for anomaly in report.anomalies:
        name = anomaly.name.value
        anomalies[name] = anomalies.get(name, 0) + 1
        first.setdefault(name, anomaly.message)
    span = finished_at if finished_at else sim.now
    return Trial(
        seed=sim.seed,
        items=sim.items,
        policy=policy,
        capacity=sim.scenario.gateway_capacity,
        end=round(sim.now, 3),
        stopped=stopped,
        steps=sim.steps,
        kinds=kinds,
        done=report.done,
        dead_lettered=report.dead_lettered,
        finished_at=finished_at,
        approvals=len(waits),
        approval_p95=approval_p95,
        slowest=slowest,
        bulk_while_overdue=bulk_while_overdue,
        calls=calls,
        timeouts=timeouts,
        gateway_p95=Summary.of(latencies).p95,
        max_in_flight=max_in_flight,
        mean_in_flight=call_seconds / span if span else 0.0,
        double_contacts=report.double_contacts,
        anomalies=anomalies,
        first_anomaly=first,
        replay=replay,
        spike=spike,
        limits=limits,
    )


# ------------------------------------------------------------------ exercise 7.1
_PROBE = Signals(gateway_p95=0.0, depth=ITEMS, in_flight=0, now=0.0)


def _grid() -> list[Signals]:
    """Signals a worker may bring, from a calm gateway to a melting one, early and late."""
    return [
        Signals(gateway_p95=p95, depth=depth, in_flight=in_flight, now=now)
        for p95 in (0.0, 15.0, 45.0, 75.0, 120.0)
        for depth in (0, 40, ITEMS)
        for in_flight in (0, 5, 9, 10, 11, 20)
        for now in (0.0, 1200.0, 4000.0)
    ]


def _shown(signals: Signals) -> str:
    """Signals as a learner can type them back in, without float noise."""
    return (
        f"Signals(gateway_p95={round(signals.gateway_p95, 3)!r}, depth={signals.depth}, "
        f"in_flight={signals.in_flight}, now={round(signals.now, 3)!r})"
    )


def _said(decision: Decision) -> str:
    """A decision as the learner would have written it."""
    if decision.waits:
        return f"wait({decision.wait_seconds:g})"
    if decision.max_priority is None:
        return "acquire()"
    return f"acquire(max_priority=Priority.{Priority(decision.max_priority).name})"


def _ask(policy: Any, signals: Signals, when: str) -> Decision:
    """One decision, as a worker would ask for it; a crash or a wrong return is the learner's."""
    return _judged(*attempt(policy, signals), signals, when)


def _judged(decision: Any, err: Exception | None, signals: Signals, when: str) -> Decision:
    """What the policy answered on `signals`, if it is a decision: a crash or a wrong return is the learner's."""
    if isinstance(err, ShopOpsError):
        raise Wrong(f"your policy was refused {when}, on {_shown(signals)}: {err}")
    if err is not None:  # the learner's code: report it, and what it was given
        raise Wrong(f"your policy raised {error_text(err)} {when}, on {_shown(signals)}.")
    if type(decision) is not Decision:
        raise Wrong(
            f"your policy returned {describe(decision)} {when}, for {_shown(signals)}; return a decision: "
            "acquire(), acquire(max_priority=...) or wait(seconds), from shopops_lab.backpressure."
        )
    return decision


def _rules(policy: Any) -> int:
    """The lab's two rules, asked directly on a grid of signals in three orders: the same
    signals get the same decision, and nobody waits while work is queued. Returns how
    many questions were asked."""
    grid = _grid()
    shuffled = list(grid)
    random.Random(7).shuffle(shuffled)
    asked = [
        (order, signals)
        for order, in_order in (("in order", grid), ("in reverse", grid[::-1]), ("shuffled", shuffled))
        for signals in in_order
    ]
    when = "when the check asked about the rules"
    # One message for all of them (the questions do not depend on the answers); judged in order,
    # each as if asked alone, up to the first that raised.
    decisions, err = attempt_each(policy, [((signals,), {}) for _, signals in asked])
    answered = [(decision, None) for decision in decisions] + ([(None, err)] if err is not None else [])
    first: dict[Signals, Decision] = {}
    for (order, signals), (said, raised) in zip(asked, answered):  # nothing after one that raised was asked
        decision = _judged(said, raised, signals, when)
        earlier = first.setdefault(signals, decision)
        if decision != earlier:
            raise Wrong(
                f"for {_shown(signals)} your policy answered {_said(earlier)} once and {_said(decision)} "
                f"when asked again ({order}, after other signals): the same signals must always get the "
                "same decision. No memory between calls and no randomness, so every run replays from its "
                "seed."
            )
        if decision.waits and signals.depth:
            raise Wrong(
                f"for {_shown(signals)} your policy answered {_said(decision)}: a worker that waits takes "
                f"nothing, approval resumes included, while {signals.depth:,} items are queued. The "
                "rules say approvals are never held back: shed other work, never approvals."
            )
    return 3 * len(grid)


def scope() -> str:
    """What exercise 7.1 judges a policy over, in words: the bound of its search."""
    grid = _grid()
    return (
        f"the rules on {len(grid)} signals ({len({s.gateway_p95 for s in grid})} gateway p95s x "
        f"{len({s.depth for s in grid})} queue depths x {len({s.in_flight for s in grid})} in-flight counts x "
        f"{len({s.now for s in grid})} times) asked in three orders, then {len(SEEDS)} burst days of "
        f"{ITEMS:,} items (seeds {', '.join(map(str, SEEDS))}), each with a gateway spike of its own (start, "
        "length, strength) and the day's random chaos (kills, freezes, lost acks, dropped replies, duplicate "
        f"deliveries, poison), every distinct signal of a day asked once and up to {2 * AUDIT} per decision "
        "asked again after it"
    )


def _rules_part(policy: Any) -> int:
    """The first part: the stub shows up here, before anything is played; then the rules.
    What it finds: how many questions it asked."""
    _ask(policy, _PROBE, "when a worker asked it at t=0")
    return _rules(policy)


def _day_part(seed: int) -> Any:
    """The part that plays burst day `seed` and holds the policy to the day's promises; what it
    finds: the questions it asked and the measurements the summary quotes (plain numbers)."""

    def played(policy: Any) -> dict[str, float]:
        watched = _Watched(policy)
        try:
            day = _day(watched, seed, ITEMS, LIMITS)
        except Exception:  # noqa: BLE001 - the policy's, when it raised; the replay line shows it
            if watched.raised is None:
                raise
            signals, err = watched.raised
            what = f"was refused: {err}" if isinstance(err, ShopOpsError) else f"raised {error_text(err)}"
            raise Wrong(
                f"during burst day (seed {seed}) at t={signals.now:,.0f} s your policy {what}, on {_shown(signals)}.",
                [f"replay the day: print(lab07.trial({watched.name}, seed={seed}))"],
            ) from None
        if watched.waited is not None:
            signals, decision = watched.waited
            raise Wrong(
                f"during burst day (seed {seed}) at t={signals.now:,.0f} s your policy answered "
                f"{_said(decision)} for {_shown(signals)}: a worker that waits takes nothing, approval resumes "
                f"included, while {signals.depth:,} items are queued. The rules say approvals are never "
                "held back: shed other work, never approvals."
            )
        asked = watched.asked + _audit(policy, watched, seed)
        found = day.problems()
        if found:
            others = [f"also: {problem}" for problem in found[1:]]
            raise Wrong(
                f"{found[0]} (seed {seed}, {day.items:,} items, {day.spike}).",
                [
                    *others,
                    "what the run measured:",
                    *(f"  {line}" for line in day.lines()),
                    f"see it again: print(lab07.trial({day.policy}, seed={seed}))",
                    f"replay the whole run: {day.replay}",
                    f"what the check covers: {scope()}",
                ],
            )
        return {
            "asked": asked,
            "approval_p95": day.approval_p95 or 0.0,
            "timeouts": day.timeouts,
            "settled": _last_settled(day),
        }

    return played


def _summary(found: list[Any]) -> str:
    """The check's message once every part passed: the rules' questions, then each day's."""
    asked, days = found[0] + sum(day["asked"] for day in found[1:]), found[1:]
    return (
        f"checked {scope()}. The same signals always got the same decision ({asked:,} questions) and no worker "
        f"was told to wait while work was queued; in {len(days)} burst days ({ITEMS:,} items, seeds "
        f"{', '.join(map(str, SEEDS))}, each with its own gateway spike and chaos) approvals took at most "
        f"{max(day['approval_p95'] for day in days):.0f} s (p95, limit {LIMITS.approval_p95:g} s), at most "
        f"{max(day['timeouts'] for day in days)} calls timed out (limit {LIMITS.timeouts}), every item was settled "
        f"by t={max(day['settled'] for day in days):,.0f} s (limit {LIMITS.finish_by:,.0f} s), and no customer "
        "was contacted twice."
    )


exercise = Exercise(
    id="07.1",
    title="a backpressure policy for burst day",
    answer="my_policy",
    parts=(_rules_part, *(_day_part(seed) for seed in SEEDS)),  # judged apart on idle slots, one verdict
    summary=_summary,
    hints=(
        (
            "Look at the gateway, not the queue: past the number of calls it serves at full speed, another "
            "call buys no throughput, only slower calls and timeouts. Which signal says that is happening "
            "now, rather than after the fact?"
        ),
        (
            "signals.in_flight counts the model calls running right now; signals.gateway_p95 describes the "
            "last 50 calls that finished, so it lags. acquire(max_priority=Priority.APPROVAL) takes approval "
            "resumes only, acquire() takes anything, wait(seconds) takes nothing. lab07.trial(my_policy) shows "
            "every measurement for one day."
        ),
        (
            "One condition decides: is the gateway already serving as many calls as it can at full speed? Then a "
            "worker takes only the work that must not wait; otherwise, anything. A condition on what is happening "
            "now, not on calls that finished minutes ago, and never a wait while work is queued."
        ),
    ),
)


# ------------------------------------------------------------------ exercise 7.2: the contract
PIECES = {
    "at_least_once_delivery": "the queue hands an item out again until it is acked or dead-lettered",
    "idempotency_keys": "every customer-facing effect carries a key; a repeat returns the first result",
    "fencing_tokens": "every claim gets a larger token; the store refuses writes made under an older one",
    "checkpoints": "confirmed steps and receipts are written down, so a redelivery resumes instead of redoing",
    "exactly_once_delivery": "the broker hands each item to exactly one worker, exactly once",
    "retry_until_success": "a failing item is retried until it succeeds, however long that takes",
    "long_leases": "leases long enough that no worker ever loses one while it is still working",
}


def _contract(the_contract: Any) -> str:
    picked = call_answer(the_contract)
    if type(picked) not in (set, frozenset, list, tuple):  # exact types: a look-alike's == proves nothing
        raise Wrong(
            f"the_contract() returned {describe(picked)}; return a set of labels from lab07.PIECES, "
            "e.g. {'label_one', 'label_two'}."
        )
    odd = next((p for p in picked if type(p) is not str), None)
    if odd is not None:
        raise Wrong(
            f"the_contract() returned a {type(picked).__name__} holding {describe(odd)}; every label is a "
            "plain str, a key of lab07.PIECES."
        )
    unknown = sorted(p for p in picked if p not in PIECES)
    if unknown:
        raise Wrong(
            f"{', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not among the labels; "
            f"use the keys of lab07.PIECES: {', '.join(PIECES)}."
        )
    key = answers.load("lab07")  # loaded to judge, never with the module
    chosen = set(picked)
    extra = sorted(chosen - key.CONTRACT)
    if extra:
        raise Wrong(f"{extra[0]!r} is not part of the contract: {key.WHY_NOT[extra[0]]}")
    missing = sorted(key.CONTRACT - chosen)
    if missing:
        if len(missing) == 1:
            raise Wrong(f"1 piece is missing: {key.MISSING[missing[0]]}.")
        raise Wrong(f"{len(missing)} pieces are missing. One of them: {key.MISSING[missing[0]]}.")
    return (
        "at-least-once delivery brings every case back after a crash, and idempotency keys, fencing tokens "
        "and checkpoints make the repeat harmless: that is the contract, since exactly-once is not on offer."
    )


knowledge = Exercise(
    id="07.2",
    title="the contract that survives a crash",
    answer="the_contract",
    run=_contract,
    hints=(
        (
            "Go through the labs: what did each one add so that a worker could die anywhere, at any moment, "
            "without losing a case or contacting a customer twice?"
        ),
        (
            "One piece makes sure nothing is lost; the others make a repeat harmless, each for a different kind "
            "of repeat: a send, a stale write, a step already done. Leave out whatever promises that repeats "
            "never happen."
        ),
    ),
)


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _s(seconds: float | None, limit: float | None = None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:,.0f} s" if limit is None else f"{_past(seconds, limit)} s"


def _last_settled(day: Trial) -> float:
    """When `day`, neither stopped nor left unfinished, settled its last item: a day holds at
    least one item (`trial` refuses 0), and it was settled then."""
    assert day.finished_at is not None, "a day neither stopped nor unfinished has settled all its items"
    return day.finished_at


def _past(value: float, limit: float) -> str:
    """`value` rounded, but never so far that a value over `limit` reads as the limit
    itself ("90.4", not "90", against a limit of 90)."""
    for digits in (0, 1, 2, 3):
        text = f"{value:,.{digits}f}"
        if value <= limit or float(text.replace(",", "")) > limit:
            return text
    return f"{value:,}"


def _clock(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def _mark(ok: bool) -> str:
    return "✓" if ok else "✗"


# Its quizzes (the right option and every explanation) are kept with the answer keys, loaded on
# first use (`checks.answers`): importing this module loads none of them.
__getattr__ = answers.lazy("lab07", ("DOUBLE_POOL_QUIZ", "VITAL_SIGNS_QUIZ"))
