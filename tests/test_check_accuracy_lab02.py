"""The specification of lab 02's checks: replay the DLQ after the fix, and where an item ends."""

from __future__ import annotations

from check_accuracy import Spec, accuracy_tests, refused

from shopops_lab.checks import lab02

# ---------------------------------------------------------------------------- 02.1 right, written differently


def acquires_and_acks_by_hand(queue, handler):
    for item in list(queue.dlq_items()):
        queue.replay_dlq(item.id)
    while (lease := queue.acquire("W2")) is not None:
        try:
            handler(lease)
        except Exception as exc:  # noqa: BLE001 - a failed item goes back, and dies after its last attempt
            queue.nack(lease, error=repr(exc))
        else:
            queue.ack(lease)


def replays_by_id_then_loops_until_empty(queue, handler):
    dead = [item.id for item in queue.dlq_items()]
    for item_id in dead:
        queue.replay_dlq(item_id)
    while True:
        if queue.process_one("W9", handler) == "empty":
            break


def prints_the_queue_as_it_goes(queue, handler):
    """A learner who prints the queue to see where it stands: its repr is the kit's, and works."""
    print("before:", queue)
    for item in queue.dlq_items():
        queue.replay_dlq(item.id)
    while queue.process_one("W1", handler) != "empty":
        pass
    print("after:", queue)


# ---------------------------------------------------------------------------- 02.1 wrong, as learners write them


def replays_but_never_drains(queue, handler):
    for item in queue.dlq_items():
        queue.replay_dlq(item.id)


def drains_without_replaying(queue, handler):
    while queue.process_one("W1", handler) != "empty":
        pass


def stops_at_the_first_failure(queue, handler):
    for item in queue.dlq_items():
        queue.replay_dlq(item.id)
    while queue.process_one("W1", handler) == "ok":
        pass


def one_call_per_dead_item(queue, handler):
    dead = queue.dlq_items()
    for item in dead:
        queue.replay_dlq(item.id)
    for _ in dead:
        queue.process_one("W1", handler)


def replays_until_the_dlq_is_clean(queue, handler):
    while True:
        for item in queue.dlq_items():
            queue.replay_dlq(item.id)
        if queue.process_one("W1", handler) == "empty":
            break


def storms_inside_a_try(queue, handler):
    """The storm of the issue: errors swallowed, so nothing raised inside may stop it."""
    try:
        while True:
            for item in queue.dlq_items():
                queue.replay_dlq(item.id)
            if queue.process_one("W1", handler) == "empty" and not queue.dlq_items():
                break
    except Exception:  # noqa: BLE001 - the learner's "just in case"
        pass


def loops_while_truthy(queue, handler):
    for item in queue.dlq_items():
        queue.replay_dlq(item.id)
    while queue.process_one("W1", handler):  # "empty" is a non-empty string
        pass


def never_gives_a_failure_back(queue, handler):
    for item in queue.dlq_items():
        queue.replay_dlq(item.id)
    while (lease := queue.acquire("W1")) is not None:
        try:
            handler(lease)
            queue.ack(lease)
        except Exception:  # noqa: BLE001 - swallowed: no nack, so the lease just sits there
            pass


def replays_ten_turns(queue, handler):
    """A fixed number of replay turns: enough for the DLQs the learner saw."""
    for _ in range(10):
        dead = queue.dlq_items()
        if dead:
            queue.replay_dlq(dead[0].id)
    while queue.process_one("W1", handler) != "empty":
        pass


def drains_fifty_turns(queue, handler):
    """Every dead item replayed, then a fixed number of worker turns."""
    for item in queue.dlq_items():
        queue.replay_dlq(item.id)
    for _ in range(50):
        queue.process_one("W1", handler)


def replays_only_the_first(queue, handler):
    dead = queue.dlq_items()
    if dead:
        queue.replay_dlq(dead[0].id)
    while queue.process_one("W1", handler) != "empty":
        pass


def drains_before_replaying(queue, handler):
    while queue.process_one("W1", handler) != "empty":
        pass
    for item in queue.dlq_items():
        queue.replay_dlq(item.id)


