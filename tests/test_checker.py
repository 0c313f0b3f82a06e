"""The checker names each anomaly with its evidence, and says nothing about a healthy run.

Where the real components can produce the failure (a naive adapter, a worker that crashes,
a queue whose limit is too generous, a priority left at bulk), they do: InMemoryQueue and
the channel adapters share one EventLog and one FakeClock. The real queue refuses a second
live lease and a stale token, so those two anomalies are provoked with logs written by hand
with EventLog.append, each standing for a broken queue or store (their docstrings say so).
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from shopops_lab.checker import (
    DEFAULT_APPROVAL_WAIT_BUDGET,
    DEFAULT_MAX_ATTEMPTS,
    Anomaly,
    AnomalyName,
    CheckResult,
    check,
    is_approval,
    messages,
)
from shopops_lab.checker.starvation import ApprovalWaits
from shopops_lab.clock import FakeClock
from shopops_lab.effects import EmailAdapter, NaiveEmailAdapter, ProviderFault, SendStatus
from shopops_lab.errors import BadArgumentError, LeaseExpiredError, StaleTokenError
from shopops_lab.events import Event, EventKind, EventLog
from shopops_lab.worker.queue import InMemoryQueue, Outcome, Priority

K = EventKind
KEY = "O-1001:email:3"


def world(*, lease_seconds: float = 30, max_attempts: int = 5, naive: bool = False) -> SimpleNamespace:
    """A queue and an email adapter writing to one log, on one fake clock."""
    clock, log = FakeClock(), EventLog()
    queue = InMemoryQueue(lease_seconds=lease_seconds, max_attempts=max_attempts, clock=clock, log=log)
    email = (NaiveEmailAdapter if naive else EmailAdapter)(log=log, clock=clock)
    return SimpleNamespace(clock=clock, log=log, queue=queue, email=email)


def crash_and_redeliver(*, naive: bool) -> SimpleNamespace:
    """The chapter's story: W1 leases O-1001 and emails, then dies before acking; the lease
    expires and W7 gets the same work and emails again."""
    w = world(naive=naive)
    w.queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send", payload={"idem_key": KEY})  # 0
    w.clock.set(2)
    w.queue.acquire("W1")  # 1 (token 1)
    w.clock.set(12)
    w.email.send(KEY, case_id="O-1001", to="jordan", worker_id="W1")  # 2
    w.clock.set(37)  # W1 is gone
    lease = w.queue.acquire("W7")  # 3 expired, 4 leased (token 2)
    w.clock.set(43)
    w.email.send(KEY, case_id="O-1001", to="jordan", worker_id="W7")  # 5
    w.queue.ack(lease)  # 6
    return w


def seqs(anomaly: Anomaly) -> list[int]:
    return [event.seq for event in anomaly.evidence]


# --------------------------------------------------------------------------- double_contact


def test_double_contact_names_the_case_the_intent_both_messages_and_the_leases_they_ran_under():
    w = crash_and_redeliver(naive=True)

    result = check(w.log, max_attempts=w.queue.max_attempts)

    assert result.valid is False
    assert result.names() == [AnomalyName.DOUBLE_CONTACT]
    (anomaly,) = result.of("double_contact")
    assert anomaly.case_id == "O-1001" and anomaly.item_id is None
    assert anomaly.workers == ("W1", "W7")
    assert anomaly.tokens == (1, 2)
    assert anomaly.times == (2, 12, 37, 43)
    assert seqs(anomaly) == [1, 2, 4, 5]  # W1's lease and send, W7's lease and send
    assert [e.kind for e in anomaly.evidence] == [K.LEASED, K.CONTACT_SENT, K.LEASED, K.CONTACT_SENT]
    assert anomaly.message.startswith(
        "case O-1001 was emailed twice for intent O-1001:email:3 — "
        "msg-0001 at t=12 by W1 (token 1) and msg-0002 at t=43 by W7 (token 2). "
    )


def test_the_same_crash_with_the_idempotent_adapter_is_valid():
    w = crash_and_redeliver(naive=False)

    result = check(w.log, max_attempts=w.queue.max_attempts)

    assert [e.kind for e in w.log.where((K.CONTACT_SENT, K.CONTACT_DEDUPED))] == [K.CONTACT_SENT, K.CONTACT_DEDUPED]
    assert result.valid is True
    assert result.anomalies == ()
    assert str(result) == (
        "valid: no anomalies in 7 events: 1 item (1 acked, 0 dead-lettered), "
        "no intent sent twice, one lease per case at a time"
    )


def test_a_retry_after_an_unknown_outcome_without_a_key_is_a_double_contact():
    """The reply was lost (the message did go out); a naive retry sends a second one."""
    w = world(naive=True)
    w.queue.enqueue(case_id="O-1001", kind="contact_send")
    lease = w.queue.acquire("W1")
    w.email.provider.inject(ProviderFault.DROP_REPLY)
    assert w.email.send(KEY, case_id="O-1001", worker_id="W1").status is SendStatus.UNKNOWN
    w.clock.advance(5)
    assert w.email.send(KEY, case_id="O-1001", worker_id="W1").status is SendStatus.OK
    w.queue.ack(lease)

    (anomaly,) = check(w.log).anomalies

    assert anomaly.name is AnomalyName.DOUBLE_CONTACT
    assert anomaly.workers == ("W1",) and anomaly.tokens == (1,)
    assert [e.kind for e in anomaly.evidence] == [K.LEASED, K.CONTACT_SENT, K.CONTACT_SENT]


def test_a_broker_duplicate_names_the_copy_the_second_send_ran_under():
    """The simulator logs DELIVERED_TWICE when the broker hands a copy of W1's live lease to W2."""
    w = world(naive=True)
    w.queue.enqueue(case_id="O-1001", kind="contact_send")  # 0
    lease = w.queue.acquire("W1")  # 1
    w.log.append(
        K.DELIVERED_TWICE,
        1,
        item_id=lease.item_id,
        case_id="O-1001",
        worker_id="W2",
        token=lease.token,
        attempt=1,
        first_worker="W1",
    )  # 2
    w.email.send(KEY, case_id="O-1001", worker_id="W1", now=2)  # 3
    w.email.send(KEY, case_id="O-1001", worker_id="W2", now=3)  # 4
    w.queue.ack(lease, now=4)  # 5

    (anomaly,) = check(w.log).anomalies

    assert anomaly.name is AnomalyName.DOUBLE_CONTACT
    assert anomaly.workers == ("W1", "W2") and anomaly.tokens == (1,)
    assert seqs(anomaly) == [1, 2, 3, 4]
    assert "msg-0001 at t=2 by W1 (token 1) and msg-0002 at t=3 by W2 (token 1)" in anomaly.message


