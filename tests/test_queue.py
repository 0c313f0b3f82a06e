"""The queue, one behaviour per test: leases, ordering, attempts, the DLQ, fencing, the
event log, and the promise that a bad argument is refused with nothing half-applied.

Part of the store contract: every test runs on each backend (memory, SQLite, PostgreSQL;
see store_backends.py), and must pass unchanged on all of them.

Time is always a FakeClock or an explicit `now=`; nothing here sleeps.
"""

from __future__ import annotations

import math

import pytest
from store_backends import BACKENDS, Backend

from shopops_lab.clock import FakeClock
from shopops_lab.errors import (
    BadArgumentError,
    LeaseExpiredError,
    LeaseSettledError,
    NotInDLQError,
    StaleTokenError,
    TransitionError,
    UnknownItemError,
    UnknownLeaseError,
)
from shopops_lab.events import EventKind
from shopops_lab.states import TRANSITIONS, ItemState
from shopops_lab.worker.queue import InMemoryQueue, Item, Lease, Outcome, Priority, Queue

READY, LEASED, DONE, DEAD = ItemState.READY, ItemState.LEASED, ItemState.DONE, ItemState.DEAD
BACKEND: Backend | None = None  # the backend the current test runs on


@pytest.fixture(autouse=True, params=BACKENDS)
def each_backend(request, tmp_path):
    global BACKEND
    BACKEND = Backend(request.param, tmp_path)
    yield BACKEND
    BACKEND.close()
    BACKEND = None


def make(lease_seconds: float = 30, max_attempts: int = 5) -> tuple[Queue, FakeClock]:
    clock = FakeClock()
    if BACKEND.name == "memory":
        return InMemoryQueue(lease_seconds=lease_seconds, max_attempts=max_attempts, clock=clock), clock
    return Queue(lease_seconds=lease_seconds, max_attempts=max_attempts, clock=clock, store=BACKEND.open()), clock


def state_of(q: InMemoryQueue) -> tuple:
    """Everything a caller can observe, to prove a refused call changed nothing."""
    return q.counts(), q.items(), q.dlq_items(), len(q.log), q.depth, repr(q)


def kinds(q: InMemoryQueue) -> list[str]:
    return [e.kind.value for e in q.log]


def fail(lease: Lease) -> None:
    raise ValueError(f"bad schema in {lease.item_id}")


# --------------------------------------------------------------------------- enqueue


def test_enqueue_returns_counter_ids_and_a_ready_item_with_every_field():
    q, clock = make()
    clock.set(7)
    first = q.enqueue(
        case_id="O-1001",
        tenant_id="store_northline",
        kind="contact_send",
        payload={"idem_key": "O-1001:email:3"},
        priority=Priority.APPROVAL,
    )
    second = q.enqueue(case_id="A-1002")
    assert (first, second) == ("item-0001", "item-0002")
    assert q.item(first) == Item(
        id="item-0001",
        case_id="O-1001",
        tenant_id="store_northline",
        kind="contact_send",
        payload={"idem_key": "O-1001:email:3"},
        priority=Priority.APPROVAL,
        state=READY,
        attempts=0,
        token=0,
        worker_id=None,
        lease_expires_at=None,
        enqueued_at=7.0,
        last_error=None,
        dead_at=None,
        replays=0,
    )
    defaults = q.item(second)
    assert (defaults.tenant_id, defaults.kind, defaults.payload, defaults.priority) == (
        "default",
        "task",
        {},
        Priority.NORMAL,
    )


def test_enqueue_keeps_known_priorities_as_names_and_other_ints_as_given():
    q, _ = make()
    named = q.item(q.enqueue(case_id="A", priority=2))
    custom = q.item(q.enqueue(case_id="B", priority=7))
    assert named.priority is Priority.BULK
    assert custom.priority == 7 and not isinstance(custom.priority, Priority)


def test_enqueue_logs_the_item_case_and_what_it_asks_for():
    q, clock = make()
    clock.set(3)
    q.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send", priority=Priority.BULK)
    event = q.log.last
    assert (event.kind, event.time, event.item_id, event.case_id) == (EventKind.ENQUEUED, 3.0, "item-0001", "O-1001")
    assert (event.worker_id, event.token, event.attempt) == (None, None, None)
    assert dict(event.info) == {"tenant_id": "store_northline", "kind": "contact_send", "priority": 2}


# --------------------------------------------------------------------------- acquire


def test_acquire_grants_a_lease_and_the_item_shows_who_holds_it():
    q, clock = make(lease_seconds=30)
    item_id = q.enqueue(
        case_id="O-1001", tenant_id="store_northline", kind="contact_send", payload={"idem_key": "O-1001:email:3"}
    )
    clock.set(5)
    lease = q.acquire("W1")
    assert lease == Lease(
        item_id=item_id,
        case_id="O-1001",
        tenant_id="store_northline",
        kind="contact_send",
        worker_id="W1",
        token=1,
        attempt=1,
        leased_at=5.0,
        expires_at=35.0,
        payload={"idem_key": "O-1001:email:3"},
        queue=q.id,
    )
    item = q.item(item_id)
    assert (item.state, item.worker_id, item.lease_expires_at, item.attempts, item.token) == (LEASED, "W1", 35.0, 1, 1)
    assert q.counts() == {READY: 0, LEASED: 1, DONE: 0, DEAD: 0}
    assert q.depth == 0 and [i.id for i in q.leases()] == [item_id]


def test_acquire_logs_worker_token_attempt_and_deadline():
    q, clock = make(lease_seconds=30)
    q.enqueue(case_id="O-1001")
    clock.set(5)
    q.acquire("W1")
    event = q.log.last
    assert (event.kind, event.time, event.item_id, event.case_id) == (EventKind.LEASED, 5.0, "item-0001", "O-1001")
    assert (event.worker_id, event.token, event.attempt, dict(event.info)) == ("W1", 1, 1, {"expires_at": 35.0})


