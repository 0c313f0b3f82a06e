"""The storage protocol's contract, the same on every backend (memory, SQLite, PostgreSQL):
what the lines of items answer, records and counters, the event log, transactions, and how
a database is opened or refused. The queue's own behaviour on every backend is in
test_queue_contract.py."""

from __future__ import annotations

import pytest
from store_backends import Backend

from shopops_lab.chaos import ChaosError
from shopops_lab.clock import FakeClock
from shopops_lab.errors import BadArgumentError, ShopOpsError, StaleTokenError, StoreFullError
from shopops_lab.events import EventKind, EventRow
from shopops_lab.jobs import JobStore
from shopops_lab.states import ItemState
from shopops_lab.store import ItemRow, Store, bind_transactions, transaction
from shopops_lab.worker.queue import Queue

READY, LEASED, DONE, DEAD = ItemState.READY, ItemState.LEASED, ItemState.DONE, ItemState.DEAD


def new_row(case_id: str, priority: int = 1, payload: dict | None = None) -> ItemRow:
    """A row as `Queue.enqueue` makes it."""
    row = ItemRow()
    row.case_id, row.tenant_id, row.kind = case_id, "store_northline", "contact_send"
    row.payload, row.flat = payload or {}, not payload
    row.priority, row.state, row.attempts, row.token, row.worker_id = priority, READY, 0, 0, None
    row.expires_at, row.lease_seconds, row.enqueued_at = None, 30.0, 0.0
    row.last_error, row.dead_at, row.replays, row.ended_by = None, None, 0, None
    return row


def add(store: Store, case_id: str, priority: int = 1, payload: dict | None = None) -> ItemRow:
    row = new_row(case_id, priority, payload)
    with store.atomic:
        store.add_item(row)
    return row


def move(store: Store, row: ItemRow, target: ItemState, *, t: float = 0.0, worker: str = "W1") -> None:
    """The smallest change the engine would make for each edge, written back."""
    with store.atomic:
        row = store.get_item(row.id)
        source = row.state
        row.state = target
        if target is LEASED:
            row.token += 1
            row.attempts += 1
            row.worker_id, row.expires_at = worker, t + row.lease_seconds
        store.write_item(row, source)


def served(store: Store, max_priority: int | None = None) -> str | None:
    with store.atomic:
        row = store.next_ready(max_priority)
    return None if row is None else row.id


def ids(rows: list[ItemRow]) -> list[str]:
    return [row.id for row in rows]


# ---------------------------------------------------------------------- the lines of items
def test_items_are_numbered_and_served_by_priority_then_age(backend: Backend):
    store = backend.open()
    a, b, c = add(store, "O-1001", 1), add(store, "A-1002", 2), add(store, "B-1003", 0)
    assert (a.id, b.id, c.id) == ("item-0001", "item-0002", "item-0003")
    assert served(store) == c.id
    assert served(store, max_priority=1) == c.id
    move(store, c, LEASED)
    assert served(store) == a.id
    move(store, a, LEASED)
    assert served(store, max_priority=1) is None  # only bulk work is left
    assert served(store) == b.id


def test_one_case_is_served_first_in_first_out_and_never_twice_at_once(backend: Backend):
    store = backend.open()
    first, second = add(store, "O-1001"), add(store, "O-1001")
    other = add(store, "A-1002", priority=2)
    assert served(store) == first.id
    move(store, first, LEASED)
    assert served(store) == other.id  # the case is held: its second item waits
    move(store, first, DONE)
    assert served(store) == second.id


def test_a_returned_item_goes_to_the_front_and_a_replayed_one_to_the_back(backend: Backend):
    store = backend.open()
    first, second = add(store, "O-1001"), add(store, "O-1001")
    move(store, first, LEASED)
    move(store, first, READY)
    assert served(store) == first.id
    move(store, first, LEASED)
    move(store, first, DEAD)
    assert served(store) == second.id
    move(store, first, READY)  # replayed
    assert served(store) == second.id
    move(store, second, LEASED)
    move(store, second, DONE)
    assert served(store) == first.id


