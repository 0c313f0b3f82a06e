"""Lab 03: a lease policy for a worker whose model call may take 120 s, judged by simulation.

The learner returns a `HeartbeatPolicy`. There is no single right answer, only limits:
healthy workers must (almost) never lose their lease, a dead worker's case must come
back within 90 s, heartbeats must not flood the queue, and the policy must survive at
least one lost heartbeat. Each limit is measured with `evaluate_policy` on several
seeds, and a failure names the limit, the measured number and which way to move.
"""
from __future__ import annotations

from dataclasses import dataclass

from shopops_lab import arguments
from shopops_lab.checks.base import Exercise, Wrong, call_answer
from shopops_lab.latency import LatencyModel
from shopops_lab.widgets.ttl import TtlReport, evaluate_policy, grade_policy

__all__ = ["LIMITS", "MODEL", "HeartbeatPolicy", "Limits", "exercise", "problems"]

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
    """Every limit `report` breaks, one sentence each (empty when the policy is fine)."""
    _, reasons = grade_policy(report, max_spurious=limits.max_spurious, max_detection=limits.max_detection,
                              max_heartbeats_per_min=limits.max_heartbeats_per_min)
    if report.missed_tolerance < limits.min_tolerance:
        reasons.append(f"the policy promises to survive {report.missed_tolerance} lost heartbeat(s) in a row, "
                       f"but about {report.miss_probability:.0%} of heartbeats are lost on the way: plan for at "
                       f"least {limits.min_tolerance}.")
    return reasons


def _run(choose_policy) -> str:
    policy = call_answer(choose_policy)
    if not isinstance(policy, HeartbeatPolicy):
        raise Wrong(f"choose_policy() returned {type(policy).__name__} {policy!r}; return a "
                    "HeartbeatPolicy(ttl=..., heartbeat_interval=..., missed_tolerance=...).")
    reports = []
    for seed in SEEDS:
        report = policy.evaluate(seed=seed)
        found = problems(report)
        if found:
            noun = "limit" if len(found) == 1 else "limits"
            raise Wrong(f"your policy ({policy}) breaks {len(found)} {noun} in the simulation with seed {seed} "
                        f"({RUNS} model calls, p50 {MODEL.p50:g} s, p99 {MODEL.p99:g} s, max {MODEL.max:g} s):",
                        [f"- {reason}" for reason in found] + ["what the simulation measured:"]
                        + [f"  {line}" for line in str(report).splitlines()[1:]])
        reports.append(report)
    worst = max(reports, key=lambda r: r.spurious_expiry)
    return (f"{policy}: in {len(SEEDS)} seeded simulations of {RUNS} calls each, at most "
            f"{worst.spurious_expiry:.2%} of healthy calls lost their lease, a dead worker's case waited at most "
            f"{worst.detection_worst:g} s ({worst.detection_mean:.1f} s on average), each busy worker sent "
            f"{worst.heartbeats_per_worker_per_min:g} heartbeats a minute, and the lease survives "
            f"{worst.absorbs_missed} lost heartbeat(s) in a row. Now explain your choice below.")


exercise = Exercise(
    id="03.1", title="a lease policy for a 120 s model call", run=_run,
    hints=("Without heartbeats the lease must outlast the slowest call, and then a crashed worker's case waits "
           "just as long. Which setting lets the TTL stay short while a healthy call runs for two minutes?",
           "Return HeartbeatPolicy(ttl=..., heartbeat_interval=..., missed_tolerance=...). Try candidates with "
           "print(HeartbeatPolicy(...).evaluate()) or with the TTL explorer's sliders, then run the check.",
           "Shape: the detection limit caps the TTL, the load limit sets the shortest interval, and k lost "
           "heartbeats in a row are survivable only if the (k + 1)-th heartbeat still lands before the "
           "deadline: (k + 1) x interval < ttl, with k >= 1."),
)