def replays_whatever_failed(queue, handler):
    """Replays every item that ever failed, the ones that went through on a retry too."""
    for item in queue.items():
        if item.last_error:
            queue.replay_dlq(item.id)
    while queue.process_one("W1", handler) != "empty":
        pass


def drains_only_what_it_replayed(queue, handler):
    """Trusts its own list, not the queue: it drains while an item *it* replayed waits.
    Right when nothing goes wrong; after a crash the rerun replays nothing and drains nothing."""
    replayed = [item.id for item in queue.dlq_items()]
    for item_id in replayed:
        queue.replay_dlq(item_id)
    while any(queue.item(item_id).state.value == "ready" for item_id in replayed):
        queue.process_one("W1", handler)


def drains_twelve_turns(queue, handler):
    """A fixed count: enough turns for every DLQ the learner has seen in the lab."""
    for item in queue.dlq_items():
        queue.replay_dlq(item.id)
    for _ in range(12):
        if queue.process_one("W1", handler) == "empty":
            break


def replays_and_works_one_at_a_time(queue, handler):
    """Checks in the wrong order: one turn of work right after each replay, then stops."""
    for item in queue.dlq_items():
        queue.replay_dlq(item.id)
        queue.process_one("W1", handler)


def acks_even_a_failure(queue, handler):
    """The handler's error swallowed, and the item acked anyway: a broken order marked done."""
    for item in queue.dlq_items():
        queue.replay_dlq(item.id)
    while (lease := queue.acquire("W1")) is not None:
        try:
            handler(lease)
        except Exception:  # noqa: BLE001 - "the replay must not stop on one bad item"
            pass
        queue.ack(lease)


def replays_the_first_page(queue, handler):
    """A hard-coded page size: the DLQ is read five dead letters at a time, once."""
    for item in queue.dlq_items()[:5]:
        queue.replay_dlq(item.id)
    while queue.process_one("W1", handler) != "empty":
        pass


def plain_loop_over_a_copy(queue, handler):
    """Right, written differently: ids first, replay by id, `while True` with a break."""
    ids = [dead.id for dead in list(queue.dlq_items())]
    for item_id in ids:
        queue.replay_dlq(item_id)
    while True:
        outcome = queue.process_one("W3", handler)
        if outcome == "empty":
            return len(ids)