def test_an_item_added_with_its_event_in_one_decision_keeps_every_column_it_was_given(durable: Backend):
    """`add_logged` (the usual enqueue) writes a new item's empty columns as literals on
    SQLite; a row that is not new takes the statement that binds every column."""
    store = durable.open()
    fresh, worn = new_row("O-1001", payload={"idem_key": "O-1001:email:3"}), new_row("O-1002", priority=0)
    worn.attempts, worn.token, worn.replays, worn.last_error, worn.ended_by = 3, 4, 2, "smtp 421", "expired"
    worn.expires_at, worn.enqueued_at = 12.5, 2.0
    for row in (fresh, worn):
        store.add_logged(row, {"tenant_id": row.tenant_id, "kind": row.kind, "priority": row.priority})
    columns = ("case_id", "priority", "payload", "state", "attempts", "token", "replays", "last_error", "ended_by")
    columns += ("expires_at", "enqueued_at", "lease_seconds", "worker_id", "dead_at")
    for row in (fresh, worn):
        with store.atomic:
            stored = store.get_item(row.id)
        assert [getattr(stored, name) for name in columns] == [getattr(row, name) for name in columns]
    logged = [(event.kind, event.item_id, event.time) for event in store.log]
    assert logged == [(EventKind.ENQUEUED, fresh.id, 0.0), (EventKind.ENQUEUED, worn.id, 2.0)]


def test_the_schema_itself_refuses_a_second_lease_on_one_case(durable: Backend):
    """The second guard: a write that skipped the queue's checks still cannot lease two items
    of one case (SQLite: both would be the case's place 0 in its live line; PostgreSQL: the
    unique index on the case of every leased item). The block is rolled back whole."""
    store = durable.open()
    first, second = add(store, "O-1001"), add(store, "O-1001")
    move(store, first, LEASED)
    with pytest.raises(Exception, match="(?i)unique") as refused:
        move(store, second, LEASED)
    assert not isinstance(refused.value, ShopOpsError)  # a bug of the kit's, shown as the driver says it
    with store.atomic:
        assert store.get_item(second.id).state is READY
    move(store, first, DONE)
    assert served(store) == second.id


def test_an_item_added_or_replayed_while_its_case_is_held_waits_behind_the_held_one(backend: Backend):
    store = backend.open()
    dead = add(store, "O-1001")
    move(store, dead, LEASED)
    move(store, dead, DEAD)
    held = add(store, "O-1001")
    move(store, held, LEASED)
    added = add(store, "O-1001")  # the case's line is empty but for the held item
    move(store, dead, READY)  # replayed while the case is held
    move(store, held, READY)  # its lease ended: back to the front
    rows, order = {row.id: row for row in (dead, held, added)}, []
    while (next_id := served(store)) is not None:
        order.append(next_id)
        move(store, rows[next_id], LEASED)
        move(store, rows[next_id], DONE)
    assert order == [held.id, added.id, dead.id]


def test_dead_items_line_up_in_the_order_they_died(backend: Backend):
    store = backend.open()
    rows = [add(store, f"O-{n}") for n in range(3)]
    for row in (rows[2], rows[0], rows[1]):
        move(store, row, LEASED)
        move(store, row, DEAD)
    move(store, rows[2], READY)
    move(store, rows[2], LEASED)
    move(store, rows[2], DEAD)
    assert ids(store.dead_rows()) == [rows[0].id, rows[1].id, rows[2].id]


def test_due_leases_come_by_deadline_then_age_and_only_while_leased(backend: Backend):
    store = backend.open()
    a, b, c = add(store, "O-1"), add(store, "O-2"), add(store, "O-3")
    move(store, a, LEASED, t=20)
    move(store, b, LEASED, t=5)
    move(store, c, LEASED, t=5)
    move(store, c, DONE)
    d = add(store, "O-4")
    move(store, d, LEASED, t=5)
    with store.atomic:
        assert ids(store.due_leases(34.9)) == []
        assert ids(store.due_leases(35)) == [b.id, d.id]
    move(store, b, READY)  # the engine ends every lease it is told about
    move(store, d, DONE)
    with store.atomic:
        assert ids(store.due_leases(60)) == [a.id]


