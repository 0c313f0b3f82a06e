"""Lab 03: a lease policy for a worker whose model call may take 120 s (03.1), and the
heartbeat loop that uses it (03.3), each judged by exploring every situation of a stated
grid (`shopops_lab.explore`).

03.1: the learner returns a `HeartbeatPolicy`. There is no single right answer, only
limits: a healthy worker must keep its lease through a call of up to 120 s whatever
happens to its heartbeats within the bound (any pattern of lost ones, up to what the policy
promises and at least one in a row, and any one held up a few seconds), a dead worker's
case must come back within 90 s, and heartbeats must not flood the queue. Only the
policy's three values take part (read once: a subclass or a method of its own changes
nothing); the lease follows the kit's queue's rules, on a virtual clock. A failure names
the broken promise, then the shortest situation that breaks it and the line that replays it.
"""

from __future__ import annotations

import copy
import functools
import itertools
from dataclasses import dataclass
from typing import Any

from shopops_lab import arguments
from shopops_lab.checks import answers
from shopops_lab.checks.base import Exercise, Wrong, call_answer, describe, error_text, named
from shopops_lab.clock import FakeClock
from shopops_lab.effects import EmailAdapter
from shopops_lab.errors import ShopOpsError
from shopops_lab.explore import Bound, Move, Replayed, Run, Scenario, explore, refuse
from shopops_lab.explore import replay as replay_schedule
from shopops_lab.latency import LatencyModel
from shopops_lab.states import ItemState
from shopops_lab.widgets.ttl import TtlReport, evaluate_policy, grade_policy
from shopops_lab.worker.queue import InMemoryQueue, Lease

__all__ = [
    "LIMITS",
    "MODEL",
    "HeartbeatPolicy",
    "Limits",
    "exercise",
    "loop",
    "loop_scenario",
    "policy_scenario",
    "problems",
    "replay",
    "replay_policy",
]

MODEL = LatencyModel(p50=8, p99=90, max=120)  # the drafting model of the story
RUNS = 2000
MISS_PROBABILITY = 0.01  # one heartbeat in a hundred is lost on the way


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """What ShopOps asks of a lease policy (the exercise's grading limits)."""

    max_spurious: float = 0.001  # share of healthy calls allowed to lose their lease
    max_detection: float = 90.0  # seconds a dead worker's case may wait, at worst
    max_heartbeats_per_min: float = 12.0  # per busy worker
    min_tolerance: int = 1  # lost heartbeats in a row the policy must survive
    max_late: int = 5  # seconds one heartbeat may be held up (a stalled worker, a slow network)

    @property
    def min_interval(self) -> float:
        """The shortest heartbeat interval the load limit allows."""
        return 60.0 / self.max_heartbeats_per_min

    def __str__(self) -> str:
        return (
            f"a healthy call of up to {MODEL.max:g} s keeps its lease; a dead worker's case waits "
            f"<= {self.max_detection:g} s; <= {self.max_heartbeats_per_min:g} heartbeats per worker "
            f"per minute; survives >= {self.min_tolerance} lost heartbeat(s) in a row (and as many as the "
            f"policy promises), and one heartbeat held up to {self.max_late} s"
        )


LIMITS = Limits()


@dataclass(frozen=True, kw_only=True, slots=True)
class HeartbeatPolicy:
    """How a worker keeps its lease through a long call: the lease time `ttl`, how often it
    renews (`heartbeat_interval` seconds, or None for never), and how many heartbeats in a
    row it promises to lose without losing the lease (`missed_tolerance`)."""

    ttl: float
    heartbeat_interval: float | None
    missed_tolerance: int

    def __post_init__(self) -> None:
        arguments.seconds("ttl", self.ttl, "pass the lease time in seconds, a positive number, e.g. ttl=30")
        if self.heartbeat_interval is not None:
            arguments.seconds(
                "heartbeat_interval",
                self.heartbeat_interval,
                "pass the seconds between heartbeats, a positive number, or None for no heartbeats",
            )
        arguments.whole(
            "missed_tolerance",
            self.missed_tolerance,
            0,
            "pass a whole number >= 0: how many heartbeats in a row may be lost",
        )

    def evaluate(
        self,
        latency: LatencyModel = MODEL,
        *,
        seed: int = 0,
        runs: int = RUNS,
        miss_probability: float = MISS_PROBABILITY,
    ) -> TtlReport:
        """Simulate this policy against `latency` (the story's model by default)."""
        return evaluate_policy(
            latency,
            self.ttl,
            self.heartbeat_interval,
            self.missed_tolerance,
            seed=seed,
            runs=runs,
            miss_probability=miss_probability,
        )

    def __str__(self) -> str:
        beat = "no heartbeats" if self.heartbeat_interval is None else f"heartbeat every {self.heartbeat_interval:g} s"
        return f"ttl {self.ttl:g} s, {beat}, tolerates {self.missed_tolerance} lost in a row"


