"""The specification of lab 01's checks: a handler that is safe to run twice (judged on
every schedule of two workers, one lease expiry and a crash anywhere, the shortest
breaking one shown), and what an expired lease leads to."""

from __future__ import annotations

import re
from io import StringIO
from itertools import cycle

from check_accuracy import Spec, accuracy_tests, refused, replay_tests

from shopops_lab.checks import lab01
from shopops_lab.explore import Run

# ---------------------------------------------------------------------------- 01.1 right, written differently


def sends_and_returns_the_message_id(lease, adapter):
    payload = lease.payload
    result = adapter.send(
        payload["idem_key"],
        case_id=lease.case_id,
        to=payload["to"],
        body=f"About {lease.case_id}: sorry for the wait.",
        worker_id=lease.worker_id,
    )
    return result.message_id


def sends_with_keywords_only(lease, adapter):
    where = {"case_id": lease.case_id, "to": lease.payload.get("to")}
    adapter.send(idem_key=lease.payload.get("idem_key"), body="We are sorry for the delay.", **where)


def sends_through_a_helper_with_defaults(lease, adapter, *, body="Sorry for the wait."):
    def deliver(payload, case):
        return adapter.send(payload["idem_key"], case_id=case, to=payload["to"], body=body)

    return deliver(dict(lease.payload), lease.case_id)


# ---------------------------------------------------------------------------- 01.1 wrong, as learners write them


def builds_the_body_with_classes_written_in_c(lease, adapter):
    """StringIO and cycle are imported by name: a restarted process imports the same ones."""
    body = StringIO()
    for word, _ in zip(cycle(("sorry", "for", "the", "wait")), range(4)):
        body.write(f"{word} ")
    return adapter.send(lease.payload["idem_key"], case_id=lease.case_id, to=lease.payload["to"], body=body.getvalue())


def key_from_the_attempt(lease, adapter):
    return adapter.send(
        f"{lease.case_id}:email:{lease.attempt}", case_id=lease.case_id, to=lease.payload["to"], body="sorry"
    )


def key_from_the_token(lease, adapter):
    return adapter.send(f"{lease.item_id}:{lease.token}", case_id=lease.case_id, to=lease.payload["to"])


def key_is_the_item_id(lease, adapter):
    return adapter.send(lease.item_id, case_id=lease.case_id, to=lease.payload["to"], body="sorry")


def key_is_the_case(lease, adapter):
    return adapter.send(lease.case_id, case_id=lease.case_id, to=lease.payload["to"], body="sorry")


def key_from_case_and_template(lease, adapter):
    key = f"{lease.case_id}:{lease.payload['template']}"
    return adapter.send(key, case_id=lease.case_id, to=lease.payload["to"], body="sorry")


def key_is_the_address(lease, adapter):
    return adapter.send(lease.payload["to"], case_id=lease.case_id, to=lease.payload["to"], body="sorry")


def skips_redeliveries(lease, adapter):
    if lease.attempt > 1:
        return None  # "someone already handled this"
    return adapter.send(lease.payload["idem_key"], case_id=lease.case_id, to=lease.payload["to"], body="sorry")


def forgets_the_address(lease, adapter):
    return adapter.send(lease.payload["idem_key"], case_id=lease.case_id, body="sorry")


def hard_codes_the_case(lease, adapter):
    return adapter.send(lease.payload["idem_key"], case_id="O-1001", to=lease.payload["to"], body="sorry")


def key_from_the_worker(lease, adapter):
    """Each worker's own send is idempotent; two workers' are not."""
    return adapter.send(
        f"{lease.payload['idem_key']}:{lease.worker_id}", case_id=lease.case_id, to=lease.payload["to"], body="sorry"
    )


_NUMBER: dict = {}