def test_three_sends_of_one_intent_are_one_anomaly_and_other_intents_are_not_involved():
    w = world(naive=True)
    for t, worker in ((1, "W1"), (2, "W2"), (3, "W3")):
        w.email.send(KEY, case_id="O-1001", worker_id=worker, now=t)
    w.email.send("O-1001:email:4", case_id="O-1001", worker_id="W1", now=4)  # a different intent
    w.email.send(KEY, case_id="O-2002", worker_id="W1", now=5)  # a different case

    (anomaly,) = check(w.log).anomalies

    assert anomaly.case_id == "O-1001"
    assert anomaly.workers == ("W1", "W2", "W3") and anomaly.tokens == ()
    assert seqs(anomaly) == [0, 1, 2]
    assert (
        "was emailed 3 times for intent O-1001:email:3 — msg-0001 at t=1 by W1, msg-0002 at t=2 by W2 "
        "and msg-0003 at t=3 by W3." in anomaly.message
    )


# --------------------------------------------------------------------------- lost_item


def lost_run() -> SimpleNamespace:
    """item-0001 is acked; W2 leases item-0002 and crashes, and the run stops before anyone
    called the queue again (enqueue does not expire leases); item-0003 is never leased."""
    w = world()
    w.queue.enqueue(case_id="O-1001")  # 0
    w.queue.enqueue(case_id="O-1002")  # 1
    w.queue.ack(w.queue.acquire("W1"))  # 2 leased, 3 acked
    w.clock.set(10)
    w.queue.acquire("W2")  # 4 leased item-0002 until t=40
    w.clock.set(100)
    w.queue.enqueue(case_id="O-1003")  # 5
    return w


def test_lost_items_are_named_with_where_they_were_left():
    w = lost_run()

    result = check(w.log, max_attempts=w.queue.max_attempts)

    assert result.valid is False
    assert result.names() == ["lost_item"]
    leased, ready = result.anomalies
    assert (leased.item_id, leased.case_id, leased.workers, leased.tokens) == ("item-0002", "O-1002", ("W2",), (1,))
    assert seqs(leased) == [1, 4]
    assert leased.message == (
        "item item-0002 (case O-1002) never finished: enqueued at t=0, and when the log ends it is still "
        "leased by W2 (token 1) since t=10; that lease ran out at t=40, but no expiry returned the item. "
        "A finished run must leave every item acked or in the dead-letter queue."
    )
    assert (ready.item_id, ready.workers, ready.tokens, seqs(ready)) == ("item-0003", (), (), [5])
    assert "still waiting in the queue: no worker ever leased it" in ready.message


