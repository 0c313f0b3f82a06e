"""The specification of lab 00's check (warm-up: put case O-1001 on the queue)."""

from __future__ import annotations

from check_accuracy import Spec, accuracy_tests, refused

from shopops_lab.checks import lab00
from shopops_lab.worker.queue import Priority

# ---------------------------------------------------------------------------- right, written differently


def enqueue_with_a_payload(queue):
    return queue.enqueue(
        kind="contact_send",
        case_id="O-1001",
        tenant_id="store_northline",
        payload={"to": "jordan@example.com"},
        priority=Priority.NORMAL,
    )


def enqueue_then_look_it_up(queue):
    queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")
    (item,) = queue.items()
    return item.id


# ---------------------------------------------------------------------------- wrong, as learners write them


def forgets_to_return(queue):
    queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")


def wrong_store(queue):
    return queue.enqueue(case_id="O-1001", tenant_id="northline", kind="contact_send")


def wrong_kind(queue):
    return queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="refund_review")


def also_acquires(queue):
    item_id = queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")
    queue.acquire("W1")
    return item_id


def returns_the_case_id(queue):
    queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")
    return "O-1001"


def returns_the_item(queue):
    return queue.item(queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send"))


def enqueues_twice(queue):
    queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")
    return queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")


class SaysYes(str):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


def returns_a_look_alike(queue):
    queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")
    return SaysYes("whatever it is")


SPEC = Spec(
    exercise=lab00.warmup,
    right=(enqueue_with_a_payload, enqueue_then_look_it_up),
    wrong=(
        refused(forgets_to_return, "the function returned None", "the item id"),
        refused(wrong_store, "the item's tenant_id is 'northline'"),
        refused(wrong_kind, "the item's kind is 'refund_review'"),
        refused(also_acquires, "the item is leased, not ready"),
        refused(returns_the_case_id, "you returned 'O-1001', the case id"),
        refused(returns_the_item, "the function returned an Item object"),
        refused(enqueues_twice, "the queue holds 2 items"),
        refused(returns_a_look_alike, "the function returned the SaysYes 'whatever it is'", "the item id"),
    ),
    secrets=("store_northline", "contact_send"),
)

(
    test_a_right_answer_written_differently_is_accepted,
    test_a_plausible_wrong_answer_is_refused_with_its_evidence,
    test_the_specification_has_enough_right_and_wrong_answers,
) = accuracy_tests(SPEC)