def numbers_emails_in_its_own_memory(lease, adapter):
    """State outside the store: the email's number comes from a count kept in the process."""
    _NUMBER[lease.case_id] = _NUMBER.get(lease.case_id, 0) + 1
    return adapter.send(
        f"{lease.case_id}:email:{_NUMBER[lease.case_id]}", case_id=lease.case_id, to=lease.payload["to"], body="sorry"
    )


_DONE_CASES: set = set()


def sends_once_per_case(lease, adapter):
    """Records the case as done in process memory: the case's second email is skipped."""
    if lease.case_id in _DONE_CASES:
        return None
    result = adapter.send(lease.payload["idem_key"], case_id=lease.case_id, to=lease.payload["to"], body="sorry")
    _DONE_CASES.add(lease.case_id)
    return result


def forges_the_ledger(lease, adapter):
    """Reaches for the adapter's ledger to make a send look done: the facade has none."""
    adapter.ledger.record(lease.payload["idem_key"])
    return None


HANDLER = Spec(
    exercise=lab01.exercise,
    right=(
        sends_and_returns_the_message_id,
        sends_with_keywords_only,
        sends_through_a_helper_with_defaults,
        builds_the_body_with_classes_written_in_c,
    ),
    wrong=(
        refused(
            key_from_the_attempt,
            "email O-1002:email:4 (refund_confirmation) reached the customer 2 times",
            "msg-0001 sent by W1 for item-0001 and msg-0002 by W2 for item-0001",
            "Both deliveries of the same work",
            "(5 steps): W1 acquire · W1 handle · leases expire · W2 acquire · W2 handle",
            "5. W2 handles item-0001: msg-0002 to customer-2@example.com",
        ),
        refused(key_from_the_token, "reached the customer 2 times", "Both deliveries of the same work"),
        refused(
            key_is_the_item_id,
            "reached the customer 2 times",
            "queued again when the planner restarted",
            "a new item, the same email",
            'morning="three items of one case"',
        ),
        refused(key_is_the_case, "never reached", "with a key the adapter had already seen"),
        refused(
            key_from_case_and_template,
            "O-1002:email:5 (refund_confirmation) never reached",
            "already seen",
            "not just the case, the customer or the kind of email",
            'morning="three items of one case"',
        ),
        refused(key_is_the_address, "never reached", "already seen"),
        refused(skips_redeliveries, "never reached", "no delivery sent it", "(crash before send)", "leases expire"),
        refused(forgets_the_address, "went to 'customer'", "not to the address in the item's payload"),
        refused(hard_codes_the_case, "was filed under case_id 'O-1001'"),
        refused(key_from_the_worker, "reached the customer 2 times", "by W1 for item-0001", "by W2 for item-0001"),
        refused(numbers_emails_in_its_own_memory, "reached the customer 2 times"),
        refused(sends_once_per_case, "O-1002:email:5 (refund_confirmation) never reached", "no delivery sent it"),
        refused(
            forges_the_ledger, "the handler raised AttributeError: 'EmailAdapter' object has no attribute 'ledger'"
        ),
    ),
    secrets=('payload["idem_key"]', "lease.payload[", "idem_key=lease"),
    replay=lambda answer, schedule, message: lab01.replay(
        answer, schedule, morning=re.search(r'morning="([^"]+)"', message)[1]
    ),
)


# ---------------------------------------------------------------------------- 01.2 right, written differently


def stalls_one_lease_length(queue, clock, handle):
    first = queue.acquire("W1")
    handle(first)
    clock.advance(queue.lease_seconds)
    second = queue.acquire("W7")
    handle(second)
    queue.ack(second)
    return first, second


def ticks_until_the_queue_hands_it_out(queue, clock, handle):
    """Stalls before its send (a slow model call), then polls once a second, as a worker loop would."""
    first = queue.acquire("worker-a")
    clock.advance(queue.lease_seconds / 2)
    handle(first)
    while (second := queue.acquire("worker-b")) is None:
        clock.advance(1)
    handle(second)
    queue.ack(second)
    return [first, second]