def test_a_log_that_is_not_final_does_not_judge_lost_items():
    w = lost_run()

    result = check(w.log, final=False)

    assert result.valid is None
    assert result.anomalies == ()
    assert str(result) == (
        "unknown: no anomalies so far in 6 events, but the log is not final and 2 items "
        "are still in flight (item-0002, item-0003), so lost items cannot be judged yet"
    )


def test_a_not_final_log_with_nothing_in_flight_is_valid():
    w = crash_and_redeliver(naive=False)
    assert check(w.log, final=False).valid is True


def test_a_replayed_item_that_never_ran_again_is_lost_and_a_dead_one_is_not():
    w = world(max_attempts=1)
    w.queue.enqueue(case_id="O-1001")
    w.queue.enqueue(case_id="O-1002")
    assert w.queue.process_one("W1", lambda lease: 1 / 0) is Outcome.DEAD
    assert w.queue.process_one("W1", lambda lease: 1 / 0) is Outcome.DEAD
    w.clock.set(50)
    w.queue.replay_dlq("item-0001")

    (anomaly,) = check(w.log, max_attempts=1).anomalies

    assert (anomaly.name, anomaly.item_id) == ("lost_item", "item-0001")
    assert [e.kind for e in anomaly.evidence] == [K.ENQUEUED, K.REPLAYED]
    assert "ready since t=50 after a replay from the dead-letter queue" in anomaly.message


# --------------------------------------------------------------------------- two_live_leases


def two_leases_log() -> EventLog:
    """A broken queue (the real one refuses this): it grants item-0002 of case O-1001 to W7
    while W1's lease on item-0001 of the same case is still live."""
    log = EventLog()
    log.append(K.ENQUEUED, 0, item_id="item-0001", case_id="O-1001", kind="contact_send", priority=1)
    log.append(K.ENQUEUED, 0, item_id="item-0002", case_id="O-1001", kind="refund", priority=1)
    log.append(K.LEASED, 1, item_id="item-0001", case_id="O-1001", worker_id="W1", token=1, attempt=1, expires_at=31)
    log.append(
        K.HEARTBEAT, 20, item_id="item-0001", case_id="O-1001", worker_id="W1", token=1, attempt=1, expires_at=50
    )
    log.append(K.LEASED, 40, item_id="item-0002", case_id="O-1001", worker_id="W7", token=1, attempt=1, expires_at=70)
    log.append(K.ACKED, 45, item_id="item-0001", case_id="O-1001", worker_id="W1", token=1, attempt=1)
    log.append(K.ACKED, 46, item_id="item-0002", case_id="O-1001", worker_id="W7", token=1, attempt=1)
    return log


def test_two_live_leases_on_one_case_are_found_from_the_rebuilt_intervals():
    """Hand-built log of a broken queue: the heartbeat moved W1's deadline to t=50, so W1
    still held the case when W7 was granted another of its items at t=40."""
    result = check(two_leases_log())

    assert result.names() == ["two_live_leases"]
    (anomaly,) = result.anomalies
    assert (anomaly.case_id, anomaly.item_id) == ("O-1001", "item-0002")
    assert anomaly.workers == ("W1", "W7") and anomaly.tokens == (1,)
    assert seqs(anomaly) == [2, 4]
    assert anomaly.message.startswith(
        "case O-1001 had two live leases at t=40: W1 holds item-0001 with token 1 until t=50, "
        "and W7 was granted item-0002 with token 1."
    )


@pytest.mark.parametrize(
    "end",
    [
        (K.ACKED, 35),
        (K.NACKED, 35),
        (K.EXPIRED, 35),
        (K.DEAD_LETTERED, 35),
        None,  # no event ends it, but the deadline t=31 passed before t=40
    ],
)
def test_a_lease_that_ended_or_ran_out_is_not_live(end):
    """Hand-built log: the first lease is over (by an event, or past its deadline) before the second."""
    log = EventLog()
    log.append(K.ENQUEUED, 0, item_id="item-0001", case_id="O-1001", priority=1)
    log.append(K.ENQUEUED, 0, item_id="item-0002", case_id="O-1001", priority=1)
    log.append(K.LEASED, 1, item_id="item-0001", case_id="O-1001", worker_id="W1", token=1, expires_at=31)
    if end is not None:
        log.append(end[0], end[1], item_id="item-0001", case_id="O-1001", worker_id="W1", token=1)
    log.append(K.LEASED, 40, item_id="item-0002", case_id="O-1001", worker_id="W7", token=1, expires_at=70)

    assert AnomalyName.TWO_LIVE_LEASES not in check(log, final=False).names()