def test_acquire_on_an_empty_queue_returns_none_and_logs_nothing():
    q, _ = make()
    assert q.acquire("W1") is None
    assert len(q.log) == 0


def test_lease_is_a_frozen_record():
    q, _ = make()
    q.enqueue(case_id="O-1001")
    lease = q.acquire("W1")
    with pytest.raises(AttributeError):
        lease.token = 99  # type: ignore[misc]
    assert lease.token == 1


def test_acquire_lease_seconds_overrides_the_queue_default_for_that_claim_and_its_heartbeats():
    q, clock = make(lease_seconds=30)
    q.enqueue(case_id="O-1001")
    lease = q.acquire("W1", lease_seconds=120)
    assert lease.expires_at == 120.0
    clock.set(100)
    assert q.heartbeat(lease)
    assert q.item(lease.item_id).lease_expires_at == 220.0  # 100 + the claim's 120, not the default 30


def test_one_live_lease_per_case_while_other_cases_keep_flowing():
    q, _ = make()
    o1 = q.enqueue(case_id="O-1001")
    o2 = q.enqueue(case_id="O-1001")
    a1 = q.enqueue(case_id="A-1002")
    first = q.acquire("W1")
    second = q.acquire("W2")
    assert (first.item_id, second.item_id) == (o1, a1)  # O-1001's second item waits; A-1002 is not blocked
    assert q.acquire("W3") is None  # o2 is ready, but its case is held
    assert q.depth == 1 and q.item(o2).state is READY
    q.ack(first)
    assert q.acquire("W3").item_id == o2


def test_items_of_one_case_are_served_first_in_first_out():
    q, _ = make()
    ids = [q.enqueue(case_id="O-1001", payload={"n": n}) for n in range(4)]
    served = []
    while (lease := q.acquire("W1")) is not None:
        served.append(lease.item_id)
        q.ack(lease)
    assert served == ids


def test_a_nacked_item_goes_back_to_the_front_of_its_case():
    q, _ = make()
    first = q.enqueue(case_id="O-1001")
    q.enqueue(case_id="O-1001")
    q.nack(q.acquire("W1"), "boom")
    again = q.acquire("W2")
    assert (again.item_id, again.attempt) == (first, 2)


def test_an_expired_item_goes_back_to_the_front_of_its_case():
    q, _ = make(lease_seconds=10)
    first = q.enqueue(case_id="O-1001")
    q.enqueue(case_id="O-1001")
    q.acquire("W1")
    again = q.acquire("W2", now=10)
    assert (again.item_id, again.attempt) == (first, 2)


def test_priority_approval_before_normal_before_bulk_across_cases():
    q, _ = make()
    bulk = q.enqueue(case_id="B-1", priority=Priority.BULK)
    normal = q.enqueue(case_id="N-1", priority=Priority.NORMAL)
    approval = q.enqueue(case_id="A-1", priority=Priority.APPROVAL)
    order = [q.acquire("W1").item_id for _ in range(3)]
    assert order == [approval, normal, bulk]


def test_priority_ties_are_served_in_enqueue_order():
    q, _ = make()
    ids = [q.enqueue(case_id=f"C-{n}", priority=Priority.BULK) for n in range(3)]
    assert [q.acquire("W1").item_id for _ in range(3)] == ids


def test_priority_does_not_reorder_items_within_one_case_fifo_wins():
    q, _ = make()
    bulk_head = q.enqueue(case_id="O-1001", priority=Priority.BULK)
    q.enqueue(case_id="O-1001", priority=Priority.APPROVAL)
    other = q.enqueue(case_id="X-1", priority=Priority.NORMAL)
    # The case is ranked by its head item, so the BULK head (and the approval behind it) wait.
    assert [q.acquire("W1").item_id for _ in range(2)] == [other, bulk_head]


def test_max_priority_sheds_bulk_work_but_keeps_approvals_flowing():
    q, _ = make()
    bulk = q.enqueue(case_id="B-1", priority=Priority.BULK)
    before = state_of(q)
    assert q.acquire("W1", max_priority=Priority.NORMAL) is None
    assert state_of(q) == before  # shed, not touched
    approval = q.enqueue(case_id="A-1", priority=Priority.APPROVAL)
    normal = q.enqueue(case_id="N-1", priority=Priority.NORMAL)
    assert q.acquire("W1", max_priority=Priority.NORMAL).item_id == approval
    assert q.acquire("W1", max_priority=Priority.NORMAL).item_id == normal
    assert q.acquire("W1", max_priority=Priority.NORMAL) is None
    assert q.acquire("W1").item_id == bulk


# --------------------------------------------------------------------------- attempts


def test_attempts_count_on_acquire_so_a_crash_consumes_an_attempt():
    q, _ = make(lease_seconds=10)
    item_id = q.enqueue(case_id="O-1001")
    first = q.acquire("W1", now=0)
    assert (first.attempt, q.item(item_id).attempts) == (1, 1)
    # W1 crashes: no ack, no nack. The expiry alone cost it an attempt.
    second = q.acquire("W7", now=10)
    assert (second.attempt, q.item(item_id).attempts) == (2, 2)


def test_the_last_attempt_expiring_dead_letters_the_item_with_its_history():
    q, _ = make(lease_seconds=10, max_attempts=2)
    item_id = q.enqueue(case_id="O-1001", now=1)
    q.acquire("W1", now=2)
    q.acquire("W2", now=12)
    assert q._expire_leases(now=22) == [item_id]
    (dead,) = q.dlq_items()
    assert (dead.id, dead.state, dead.attempts, dead.enqueued_at, dead.dead_at) == (item_id, DEAD, 2, 1.0, 22.0)
    assert dead.last_error == "lease expired at t=22 (worker W2, attempt 2)"
    assert kinds(q)[-2:] == ["expired", "dead_lettered"]