DRAIN = Spec(
    exercise=lab02.exercise,
    right=(
        acquires_and_acks_by_hand,
        replays_by_id_then_loops_until_empty,
        plain_loop_over_a_copy,
        prints_the_queue_as_it_goes,
    ),
    wrong=(
        refused(
            replays_but_never_drains,
            "1 item was replayed but not processed (1 dead letter): O-2002",
            "stopped without processing anything",
            'lab02.replay(replays_but_never_drains, "DLQ: fixed · R replays and drains")',
        ),
        refused(
            drains_without_replaying,
            "the one dead letter is still in the DLQ (1 dead letter): O-2002",
            "(2 steps): DLQ: fixed · R replays and drains.",
        ),
        refused(
            stops_at_the_first_failure,
            "O-2002 still fails after the fix (1 dead letter, O-2002 still broken",
            "it is ready after 1 replays",
            "stopped after 1 process_one call, which returned 'retried'",
            "DLQ: broken · R replays and drains",
        ),
        refused(
            one_call_per_dead_item,
            "O-2002 still fails after the fix",
            "it is ready after 1 replays",
            "DLQ: broken · R replays and drains",
        ),
        refused(
            replays_until_the_dlq_is_clean,
            "O-2002 (item-0002) was replayed 2 times in one run of your function",
            "retry storm by hand",
        ),
        refused(storms_inside_a_try, "was replayed 2 times in one run", "retry storm by hand"),
        refused(
            loops_while_truthy,
            "was stopped by the check (an empty DLQ",
            "the last process_one returned 'empty'",
            "the loop does not end",
            "DLQ: empty · R replays and drains",
        ),
        refused(
            never_gives_a_failure_back,
            "O-2002 still fails after the fix",
            "it is leased after 1 replays",
            "(4 steps): DLQ: broken · R replays and drains · leases expire · R runs again.",
        ),
        refused(
            replays_ten_turns,
            "1 of the 11 dead letters is still in the DLQ (11 dead letters): O-2012",
            "however many there are",
            "DLQ: 11 fixed · R replays and drains",
        ),
        refused(
            drains_fifty_turns,
            "80 items were replayed but not processed (130 dead letters)",
            "stopped after 50 process_one calls, the last returning 'ok'",
            "Drive the queue until it is empty",
            "DLQ: 130 fixed",
        ),
        refused(
            replays_only_the_first,
            "1 of the 2 dead letters is still in the DLQ (2 dead letters): O-2003",
            "DLQ: fixed, fixed · R replays and drains",
        ),
        refused(
            drains_before_replaying,
            "1 item was replayed but not processed (1 dead letter)",
            "stopped after 1 process_one call, which returned 'empty'",
        ),
        refused(
            replays_whatever_failed,
            "raised NotInDLQError: Item item-0001 is done, not in the dead-letter queue",
            "(in replays_whatever_failed, line",
            "DLQ: empty · R replays and drains",
        ),
        # new since the check explores (issue 16): state outside the queue, a fixed count, the wrong
        # order, a swallowed error, a hard-coded page size
        refused(
            drains_only_what_it_replayed,
            "1 item was replayed but not processed (1 dead letter): O-2002",
            "stopped without processing anything",
            "(3 steps): DLQ: fixed · R replays and drains (crash after replay_dlq) · R runs again.",
        ),
        refused(
            drains_twelve_turns,
            "replayed but not processed (40 dead letters)",
            "stopped after 12 process_one calls",
            "DLQ: 40 fixed · R replays and drains",
        ),
        refused(
            replays_and_works_one_at_a_time,
            "O-2002 still fails after the fix",
            "it is ready after 1 replays",
            "DLQ: broken · R replays and drains",
        ),
        refused(
            acks_even_a_failure,
            "O-2002 still fails after the fix",
            "it is done after 1 replays",
            "DLQ: broken · R replays and drains",
        ),
        refused(
            replays_the_first_page,
            "1 of the 6 dead letters is still in the DLQ (6 dead letters): O-2007",
            "DLQ: 6 fixed · R replays and drains",
        ),
    ),
    secrets=("for item in queue.dlq_items()", '!= "empty"'),
)


# ---------------------------------------------------------------------------- 02.2


def counts_deliveries_up_to_the_limit(deliveries, max_attempts):
    if "ok" in deliveries[:max_attempts]:
        return "done"
    return "dead" if len(deliveries) >= max_attempts else "ready"


def one_delivery_at_a_time(deliveries, max_attempts):
    if max_attempts == 0:
        return "dead"
    if not deliveries:
        return "ready"
    first, *rest = deliveries
    return "done" if first == "ok" else one_delivery_at_a_time(rest, max_attempts - 1)


def crashes_are_free(deliveries, max_attempts):
    failures = 0
    for outcome in deliveries:
        if outcome == "ok":
            return "done"
        if outcome == "fail":
            failures += 1
        if failures == max_attempts:
            return "dead"
    return "ready"


def one_attempt_too_many(deliveries, max_attempts):
    for attempt, outcome in enumerate(deliveries, start=1):
        if outcome == "ok":
            return "done"
        if attempt > max_attempts:
            return "dead"
    return "ready"


def one_attempt_too_few(deliveries, max_attempts):
    for attempt, outcome in enumerate(deliveries, start=1):
        if outcome == "ok":
            return "done"
        if attempt >= max_attempts - 1:
            return "dead"
    return "ready"


def a_failure_is_final(deliveries, max_attempts):
    for attempt, outcome in enumerate(deliveries, start=1):
        if outcome == "ok":
            return "done"
        if outcome == "fail" or attempt == max_attempts:
            return "dead"
    return "ready"


