"""The specification of lab 06's checks. The dispatcher: every schedule of one dispatcher, two
messages, a failed publish and a crash anywhere; a message goes out again only after a crash.
The consumer: every schedule of two consumers, two refunds, a payment call that times out
(before or after the provider paid), a crash anywhere and a copy replayed from the DLQ a day
later, when the provider has pruned its keys; judged by what the provider paid and what
`handle` returned, never by how it spells its records in `processed`."""

from __future__ import annotations

from check_accuracy import Spec, accuracy_tests, reachable, refused, replay_tests

from shopops_lab.checks import lab06, outbox_world
from shopops_lab.checks.base import Verdict
from shopops_lab.explore import Run
from shopops_lab.outbox import IdempotentConsumer

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
        apply(delivery)  # raises on a failed payment: nothing recorded, the copy comes back
        processed.add(record)
    return not seen


def asks_then_records_with_a_guard_clause(delivery, processed, apply):
    already = delivery.message_id in processed
    if already:
        return False
    try:
        apply(delivery)
    except ConnectionError:
        raise  # caught only to say so: the copy comes back
    processed.add(delivery.message_id)
    return True


def retries_a_timeout_under_the_same_key(delivery, processed, apply):
    """Calls again at once after a timeout: the key the call carries makes the repeat safe."""
    if delivery.message_id in processed:
        return False
    for attempt in range(3):
        try:
            apply(delivery)
            break
        except ConnectionError:
            if attempt == 2:
                raise
    processed.add(delivery.message_id)
    return True


# ---------------------------------------------------------------------------- wrong, as learners write them


def applies_everything(delivery, processed, apply):
    """Trusts the provider's key alone: safe within the day the provider keeps it, not after."""
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


def assumes_a_timeout_paid(delivery, processed, apply):
    """Reads a timeout as a yes: sometimes the provider had paid, sometimes nothing reached it."""
    if delivery.message_id in processed:
        return False
    try:
        apply(delivery)
    except ConnectionError:
        pass
    processed.add(delivery.message_id)
    return True


def retries_until_it_goes_through(delivery, processed, apply):
    """Retries the payment until it goes through, catching everything: a crash too."""
    if delivery.message_id in processed:
        return False
    while True:
        try:
            apply(delivery)
            break
        except BaseException:  # noqa: BLE001 - the mistake under test
            continue
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


def records_first_and_undoes_in_except(delivery, processed, apply):
    """Record before the effect, undo on failure: a kill runs no except, so the record stays."""
    if delivery.message_id in processed:
        return False
    processed.add(delivery.message_id)
    try:
        apply(delivery)
    except BaseException:
        processed.discard(delivery.message_id)
        raise
    return True


_CONSUMER = IdempotentConsumer()


def delegates_to_the_kit_consumer(delivery, processed, apply):
    """Hands the work to the kit's consumer, whose record lives in this process's memory."""
    _CONSUMER.effect = apply
    return _CONSUMER.handle(delivery)


def keeps_only_the_latest_record(delivery, processed, apply):
    """A fixed count of one record: forgets every older message."""
    if delivery.message_id in processed:
        return False
    apply(delivery)
    for old in list(processed):
        processed.discard(old)
    processed.add(delivery.message_id)
    return True


def returns_a_word(delivery, processed, apply):
    if delivery.message_id in processed:
        return "skipped"
    apply(delivery)
    processed.add(delivery.message_id)
    return "applied"


