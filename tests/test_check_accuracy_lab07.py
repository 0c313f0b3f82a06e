"""The specification of lab 07's checks: a backpressure policy, held to the lab's two rules
directly and to its limits on three burst days whose gateway spikes differ, the contract
that survives a crash, and the chaos test's assertion."""

from __future__ import annotations

import math
import random
from collections import Counter

from check_accuracy import Spec, accuracy_tests, refused

from shopops_lab.backpressure import BackpressurePolicy, NoBackpressure, acquire, wait
from shopops_lab.checker import check
from shopops_lab.checks import lab07
from shopops_lab.checks.lab07_vitals import KEYS
from shopops_lab.sim import Fault
from shopops_lab.worker.queue import Priority

CAPACITY = 10

# ---------------------------------------------------------------------------- 07.1 right, written differently


def sheds_in_two_steps(signals):
    if signals.in_flight >= CAPACITY:
        return acquire(max_priority=Priority.APPROVAL)
    if signals.in_flight >= CAPACITY - 2:
        return acquire(max_priority=Priority.NORMAL)
    return acquire()


KIT_POLICY = BackpressurePolicy(p95_budget=40, p95_hard=60, max_in_flight=CAPACITY)

# ---------------------------------------------------------------------------- 07.1 wrong, as learners write them


def shed_bulk_when_full(signals):
    """Sheds bulk at capacity, but intake still takes every free slot."""
    return acquire(max_priority=Priority.NORMAL) if signals.in_flight >= CAPACITY else acquire()


def sheds_during_the_spike_it_saw(signals):
    """Reads no signal: sheds in the window where the notebook's spike was."""
    if 900 <= signals.now <= 1800:
        return acquire(max_priority=Priority.APPROVAL)
    return acquire()


def approvals_only(signals):
    return acquire(max_priority=Priority.APPROVAL)


_SHEDDING = {"on": False}


def sheds_until_it_calms_down(signals):
    """Hysteresis kept in memory: the same signals get different answers."""
    if signals.in_flight >= CAPACITY:
        _SHEDDING["on"] = True
    elif signals.in_flight <= CAPACITY // 2:
        _SHEDDING["on"] = False
    return acquire(max_priority=Priority.APPROVAL) if _SHEDDING["on"] else acquire()


_COIN = random.Random(1)


def sheds_at_random(signals):
    if signals.in_flight >= CAPACITY and _COIN.random() < 0.8:
        return acquire(max_priority=Priority.APPROVAL)
    return acquire()


def wait_when_full(signals):
    return wait(2) if signals.in_flight >= CAPACITY else acquire()


def stop_the_world(signals):
    return wait(5) if signals.gateway_p95 > 40 else acquire()


def forgets_to_return(signals):
    if signals.in_flight >= CAPACITY:
        return acquire(max_priority=Priority.APPROVAL)


def divides_by_in_flight(signals):
    return acquire() if 100 / signals.in_flight else acquire(max_priority=Priority.APPROVAL)


def trips_over_the_afternoon(signals):
    """Fine on every signal the rules ask about, until the day brings one it did not expect."""
    if 1000 < signals.now < 1100 and signals.in_flight > 3:
        raise KeyError("afternoon")
    return acquire(max_priority=Priority.APPROVAL) if signals.in_flight >= CAPACITY else acquire()


def tuned_to_the_notebooks_spike(signals):
    """Sheds by signal, but only in the window where the notebook's day (seed 3) spiked."""
    if 900 <= signals.now <= 1800 and signals.in_flight >= CAPACITY:
        return acquire(max_priority=Priority.APPROVAL)
    return acquire()


def caps_at_one_and_a_half_times_capacity(signals):
    return acquire(max_priority=Priority.APPROVAL) if signals.in_flight >= 15 else acquire()


def sheds_on_the_lagging_p95(signals):
    """Reads the gateway's p95, which describes calls that already finished."""
    return acquire(max_priority=Priority.APPROVAL) if signals.gateway_p95 > 40 else acquire()


def sheds_bulk_only_in_two_steps(signals):
    """Right, written differently: a ladder by priority, by in-flight calls."""
    full = signals.in_flight >= CAPACITY
    return acquire(max_priority=Priority.APPROVAL if full else Priority.BULK)