def test_rows_counts_and_states_are_read_back_as_written(backend: Backend):
    store = backend.open()
    a, b, c = add(store, "O-1", 2), add(store, "O-2"), add(store, "O-3")
    move(store, b, LEASED, t=7, worker="W7")
    move(store, c, LEASED)
    move(store, c, DEAD)
    assert ids(store.item_rows()) == [a.id, b.id, c.id]
    assert ids(store.item_rows(LEASED)) == [b.id]
    assert store.item_counts() == {READY: 1, LEASED: 1, DONE: 0, DEAD: 1}
    row = store.get_item(b.id)
    assert (row.state, row.token, row.attempts, row.worker_id, row.expires_at) == (LEASED, 1, 1, "W7", 37)
    assert (row.case_id, row.priority, row.payload) == ("O-2", 1, {})
    assert store.get_item("item-9999") is None


def test_payloads_come_back_equal(durable: Backend):
    url = durable.url()
    payload = {"idem_key": "O-1001:email:3", "total": 129.5, "lines": [{"sku": "A", "n": 2}], "note": None}
    row = add(durable.open(url), "O-1001", payload=payload)
    again = durable.open(url).get_item(row.id)
    assert again.payload == payload and list(again.payload) == list(payload) and again.flat is False


# ---------------------------------------------------------------------- records and counters
def test_records_put_get_and_scan_in_first_stored_order(backend: Backend):
    store = backend.open()
    with store.atomic:
        store.put("job", "job-0002", {"state": "queued"})
        store.put("job", "job-0001", {"state": "queued", "params": {"case_id": "O-1001"}})
        store.put("job", "job-0002", {"state": "running"})
        store.put("other", "job-0001", [1, 2.5, "x", None, True])
    assert store.get("job", "job-0002") == {"state": "running"}
    assert store.get("other", "job-0001") == [1, 2.5, "x", None, True]
    assert store.get("job", "job-0003") is None
    assert store.scan("job") == [
        ("job-0002", {"state": "running"}),
        ("job-0001", {"state": "queued", "params": {"case_id": "O-1001"}}),
    ]
    assert store.scan("nothing") == []


def test_put_new_keeps_the_first_value_only(backend: Backend):
    store = backend.open()
    with store.atomic:
        assert store.put_new("idem", "O-1001:email:3", "msg-0001") is True
        assert store.put_new("idem", "O-1001:email:3", "msg-0002") is False
    assert store.get("idem", "O-1001:email:3") == "msg-0001"


def test_counters_count_per_name(backend: Backend):
    store = backend.open()
    with store.atomic:
        assert [store.next_number("job") for _ in range(3)] == [1, 2, 3]
        assert store.next_number("out") == 1


# ---------------------------------------------------------------------- the event log
def test_the_log_reads_back_what_was_appended(backend: Backend):
    store = backend.open()
    append = store.log.appender()
    with store.atomic:
        append(EventRow(time=1.5, kind=EventKind.ENQUEUED, item_id="item-0001", case_id="O-1001", info={"priority": 1}))
        store.log.append(
            EventKind.LEASED,
            2.0,
            item_id="item-0001",
            case_id="O-1001",
            worker_id="W1",
            token=1,
            attempt=1,
            expires_at=32.0,
        )
    events = store.log.events
    assert [(e.seq, e.time, e.kind, e.worker_id, e.token, dict(e.info)) for e in events] == [
        (0, 1.5, EventKind.ENQUEUED, None, None, {"priority": 1}),
        (1, 2.0, EventKind.LEASED, "W1", 1, {"expires_at": 32.0}),
    ]
    assert len(store.log) == 2 and store.log.last.kind is EventKind.LEASED


