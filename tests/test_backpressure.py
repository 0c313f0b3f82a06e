"""The gateway's signals and the policies that read them: p95 by nearest rank over a
rolling window, saturation past capacity, spikes, and a ladder that sheds bulk first."""

from __future__ import annotations

import random

import pytest

from shopops_lab.backpressure import (
    BackpressurePolicy,
    Decision,
    Gateway,
    NoBackpressure,
    Signals,
    acquire,
    as_policy,
    describe_policy,
    wait,
)
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import EventKind, EventLog
from shopops_lab.latency import LatencyModel
from shopops_lab.worker.queue import Priority

MODEL = LatencyModel(p50=6, p99=40, max=120)


def signals(p95: float = 0.0, depth: int = 100, in_flight: int = 0, now: float = 0.0) -> Signals:
    return Signals(gateway_p95=p95, depth=depth, in_flight=in_flight, now=now)


# --------------------------------------------------------------------------- the gateway


def test_p95_is_nearest_rank_over_the_window():
    gw = Gateway(MODEL, window=20)
    assert gw.p95() == 0.0  # no calls: no evidence of slowness
    for seconds in range(1, 21):  # 1..20
        gw.record(float(seconds), 0.0)
    assert gw.p95() == 19.0  # rank ceil(0.95 * 20) = 19
    gw.record(100.0, 1.0)  # pushes 1 out: window is 2..20, 100
    assert gw.p95() == 20.0
    for _ in range(20):
        gw.record(5.0, 2.0)  # the slow ones scroll out of the window
    assert gw.p95() == 5.0
    assert gw.calls == 41


def test_old_calls_age_out_of_the_p95():
    gw = Gateway(MODEL, window=50, max_age=60)
    gw.record(90.0, 10.0)
    gw.record(5.0, 50.0)
    assert gw.p95(now=60.0) == 90.0
    assert gw.p95(now=80.0) == 5.0  # the call finished at t=10 is older than 60 s
    assert gw.p95(now=200.0) == 0.0
    assert Gateway(MODEL, max_age=None).p95(now=1e9) == 0.0


def test_calls_slow_down_past_capacity_and_time_out_at_max():
    rng_a, rng_b = random.Random(1), random.Random(1)
    calm, busy = Gateway(MODEL, capacity=2), Gateway(MODEL, capacity=2)
    busy.in_flight = 3  # three calls already running: this one is the fourth of capacity 2
    first = calm.start_call(rng_a)
    slowed = busy.start_call(rng_b)
    assert slowed == pytest.approx(min(first * 2, MODEL.max), abs=0.002)
    assert calm.in_flight == 1 and busy.in_flight == 4
    assert calm.finish_call(first, now=first) is False
    assert calm.in_flight == 0 and calm.p95() == first
    assert calm.finish_call(120.0, now=200.0) is True
    assert calm.timeouts == 1


def test_finish_call_logs_a_gateway_call_event():
    log = EventLog()
    gw = Gateway(MODEL, log=log)
    seconds = gw.start_call(random.Random(3))
    gw.finish_call(seconds, now=seconds, worker_id="W1", item_id="item-0001", case_id="O-1001")
    (event,) = log.where(EventKind.GATEWAY_CALL)
    assert (event.worker_id, event.item_id, event.case_id) == ("W1", "item-0001", "O-1001")
    assert event.info["seconds"] == seconds and event.info["in_flight"] == 0
    assert event.info["timed_out"] is False


def test_a_spike_swaps_in_a_scaled_latency_until_it_ends():
    gw = Gateway(MODEL)
    gw.spike(4)
    assert gw.latency == MODEL.scaled(4) and gw.slowdown == 4
    gw.spike(2)
    assert gw.latency == MODEL.scaled(8)
    gw.end_spike(4)
    assert gw.latency == MODEL.scaled(2)
    gw.end_spike(2)
    assert gw.latency == MODEL and gw.slowdown == 1
    with pytest.raises(BadArgumentError, match="no spike"):
        gw.end_spike(3)
    with pytest.raises(BadArgumentError, match="factor"):
        gw.spike(0)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"window": 0}, "window"),
        ({"capacity": 0}, "capacity"),
        ({"max_age": -1}, "max_age"),
    ],
)
def test_gateway_rejects_bad_settings(kwargs, field):
    with pytest.raises(BadArgumentError, match=field):
        Gateway(MODEL, **kwargs)
    with pytest.raises(BadArgumentError, match="latency"):
        Gateway("fast")


# --------------------------------------------------------------------------- decisions


