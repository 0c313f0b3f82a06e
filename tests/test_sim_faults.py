"""Every named fault, provoked on purpose, and its consequence read back from the log."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from shopops_lab.backpressure import NoBackpressure
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import EventKind as K
from shopops_lab.latency import LatencyModel
from shopops_lab.sim import Fault, FaultKind, FaultRates, Scenario, run

QUIET = Scenario(name="quiet", description="three cases, two workers", items=3, workers=2)
SLOW = Scenario(
    name="slow",
    description="three cases, two workers, long model calls",
    items=3,
    workers=2,
    latency=LatencyModel(p50=80.0, p99=110.0, max=120.0),
)


def kinds(report, **where):
    return [e.kind for e in report.log.where(**where)]


def first(report, kind, **where):
    found = report.log.where(kind, **where)
    assert found, f"no {kind} event matching {where}"
    return found[0]


# --------------------------------------------------------------------------- kill_worker


def test_kill_mid_lease_expires_and_another_worker_redelivers():
    report = run(QUIET, seed=0, faults=[Fault("kill_worker", item="O-1001", duration=math.inf)])
    crash = first(report, K.WORKER_CRASHED)
    victim = crash.worker_id
    assert crash.item_id == "item-0001" and crash.token == 1
    expired = first(report, K.EXPIRED, item_id="item-0001")
    assert expired.token == 1 and expired.time > crash.time
    again = [e for e in report.log.where(K.LEASED, item_id="item-0001") if e.attempt == 2][0]
    assert again.worker_id != victim and again.token == 2 and again.time >= expired.time
    acked = first(report, K.ACKED, item_id="item-0001")
    assert acked.worker_id == again.worker_id
    # the email went out before the crash; the redelivery's send was deduped
    assert len(report.log.where(K.CONTACT_SENT, case_id="O-1001")) == 1
    assert first(report, K.CONTACT_DEDUPED, case_id="O-1001").worker_id == again.worker_id
    assert report.lost == 0 and report.double_contacts == 0 and report.valid is True
    assert not report.log.where(K.WORKER_RESUMED, worker_id=victim)  # duration=inf: never restarted


def test_kill_with_the_naive_adapter_contacts_the_customer_twice():
    report = run(QUIET, seed=0, adapter="naive", faults=[Fault("kill_worker", item="O-1001")])
    assert len(report.log.where(K.CONTACT_SENT, case_id="O-1001")) == 2
    assert report.double_contacts == 1 and report.valid is False


def test_kill_mid_call_leaves_the_call_running_and_restarts_the_worker():
    report = run(QUIET, seed=0, faults=[Fault("kill_worker", item="O-1001", point="mid_call", duration=45)])
    crash = first(report, K.WORKER_CRASHED)
    call = first(report, K.GATEWAY_CALL, item_id="item-0001")
    assert call.time > crash.time and call.worker_id == crash.worker_id  # the gateway finished it anyway
    nothing_sent_before = [e for e in report.log.where(K.CONTACT_SENT, case_id="O-1001") if e.time <= crash.time]
    assert nothing_sent_before == []
    back = first(report, K.WORKER_RESUMED, worker_id=crash.worker_id)
    assert back.info["restarted"] is True and back.time == pytest.approx(crash.time + 45)
    assert report.lost == 0 and report.double_contacts == 0


def test_a_timed_kill_strikes_at_its_time():
    report = run(QUIET, seed=0, faults=[Fault("kill_worker", worker="W2", at=3.0)])
    crash = first(report, K.WORKER_CRASHED)
    assert (crash.worker_id, crash.time) == ("W2", 3.0)
    assert crash.item_id is not None  # W2 was mid-lease at t=3
    assert first(report, K.EXPIRED, item_id=crash.item_id).token == crash.token
    assert report.lost == 0


# --------------------------------------------------------------------------- pause_worker


def test_pause_past_the_lease_is_refused_by_fencing_and_deduped():
    report = run(QUIET, seed=0, faults=[Fault("pause_worker", item="O-1001", duration=90)])
    paused = first(report, K.WORKER_PAUSED)
    stale = paused.worker_id
    resumed = first(report, K.WORKER_RESUMED, worker_id=stale)
    newer = [e for e in report.log.where(K.LEASED, item_id="item-0001") if e.token == 2][0]
    assert paused.time < newer.time < resumed.time and newer.worker_id != stale
    # the stale worker sends anyway (its handler does not check), the key saves the customer
    late = [e for e in report.log.where(K.CONTACT_DEDUPED, case_id="O-1001") if e.worker_id == stale]
    assert late and late[0].time == resumed.time
    refused = first(report, K.STALE_REJECTED, worker_id=stale)
    assert (refused.token, refused.info["current"], refused.info["op"]) == (1, 2, "checkpoint")
    assert first(report, K.LEASE_LOST, worker_id=stale).info["op"] == "checkpoint"
    assert len(report.log.where(K.CONTACT_SENT, case_id="O-1001")) == 1
    assert report.double_contacts == 0 and report.valid is True


def test_without_checkpoints_the_queue_refuses_the_stale_ack():
    no_checkpoints = Scenario(name="nockp", description="", items=3, workers=2, checkpoints=False)
    report = run(no_checkpoints, seed=0, faults=[Fault("pause_worker", item="O-1001", duration=90)])
    refused = first(report, K.STALE_REJECTED)
    assert refused.info["op"] == "ack" and refused.token == 1
    assert not report.log.where(K.CHECKPOINT_WRITTEN)
    assert report.valid is True


def test_an_unfenced_checkpoint_store_accepts_the_stale_write_and_the_checker_says_so():
    unfenced = Scenario(name="unfenced", description="", items=3, workers=2, fenced_checkpoints=False)
    report = run(unfenced, seed=0, faults=[Fault("pause_worker", item="O-1001", duration=90)])
    accepted = first(report, K.STALE_WRITE_ACCEPTED)
    assert accepted.token == 1 and accepted.info["current"] == 2
    assert report.valid is False
    assert "stale_write_accepted" in {a.name for a in report.anomalies}


def test_heartbeat_before_send_stops_the_stale_worker_before_it_sends():
    careful = Scenario(name="careful", description="", items=3, workers=2, heartbeat_before_send=True)
    report = run(careful, seed=0, faults=[Fault("pause_worker", item="O-1001", duration=90)])
    stale = first(report, K.WORKER_PAUSED).worker_id
    assert first(report, K.LEASE_LOST, worker_id=stale).info["op"] == "heartbeat"
    assert not [e for e in report.log.where(K.CONTACT_SENT, case_id="O-1001") if e.worker_id == stale]
    assert not report.log.where(K.CONTACT_DEDUPED, case_id="O-1001")


def test_a_pause_mid_call_ends_at_the_refused_heartbeat():
    report = run(SLOW, seed=0, faults=[Fault("pause_worker", item="O-1001", point="mid_call", duration=40)])
    stale = first(report, K.WORKER_PAUSED).worker_id
    lost = first(report, K.LEASE_LOST, worker_id=stale)
    assert lost.info["op"] == "heartbeat" and lost.token == 1
    assert first(report, K.WORKER_RESUMED, worker_id=stale).time < lost.time
    # nothing was sent under the stale lease; the case was sent once, under a newer one
    (sent,) = report.log.where(K.CONTACT_SENT, case_id="O-1001")
    assert sent.time > lost.time
    assert first(report, K.ACKED, item_id="item-0001").token == 2
    assert report.lost == 0 and report.double_contacts == 0


def test_a_timed_pause_freezes_the_worker_from_outside():
    report = run(SLOW, seed=0, faults=[Fault("pause_worker", worker="W1", at=5.0, duration=60)])
    paused = first(report, K.WORKER_PAUSED, worker_id="W1")
    resumed = first(report, K.WORKER_RESUMED, worker_id="W1")
    assert (paused.time, resumed.time) == (5.0, 65.0)
    frozen = [e for e in report.log.where(worker_id="W1") if 5.0 < e.time < 65.0 and e.kind is not K.GATEWAY_CALL]
    assert frozen == [] or all(e.kind is K.EXPIRED for e in frozen)  # W1 itself did nothing while frozen
    lost = first(report, K.LEASE_LOST, worker_id="W1")
    assert lost.time == 65.0 and lost.info["op"] == "heartbeat"  # its overdue heartbeat fires on thaw
    assert report.lost == 0 and report.double_contacts == 0


# --------------------------------------------------------------------------- lose_ack


def test_a_lost_ack_means_redelivery_and_a_deduped_resend():
    report = run(QUIET, seed=0, faults=[Fault("lose_ack", item="O-1001")])
    lost_ack = first(report, K.ACK_LOST)
    assert lost_ack.item_id == "item-0001"
    assert first(report, K.EXPIRED, item_id="item-0001").time > lost_ack.time
    redelivered = [e for e in report.log.where(K.LEASED, item_id="item-0001") if e.attempt == 2]
    assert redelivered and report.redeliveries == 1
    assert len(report.log.where(K.CONTACT_SENT, case_id="O-1001")) == 1
    assert len(report.log.where(K.CONTACT_DEDUPED, case_id="O-1001")) == 1
    assert report.valid is True
    naive = run(QUIET, seed=0, adapter="naive", faults=[Fault("lose_ack", item="O-1001")])
    assert naive.double_contacts == 1


# --------------------------------------------------------------------------- drop_reply


def test_a_dropped_reply_is_reconciled_instead_of_resent():
    report = run(QUIET, seed=0, faults=[Fault("drop_reply", item="O-1002")])
    unknown = first(report, K.EFFECT_UNKNOWN, case_id="O-1002")
    sent = first(report, K.CONTACT_SENT, case_id="O-1002")
    looked_up = first(report, K.EFFECT_RECONCILED, case_id="O-1002")
    assert looked_up.seq > unknown.seq and looked_up.worker_id == unknown.worker_id
    assert looked_up.info["status"] == "ok" and looked_up.info["message_id"] == sent.info["message_id"]
    assert first(report, K.ACKED, item_id="item-0002").attempt == 1
    assert report.redeliveries == 0 and report.contacts == 3 and report.valid is True
    naive = run(QUIET, seed=0, adapter="naive", faults=[Fault("drop_reply", item="O-1002")])
    assert naive.double_contacts == 0  # reconciling needs no key: it asks what happened


def test_without_reconciliation_an_unknown_send_is_retried():
    blind = Scenario(name="blind", description="", items=3, workers=2, reconcile_unknown=False)
    report = run(blind, seed=0, faults=[Fault("drop_reply", item="O-1002")])
    failed = first(report, K.HANDLER_FAILED, item_id="item-0002")
    assert "unknown" in failed.info["error"]
    assert first(report, K.NACKED, item_id="item-0002").attempt == 1
    assert len(report.log.where(K.CONTACT_DEDUPED, case_id="O-1002")) == 1
    assert report.double_contacts == 0
    naive = run(blind, seed=0, adapter="naive", faults=[Fault("drop_reply", item="O-1002")])
    assert naive.double_contacts == 1 and naive.valid is False


# --------------------------------------------------------------------------- deliver_twice


def test_a_duplicate_delivery_runs_on_two_workers_and_reaches_the_customer_once():
    report = run(QUIET, seed=0, faults=[Fault("deliver_twice", item="O-1001")])
    twice = first(report, K.DELIVERED_TWICE)
    assert twice.item_id == "item-0001" and twice.worker_id != twice.info["first_worker"]
    started = report.log.where(K.HANDLER_STARTED, item_id="item-0001")
    assert {e.worker_id for e in started} == {twice.worker_id, twice.info["first_worker"]}
    assert {e.token for e in started} == {1}  # the same lease, twice
    assert len(report.log.where(K.CONTACT_SENT, case_id="O-1001")) == 1
    assert len(report.log.where(K.CONTACT_DEDUPED, case_id="O-1001")) == 1
    assert len(report.log.where(K.ACKED, item_id="item-0001")) == 1
    assert "already acked" in first(report, K.LEASE_LOST, item_id="item-0001").info["reason"]
    assert report.lost == 0 and report.valid is True
    naive = run(QUIET, seed=0, adapter="naive", faults=[Fault("deliver_twice", item="O-1001")])
    assert naive.double_contacts == 1


def test_a_copy_nobody_else_can_take_does_not_keep_the_run_going():
    solo = Scenario(name="solo", description="one worker", items=2, workers=1)
    report = run(solo, seed=0, faults=[Fault("deliver_twice", item="O-1001")])
    assert first(report, K.FAULT_INJECTED).info["fault"] == "deliver_twice"
    assert not report.log.where(K.DELIVERED_TWICE)  # a worker never takes its own copy
    assert report.done == 2 and report.sim_time < 200


# --------------------------------------------------------------------------- gateway_spike


def _p95(values):
    ordered = sorted(values)
    return ordered[math.ceil(0.95 * len(ordered)) - 1]


def test_a_gateway_spike_raises_p95_and_the_policy_sheds_but_approvals_flow():
    spike = Fault("gateway_spike", at=100.0, duration=600.0, factor=4.0)
    report = run("burst_day", seed=3, items=1_200, faults=[spike])
    calls = [(e.time, e.info["seconds"]) for e in report.log.where(K.GATEWAY_CALL)]
    before = [s for t, s in calls if t < 100]
    during = [s for t, s in calls if 200 <= t < 700]
    assert _p95(during) > 2 * _p95(before)
    marks = [e for e in report.log.where(K.FAULT_INJECTED) if e.info["fault"] == "gateway_spike"]
    assert [(e.time, e.info.get("phase")) for e in marks] == [(100.0, None), (700.0, "over")]
    # the policy noticed the p95 and held back everything but approvals
    held = [e for e in report.log.where(K.THROTTLED) if 100 <= e.time < 700 and "p95" in e.info["reason"]]
    assert held and all(e.info["max_priority"] == 0 for e in held)
    kind = {e.item_id: e.info["kind"] for e in report.log.where(K.ENQUEUED)}
    leased = Counter(kind[e.item_id] for e in report.log.where(K.LEASED) if 200 <= e.time < 700)
    acked = Counter(kind[e.item_id] for e in report.log.where(K.ACKED) if 200 <= e.time < 700)
    assert leased["bulk_outreach"] == 0
    assert acked["approval_resume"] > 0  # approvals still flow through the spike
    assert report.lost == 0 and report.valid is True
    # without backpressure the same spike piles every worker on and calls time out
    melted = run("burst_day", seed=3, items=1_200, faults=[spike], policy=NoBackpressure())
    assert melted.metrics["gateway_timeouts"] > report.metrics["gateway_timeouts"]
    assert not melted.log.where(K.THROTTLED)


# --------------------------------------------------------------------------- poison


def test_poison_fails_every_attempt_and_lands_in_the_dlq():
    report = run("poison", seed=0)
    item = first(report, K.ENQUEUED, case_id="O-1003").item_id
    assert [e.attempt for e in report.log.where(K.LEASED, item_id=item)] == [1, 2, 3, 4, 5]
    failures = report.log.where(K.HANDLER_FAILED, item_id=item)
    assert len(failures) == 5 and all("bad payload" in e.info["error"] for e in failures)
    dead = first(report, K.DEAD_LETTERED, item_id=item)
    assert dead.attempt == 5
    assert not report.log.where(K.CONTACT_SENT, case_id="O-1003")
    assert not report.log.where(K.GATEWAY_CALL, item_id=item)  # it never reached the model
    assert report.dead_lettered == 1 and report.lost == 0 and report.valid is True


def test_a_poison_fault_can_target_any_item():
    report = run(QUIET, seed=0, faults=[Fault("poison", item="item-0002")])
    assert first(report, K.DEAD_LETTERED).item_id == "item-0002"
    assert report.done == 2


# --------------------------------------------------------------------------- faults as data


def test_faults_are_validated_and_print_as_python():
    for fault in (
        Fault("kill_worker", item="O-1001"),
        Fault("kill_worker", worker="W1", at=5),
        Fault("pause_worker", item="O-1", point="mid_call", duration=90),
        Fault("gateway_spike", at=100, duration=600, factor=4),
        Fault("lose_ack"),
        Fault("kill_worker", item="x", duration=math.inf),
    ):
        assert eval(repr(fault), {"Fault": Fault, "math": math}) == fault
    assert Fault("kill_worker", worker="W1", at=5).timed
    assert not Fault("kill_worker", worker="W1", point="after_send").timed
    assert Fault("lose_ack").kind is FaultKind.LOSE_ACK
    with pytest.raises(BadArgumentError, match="kind"):
        Fault("meteor")
    with pytest.raises(BadArgumentError, match="point"):
        Fault("lose_ack", point="mid_call")
    with pytest.raises(BadArgumentError, match="factor"):
        Fault("kill_worker", factor=2)
    with pytest.raises(BadArgumentError, match="duration"):
        Fault("pause_worker", item="O-1001", duration=0)
    with pytest.raises(BadArgumentError, match="at"):
        Fault("lose_ack", at=-1)
    with pytest.raises(BadArgumentError, match="duration"):
        Fault("lose_ack", duration=5)
    with pytest.raises(BadArgumentError, match="worker"):
        Fault("poison", worker="W1")
    with pytest.raises(BadArgumentError, match="item"):
        Fault("gateway_spike", item="O-1001")
    with pytest.raises(BadArgumentError, match="per delivery"):
        FaultRates(kill_worker=0.6, lose_ack=0.6)


def test_a_fault_waits_for_its_time_and_its_target():
    report = run(QUIET, seed=0, faults=[Fault("lose_ack", at=1e6)])
    assert not report.log.where(K.ACK_LOST)  # armed after the run was over
    report = run(QUIET, seed=0, faults=[Fault("lose_ack", worker="W2")])
    assert first(report, K.ACK_LOST).worker_id == "W2"
    every = [e.kind for e in report.log.where(K.FAULT_INJECTED)]
    assert every == [K.FAULT_INJECTED]  # it struck once