def test_every_log_checks_what_it_is_given_and_keeps_nested_values(backend: Backend):
    store = backend.open()
    for kind, time in (("not_a_kind", 1.0), (EventKind.LEASED, float("nan")), (EventKind.LEASED, "soon")):
        with pytest.raises(BadArgumentError):
            store.log.append(kind, time, item_id="item-0001")
    store.log.append(EventKind.NACKED, 2.0, item_id="item-0001", detail={"lines": [1, {"sku": "A"}]})
    detail = store.log.last.info["detail"]
    assert len(store.log) == 1 and detail["lines"][1]["sku"] == "A" and detail["lines"][0] == 1
    with pytest.raises(TypeError):
        detail["lines"][1]["sku"] = "B"  # read-only, as every log hands nested values out


def test_another_store_on_the_same_database_sees_the_same_history(durable: Backend):
    url = durable.url()
    writer, reader = durable.open(url), durable.open(url)
    writer.log.append(EventKind.ENQUEUED, 0.0, item_id="item-0001")
    assert len(reader.log) == 1
    writer.log.append(EventKind.ACKED, 1.0, item_id="item-0001")
    assert [e.kind for e in reader.log] == [EventKind.ENQUEUED, EventKind.ACKED]


# ---------------------------------------------------------------------- transactions
def test_a_crash_inside_a_transaction_keeps_nothing_of_it(backend: Backend):
    store = backend.open()
    add(store, "O-1001")
    with pytest.raises(KeyboardInterrupt), store.atomic:
        row = store.next_ready(None)
        row.state, row.token, row.attempts, row.worker_id, row.expires_at = LEASED, 1, 1, "W1", 30.0
        store.write_item(row, READY)
        add(store, "O-1002")
        store.put("job", "job-0001", {"state": "running"})
        store.log.append(EventKind.LEASED, 1.0, item_id=row.id)
        assert len(store.log) == 1  # visible inside, before the crash
        raise KeyboardInterrupt
    assert store.item_counts() == {READY: 1, LEASED: 0, DONE: 0, DEAD: 0}
    assert store.get_item("item-0001").token == 0 and store.get_item("item-0002") is None
    assert store.get("job", "job-0001") is None and len(store.log) == 0
    assert served(store) == "item-0001" and store.due_leases(100.0) == []  # offered again, and no lease to end


def test_a_refused_write_rolls_back_the_transaction_it_ends(backend: Backend):
    store = backend.open()
    with pytest.raises(StaleTokenError), store.atomic:
        store.put("job", "job-0001", {"state": "succeeded"})
        raise StaleTokenError(what="job job-0001", token=4, current=5)
    assert store.get("job", "job-0001") is None


def test_an_engine_call_keeps_the_record_of_its_own_refusal(backend: Backend):
    store = backend.open()
    jobs = JobStore(store=store)
    job = jobs.submit("O-1001:refund").id
    old, _ = jobs.claim(job, "A", lease_seconds=10), jobs.claim(job, "A", lease_seconds=10)
    with pytest.raises(StaleTokenError):
        jobs.complete(job, token=old.token)  # its own transaction: the refusal is kept
    assert [e.token for e in store.log.where(EventKind.STALE_REJECTED)] == [old.token]
    with pytest.raises(StaleTokenError), store.atomic:  # inside a transaction of yours
        jobs.complete(job, token=old.token)
    assert len(store.log.where(EventKind.STALE_REJECTED)) == 1  # your transaction rolled back, on every store
    assert jobs.get(job).state.value == "running"