class AlwaysEqual(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


def returns_a_string_that_equals_anything(delivery, processed, apply):
    if delivery.message_id in processed:
        return AlwaysEqual("no")
    apply(delivery)
    processed.add(delivery.message_id)
    return AlwaysEqual("yes")


SPEC = Spec(
    exercise=lab06.exercise,
    right=(
        records_a_derived_key,
        records_topic_and_id,
        asks_then_records_with_a_guard_clause,
        retries_a_timeout_under_the_same_key,
    ),
    wrong=(
        refused(
            applies_everything,
            "out-0001 (refund 35.00 for O-1001) was paid twice: by delivery #1 and again by #3, a day later, after "
            "the provider had pruned the key",
            "only the consumer's own record of what it applied can stop a copy the provider no longer recognises",
            "(6 steps): C1 handle · C1 ack · C1 handle · C1 ack · a day later, the DLQ is replayed · C1 handle",
            'Replay it: lab06.replay(applies_everything, "C1 handle · C1 ack · C1 handle · C1 ack · a day later, '
            'the DLQ is replayed · C1 handle")',
            "6. C1 takes #3 out-0001, handle returns True: refund paid",
        ),
        refused(dedupes_on_the_delivery_number, "was paid twice: by delivery #1 and again by #3, a day later"),
        refused(
            marks_before_applying,
            "out-0002 (refund 35.00 for O-1001) was never paid, yet every copy of it was acknowledged",
            "the consumer died on #2 (crash after processed.add)",
            "was skipped as a duplicate, though no refund of it had been paid",
        ),
        refused(
            swallows_the_failure,
            "on delivery #1 of out-0001, apply raised ConnectionError (payments API timed out) but handle "
            "returned False, so the consumer acknowledges the delivery",
            "after a timeout nobody can tell which",
            "(1 step): C1 handle (apply fails)",
        ),
        refused(
            dedupes_on_the_payload,
            "out-0002 (refund 35.00 for O-1001) was never paid",
            "only out-0001, a different message with the same case and amount, had been paid",
        ),
        refused(returns_nothing, "handle returned None for delivery #1 of out-0001, and its apply went through"),
        refused(
            assumes_a_timeout_paid,
            "on delivery #1 of out-0001, apply raised ConnectionError (payments API timed out) but handle "
            "returned True",
            "Here the request had never reached the provider: nothing was paid",
        ),
        refused(
            remembers_in_its_own_memory,
            "out-0001 (refund 35.00 for O-1001) was paid twice",
            "a day later, the DLQ is replayed · C2 handle",
        ),
        refused(
            records_first_and_undoes_in_except,
            "out-0002 (refund 35.00 for O-1001) was never paid",
            "(crash after processed.add)",
        ),
        refused(
            delegates_to_the_kit_consumer,
            "handle hands the delivery to the kit's IdempotentConsumer, which already implements this exercise",
        ),
        refused(keeps_only_the_latest_record, "out-0001 (refund 35.00 for O-1001) was paid twice"),
        refused(returns_a_word, "handle returned the str 'applied' for delivery #1 of out-0001"),
        refused(
            retries_until_it_goes_through,
            "your code kept running after its process died",
            "catching BaseException hides a crash",
        ),
        refused(returns_a_string_that_equals_anything, "handle returned the AlwaysEqual 'yes'"),
    ),
    secrets=("processed.add(", "in processed", "apply(delivery) first"),
    replay=lambda answer, schedule, message: lab06.replay(answer, schedule),
)


# ---------------------------------------------------------------------------- 06.1, the dispatcher: right
def publishes_then_deletes(outbox, broker):
    for message in outbox.pending():
        broker.publish(message)
        outbox.delete(message.id)  # the row's job is done: a delete is a note too


def publishes_all_then_marks_all(outbox, broker):
    batch = outbox.pending()
    for message in batch:
        broker.publish(message)
    for message in batch:
        outbox.mark_sent(message.id)


def drains_with_an_index(outbox, broker):
    waiting = outbox.pending()
    i = 0
    while i < len(waiting):
        broker.publish(waiting[i])
        outbox.mark_sent(waiting[i].id)
        i += 1


def notes_each_before_the_next(outbox, broker):
    for message in list(outbox.pending()):
        try:
            broker.publish(message)
        except ConnectionError:
            raise  # said out loud: the pass stops here, and the next one starts from what is pending
        else:
            outbox.mark_sent(message.id)


# ---------------------------------------------------------------------------- 06.1, wrong as learners write them
def marks_before_publishing(outbox, broker):
    for message in outbox.pending():
        outbox.mark_sent(message.id)
        broker.publish(message)


def deletes_before_publishing(outbox, broker):
    for message in outbox.pending():
        outbox.delete(message.id)  # "take it off the queue", then send
        broker.publish(message)


def swallows_the_error_and_marks(outbox, broker):
    for message in outbox.pending():
        try:
            broker.publish(message)
        except ConnectionError:
            pass  # the broker will be back
        outbox.mark_sent(message.id)


def skips_what_failed_and_goes_on(outbox, broker):
    for message in outbox.pending():
        try:
            broker.publish(message)
        except ConnectionError:
            continue  # try this one next pass
        outbox.mark_sent(message.id)


_SENT: set = set()


def remembers_what_it_sent_in_memory(outbox, broker):
    """Keeps 'sent' in the process instead of the outbox."""
    for message in outbox.pending():
        if message.id not in _SENT:
            broker.publish(message)
            _SENT.add(message.id)


_TODO: list = []
_LOADED: list = []


def reads_the_outbox_once(outbox, broker):
    """Loads the pending list on its first pass and works from memory after."""
    if not _LOADED:
        _TODO.extend(outbox.pending())
        _LOADED.append(True)
    while _TODO:
        broker.publish(_TODO[0])
        outbox.mark_sent(_TODO[0].id)
        _TODO.pop(0)


def publishes_twice_to_be_sure(outbox, broker):
    for message in outbox.pending():
        broker.publish(message)
        broker.publish(message)
        outbox.mark_sent(message.id)


def newest_first(outbox, broker):
    for message in reversed(outbox.pending()):
        broker.publish(message)
        outbox.mark_sent(message.id)


DISPATCH = Spec(
    exercise=lab06.dispatcher,
    right=(publishes_then_deletes, drains_with_an_index, notes_each_before_the_next),
    wrong=(
        refused(
            marks_before_publishing,
            "out-0001 was marked sent, but the broker never got it",
            "(1 step): D1 dispatch (crash after outbox.mark_sent)",
            'lab06.replay_dispatch(marks_before_publishing, "D1 dispatch (crash after outbox.mark_sent)")',
        ),
        refused(
            deletes_before_publishing,
            "out-0001 was deleted from the outbox, but the broker never got it",
            "D1 dispatch (crash after outbox.delete)",
        ),
        refused(
            swallows_the_error_and_marks,
            "out-0001 was marked sent, but the broker never got it",
            "(1 step): D1 dispatch (broker.publish fails)",
            "1. D1 dispatch pass 1: marks out-0001 sent",
        ),
        refused(
            skips_what_failed_and_goes_on,
            "the broker got out-0002 before out-0001, which was committed first",
            "app commits out-0002 · D1 dispatch (broker.publish fails)",
        ),
        refused(
            remembers_what_it_sent_in_memory,
            "out-0001 was published (1 time) but the outbox still lists it as pending after 4 passes",
        ),
        refused(
            reads_the_outbox_once,
            "out-0002 was committed but never published",
            "D1 dispatch · app commits out-0002 · D1 dispatch",
        ),
        refused(publishes_twice_to_be_sure, "out-0001 was published twice in one pass"),
        refused(
            publishes_all_then_marks_all,
            "out-0001 was published again in pass 2, with no crash to explain it: pass 1 published it and ended "
            "without noting it (a publish after it failed, and the pass stopped)",
            "(3 steps): app commits out-0002 · D1 dispatch (broker.publish 2 fails) · D1 dispatch",
        ),
        refused(
            newest_first, "the broker got out-0002 before out-0001", "(2 steps): app commits out-0002 · D1 dispatch"
        ),
    ),
    secrets=("mark_sent(message.id)", "broker.publish(message)"),
    replay=lambda answer, schedule, message: lab06.replay_dispatch(answer, schedule),
)

(
    test_a_right_answer_written_differently_is_accepted,
    test_a_plausible_wrong_answer_is_refused_with_its_evidence,
    test_the_specification_has_enough_right_and_wrong_answers,
) = accuracy_tests(SPEC, DISPATCH)


def test_the_dispatcher_check_states_its_bound():
    result = lab06.dispatcher.result(publishes_then_deletes)
    assert (
        result.message.startswith("checked all ")
        and (
            "schedules of 1 dispatcher, 2 outbox messages (the second "
            "committed at any point), up to 4 passes, 1 failed publish, "
            "a crash anywhere"
        )
        in result.message
    )


def test_a_crash_between_publish_and_mark_is_a_duplicate_not_a_loss():
    replayed = lab06.replay_dispatch(
        publishes_then_deletes,
        "D1 dispatch (crash before outbox.delete) · D1 dispatch · app commits out-0002 · D1 dispatch",
    )
    assert replayed.problem is None and replayed.complete
    assert replayed.steps[1].said == "D1 dispatch pass 2: publishes out-0001, deletes out-0001"  # the duplicate


def test_the_dispatchers_outbox_and_broker_lead_nowhere():
    world = outbox_world.scenario().start(Run(publishes_then_deletes))
    assert [n for n in dir(world.outbox) if not n.startswith("__")] == ["delete", "mark_sent", "pending"]
    assert [n for n in dir(world.broker) if not n.startswith("__")] == ["publish"]
    reached = {id(x) for x in reachable(world.outbox, world.broker, world.outbox.pending, world.broker.publish)}
    assert not [x for x in (world, world.rows, world.published, world.run) if id(x) in reached]


def test_the_consumer_check_states_its_bound():
    result = lab06.exercise.result(records_a_derived_key)
    assert result.message.startswith("checked all ") and (
        "schedules of 2 consumers, 2 refunds, 1 payment call timing out (paid or not), a crash anywhere, and a "
        "copy of out-0001 replayed from the DLQ a day later"
    ) in str(result)


def test_a_kill_runs_no_except_but_a_failed_payment_does():
    """The same answer survives a failed payment (its except undoes the record) and loses
    the refund to a kill between its record and the refund (no except runs)."""
    failed = lab06.replay(records_first_and_undoes_in_except, "C1 handle (apply fails) · C1 handle · C1 ack")
    assert failed.problem is None
    killed = lab06.replay(
        records_first_and_undoes_in_except,
        "C1 handle (crash before apply) · C1 handle · C1 ack · C1 handle · C1 ack · a day later, the DLQ is "
        "replayed · C1 handle · C1 ack",
    )
    assert killed.problem.startswith("out-0001 (refund 35.00 for O-1001) was never paid")


def test_a_timeout_after_the_provider_paid_is_repeated_under_the_same_key_and_pays_nothing_more():
    """The unknown outcome: the provider paid, the reply was lost. The delivery comes back,
    and the repeat carries the same key: the provider answers as before and pays nothing."""
    replayed = lab06.replay(records_a_derived_key, "C1 handle (apply times out) · C2 handle · C2 ack")
    assert replayed.problem is None
    assert [step.said for step in replayed.steps] == [
        "C1 takes #1 out-0001: apply timed out after the provider paid, handle raises ConnectionError; the broker "
        "delivers out-0001 again as #3",
        "C2 takes #2 out-0002, handle returns True: refund paid",
        "C2 acks #2",
    ]
    again = lab06.replay(records_a_derived_key, "C1 handle (apply times out) · C1 handle · C1 ack · C1 handle")
    assert again.steps[-1].said == (
        "C1 takes #3 out-0001, handle returns True: the provider knew the key and paid nothing more"
    )


test_the_schedule_a_refusal_shows_replays_to_the_same_problem = replay_tests(SPEC, DISPATCH)


def test_handle_is_handed_the_record_and_the_refund_and_nothing_else():
    """What the check judges (the refunds applied, the records, the schedule's run) is not
    reachable from what handle gets: not by attribute, vars(), closure, __self__ or
    gc.get_referents, however deep."""
    world = lab06.scenario().start(Run(records_a_derived_key))
    assert [n for n in dir(world.processed) if not n.startswith("__")] == ["add", "discard", "remove"]
    for handed in (world.processed, world.apply):
        assert not hasattr(handed, "__dict__") and handed.__class__.__slots__ == ("__weakref__",)
    bound = (world.processed.add, world.processed.__contains__, world.apply.__call__)
    reached = {id(x) for x in reachable(world.processed, world.apply, *bound)}

    def leaky():
        return world

    assert id(world) in {id(x) for x in reachable(leaky)}  # the walk does find what a closure holds
    judged = (world, world.paid, world.keys, world.records, world.history, world.pending, world.run)
    assert not [x for x in judged if id(x) in reached]


def forges_the_refunds(delivery, processed, apply):
    """Applies every copy, then looks for the check's record of payments by introspection
    and rewrites it so each message seems paid once."""
    apply(delivery)
    for found in reachable(processed, apply, processed.add, apply.__call__):
        paid = getattr(found, "paid", None) if not isinstance(found, type) else None
        if isinstance(paid, dict):
            for seqs in paid.values():
                del seqs[1:]
    return True


def test_an_answer_that_forges_the_record_by_introspection_is_refused():
    result = lab06.exercise.result(forges_the_refunds)
    assert result.verdict is Verdict.INCORRECT and "was paid twice: by delivery #1 and again by #3" in str(result)


def test_a_record_kept_in_sys_modules_is_named_for_what_the_code_did():
    """A module outlives a crash in the same process (it lives in sys.modules, not in the
    answer's memory): the code then does something else from the same start, and the check
    says so instead of failing on a schedule it cannot play."""
    import sys
    import types
    import uuid

    name = f"consumer_memory_{uuid.uuid4().hex}"  # a module no other run has filled

    def handle(delivery, processed, apply):
        memory = sys.modules.setdefault(name, types.ModuleType(name))
        seen = memory.__dict__.setdefault("seen", set())
        if delivery.message_id in seen:
            return False
        apply(delivery)
        seen.add(delivery.message_id)
        return True

    try:
        result = lab06.exercise.result(handle)
    finally:
        sys.modules.pop(name, None)
    assert result.verdict is Verdict.INCORRECT
    assert result.message.startswith(
        "your code did not do the same thing twice from the same start: the check played the step 'C1 handle' "
        "once more, to try 'crash before apply', and this time your code made no such call"
    )
    assert "a value kept in a module (`sys.modules`), a file" in result.message
