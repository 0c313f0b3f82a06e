"""The specification of lab 03's checks: a lease policy for a 120 s model call (03.1), judged
by exploring every situation of its lease on the kit's queue (lost heartbeats, one held up,
the worker dying); and the heartbeat loop (03.3), judged by exploring every draft, stall
and takeover in a small grid. Each wrong answer is refused with the shortest situation
or schedule that breaks it."""

from __future__ import annotations

import dataclasses
import itertools
import random

from check_accuracy import Spec, accuracy_tests, refused

from shopops_lab.checks import lab03
from shopops_lab.checks.lab03 import HeartbeatPolicy
from shopops_lab.errors import LeaseLostError
from shopops_lab.explore import Run, explore
from shopops_lab.widgets.ttl import evaluate_policy

# ---------------------------------------------------------------------------- right, written differently


def short_lease_frequent_beats():
    return HeartbeatPolicy(ttl=40, heartbeat_interval=10, missed_tolerance=2)


def promises_less_than_it_keeps():
    """A sound policy that promises no lost heartbeat: its TTL and interval survive two anyway."""
    return HeartbeatPolicy(ttl=60, heartbeat_interval=15, missed_tolerance=0)


def derived_from_the_limits():
    interval = 60 / lab03.LIMITS.max_heartbeats_per_min  # as often as the load limit allows
    return HeartbeatPolicy(ttl=lab03.LIMITS.max_detection - 10, heartbeat_interval=interval * 2, missed_tolerance=3)


class NotedPolicy(HeartbeatPolicy):
    """A subclass with a note of its own: only the three values count."""

    def note(self):
        return "chosen on Tuesday"


def fractional_values_in_a_subclass():
    return NotedPolicy(ttl=75.5, heartbeat_interval=12.5, missed_tolerance=4)


def computed_from_the_promise():
    """ttl from the rule itself: k lost, the next one held up as long as allowed, and a second to spare."""
    tolerance, interval = 2, 20
    ttl = (tolerance + 1) * interval + lab03.LIMITS.max_late + 1
    return dataclasses.replace(
        HeartbeatPolicy(ttl=1, heartbeat_interval=1, missed_tolerance=0),
        ttl=ttl,
        heartbeat_interval=interval,
        missed_tolerance=tolerance,
    )


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


OLD_SEEDS = (1, 2, 3, 4)  # what the check sampled before it explored


def passed_the_four_seeds(chosen: HeartbeatPolicy) -> bool:
    """The old check's verdict: the kit's evaluator on four seeds of 2,000 calls, every limit kept."""
    return all(not lab03.problems(chosen.evaluate(seed=seed)) for seed in OLD_SEEDS)


def tuned_on_the_four_seeds():
    """The quickest detection the four seeded simulations accept: found by search, at the
    highest heartbeat rate allowed, with the smallest tolerance the limits name."""
    for ttl in range(10, 91):
        candidate = HeartbeatPolicy(ttl=ttl, heartbeat_interval=5, missed_tolerance=1)
        if passed_the_four_seeds(candidate):
            return candidate
    raise AssertionError("no candidate")


def just_above_the_rule():
    """ttl > (k + 1) x interval, by one second: true only while every heartbeat is on time."""
    return HeartbeatPolicy(ttl=31, heartbeat_interval=15, missed_tolerance=1)


def sized_from_the_calls_shown():
    """No heartbeats, a TTL just above the slowest of the twenty calls the notebook prints (seed 3)."""
    rng = random.Random(3)
    slowest = max(lab03.MODEL.sample(rng) for _ in range(20))
    return HeartbeatPolicy(ttl=round(slowest) + 10, heartbeat_interval=None, missed_tolerance=0)


def _replay(situation, name="choose_policy"):
    return f'lab03.replay_policy({name}, "{situation}")'