def jumps_to_the_deadline_and_expires_explicitly(queue, clock, handle):
    leases = [queue.acquire("W1")]
    handle(leases[0])
    clock.set(leases[0].expires_at + 0.5)
    queue.expire_leases()
    leases.append(queue.acquire("W2"))
    handle(leases[1])
    queue.ack(leases[1])
    return tuple(leases)


# ---------------------------------------------------------------------------- 01.2 wrong, as learners write them


class _WallClock:
    """The test's stand-in for the `time` module: its sleep waits on nothing, which is what
    sleeping on the wall clock does to the queue's virtual clock."""

    @staticmethod
    def sleep(seconds):
        return None


time = _WallClock()


def sleeps_on_the_wall_clock(queue, clock, handle):
    first = queue.acquire("W1")
    handle(first)
    time.sleep(queue.lease_seconds + 1)  # the computer's clock, not the queue's
    second = queue.acquire("W7")
    if second is not None:
        handle(second)
        queue.ack(second)
    return first, second


def advances_the_storys_31_seconds(queue, clock, handle):
    first = queue.acquire("W1")
    handle(first)
    clock.advance(31)
    second = queue.acquire("W7")
    handle(second)
    queue.ack(second)
    return first, second


def advances_one_second_short(queue, clock, handle):
    first = queue.acquire("W1")
    handle(first)
    clock.advance(queue.lease_seconds - 1)
    second = queue.acquire("W7")
    if second is not None:
        handle(second)
        queue.ack(second)
    return first, second


def sets_the_storys_absolute_time(queue, clock, handle):
    first = queue.acquire("W1")
    handle(first)
    clock.set(31)  # the notebook's story set t=31: right on a clock that starts at 0, not on another
    second = queue.acquire("W7")
    handle(second)
    queue.ack(second)
    return first, second


def acks_before_it_stalls(queue, clock, handle):
    first = queue.acquire("W1")
    handle(first)
    queue.ack(first)
    clock.advance(queue.lease_seconds + 1)
    second = queue.acquire("W7")
    return first, second


def gives_the_lease_back(queue, clock, handle):
    first = queue.acquire("W1")
    handle(first)
    queue.nack(first, "stalled")
    second = queue.acquire("W7")
    handle(second)
    queue.ack(second)
    return first, second


def fabricates_the_redelivery(queue, clock, handle):
    """Hard-coded output: the second lease is written by hand, never granted by the queue."""
    first = queue.acquire("W1")
    handle(first)
    return first, first._replace(worker_id="W7", token=first.token + 1, attempt=2)


def returns_the_expected_story(queue, clock, handle):
    return ("W1 held item-0001 (attempt 1)", "W7 held item-0001 (attempt 2)")


def handles_only_the_redelivery(queue, clock, handle):
    first = queue.acquire("W1")
    clock.advance(queue.lease_seconds + 1)
    second = queue.acquire("W7")
    handle(second)
    queue.ack(second)
    return first, second


def takes_it_back_itself(queue, clock, handle):
    first = queue.acquire("W1")
    handle(first)
    clock.advance(queue.lease_seconds + 1)
    second = queue.acquire("W1")
    handle(second)
    queue.ack(second)
    return first, second


def never_acks_the_redelivery(queue, clock, handle):
    first = queue.acquire("W1")
    handle(first)
    clock.advance(queue.lease_seconds + 1)
    second = queue.acquire("W7")
    handle(second)
    return first, second


