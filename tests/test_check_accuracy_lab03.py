"""The specification of lab 03's checks: a lease policy for a 120 s model call, judged by
simulating its values with the kit's own evaluator; and the heartbeat loop (03.3), judged by
exploring every draft, stall and takeover in a small grid, each wrong loop refused with the
shortest schedule that breaks it."""

from __future__ import annotations

from check_accuracy import Spec, accuracy_tests, refused

from shopops_lab.checks import lab03
from shopops_lab.checks.lab03 import HeartbeatPolicy
from shopops_lab.errors import LeaseLostError
from shopops_lab.explore import Run
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
_REPLAY = 'lab03.replay(draft_with_heartbeats, "draft: 8 s · a 40 s stall in chunk 1, W7 eager · W1 runs your loop")'

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