def remembers_its_answers(signals, _answers={}):  # noqa: B006 - a cache of its own, on purpose
    """Right, with hidden state that never changes an answer: it caches by value itself."""
    if signals not in _answers:
        full = signals.in_flight >= CAPACITY
        _answers[signals] = acquire(max_priority=Priority.APPROVAL) if full else acquire()
    return _answers[signals]


def tuned_to_the_notebooks_day(signals):
    """Fixed thresholds tuned on the shown seed: strict during seed 3's spike, loose after."""
    if 900 <= signals.now <= 1800:
        return acquire(max_priority=Priority.APPROVAL) if signals.in_flight >= CAPACITY else acquire()
    return acquire(max_priority=Priority.APPROVAL) if signals.in_flight >= 16 else acquire()


_CALLS = {"n": 0}


def counts_its_calls(signals):
    """State that never resets: after enough calls (past the rules' questions) it stops shedding."""
    _CALLS["n"] += 1
    if _CALLS["n"] > 2500:
        return acquire()
    return acquire(max_priority=Priority.APPROVAL) if signals.in_flight >= CAPACITY else acquire()


def waits_when_the_queue_is_short(signals):
    """Sheds approvals: near the end of the day, when few items are left, everybody waits."""
    if 0 < signals.depth < 40:
        return wait(1)
    return acquire(max_priority=Priority.APPROVAL) if signals.in_flight >= CAPACITY else acquire()


POLICY = Spec(
    exercise=lab07.exercise,
    right=(sheds_in_two_steps, KIT_POLICY, sheds_bulk_only_in_two_steps, remembers_its_answers),
    wrong=(
        refused(
            NoBackpressure(),
            "the gateway melted: 46 model calls timed out (limit 15)",
            "(seed 3, 3,000 items, gateway spike 4x slower from t=900 s for 900 s)",
            "replay the whole run: run(lab07.burst_day(3), seed=3, items=3000, policy=NoBackpressure())",
        ),
        refused(shed_bulk_when_full, "the gateway melted", "calls in flight on a gateway that serves 10 at full speed"),
        refused(
            sheds_during_the_spike_it_saw,
            "the gateway melted",
            "(seed 9, 3,000 items, gateway spike 4.5x slower from t=0 s",
            "print(lab07.trial(sheds_during_the_spike_it_saw, seed=9))",
        ),
        refused(approvals_only, "work left undone", "bulk outreach 0 of 1,228 (0%), intake 0 of 1,638 (0%)"),
        refused(
            sheds_until_it_calms_down,
            "your policy answered",
            "when asked again",
            "the same signals must always get the same decision",
        ),
        refused(sheds_at_random, "the same signals must always get the same decision", "no randomness"),
        refused(
            wait_when_full, "your policy answered wait(2)", "approval resumes included", "approvals are never held back"
        ),
        refused(stop_the_world, "your policy answered wait(5)", "approvals are never held back"),
        refused(
            forgets_to_return,
            "your policy returned None when a worker asked it at t=0",
            "Signals(gateway_p95=0.0, depth=3000, in_flight=0, now=0.0)",
        ),
        refused(
            divides_by_in_flight, "your policy raised ZeroDivisionError: division by zero when a worker asked it at t=0"
        ),
        refused(
            trips_over_the_afternoon,
            "during burst day (seed 3) at t=1,002 s your policy raised KeyError: 'afternoon', on Signals(",
            "print(lab07.trial(trips_over_the_afternoon, seed=3))",
        ),
        refused(
            tuned_to_the_notebooks_spike,
            "the gateway melted: 21 model calls timed out (limit 15)",
            "(seed 9, 3,000 items, gateway spike 4.5x slower from t=0 s for 660 s)",
        ),
        refused(
            caps_at_one_and_a_half_times_capacity,
            "the gateway melted: 21 model calls timed out (limit 15)",
            "with up to 19 calls in flight on a gateway that serves 10 at full speed",
            "(seed 3",
        ),
        refused(
            sheds_on_the_lagging_p95,
            "too slow: the last item was settled at t=10,276 s",
            "only 4.7 model calls were in flight although the gateway serves 10",
            "(seed 3",
        ),
        refused(acquire(), "this check needs your function my_policy itself, and it got a Decision object"),
        refused(
            tuned_to_the_notebooks_day,
            "the gateway melted: 17 model calls timed out (limit 15)",
            "(seed 9, ",
            "what the check covers: the rules on 270 signals",
            "seeds 3, 9, 13",
        ),
        refused(
            counts_its_calls,
            "your policy answered acquire(max_priority=Priority.APPROVAL) during burst day (seed 3)",
            "and acquire() when the check asked again after the day",
            "the same signals must always get the same decision",
        ),
        refused(
            waits_when_the_queue_is_short,
            "during burst day (seed 3) at t=3,138 s your policy answered wait(1)",
            "depth=39",
            "approvals are never held back",
        ),
    ),
    secrets=("in_flight >=", "GATEWAY_CAPACITY", "max_priority=Priority.APPROVAL)\n"),
)