def test_acquire_and_wait_build_decisions():
    assert acquire() == Decision() and not acquire().waits
    shed = acquire(max_priority=Priority.NORMAL, reason="busy")
    assert shed.max_priority == Priority.NORMAL and shed.reason == "busy"
    pause = wait(2)
    assert pause.waits and pause.wait_seconds == 2.0 and pause.max_priority is None
    with pytest.raises(BadArgumentError, match="seconds"):
        wait(0)
    with pytest.raises(BadArgumentError, match="max_priority"):
        Decision(max_priority="bulk")
    with pytest.raises(BadArgumentError, match="not both"):
        Decision(max_priority=0, wait_seconds=1)


# --------------------------------------------------------------------------- the reference policy


def test_the_ladder_sheds_bulk_then_everything_but_approvals_then_waits():
    policy = BackpressurePolicy(p95_budget=30, p95_hard=60, stop_p95=100, min_delay=2)
    assert policy(signals(p95=10)) == acquire()
    assert policy(signals(p95=45)).max_priority == Priority.NORMAL  # bulk waits
    assert policy(signals(p95=75)).max_priority == Priority.APPROVAL  # approvals only
    stop = policy(signals(p95=110))
    assert stop.waits and stop.wait_seconds == 2
    assert policy.decide(gateway_p95=45, depth=100, in_flight=0, now=0) == policy(signals(p95=45))


def test_the_in_flight_cap_keeps_a_lane_for_approvals():
    policy = BackpressurePolicy(max_in_flight=10)
    assert policy(signals(in_flight=9)) == acquire()
    assert policy(signals(in_flight=10)).max_priority == Priority.APPROVAL


def test_a_short_queue_is_never_shed():
    policy = BackpressurePolicy(p95_budget=30, p95_hard=60, soft_depth=5)
    assert policy(signals(p95=500, depth=5)) == acquire()
    assert policy(signals(p95=500, depth=6)).max_priority == Priority.APPROVAL


def test_approvals_are_never_held_back_before_bulk():
    """Whatever the signals, the reference policy's limit never excludes approvals while
    admitting bulk: shedding order is bulk, then intake, then (only when waiting) all."""
    policy = BackpressurePolicy(p95_budget=30, p95_hard=60, stop_p95=100, max_in_flight=5)
    for p95 in (0, 29, 31, 59, 61, 99, 101, 500):
        for in_flight in (0, 4, 5, 50):
            decision = policy(signals(p95=p95, in_flight=in_flight))
            if not decision.waits:
                assert decision.max_priority is None or decision.max_priority >= Priority.APPROVAL


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"p95_budget": 0}, "p95_budget"),
        ({"p95_budget": 50, "p95_hard": 40}, "p95_hard"),
        ({"stop_p95": 10}, "stop_p95"),
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"soft_depth": -1}, "soft_depth"),
        ({"min_delay": 0}, "min_delay"),
    ],
)
def test_policy_rejects_inconsistent_thresholds(kwargs, field):
    with pytest.raises(BadArgumentError, match=field):
        BackpressurePolicy(**kwargs)


def test_no_backpressure_always_takes_anything():
    none = NoBackpressure()
    assert none(signals(p95=1e6, in_flight=10**6)) == acquire()
    assert none.decide(gateway_p95=1e6, depth=1, in_flight=1, now=0) == acquire()


# --------------------------------------------------------------------------- your own policy


def test_a_plain_function_is_a_policy():
    def approvals_when_slow(s):
        return acquire(max_priority=Priority.APPROVAL) if s.gateway_p95 > 40 else acquire()

    policy = as_policy(approvals_when_slow)
    assert policy(signals(p95=50)).max_priority == Priority.APPROVAL
    assert policy(signals(p95=10)) == acquire()
    assert describe_policy(approvals_when_slow).endswith("approvals_when_slow")


def test_an_object_with_decide_is_a_policy():
    class Careful:
        def decide(self, *, gateway_p95, depth, in_flight, now):
            return wait(1) if in_flight > 3 else acquire()

    policy = as_policy(Careful())
    assert policy(signals(in_flight=4)).waits
    assert policy(signals(in_flight=1)) == acquire()


def test_a_policy_must_return_a_decision():
    policy = as_policy(lambda s: "acquire")
    with pytest.raises(BadArgumentError, match="returned 'acquire'"):
        policy(signals())
    with pytest.raises(BadArgumentError, match="policy"):
        as_policy(42)
    kit = BackpressurePolicy()
    assert as_policy(kit) is kit
    assert describe_policy(kit) == repr(kit) and "0x" not in describe_policy(lambda s: acquire())