def problems(report: TtlReport, limits: Limits = LIMITS) -> list[str]:
    """Every limit `report` breaks, one sentence each (empty when the policy is fine).
    Lost heartbeats are judged by what the TTL and interval survive, not by the promise."""
    _, reasons = grade_policy(
        report,
        max_spurious=limits.max_spurious,
        max_detection=limits.max_detection,
        max_heartbeats_per_min=limits.max_heartbeats_per_min,
    )
    h, ttl = report.heartbeat_interval, report.ttl
    if h is not None and (report.absorbs_missed or 0) < limits.min_tolerance:
        reasons.append(
            f"with a heartbeat every {h:g} s, a {ttl:g} s lease survives {report.absorbs_missed or 0} "
            f"lost heartbeat(s) in a row, and about {report.miss_probability:.0%} of heartbeats are lost "
            f"on the way: plan for at least {limits.min_tolerance}."
        )
    return reasons


def _values(policy: HeartbeatPolicy) -> HeartbeatPolicy:
    """The policy's three values, read once into a plain HeartbeatPolicy: nothing the
    learner's object does (a subclass, a method of its own) takes part in judging it."""
    try:
        return HeartbeatPolicy(
            ttl=policy.ttl, heartbeat_interval=policy.heartbeat_interval, missed_tolerance=policy.missed_tolerance
        )
    except ShopOpsError as err:
        raise Wrong(f"your policy's values are not a lease policy: {err}") from None


# The check explores the lease, by the kit's queue's rules, one heartbeat at a time: W1 holds O-1001
# under the policy's TTL while its model call runs (up to MODEL.max s: the longest call is
# the hardest to keep a lease through, and a lease that runs out at t=x is lost by every
# call longer than x), and at every heartbeat the schedule picks: it lands, it is lost (up
# to `missed_tolerance` in a row, at least LIMITS.min_tolerance), or, once per call, it is
# held up 1 to LIMITS.max_late s; or W1 dies there, and W7 asks for work the second the
# lease runs out. Situations that reach the same lease are merged (`explore`), so every
# pattern is covered and counted exactly. The load limit is arithmetic, checked first.


def _tolerance(policy: HeartbeatPolicy) -> int:
    """Lost heartbeats in a row the policy must survive: its promise, and at least the limit."""
    return max(LIMITS.min_tolerance, policy.missed_tolerance)


