"""Chaos with real processes: worker processes on SQLite and PostgreSQL, killed with SIGKILL at
seeded points. Every assertion here holds whatever the processes' timing: the plan is fixed
by the seed, every planned kill happens, and the checker reads the database's own history."""
from __future__ import annotations

import json
import random
import signal
import sqlite3

import pytest
from store_backends import postgres_url, with_schema

from shopops_lab.chaos import ChaosReport, Kill, KillPoint, plan_kills, run_chaos
from shopops_lab.chaos.emails import POISON_ERROR
from shopops_lab.checker import AnomalyName
from shopops_lab.cli import main
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import EventKind
from shopops_lab.states import ItemState
from shopops_lab.store import open_store
from shopops_lab.worker.queue import Queue

SMALL = {"items": 16, "workers": 3, "kills": 12}


# ---------------------------------------------------------------------- the plan
def plan(seed: int, items: int = 20, kills: int = 12, max_attempts: int = 5, poison=frozenset({"item-0003"})):
    ids = [f"item-{n:04d}" for n in range(1, items + 1)]
    return plan_kills(random.Random(seed), ids, set(poison), kills, max_attempts)


@pytest.mark.parametrize("seed", range(25))
def test_every_planned_kill_can_happen(seed):
    kills = plan(seed)
    assert len(kills) == 12
    by_item: dict[str, list[Kill]] = {}
    for kill in kills:
        by_item.setdefault(kill.item_id, []).append(kill)
    for item, mine in by_item.items():
        assert [k.attempt for k in mine] == list(range(1, len(mine) + 1))  # consecutive deliveries
        assert len(mine) <= 3                                              # max_attempts - 2: room for a stall
        assert all(k.point.before_the_record for k in mine[:-1])           # the item comes back for the next
        if item == "item-0003":
            assert {k.point for k in mine} == {KillPoint.AFTER_ACQUIRE}    # poison never sends
    assert any(k.point is KillPoint.AFTER_SEND for k in kills)


def test_the_plan_is_the_seeds():
    assert plan(7) == plan(7)
    assert len({plan(seed) for seed in range(10)}) == 10


def test_a_plan_that_cannot_happen_is_refused():
    with pytest.raises(BadArgumentError, match="allow at least 3 attempts"):
        plan(1, max_attempts=2)
    with pytest.raises(BadArgumentError, match="more than 2 items can take"):
        plan(1, items=2, kills=7)


def test_one_kill_on_a_poison_only_morning_still_lands():
    kills = plan(2, items=1, kills=1, poison={"item-0001"})
    assert kills == (Kill(item_id="item-0001", attempt=1, point=KillPoint.AFTER_ACQUIRE),)


# ---------------------------------------------------------------------- real runs
def poisoned(db: str) -> set[str]:
    with open_store(db) as store:
        return {row.id for row in store.item_rows() if row.payload.get("poison")}


def assert_nothing_lost(report: ChaosReport, db: str) -> None:
    assert report.kills == 12 and len(report.killed) == 12
    assert report.lost == 0 and report.done + report.dead_lettered == report.items == 16
    with open_store(db) as store:
        queue = Queue(store=store)
        dead = {item.id for item in queue.dlq_items()}
        assert dead == poisoned(db)                                        # exactly the poison
        assert all(item.last_error == POISON_ERROR for item in queue.dlq_items())
        crashed = queue.log.where(EventKind.WORKER_CRASHED)
        assert sorted((e.item_id, e.attempt, e.info["point"]) for e in crashed) == sorted(
            (k.item_id, k.attempt, k.point.value) for k in report.killed)
        assert {e.info["signal"] for e in crashed} == {"SIGKILL"}
        assert queue.counts()[ItemState.LEASED] == queue.counts()[ItemState.READY] == 0


def test_sigkill_on_sqlite_loses_nothing_and_contacts_nobody_twice(tmp_path):
    db = f"sqlite:///{tmp_path / 'chaos.db'}"
    report = run_chaos(db, seed=11, **SMALL)
    assert_nothing_lost(report, db)
    assert report.double_contacts == 0 and report.valid is True
    assert report.redeliveries >= sum(1 for k in report.killed if k.point.before_the_record)