# ---------------------------------------------------------------------------- 07.2


def as_a_list():
    return ["checkpoints", "fencing_tokens", "idempotency_keys", "at_least_once_delivery"]


def picked_from_the_pieces():
    keep = ("at_least_once", "idempotency", "fencing", "checkpoint")
    return frozenset(piece for piece in lab07.PIECES if piece.startswith(keep))


CONTRACT = frozenset({"at_least_once_delivery", "idempotency_keys", "fencing_tokens", "checkpoints"})


class AnyLabel(str):
    """A label that says it equals every other: the contract by look-alike."""

    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


class AgreeableSet(set):
    def __eq__(self, other):
        return True

    __hash__ = None


def as_a_dict():
    return dict.fromkeys(CONTRACT, True)


THE_CONTRACT = Spec(
    exercise=lab07.knowledge,
    right=(as_a_list, picked_from_the_pieces),
    wrong=(
        refused(
            lambda: set(CONTRACT) | {"exactly_once_delivery"},
            "'exactly_once_delivery' is not part of the contract",
            "no broker can promise it",
        ),
        refused(lambda: set(CONTRACT) | {"retry_until_success"}, "'retry_until_success' is not part", "retry storm"),
        refused(lambda: set(CONTRACT) | {"long_leases"}, "'long_leases' is not part", "never impossible"),
        refused(
            lambda: set(CONTRACT) - {"checkpoints"},
            "1 piece is missing",
            "steps that were already done",
            hidden=("checkpoints", "(lab 05)"),
        ),
        refused(
            lambda: set(CONTRACT) - {"fencing_tokens"},
            "1 piece is missing",
            "wakes up stale",
            hidden=("fencing", "token", "lab 04"),
        ),
        refused(lambda: {AnyLabel(label) for label in CONTRACT}, "holding the AnyLabel", "every label is a plain str"),
        refused(
            lambda: AgreeableSet(), "the_contract() returned the AgreeableSet AgreeableSet()", "return a set of labels"
        ),
        refused(as_a_dict, "the_contract() returned the dict", "return a set of labels"),
        refused(
            lambda: {"at_least_once_delivery", "idempotency_keys"},
            "2 pieces are missing",
            hidden=("fencing_tokens", "checkpoints"),
        ),
        refused(lambda: "idempotency_keys", "returned the str 'idempotency_keys'", "return a set of labels"),
        refused(lambda: {"idempotency"}, "'idempotency' is not among the labels"),
        refused(lambda: None, "the_contract() returned None"),
    ),
)

# ---------------------------------------------------------------------------- 07.3 the chaos test's assertion


def counts_per_intent(log):
    sent = Counter((event.case_id, event.info["idem_key"]) for event in log.where("contact_sent"))
    assert all(count == 1 for count in sent.values()), "a customer was sent one message twice"


def remembers_what_went_out(log):
    """Right, written differently: one pass over every event, a set of what went out."""
    out = set()
    for event in log:
        if event.kind == "contact_sent":
            intent = (event.case_id, event.info["idem_key"])
            assert intent not in out, f"{intent} went out twice"
            out.add(intent)


def asserts_nothing(log):
    log.where("contact_sent")