EXPIRY = Spec(
    exercise=lab01.expiry,
    right=(stalls_one_lease_length, ticks_until_the_queue_hands_it_out, jumps_to_the_deadline_and_expires_explicitly),
    wrong=(
        refused(
            sleeps_on_the_wall_clock,
            "with a 7.5 s lease on a clock that started at t=0",
            "W1's lease runs to t=7.5, and the queue's clock only reached t=0",
            "W7 asked at t=0 and got nothing",
            "The clock did not move after W1 acquired",
            "waiting on your computer's clock does not move it",
        ),
        refused(
            advances_the_storys_31_seconds,
            "with a 90 s lease on a clock that started at t=0",
            "W1's lease runs to t=90, and the queue's clock only reached t=31",
            "less than this queue's lease of 90 s",
        ),
        refused(advances_one_second_short, "with a 7.5 s lease", "only reached t=6.5", "moved 6.5 s"),
        refused(
            sets_the_storys_absolute_time,
            "on a clock that started at t=1000",
            "lease runs to t=1007.5",
            "force_expiry raised BadArgumentError: when is 31.0, before the clock's 1000.0",
        ),
        refused(acks_before_it_stalls, "W1 acknowledged its lease", "nothing was redelivered"),
        refused(gives_the_lease_back, "handed back with nack()", "not a lease running out"),
        refused(fabricates_the_redelivery, "W1's lease runs to t=7.5", "only reached t=0"),
        refused(returns_the_expected_story, "no worker ever acquired the item"),
        refused(handles_only_the_redelivery, "the handler never ran for W1's lease (attempt 1)"),
        refused(takes_it_back_itself, "both leases went to W1"),
        refused(never_acks_the_redelivery, "W7 got the redelivery but never acknowledged it", "the item is leased"),
    ),
    secrets=("lease_seconds)", "advance(queue.lease_seconds"),
)


# ---------------------------------------------------------------------------- 01.3


def names_each_label():
    return frozenset(("w1_still_sends", "redelivered", "late_ack_refused"))


def picks_from_the_options():
    could = ("redelivered", "late_ack_refused", "w1_still_sends")
    return [label for label in lab01.NEXT_OPTIONS if label in could]


KNOWLEDGE = Spec(
    exercise=lab01.knowledge,
    right=(names_each_label, picks_from_the_options),
    wrong=(
        refused(
            lambda: {"redelivered", "late_ack_refused"},
            "everything you chose can happen",
            "1 more option",
            hidden=("w1_still_sends",),
        ),
        refused(lambda: {"redelivered"}, "2 more options can too", hidden=("late_ack_refused", "w1_still_sends")),
        refused(
            lambda: {"redelivered", "late_ack_refused", "w1_still_sends", "w1_stopped"},
            "'w1_stopped' cannot happen",
            "nothing interrupts W1",
        ),
        refused(lambda: {"redelivered", "case_blocked"}, "'case_blocked' cannot happen", "the case is free"),
        refused(lambda: {"straight_to_dlq"}, "'straight_to_dlq' cannot happen", "attempt 1 of 5"),
        refused(lambda: "redelivered", "the function returned the str 'redelivered'", "return a set of labels"),
        refused(lambda: None, "the function returned None", "return a set of labels"),
        refused(lambda: {"W7 takes over"}, "'W7 takes over' is not among the labels"),
    ),
)

(
    test_a_right_answer_written_differently_is_accepted,
    test_a_plausible_wrong_answer_is_refused_with_its_evidence,
    test_the_specification_has_enough_right_and_wrong_answers,
) = accuracy_tests(HANDLER, EXPIRY, KNOWLEDGE)


def test_the_handler_check_states_its_bound_and_the_memory_of_a_process_does_not_outlive_it():
    """The success message states the bound; a wrong answer that keeps its count in module
    memory is judged from a fresh process every schedule, so checking it twice says the same."""
    result = lab01.exercise.result(sends_and_returns_the_message_id)
    assert (
        result.message.startswith("checked all ")
        and "schedules of two mornings, each with 1 lease expiry, a "
        "crash anywhere (1 email taken by 2 workers; 3 items of one case"
        in result.message
    )
    first = str(lab01.exercise.result(numbers_emails_in_its_own_memory))
    assert first == str(lab01.exercise.result(numbers_emails_in_its_own_memory)) and _NUMBER == {}