def the_last_entry_decides(deliveries, max_attempts):
    if deliveries and deliveries[-1] == "ok":
        return "done"
    return "dead" if len(deliveries) >= max_attempts else "ready"


def names_the_queue_not_the_state(deliveries, max_attempts):
    return "dlq" if "fail" in deliveries else "done"


def capitalises_the_state(deliveries, max_attempts):
    return "Done" if "ok" in deliveries else "Ready"


class SaysYes(str):
    """A state whose == agrees with anything."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


def answers_with_a_look_alike(deliveries, max_attempts):
    return SaysYes("done")


WHERE = Spec(
    exercise=lab02.knowledge,
    right=(counts_deliveries_up_to_the_limit, one_delivery_at_a_time),
    wrong=(
        refused(
            crashes_are_free,
            "for deliveries ['crash'] with max_attempts=1 your function says 'ready'",
            "903 of all 5,465 lists of up to 6 deliveries",
            "as if a crash did not use up an attempt",
            hidden=("'dead'",),
        ),
        refused(
            one_attempt_too_many,
            "['fail'] with max_attempts=1 your function says 'ready'",
            "as if max_attempts allowed one delivery more",
            hidden=("'dead'",),
        ),
        refused(one_attempt_too_few, "as if max_attempts allowed one delivery fewer"),
        refused(a_failure_is_final, "as if one failure sent the item straight to the DLQ"),
        refused(
            the_last_entry_decides,
            "your function says",
            "end elsewhere on a real queue",
            "Play that list through by hand",
        ),
        refused(names_the_queue_not_the_state, "returned the str 'dlq'", "return the item's state"),
        refused(capitalises_the_state, "for [] the function returned the str 'Ready'", "return the item's state"),
        refused(answers_with_a_look_alike, "returned the SaysYes 'done'", "return the item's state"),
    ),
    secrets=("replay_deliveries",),
)

(
    test_a_right_answer_written_differently_is_accepted,
    test_a_plausible_wrong_answer_is_refused_with_its_evidence,
    test_the_specification_has_enough_right_and_wrong_answers,
) = accuracy_tests(DRAIN, WHERE)


def test_the_dead_letter_queues_range_from_empty_to_past_any_fixed_loop():
    sizes = sorted({len(shape) for shape in lab02.SHAPES})
    assert sizes[0] == 0 and sizes[-1] > 100 and set(range(13)) <= set(sizes)
    small = [shape for shape in lab02.SHAPES if len(shape) <= lab02.SMALL]
    assert len(small) == len(set(small)) == 2 ** (lab02.SMALL + 1) - 1  # every order of fixed and broken
    queue, dead, broken, _, _ = lab02.poisoned_queue(("broken", "fixed", "broken"))
    assert [i.case_id for i in queue.dlq_items()] == dead and broken == {dead[0], dead[2]}
    failed_once = [i for i in queue.items() if i.last_error and i.case_id not in dead]
    assert len(failed_once) == 1 and failed_once[0].state.value == "done"  # not dead: not to be replayed


def test_the_replay_check_states_its_bound_and_replays_its_schedule():
    from test_check_accuracy_lab02 import drains_only_what_it_replayed as wrong

    result = lab02.exercise.result(replays_by_id_then_loops_until_empty)
    assert result.correct and "checked all 260 schedules of every DLQ of 0 to 3 items" in result.message
    schedule = "DLQ: fixed · R replays and drains (crash after replay_dlq) · R runs again"
    replayed = lab02.replay(wrong, schedule)
    assert replayed.problem is not None and "replayed but not processed" in replayed.problem
    assert "R's process dies (crash after replay_dlq)" in str(replayed)
    assert lab02.replay(replays_by_id_then_loops_until_empty, schedule).problem is None


def test_the_knowledge_check_searches_every_short_delivery_list():
    result = lab02.knowledge.result(counts_deliveries_up_to_the_limit)
    assert result.correct and "all 5,465 delivery lists of up to 6 deliveries" in result.message