SPEC = Spec(
    exercise=lab03.exercise,
    right=(
        short_lease_frequent_beats,
        promises_less_than_it_keeps,
        derived_from_the_limits,
        fractional_values_in_a_subclass,
        computed_from_the_promise,
    ),
    wrong=(
        refused(
            policy(30, None, 0),
            "W1's lease ran out at t=30 while its model call was still running (calls take up to 120 s)",
            "W7 took the case over at t=30 (token 2)",
            "without heartbeats the lease must outlast the slowest call (120 s)",
            "no TTL keeps both promises",
            "(1 step): the call returns at t=120.",
            _replay("the call returns at t=120"),
        ),
        refused(
            policy(130, None, 0),
            "W1 died at t=0 and its case waited 130 s before W7 could take it over (limit 90 s)",
            "(1 step): W1 dies.",
            _replay("W1 dies"),
        ),
        refused(policy(120, 20, 1), "its case waited 120 s before W7 could take it over (limit 90 s)"),
        refused(policy(30, 2, 3), "sends 30 heartbeats per worker per minute (limit 12)", "at most every 5 s"),
        refused(
            policy(30, 10, 2),
            "after 2 lost heartbeats in a row, heartbeat 3 reached the queue at t=30, 30 s after the last renewal, "
            "not before the 30 s deadline",
            "(3 steps): heartbeat 1 is lost · heartbeat 2 is lost · heartbeat 3 lands.",
        ),
        refused(
            policy(60, 15, 3),
            "after 3 lost heartbeats in a row, heartbeat 4 reached the queue at t=60",
            "(4 steps): heartbeat 1 is lost · heartbeat 2 is lost · heartbeat 3 is lost · heartbeat 4 lands.",
        ),
        refused(
            policy(25, 15, 0),
            "W1's lease ran out at t=25",
            "after 1 lost heartbeat in a row, heartbeat 2 reached the queue at t=30",
            "(2 steps): heartbeat 1 is lost · heartbeat 2 lands.",
        ),
        refused(
            policy(30, 40, 1),
            "W1's lease ran out at t=30",
            "heartbeat 1 reached the queue at t=40, 40 s after the last renewal, not before the 30 s deadline",
            "(1 step): heartbeat 1 lands.",
        ),
        refused(
            policy(60, 200, 1),
            "W1's lease ran out at t=60",
            "the first heartbeat would go out at t=200, after the slowest call ends",
            "(1 step): the call returns at t=120.",
        ),
        refused(
            policy(60, 50, 1),
            "after 1 lost heartbeat in a row, heartbeat 2 reached the queue at t=100",
            "2. the lease runs out at t=60: W7 acquires O-1001 (token 2); t=100 W1 sends heartbeat 2: too late",
        ),
        refused(
            tuned_on_the_four_seeds,
            "W1's lease ran out at t=11",
            "after 1 lost heartbeat in a row, heartbeat 2 (held up 1 s) reached the queue at t=11",
            "(2 steps): heartbeat 1 is lost · heartbeat 2 is 1 s late.",
            _replay("heartbeat 1 is lost · heartbeat 2 is 1 s late", "tuned_on_the_four_seeds"),
        ),
        refused(
            just_above_the_rule,
            "W1's lease ran out at t=31",
            "heartbeat 2 (held up 1 s) reached the queue at t=31, 31 s after the last renewal",
            "(2 steps): heartbeat 1 is lost · heartbeat 2 is 1 s late.",
        ),
        refused(
            policy(35, 15, 1),
            "heartbeat 2 (held up 5 s) reached the queue at t=35",
            "(2 steps): heartbeat 1 is lost · heartbeat 2 is 5 s late.",
        ),
        refused(
            sized_from_the_calls_shown,
            "W1's lease ran out at t=60 while its model call was still running",
            "(1 step): the call returns at t=120.",
        ),
        refused(rigged, "W1's lease ran out at t=30", "without heartbeats", hidden=("a perfect policy",)),
        refused(lambda: {"ttl": 60, "heartbeat_interval": 15}, "returned the dict", "return a HeartbeatPolicy("),
    ),
    secrets=("HeartbeatPolicy(ttl=60", "ttl 60 s"),
)


def test_policies_the_four_seeds_passed_are_refused_by_the_grid():
    """The old check sampled four seeds; these passed it, and each breaks a promise in the grid."""
    for choose_policy in (tuned_on_the_four_seeds, just_above_the_rule, policy(35, 15, 1)):
        chosen = choose_policy()
        assert passed_the_four_seeds(chosen), chosen
        assert not lab03.exercise.result(choose_policy).correct, chosen
    replayed = lab03.replay_policy(tuned_on_the_four_seeds, "heartbeat 1 is lost · heartbeat 2 is 1 s late")
    assert replayed.problem.startswith("W1's lease ran out at t=11 while its model call was still running")
    assert [step.said for step in replayed.steps] == [
        "t=5 W1 sends heartbeat 1; it is lost on the way",
        "t=10 W1 sends heartbeat 2, held up 1 s; the lease runs out at t=11: W7 acquires O-1001 (token 2)",
    ]
    on_time = lab03.replay_policy(tuned_on_the_four_seeds, "heartbeat 1 is lost · heartbeat 2 lands")
    assert on_time.problem is None and "lease until t=21" in on_time.steps[-1].said