def test_the_real_queue_never_shows_two_live_leases_even_after_an_expiry():
    w = crash_and_redeliver(naive=False)
    w.queue.enqueue(case_id="O-1001")
    w.queue.ack(w.queue.acquire("W2"))
    assert check(w.log).valid is True


# --------------------------------------------------------------------------- stale_write_accepted


def stale_ack_log() -> EventLog:
    """The lesson's example against a store that does not fence: W1 holds token 4 until
    t=10, W7 is granted token 5 at t=11, and W1's ack with token 4 is accepted at t=12."""
    log = EventLog()
    log.append(K.ENQUEUED, 0, item_id="item-0001", case_id="O-1001", priority=1)
    log.append(K.LEASED, 0, item_id="item-0001", case_id="O-1001", worker_id="W1", token=4, attempt=1, expires_at=10)
    log.append(K.EXPIRED, 11, item_id="item-0001", case_id="O-1001", worker_id="W1", token=4, attempt=1)
    log.append(K.LEASED, 11, item_id="item-0001", case_id="O-1001", worker_id="W7", token=5, attempt=2, expires_at=41)
    log.append(K.ACKED, 12, item_id="item-0001", case_id="O-1001", worker_id="W1", token=4, attempt=2)
    log.append(K.ACKED, 20, item_id="item-0001", case_id="O-1001", worker_id="W7", token=5, attempt=2)
    return log


def test_an_ack_under_an_older_token_is_a_stale_write_accepted():
    """Hand-built log of a store without fencing (the real queue raises StaleTokenError)."""
    result = check(stale_ack_log())

    assert result.names() == ["stale_write_accepted"]
    (anomaly,) = result.anomalies
    assert (anomaly.case_id, anomaly.item_id) == ("O-1001", "item-0001")
    assert anomaly.workers == ("W1", "W7") and anomaly.tokens == (4, 5)
    assert seqs(anomaly) == [1, 3, 4]  # W1's claim, W7's newer claim, W1's accepted ack
    assert anomaly.message.startswith(
        "W1 acked item item-0001 (case O-1001) at t=12 with token 4, but token 5 had already been "
        "granted to W7 at t=11; the store accepted it."
    )


def test_an_explicit_stale_write_accepted_event_is_reported_and_merged_with_the_same_write():
    """Hand-built: a simulated checkpoint store that does not fence logs what it let through."""
    log = stale_ack_log()
    log.append(
        K.STALE_WRITE_ACCEPTED, 12, item_id="item-0001", case_id="O-1001", worker_id="W1", token=4, op="ack", current=5
    )  # 6: the same write as 4
    log.append(
        K.STALE_WRITE_ACCEPTED,
        30,
        item_id="item-0001",
        case_id="O-1001",
        worker_id="W1",
        token=4,
        op="checkpoint",
        current=5,
    )  # 7: another one

    first, second = check(log).of(AnomalyName.STALE_WRITE_ACCEPTED)

    assert seqs(first) == [1, 3, 4, 6]
    assert seqs(second) == [1, 3, 7]
    assert second.message.startswith(
        "W1 wrote (checkpoint) to item item-0001 (case O-1001) at t=30 with token 4, "
        "but token 5 had already been granted to W7 at t=11"
    )


def test_a_stale_write_the_real_queue_rejected_is_not_an_anomaly():
    w = world()
    w.queue.enqueue(case_id="O-1001")
    old = w.queue.acquire("W1")
    w.clock.set(31)
    new = w.queue.acquire("W7")
    with pytest.raises(StaleTokenError):
        w.queue.ack(old)
    w.queue.ack(new)

    assert [e.kind for e in w.log].count(K.STALE_REJECTED) == 1
    assert check(w.log).valid is True


# --------------------------------------------------------------------------- poison_retry_storm


def poison_run(*, queue_limit: int, replays: int = 0) -> SimpleNamespace:
    """A payload that always fails, handled until the queue dead-letters it (and replayed)."""
    w = world(max_attempts=queue_limit)
    w.queue.enqueue(case_id="O-1001", kind="contact_send", payload={"schema": "bad"})
    for round_ in range(replays + 1):
        if round_:
            w.queue.replay_dlq("item-0001")
        outcome = None
        while outcome is not Outcome.DEAD:
            w.clock.advance(1)
            outcome = w.queue.process_one("W1", poison)
    return w


def poison(lease) -> None:
    raise ValueError("bad schema")


