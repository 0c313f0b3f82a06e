"""`shopops-lab simulate`: text and JSON reports, exit statuses, and a real subprocess."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from shopops_lab.checker import check
from shopops_lab.events import EventLog
from shopops_lab.sim import SCENARIOS
from shopops_lab.sim.cli import add_arguments, main, run

ROOT = Path(__file__).resolve().parents[1]
KEYS = {
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
}


def simulate(*argv: str) -> tuple[int, argparse.Namespace]:
    parser = argparse.ArgumentParser(prog="shopops-lab simulate")
    add_arguments(parser)
    args = parser.parse_args(list(argv))
    return run(args), args


def test_text_report_shows_the_seed_and_the_replay_line(capsys):
    status, _ = simulate("poison", "--seed", "3")
    out, err = capsys.readouterr()
    assert status == 0 and err == ""
    assert "seed=3" in out
    assert "replay: shopops-lab simulate poison --seed 3 --adapter idempotent" in out
    assert "1 dead-lettered" in out


def test_json_report_is_one_object_with_the_promised_keys(capsys):
    status, _ = simulate("forced_expiry", "--seed", "2", "--json")
    out, err = capsys.readouterr()
    assert status == 0 and err == ""
    report = json.loads(out)
    assert KEYS <= set(report)
    assert (report["scenario"], report["seed"], report["items"]) == ("forced_expiry", 2, 3)
    assert report["lost"] == 0 and report["double_contacts"] == 0 and report["valid"] is True
    assert report["anomalies"] == []
    assert report["replay"] == "shopops-lab simulate forced_expiry --seed 2 --adapter idempotent"


def test_anomalies_come_with_name_message_and_evidence_and_exit_1(capsys):
    status, _ = simulate("stale_worker", "--adapter", "naive", "--json")
    report = json.loads(capsys.readouterr().out)
    assert status == 1
    assert report["valid"] is False and report["double_contacts"] == 1
    (anomaly,) = report["anomalies"]
    assert anomaly["name"] == "double_contact" and "O-1001" in anomaly["message"]
    assert anomaly["evidence"] and all("kind" in e and "seq" in e for e in anomaly["evidence"])


def test_items_and_workers_override_the_scenario(capsys):
    status, _ = simulate("burst_day", "--items", "120", "--workers", "4", "--seed", "5", "--json")
    report = json.loads(capsys.readouterr().out)
    assert status == 0 and report["items"] == 120 and report["lost"] == 0
    assert "--items 120 --workers 4" in report["replay"]


def test_events_flag_carries_the_log_so_the_checker_can_judge_it_again(capsys):
    simulate("forced_expiry", "--adapter", "naive", "--json", "--events")
    report = json.loads(capsys.readouterr().out)
    log = EventLog.from_dicts(report["events"])
    assert len(log) == report["event_count"]
    again = check(log, max_attempts=5)
    assert again.valid is False and [a.name for a in again.anomalies] == ["double_contact"]


def test_same_arguments_print_the_same_json(capsys):
    simulate("burst_day", "--items", "150", "--seed", "9", "--json")
    first = capsys.readouterr().out
    simulate("burst_day", "--items", "150", "--seed", "9", "--json")
    assert capsys.readouterr().out == first


def test_unknown_scenario_is_exit_2_and_lists_the_known_ones(capsys):
    status, _ = simulate("black_friday")
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert "black_friday" in err
    for name in SCENARIOS:
        assert name in err


def test_bad_numbers_are_exit_2_with_the_field_named(capsys):
    assert main(["poison", "--items", "0"]) == 2
    err = capsys.readouterr().err
    assert "--items" in err and "from 1 to 1,000,000" in err


def test_usage_errors_exit_2(capsys):
    assert main(["poison", "--adapter", "pigeon"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert main(["poison", "--seed", "3"]) == 0


def test_module_entry_point_runs_in_a_subprocess():
    done = subprocess.run(
        [sys.executable, "-m", "shopops_lab.sim", "forced_expiry", "--seed", "1", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    report = json.loads(done.stdout)
    assert KEYS <= set(report) and report["seed"] == 1
    bad = subprocess.run(
        [sys.executable, "-m", "shopops_lab.sim.cli", "nope"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2 and "Known scenarios" in bad.stderr