def test_the_policy_check_states_its_scope_and_covers_it_exactly():
    """The count is every situation: a brute-force walk of the same grid, with no merging, finds as many."""
    result = lab03.exercise.result(lambda: HeartbeatPolicy(ttl=60, heartbeat_interval=15, missed_tolerance=2))
    assert result.correct and result.message.startswith(
        "checked all 4,992 situations of a model call of up to 120 s under your policy (ttl 60 s, heartbeat every "
        "15 s, tolerates 2 lost in a row): any pattern of lost heartbeats, up to 2 in a row, any one heartbeat held "
        "up 1 to 5 s, and W1 dying at any heartbeat with W7 asking for work the second the lease runs out"
    )
    assert _brute_force(HeartbeatPolicy(ttl=60, heartbeat_interval=15, missed_tolerance=2)) == 4_992
    small = HeartbeatPolicy(ttl=40, heartbeat_interval=10, missed_tolerance=2)
    assert explore(lab03.policy_scenario(small), small).schedules == _brute_force(small)


def _brute_force(chosen: HeartbeatPolicy) -> int:
    """Every situation, written out one by one: each heartbeat (sent at k x interval while
    k x interval < 120) lands, is lost (at most `tolerance` in a row) or, once, is held up
    1 to 5 s; W1 may die before any heartbeat or the call's end."""
    h, most = chosen.heartbeat_interval, max(1, chosen.missed_tolerance)
    ticks = [k * h for k in range(1, 200) if k * h < lab03.MODEL.max]

    def count(k: int, in_a_row: int, held: bool) -> int:
        if k == len(ticks):
            return 2  # the call returns, or W1 dies
        total = 1 + count(k + 1, 0, held)  # W1 dies here; or the heartbeat lands
        if in_a_row < most:
            total += count(k + 1, in_a_row + 1, held)
        if not held:
            total += sum(count(k + 1, 0, True) for s in range(1, 6) if ticks[k] + s < lab03.MODEL.max)
        return total

    return count(0, 0, False)


def test_copying_the_world_covers_what_replaying_covers():
    """The explorer goes on from copies of 03.1's world (`clone`); without them it replays every
    prefix, and finds the same count, the same states and the same shortest situation."""

    class Replayed(lab03._Leasing):
        clone = None

    for chosen in (
        HeartbeatPolicy(ttl=40, heartbeat_interval=10, missed_tolerance=2),
        HeartbeatPolicy(ttl=31, heartbeat_interval=15, missed_tolerance=1),
    ):
        copied = explore(lab03.policy_scenario(chosen), chosen)
        scenario = dataclasses.replace(lab03.policy_scenario(chosen), start=lambda run, c=chosen: Replayed(run, c))
        replayed = explore(scenario, chosen)
        assert (copied.schedules, copied.states) == (replayed.schedules, replayed.states)
        assert (copied.counterexample is None) == (replayed.counterexample is None)
        if copied.counterexample is not None:
            assert copied.counterexample.words == replayed.counterexample.words


def test_the_worlds_lease_is_the_queues():
    """The world keeps the lease as numbers; the kit's queue, fed the same heartbeats, keeps the same deadline."""
    chosen = HeartbeatPolicy(ttl=40, heartbeat_interval=10, missed_tolerance=2)
    for pattern in itertools.product(("lands", "lost", "late"), repeat=5):
        if "lost" * 3 in "".join(pattern) or pattern.count("late") > 1:
            continue  # beyond the bound: 2 lost in a row, one held up
        world = lab03._Leasing(Run(None), chosen)
        for what in pattern:
            if what == "lost":
                world._lost(world._next(), None)
            else:
                world._beat(world._next(), 3 if what == "late" else 0, None)
        due, w7 = world._on_the_queue(world.deadline)
        assert due == world.deadline and w7.token == 2, pattern


# ---------------------------------------------------------------------------- 03.3 the heartbeat loop


def _send_and_ack(lease, queue, email, body):
    email.send(lease.payload["idem_key"], case_id=lease.case_id, to=lease.payload["to"], body=body)
    queue.ack(lease)