def test_a_block_of_queue_calls_that_fails_keeps_nothing_of_it_on_every_store(backend: Backend):
    """Every item change in a failed block is undone, memory's too: the rows, their lines (a
    case's order, who holds it), the dead-letter queue, the counts, and what the queue will
    serve next and when a lease runs out."""
    clock = FakeClock()
    store = backend.open()
    queue = Queue(store=store, clock=clock, lease_seconds=10, max_attempts=2)
    for case in ("O-1", "O-1", "O-2", "O-3"):
        queue.enqueue(case_id=case)
    held = queue.acquire("W1")  # item-0001, O-1
    dying = queue.acquire("W1")  # item-0003, O-2: its second attempt will be its last
    queue.nack(dying, "boom")
    before = (queue.items(), queue.counts(), [e.kind for e in store.log])
    with pytest.raises(RuntimeError), store.atomic:
        queue.ack(held)  # O-1's line moves on
        lease = queue.acquire("W2")
        assert lease.item_id == "item-0002"
        queue.nack(queue.acquire("W2"), "boom again")  # item-0003's last attempt: dead
        queue.replay_dlq("item-0003")
        queue.enqueue(case_id="O-4")
        clock.advance(11)
        assert queue.expire_leases() == ["item-0002"]  # a lease that ran out, inside the block
        raise RuntimeError("the block fails")
    assert (queue.items(), queue.counts(), [e.kind for e in store.log]) == before
    clock.advance(11)  # the held lease runs out exactly as it would have without the block
    assert queue.expire_leases() == ["item-0001"]
    order = []
    while (lease := queue.acquire("W3")) is not None:
        order.append((lease.item_id, lease.attempt))
        queue.ack(lease)
    assert order == [("item-0001", 2), ("item-0002", 1), ("item-0003", 2), ("item-0004", 1)]
    assert queue.counts()[ItemState.DONE] == 4 and len(queue) == 4


def test_only_the_engines_refusals_keep_their_record_and_any_other_error_rolls_the_call_back(backend: Backend):
    """What an error does to its call's transaction is decided per error class: a refusal
    (a stale token) keeps what the call wrote before refusing; bad input, a bug or a failing
    database keeps nothing."""

    class Component:
        def __init__(self, store: Store) -> None:
            self.store = store
            bind_transactions(self, store)

        @transaction
        def write_then_raise(self, key: str, error: BaseException) -> None:
            self.store.put("note", key, {"written": True})
            raise error

    store = backend.open()
    component = Component(store)
    raised = [
        StaleTokenError(what="item item-0001", token=1, current=2),
        BadArgumentError(field="x", problem="is wrong", fix="pass a right one"),
        StoreFullError(target="t", reason="no room", fix="free some"),
        ChaosError(reason="a bug", fix="report it"),
        ValueError("a bug"),
    ]
    for n, error in enumerate(raised):
        with pytest.raises(type(error)):
            component.write_then_raise(f"k{n}", error)
    assert [key for key, _ in store.scan("note")] == ["k0"]


def test_transactions_nest_into_the_outer_one(backend: Backend):
    store = backend.open()
    with pytest.raises(RuntimeError), store.atomic:
        with store.atomic:
            store.put("job", "a", 1)
        store.put("job", "b", 2)
        raise RuntimeError("the outer block fails")
    assert store.scan("job") == []


def test_a_failed_transaction_undoes_records_counters_and_events_on_every_store(backend: Backend):
    store = backend.open()
    with store.atomic:
        store.put("job", "kept", 1)
        store.next_number("job")
        store.log.append(EventKind.ENQUEUED, 0.0, item_id="item-0001")
    with pytest.raises(KeyboardInterrupt), store.atomic:
        store.put("job", "kept", 2)
        assert store.put_new("job", "new", 3)
        assert store.next_number("job") == 2 and store.next_number("other") == 1
        store.log.append(EventKind.ACKED, 1.0, item_id="item-0001")
        raise KeyboardInterrupt
    assert store.scan("job") == [("kept", 1)] and store.get("job", "new") is None
    with store.atomic:
        assert store.next_number("job") == 2 and store.next_number("other") == 1
    assert [event.kind for event in store.log] == [EventKind.ENQUEUED]


def test_a_durable_store_keeps_everything_across_a_reopen(durable: Backend):
    url = durable.url()
    store = durable.open(url)
    row = add(store, "O-1001")
    move(store, row, LEASED, t=3)
    with store.atomic:
        store.put("job", "job-0001", {"state": "running"})
        store.next_number("job")
        store.log.append(EventKind.LEASED, 3.0, item_id=row.id)
    store.close()
    again = durable.open(url)
    assert again.get_item(row.id).token == 1 and again.get("job", "job-0001") == {"state": "running"}
    with again.atomic:
        assert again.next_number("job") == 2
    assert [e.item_id for e in again.log] == [row.id]
    assert add(again, "O-1002").id == "item-0002"