def test_a_crash_after_the_send_is_a_lost_reply_and_the_redelivery_is_safe():
    schedule = "W1 acquire · W1 handle (crash after send) · leases expire · W2 acquire · W2 handle · W2 ack"
    replayed = lab01.replay(sends_and_returns_the_message_id, schedule)
    lines = str(replayed).splitlines()
    assert lines[1] == "2. W1 handle: W1's process dies (crash after send)"
    assert lines[4] == "5. W2 handles item-0001: no new email" and replayed.problem is None


test_the_schedule_a_refusal_shows_replays_to_the_same_problem = replay_tests(HANDLER)


def test_the_handler_is_handed_send_and_nothing_else():
    """The evidence (the ledger, the provider, the log) stays with the check: the adapter a
    handler gets has one public method and no attributes."""
    adapter = lab01.scenario().start(Run(sends_and_returns_the_message_id)).facade
    assert [name for name in dir(adapter) if not name.startswith("__")] == ["send"]
    assert not hasattr(adapter, "__dict__")


_LEARNED: dict = {}


def remembers_the_first_lease_length(queue, clock, handle):
    """Right only if each queue is played by a fresh process: it keeps the first lease length
    it sees in module memory, which would be 7.5 s on every later queue of one process."""
    _LEARNED.setdefault("lease", queue.lease_seconds)
    first = queue.acquire("W1")
    handle(first)
    clock.advance(_LEARNED["lease"])
    second = queue.acquire("W7")
    handle(second)
    queue.ack(second)
    return first, second


def test_the_expiry_check_states_its_scope_and_runs_a_fresh_process_per_queue():
    """The bound is in the success message; each queue of the scope gets a fresh copy of the
    answer, so memory kept by one run never reaches the next (nor the learner's own)."""
    result = lab01.expiry.result(remembers_the_first_lease_length)
    assert result.correct, str(result)
    assert result.message.startswith(
        "checked all 6 queues (a lease of 7.5, 30 or 90 s, on a clock starting at t=0 or t=1000)"
    ), result.message
    assert _LEARNED == {}


def test_the_expiry_facades_hand_out_a_workers_calls_and_nothing_else():
    stage = lab01._Stage(30, 0)
    queue, clock, handle = stage.facades
    assert [n for n in dir(queue) if not n.startswith("__")] == [
        "ack",
        "acquire",
        "expire_leases",
        "heartbeat",
        "lease_seconds",
        "nack",
    ]
    assert [n for n in dir(clock) if not n.startswith("__")] == ["advance", "now", "set"]
    assert not any(hasattr(x, "__dict__") for x in (queue, clock, handle))


def test_the_morning_with_the_learners_handler_sends_once_for_two_deliveries():
    scene, inbox, (first, second) = lab01.expiry_morning(stalls_one_lease_length, sends_and_returns_the_message_id)
    assert (first.item_id, first.attempt, second.attempt) == (second.item_id, 1, 2)
    assert len(inbox.ledger.contacts("O-1001")) == 1 and scene.item(first.item_id).state.value == "done"


def test_a_record_kept_in_a_file_is_named_for_what_the_code_did(tmp_path):
    """A file outlives a crash: the handler then skips a send it made the first time, and the
    check names that, not a schedule it could not play."""
    sent = tmp_path / "sent-keys.txt"

    def send_followup(lease, adapter):
        key = lease.payload["idem_key"]
        if sent.exists() and key in sent.read_text().split():
            return None
        result = adapter.send(key, case_id=lease.case_id, to=lease.payload["to"], body="Sorry for the wait.")
        with sent.open("a") as keys:
            keys.write(key + "\n")
        return result

    result = lab01.exercise.result(send_followup)
    assert not result.correct
    assert result.message.startswith(
        "your code did not do the same thing twice from the same start: the check played the step 'W1 handle' "
        "once more, to try 'crash before send'"
    )