def test_nack_on_the_last_attempt_dead_letters_with_the_last_error():
    q, _ = make(max_attempts=2)
    item_id = q.enqueue(case_id="O-1001", now=4)
    assert q.nack(q.acquire("W1"), "first failure") is READY
    assert q.nack(q.acquire("W1", now=6), ValueError("bad schema")) is DEAD
    (dead,) = q.dlq_items()
    assert (dead.id, dead.attempts, dead.enqueued_at, dead.dead_at) == (item_id, 2, 4.0, 6.0)
    assert dead.last_error == "ValueError: bad schema"
    event = q.log.last
    assert (event.kind, event.time, event.item_id, event.worker_id, event.token, event.attempt) == (
        EventKind.DEAD_LETTERED,
        6.0,
        item_id,
        "W1",
        2,
        2,
    )
    assert dict(event.info) == {"error": "ValueError: bad schema", "enqueued_at": 4.0}
    assert q.acquire("W1") is None  # dead items are never delivered again by themselves


def test_a_dead_item_does_not_block_the_rest_of_its_case():
    q, _ = make(max_attempts=1)
    poison = q.enqueue(case_id="O-1001")
    healthy = q.enqueue(case_id="O-1001")
    q.nack(q.acquire("W1"), "bad schema")
    assert q.item(poison).state is DEAD
    assert q.acquire("W1").item_id == healthy


# --------------------------------------------------------------------------- ack / nack


def test_ack_marks_done_logs_it_and_frees_the_case():
    q, clock = make()
    item_id = q.enqueue(case_id="O-1001")
    q.enqueue(case_id="O-1001")
    lease = q.acquire("W1")
    clock.set(4)
    q.ack(lease)
    assert q.item(item_id).state is DONE and q.item(item_id).worker_id is None
    event = q.log.last
    assert (event.kind, event.time, event.item_id, event.case_id, event.worker_id, event.token, event.attempt) == (
        EventKind.ACKED,
        4.0,
        item_id,
        "O-1001",
        "W1",
        1,
        1,
    )
    assert q.acquire("W2").case_id == "O-1001"


def test_acking_a_lease_twice_raises_lease_settled_and_changes_nothing():
    q, _ = make()
    q.enqueue(case_id="O-1001")
    lease = q.acquire("W1")
    q.ack(lease)
    before = state_of(q)
    with pytest.raises(LeaseSettledError, match="already acked") as err:
        q.ack(lease)
    assert (err.value.item_id, err.value.token, err.value.how) == ("item-0001", 1, "acked")
    assert state_of(q) == before


def test_nack_after_nack_and_ack_after_nack_are_settled_errors():
    q, _ = make()
    q.enqueue(case_id="O-1001")
    lease = q.acquire("W1")
    q.nack(lease, "boom")
    for settle in (q.ack, q.nack):
        with pytest.raises(LeaseSettledError, match="already nacked"):
            settle(lease)


def test_nack_returns_the_item_ready_records_the_error_and_logs_it():
    q, clock = make()
    item_id = q.enqueue(case_id="O-1001")
    lease = q.acquire("W1")
    clock.set(2)
    assert q.nack(lease, RuntimeError("gateway 503")) is READY
    item = q.item(item_id)
    assert (item.state, item.attempts, item.last_error) == (READY, 1, "RuntimeError: gateway 503")
    event = q.log.last
    assert (event.kind, event.time, event.worker_id, event.token, event.attempt) == (EventKind.NACKED, 2.0, "W1", 1, 1)
    assert dict(event.info) == {"error": "RuntimeError: gateway 503"}


@pytest.mark.parametrize("error, recorded", [(None, None), ("plain words", "plain words"), (404, "404")])
def test_nack_error_is_recorded_as_text(error, recorded):
    q, _ = make()
    item_id = q.enqueue(case_id="O-1001")
    q.nack(q.acquire("W1"), error)
    assert q.item(item_id).last_error == recorded


def test_ack_after_the_lease_expired_but_before_anyone_else_claimed_it_is_lease_expired():
    q, _ = make(lease_seconds=10)
    q.enqueue(case_id="O-1001")
    lease = q.acquire("W1", now=0)
    with pytest.raises(LeaseExpiredError, match="expired at t=10") as err:
        q.ack(lease, now=10)  # the deadline itself is already too late
    assert (err.value.token, err.value.expires_at) == (1, 10.0)
    assert q.item(lease.item_id).state is READY


# --------------------------------------------------------------------------- heartbeat


def test_heartbeat_extends_the_deadline_from_now_and_logs_it():
    q, _ = make(lease_seconds=30)
    q.enqueue(case_id="O-1001")
    lease = q.acquire("W1", now=0)
    assert q.heartbeat(lease, now=20) is True
    assert q.item(lease.item_id).lease_expires_at == 50.0  # 20 + 30, not 30 + 30
    assert lease.expires_at == 30.0  # the Lease is the grant, not the live deadline
    event = q.log.last
    assert (event.kind, event.time, event.item_id, event.worker_id, event.token, event.attempt) == (
        EventKind.HEARTBEAT,
        20.0,
        lease.item_id,
        "W1",
        1,
        1,
    )
    assert dict(event.info) == {"expires_at": 50.0}
    assert q._expire_leases(now=49) == []  # the old deadline (30) passed without effect
    assert q._expire_leases(now=50) == [lease.item_id]