def test_a_queue_that_retries_past_max_attempts_is_a_poison_retry_storm():
    w = poison_run(queue_limit=8)  # the queue was configured too generously

    result = check(w.log, max_attempts=3)

    (anomaly,) = result.anomalies
    assert (anomaly.name, anomaly.item_id, anomaly.case_id) == ("poison_retry_storm", "item-0001", "O-1001")
    assert anomaly.workers == ("W1",) and anomaly.tokens == tuple(range(1, 9))
    leases = [e.seq for e in w.log.where(K.LEASED)]
    dead = w.log.where(K.DEAD_LETTERED)[0].seq
    assert seqs(anomaly) == [0, *leases, dead]
    assert anomaly.message.startswith(
        "item item-0001 (case O-1001) was leased 8 times before it was finally dead-lettered at t=8 "
        "(max_attempts is 3), first at t=1 and last at t=8. Last error: ValueError: bad schema."
    )
    assert check(w.log, max_attempts=8).valid is True


def test_replays_start_the_count_again():
    w = poison_run(queue_limit=3, replays=1)
    assert len(w.log.where(K.LEASED)) == 6
    assert check(w.log, max_attempts=3).valid is True


def test_without_max_attempts_the_checker_assumes_five_and_says_so():
    w = poison_run(queue_limit=6)

    (anomaly,) = check(w.log).anomalies

    assert DEFAULT_MAX_ATTEMPTS == 5
    assert (
        "(max_attempts was not given, so 5 was assumed; pass check(log, max_attempts=queue.max_attempts))"
        in anomaly.message
    )


def test_an_enqueued_max_attempts_is_used_when_check_is_not_told():
    """Hand-built: a queue that records each item's limit on its ENQUEUED event and then ignores it."""
    log = EventLog()
    log.append(K.ENQUEUED, 0, item_id="item-0001", case_id="O-1001", priority=1, max_attempts=2)
    for token in (1, 2, 3):
        log.append(
            K.LEASED,
            token,
            item_id="item-0001",
            case_id="O-1001",
            worker_id="W1",
            token=token,
            attempt=token,
            expires_at=token + 30.0,
        )
        log.append(
            K.NACKED,
            token + 0.5,
            item_id="item-0001",
            case_id="O-1001",
            worker_id="W1",
            token=token,
            attempt=token,
            error="boom",
        )

    result = check(log, final=False)

    assert result.names() == ["poison_retry_storm"]
    assert "was leased 3 times without being dead-lettered (max_attempts is 2)" in result.anomalies[0].message
    assert check(log, max_attempts=3, final=False).valid is None  # the argument wins; the item is in flight


# --------------------------------------------------------------------------- approval_starved


def approval_run(priority: int) -> SimpleNamespace:
    """One worker, twelve bulk items queued first, then an approval resume; each item takes 30 s."""
    w = world(lease_seconds=60)
    for n in range(1, 13):
        w.queue.enqueue(case_id=f"B-{n}", kind="bulk_outreach", priority=Priority.BULK)  # 0..11
    w.queue.enqueue(case_id="O-1001", kind="approval_resume", priority=priority)  # 12
    while (lease := w.queue.acquire("W1")) is not None:
        w.clock.advance(30)
        w.queue.ack(lease)
    return w


def test_an_approval_queued_as_bulk_starves_while_bulk_work_is_leased_ahead_of_it():
    w = approval_run(Priority.BULK)

    result = check(w.log, max_attempts=w.queue.max_attempts)

    assert result.names() == ["approval_starved"]
    (anomaly,) = result.anomalies
    assert (anomaly.case_id, anomaly.item_id) == ("O-1001", "item-0013")
    assert anomaly.workers == ("W1",) and anomaly.tokens == (1,)
    assert seqs(anomaly) == [12, 13, 15, 17, 37]  # its enqueue, the first 3 overtakers, its own lease
    assert anomaly.times == (0, 30, 60, 360)
    assert anomaly.message == (
        "approval item item-0013 (case O-1001) waited 360 s for a worker (budget 300 s): enqueued at t=0, "
        "and W1 leased it at t=360, while 12 lower-priority leases were granted ahead of it, the first "
        "item-0001 (case B-1) to W1 at t=0. Serve approvals first (Priority.APPROVAL) and shed bulk work "
        "under load."
    )


def test_an_approval_served_first_is_valid_and_a_larger_budget_forgives_the_wait():
    assert check(approval_run(Priority.APPROVAL).log).valid is True
    assert DEFAULT_APPROVAL_WAIT_BUDGET == 300
    assert check(approval_run(Priority.BULK).log, approval_wait_budget=360).valid is True