def one_email_per_case(log):
    per_case = Counter(event.case_id for event in log.where("contact_sent"))
    assert max(per_case.values()) == 1


def no_redeliveries(log):
    assert not [event for event in log.where("leased") if event.attempt > 1], "items were delivered again"


def counts_the_absorbed_repeats_too(log):
    tried = Counter((e.case_id, e.info["idem_key"]) for e in log.where(("contact_sent", "contact_deduped")))
    assert max(tried.values()) == 1


def the_checker_says_valid(log):
    assert check(log).valid, check(log).summary


def the_wrong_field(log):
    sent = Counter((event.case_id, event.info["key"]) for event in log.where("contact_sent"))
    assert max(sent.values()) == 1


def raises_its_own_error(log):
    sent = Counter((event.case_id, event.info["idem_key"]) for event in log.where("contact_sent"))
    if max(sent.values()) > 1:
        raise RuntimeError("double contact")


CHAOS = Spec(
    exercise=lab07.chaos,
    right=(counts_per_intent, remembers_what_went_out),
    wrong=(
        refused(
            asserts_nothing,
            "your assertion passed a bad run: burst day with five workers killed right after sending, naive adapter",
            "customer(s) got the same email twice (case O-",
        ),
        refused(
            one_email_per_case, "your assertion failed a good run: one customer (O-1001) sent two different emails"
        ),
        refused(
            no_redeliveries,
            "your assertion failed a good run: the same day with idempotency keys",
            "(it said: items were delivered again)",
        ),
        refused(
            counts_the_absorbed_repeats_too,
            "your assertion failed a good run: the same day with idempotency "
            "keys: the same redeliveries, every repeat send absorbed by its key",
        ),
        refused(the_checker_says_valid, "hands the question to the kit's checker"),
        refused(the_wrong_field, "your assertion raised KeyError: 'key' on a bad run", "use assert"),
        refused(raises_its_own_error, "raised RuntimeError: double contact on a bad run", "AssertionError"),
    ),
    secrets=('info["idem_key"]', "Counter("),
)


# ---------------------------------------------------------------------------- 07.4, the vital signs from a log
def _items(log, now):
    """Per item, as the numbers need it: enqueue time, first lease time, lease count, dead since (or None)."""
    seen = {}
    for event in log.where():
        if event.time > now or event.item_id is None:
            continue
        item = seen.setdefault(event.item_id, {"enq": None, "first": None, "leases": 0, "dead": None})
        if event.kind == "enqueued":
            item["enq"] = event.time
        elif event.kind == "leased":
            item["leases"] += 1
            if item["first"] is None:
                item["first"] = event.time
        elif event.kind == "dead_lettered":
            item["dead"] = event.time
        elif event.kind == "replayed":
            item["dead"] = None
    return seen


def nearest_rank(values, q):
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered) / 100), 1) - 1] if ordered else None


def vitals_per_item(log, now):
    items = _items(log, now)
    leases = sum(i["leases"] for i in items.values())
    leased = [i for i in items.values() if i["leases"]]
    return {
        "time_in_queue_p95": nearest_rank(
            [i["first"] - (i["enq"] if i["enq"] is not None else i["first"]) for i in leased], 95
        ),
        "attempts": dict(Counter(i["leases"] for i in items.values() if i["enq"] is not None)),
        "dlq_age": max((now - i["dead"] for i in items.values() if i["dead"] is not None), default=None),
        "redelivery_rate": (leases - len(leased)) / leases if leases else 0.0,
    }


def vitals_from_the_queue_events(log, now):
    """Written differently: a state machine over events, sorted waits, the histogram built with Counter."""
    state, first, enqueued, count, dead = {}, {}, {}, Counter(), {}
    for event in [e for e in log.where() if e.time <= now and e.item_id]:
        state[event.item_id] = event.kind
        if event.kind == "enqueued":
            enqueued[event.item_id] = event.time
        if event.kind == "leased":
            count[event.item_id] += 1
            first.setdefault(event.item_id, event.time)
        if event.kind == "dead_lettered":
            dead[event.item_id] = event.time
    waits = sorted(first[i] - enqueued.get(i, first[i]) for i in first)
    still_dead = [now - dead[i] for i in dead if state.get(i) in ("dead_lettered",)]
    total = sum(count.values())
    return {
        "time_in_queue_p95": nearest_rank(waits, 95),
        "attempts": dict(Counter(count.get(i, 0) for i in enqueued)),
        "dlq_age": max(still_dead) if still_dead else None,
        "redelivery_rate": 1 - len(count) / total if total else 0.0,
    }