def test_heartbeat_returns_false_once_the_lease_expired():
    q, _ = make(lease_seconds=30)
    q.enqueue(case_id="O-1001")
    lease = q.acquire("W1", now=0)
    assert q.heartbeat(lease, now=30) is False  # at the deadline the lease is already gone
    assert q.item(lease.item_id).state is READY
    assert q.heartbeat(lease, now=31) is False  # and it stays gone


@pytest.mark.parametrize("settle", ["ack", "nack"])
def test_heartbeat_returns_false_once_the_lease_is_settled(settle):
    q, _ = make()
    q.enqueue(case_id="O-1001")
    lease = q.acquire("W1")
    getattr(q, settle)(lease)
    log_length = len(q.log)
    assert q.heartbeat(lease) is False
    assert len(q.log) == log_length


def test_heartbeat_with_a_stale_token_returns_false_and_records_the_rejection():
    q, _ = make(lease_seconds=10)
    q.enqueue(case_id="O-1001")
    old = q.acquire("W1", now=0)
    new = q.acquire("W7", now=10)
    assert q.heartbeat(old, now=11) is False
    event = q.log.last
    assert (event.kind, event.worker_id, event.token, dict(event.info)) == (
        EventKind.STALE_REJECTED,
        "W1",
        1,
        {"op": "heartbeat", "current": 2},
    )
    assert q.item(new.item_id).lease_expires_at == 20.0  # the new holder's lease is untouched


# --------------------------------------------------------------------------- expiry


def test_expire_leases_returns_expired_ids_in_deadline_order_and_logs_each():
    q, _ = make(lease_seconds=10)
    a = q.enqueue(case_id="A-1")
    b = q.enqueue(case_id="B-1")
    q.acquire("W1", now=0, lease_seconds=20)  # a, due at 20
    q.acquire("W2", now=5)  # b, due at 15
    assert q.expire_leases(now=14) == []
    assert q._expire_leases(now=25) == [b, a]  # the seed's name for the same call
    expired = q.log.where(EventKind.EXPIRED)
    assert [(e.item_id, e.time, e.worker_id, e.token, e.attempt, e.info["expires_at"]) for e in expired] == [
        (b, 25.0, "W2", 1, 1, 15.0),
        (a, 25.0, "W1", 1, 1, 20.0),
    ]
    assert q.item(a).last_error == "lease expired at t=20 (worker W1, attempt 1)"
    assert q.counts()[READY] == 2


def test_expiry_is_also_applied_lazily_by_acquire_with_the_clock():
    q, clock = make(lease_seconds=30)
    q.enqueue(case_id="O-1001")
    q.acquire("W1")
    clock.advance(29)
    assert q.acquire("W7") is None
    clock.advance(1)
    assert q.acquire("W7").token == 2


def test_expire_leases_with_a_frozen_clock_then_calls_without_now_use_that_time():
    q, clock = make(lease_seconds=30)
    q.enqueue(case_id="O-1001")
    lease = q.acquire("W1")
    q._expire_leases(now=lease.expires_at + 1)
    assert clock.now() == 0
    second = q.acquire("W7")  # the clock still says 0, but the queue has seen t=31
    assert (second.leased_at, second.expires_at) == (31.0, 61.0)


# --------------------------------------------------------------------------- process_one


def test_outcome_words_are_the_documented_ones():
    assert [o.value for o in Outcome] == ["ok", "retried", "dead", "empty", "lost"]


def test_process_one_ok_runs_the_handler_with_the_lease_and_acks():
    q, _ = make()
    item_id = q.enqueue(case_id="O-1001", payload={"idem_key": "O-1001:email:3"})
    seen = []
    assert q.process_one("W1", lambda lease: seen.append((lease.item_id, lease.payload["idem_key"]))) == "ok"
    assert seen == [(item_id, "O-1001:email:3")]
    assert q.item(item_id).state is DONE


def test_process_one_retried_then_dead_when_the_handler_keeps_raising():
    q, _ = make(max_attempts=2)
    item_id = q.enqueue(case_id="O-1001")
    assert q.process_one("W1", fail) is Outcome.RETRIED
    assert q.item(item_id).last_error == f"ValueError: bad schema in {item_id}"
    assert q.process_one("W1", fail) is Outcome.DEAD
    assert [i.id for i in q.dlq_items()] == [item_id]


def test_process_one_empty_when_nothing_can_be_acquired():
    q, _ = make()
    assert q.process_one("W1", fail) is Outcome.EMPTY
    q.enqueue(case_id="O-1001")
    q.acquire("W9")
    assert q.process_one("W1", fail) is Outcome.EMPTY  # the only case is leased


def test_process_one_lost_when_the_lease_expired_while_the_handler_ran():
    q, clock = make(lease_seconds=30)
    item_id = q.enqueue(case_id="O-1001")
    assert q.process_one("W1", lambda lease: clock.advance(31)) is Outcome.LOST
    assert q.item(item_id).state is READY  # redelivery will handle it


def test_process_one_lost_when_the_handler_fails_after_losing_the_lease():
    q, clock = make(lease_seconds=30)
    item_id = q.enqueue(case_id="O-1001")

    def slow_then_fail(lease):
        clock.advance(31)
        raise RuntimeError("too late anyway")

    assert q.process_one("W1", slow_then_fail) is Outcome.LOST
    assert q.item(item_id).last_error.startswith("lease expired")  # the late failure is not recorded


def test_process_one_lost_when_another_worker_claimed_the_item_meanwhile():
    q, clock = make(lease_seconds=30)
    q.enqueue(case_id="O-1001")
    stolen = []

    def paused(lease):
        clock.advance(31)
        stolen.append(q.acquire("W7"))

    assert q.process_one("W1", paused) is Outcome.LOST
    assert q.log.where(EventKind.STALE_REJECTED)[0].info["op"] == "ack"
    assert q.item(stolen[0].item_id).worker_id == "W7"


