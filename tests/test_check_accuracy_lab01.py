"""The specification of lab 01's checks: a handler that is safe to run twice, and what an
expired lease leads to."""
from __future__ import annotations

from check_accuracy import Spec, accuracy_tests, refused

from shopops_lab.checks import lab01

# ---------------------------------------------------------------------------- 01.1 right, written differently


def sends_and_returns_the_message_id(lease, adapter):
    payload = lease.payload
    result = adapter.send(payload["idem_key"], case_id=lease.case_id, to=payload["to"],
                          body=f"About {lease.case_id}: sorry for the wait.", worker_id=lease.worker_id)
    return result.message_id


def sends_with_keywords_only(lease, adapter):
    where = {"case_id": lease.case_id, "to": lease.payload.get("to")}
    adapter.send(idem_key=lease.payload.get("idem_key"), body="We are sorry for the delay.", **where)


# ---------------------------------------------------------------------------- 01.1 wrong, as learners write them

def key_from_the_attempt(lease, adapter):
    return adapter.send(f"{lease.case_id}:email:{lease.attempt}", case_id=lease.case_id,
                        to=lease.payload["to"], body="sorry")


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


HANDLER = Spec(
    exercise=lab01.exercise,
    right=(sends_and_returns_the_message_id, sends_with_keywords_only),
    wrong=(
        refused(key_from_the_attempt, "reached the customer 2 times (seed 1)", "msg-0001", "by W1",
                "Both deliveries of the same work"),
        refused(key_from_the_token, "reached the customer 2 times", "Both deliveries of the same work"),
        refused(key_is_the_item_id, "reached the customer 2 times", "queued again when the planner restarted",
                "a new item, the same email"),
        refused(key_is_the_case, "never reached", "with a key the adapter had already seen"),
        refused(key_from_case_and_template, "O-1001:email:5 (refund_confirmation) never reached",
                "already seen", "not just the case, the customer or the kind of email"),
        refused(key_is_the_address, "never reached", "already seen"),
        refused(skips_redeliveries, "never reached", "no delivery sent it"),
        refused(forgets_the_address, "went to 'customer'", "not to the address in the item's payload"),
        refused(hard_codes_the_case, "was filed under case_id 'O-1001'"),
    ),
    secrets=('payload["idem_key"]', "lease.payload[", "idem_key=lease"),
)


# ---------------------------------------------------------------------------- 01.2

def names_each_label():
    return frozenset(("w1_still_sends", "redelivered", "late_ack_refused"))


def picks_from_the_options():
    could = ("redelivered", "late_ack_refused", "w1_still_sends")
    return [label for label in lab01.NEXT_OPTIONS if label in could]


KNOWLEDGE = Spec(
    exercise=lab01.knowledge,
    right=(names_each_label, picks_from_the_options),
    wrong=(
        refused(lambda: {"redelivered", "late_ack_refused"}, "everything you chose can happen", "1 more option",
                hidden=("w1_still_sends",)),
        refused(lambda: {"redelivered"}, "2 more options can too", hidden=("late_ack_refused", "w1_still_sends")),
        refused(lambda: {"redelivered", "late_ack_refused", "w1_still_sends", "w1_stopped"},
                "'w1_stopped' cannot happen", "nothing interrupts W1"),
        refused(lambda: {"redelivered", "case_blocked"}, "'case_blocked' cannot happen", "the case is free"),
        refused(lambda: {"straight_to_dlq"}, "'straight_to_dlq' cannot happen", "attempt 1 of 5"),
        refused(lambda: "redelivered", "the function returned the str 'redelivered'", "return a set of labels"),
        refused(lambda: None, "the function returned None", "return a set of labels"),
        refused(lambda: {"W7 takes over"}, "'W7 takes over' is not among the labels"),
    ),
)

(test_a_right_answer_written_differently_is_accepted,
 test_a_plausible_wrong_answer_is_refused_with_its_evidence,
 test_the_specification_has_enough_right_and_wrong_answers) = accuracy_tests(HANDLER, KNOWLEDGE)