def _policy_bound(policy: HeartbeatPolicy) -> Bound:
    m = _tolerance(policy)
    beats = (
        "no heartbeats" if policy.heartbeat_interval is None else f"any pattern of lost heartbeats, up to {m} in a row"
    )
    return Bound(
        words=f"a model call of up to {MODEL.max:g} s under your policy ({policy}): {beats}, any one "
        f"heartbeat held up 1 to {LIMITS.max_late} s, and W1 dying at any heartbeat with W7 asking for work "
        "the second the lease runs out",
        faults=(),
        max_steps=int(MODEL.max // LIMITS.min_interval) + 2,
    )


class _Leasing:
    """One situation's world: W1 acquired O-1001 at t=0, its lease lasting the TTL. The lease
    follows the kit's queue's rule (a heartbeat that reaches the queue renews it to then +
    ttl; it is gone once the clock reaches its deadline), kept as numbers so a step costs
    little; the moment it runs out is played on the kit's own queue (`_on_the_queue`)."""

    def __init__(self, run: Run, policy: HeartbeatPolicy) -> None:
        self.policy, self.most = policy, _tolerance(policy)
        self.sent = 0  # heartbeats sent so far
        self.in_a_row = 0  # lost since the last one that landed
        self.held_up = False  # has one heartbeat been held up?
        self.arrivals: tuple[float, ...] = ()  # when heartbeats reached the queue
        self.now = 0.0
        self.over = False
        self.problem: str | None = None

    @property
    def deadline(self) -> float:
        return (self.arrivals[-1] if self.arrivals else 0.0) + self.policy.ttl

    def moves(self) -> list[Move]:
        if self.over:
            return []
        n, at = self.sent + 1, self._next()
        if at is None:
            found = [Move(f"the call returns at t={MODEL.max:g}", "W1", self._returns, peer="queue")]
        else:
            found = [Move(f"heartbeat {n} lands", "W1", functools.partial(self._beat, at, 0), peer="queue")]
            if self.in_a_row < self.most:
                found.append(Move(f"heartbeat {n} is lost", "W1", functools.partial(self._lost, at)))
            if not self.held_up:
                found += [
                    Move(f"heartbeat {n} is {s} s late", "W1", functools.partial(self._beat, at, s), peer="queue")
                    for s in range(1, LIMITS.max_late + 1)
                    if at + s < MODEL.max
                ]
        return [*found, Move("W1 dies", "W1", self._dies, peer="queue")]

    def _next(self) -> float | None:
        """When the next heartbeat goes out, or None (no heartbeats, or the call is over)."""
        h = self.policy.heartbeat_interval
        at = None if h is None else (self.sent + 1) * h
        return at if at is not None and at < MODEL.max else None

    def fingerprint(self) -> Any:
        return (self.sent, self.in_a_row, self.held_up, self.deadline, self.over, self.problem)

    def clone(self, run: Run) -> _Leasing:
        """An independent copy (all its fields are numbers and tuples; no learner code runs
        here, so `run` has nothing to twin): the explorer goes on from it instead of
        replaying the situation from t=0."""
        return copy.copy(self)

    def broken(self) -> str | None:
        return self.problem

    def finished(self) -> str | None:
        return None  # every situation ends with the call's return or W1's death, both judged

    def crashed(self, actor: str) -> None:
        pass

    def _on_the_queue(self, until: float) -> tuple[float, Lease]:
        """The situation played on the kit's queue: W1 acquires at t=0, its heartbeats land
        at their arrival times, and W7 asks for work at `until` (when the lease has run out).
        Returns the deadline the queue kept, and W7's lease."""
        clock = FakeClock()
        queue = InMemoryQueue(lease_seconds=self.policy.ttl, max_attempts=5, clock=clock)
        queue.enqueue(case_id=CASE, tenant_id="store_northline", kind="contact_send", payload={"idem_key": KEY})
        lease = queue.acquire("W1")
        if lease is None:
            raise AssertionError("the queue handed W1 nothing, though it holds one ready item")
        for t in self.arrivals:
            clock.set(t)
            if not queue.heartbeat(lease):
                raise AssertionError(f"the queue refused a heartbeat at t={t:g} that the check counted as landed")
        due = queue.item(lease.item_id).lease_expires_at
        if due is None:
            raise AssertionError("the queue holds W1's item unleased, though it accepted every heartbeat")
        clock.set(until)
        w7 = queue.acquire("W7")
        if w7 is None:
            raise AssertionError(f"the queue kept W1's lease past t={until:g}")
        return due, w7

    def _taken(self, why: str) -> str:
        """The lease ran out under a healthy W1: W7 takes the case over at the deadline."""
        due, w7 = self._on_the_queue(self.deadline)
        self.over = True
        self.problem = (
            f"W1's lease ran out at t={due:g} while its model call was still running (calls take up to "
            f"{MODEL.max:g} s), and W7 took the case over at t={due:g} (token {w7.token}): {why}"
        )
        return f"the lease runs out at t={due:g}: W7 acquires {CASE} (token {w7.token})"

    def _beat(self, sent: float, late: int, run: Run) -> str:
        """The next heartbeat, sent at `sent` (`_next`), reaches the queue `late` seconds after."""
        self.sent += 1
        arrives = sent + late
        said = f"t={sent:g} W1 sends heartbeat {self.sent}" + (f", held up {late} s" if late else "")
        self.held_up = self.held_up or late > 0
        if self.deadline <= sent:  # gone before this heartbeat went out
            return f"{self._taken(self._why(sent, late))}; {said}: too late"
        if self.deadline <= arrives:  # the queue refuses a heartbeat at or after the deadline
            return f"{said}; {self._taken(self._why(arrives, late))}"
        self.arrivals += (arrives,)
        self.now, self.in_a_row = arrives, 0
        return f"{said}; it reaches the queue at t={arrives:g}: lease until t={self.deadline:g}"

    def _why(self, arrives: float, late: int) -> str:
        renewed = self.deadline - self.policy.ttl
        n = self.in_a_row
        lost = f"after {n} lost heartbeat{'s' if n > 1 else ''} in a row, " if n else ""
        held = f" (held up {late} s)" if late else ""
        return (
            f"{lost}heartbeat {self.sent}{held} reached the queue at t={arrives:g}, {arrives - renewed:g} s after "
            f"the last renewal, not before the {self.policy.ttl:g} s deadline."
        )

    def _lost(self, sent: float, run: Run) -> str:
        """The next heartbeat, sent at `sent` (`_next`), is lost on the way."""
        self.sent += 1
        self.now = sent
        said = f"t={sent:g} W1 sends heartbeat {self.sent}; it is lost on the way"
        if self.deadline <= sent:  # gone before this heartbeat went out (lost or not)
            return f"{self._taken(self._why(sent, 0))}; {said}"
        self.in_a_row += 1
        return said

    def _returns(self, run: Run) -> str:
        self.over = True
        if self.deadline <= MODEL.max:  # an ack at the deadline is late
            return self._taken(self._why_not_renewed())
        return f"t={MODEL.max:g} the call returns: W1 acks {CASE}"

    def _why_not_renewed(self) -> str:
        """Why the lease ran out with no heartbeat left to refuse: none renews it in time."""
        h, n = self.policy.heartbeat_interval, self.in_a_row
        slowest = (
            f"the lease must outlast the slowest call ({MODEL.max:g} s), and then a dead worker's case waits "
            f"just as long (limit {LIMITS.max_detection:g} s): no TTL keeps both promises."
        )
        if h is None:
            return f"without heartbeats {slowest}"
        if not self.sent:
            return f"the first heartbeat would go out at t={h:g}, after the slowest call ends, so {slowest}"
        lost = (
            f"the last {n} heartbeat{'s' if n > 1 else ''} of the call {'were' if n > 1 else 'was'} lost, " if n else ""
        )
        return f"{lost}the lease was last renewed at t={self.deadline - self.policy.ttl:g}, and the call ran on."

    def _dies(self, run: Run) -> str:
        self.over = True
        died, due = self.now, self.deadline
        wait = due - died
        said = f"t={died:g} W1's process dies; t={due:g} the lease runs out: W7 acquires {CASE}"
        if wait > LIMITS.max_detection:
            due, w7 = self._on_the_queue(due)
            self.problem = (
                f"W1 died at t={died:g} and its case waited {due - died:g} s before W7 could take it over (limit "
                f"{LIMITS.max_detection:g} s): the TTL bounds how fast a dead worker's case comes back."
            )
            said += f" (token {w7.token})"
        return said


def policy_scenario(policy: HeartbeatPolicy) -> Scenario:
    """The situations 03.1 explores for `policy` (its three values)."""
    plain = _values(policy)
    return Scenario(name="a lease policy", bound=_policy_bound(plain), start=functools.partial(_Leasing, policy=plain))


def replay_policy(choose_policy, schedule: str) -> Replayed:
    """Play one situation (as the check's message writes it) with your policy: print it for
    the steps, or call .diagram() for the picture."""
    policy = choose_policy() if callable(choose_policy) else choose_policy
    return replay_schedule(policy_scenario(policy), policy, schedule)


def _load(policy: HeartbeatPolicy) -> None:
    h = policy.heartbeat_interval
    if h is not None and 60 / h > LIMITS.max_heartbeats_per_min:
        raise Wrong(
            f"your policy ({policy}) sends {60 / h:g} heartbeats per worker per minute (limit "
            f"{LIMITS.max_heartbeats_per_min:g}): that is load on the queue for no progress; heartbeat at most "
            f"every {LIMITS.min_interval:g} s."
        )


def _run(choose_policy) -> str:
    returned = call_answer(choose_policy)
    if not isinstance(returned, HeartbeatPolicy):
        raise Wrong(
            f"choose_policy() returned {describe(returned)}; return a "
            "HeartbeatPolicy(ttl=..., heartbeat_interval=..., missed_tolerance=...)."
        )
    policy = _values(returned)
    _load(policy)
    found = explore(policy_scenario(policy), policy)
    refuse(found, f'lab03.replay_policy({named(choose_policy, "choose_policy")}, "{{schedule}}")')
    h = policy.heartbeat_interval
    load = "no heartbeats" if h is None else f"{60 / h:g} heartbeats a minute"
    return (
        f"checked all {found.schedules:,} situations of {found.bound.words}: W1 kept its lease to the end of "
        f"every call, a dead worker's case came back within {policy.ttl:g} s (limit "
        f"{LIMITS.max_detection:g} s), and each busy worker sends {load}. Now explain your choice below."
    )


exercise = Exercise(
    id="03.1",
    title="a lease policy for a 120 s model call",
    answer="choose_policy",
    run=_run,
    hints=(
        "Without heartbeats the lease must outlast the slowest call, and then a crashed worker's case waits "
        "just as long. Which setting lets the TTL stay short while a healthy call runs for two minutes?",
        "Return HeartbeatPolicy(ttl=..., heartbeat_interval=..., missed_tolerance=...). Try candidates with "
        "print(HeartbeatPolicy(...).evaluate()) or with the TTL explorer's sliders, then run the check; if it "
        "shows a situation, lab03.replay_policy(choose_policy, situation) plays it step by step.",
        "Work backwards from the limits: how soon a dead worker must be noticed bounds the TTL from above, the load "
        "budget bounds how often a worker may beat, and a promise to survive k lost heartbeats holds only if the "
        "heartbeat after them, arriving as late as the limits allow, still beats the deadline. Check that inequality "
        "with your own numbers before you trust it.",
    ),
)


# ------------------------------------------------------------------ 03.3 the heartbeat loop
# The check explores: the draft's chunks (1 to 4, of 8 or 20 s), a stall inside any one chunk
# (15 or 40 s, or none), and whether W7 asks for work the second W1's lease runs out or nobody
# asks at all. W1's call to the learner's loop is one step; inside it, time passes only while
# the model streams a chunk. The evidence (sends, acks, heartbeats and when the lease was live)
# is recorded here, by the facades, never by the learner's code.

LEASE = 30.0
CHUNK_SECONDS = (8, 20)
STALLS = (15, 40)
MIXED_CHUNKS = 3  # every draft of up to 3 chunks, each of 8 or 20 s ...
LONG_DRAFTS = ((8, 8, 8, 8), (8, 8, 8, 8, 8))  # ... and longer ones, so no count of chunks may be written in
TEXT = (
    "Dear Jordan, ",
    "we are sorry for the wait: ",
    "your refund of 42.50 EUR ",
    "is on its way. ",
    "Kind regards, ShopOps",
)
CASE, KEY, TO = "O-1001", "O-1001:email:3", "jordan@example.com"
LOOP_BOUND = Bound(
    words=f"every draft of 1 to {MIXED_CHUNKS} chunks of 8 or 20 s and of 4 and 5 chunks of 8 s, "
    "a stall of 15 or 40 s in any one chunk or none, and W7 asking for work the second the "
    "30 s lease runs out (eager) or nobody asking (away)",
    faults=(),
)
_MOST_CALLS = 40


class _Stop(BaseException):
    """Raised into the learner's loop once it has made too many calls (a loop that does
    not stop); an `except Exception` cannot swallow it."""


def _drafts():
    for n in range(1, MIXED_CHUNKS + 1):
        yield from itertools.product(CHUNK_SECONDS, repeat=n)
    yield from LONG_DRAFTS


class _Drafting:
    """One schedule's world: the draft, the stall and W7's habit are chosen first (each a
    move of the operator), then W1 acquires and runs the learner's loop as one step."""

    def __init__(self, run: Run) -> None:
        self.run = run
        # chosen by the operator's first two moves, before every other step (`moves`); read
        # through `draft`, `stall` and `lease` once chosen
        self._draft: tuple[int, ...] | None = None
        self._stall: tuple[int, int] | None = None  # (chunk number, seconds), (0, 0) for none
        self.eager: bool | None = None  # does W7 ask for work the second the lease runs out?
        self.clock = FakeClock()
        self.queue = InMemoryQueue(lease_seconds=LEASE, max_attempts=5, clock=self.clock)
        self.email = EmailAdapter(clock=self.clock)
        self.queue.enqueue(
            case_id=CASE,
            tenant_id="store_northline",
            kind="contact_send",
            payload={"idem_key": KEY, "to": TO, "template": "delay_apology"},
        )
        self._lease: Lease | None = None  # W1's, from its acquire when the stall is chosen
        self.state = "set-up"
        self.problem: str | None = None
        self.streamed = 0  # chunks handed out
        self.calls = 0
        self.refused_at: float | None = None  # when W1's first heartbeat was refused
        self.beats: list[tuple[float, bool]] = []
        self.sends: list[tuple[float, str, str]] = []  # (t, worker, body)
        self.acked_by: str | None = None
        self.taken_at: float | None = None

    @property
    def draft(self) -> tuple[int, ...]:
        assert self._draft is not None, "the draft is read once the operator chose it"
        return self._draft

    @property
    def stall(self) -> tuple[int, int]:
        assert self._stall is not None, "the stall is read once the operator chose it"
        return self._stall

    @property
    def lease(self) -> Lease:
        assert self._lease is not None, "W1's lease is read once it acquired"
        return self._lease

    # --- the schedule ------------------------------------------------------------------

    def moves(self) -> list[Move]:
        if self._draft is None:
            return [Move(name, "operator", functools.partial(self._choose_draft, draft)) for draft, name in _DRAFTS]
        if self._stall is None:
            return [
                Move(name, "operator", functools.partial(self._choose_stall, stall, eager))
                for stall, eager, name in _PLANS[len(self._draft)]
            ]
        if self.state == "holding":
            return [Move("W1 runs your loop", "W1", self._loop, peer="queue")]
        return []

    def _choose_draft(self, draft: tuple[int, ...], run: Run) -> str:
        self._draft = draft
        chunks = f"{len(draft)} chunk{'s' if len(draft) > 1 else ''}"
        return f"the model will stream {chunks} of {', '.join(map(str, draft))} s"

    def _choose_stall(self, stall: tuple[int, int], eager: bool, run: Run) -> str:
        """The stall and W7's habit are chosen, and W1 acquires the case at t=0."""
        self._stall, self.eager = stall, eager
        self._lease = self.queue.acquire("W1")
        self.state = "holding"
        w7 = "W7 will ask for work the second W1's lease runs out" if eager else "no other worker asks for work"
        return (
            f"{_stall_words(stall)}; {w7}; t=0 W1 acquires {CASE}: token {self.lease.token}, lease until "
            f"t={self.lease.expires_at:g}"
        )

    def fingerprint(self) -> Any:
        return (self._draft, self._stall, self.eager, self.state, self.problem)

    def broken(self) -> str | None:
        return self.problem

    def finished(self) -> str | None:
        return None  # judged at the end of W1's loop (`_judge_end`), the last step of every schedule

    def crashed(self, actor: str) -> None:
        pass

    @property
    def healthy(self) -> bool:
        """Would a loop that heartbeats after every chunk keep its lease? (No chunk, stall
        included, as long as the lease.)"""
        return all(self._seconds(n) < LEASE for n in range(1, len(self.draft) + 1))

    def _seconds(self, n: int) -> int:
        return self.draft[n - 1] + (self.stall[1] if self.stall[0] == n else 0)

    @property
    def where(self) -> str:
        return f"a draft of {', '.join(map(str, self.draft))} s, {_stall_words(self.stall)}"

    # --- the steps ---------------------------------------------------------------------------

    def _loop(self, run: Run) -> str:
        self.state = "ran"
        try:
            called = run.call(run.answer("W1"), self.lease, *_facades(self))
        except _Stop:
            return f"W1 runs your loop: stopped by the check after {self.calls} calls"
        if self.problem is None:
            self._judge_end(called)
        said = [f"{'ok' if ok else 'refused'} at t={t:g}" for t, ok in self.beats]
        sent = [f"{who} sends at t={t:g}" for t, who, _ in self.sends]
        return (
            f"W1 runs your loop: {self.streamed} chunk(s) drafted, heartbeats {', '.join(said) or 'none'}; "
            f"{'; '.join(sent) or 'no send'}; "
            + (f"acked by {self.acked_by}" if self.acked_by else "not acked")
            + f"; ends at t={self.clock.now():g}"
        )

    def _judge_end(self, called: Any) -> None:
        w1 = [body for _, who, body in self.sends if who == "W1"]
        if called.error is not None and self.refused_at is None:
            self.problem = (
                f"your loop raised {error_text(called.error)} ({self.where}) before any heartbeat was refused."
            )
        elif self.healthy:
            if not w1 or self.acked_by != "W1":
                did = "sent nothing" if not w1 else "sent the email but did not ack"
                self.problem = (
                    f"W1 kept its lease to the end ({self.where}), yet your loop {did}: after the last "
                    "chunk, and a heartbeat that says yes, send the whole draft and ack."
                )
            elif self.streamed < len(self.draft):
                self.problem = (
                    f"W1 sent after {self.streamed} of the {len(self.draft)} chunks ({self.where}): ask "
                    "the model for chunks until it says the draft is complete (None)."
                )
            elif not _whole(w1[0], self.draft):
                self.problem = (
                    f"W1 sent {w1[0]!r}, not the whole draft ({self.where}): the body must hold every chunk, in order."
                )

    # --- what the facades report -----------------------------------------------------------

    def lease_live(self) -> bool:
        item = self.queue.item(self.lease.item_id)
        due = item.lease_expires_at  # None only for an item not leased
        return (
            item.state is ItemState.LEASED
            and item.token == self.lease.token
            and due is not None
            and self.clock.now() < due
        )

    def spend(self) -> None:
        self.calls += 1
        if self.calls > _MOST_CALLS:
            self.problem = (
                f"your loop made {_MOST_CALLS} calls to the model and the queue ({self.where}) and was "
                "stopped by the check: it does not stop. "
                + (
                    "A refused heartbeat is final for this lease: asking again cannot bring it back."
                    if self.refused_at is not None
                    else "Stop when next_chunk() returns None."
                )
            )
            raise _Stop()

    def after_refusal(self, what: str) -> None:
        """W1 does `what` after its heartbeat was refused: the loop did not stop."""
        if self.refused_at is not None and self.problem is None:
            self.problem = (
                f"W1's heartbeat at t={self.refused_at:g} was refused ({self.where}), yet your loop "
                f"{what}: a refused heartbeat means the lease is gone; stop at once: no more drafting, "
                "no send, no ack."
            )

    def effect(self, what: str) -> None:
        """W1 sends or acks: only while its lease is live."""
        self.after_refusal(what)
        if self.problem is None and not self.lease_live():
            last = max((t for t, ok in self.beats if ok), default=0.0)
            owner = (
                f"W7 has held the case since t={self.taken_at:g}"
                if self.taken_at is not None
                else "the case is free for any worker"
            )
            self.problem = (
                f"W1 {what} at t={self.clock.now():g}, but its lease had run out at "
                f"t={last + LEASE:g} and {owner} ({self.where}): W1 last heard yes from the queue at "
                f"t={last:g}. Heartbeat after every chunk, and send only right after a heartbeat that "
                "said yes."
            )

    def pass_time(self, seconds: float) -> None:
        """The model streams for `seconds`: W7 takes the case over the second W1's lease runs out."""
        end = self.clock.now() + seconds
        item = self.queue.item(self.lease.item_id)
        due = item.lease_expires_at if item.state is ItemState.LEASED and item.token == self.lease.token else None
        if due is not None and due < end and self.problem is None and self.healthy:
            self.problem = (
                f"W1's lease ran out at t={due:g} during a healthy draft ({self.where}; no chunk is as "
                f"long as the {LEASE:g} s lease): W1 last heartbeat at t={due - LEASE:g}. Heartbeat "
                "after every chunk."
            )
        if due is not None and due < end and self.eager and self.taken_at is None:
            self.clock.set(due + 1)
            w7 = self.queue.acquire("W7")
            if w7 is None:
                raise AssertionError(f"the queue kept W1's lease past t={due:g}")
            self.taken_at = self.clock.now()
            self.email.send(KEY, case_id=CASE, to=TO, body="".join(TEXT[: len(self.draft)]), worker_id="W7")
            self.sends.append((self.clock.now(), "W7", ""))
            self.queue.ack(w7)
            self.acked_by = "W7"
        self.clock.set(end)


def _stall_words(stall: tuple[int, int]) -> str:
    return "no stall" if stall == (0, 0) else f"a {stall[1]} s stall in chunk {stall[0]}"


_DRAFTS = tuple((draft, f"draft: {', '.join(map(str, draft))} s") for draft in _drafts())
_PLANS = {
    n: tuple(
        (stall, eager, f"{_stall_words(stall)}, W7 {'eager' if eager else 'away'}")
        for stall in ((0, 0), *((k, s) for k in range(1, n + 1) for s in STALLS))
        for eager in (True, False)
    )
    for n in {len(draft) for draft, _ in _DRAFTS}
}


def _whole(body: Any, draft: tuple[int, ...]) -> bool:
    """Does `body` hold every chunk of the draft, in order?"""
    if type(body) is not str:
        return False
    at = 0
    for text in TEXT[: len(draft)]:
        at = body.find(text, at)
        if at < 0:
            return False
        at += len(text)
    return True


def _facades(world: _Drafting) -> tuple[Any, Any, Any]:
    """What the loop is handed: the queue (heartbeat, ack), the model (next_chunk) and the
    email adapter (send). The real queue and adapter, and the record, stay with the check."""
    queue, email = world.queue, world.email

    class Queue:
        """The queue, for a worker holding a lease: heartbeat(lease) -> bool, ack(lease)."""

        __slots__ = ()

        def heartbeat(self, lease):
            world.spend()
            if world.refused_at is not None and world.problem is None:
                world.after_refusal("heartbeat again")
            ok = queue.heartbeat(lease)
            world.beats.append((world.clock.now(), ok))
            if not ok and world.refused_at is None:
                world.refused_at = world.clock.now()
            return ok

        def ack(self, lease):
            world.spend()
            world.effect("acked")
            queue.ack(lease)
            world.acked_by = lease.worker_id

        def __repr__(self) -> str:
            return "<Queue: heartbeat(lease), ack(lease)>"

    class Model:
        """The drafting model, streaming: next_chunk() -> the next piece of text, or None when the draft is complete."""

        __slots__ = ()

        def next_chunk(self):
            world.spend()
            world.after_refusal("asked the model for another chunk")
            if world.streamed >= len(world.draft):
                return None
            world.streamed += 1
            world.pass_time(world._seconds(world.streamed))
            return TEXT[world.streamed - 1]

        def __repr__(self) -> str:
            return "<Model: next_chunk() -> str, or None when the draft is complete>"

    class Email:
        """Sends an email through the idempotent provider: send(idem_key, case_id=..., to=..., body=...)."""

        __slots__ = ()

        def send(self, idem_key, *, case_id, to="customer", body="", **kwargs):
            world.spend()
            world.effect("sent Jordan's email")
            result = email.send(idem_key, case_id=case_id, to=to, body=body, worker_id="W1")
            world.sends.append((world.clock.now(), "W1", body))
            return result

        def __repr__(self) -> str:
            return "<EmailAdapter: send(idem_key, case_id=..., to=..., body=...)>"

    return Queue(), Model(), Email()


def loop_scenario() -> Scenario:
    return Scenario(name="the heartbeat loop", bound=LOOP_BOUND, start=_Drafting)


def replay(draft_with_heartbeats, schedule: str) -> Replayed:
    """Play one schedule (as the check's message writes it) with your loop: print it for
    the steps, or call .diagram() for the picture."""
    return replay_schedule(loop_scenario(), draft_with_heartbeats, schedule)


def _loop_run(draft_with_heartbeats) -> str:
    found = explore(loop_scenario(), draft_with_heartbeats)
    refuse(found, f'lab03.replay({named(draft_with_heartbeats, "draft_with_heartbeats")}, "{{schedule}}")')
    return (
        f"{found.summary}: W1 kept its lease through every healthy draft and sent the whole draft once, and "
        "whenever a heartbeat was refused it stopped at once: no more drafting, no send, no ack."
    )


loop = Exercise(
    id="03.3",
    title="the heartbeat loop",
    answer="draft_with_heartbeats",
    run=_loop_run,
    hints=(
        "The queue only hears from W1 when W1 heartbeats. When does W1 last know, for sure, that the case is "
        "still its own, and what does it do right after that?",
        "model.next_chunk() returns a piece of text, or None when the draft is complete; queue.heartbeat(lease) "
        "returns True or False; the send and the ack are the effects. Which of these calls may still come after "
        "a False?",
        "The lease is yours only while the queue keeps saying yes: ask between pieces of work, and treat a no as the "
        "end, leaving at once (nothing more drafted, sent or acked). Only a draft the model says is complete is "
        "sent, once, under the key the payload carries, and only then acknowledged.",
    ),
)


# Its quizzes (the right option and every explanation) are kept with the answer keys, loaded on
# first use (`checks.answers`): importing this module loads none of them.
__getattr__ = answers.lazy("lab03", ("HEARTBEAT_FALSE_QUIZ", "LONGER_TTL_QUIZ"))