def test_process_one_with_now_settles_after_heartbeats_the_handler_sent_later():
    q, _ = make(lease_seconds=30)
    item_id = q.enqueue(case_id="O-1001")

    def long_call(lease):
        assert q.heartbeat(lease, now=25)
        assert q.heartbeat(lease, now=50)

    assert q.process_one("W1", long_call, now=0) is Outcome.OK
    assert q.log.last.time == 50.0 and q.item(item_id).state is DONE


# --------------------------------------------------------------------------- the DLQ


def test_dlq_items_lists_dead_items_oldest_death_first():
    q, _ = make(max_attempts=1)
    a = q.enqueue(case_id="A-1")
    b = q.enqueue(case_id="B-1")
    q.enqueue(case_id="C-1")
    lease_a, lease_b = q.acquire("W1", now=1), q.acquire("W2", now=1)
    q.nack(lease_b, "b broke", now=2)
    q.nack(lease_a, "a broke", now=3)
    assert [(i.id, i.dead_at, i.last_error) for i in q.dlq_items()] == [(b, 2.0, "b broke"), (a, 3.0, "a broke")]
    assert q.counts()[DEAD] == 2 and len(q.dlq_items()) == 2


def test_replay_resets_attempts_records_the_replay_and_serves_again_with_a_newer_token():
    q, clock = make(max_attempts=2)
    item_id = q.enqueue(case_id="O-1001")
    q.nack(q.acquire("W1"), "bad schema")
    q.nack(q.acquire("W1"), "bad schema")
    clock.set(100)
    q.replay_dlq(item_id)
    item = q.item(item_id)
    assert (item.state, item.attempts, item.replays, item.token) == (READY, 0, 1, 2)
    assert q.dlq_items() == []
    event = q.log.last
    assert (event.kind, event.time, event.item_id, event.case_id) == (EventKind.REPLAYED, 100.0, item_id, "O-1001")
    assert dict(event.info) == {"replays": 1, "last_error": "bad schema"}
    again = q.acquire("W2")
    assert (again.attempt, again.token) == (1, 3)  # attempts restart; tokens never do
    q.ack(again)
    assert q.item(item_id).state is DONE


def test_a_replayed_item_rejoins_its_case_at_the_back():
    q, _ = make(max_attempts=1)
    poison = q.enqueue(case_id="O-1001")
    q.nack(q.acquire("W1"), "bad schema")
    later = q.enqueue(case_id="O-1001")
    q.replay_dlq(poison)
    assert [q.acquire("W1").item_id] == [later]


def test_replaying_an_item_that_is_not_dead_raises_not_in_dlq_and_changes_nothing():
    q, _ = make()
    ready = q.enqueue(case_id="O-1001")
    before = state_of(q)
    with pytest.raises(NotInDLQError, match="item-0001 is ready") as err:
        q.replay_dlq(ready)
    assert (err.value.item_id, err.value.state) == (ready, "ready")
    assert state_of(q) == before


@pytest.mark.parametrize("item_id", ["item-9999", "", 42, None])
def test_replaying_or_reading_an_unknown_item_raises_unknown_item(item_id):
    q, _ = make()
    q.enqueue(case_id="O-1001")
    before = state_of(q)
    with pytest.raises(UnknownItemError, match="No item"):
        q.replay_dlq(item_id)
    with pytest.raises(UnknownItemError):
        q.item(item_id)
    assert state_of(q) == before


# --------------------------------------------------------------------------- reading


def test_items_counts_depth_len_and_repr_agree():
    q, _ = make(max_attempts=1)
    ids = [q.enqueue(case_id=f"C-{n}") for n in range(4)]
    q.ack(q.acquire("W1"))  # C-0 done
    q.nack(q.acquire("W1"), "boom")  # C-1 dead
    q.acquire("W1")  # C-2 leased; C-3 ready
    assert [i.id for i in q.items()] == ids
    assert [(i.id, i.state) for i in q.items()] == list(zip(ids, [DONE, DEAD, LEASED, READY]))
    assert [i.id for i in q.items(LEASED)] == [ids[2]] == [i.id for i in q.leases()]
    assert [i.id for i in q.items("dead")] == [ids[1]]
    assert q.counts() == {READY: 1, LEASED: 1, DONE: 1, DEAD: 1}
    assert sum(q.counts().values()) == len(q) == 4
    assert q.depth == 1
    where = "InMemoryQueue(" if BACKEND.name == "memory" else f"Queue({q.store.url}, "
    assert repr(q) == where + "lease_seconds=30, max_attempts=1, ready=1, leased=1, done=1, dead=1)"


def test_counts_is_a_copy():
    q, _ = make()
    q.counts()[READY] = 99
    assert q.counts()[READY] == 0


# --------------------------------------------------------------------------- transitions