def test_time_behind_a_lease_on_its_own_case_is_not_starvation():
    """The approval's case is held by W1 for 400 s while W2 leases other cases: that is the
    case's order, not the scheduler skipping the approval."""
    w = world(lease_seconds=600)
    w.queue.enqueue(case_id="O-1001", kind="intake_build")
    holder = w.queue.acquire("W1")
    w.queue.enqueue(case_id="O-1001", kind="approval_resume", priority=Priority.APPROVAL)
    for n in range(1, 6):
        w.queue.enqueue(case_id=f"B-{n}", kind="bulk_outreach", priority=Priority.BULK)
    for _ in range(5):
        w.clock.advance(80)
        w.queue.ack(w.queue.acquire("W2"))
    w.queue.ack(holder)
    approval = w.queue.acquire("W2")
    assert approval.kind == "approval_resume" and approval.leased_at == 400
    w.queue.ack(approval)

    assert check(w.log).valid is True


def test_an_approval_still_waiting_at_the_end_of_the_log_is_reported():
    w = world(lease_seconds=60)
    for n in range(1, 13):
        w.queue.enqueue(case_id=f"B-{n}", priority=Priority.BULK)
    w.queue.enqueue(case_id="O-1001", kind="approval_resume", priority=Priority.BULK)
    for _ in range(12):
        lease = w.queue.acquire("W1")
        w.clock.advance(30)
        w.queue.ack(lease)

    result = check(w.log, final=False)

    (anomaly,) = result.anomalies
    assert anomaly.name is AnomalyName.APPROVAL_STARVED and result.valid is False
    assert "it was still waiting when the log ends at t=360" in anomaly.message
    assert seqs(anomaly) == [12, 13, 15, 17]


@pytest.mark.parametrize(
    "info, approval",
    [
        ({"priority": 0, "kind": "approval_resume"}, True),
        ({"priority": Priority.APPROVAL, "kind": "contact_send"}, True),  # served first: an approval
        ({"priority": Priority.BULK, "kind": "approval_resume"}, True),  # queued wrong: still one
        ({"priority": 0.0}, True),
        ({"priority": Priority.BULK, "kind": "bulk_outreach"}, False),
        ({"priority": False, "kind": "intake_build"}, False),  # a flag is not a priority
        ({}, False),
    ],
)
def test_an_approval_is_known_by_its_priority_or_its_kind(info, approval):
    assert is_approval(info) is approval


def logged(log: EventLog, kind: EventKind, time: float, **fields) -> Event:
    return log[log.append(kind, time, **fields)]


def test_approval_clocks_run_only_while_the_approval_could_be_served():
    """The starvation tracker on its own, fed by hand: 100 s held behind its own case, then
    400 s first in line while two bulk leases go ahead."""
    log = EventLog()
    ready = logged(log, K.ENQUEUED, 0, item_id="item-0002", case_id="O-1001")
    found: list[Anomaly] = []
    waits = ApprovalWaits(300.0, found)
    waits.start("item-0002", "O-1001", ready)
    waits.refresh("O-1001", 0, head=None)  # its case is held
    waits.refresh("O-1001", 100, head="item-0002")  # free: the clock starts
    for t, case in ((150, "B-1"), (300, "B-2")):
        waits.overtakers.append(logged(log, K.LEASED, t, item_id=f"item-{case}", case_id=case, worker_id="W2", token=1))
    leased = logged(log, K.LEASED, 500, item_id="item-0002", case_id="O-1001", worker_id="W1", token=1)
    waits.stop("item-0002", leased)

    (anomaly,) = found
    assert anomaly.name is AnomalyName.APPROVAL_STARVED and waits.open == {} and waits.by_case == {}
    assert "waited 400 s for a worker (budget 300 s, not counting 100 s while its own case was held)" in anomaly.message
    assert "2 lower-priority leases were granted ahead of it, the first item-B-1 (case B-1)" in anomaly.message
    assert seqs(anomaly) == [0, 1, 2, 3]


def test_an_approval_settled_without_a_lease_is_not_judged():
    log = EventLog()
    found: list[Anomaly] = []
    waits = ApprovalWaits(1.0, found)
    waits.start("item-0001", "O-1001", logged(log, K.ENQUEUED, 0, item_id="item-0001", case_id="O-1001"))
    waits.refresh("O-1001", 0, head="item-0001")
    waits.overtakers.append(logged(log, K.LEASED, 5, item_id="item-0009", case_id="B-1", token=1))
    waits.stop("item-0001", None)
    waits.finish(10)
    assert found == [] and waits.open == {}