def interpolates_the_p95(log, now):
    found = vitals_per_item(log, now)
    items = [i for i in _items(log, now).values() if i["leases"]]
    waits = sorted(i["first"] - i["enq"] for i in items)
    if len(waits) > 1:
        rank = 0.95 * (len(waits) - 1)
        low = math.floor(rank)
        found["time_in_queue_p95"] = waits[low] + (waits[min(low + 1, len(waits) - 1)] - waits[low]) * (rank - low)
    return found


def waits_of_every_lease(log, now):
    """Time in queue measured at every lease, redeliveries too, not at each item's first."""
    found = vitals_per_item(log, now)
    enqueued = {e.item_id: e.time for e in log.where("enqueued") if e.time <= now}
    found["time_in_queue_p95"] = nearest_rank(
        [e.time - enqueued.get(e.item_id, e.time) for e in log.where("leased") if e.time <= now], 95
    )
    return found


def redeliveries_per_item(log, now):
    found = vitals_per_item(log, now)
    items = _items(log, now)
    leases = sum(i["leases"] for i in items.values())
    found["redelivery_rate"] = (leases - sum(1 for i in items.values() if i["leases"])) / len(items) if items else 0.0
    return found


def forgets_the_items_never_leased(log, now):
    found = vitals_per_item(log, now)
    found["attempts"].pop(0, None)
    return found


def replayed_letters_still_wait(log, now):
    """Dead once, dead for ever: a replay does not take the item out of the DLQ's age."""
    found = vitals_per_item(log, now)
    dead = [now - e.time for e in log.where("dead_lettered") if e.time <= now]
    found["dlq_age"] = max(dead) if dead else None
    return found


def reads_the_whole_log(log, now):
    """Ignores `now`: counts events that had not happened yet."""
    return vitals_per_item(log, max(e.time for e in log.where()) if log.where() else now) | {
        "dlq_age": vitals_per_item(log, now)["dlq_age"]
    }


def asks_the_kit(log, now):
    from shopops_lab.metrics import queue_metrics

    kit = queue_metrics(log, now=now)
    waits, dead = kit.time_in_queue, kit.dlq_age
    return dict(zip(KEYS, (waits.p95, dict(kit.attempts), dead.max, kit.redelivery_rate)))


def averages_instead(log, now):
    found = vitals_per_item(log, now)
    items = [i for i in _items(log, now).values() if i["leases"]]
    found["time_in_queue_p95"] = sum(i["first"] - i["enq"] for i in items) / len(items) if items else None
    return found


def returns_a_tuple(log, now):
    found = vitals_per_item(log, now)
    return tuple(found[key] for key in KEYS)


VITALS = Spec(
    exercise=lab07.vitals,
    right=(vitals_per_item, vitals_from_the_queue_events),
    wrong=(
        refused(
            interpolates_the_p95,
            "on a 200-item burst day with its chaos (seed 5), read at its end (now t=1800), your time_in_queue_p95",
            "the nearest-rank p95",
        ),
        refused(waits_of_every_lease, "your time_in_queue_p95 is", "each leased item's first lease minus its enqueue"),
        refused(
            redeliveries_per_item, "your redelivery_rate is", "the leases after each item's first, over all leases"
        ),
        refused(
            forgets_the_items_never_leased,
            "read at t=100, items still waiting and leased (now t=100), your attempts is",
            "0 for one never leased",
        ),
        refused(
            replayed_letters_still_wait,
            "a dead letter replayed after a fix and dead again, beside one left dead",
            "your dlq_age is",
        ),
        refused(reads_the_whole_log, "read at t=100, items still waiting and leased (now t=100)"),
        refused(asks_the_kit, "hands the work to the kit's queue_metrics"),
        refused(averages_instead, "your time_in_queue_p95 is"),
        refused(returns_a_tuple, "vital_signs returned the tuple", "return a dict with exactly the keys"),
    ),
    secrets=("math.ceil(0.95", "dead_since.pop"),
)