def test_every_event_of_a_run_walks_an_edge_of_the_transition_table():
    q, _ = make(lease_seconds=10, max_attempts=2)
    a, b, c, d, e = (q.enqueue(case_id=case) for case in "ABCDE")
    la, lb, lc, ld, le = (q.acquire("W1", now=0) for _ in range(5))
    q.heartbeat(la, now=1)
    q.ack(la, now=2)  # a: done at once
    q.nack(lb, "flaky", now=2)  # b: retried ...
    q.nack(ld, "poison", now=2)  # d: poison ...
    q._expire_leases(now=10)  # c and e: workers died
    lb2, lc2, ld2, le2 = (q.acquire("W2", now=10) for _ in range(4))
    q.ack(lb2, now=11)  # ... b: done on its second try
    with pytest.raises(StaleTokenError):
        q.ack(lc, now=11)  # c's first worker comes back stale
    q.ack(lc2, now=11)
    q.nack(ld2, "poison", now=11)  # ... d: dead on its last attempt
    q._expire_leases(now=20)  # e: expired on its last attempt, dead
    q.replay_dlq(d, now=21)
    q.ack(q.acquire("W3", now=21), now=22)  # d: done after the fix
    # Walk the log. A nack or expiry that ended the last attempt is followed at once by its
    # dead-lettering: together they are one move, leased -> dead.
    after = {
        EventKind.ENQUEUED: READY,
        EventKind.LEASED: LEASED,
        EventKind.ACKED: DONE,
        EventKind.NACKED: READY,
        EventKind.EXPIRED: READY,
        EventKind.REPLAYED: READY,
    }
    events = q.log.events
    state: dict[str, ItemState] = {}
    walked = []
    for i, event in enumerate(events):
        if event.kind in (EventKind.HEARTBEAT, EventKind.STALE_REJECTED):
            assert state[event.item_id] is LEASED  # neither moves the item
            continue
        if event.kind is EventKind.DEAD_LETTERED:
            assert events[i - 1].kind in (EventKind.NACKED, EventKind.EXPIRED)
            assert events[i - 1].item_id == event.item_id
            continue
        target = after[event.kind]
        following = events[i + 1] if i + 1 < len(events) else None
        if following is not None and following.kind is EventKind.DEAD_LETTERED:
            target = DEAD
        if event.kind is EventKind.ENQUEUED:
            assert event.item_id not in state
        else:
            edge = (state[event.item_id], target)
            assert edge in TRANSITIONS, f"{event} walks {edge}"
            walked.append((event.item_id, TRANSITIONS[edge]))
        state[event.item_id] = target
    assert {i.id: i.state for i in q.items()} == state == {a: DONE, b: DONE, c: DONE, d: DONE, e: DEAD}
    assert {label for _, label in walked} == set(TRANSITIONS.values())  # every edge of the table was used
    assert [label for item, label in walked if item == d] == [
        "acquire",
        "expiry / nack",
        "acquire",
        "max attempts",
        "replay",
        "acquire",
        "ack",
    ]


def test_forcing_an_edge_that_is_not_in_the_table_raises_transition_error():
    q, _ = make()
    item_id = q.enqueue(case_id="O-1001")
    record = q.store.get_item(item_id)
    with pytest.raises(TransitionError, match="cannot move from ready to done"):
        q._move(record, DONE)
    assert q.item(item_id).state is READY and q.counts()[READY] == 1


def test_the_log_tells_one_items_whole_story():
    q, clock = make(lease_seconds=10, max_attempts=2)
    q.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")
    first = q.acquire("W1")  # t=0, token 1, due at 10
    clock.set(4)
    q.heartbeat(first)  # due at 14
    clock.set(15)
    q._expire_leases()  # attempt 1 expired
    last = q.acquire("W7")  # t=15, token 2, the last attempt
    clock.set(16)
    q.nack(last, "bad schema")  # -> DLQ
    clock.set(20)
    q.replay_dlq("item-0001")
    q.ack(q.acquire("W8"))  # t=20, token 3
    assert [str(e) for e in q.log] == [
        "#0 t=0 enqueued item=item-0001 case=O-1001 kind=contact_send priority=1 tenant_id=store_northline",
        "#1 t=0 leased item=item-0001 case=O-1001 worker=W1 token=1 attempt=1 expires_at=10",
        "#2 t=4 heartbeat item=item-0001 case=O-1001 worker=W1 token=1 attempt=1 expires_at=14",
        "#3 t=15 expired item=item-0001 case=O-1001 worker=W1 token=1 attempt=1 expires_at=14",
        "#4 t=15 leased item=item-0001 case=O-1001 worker=W7 token=2 attempt=2 expires_at=25",
        "#5 t=16 nacked item=item-0001 case=O-1001 worker=W7 token=2 attempt=2 error=bad schema",
        "#6 t=16 dead_lettered item=item-0001 case=O-1001 worker=W7 token=2 attempt=2 enqueued_at=0 error=bad schema",
        "#7 t=20 replayed item=item-0001 case=O-1001 last_error=bad schema replays=1",
        "#8 t=20 leased item=item-0001 case=O-1001 worker=W8 token=3 attempt=1 expires_at=30",
        "#9 t=20 acked item=item-0001 case=O-1001 worker=W8 token=3 attempt=1",
    ]


# --------------------------------------------------------------------------- fencing


def test_tokens_strictly_increase_with_every_claim_of_an_item():
    q, _ = make(lease_seconds=10, max_attempts=3)
    item_id = q.enqueue(case_id="O-1001")
    tokens = [q.acquire("W1", now=0).token]
    tokens.append(q.acquire("W2", now=10).token)  # after an expiry
    q.nack(q.acquire("W3", now=20), "boom")  # a third claim, then the DLQ
    tokens.append(q.item(item_id).token)
    q.replay_dlq(item_id)
    tokens.append(q.acquire("W4", now=30).token)  # after a replay
    assert tokens == [1, 2, 3, 4]


def test_a_stale_ack_is_rejected_naming_both_tokens_and_the_holder_keeps_the_item():
    q, _ = make(lease_seconds=10)
    q.enqueue(case_id="O-1001")
    old = q.acquire("W1", now=0)
    new = q.acquire("W7", now=10)
    with pytest.raises(StaleTokenError, match="token 1, but the store's current token is 2") as err:
        q.ack(old, now=11)
    assert (err.value.token, err.value.current, err.value.what) == (1, 2, "item item-0001")
    item = q.item(new.item_id)
    assert (item.state, item.worker_id, item.token) == (LEASED, "W7", 2)
    event = q.log.last
    assert (event.kind, event.time, event.worker_id, event.token, dict(event.info)) == (
        EventKind.STALE_REJECTED,
        11.0,
        "W1",
        1,
        {"op": "ack", "current": 2},
    )
    q.ack(new, now=12)
    assert q.item(new.item_id).state is DONE


