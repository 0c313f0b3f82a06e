"""The simulator as a whole: determinism, the story scenarios, burst day at full size,
the report, and step mode with rewind."""

from __future__ import annotations

import ast
import dataclasses
import json
import math
from pathlib import Path

import pytest

from shopops_lab.backpressure import NoBackpressure, acquire
from shopops_lab.checker import CheckResult
from shopops_lab.errors import BadArgumentError, UnknownScenarioError
from shopops_lab.events import EventKind as K
from shopops_lab.sim import SCENARIOS, Fault, FaultRates, Report, Scenario, SimStep, Simulation, Snapshot, run
from shopops_lab.sim.config import RunConfig

QUIET = Scenario(name="quiet", description="three cases, two workers, nothing goes wrong", items=3, workers=2)


# --------------------------------------------------------------------------- determinism


def test_same_seed_same_event_log():
    first = run("burst_day", seed=11, items=400)
    again = run("burst_day", seed=11, items=400)
    assert first.log.to_dicts() == again.log.to_dicts()
    assert first.as_dict() == again.as_dict()
    assert str(first) == str(again)


def test_a_different_seed_tells_a_different_story():
    assert run("burst_day", seed=1, items=400).log.to_dicts() != run("burst_day", seed=2, items=400).log.to_dicts()


def test_a_policy_function_replays_exactly():
    def shed_when_slow(signals):
        return acquire(max_priority=0) if signals.gateway_p95 > 30 else acquire()

    a = run("burst_day", seed=5, items=300, policy=shed_when_slow)
    b = run("burst_day", seed=5, items=300, policy=shed_when_slow)
    assert a.log.to_dicts() == b.log.to_dicts()
    assert "policy=" in a.python_replay and "shed_when_slow" in a.python_replay


# --------------------------------------------------------------------------- the stories


def test_quiet_run_does_every_item_once():
    report = run(QUIET, seed=0)
    assert (report.items, report.done, report.dead_lettered, report.lost) == (3, 3, 0, 0)
    assert report.contacts == 3 and report.double_contacts == 0 and report.redeliveries == 0
    sent = report.log.where(K.CONTACT_SENT)
    assert sorted(e.info["idem_key"] for e in sent) == ["O-1001:email:1", "O-1002:email:1", "O-1003:email:1"]
    assert report.valid is True and report.final


def test_forced_expiry_sends_one_email_with_the_idempotent_adapter():
    report = run("forced_expiry", seed=0)
    assert report.lost == 0 and report.redeliveries == 1
    o1001 = report.log.where(K.CONTACT_SENT, case_id="O-1001")
    assert len(o1001) == 1
    assert len(report.log.where(K.CONTACT_DEDUPED, case_id="O-1001")) == 1
    assert report.double_contacts == 0 and report.valid is True


def test_forced_expiry_with_the_naive_adapter_emails_twice():
    report = run("forced_expiry", seed=0, adapter="naive")
    assert len(report.log.where(K.CONTACT_SENT, case_id="O-1001")) == 2
    assert report.double_contacts == 1
    assert report.valid is False
    assert [a.name for a in report.anomalies] == ["double_contact"]


def test_poison_scenario_dead_letters_one_item():
    report = run("poison", seed=0)
    assert (report.done, report.dead_lettered, report.lost) == (5, 1, 0)
    assert report.metrics["attempts"] == {"1": 5, "5": 1}


def test_stale_worker_scenario_is_refused_by_fencing():
    report = run("stale_worker", seed=0)
    refused = report.log.where(K.STALE_REJECTED, worker_id="W1")
    assert refused and refused[0].info["op"] == "checkpoint"
    assert report.double_contacts == 0 and report.valid is True


# --------------------------------------------------------------------------- burst day


def test_burst_day_full_size_loses_nothing_and_contacts_nobody_twice():
    report = run("burst_day", seed=7)
    m = report.metrics
    assert report.items == 10_000
    assert report.lost == 0
    assert report.done + report.dead_lettered == 10_000
    assert report.double_contacts == 0
    assert report.contacts == report.done
    assert report.valid is True, str(report)
    # every kind of random fault struck, and the run still came out clean
    for name in ("crashes", "pauses", "acks_lost", "unknown_outcomes", "duplicate_deliveries"):
        assert m[name] > 0, name
    assert report.dead_lettered > 0  # the poison items
    assert m["sends_deduped"] > 0  # redeliveries that the idempotency key absorbed
    assert m["approval_wait_count"] > 0 and m["throttled"] > 0


