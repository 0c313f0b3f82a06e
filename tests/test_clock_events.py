"""The foundation: the fake clock, the error classes' messages, the state table and the event log."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import pickle
import string
from enum import Enum
from typing import Any

import pytest

from shopops_lab import errors
from shopops_lab.clock import Clock, FakeClock, SystemClock
from shopops_lab.errors import BadArgumentError, ShopOpsError, StaleTokenError, TransitionError
from shopops_lab.events import Event, EventKind, EventLog, EventRow
from shopops_lab.states import TRANSITIONS, ItemState, check_transition
from shopops_lab.worker.queue import InMemoryQueue

# --------------------------------------------------------------------------- clock


def test_fake_clock_moves_only_when_told():
    clock = FakeClock()
    assert clock.now() == 0.0 and clock.now() == 0.0
    assert clock.advance(2.5) == 2.5 == clock.now()
    assert clock.advance(0) == 2.5
    assert clock.set(10) == 10.0 == clock.now()
    assert clock.set(10) == 10.0
    assert FakeClock(start=100).now() == 100.0
    assert repr(clock) == "FakeClock(now=10)"


@pytest.mark.parametrize(
    "move, field, message",
    [
        (
            lambda c: c.advance(-1),
            "seconds",
            "seconds is negative (-1.0). Fix: a FakeClock only moves forward; pass a value >= 0.",
        ),
        (
            lambda c: c.set(4),
            "when",
            "when is 4.0, before the clock's 5.0. Fix: a FakeClock only moves forward; pass a time >= now().",
        ),
        (lambda c: c.advance("1"), "seconds", "seconds is '1'. Fix: pass a finite number of seconds >= 0."),
        (lambda c: c.advance(math.nan), "seconds", None),
        (lambda c: c.advance(True), "seconds", None),
        (lambda c: c.set(None), "when", None),
    ],
)
def test_fake_clock_never_goes_back_and_names_the_bad_field(move, field, message):
    clock = FakeClock(5)
    with pytest.raises(BadArgumentError) as err:
        move(clock)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field} is")
    if message is not None:
        assert str(err.value) == message
    assert clock.now() == 5.0


def test_fake_clock_start_must_be_a_number():
    with pytest.raises(BadArgumentError) as err:
        FakeClock("noon")  # type: ignore[arg-type]
    assert err.value.field == "start"


def test_both_clocks_satisfy_the_clock_protocol():
    assert isinstance(FakeClock(), Clock) and isinstance(SystemClock(), Clock)
    assert isinstance(SystemClock().now(), float)
    assert repr(SystemClock()) == "SystemClock()"
    assert not isinstance(object(), Clock)


# --------------------------------------------------------------------------- errors

CONTROL_FLOW = (errors.SimulatedCrash,)  # templated like the errors, outside their root on purpose
STOPS = (errors.CheckStopped,)  # a check stopped from outside: no fields, no template, neither root


def every_error_class() -> list[type[ShopOpsError]]:
    found, todo = [], [ShopOpsError, *CONTROL_FLOW]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted({c for c in found if c.__module__ == errors.__name__}, key=lambda c: c.__name__)


def template_fields(cls: type[ShopOpsError]) -> list[str]:
    return sorted({name for _, name, _, _ in string.Formatter().parse(cls.__doc__) if name})


def test_every_error_class_in_the_module_is_a_shopops_error_or_named_control_flow():
    defined = [
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if obj.__module__ == errors.__name__ and not obj.__name__.startswith("_")
    ]
    vocabularies = [cls for cls in defined if issubclass(cls, Enum)]  # the values a field takes (Kept)
    assert vocabularies == [errors.Kept]
    defined = [cls for cls in defined if cls not in vocabularies]
    assert sorted(defined, key=lambda c: c.__name__) == sorted([*every_error_class(), *STOPS], key=lambda c: c.__name__)
    assert all(not issubclass(cls, Exception) for cls in (*CONTROL_FLOW, *STOPS))
    assert all(not issubclass(cls, (KeyboardInterrupt, ShopOpsError)) for cls in STOPS)


@pytest.mark.parametrize("cls", every_error_class(), ids=lambda c: c.__name__)
def test_each_error_formats_its_docstring_from_its_fields(cls):
    fields = {name: 7 for name in template_fields(cls)}  # 7 suits every format spec (:g, !r, plain)
    assert fields, f"{cls.__name__} has no fields in its message"
    err = cls(**fields)
    message = str(err)
    assert message == cls.__doc__.format(**fields)
    assert "{" not in message and "}" not in message
    assert err.fields == fields
    assert all(getattr(err, name) == 7 for name in fields)
    assert isinstance(err, CONTROL_FLOW) or (isinstance(err, ShopOpsError) and isinstance(err, Exception))


@pytest.mark.parametrize("cls", every_error_class(), ids=lambda c: c.__name__)
def test_each_error_is_made_again_from_its_fields_across_a_pipe(cls):
    """A chaos worker sends its error to the supervisor as it is (pickled)."""
    err = cls(**{name: 7 for name in template_fields(cls)})
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is cls and str(again) == str(err) and again.fields == err.fields


def test_error_messages_read_as_sentences_with_the_values_in_place():
    assert str(StaleTokenError(what="item item-0001", token=4, current=5)) == (
        "Stale fencing token for item item-0001: this write carries token 4, but the store's current "
        "token is 5. Another worker claimed it after you; stop and do not write."
    )
    bad = BadArgumentError(field="lease_seconds", problem="is -1", fix="pass a positive number of seconds")
    assert str(bad) == "lease_seconds is -1. Fix: pass a positive number of seconds."
    assert isinstance(bad, ValueError)  # callers catching ValueError still catch it
    assert str(errors.LeaseExpiredError(item_id="item-0001", token=1, expires_at=30.0)).startswith(
        "The lease on item item-0001 (token 1) expired at t=30;"
    )


# --------------------------------------------------------------------------- states


def test_the_transition_table_is_the_chapters_state_diagram():
    assert dict(TRANSITIONS) == {
        (ItemState.READY, ItemState.LEASED): "acquire",
        (ItemState.LEASED, ItemState.DONE): "ack",
        (ItemState.LEASED, ItemState.READY): "expiry / nack",
        (ItemState.LEASED, ItemState.DEAD): "max attempts",
        (ItemState.DEAD, ItemState.READY): "replay",
    }
    with pytest.raises(TypeError):
        TRANSITIONS[(ItemState.DONE, ItemState.READY)] = "undo"  # type: ignore[index]


def test_check_transition_allows_exactly_the_table():
    for source in ItemState:
        for target in ItemState:
            if (source, target) in TRANSITIONS:
                check_transition("item-0001", source, target)
            else:
                with pytest.raises(TransitionError, match=f"item-0001 cannot move from {source} to {target}"):
                    check_transition("item-0001", source, target)


# --------------------------------------------------------------------------- events


def sample_log() -> EventLog:
    log = EventLog()
    log.append(EventKind.ENQUEUED, 0, item_id="item-0001", case_id="O-1001", tenant_id="store_northline")
    log.append(
        EventKind.LEASED,
        1.5,
        item_id="item-0001",
        case_id="O-1001",
        worker_id="W1",
        token=1,
        attempt=1,
        expires_at=31.5,
    )
    log.append(EventKind.CONTACT_SENT, 2, case_id="O-1001", worker_id="W1", message_id="msg-0001")
    log.append(EventKind.ACKED, 3, item_id="item-0001", case_id="O-1001", worker_id="W1", token=1, attempt=1)
    return log


def test_append_returns_consecutive_seqs_and_events_carry_them():
    log = EventLog()
    assert [log.append(EventKind.ENQUEUED, t, item_id=f"item-{t}") for t in range(3)] == [0, 1, 2]
    assert [e.seq for e in log] == [0, 1, 2] and len(log) == 3
    assert log[1] == Event(seq=1, time=1, kind=EventKind.ENQUEUED, item_id="item-1")
    assert log.last.seq == 2 and EventLog().last is None
    assert repr(log) == "EventLog(3 events)"


def test_events_appended_after_a_read_show_up_in_the_next_read():
    log = sample_log()
    assert len(log.events) == 4
    log.append(EventKind.EXPIRED, 40, item_id="item-0002")
    assert [e.kind for e in log][-1] is EventKind.EXPIRED and log.last.seq == 4


def test_events_are_frozen_and_their_info_read_only():
    event = sample_log()[1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.time = 99  # type: ignore[misc]
    with pytest.raises(TypeError):
        event.info["expires_at"] = 0  # type: ignore[index]


def test_the_events_list_is_a_copy():
    log = sample_log()
    log.events.clear()
    assert len(log.events) == 4


def test_event_str_is_deterministic_and_skips_what_is_missing():
    log = sample_log()
    assert [str(e) for e in log] == [
        "#0 t=0 enqueued item=item-0001 case=O-1001 tenant_id=store_northline",
        "#1 t=1.5 leased item=item-0001 case=O-1001 worker=W1 token=1 attempt=1 expires_at=31.5",
        "#2 t=2 contact_sent case=O-1001 worker=W1 message_id=msg-0001",
        "#3 t=3 acked item=item-0001 case=O-1001 worker=W1 token=1 attempt=1",
    ]
    info_order = EventLog()
    info_order.append(EventKind.NACKED, 1, zeta=1, alpha=2, mid=3)
    assert str(info_order[0]) == "#0 t=1 nacked alpha=2 mid=3 zeta=1"


def test_where_filters_by_kind_item_case_and_worker():
    log = sample_log()
    assert [e.seq for e in log.where(EventKind.LEASED)] == [1]
    assert [e.seq for e in log.where("acked")] == [3]
    assert [e.seq for e in log.where((EventKind.LEASED, "acked"))] == [1, 3]
    assert [e.seq for e in log.where(item_id="item-0001")] == [0, 1, 3]
    assert [e.seq for e in log.where(case_id="O-1001", worker_id="W1")] == [1, 2, 3]
    assert [e.seq for e in log.where(EventKind.LEASED, worker_id="W2")] == []
    assert [e.seq for e in log.where()] == [0, 1, 2, 3]


def test_to_dicts_is_json_ready_and_from_dicts_round_trips():
    log = sample_log()
    rows = log.to_dicts()
    assert rows[1] == {
        "seq": 1,
        "time": 1.5,
        "kind": "leased",
        "item_id": "item-0001",
        "case_id": "O-1001",
        "worker_id": "W1",
        "token": 1,
        "attempt": 1,
        "info": {"expires_at": 31.5},
    }
    rebuilt = EventLog.from_dicts(json.loads(json.dumps(rows)))
    assert rebuilt.to_dicts() == rows
    assert [str(e) for e in rebuilt] == [str(e) for e in log]
    assert all(isinstance(e.kind, EventKind) for e in rebuilt)


def test_rows_gives_the_same_events_as_named_rows_in_order():
    log = sample_log()
    rows = list(log.rows())
    assert [(r.time, r.kind, r.item_id) for r in rows] == [(e.time, e.kind, e.item_id) for e in log]
    assert rows[1] == EventRow(
        time=1.5,
        kind=EventKind.LEASED,
        item_id="item-0001",
        case_id="O-1001",
        worker_id="W1",
        token=1,
        attempt=1,
        info={"expires_at": 31.5},
    )


def test_every_field_of_an_event_the_log_builds_is_filled_from_its_row():
    log = sample_log()
    names = [f.name for f in dataclasses.fields(Event)]
    for seq, (event, row) in enumerate(zip(log, log.rows(), strict=True)):
        assert {name: getattr(event, name) for name in names} == {"seq": seq, **row._asdict()}
        assert event == Event(**{name: getattr(event, name) for name in names})


def test_an_event_built_from_its_row_is_the_event_the_log_gives():
    log = sample_log()
    built = [Event.from_row(seq, row) for seq, row in enumerate(log.rows())]
    assert built == log.events and [dict(e.info) for e in built] == [dict(e.info) for e in log]
    with pytest.raises(TypeError):
        built[1].info["expires_at"] = 0  # type: ignore[index]


def test_show_prints_the_last_events_and_how_many_came_before():
    log = sample_log()
    assert log.show(limit=2) == (
        "... 2 earlier events\n"
        "#2 t=2 contact_sent case=O-1001 worker=W1 message_id=msg-0001\n"
        "#3 t=3 acked item=item-0001 case=O-1001 worker=W1 token=1 attempt=1"
    )
    assert log.show().count("\n") == 3


def test_the_package_exports_its_names_without_loading_the_notebook_stack():
    """`import shopops_lab` stays pure Python (it must load in Pyodide quickly); viz and widgets are opt-in."""
    import subprocess
    import sys

    code = (
        "import sys, shopops_lab; missing = [n for n in shopops_lab.__all__ if not hasattr(shopops_lab, n)]; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'matplotlib', 'ipywidgets', 'nbformat', 'graphviz', 'IPython'}); print(missing, heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] []"


def test_where_names_an_unknown_kind():
    log = EventLog()
    with pytest.raises(BadArgumentError) as raised:
        log.where("leasd")
    assert raised.value.field == "kind" and "EventKind.LEASED" in str(raised.value)


@dataclasses.dataclass(frozen=True, slots=True)
class NamesOnly:
    """An event row readable by name only, its fields in another order than `EventRow`'s
    (as if fields had been added before them): a reader that unpacks or indexes a row by
    position fails on it, or reads the wrong field."""

    info: Any
    attempt: int | None
    token: int | None
    worker_id: str | None
    case_id: str | None
    item_id: str | None
    kind: EventKind
    time: float


def test_event_rows_are_read_by_name_so_a_new_field_shifts_no_reader():
    from shopops_lab.metrics import queue_metrics, series
    from shopops_lab.sim.engine import run
    from shopops_lab.sim.report import log_metrics
    from shopops_lab.viz import plots
    from shopops_lab.viz.state_machine import last_transition

    log = run("burst_day", seed=3, items=120).log
    named = EventLog()
    append = named.appender()
    for row in log.rows():
        append(NamesOnly(**row._asdict()))  # type: ignore[arg-type]
    # The queue writes its three hot rows in this order (worker/queue.py, `_row`): a change here
    # must change those, and Event's fields follow EventRow's.
    assert EventRow._fields == ("time", "kind", "item_id", "case_id", "worker_id", "token", "attempt", "info")
    assert tuple(f.name for f in dataclasses.fields(Event)) == ("seq", *EventRow._fields)
    assert [e.as_dict() for e in named] == [e.as_dict() for e in log]
    assert queue_metrics(named) == queue_metrics(log) and series(named, 60) == series(log, 60)
    assert log_metrics(named, queue_metrics(named)) == log_metrics(log, queue_metrics(log))
    assert plots.p95_series(named) == plots.p95_series(log) != []
    assert plots.fault_periods(named) == plots.fault_periods(log) != []
    assert last_transition(named) == last_transition(log) is not None


def test_an_event_row_is_made_by_keyword_with_defaults_for_what_it_does_not_name():
    row = EventRow(time=2.0, kind=EventKind.ACKED, item_id="item-0001")
    assert (row.case_id, row.worker_id, row.token, row.attempt, dict(row.info)) == (None, None, None, None, {})
    log = EventLog()
    log.appender()(row)
    assert str(log[0]) == "#0 t=2 acked item=item-0001"


def test_the_queues_hot_rows_hold_each_value_under_its_name():
    q = InMemoryQueue(clock=FakeClock())
    item = q.enqueue(case_id="O-1", tenant_id="store_a", kind="contact_send", now=1)
    lease = q.acquire("W1", now=2)
    q.ack(lease, now=3)
    rows = list(q.log.rows())
    assert all(type(row) is EventRow for row in rows)
    assert [row._asdict() for row in rows] == [
        {
            "time": 1.0,
            "kind": EventKind.ENQUEUED,
            "item_id": item,
            "case_id": "O-1",
            "worker_id": None,
            "token": None,
            "attempt": None,
            "info": {"tenant_id": "store_a", "kind": "contact_send", "priority": 1},
        },
        {
            "time": 2.0,
            "kind": EventKind.LEASED,
            "item_id": item,
            "case_id": "O-1",
            "worker_id": "W1",
            "token": 1,
            "attempt": 1,
            "info": {"expires_at": 32.0},
        },
        {
            "time": 3.0,
            "kind": EventKind.ACKED,
            "item_id": item,
            "case_id": "O-1",
            "worker_id": "W1",
            "token": 1,
            "attempt": 1,
            "info": {},
        },
    ]


def test_an_enqueued_events_details_are_read_only_and_read_as_before(monkeypatch):
    """The queue shares one read-only mapping among enqueued events with the same tenant, kind
    and priority: a reader sees the same details, cannot change them (for itself or for the
    other events), and an Event shows them as one read-only mapping, as for any other event;
    past the table's bound an item gets its own."""
    import shopops_lab.worker.queue as queue_module

    q = InMemoryQueue(clock=FakeClock())
    q.enqueue(case_id="O-1", tenant_id="store_a", kind="contact_send")
    q.enqueue(case_id="O-2", tenant_id="store_a", kind="contact_send", priority=1)
    monkeypatch.setattr(queue_module, "_SHARED_INFOS", 0)
    q.enqueue(case_id="O-3", tenant_id="store_b", kind="refund")
    rows = list(q.log.rows())
    assert [dict(row.info) for row in rows] == [
        {"tenant_id": "store_a", "kind": "contact_send", "priority": 1},
        {"tenant_id": "store_a", "kind": "contact_send", "priority": 1},
        {"tenant_id": "store_b", "kind": "refund", "priority": 1},
    ]
    for row in rows:
        with pytest.raises(TypeError):
            row.info["kind"] = "changed"  # type: ignore[index]
    assert repr(q.log[0].info) == "mappingproxy({'tenant_id': 'store_a', 'kind': 'contact_send', 'priority': 1})"
    assert q.log.to_dicts()[2]["info"] == {"tenant_id": "store_b", "kind": "refund", "priority": 1}