def test_a_stale_nack_is_rejected_too_and_does_not_record_its_error():
    q, _ = make(lease_seconds=10)
    q.enqueue(case_id="O-1001")
    old = q.acquire("W1", now=0)
    q.acquire("W7", now=10)
    with pytest.raises(StaleTokenError) as err:
        q.nack(old, "late failure", now=11)
    assert (err.value.token, err.value.current) == (1, 2)
    assert q.item(old.item_id).last_error.startswith("lease expired")
    assert q.log.last.info["op"] == "nack"


def test_a_stale_token_stays_stale_after_the_item_is_done():
    q, _ = make(lease_seconds=10)
    q.enqueue(case_id="O-1001")
    old = q.acquire("W1", now=0)
    q.ack(q.acquire("W7", now=10), now=11)
    with pytest.raises(StaleTokenError):
        q.ack(old, now=12)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({}, "case_id"),
        ({"case_id": None}, "case_id"),
        ({"case_id": ""}, "case_id"),
        ({"case_id": "   "}, "case_id"),
        ({"case_id": 1001}, "case_id"),
        ({"case_id": "O-1", "tenant_id": ""}, "tenant_id"),
        ({"case_id": "O-1", "tenant_id": None}, "tenant_id"),
        ({"case_id": "O-1", "kind": 3}, "kind"),
        ({"case_id": "O-1", "priority": "high"}, "priority"),
        ({"case_id": "O-1", "priority": True}, "priority"),
        ({"case_id": "O-1", "priority": 1.5}, "priority"),
        ({"case_id": "O-1", "payload": {"tags": {"vip"}}}, "payload['tags']"),
        ({"case_id": "O-1", "payload": {"who": object()}}, "payload['who']"),
        ({"case_id": "O-1", "payload": {"score": math.nan}}, "payload['score']"),
        ({"case_id": "O-1", "payload": {1: "x"}}, "payload key 1"),
        ({"case_id": "O-1", "payload": {"deep": [{"ok": 1}, {2: "x"}]}}, "payload['deep'][1] key 2"),
        ({"case_id": "O-1", "payload": {"a", "b"}}, "payload"),
        ({"case_id": "O-1", "payload": ["not", "a", "dict"]}, "payload"),
        ({"case_id": "O-1", "payload": "text"}, "payload"),
        ({"case_id": "O-1", "now": "soon"}, "now"),
        ({"case_id": "O-1", "now": math.nan}, "now"),
        ({"case_id": "O-1", "now": 5}, "now"),  # earlier than t=10 already seen
    ],
)
def test_bad_enqueue_arguments_name_the_field_and_change_nothing(kwargs, field):
    q, _ = make()
    q.enqueue(case_id="O-0", now=10)
    before = state_of(q)
    with pytest.raises(BadArgumentError) as err:
        q.enqueue(**kwargs)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field} ") and "Fix:" in str(err.value)
    assert state_of(q) == before
    assert q.enqueue(case_id="O-2", now=10) == "item-0002"  # time did not move, ids did not skip


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"lease_seconds": 0}, "lease_seconds"),
        ({"lease_seconds": -5}, "lease_seconds"),
        ({"lease_seconds": math.inf}, "lease_seconds"),
        ({"lease_seconds": math.nan}, "lease_seconds"),
        ({"lease_seconds": "30"}, "lease_seconds"),
        ({"lease_seconds": True}, "lease_seconds"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": -1}, "max_attempts"),
        ({"max_attempts": 2.5}, "max_attempts"),
        ({"max_attempts": "5"}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"clock": object()}, "clock"),
    ],
)
def test_bad_queue_settings_name_the_field(kwargs, field):
    with pytest.raises(BadArgumentError) as err:
        InMemoryQueue(**kwargs)
    assert err.value.field == field


def with_overdue_lease() -> tuple[InMemoryQueue, Lease]:
    """A queue whose only lease is past due (deadline 10) but not yet swept, at t=0."""
    q, _ = make(lease_seconds=10)
    q.enqueue(case_id="O-1001")
    q.enqueue(case_id="A-1002")
    return q, q.acquire("W1")


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"worker_id": None}, "worker_id"),
        ({"worker_id": ""}, "worker_id"),
        ({"worker_id": 7}, "worker_id"),
        ({"worker_id": "W2", "lease_seconds": 0}, "lease_seconds"),
        ({"worker_id": "W2", "lease_seconds": -1}, "lease_seconds"),
        ({"worker_id": "W2", "max_priority": "bulk"}, "max_priority"),
        ({"worker_id": "W2", "max_priority": False}, "max_priority"),
        ({"worker_id": "W2", "now": "later"}, "now"),
    ],
)
def test_bad_acquire_arguments_name_the_field_and_change_nothing(kwargs, field):
    q, _ = with_overdue_lease()
    before = state_of(q)
    with pytest.raises(BadArgumentError) as err:
        q.acquire(**{"now": 50, **kwargs})
    assert err.value.field == field
    assert state_of(q) == before  # not even the overdue lease was swept