def test_burst_day_with_the_naive_adapter_contacts_customers_twice():
    report = run("burst_day", seed=7, items=2_000, adapter="naive")
    assert report.double_contacts > 0
    assert report.contacts > report.done
    assert report.valid is False
    assert {a.name for a in report.anomalies} == {"double_contact"}


def test_burst_day_mixes_the_three_kinds():
    report = run("burst_day", seed=3, items=1_000)
    kinds = [e.info["kind"] for e in report.log.where(K.ENQUEUED)]
    approvals, bulk = kinds.count("approval_resume"), kinds.count("bulk_outreach")
    assert 20 <= approvals <= 90 and 330 <= bulk <= 470
    assert kinds.count("intake_build") == 1_000 - approvals - bulk
    approval_times = [e.time for e in report.log.where(K.ENQUEUED) if e.info["kind"] == "approval_resume"]
    assert max(approval_times) > 0  # approvals trickle in after the burst


def test_the_run_stops_at_the_horizon_and_counts_what_is_left_as_lost():
    short = Scenario(name="short", description="a day cut short", items=50, workers=2, horizon=30.0)
    report = run(short, seed=0)
    assert report.sim_time <= 30.0 and report.final
    assert report.lost == 50 - report.done - report.dead_lettered > 0
    assert "lost_item" in {a.name for a in report.anomalies}


def test_random_rates_come_from_the_one_rng():
    noisy = Scenario(
        name="noisy",
        description="everything at once",
        items=300,
        workers=6,
        rates=FaultRates(
            kill_worker=0.05, pause_worker=0.05, lose_ack=0.05, drop_reply=0.05, deliver_twice=0.05, poison=0.02
        ),
    )
    a, b = run(noisy, seed=9), run(noisy, seed=9)
    assert a.log.to_dicts() == b.log.to_dicts()
    struck = {e.info["fault"] for e in a.log.where(K.FAULT_INJECTED) if e.info["source"] == "random"}
    assert struck == {"kill_worker", "pause_worker", "lose_ack", "drop_reply", "deliver_twice", "poison"}
    assert a.lost == 0 and a.double_contacts == 0


# --------------------------------------------------------------------------- the report


def test_report_summary_names_the_seed_and_how_to_replay():
    report = run("stale_worker", seed=4, adapter="naive")
    text = str(report)
    assert "seed=4" in text
    assert "replay: shopops-lab simulate stale_worker --seed 4 --adapter naive" in text
    assert "python: from shopops_lab.sim import run; run('stale_worker', seed=4, adapter='naive')" in text
    assert "0x" not in text


def test_python_replay_line_rebuilds_the_same_run():
    report = run(
        "burst_day",
        seed=2,
        items=200,
        workers=5,
        policy=NoBackpressure(),
        faults=[Fault("kill_worker", item="O-1003"), Fault("gateway_spike", at=50, factor=2)],
    )
    assert "--items 200 --workers 5" in report.replay and "came from Python" in report.replay
    code = report.python_replay.replace("from shopops_lab.sim import run; ", "")
    namespace = {"run": run, "Fault": Fault, "NoBackpressure": NoBackpressure}
    again = eval(code, namespace)  # the line is meant to be pasted back
    assert again.log.to_dicts() == report.log.to_dicts()


def test_the_report_reads_its_verdict_from_the_checkers_result():
    report = run("forced_expiry", seed=0, adapter="naive")
    assert isinstance(report.check, CheckResult)
    assert report.valid is report.check.valid is False
    assert report.anomalies == report.check.anomalies and report.anomalies[0].name == "double_contact"
    assert report.checker_summary == report.check.summary
    assert "    double_contact x1" in str(report).splitlines()
    assert report.as_dict()["anomalies"] == [a.as_dict() for a in report.check.anomalies]


def test_a_run_config_is_checked_once_frozen_and_replays_its_run():
    config = RunConfig.of("burst_day", seed=3, items=50, workers=4, faults=[Fault("kill_worker", worker="W4")])
    assert (config.items, config.workers, config.worker_ids) == (50, 4, ("W1", "W2", "W3", "W4"))
    assert config.custom_faults and not config.custom_policy and config.rates == FaultRates()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 4
    with pytest.raises(BadArgumentError, match="faults\\[0\\].worker"):
        RunConfig.of("burst_day", workers=4, faults=[Fault("kill_worker", worker="W5")])
    report = (
        Simulation("burst_day", seed=3, items=50, workers=4, faults=[Fault("kill_worker", worker="W4")])
        .finish()
        .report()
    )
    assert (report.replay, report.python_replay) == (config.cli_replay(), config.python_replay())


