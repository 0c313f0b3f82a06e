"""Metrics from the event log, checked on small runs whose numbers are worked out by hand."""

from __future__ import annotations

import math

import pytest

from shopops_lab.clock import FakeClock
from shopops_lab.errors import BadArgumentError, StaleTokenError
from shopops_lab.events import EventKind, EventLog
from shopops_lab.metrics import QueueMetrics, Series, Summary, percentile, queue_metrics, series
from shopops_lab.worker.queue import InMemoryQueue


def busy_morning() -> EventLog:
    """Four items; one done first time, one retried, one expired then dead, one waiting.

    t=0   enqueue a (case A), b (case B), c (case C)
    t=1   W1 leases a            (a waited 1)
    t=2   W2 leases b            (b waited 2)
    t=3   a acked
    t=4   b nacked -> ready
    t=5   W1 leases b again      (attempt 2)
    t=6   b acked
    t=7   W3 leases c            (c waited 7; due at 17)
    t=17  c's lease expires -> ready
    t=20  W4 leases c again      (attempt 2 of 2)
    t=22  c nacked on its last attempt -> dead
    t=25  enqueue d (case D), never leased
    """
    clock = FakeClock()
    q = InMemoryQueue(lease_seconds=10, max_attempts=2, clock=clock)
    a, b, c = (q.enqueue(case_id=case) for case in "ABC")
    la = q.acquire("W1", now=1)
    lb = q.acquire("W2", now=2)
    q.ack(la, now=3)
    q.nack(lb, "boom", now=4)
    q.ack(q.acquire("W1", now=5), now=6)
    q.acquire("W3", now=7)
    q._expire_leases(now=17)
    q.nack(q.acquire("W4", now=20), "poison", now=22)
    q.enqueue(case_id="D", now=25)
    assert [q.item(i).state.value for i in (a, b, c)] == ["done", "done", "dead"]
    return q.log


def stale_then_replayed() -> EventLog:
    """One item, fenced and dead-lettered, then replayed and done.

    t=0   enqueue x; W1 leases it (token 1, due 10)
    t=12  W7 leases it: W1's lease expired at the sweep, so token 2 (attempt 2 of 2)
    t=13  W1 comes back and acks with token 1: stale, rejected
    t=14  W7 nacks -> dead
    t=20  replayed
    t=21  W8 leases (token 3) and acks
    """
    q = InMemoryQueue(lease_seconds=10, max_attempts=2, clock=FakeClock())
    q.enqueue(case_id="X")
    old = q.acquire("W1", now=0)
    second = q.acquire("W7", now=12)
    with pytest.raises(StaleTokenError):
        q.ack(old, now=13)
    q.nack(second, "poison", now=14)
    q.replay_dlq("item-0001", now=20)
    q.ack(q.acquire("W8", now=21), now=21)
    return q.log


# --------------------------------------------------------------------------- summaries


def test_percentile_is_nearest_rank():
    values = list(range(1, 11))  # 1..10
    assert percentile(values, 50) == 5  # rank ceil(50 * 10 / 100) = 5
    assert percentile(values, 95) == 10  # rank ceil(9.5) = 10
    assert percentile(values, 100) == 10
    assert percentile(values, 1) == 1  # rank ceil(0.1) = 1
    assert percentile([4.5], 95) == 4.5


@pytest.mark.parametrize(
    "values, q, field", [([], 50, "sorted_values"), ([1], 0, "q"), ([1], 101, "q"), ([1], "p95", "q")]
)
def test_percentile_refuses_what_has_no_answer(values, q, field):
    with pytest.raises(BadArgumentError) as err:
        percentile(values, q)
    assert err.value.field == field


def test_summary_of_values_and_of_nothing():
    twenty = Summary.of(range(20, 0, -1))  # 1..20, in any order
    # mean (1+...+20)/20 = 210/20 = 10.5; p50 rank 10 -> 10; p95 rank ceil(19.0) = 19 -> 19
    assert twenty == Summary(count=20, mean=10.5, p50=10, p95=19, max=20)
    assert str(Summary.of([3, 1, 2])) == "n=3 mean=2 p50=2 p95=3 max=3"
    assert Summary.of([]) == Summary(count=0) and str(Summary.of([])) == "n=0"


# --------------------------------------------------------------------------- queue_metrics


def test_busy_morning_counts_and_current_states():
    m = queue_metrics(busy_morning(), now=40)
    assert (m.now, m.start) == (40.0, 0.0)
    # leases: a once, b twice, c twice = 5; nacks: b at 4, c at 22
    assert (m.enqueued, m.leases, m.acked, m.nacked) == (4, 5, 2, 2)
    assert (m.expirations, m.stale_rejections, m.dead_letters, m.replays) == (1, 0, 1, 0)
    # a, b done; c dead; d ready; nothing leased
    assert (m.ready, m.in_flight, m.done, m.dead) == (1, 0, 2, 1)