def test_with_the_naive_adapter_every_kill_after_a_send_is_a_second_email(tmp_path):
    db = f"sqlite:///{tmp_path / 'naive.db'}"
    report = run_chaos(db, seed=11, adapter="naive", **SMALL)
    assert_nothing_lost(report, db)
    poison = poisoned(db)
    with open_store(db) as store:
        case_of = {row.id: row.case_id for row in store.item_rows()}
    sent_then_killed = {case_of[k.item_id] for k in report.killed
                        if k.point in (KillPoint.AFTER_SEND, KillPoint.IN_ACK) and k.item_id not in poison}
    assert sent_then_killed, "seed 11 kills a worker between a send and its ack"
    assert sent_then_killed <= set(report.doubled_cases)  # a stall could add more, never fewer
    assert report.valid is False and report.double_contacts == len(report.doubled_cases)
    for anomaly in report.result.of(AnomalyName.DOUBLE_CONTACT):
        assert f"case {anomaly.case_id} was emailed" in anomaly.message


def test_sigkill_on_postgres_loses_nothing_and_contacts_nobody_twice():
    server = postgres_url()  # skips (or, in CI, fails) before psycopg is needed
    import psycopg

    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute("DROP SCHEMA IF EXISTS chaos_test CASCADE")
        admin.execute("CREATE SCHEMA chaos_test")
        try:
            db = with_schema(server, "chaos_test")
            report = run_chaos(db, seed=5, **SMALL)
            assert_nothing_lost(report, db)
            assert report.double_contacts == 0 and report.valid is True
        finally:
            admin.execute("DROP SCHEMA chaos_test CASCADE")


# ---------------------------------------------------------------------- the command
def test_the_command_prints_the_report_as_json(tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    status = main(["chaos", "--db", db, "--items", "6", "--workers", "2", "--kills", "3", "--seed", "4", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0
    assert {"items", "done", "dead_lettered", "lost", "double_contacts", "kills", "redeliveries", "valid"} <= set(
        report
    )
    assert (report["items"], report["kills"], report["lost"], report["double_contacts"], report["valid"]) == (
        6, 3, 0, 0, True)


@pytest.mark.parametrize("args, words", [
    (["--db", "memory:"], "no other process can see"),
    (["--db", "sqlite:///{tmp}/x.db", "--items", "0"], "items is 0"),
    (["--db", "sqlite:///{tmp}/x.db", "--items", "2001"], "above the limit of 2000"),
    (["--db", "sqlite:///{tmp}/x.db", "--workers", "17"], "above the limit of 16"),
    (["--db", "sqlite:///{tmp}/x.db", "--kills", "-1"], "kills is -1"),
    (["--db", "sqlite:///{tmp}/x.db", "--items", "2", "--kills", "9"], "more than 2 items can take"),
    (["--db", "sqlite:///{tmp}/missing/x.db"], "does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(args, words, tmp_path, capsys):
    status = main(["chaos", *[a.format(tmp=tmp_path) for a in args]])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("error: ") and words in err and err.count("\n") == 1


def test_a_database_that_already_holds_work_is_refused_unchanged(tmp_path, capsys):
    path = tmp_path / "used.db"
    with open_store(f"sqlite:///{path}") as store:
        Queue(store=store).enqueue(case_id="O-1001")
    before = sqlite3.connect(path).execute("SELECT count(*) FROM events").fetchone()
    assert main(["chaos", "--db", f"sqlite:///{path}"]) == 2
    assert "already holds 1 items" in capsys.readouterr().err
    assert sqlite3.connect(path).execute("SELECT count(*) FROM events").fetchone() == before


def test_kills_are_sigkill(tmp_path, monkeypatch):
    sent = []
    import shopops_lab.chaos.supervisor as chaos_run

    real_kill = chaos_run.os.kill
    monkeypatch.setattr(chaos_run.os, "kill", lambda pid, sig: (sent.append(sig), real_kill(pid, sig)))
    report = run_chaos(f"sqlite:///{tmp_path / 'k.db'}", items=4, workers=2, kills=2, seed=1)
    assert sent == [signal.SIGKILL] * 2 == [signal.SIGKILL] * report.kills