def test_each_message_is_a_pure_function_of_the_evidence_the_checker_shows():
    """Rebuilding an anomaly from nothing but its own evidence gives the same anomaly."""
    (contact,) = check(crash_and_redeliver(naive=True).log).anomalies
    leased_w1, sent_w1, leased_w7, sent_w7 = contact.evidence
    again = messages.double_contact("O-1001", KEY, [(sent_w1, leased_w1), (sent_w7, leased_w7)])
    assert again == contact and again.message == contact.message

    (stale,) = check(stale_ack_log()).anomalies
    own, newest, write = stale.evidence
    assert messages.stale_write([write], leases=[own, newest], item_case=None) == stale
    assert messages.stale_write([write], leases=[], item_case=None).message.startswith(
        "W1 acked item item-0001 (case O-1001) at t=12 with token 4, but a newer token had already been "
        "granted; the store accepted it."
    )


# --------------------------------------------------------------------------- the result


def messy_log() -> EventLog:
    """One log with several anomalies, to test ordering and round trips."""
    w = crash_and_redeliver(naive=True)
    w.queue.enqueue(case_id="O-2002", kind="approval_resume", priority=Priority.BULK)
    log = w.log
    for event in stale_ack_log():
        log.append(
            event.kind,
            100 + event.time,
            item_id=event.item_id.replace("0001", "0100"),
            case_id="O-3003",
            worker_id=event.worker_id,
            token=event.token,
            attempt=event.attempt,
            **event.info,
        )
    return log


def test_anomalies_are_sorted_by_name_then_first_evidence_and_names_are_distinct():
    result = check(messy_log())

    assert result.names() == ["double_contact", "lost_item", "stale_write_accepted"]
    assert [(a.name.value, a.evidence[0].seq) for a in result.anomalies] == [
        ("double_contact", 1),
        ("lost_item", 7),
        ("stale_write_accepted", 9),
    ]
    assert result.summary == "3 anomalies (double_contact, lost_item, stale_write_accepted) in 14 events"
    assert result.of("two_live_leases") == ()
    with pytest.raises(BadArgumentError, match="name is 'double_kontakt'"):
        result.of("double_kontakt")


def test_the_report_reads_like_a_teacher_and_is_the_same_every_time():
    text = str(check(crash_and_redeliver(naive=True).log))

    assert text == str(check(crash_and_redeliver(naive=True).log))
    assert (
        text
        == """\
invalid: 1 anomaly (double_contact) in 7 events

double_contact: case O-1001 was emailed twice for intent O-1001:email:3 — msg-0001 at t=12 by W1 (token 1) \
and msg-0002 at t=43 by W7 (token 2). Every send after the first reached the customer again: send with the \
idempotency key through an adapter that returns the first message id on a repeat.
  #1 t=2 leased item=item-0001 case=O-1001 worker=W1 token=1 attempt=1 expires_at=32
  #2 t=12 contact_sent case=O-1001 worker=W1 channel=email idem_key=O-1001:email:3 message_id=msg-0001 to=jordan
  #4 t=37 leased item=item-0001 case=O-1001 worker=W7 token=2 attempt=2 expires_at=67
  #5 t=43 contact_sent case=O-1001 worker=W7 channel=email idem_key=O-1001:email:3 message_id=msg-0002 to=jordan"""
    )


def test_long_evidence_is_shortened_in_print_but_kept_whole():
    w = poison_run(queue_limit=20)

    (anomaly,) = check(w.log, max_attempts=3).anomalies

    assert len(anomaly.evidence) == 22  # enqueue, 20 leases, the dead-letter
    lines = str(anomaly).splitlines()
    assert len(lines) == 1 + 12 + 1
    assert lines[-1] == "  ... and 10 more events (see .evidence)"


def test_a_log_rebuilt_from_json_gives_the_same_verdict():
    log = messy_log()
    rebuilt = EventLog.from_dicts(json.loads(json.dumps(log.to_dicts())))

    original, again = check(log), check(rebuilt)

    assert again.as_dict() == original.as_dict()
    assert str(again) == str(original)
    assert json.loads(json.dumps(original.as_dict())) == original.as_dict()


def test_as_dict_is_plain_data():
    (anomaly,) = check(crash_and_redeliver(naive=True).log).as_dict()["anomalies"]

    assert anomaly["name"] == "double_contact"
    assert anomaly["workers"] == ["W1", "W7"] and anomaly["tokens"] == [1, 2]
    assert anomaly["case_id"] == "O-1001" and anomaly["item_id"] is None
    assert [e["seq"] for e in anomaly["evidence"]] == [1, 2, 4, 5]
    assert anomaly["evidence"][1]["kind"] == "contact_sent"


def test_results_are_frozen():
    result = check(crash_and_redeliver(naive=True).log)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.valid = True
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.anomalies[0].message = "fine"