def test_now_going_backwards_is_refused_by_every_timed_call():
    q, _ = make(max_attempts=1)
    q.enqueue(case_id="O-1001")
    dead = q.enqueue(case_id="D-1")
    lease = q.acquire("W1", now=5)
    q.nack(q.acquire("W2", now=5), "poison")
    q._expire_leases(now=8)
    before = state_of(q)
    calls = [
        lambda: q.enqueue(case_id="X", now=7),
        lambda: q.acquire("W3", now=7),
        lambda: q.heartbeat(lease, now=7),
        lambda: q.ack(lease, now=7),
        lambda: q.nack(lease, "x", now=7),
        lambda: q.replay_dlq(dead, now=7),
        lambda: q._expire_leases(now=7),
    ]
    for call in calls:
        with pytest.raises(BadArgumentError, match="earlier than t=8 already seen") as err:
            call()
        assert err.value.field == "now"
    assert state_of(q) == before


@pytest.mark.parametrize("op", ["ack", "nack", "heartbeat"])
def test_something_that_is_not_a_lease_is_refused_before_anything_happens(op):
    q, lease = with_overdue_lease()
    before = state_of(q)
    with pytest.raises(BadArgumentError, match="pass the Lease object") as err:
        getattr(q, op)({"item_id": lease.item_id, "token": lease.token}, now=50)
    assert err.value.field == "lease"
    assert state_of(q) == before
    q.ack(lease, now=9)  # time did not move to 50: the real lease is still live at t=9


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"item_id": "item-0404"}, "no item item-0404 in this queue"),
        ({"token": 99}, "item item-0001 never granted token 99 for case O-1001"),
        ({"token": 0}, "never granted token 0"),
        ({"token": "1"}, "never granted token 1"),
        ({"case_id": "A-1002"}, "never granted token 1 for case A-1002"),
    ],
)
@pytest.mark.parametrize("op", ["ack", "nack", "heartbeat"])
def test_a_fabricated_lease_is_unknown_and_changes_nothing(op, change, reason):
    q, lease = with_overdue_lease()
    before = state_of(q)
    with pytest.raises(UnknownLeaseError, match=reason):
        getattr(q, op)(lease._replace(**change), now=50)
    assert state_of(q) == before
    q.ack(lease, now=9)


@pytest.mark.parametrize("state", ["waiting", 3, ItemState])
def test_items_with_an_unknown_state_names_the_field(state):
    q, _ = make()
    with pytest.raises(BadArgumentError, match="ready, leased, done, dead") as err:
        q.items(state)
    assert err.value.field == "state"


# --------------------------------------------------------------------------- payloads


def test_changing_the_callers_dict_after_enqueue_does_not_change_the_queue():
    q, _ = make()
    payload = {"idem_key": "O-1001:email:3", "lines": [{"sku": "A"}]}
    item_id = q.enqueue(case_id="O-1001", payload=payload)
    payload["idem_key"] = "hijacked"
    payload["lines"][0]["sku"] = "B"
    payload["lines"].append({"sku": "C"})
    expected = {"idem_key": "O-1001:email:3", "lines": [{"sku": "A"}]}
    assert q.item(item_id).payload == expected
    assert q.acquire("W1").payload == expected


def test_changing_a_leases_or_items_payload_does_not_change_the_queue():
    q, _ = make(lease_seconds=10)
    item_id = q.enqueue(case_id="O-1001", payload={"lines": [1, 2]})
    lease = q.acquire("W1", now=0)
    lease.payload["lines"].append(3)
    lease.payload["extra"] = True
    q.item(item_id).payload["lines"].clear()
    assert q.item(item_id).payload == {"lines": [1, 2]}
    assert q.acquire("W7", now=10).payload == {"lines": [1, 2]}  # the redelivery sees the original


def test_payload_tuples_are_stored_as_json_lists():
    q, _ = make()
    item_id = q.enqueue(case_id="O-1001", payload={"pair": (1, 2)})
    assert q.item(item_id).payload == {"pair": [1, 2]}


def test_a_replayed_item_is_no_longer_dead():
    q, _ = make()
    item_id = q.enqueue(case_id="O-1001")
    for _ in range(q.max_attempts):
        q.nack(q.acquire("W1"), error="bad schema")
    assert q.item(item_id).dead_at is not None
    q.replay_dlq(item_id)
    assert q.item(item_id).dead_at is None and q.item(item_id).replays == 1


# --------------------------------------------------------------------------- what only the worker knows


def test_a_worker_crash_or_pause_is_noted_for_the_timeline_and_changes_nothing():
    q, clock = make()
    q.enqueue(case_id="O-1001")
    lease = q.acquire("W1")
    before = q.counts(), q.items()
    clock.set(2)
    q.worker_paused(lease)
    q.worker_resumed(lease, now=16)
    q.worker_crashed("W1", lease, now=17)
    q.worker_crashed("W9", case_id="A-1002", now=18)
    noted = [(e.kind, e.time, e.item_id, e.case_id, e.worker_id, e.token) for e in q.log.events[-4:]]
    assert noted == [
        (EventKind.WORKER_PAUSED, 2.0, lease.item_id, "O-1001", "W1", None),
        (EventKind.WORKER_RESUMED, 16.0, lease.item_id, "O-1001", "W1", None),
        (EventKind.WORKER_CRASHED, 17.0, lease.item_id, "O-1001", "W1", None),
        (EventKind.WORKER_CRASHED, 18.0, None, "A-1002", "W9", None),
    ]
    assert (q.counts(), q.items()) == before


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda q: q.worker_paused("W1"), "lease"),
        (lambda q: q.worker_crashed(None), "worker_id"),
        (lambda q: q.worker_crashed("W1", case_id=""), "case_id"),
        (lambda q: q.worker_crashed("W1", now="soon"), "now"),
    ],
)
def test_a_bad_note_names_the_field_and_writes_nothing(call, field):
    q, _ = make()
    with pytest.raises(BadArgumentError) as err:
        call(q)
    assert err.value.field == field and len(q.log) == 0