def test_busy_morning_time_in_queue_attempts_and_redelivery():
    m = queue_metrics(busy_morning(), now=40)
    # first lease - enqueue: a 1-0, b 2-0, c 7-0; d never leased, so not counted.
    # mean 10/3; p50 rank ceil(1.5) = 2 -> 2; p95 rank ceil(2.85) = 3 -> 7
    assert m.time_in_queue == Summary(count=3, mean=10 / 3, p50=2, p95=7, max=7)
    # leases per item: a 1, b 2, c 2, d 0
    assert dict(m.attempts) == {0: 1, 1: 1, 2: 2} and list(m.attempts) == [0, 1, 2]
    # 5 leases for 3 distinct items: 2 were redeliveries
    assert m.redelivery_rate == pytest.approx(2 / 5)
    # 2 acks over 40 seconds
    assert m.throughput == pytest.approx(2 / 40)


def test_busy_morning_dlq_age_and_time_to_dlq():
    m = queue_metrics(busy_morning(), now=40)
    assert m.dlq_age == Summary(count=1, mean=18, p50=18, p95=18, max=18)  # c: 40 - 22
    assert m.time_to_dlq == Summary(count=1, mean=22, p50=22, p95=22, max=22)  # c: 22 - 0


def test_now_replays_the_log_only_up_to_that_time():
    m = queue_metrics(busy_morning(), now=10)
    # events up to t=10: enqueue a b c, lease a, lease b, ack a, nack b, lease b, ack b, lease c
    assert (m.enqueued, m.leases, m.acked, m.nacked, m.expirations) == (3, 4, 2, 1, 0)
    assert (m.ready, m.in_flight, m.done, m.dead) == (0, 1, 2, 0)
    assert dict(m.attempts) == {1: 2, 2: 1}  # a 1, b 2, c 1
    assert m.redelivery_rate == pytest.approx(1 / 4)
    assert m.throughput == pytest.approx(2 / 10)
    assert m.dlq_age.count == 0 and m.time_to_dlq.count == 0


def test_now_defaults_to_the_last_event():
    m = queue_metrics(busy_morning())
    assert m.now == 25.0 and m.throughput == pytest.approx(2 / 25)
    assert m.dlq_age.max == 3  # c: 25 - 22


def test_stale_rejections_dead_letters_and_replays_are_counted():
    m = queue_metrics(stale_then_replayed(), now=30)
    assert (m.enqueued, m.leases, m.acked, m.nacked, m.expirations) == (1, 3, 1, 1, 1)
    assert (m.stale_rejections, m.dead_letters, m.replays) == (1, 1, 1)
    assert (m.ready, m.in_flight, m.done, m.dead) == (0, 0, 1, 0)
    assert dict(m.attempts) == {3: 1}  # three leases of one item, across the replay
    assert m.redelivery_rate == pytest.approx(2 / 3)
    assert m.time_in_queue == Summary(count=1, mean=0, p50=0, p95=0, max=0)
    assert m.dlq_age.count == 0  # replayed: no longer in the DLQ
    assert m.time_to_dlq == Summary(count=1, mean=14, p50=14, p95=14, max=14)


def test_dlq_age_while_the_item_is_still_dead():
    m = queue_metrics(stale_then_replayed(), now=17)
    assert (m.dead, m.replays, m.acked) == (1, 0, 0)
    assert m.dlq_age == Summary(count=1, mean=3, p50=3, p95=3, max=3)  # 17 - 14
    assert m.throughput == 0.0  # 0 acks over 17 seconds


def test_an_empty_log_measures_to_zeros():
    m = queue_metrics(EventLog())
    assert (m.now, m.start, m.enqueued, m.leases, m.ready) == (0.0, 0.0, 0, 0, 0)
    assert m.throughput is None and m.redelivery_rate == 0.0 and dict(m.attempts) == {}
    assert queue_metrics(EventLog(), now=5).now == 5.0


def test_other_components_events_are_ignored():
    log = busy_morning()
    log.append(EventKind.CONTACT_SENT, 30, case_id="A", message_id="msg-0001")
    log.append(EventKind.WORKER_CRASHED, 31, worker_id="W3")
    assert queue_metrics(log, now=40) == queue_metrics(busy_morning(), now=40)


def test_metrics_read_a_log_rebuilt_from_dicts_the_same_way():
    log = busy_morning()
    assert queue_metrics(EventLog.from_dicts(log.to_dicts()), now=40) == queue_metrics(log, now=40)