def test_an_empty_log_is_unknown():
    result = check(EventLog())
    assert result == CheckResult(valid=None, summary=result.summary)
    assert str(result) == "unknown: the log is empty: nothing has happened yet, so there is nothing to judge"


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"log": [1, 2]}, "log"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"max_attempts": 2.5}, "max_attempts"),
        ({"approval_wait_budget": 0}, "approval_wait_budget"),
        ({"approval_wait_budget": float("inf")}, "approval_wait_budget"),
        ({"approval_wait_budget": "300"}, "approval_wait_budget"),
        ({"final": "yes"}, "final"),
    ],
)
def test_bad_arguments_name_the_field_and_the_fix(kwargs, field):
    log = kwargs.pop("log", EventLog())
    with pytest.raises(BadArgumentError) as caught:
        check(log, **kwargs)
    assert caught.value.field == field
    assert "Fix:" in str(caught.value)


def test_a_clean_busy_run_with_crashes_replays_and_stale_workers_is_valid():
    """Every hazard the checker watches for happens here, handled the right way."""
    w = world(max_attempts=3)
    for n in range(1, 301):
        w.queue.enqueue(
            case_id=f"O-{1000 + n % 120}",
            kind="contact_send",
            payload={"n": n},
            priority=Priority.APPROVAL if n % 10 == 0 else Priority.BULK,
        )
    step, stalled = 0, []
    while (lease := w.queue.acquire(f"W{step % 7 + 1}")) is not None:
        step += 1
        w.clock.advance(1)
        key = f"{lease.case_id}:email:{lease.payload['n']}"
        w.email.send(key, case_id=lease.case_id, worker_id=lease.worker_id)
        if stalled and step % 5 == 0:  # a stalled worker wakes up and tries to finish: refused
            with pytest.raises((StaleTokenError, LeaseExpiredError)):
                w.queue.ack(stalled.pop(0))
        if step % 11 == 0:  # the worker stalls; the lease runs out and the item comes back
            stalled.append(lease)
            w.clock.advance(31)
            continue
        if step % 17 == 0 or lease.payload["n"] in (50, 150):  # the handler fails; 50 and 150 always do
            w.queue.nack(lease, "gateway timeout")
            continue
        if not w.queue.heartbeat(lease):
            continue
        w.queue.ack(lease)
    assert [item.id for item in w.queue.dlq_items()] == ["item-0050", "item-0150"]
    for item in w.queue.dlq_items():  # the poison payloads are fixed, then replayed
        w.queue.replay_dlq(item.id)
    while (lease := w.queue.acquire("W1")) is not None:
        w.queue.ack(lease)

    result = check(w.log, max_attempts=w.queue.max_attempts)

    assert result.valid is True, str(result)
    kinds = {e.kind for e in w.log}
    assert {K.EXPIRED, K.NACKED, K.CONTACT_DEDUPED, K.HEARTBEAT, K.STALE_REJECTED, K.REPLAYED} <= kinds
    assert result.summary.startswith(f"no anomalies in {len(w.log)} events: 300 items (300 acked, 0 dead-lettered)")


def test_a_large_log_is_checked_in_one_pass():
    """Sanity, not a timing: a 5,000-item run with one double contact hidden at the very end."""
    w = world(naive=True)
    for n in range(5_000):
        w.queue.enqueue(case_id=f"O-{n % 1000}", priority=Priority.NORMAL)
    while (lease := w.queue.acquire("W1")) is not None:
        w.email.send(f"{lease.item_id}:email", case_id=lease.case_id, worker_id="W1")
        w.queue.ack(lease)
    w.email.send("item-0001:email", case_id="O-0", worker_id="W9", now=w.clock.now())

    result = check(w.log, max_attempts=w.queue.max_attempts)

    assert result.event_count == 20_001
    assert result.names() == ["double_contact"]
    assert result.anomalies[0].workers == ("W1", "W9")


def test_a_result_stores_claims_are_token_grants_not_queue_leases():
    """Lab 04's story on the naive result store: many claims on one record, then a stale
    write. Claims fence writes but are not leases: only stale_write_accepted is named."""
    from shopops_lab.fencing import NaiveResultStore

    clock = FakeClock()
    store = NaiveResultStore(clock=clock)
    for worker in ("W1", "W2", "W3", "W4", "W5"):
        store.claim("O-1001", worker)
    old = store.claim("O-1001", "W1")
    clock.advance(11)
    new = store.claim("O-1001", "W7")
    store.complete("O-1001", {"r": "voucher"}, token=new, worker_id="W7")
    store.complete("O-1001", {"r": "refund"}, token=old, worker_id="W1")
    result = check(store.log)
    assert result.names() == ["stale_write_accepted"]
    (anomaly,) = result.of("stale_write_accepted")
    assert anomaly.tokens == (old, new) and anomaly.workers == ("W1", "W7")
