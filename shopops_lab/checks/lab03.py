"""Lab 03: a lease policy for a worker whose model call may take 120 s, judged by simulation;
and the heartbeat loop that uses it (03.3), judged by exploring every draft, stall and
takeover of a small grid (see `loop_scenario`).

The learner returns a `HeartbeatPolicy`. There is no single right answer, only limits:
healthy workers must (almost) never lose their lease, a dead worker's case must come
back within 90 s, heartbeats must not flood the queue, and its TTL and interval must
survive at least one lost heartbeat (whatever `missed_tolerance` promises; a promise the
values cannot keep is refused too). Each limit is measured on the policy's three values
alone, with the kit's `evaluate_policy`, on several seeds: nothing the learner's object
does (a subclass, a method of its own) takes part. A failure names the limit, the
measured number and which way to move.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any

from shopops_lab import arguments
from shopops_lab.checks.base import Exercise, Wrong, call_answer, describe, error_text
from shopops_lab.clock import FakeClock
from shopops_lab.effects import EmailAdapter
from shopops_lab.errors import ShopOpsError
from shopops_lab.explore import Bound, Move, Replayed, Run, Scenario, explore, refuse
from shopops_lab.explore import replay as replay_schedule
from shopops_lab.latency import LatencyModel
from shopops_lab.states import ItemState
from shopops_lab.widgets.quiz import Quiz
from shopops_lab.widgets.ttl import TtlReport, evaluate_policy, grade_policy
from shopops_lab.worker.queue import InMemoryQueue, Lease

__all__ = [
    "HEARTBEAT_FALSE_QUIZ",
    "LIMITS",
    "LONGER_TTL_QUIZ",
    "MODEL",
    "HeartbeatPolicy",
    "Limits",
    "exercise",
    "loop",
    "loop_scenario",
    "problems",
    "replay",
]

MODEL = LatencyModel(p50=8, p99=90, max=120)  # the drafting model of the story
SEEDS = (1, 2, 3, 4)
RUNS = 2000
MISS_PROBABILITY = 0.01  # one heartbeat in a hundred is lost on the way


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """What ShopOps asks of a lease policy (the exercise's grading limits)."""

    max_spurious: float = 0.001  # share of healthy calls allowed to lose their lease
    max_detection: float = 90.0  # seconds a dead worker's case may wait, at worst
    max_heartbeats_per_min: float = 12.0  # per busy worker
    min_tolerance: int = 1  # lost heartbeats in a row the policy must survive

    def __str__(self) -> str:
        return (
            f"spurious expiry <= {self.max_spurious:.1%} of healthy calls; a dead worker's case waits "
            f"<= {self.max_detection:g} s; <= {self.max_heartbeats_per_min:g} heartbeats per worker "
            f"per minute; survives >= {self.min_tolerance} lost heartbeat(s) in a row"
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


def _run(choose_policy) -> str:
    returned = call_answer(choose_policy)
    if not isinstance(returned, HeartbeatPolicy):
        raise Wrong(
            f"choose_policy() returned {describe(returned)}; return a "
            "HeartbeatPolicy(ttl=..., heartbeat_interval=..., missed_tolerance=...)."
        )
    policy = _values(returned)
    reports = []
    for seed in SEEDS:
        report = evaluate_policy(
            MODEL,
            policy.ttl,
            policy.heartbeat_interval,
            policy.missed_tolerance,
            seed=seed,
            runs=RUNS,
            miss_probability=MISS_PROBABILITY,
        )
        found = problems(report)
        if found:
            noun = "limit" if len(found) == 1 else "limits"
            note = (
                []
                if policy.heartbeat_interval is not None
                else [
                    f"without heartbeats no TTL keeps both promises: a lease long enough for the slowest call "
                    f"({MODEL.max:g} s) keeps a dead worker's case waiting longer than {LIMITS.max_detection:g} s, and "
                    "a shorter one expires under healthy calls."
                ]
            )
            raise Wrong(
                f"your policy ({policy}) breaks {len(found)} {noun} in the simulation with seed {seed} "
                f"({RUNS} model calls, p50 {MODEL.p50:g} s, p99 {MODEL.p99:g} s, max {MODEL.max:g} s):",
                [f"- {reason}" for reason in found]
                + note
                + ["what the simulation measured:"]
                + [f"  {line}" for line in str(report).splitlines()[1:]],
            )
        reports.append(report)
    worst = max(reports, key=lambda r: r.spurious_expiry)
    return (
        f"{policy}: in {len(SEEDS)} seeded simulations of {RUNS} calls each, at most "
        f"{worst.spurious_expiry:.2%} of healthy calls lost their lease, a dead worker's case waited at most "
        f"{worst.detection_worst:g} s ({worst.detection_mean:.1f} s on average), each busy worker sent "
        f"{worst.heartbeats_per_worker_per_min:g} heartbeats a minute, and the lease survives "
        f"{worst.absorbs_missed} lost heartbeat(s) in a row. Now explain your choice below."
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
        "print(HeartbeatPolicy(...).evaluate()) or with the TTL explorer's sliders, then run the check.",
        "Shape: the detection limit caps the TTL, the load limit sets the shortest interval, and k lost "
        "heartbeats in a row are survivable only if the (k + 1)-th heartbeat still lands before the "
        "deadline: (k + 1) x interval < ttl, with k >= 1.",
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
        self.draft: tuple[int, ...] | None = None
        self.stall: tuple[int, int] | None = None  # (chunk number, seconds), (0, 0) for none
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
        self.lease: Lease | None = None
        self.state = "set-up"
        self.problem: str | None = None
        self.streamed = 0  # chunks handed out
        self.calls = 0
        self.refused_at: float | None = None  # when W1's first heartbeat was refused
        self.beats: list[tuple[float, bool]] = []
        self.sends: list[tuple[float, str, str]] = []  # (t, worker, body)
        self.acked_by: str | None = None
        self.taken_at: float | None = None

    # --- the schedule ------------------------------------------------------------------

    def moves(self) -> list[Move]:
        if self.draft is None:
            return [Move(name, "operator", functools.partial(self._choose_draft, draft)) for draft, name in _DRAFTS]
        if self.stall is None:
            return [
                Move(name, "operator", functools.partial(self._choose_stall, stall, eager))
                for stall, eager, name in _PLANS[len(self.draft)]
            ]
        if self.state == "holding":
            return [Move("W1 runs your loop", "W1", self._loop, peer="queue")]
        return []

    def _choose_draft(self, draft: tuple[int, ...], run: Run) -> str:
        self.draft = draft
        chunks = f"{len(draft)} chunk{'s' if len(draft) > 1 else ''}"
        return f"the model will stream {chunks} of {', '.join(map(str, draft))} s"

    def _choose_stall(self, stall: tuple[int, int], eager: bool, run: Run) -> str:
        """The stall and W7's habit are chosen, and W1 acquires the case at t=0."""
        self.stall, self.eager = stall, eager
        self.lease = self.queue.acquire("W1")
        self.state = "holding"
        w7 = "W7 will ask for work the second W1's lease runs out" if eager else "no other worker asks for work"
        return (
            f"{_stall_words(stall)}; {w7}; t=0 W1 acquires {CASE}: token {self.lease.token}, lease until "
            f"t={self.lease.expires_at:g}"
        )

    def fingerprint(self) -> Any:
        return (self.draft, self.stall, self.eager, self.state, self.problem)

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
        return (
            item.state is ItemState.LEASED
            and item.token == self.lease.token
            and self.clock.now() < item.lease_expires_at
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
    refuse(found, 'lab03.replay(draft_with_heartbeats, "{schedule}")')
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
        "Shape: a loop that takes one chunk, keeps it, and asks the queue; on a no it leaves the function at "
        "once (return, or raise); when the model says the draft is complete, send the joined chunks with the "
        "payload's key and address, then ack. No count of chunks written in.",
    ),
)


# ------------------------------------------------------------------ quizzes
# Kept here, not in the notebook, so the cell that shows a quiz does not show its answer.

HEARTBEAT_FALSE_QUIZ = Quiz(
    "W1 is drafting Jordan's email and its heartbeat just returned False. What should it do?",
    [
        "Heartbeat again until it returns True, then carry on.",
        "Send the email quickly and ack before anyone notices.",
        "Stop: no send, no ack, no write. The case belongs to someone else now.",
        "Acquire the item again so it gets a fresh lease.",
    ],
    2,
    [
        "False is final for this lease: it expired, or a newer claim exists. Retrying cannot bring it back.",
        "Someone else may be sending the same email right now, and the queue will refuse the ack anyway.",
        "The lease is gone, so any effect now races the new owner. Dropping the draft wastes a little work; "
        "going on risks a duplicate.",
        "The case is held by another worker, so acquire will not hand it back; and the draft would be redone anyway.",
    ],
)

LONGER_TTL_QUIZ = Quiz(
    "You keep heartbeats every 15 s and raise the TTL from 45 s to 90 s. What gets worse?",
    [
        "Healthy 120 s drafts lose their lease more often.",
        "A crashed worker's case waits up to twice as long before anyone retries it.",
        "The queue receives twice as many heartbeats.",
        "Nothing: a longer lease is always safer.",
    ],
    1,
    [
        "A longer TTL only makes spurious expiry rarer: more heartbeats can be lost before the deadline passes.",
        "The worst-case wait after a crash is the TTL itself: 45 s becomes 90 s.",
        "The load depends on the interval (4 per minute per worker here), not on the TTL.",
        "Safer against lost heartbeats, yes; but slower to notice a dead worker. Every lease choice trades these two.",
    ],
)