def test_metrics_are_a_frozen_record_with_a_deterministic_table():
    m = queue_metrics(busy_morning(), now=40)
    assert isinstance(m, QueueMetrics)
    with pytest.raises(AttributeError):
        m.acked = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        m.attempts[9] = 1  # type: ignore[index]
    assert str(m) == "\n".join(
        [
            "queue metrics from t=0 to t=40",
            "  enqueued            4",
            "  leases              5",
            "  acked               2",
            "  nacked              2",
            "  expirations         1",
            "  stale rejections    0",
            "  dead letters        1",
            "  replays             0",
            "  now                 ready=1 in_flight=0 done=2 dead=1",
            "  time in queue (s)   n=3 mean=3.333 p50=2 p95=7 max=7",
            "  attempts histogram  0:1  1:1  2:2",
            "  redelivery rate     0.4",
            "  throughput          0.05 acks/s",
            "  DLQ age (s)         n=1 mean=18 p50=18 p95=18 max=18",
            "  time to DLQ (s)     n=1 mean=22 p50=22 p95=22 max=22",
        ]
    )


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: queue_metrics([]), "log"),
        (lambda: queue_metrics(EventLog(), now=math.nan), "now"),
        (lambda: queue_metrics(EventLog(), now="later"), "now"),
        (lambda: series(EventLog(), 0), "bucket_seconds"),
        (lambda: series(EventLog(), -5), "bucket_seconds"),
        (lambda: series(EventLog(), math.inf), "bucket_seconds"),
        (lambda: series(EventLog(), "10"), "bucket_seconds"),
        (lambda: series(busy_morning(), 1e-6), "bucket_seconds"),  # 25 s / 1 us = 25 million samples
    ],
)
def test_bad_arguments_name_the_field(call, field):
    with pytest.raises(BadArgumentError) as err:
        call()
    assert err.value.field == field


# --------------------------------------------------------------------------- series


def test_series_samples_depth_in_flight_and_acks_per_bucket():
    s = series(busy_morning(), 10, now=40)
    assert isinstance(s, Series) and s.bucket_seconds == 10.0
    # Samples at 0, 10, 20, 30, 40; each covers everything up to and including its time.
    # t=0:  a b c enqueued                                  -> 3 ready
    # t=10: a done, b done (2 acks), c leased               -> 0 ready, 1 leased
    # t=20: c expired at 17, leased again at 20             -> 0 ready, 1 leased
    # t=30: c dead at 22, d enqueued at 25                  -> 1 ready, 0 leased
    # t=40: nothing new                                     -> 1 ready, 0 leased
    assert s.depth == [(0, 3), (10, 0), (20, 0), (30, 1), (40, 1)]
    assert s.in_flight == [(0, 0), (10, 1), (20, 1), (30, 0), (40, 0)]
    assert s.acks == [(0, 0), (10, 2), (20, 0), (30, 0), (40, 0)]
    assert s.throughput == [(0, 0), (10, 0.2), (20, 0), (30, 0), (40, 0)]


def test_series_levels_agree_with_queue_metrics_at_every_sample():
    log = busy_morning()
    s = series(log, 5, now=40)
    for (t, depth), (_, in_flight) in zip(s.depth, s.in_flight):
        m = queue_metrics(log, now=t)
        assert (depth, in_flight) == (m.ready, m.in_flight), t
    assert sum(n for _, n in s.acks) == queue_metrics(log, now=40).acked


def test_series_starts_at_the_bucket_holding_the_first_event_and_ends_at_or_after_now():
    log = EventLog()
    log.append(EventKind.ENQUEUED, 12, item_id="i1", case_id="A")
    log.append(EventKind.LEASED, 13, item_id="i1", case_id="A", worker_id="W1", token=1, attempt=1)
    log.append(EventKind.ACKED, 27, item_id="i1", case_id="A", worker_id="W1", token=1, attempt=1)
    s = series(log, 10)
    # first event at 12 -> first sample at 10; the last event at 27 -> last sample at 30
    assert s.depth == [(10, 0), (20, 0), (30, 0)]
    assert s.in_flight == [(10, 0), (20, 1), (30, 0)]
    assert s.acks == [(10, 0), (20, 0), (30, 1)]


def test_series_puts_events_on_a_boundary_into_that_sample_despite_float_rounding():
    log = EventLog()
    # In floats 0.3 / 0.1 = 2.9999999999999996 and 1.1 / 0.1 = 11.000000000000002: naive
    # ceil() would still get 0.3 right but file 1.1 under the sample at 1.2.
    for n, t in enumerate((0.0, 0.1, 0.2, 0.3, 0.7, 1.1)):
        log.append(EventKind.ENQUEUED, t, item_id=f"i{n}", case_id=f"C{n}")
    s = series(log, 0.1)
    assert [n for _, n in s.depth] == [1, 2, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6]
    assert [t for t, _ in s.depth] == pytest.approx([k / 10 for k in range(12)])


def test_series_of_an_empty_log_or_before_the_first_event_is_empty():
    assert series(EventLog(), 10) == Series(bucket_seconds=10.0, depth=[], in_flight=[], acks=[], throughput=[])
    assert series(busy_morning(), 10, now=-1).depth == []
