"""The specification of lab 03's check: a lease policy for a 120 s model call, judged by
simulating its values with the kit's own evaluator."""
from __future__ import annotations

from check_accuracy import Spec, accuracy_tests, refused

from shopops_lab.checks import lab03
from shopops_lab.checks.lab03 import HeartbeatPolicy
from shopops_lab.widgets.ttl import evaluate_policy

# ---------------------------------------------------------------------------- right, written differently


def short_lease_frequent_beats():
    return HeartbeatPolicy(ttl=40, heartbeat_interval=10, missed_tolerance=2)


def promises_less_than_it_keeps():
    """A sound policy that promises no lost heartbeat: its TTL and interval survive two anyway."""
    return HeartbeatPolicy(ttl=60, heartbeat_interval=15, missed_tolerance=0)


def derived_from_the_limits():
    interval = 60 / lab03.LIMITS.max_heartbeats_per_min          # as often as the load limit allows
    return HeartbeatPolicy(ttl=lab03.LIMITS.max_detection - 10, heartbeat_interval=interval * 2, missed_tolerance=3)


# ---------------------------------------------------------------------------- wrong, as learners write them

class RiggedPolicy(HeartbeatPolicy):
    """No heartbeats and a short lease, and an evaluate() that reports the numbers of a good policy."""

    def evaluate(self, *args, **kwargs):
        return evaluate_policy(lab03.MODEL, 60, 15, 2, seed=kwargs.get("seed", 0))

    def __str__(self):
        return "a perfect policy"


def rigged():
    return RiggedPolicy(ttl=30, heartbeat_interval=None, missed_tolerance=0)


def policy(ttl, every, tolerance):
    def choose_policy():
        return HeartbeatPolicy(ttl=ttl, heartbeat_interval=every, missed_tolerance=tolerance)
    choose_policy.__name__ = f"ttl{ttl}-every{every}-tolerates{tolerance}"
    return choose_policy


SPEC = Spec(
    exercise=lab03.exercise,
    right=(short_lease_frequent_beats, promises_less_than_it_keeps, derived_from_the_limits),
    wrong=(
        refused(
            policy(30, None, 0),
            "healthy workers lose their lease in 11.05% of calls (limit 0.10%)",
            "outlast the slowest call (120 s)",
            "without heartbeats no TTL keeps both promises",
            "seed 1",
            hidden=("plan for at least",),
        ),
        refused(
            policy(130, None, 0),
            "a dead worker's case can wait 130 s before redelivery (limit 90 s)",
            "without heartbeats no TTL keeps both promises",
            hidden=("plan for at least",),
        ),
        refused(policy(120, 20, 1), "can wait 120 s before redelivery (limit 90 s)"),
        refused(policy(30, 2, 3), "30 heartbeats per worker per minute (limit 12)"),
        refused(
            policy(30, 10, 2), "does not survive 2 lost heartbeat(s) in a row", "lands 30 s after the last renewal"
        ),
        refused(
            policy(20, 15, 0),
            "with a heartbeat every 15 s, a 20 s lease survives 0 lost heartbeat(s) in a row",
            "plan for at least 1",
        ),
        refused(policy(30, 40, 1), "the first heartbeat comes after the deadline"),
        refused(rigged, "ttl 30 s, no heartbeats", "11.05% of calls", hidden=("a perfect policy",)),
        refused(lambda: {"ttl": 60, "heartbeat_interval": 15}, "returned the dict", "return a HeartbeatPolicy("),
    ),
    secrets=("HeartbeatPolicy(ttl=60", "ttl 60 s"),
)

(test_a_right_answer_written_differently_is_accepted,
 test_a_plausible_wrong_answer_is_refused_with_its_evidence,
 test_the_specification_has_enough_right_and_wrong_answers) = accuracy_tests(SPEC)