def test_engine_workers_world_and_report_import_each_other_without_a_cycle():
    """Counting imports made only for type hints: each module can be read (and changed)
    knowing only the ones below it."""
    package = Path(__file__).resolve().parents[1] / "shopops_lab" / "sim"
    imports = {}
    for path in package.glob("*.py"):
        tree = ast.parse(path.read_text())
        imports[path.stem] = {
            node.module.rsplit(".", 1)[-1]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("shopops_lab.sim.")
        }
    assert {"engine", "workers", "world", "config", "report"} <= set(imports)
    order: list[str] = []
    while len(order) < len(imports):
        ready = sorted(name for name, needs in imports.items() if name not in order and needs <= set(order))
        assert ready, f"import cycle among {sorted(set(imports) - set(order))}"
        order.extend(ready)
    assert imports["engine"] >= {"world", "workers", "report", "config"}
    assert "engine" not in imports["workers"] | imports["report"] | imports["world"]


def test_report_as_dict_is_json_ready():
    report = run("forced_expiry", seed=0, adapter="naive")
    row = json.loads(json.dumps(report.as_dict()))
    for key in (
        "items",
        "done",
        "dead_lettered",
        "lost",
        "double_contacts",
        "redeliveries",
        "seed",
        "scenario",
        "replay",
        "valid",
        "anomalies",
        "metrics",
    ):
        assert key in row
    assert row["anomalies"][0]["name"] == "double_contact" and row["anomalies"][0]["message"]
    assert "events" not in row
    assert len(report.as_dict(events=True)["events"]) == len(report.log)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"items": 0}, "items"),
        ({"workers": -1}, "workers"),
        ({"seed": 1.5}, "seed"),
        ({"adapter": "carrier-pigeon"}, "adapter"),
        ({"faults": ["kill"]}, "faults"),
        ({"faults": 3}, "faults"),
        ({"faults": Fault("lose_ack")}, "faults"),
        ({"faults": [Fault("kill_worker", worker="W9", at=1)]}, "worker"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(BadArgumentError, match=field):
        run("forced_expiry", **kwargs)


def test_unknown_scenario_lists_the_known_ones():
    with pytest.raises(UnknownScenarioError) as caught:
        run("black_friday")
    for name in SCENARIOS:
        assert name in str(caught.value)


# --------------------------------------------------------------------------- step mode


def test_step_says_what_happened():
    sim = Simulation("stale_worker", seed=1)
    first = sim.step()
    assert isinstance(first, SimStep) and first.number == 1 and first.actor == "arrivals"
    assert [e.kind for e in first.events] == [K.ENQUEUED] * 3
    second = sim.step()
    assert second.actor == "W1" and second.events[0].kind is K.LEASED
    assert "step 2" in str(second)


def test_snapshot_and_restore_rewind_exactly():
    sim = Simulation("stale_worker", seed=2)
    for _ in range(5):
        sim.step()
    snap = sim.snapshot()
    assert isinstance(snap, Snapshot) and snap.steps == 5
    ahead = [str(sim.step()) for _ in range(8)]
    log_ahead = sim.log.to_dicts()
    sim.restore(snap)
    assert sim.steps == 5
    assert [str(sim.step()) for _ in range(8)] == ahead
    assert sim.log.to_dicts() == log_ahead
    with pytest.raises(BadArgumentError, match="snap"):
        sim.restore(Simulation("poison", seed=2).snapshot())


def test_run_until_stops_at_a_time_and_done_at_the_end():
    sim = Simulation("forced_expiry", seed=0)
    sim.run_until(20.0)
    assert sim.now <= 20.0 and not sim.done
    sim.run_until()
    assert sim.done and sim.step() is None
    whole = run("forced_expiry", seed=0)
    assert sim.report().log.to_dicts() == whole.log.to_dicts()


def test_a_report_in_the_middle_is_not_final():
    sim = Simulation("forced_expiry", seed=0)
    sim.run_until(5.0)
    report = sim.report()
    assert isinstance(report, Report) and not report.final
    assert report.valid is None  # items still in flight: the checker cannot tell yet


def test_scenario_rejects_bad_settings():
    with pytest.raises(BadArgumentError, match="approvals"):
        Scenario(name="x", description="", items=1, workers=1, approvals=0.7, bulk=0.5)
    with pytest.raises(BadArgumentError, match="idle_poll_max"):
        Scenario(name="x", description="", items=1, workers=1, idle_poll=5, idle_poll_max=1)
    with pytest.raises(BadArgumentError, match="restart_after"):
        Scenario(name="x", description="", items=1, workers=1, restart_after=0)
    assert Scenario(name="x", description="", items=1, workers=1, restart_after=math.inf).restart_after == math.inf