def raises_when_the_lease_is_lost(lease, queue, model, email):
    """Right, written differently: a string built up, `is False`, and the kit's error raised."""
    body = ""
    while True:
        chunk = model.next_chunk()
        if chunk is None:
            break
        body += chunk
        if queue.heartbeat(lease) is False:
            raise LeaseLostError(worker_id=lease.worker_id, item_id=lease.item_id, token=lease.token)
    _send_and_ack(lease, queue, email, body)


def asks_before_every_chunk_and_before_the_send(lease, queue, model, email):
    """Right, written differently: the question comes first, so the last one precedes the send."""
    draft = []
    while queue.heartbeat(lease):
        chunk = model.next_chunk()
        if chunk is None:
            _send_and_ack(lease, queue, email, " ".join(draft))
            return
        draft.append(chunk)


def stream_by_iter(lease, queue, model, email):
    """Right, written differently: iter() with a sentinel, a flag, and a joined body with spaces."""
    kept, lost = [], False
    for chunk in iter(model.next_chunk, None):
        kept.append(chunk)
        if not queue.heartbeat(lease):
            lost = True
            break
    if not lost:
        _send_and_ack(lease, queue, email, " ".join(kept))


def ignores_the_answer(lease, queue, model, email):
    draft = []
    while (chunk := model.next_chunk()) is not None:
        draft.append(chunk)
        queue.heartbeat(lease)
    _send_and_ack(lease, queue, email, "".join(draft))


def asks_once_at_the_start(lease, queue, model, email):
    if not queue.heartbeat(lease):
        return
    body = ""
    while (chunk := model.next_chunk()) is not None:
        body += chunk
    _send_and_ack(lease, queue, email, body)


def heartbeats_until_yes(lease, queue, model, email):
    """The quiz's first option: a refused heartbeat is asked again until it says yes."""
    draft = []
    while (chunk := model.next_chunk()) is not None:
        draft.append(chunk)
        while not queue.heartbeat(lease):
            pass
    _send_and_ack(lease, queue, email, "".join(draft))


def asks_before_keeping_each_chunk(lease, queue, model, email):
    """Checks in the wrong order: it asks about the chunk before, so nothing asks after the last one."""
    draft = []
    while (chunk := model.next_chunk()) is not None:
        if draft and not queue.heartbeat(lease):
            return
        draft.append(chunk)
    _send_and_ack(lease, queue, email, "".join(draft))


def three_chunks_are_a_draft(lease, queue, model, email):
    """A fixed count: the drafts the learner saw had three chunks."""
    draft = []
    for _ in range(3):
        chunk = model.next_chunk()
        if chunk is None:
            break
        draft.append(chunk)
        if not queue.heartbeat(lease):
            return
    _send_and_ack(lease, queue, email, "".join(draft))


def heartbeats_every_third_chunk(lease, queue, model, email):
    """A hard-coded rhythm: every third chunk, "about 30 s", assuming 10 s chunks."""
    draft = []
    while (chunk := model.next_chunk()) is not None:
        draft.append(chunk)
        if len(draft) % 3 == 0 and not queue.heartbeat(lease):
            return
    _send_and_ack(lease, queue, email, "".join(draft))


LOST = set()  # the leases this process has seen refused: in memory, next to the loop


def remembers_the_loss_in_memory(lease, queue, model, email):
    """State outside the queue: after a no it stops asking, but goes on drafting until the end."""
    draft = []
    while (chunk := model.next_chunk()) is not None:
        draft.append(chunk)
        if lease.token not in LOST and not queue.heartbeat(lease):
            LOST.add(lease.token)
    if lease.token not in LOST:
        _send_and_ack(lease, queue, email, "".join(draft))


def swallows_its_own_error(lease, queue, model, email):
    """Raises on a no, and its own `except` swallows it: the send goes out anyway."""
    draft = []
    try:
        while (chunk := model.next_chunk()) is not None:
            draft.append(chunk)
            if not queue.heartbeat(lease):
                raise LeaseLostError(worker_id=lease.worker_id, item_id=lease.item_id, token=lease.token)
    except LeaseLostError:
        pass
    _send_and_ack(lease, queue, email, "".join(draft))


def acks_to_let_go(lease, queue, model, email):
    """No send after a no, but an ack "to release the case": a write under a lost lease."""
    draft = []
    while (chunk := model.next_chunk()) is not None:
        draft.append(chunk)
        if not queue.heartbeat(lease):
            try:
                queue.ack(lease)
            except Exception:  # noqa: BLE001 - "it may be gone already"
                pass
            return
    _send_and_ack(lease, queue, email, "".join(draft))


