"""Lab 03: a lease policy for a worker whose model call may take 120 s, judged by simulation.

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

from dataclasses import dataclass

from shopops_lab import arguments
from shopops_lab.checks.base import Exercise, Wrong, call_answer, describe
from shopops_lab.errors import ShopOpsError
from shopops_lab.latency import LatencyModel
from shopops_lab.widgets.quiz import Quiz
from shopops_lab.widgets.ttl import TtlReport, evaluate_policy, grade_policy

__all__ = ["HEARTBEAT_FALSE_QUIZ", "LIMITS", "LONGER_TTL_QUIZ", "MODEL", "HeartbeatPolicy", "Limits",
           "exercise", "problems"]

MODEL = LatencyModel(p50=8, p99=90, max=120)   # the drafting model of the story
SEEDS = (1, 2, 3, 4)
RUNS = 2000
MISS_PROBABILITY = 0.01                         # one heartbeat in a hundred is lost on the way


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """What ShopOps asks of a lease policy (the exercise's grading limits)."""

    max_spurious: float = 0.001            # share of healthy calls allowed to lose their lease
    max_detection: float = 90.0            # seconds a dead worker's case may wait, at worst
    max_heartbeats_per_min: float = 12.0   # per busy worker
    min_tolerance: int = 1                 # lost heartbeats in a row the policy must survive

    def __str__(self) -> str:
        return (f"spurious expiry <= {self.max_spurious:.1%} of healthy calls; a dead worker's case waits "
                f"<= {self.max_detection:g} s; <= {self.max_heartbeats_per_min:g} heartbeats per worker "
                f"per minute; survives >= {self.min_tolerance} lost heartbeat(s) in a row")


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
            arguments.seconds("heartbeat_interval", self.heartbeat_interval,
                              "pass the seconds between heartbeats, a positive number, or None for no heartbeats")
        arguments.whole("missed_tolerance", self.missed_tolerance, 0,
                        "pass a whole number >= 0: how many heartbeats in a row may be lost")

    def evaluate(self, latency: LatencyModel = MODEL, *, seed: int = 0, runs: int = RUNS,
                 miss_probability: float = MISS_PROBABILITY) -> TtlReport:
        """Simulate this policy against `latency` (the story's model by default)."""
        return evaluate_policy(latency, self.ttl, self.heartbeat_interval, self.missed_tolerance,
                               seed=seed, runs=runs, miss_probability=miss_probability)

    def __str__(self) -> str:
        beat = "no heartbeats" if self.heartbeat_interval is None else f"heartbeat every {self.heartbeat_interval:g} s"
        return f"ttl {self.ttl:g} s, {beat}, tolerates {self.missed_tolerance} lost in a row"


def problems(report: TtlReport, limits: Limits = LIMITS) -> list[str]:
    """Every limit `report` breaks, one sentence each (empty when the policy is fine).
    Lost heartbeats are judged by what the TTL and interval survive, not by the promise."""
    _, reasons = grade_policy(report, max_spurious=limits.max_spurious, max_detection=limits.max_detection,
                              max_heartbeats_per_min=limits.max_heartbeats_per_min)
    h, ttl = report.heartbeat_interval, report.ttl
    if h is not None and (report.absorbs_missed or 0) < limits.min_tolerance:
        reasons.append(f"with a heartbeat every {h:g} s, a {ttl:g} s lease survives {report.absorbs_missed or 0} "
                       f"lost heartbeat(s) in a row, and about {report.miss_probability:.0%} of heartbeats are lost "
                       f"on the way: plan for at least {limits.min_tolerance}.")
    return reasons


def _values(policy: HeartbeatPolicy) -> HeartbeatPolicy:
    """The policy's three values, read once into a plain HeartbeatPolicy: nothing the
    learner's object does (a subclass, a method of its own) takes part in judging it."""
    try:
        return HeartbeatPolicy(ttl=policy.ttl, heartbeat_interval=policy.heartbeat_interval,
                               missed_tolerance=policy.missed_tolerance)
    except ShopOpsError as err:
        raise Wrong(f"your policy's values are not a lease policy: {err}") from None


def _run(choose_policy) -> str:
    returned = call_answer(choose_policy)
    if not isinstance(returned, HeartbeatPolicy):
        raise Wrong(f"choose_policy() returned {describe(returned)}; return a "
                    "HeartbeatPolicy(ttl=..., heartbeat_interval=..., missed_tolerance=...).")
    policy = _values(returned)
    reports = []
    for seed in SEEDS:
        report = evaluate_policy(MODEL, policy.ttl, policy.heartbeat_interval, policy.missed_tolerance,
                                 seed=seed, runs=RUNS, miss_probability=MISS_PROBABILITY)
        found = problems(report)
        if found:
            noun = "limit" if len(found) == 1 else "limits"
            note = [] if policy.heartbeat_interval is not None else [
                f"without heartbeats no TTL keeps both promises: a lease long enough for the slowest call "
                f"({MODEL.max:g} s) keeps a dead worker's case waiting longer than {LIMITS.max_detection:g} s, and "
                "a shorter one expires under healthy calls."]
            raise Wrong(f"your policy ({policy}) breaks {len(found)} {noun} in the simulation with seed {seed} "
                        f"({RUNS} model calls, p50 {MODEL.p50:g} s, p99 {MODEL.p99:g} s, max {MODEL.max:g} s):",
                        [f"- {reason}" for reason in found] + note + ["what the simulation measured:"]
                        + [f"  {line}" for line in str(report).splitlines()[1:]])
        reports.append(report)
    worst = max(reports, key=lambda r: r.spurious_expiry)
    return (f"{policy}: in {len(SEEDS)} seeded simulations of {RUNS} calls each, at most "
            f"{worst.spurious_expiry:.2%} of healthy calls lost their lease, a dead worker's case waited at most "
            f"{worst.detection_worst:g} s ({worst.detection_mean:.1f} s on average), each busy worker sent "
            f"{worst.heartbeats_per_worker_per_min:g} heartbeats a minute, and the lease survives "
            f"{worst.absorbs_missed} lost heartbeat(s) in a row. Now explain your choice below.")


exercise = Exercise(
    id="03.1", title="a lease policy for a 120 s model call", answer="choose_policy", run=_run,
    hints=("Without heartbeats the lease must outlast the slowest call, and then a crashed worker's case waits "
           "just as long. Which setting lets the TTL stay short while a healthy call runs for two minutes?",
           "Return HeartbeatPolicy(ttl=..., heartbeat_interval=..., missed_tolerance=...). Try candidates with "
           "print(HeartbeatPolicy(...).evaluate()) or with the TTL explorer's sliders, then run the check.",
           "Shape: the detection limit caps the TTL, the load limit sets the shortest interval, and k lost "
           "heartbeats in a row are survivable only if the (k + 1)-th heartbeat still lands before the "
           "deadline: (k + 1) x interval < ttl, with k >= 1."),
)


# ------------------------------------------------------------------ quizzes
# Kept here, not in the notebook, so the cell that shows a quiz does not show its answer.

HEARTBEAT_FALSE_QUIZ = Quiz(
    "W1 is drafting Jordan's email and its heartbeat just returned False. What should it do?",
    ["Heartbeat again until it returns True, then carry on.",
     "Send the email quickly and ack before anyone notices.",
     "Stop: no send, no ack, no write. The case belongs to someone else now.",
     "Acquire the item again so it gets a fresh lease."],
    2,
    ["False is final for this lease: it expired, or a newer claim exists. Retrying cannot bring it back.",
     "Someone else may be sending the same email right now, and the queue will refuse the ack anyway.",
     "The lease is gone, so any effect now races the new owner. Dropping the draft wastes a little work; "
     "going on risks a duplicate.",
     "The case is held by another worker, so acquire will not hand it back; and the draft would be "
     "redone anyway."],
)

LONGER_TTL_QUIZ = Quiz(
    "You keep heartbeats every 15 s and raise the TTL from 45 s to 90 s. What gets worse?",
    ["Healthy 120 s drafts lose their lease more often.",
     "A crashed worker's case waits up to twice as long before anyone retries it.",
     "The queue receives twice as many heartbeats.",
     "Nothing: a longer lease is always safer."],
    1,
    ["A longer TTL only makes spurious expiry rarer: more heartbeats can be lost before the deadline passes.",
     "The worst-case wait after a crash is the TTL itself: 45 s becomes 90 s.",
     "The load depends on the interval (4 per minute per worker here), not on the TTL.",
     "Safer against lost heartbeats, yes; but slower to notice a dead worker. Every lease choice trades "
     "these two."],
)