def test_a_write_the_database_refuses_leaves_the_store_usable(durable: Backend):
    """PostgreSQL sends a held write with the COMMIT: refused there, it must not leave the
    connection inside an aborted transaction that refuses the next call too."""
    store = durable.open()
    row = ItemRow()
    row.case_id, row.tenant_id, row.kind, row.payload, row.flat = "O-1001", "t", "k", {}, True
    row.priority, row.state, row.attempts, row.token, row.worker_id = 2**70, READY, 0, 0, None
    row.expires_at, row.lease_seconds, row.enqueued_at = None, 30.0, 0.0
    row.last_error, row.dead_at, row.replays, row.ended_by = None, None, 0, None
    with pytest.raises(ShopOpsError), store.atomic:  # no engine call makes this row: the queue refuses it first
        store.put("job", "job-0001", {"state": "running"})
        store.add_item(row)
    assert store.get("job", "job-0001") is None
    assert add(store, "O-1002").case_id == "O-1002" and store.item_count(READY) == 1


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_a_json_writer_writes_what_json_dumps_writes_with_or_without_the_c_encoder(monkeypatch, ensure_ascii):
    """`json_text.writer` (the stores' flat payloads, the grader's wire) makes json's C encoder
    once; in a Python without it, json's own encoder writes the same text."""
    import json

    from shopops_lab.json_text import writer

    def refuse(value):
        raise TypeError(f"{type(value).__name__} is not JSON")

    values = [{"idem_key": "O-1001:é✓", "n": 129, "rate": 0.5, "ok": True, "none": None}, ["a", [1, {"b": 2}]], "é", 3]
    made = [writer(ensure_ascii=ensure_ascii, allow_nan=False, default=refuse)]
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    made.append(writer(ensure_ascii=ensure_ascii, allow_nan=False, default=refuse))
    for write in made:
        for value in values:
            assert write(value) == json.dumps(value, ensure_ascii=ensure_ascii, separators=(",", ":"))
        with pytest.raises(ValueError):
            write({"x": float("nan")})
        with pytest.raises(TypeError, match="object is not JSON"):
            write({"x": object()})


def test_the_sql_stores_write_the_json_text_json_dumps_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flat dicts of the hot path, and read-only views of them (the queue's shared event
    details), take a C encoder made once; the text is the same as `json.dumps` with the
    stores' settings (compact, ASCII, NaN refused), and anything that is not flat is still
    checked as json.dumps checks it."""
    import json
    from types import MappingProxyType

    from shopops_lab.json_text import dumps

    def plain(value):
        return dict(value)

    flat = {"idem_key": "O-1001:é✓", "total": 129, "rate": 0.1, "ok": True, "none": None, "big": 10**30}
    nested = {"lines": [1, {"sku": "A"}], "frozen": MappingProxyType({"b": 2})}
    for value in (flat, {}, nested, [flat], "text", 3, MappingProxyType(flat), MappingProxyType({})):
        assert dumps(value) == json.dumps(value, separators=(",", ":"), allow_nan=False, default=plain)
    for value in ({"total": float("nan")}, MappingProxyType({"total": float("inf")})):
        with pytest.raises(ValueError):
            dumps(value)
    loop: dict = {"lines": []}
    loop["lines"].append(loop)
    with pytest.raises(ValueError, match="Circular"):
        dumps(loop)
    with pytest.raises(TypeError):
        dumps({"when": object()})
    views = [MappingProxyType(flat), MappingProxyType({"kind": "task"})]
    expected = [dumps(view) for view in views]
    monkeypatch.setattr(json, "dumps", None)  # the flat ones, read-only views of them too, never reach json.dumps
    assert [dumps(view) for view in views] == expected