def sends_the_last_chunk_only(lease, queue, model, email):
    chunk, last = model.next_chunk(), None
    while chunk is not None:
        last = chunk
        if not queue.heartbeat(lease):
            return
        chunk = model.next_chunk()
    _send_and_ack(lease, queue, email, last or "")


_SHORT = "(3 steps): draft: 8 s · a 40 s stall in chunk 1, W7 eager · W1 runs your loop."
_REPLAY = 'lab03.replay(ignores_the_answer, "draft: 8 s · a 40 s stall in chunk 1, W7 eager · W1 runs your loop")'

LOOP = Spec(
    exercise=lab03.loop,
    right=(raises_when_the_lease_is_lost, asks_before_every_chunk_and_before_the_send, stream_by_iter),
    wrong=(
        refused(
            ignores_the_answer,
            "W1's heartbeat at t=48 was refused (a draft of 8 s, a 40 s stall in chunk 1), "
            "yet your loop asked the model for another chunk",
            _SHORT,
            _REPLAY,
        ),
        refused(
            asks_once_at_the_start,
            "W1 sent Jordan's email at t=48, but its lease had run out at t=30 and W7 has held the case since t=31",
            "W1 last heard yes from the queue at t=0",
            _SHORT,
        ),
        refused(
            heartbeats_until_yes,
            "stopped by the check: it does not stop",
            "A refused heartbeat is final for this lease",
            _SHORT,
        ),
        refused(
            asks_before_keeping_each_chunk, "W1 sent Jordan's email at t=48, but its lease had run out at t=30", _SHORT
        ),
        refused(
            three_chunks_are_a_draft,
            "W1 sent after 3 of the 4 chunks (a draft of 8, 8, 8, 8 s, no stall)",
            "(3 steps): draft: 8, 8, 8, 8 s · no stall, W7 eager · W1 runs your loop.",
        ),
        refused(heartbeats_every_third_chunk, "W1 sent Jordan's email at t=48", _SHORT),
        refused(
            remembers_the_loss_in_memory,
            "W1's heartbeat at t=48 was refused",
            "yet your loop asked the model for another chunk",
            _SHORT,
        ),
        refused(
            swallows_its_own_error, "W1's heartbeat at t=48 was refused", "yet your loop sent Jordan's email", _SHORT
        ),
        refused(acks_to_let_go, "W1's heartbeat at t=48 was refused", "yet your loop acked", _SHORT),
        refused(
            sends_the_last_chunk_only,
            "not the whole draft",
            "the body must hold every chunk, in order",
            "(3 steps): draft: 8, 8 s · no stall, W7 eager · W1 runs your loop.",
        ),
    ),
    secrets=("if not queue.heartbeat(lease)", "while (chunk := model.next_chunk())"),
)


def test_the_loop_check_states_its_bound_and_a_healthy_draft_must_keep_its_lease():
    result = lab03.loop.result(stream_by_iter)
    assert result.correct and result.message.startswith("checked all 204 schedules of every draft of 1 to 3 chunks")

    def late_first_question(lease, queue, model, email):  # asks only after the second chunk
        draft = []
        while (chunk := model.next_chunk()) is not None:
            draft.append(chunk)
            if len(draft) > 1 and not queue.heartbeat(lease):
                return
        _send_and_ack(lease, queue, email, "".join(draft))

    replayed = lab03.replay(late_first_question, "draft: 20, 20 s · no stall, W7 away · W1 runs your loop")
    assert "W1's lease ran out at t=30 during a healthy draft" in replayed.problem
    assert lab03.replay(stream_by_iter, "draft: 20, 20 s · no stall, W7 away · W1 runs your loop").problem is None


def test_the_loop_is_handed_only_the_methods_it_needs():
    """The queue, the adapter and the record the check judges stay with the check."""
    world = lab03._Drafting(Run(stream_by_iter))
    handed = lab03._facades(world)
    assert sorted(n for f in handed for n in dir(f) if not n.startswith("_")) == [
        "ack",
        "heartbeat",
        "next_chunk",
        "send",
    ]
    assert not any(hasattr(f, "__dict__") for f in handed)


(
    test_a_right_answer_written_differently_is_accepted,
    test_a_plausible_wrong_answer_is_refused_with_its_evidence,
    test_the_specification_has_enough_right_and_wrong_answers,
) = accuracy_tests(SPEC, LOOP)