# ---------------------------------------------------------------------------- 07.5, a failure and its invariant
class StaleCheckpoints:
    """The master's idea, written differently: per item, the newest token seen so far."""

    def fault(self):
        return [Fault("pause_worker", item="O-1007")]

    def invariant(self, log):
        newest = {}
        for event in log.where():
            if event.kind == "leased":
                newest[event.item_id] = max(newest.get(event.item_id, 0), event.token)
            elif event.kind == "checkpoint_written" and event.token < newest.get(event.item_id, 0):
                raise AssertionError(f"stale checkpoint of {event.item_id} by {event.worker_id}")


class KilledAfterTheSend:
    def fault(self):
        return Fault("kill_worker", item="O-1003", point="after_send")

    def invariant(self, log):
        sent = Counter((event.case_id, event.info["idem_key"]) for event in log.where("contact_sent"))
        twice = [key for key, count in sent.items() if count > 1]
        assert not twice, f"sent twice: {twice[0]}"


class LostAcks(KilledAfterTheSend):
    def fault(self):
        return [Fault("lose_ack", item="O-1004"), Fault("lose_ack", item="O-1010")]


class NeverStrikes(KilledAfterTheSend):
    def fault(self):
        return Fault("kill_worker", item="O-9999", point="after_send")


class OnlyASpike(KilledAfterTheSend):
    def fault(self):
        return Fault("gateway_spike", at=100.0, duration=300.0, factor=4.0)


class PassesEverything(KilledAfterTheSend):
    def invariant(self, log):
        pass


class FailsEverything(KilledAfterTheSend):
    def invariant(self, log):
        raise AssertionError("something went wrong")


class CountsTheAbsorbedRepeats(KilledAfterTheSend):
    def invariant(self, log):
        tried = Counter((e.case_id, e.info["idem_key"]) for e in log.where(("contact_sent", "contact_deduped")))
        assert max(tried.values()) == 1, "a second email"


class ReadsTheStoresOwnNote(StaleCheckpoints):
    """Looks for the store's note of a stale write, which the log it reads does not carry."""

    def invariant(self, log):
        assert not log.where("stale_write_accepted"), "a stale write"


class AsksTheChecker(KilledAfterTheSend):
    def invariant(self, log):
        assert check(log).valid


class ReturnsAString(KilledAfterTheSend):
    def fault(self):
        return "kill a worker after it sends"


class RaisesItsOwnError(KilledAfterTheSend):
    def invariant(self, log):
        sent = Counter((event.case_id, event.info["idem_key"]) for event in log.where("contact_sent"))
        if max(sent.values()) > 1:
            raise RuntimeError("double contact")


INVENT = Spec(
    exercise=lab07.invent,
    right=(StaleCheckpoints, KilledAfterTheSend, LostAcks),
    wrong=(
        refused(NeverStrikes, "never struck during the check's day (200 items of burst day, seed 21)"),
        refused(OnlyASpike, "neither planted bug breaks anything"),
        refused(
            PassesEverything,
            "the run with sends without an idempotency key (the naive adapter) broke its promise",
            "and your invariant passed it: in CI, that bug ships",
        ),
        refused(FailsEverything, "your invariant failed the correct worker's run", "switched off"),
        refused(CountsTheAbsorbedRepeats, "your invariant failed the correct worker's run"),
        refused(ReadsTheStoresOwnNote, "and your invariant passed it: in CI, that bug ships"),
        refused(AsksTheChecker, "hands the log to the kit's checker"),
        refused(ReturnsAString, "fault() returned the str 'kill a worker after it sends'"),
        refused(RaisesItsOwnError, "your invariant raised RuntimeError: double contact", "use assert"),
    ),
    secrets=("newest.get(event.item_id)",),
)

(
    test_a_right_answer_written_differently_is_accepted,
    test_a_plausible_wrong_answer_is_refused_with_its_evidence,
    test_the_specification_has_enough_right_and_wrong_answers,
) = accuracy_tests(POLICY, THE_CONTRACT, CHAOS, VITALS, INVENT)
