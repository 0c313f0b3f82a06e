"""The specification of lab 06's check: an idempotent consumer, judged by what happened to
the refunds and what `handle` returned, never by how it spells its records in `processed`."""
from __future__ import annotations

from check_accuracy import Spec, accuracy_tests, refused

from shopops_lab.checks import lab06

# ---------------------------------------------------------------------------- right, written differently


def records_a_derived_key(delivery, processed, apply):
    key = "consumer:" + delivery.message_id
    if key in processed:
        return False
    apply(delivery)
    processed.add(key)
    return True


def records_topic_and_id(delivery, processed, apply):
    record = (delivery.topic, delivery.message_id)
    seen = record in processed
    if not seen:
        apply(delivery)           # raises on a failed payment: nothing recorded, the copy comes back
        processed.add(record)
    return not seen


# ---------------------------------------------------------------------------- wrong, as learners write them

def applies_everything(delivery, processed, apply):
    apply(delivery)
    return True


def dedupes_on_the_delivery_number(delivery, processed, apply):
    if delivery.seq in processed:
        return False
    apply(delivery)
    processed.add(delivery.seq)
    return True


def marks_before_applying(delivery, processed, apply):
    if delivery.message_id in processed:
        return False
    processed.add(delivery.message_id)
    apply(delivery)
    return True


def swallows_the_failure(delivery, processed, apply):
    if delivery.message_id in processed:
        return False
    try:
        apply(delivery)
    except ConnectionError:
        return False
    processed.add(delivery.message_id)
    return True


def dedupes_on_the_payload(delivery, processed, apply):
    key = (delivery.payload["case_id"], delivery.payload["amount"])
    if key in processed:
        return False
    apply(delivery)
    processed.add(key)
    return True


def returns_nothing(delivery, processed, apply):
    if delivery.message_id not in processed:
        apply(delivery)
        processed.add(delivery.message_id)


def applies_twice_to_be_sure(delivery, processed, apply):
    if delivery.message_id in processed:
        return False
    apply(delivery)
    apply(delivery)
    processed.add(delivery.message_id)
    return True


_SEEN: set = set()


def remembers_in_its_own_memory(delivery, processed, apply):
    """Keeps its record in the process, not in `processed`: the next world starts with it."""
    if delivery.message_id in _SEEN:
        return False
    apply(delivery)
    _SEEN.add(delivery.message_id)
    return True


SPEC = Spec(
    exercise=lab06.exercise,
    right=(records_a_derived_key, records_topic_and_id),
    wrong=(
        refused(applies_everything, "out-0001 (refund 35.00 for O-1001) was applied twice, by delivery #1 and again "
                "by #2 (seed 1)", "the dispatcher crashed after publishing #1, before marking it sent",
                "#2 out-0001 (refund 35.00 for O-1001): handle returned True - refund applied",
                "Replay it: print(lab06.replay(handle, seed=1))"),
        refused(dedupes_on_the_delivery_number, "was applied twice, by delivery #1 and again by #2 (seed 1)"),
        refused(marks_before_applying, "delivery #7 of out-0003 (refund 12.50 for O-1002) was skipped although "
                "out-0003 had never been applied (seed 1)", "its first apply failed (payments API timed out)"),
        refused(swallows_the_failure, "on delivery #5 of out-0003, apply raised ConnectionError (payments API timed "
                "out) but handle returned False", "the error was swallowed"),
        refused(dedupes_on_the_payload, "delivery #4 of out-0002 (refund 35.00 for O-1001) was skipped", "only "
                "out-0001, a different message with the same case and amount, had been applied"),
        refused(returns_nothing, "handle returned None for delivery #1 of out-0001, which it applied"),
        refused(applies_twice_to_be_sure, "was applied 2 times, all by delivery #1 (seed 1)",
                "call apply once per message"),
        refused(remembers_in_its_own_memory, "was skipped although", "had never been applied",
                "nothing had applied it before"),
    ),
    secrets=("processed.add(", "in processed", "apply(delivery) first"),
)

(test_a_right_answer_written_differently_is_accepted,
 test_a_plausible_wrong_answer_is_refused_with_its_evidence,
 test_the_specification_has_enough_right_and_wrong_answers) = accuracy_tests(SPEC)
