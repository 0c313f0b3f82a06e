"""Chaos with real processes: worker processes on SQLite and PostgreSQL, killed with SIGKILL at
seeded points. Every assertion here holds whatever the processes' timing: the plan is fixed
by the seed, every planned kill happens, and the checker reads the database's own history."""

from __future__ import annotations

import json
import os
import random
import re
import select
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from store_backends import postgres_url, with_schema

import shopops_lab.chaos.run as chaos_run
import shopops_lab.chaos.supervisor as chaos_supervisor
import shopops_lab.store.sqlite as sqlite_store
from shopops_lab.chaos import ChaosReport, Kill, KillPoint, owner, plan_kills, run_chaos
from shopops_lab.chaos.emails import POISON_ERROR, EmailWorkload
from shopops_lab.checker import AnomalyName
from shopops_lab.cli import main
from shopops_lab.errors import (
    BadArgumentError,
    ConnectionLostError,
    Kept,
    StoreCorruptError,
    StoreFailedError,
    StoreFullError,
    StoreLockedError,
)
from shopops_lab.events import EventKind
from shopops_lab.states import ItemState
from shopops_lab.store import open_store
from shopops_lab.worker.queue import Queue

SMALL = {"items": 16, "workers": 3, "kills": 12}
ROOT = Path(__file__).resolve().parent.parent


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
        assert len(mine) <= 3  # max_attempts - 2: room for a stall
        assert all(k.point.before_the_record for k in mine[:-1])  # the item comes back for the next
        if item == "item-0003":
            assert {k.point for k in mine} == {KillPoint.AFTER_ACQUIRE}  # poison never sends
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
        assert dead == poisoned(db)  # exactly the poison
        assert all(item.last_error == POISON_ERROR for item in queue.dlq_items())
        crashed = queue.log.where(EventKind.WORKER_CRASHED)
        assert sorted((e.item_id, e.attempt, e.info["point"]) for e in crashed) == sorted(
            (k.item_id, k.attempt, k.point.value) for k in report.killed
        )
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
    sent_then_killed = {
        case_of[k.item_id]
        for k in report.killed
        if k.point in (KillPoint.AFTER_SEND, KillPoint.IN_ACK) and k.item_id not in poison
    }
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
        6,
        3,
        0,
        0,
        True,
    )


@pytest.mark.parametrize(
    "args, words",
    [
        (["--db", "memory:"], "no other process can see"),
        (["--db", "sqlite:///{tmp}/x.db", "--items", "0"], "items is 0"),
        (["--db", "sqlite:///{tmp}/x.db", "--items", "2001"], "above the limit of 2000"),
        (["--db", "sqlite:///{tmp}/x.db", "--workers", "17"], "above the limit of 16"),
        (["--db", "sqlite:///{tmp}/x.db", "--kills", "-1"], "kills is -1"),
        (["--db", "sqlite:///{tmp}/x.db", "--items", "2", "--kills", "9"], "more than 2 items can take"),
        (["--db", "sqlite:///{tmp}/missing/x.db"], "does not exist"),
    ],
)
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
    real_kill = chaos_supervisor.os.kill
    monkeypatch.setattr(chaos_supervisor.os, "kill", lambda pid, sig: (sent.append(sig), real_kill(pid, sig)))
    report = run_chaos(f"sqlite:///{tmp_path / 'k.db'}", items=4, workers=2, kills=2, seed=1)
    assert sent == [signal.SIGKILL] * 2 == [signal.SIGKILL] * report.kills


# ---------------------------------------------------------------------- a kill a slow worker missed
class StallsOnce(EmailWorkload):
    """The email workload, but item-0001's first delivery loses its lease right after its send,
    as a worker slower than its lease would: its ack is refused, so its planned kill in the
    ack's transaction cannot land on it."""

    def prepare(self, store, queue, stops, name):
        handle = super().prepare(store, queue, stops, name)

        def slow(lease):
            if lease.item_id == "item-0001" and lease.attempt == 1:
                original = stops.at

                def at(point, held):
                    original(point, held)
                    if point == KillPoint.AFTER_SEND and held.attempt == 1:
                        queue.expire_leases(now=held.expires_at + 1)  # the stall: its lease ran out

                stops.at = at
            return handle(lease)

        return slow


def test_a_kill_a_slow_worker_missed_lands_on_the_redelivery(tmp_path):
    with open_store(f"sqlite:///{tmp_path / 'stall.db'}") as store:
        queue = Queue(store=store, lease_seconds=1, max_attempts=5)
        queue.enqueue(case_id="O-1001", payload={"idem_key": "O-1001:email:1", "to": "o-1001@example.com"})
        plan = (Kill(item_id="item-0001", attempt=1, point=KillPoint.IN_ACK),)
        landed = chaos_supervisor.run_workers(queue, StallsOnce("idempotent"), plan, workers=1)
        # on the redelivery (or, if that one was slow too, a later one): never dropped
        assert [(k.item_id, k.point) for k in landed] == [("item-0001", KillPoint.IN_ACK)] and landed[0].attempt >= 2
        crashed = [(e.item_id, e.attempt, e.info["point"]) for e in queue.log.where(EventKind.WORKER_CRASHED)]
        assert crashed == [("item-0001", landed[0].attempt, "in_ack")]
        assert queue.item("item-0001").state is ItemState.DONE


def test_still_to_land_is_the_plan_minus_the_kills_in_the_history(tmp_path):
    with open_store(f"sqlite:///{tmp_path / 'h.db'}") as store:
        queue = Queue(store=store)
        one = Kill(item_id="item-0001", attempt=1, point=KillPoint.AFTER_SEND)
        two = Kill(item_id="item-0001", attempt=2, point=KillPoint.AFTER_ACK)
        other = Kill(item_id="item-0002", attempt=1, point=KillPoint.AFTER_ACQUIRE)
        queue.enqueue(case_id="O-1001")
        queue.log.append(
            EventKind.WORKER_CRASHED,
            1.0,
            worker_id="W1",
            item_id="item-0001",
            case_id="O-1001",
            attempt=2,
            point="after_send",
            signal="SIGKILL",
        )  # landed on a redelivery
        assert chaos_run._still_to_land((one, two, other), queue) == (two, other)


def test_a_worker_not_ended_by_its_sigkill_is_reported_and_no_reaped_pid_is_signalled_again(tmp_path, monkeypatch):
    """Here the supervisor's first kill lands as SIGTERM: the worker ends by another signal,
    and that is the error the run ends with. That worker was reaped already, so its pid is
    never signalled again (by then it may be another process's), and every other worker is
    still killed and reaped."""
    forked, signalled = [], []
    real_fork, real_kill = chaos_supervisor.fork_worker, chaos_supervisor.os.kill

    def fork(life):
        pid, pipe = real_fork(life)
        forked.append(pid)
        return pid, pipe

    def kill(pid, sig):
        signalled.append(pid)
        real_kill(pid, signal.SIGTERM if len(signalled) == 1 else sig)

    monkeypatch.setattr(chaos_supervisor, "fork_worker", fork)
    monkeypatch.setattr(chaos_supervisor.os, "kill", kill)
    with open_store(f"sqlite:///{tmp_path / 'term.db'}") as store:
        queue = Queue(store=store, lease_seconds=30)
        for n in range(1, 5):
            queue.enqueue(case_id=f"O-{n}", payload={"idem_key": f"O-{n}:email:1", "to": f"o-{n}@example.com"})
        plan = (Kill(item_id="item-0001", attempt=1, point=KillPoint.AFTER_SEND),)
        with pytest.raises(chaos_supervisor.ChaosError, match=r"ended with status -15, not by the SIGKILL sent to it"):
            chaos_supervisor.run_workers(queue, EmailWorkload("idempotent"), plan, workers=3)
    assert signalled.count(signalled[0]) == 1
    for pid in forked:  # every worker reaped: none is a child of this process any more
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


# ---------------------------------------------------------------------- workers die with their supervisor
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_worker_is_set_to_die_with_its_supervisor(tmp_path):
    import ctypes

    class Asks(EmailWorkload):
        def prepare(self, store, queue, stops, name):
            signal_number = ctypes.c_int()
            ctypes.CDLL(None).prctl(2, ctypes.byref(signal_number), 0, 0, 0)  # PR_GET_PDEATHSIG
            with store.atomic:
                store.put("test", name, signal_number.value)
            return super().prepare(store, queue, stops, name)

    with open_store(f"sqlite:///{tmp_path / 'p.db'}") as store:
        queue = Queue(store=store, lease_seconds=30)
        queue.enqueue(case_id="O-1001", payload={"idem_key": "O-1001:email:1", "to": "o-1001@example.com"})
        chaos_supervisor.run_workers(queue, Asks("idempotent"), (), workers=2)
        assert [store.get("test", name) for name in ("W1", "W2")] == [signal.SIGKILL] * 2


SUPERVISOR = """
import os, signal, sys
from shopops_lab.chaos.emails import EmailWorkload
from shopops_lab.chaos.supervisor import run_workers
from shopops_lab.store import open_store
from shopops_lab.worker.queue import Queue

FD = int(sys.argv[2])

class Hangs(EmailWorkload):
    def prepare(self, store, queue, stops, name):
        def handle(lease):
            os.write(FD, b"%d\\n" % os.getpid())
            signal.pause()
        return handle

store = open_store(sys.argv[1])
queue = Queue(store=store, lease_seconds=600)
queue.enqueue(case_id="O-1001")
run_workers(queue, Hangs("idempotent"), (), workers=1)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_killing_the_supervisor_kills_its_workers(tmp_path):
    read, write = os.pipe()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    supervisor = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, f"sqlite:///{tmp_path / 's.db'}", str(write)], pass_fds=(write,), env=env
    )
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        worker = int(pipe.readline())  # the worker is running its handler, hanging there
        supervisor.kill()  # SIGKILL: the supervisor runs no cleanup at all
        supervisor.wait()
        ready, _, _ = select.select([pipe], [], [], 60)  # a guard against a hang, not a timing
        assert ready and pipe.read() == b"", f"worker {worker} outlived its supervisor"


# ---------------------------------------------------------------------- one run per database
def test_a_database_claimed_by_another_run_is_refused_before_anything_is_written(tmp_path, capsys):
    path = tmp_path / "claimed.db"
    with open_store(f"sqlite:///{path}") as store, store.atomic:
        store.put("chaos", "run", {"seed": 1})  # another run got here first and is about to fill it
    assert main(["chaos", "--db", f"sqlite:///{path}", "--items", "2", "--kills", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "db is already claimed by another chaos run" in err and "--resume" in err
    with open_store(f"sqlite:///{path}") as store:
        assert len(Queue(store=store)) == 0


def test_of_two_runs_started_together_on_one_database_exactly_one_runs(tmp_path):
    db = f"sqlite:///{tmp_path / 'both.db'}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable,
        "-m",
        "shopops_lab",
        "chaos",
        "--db",
        db,
        "--items",
        "3",
        "--workers",
        "1",
        "--kills",
        "0",
    ]
    runs = [
        subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = sorted((run.wait(), run.stderr.read()) for run in runs)
    for run in runs:
        run.stderr.close()
    assert [status for status, _ in results] == [0, 2], results
    assert "error: db already holds 3 items" in results[1][1] or "db is already claimed" in results[1][1]
    assert results[1][1].count("\n") == 1
    with open_store(db) as store:
        assert len(Queue(store=store)) == 3


def test_a_resume_while_a_live_supervisor_holds_the_database_is_refused_and_a_dead_ones_claim_is_taken_over(
    tmp_path, capsys
):
    db = f"sqlite:///{tmp_path / 'held.db'}"
    assert run_chaos(db, items=2, workers=1, kills=0).done == 2
    with open_store(db) as store:
        assert store.get(*owner.OWNER)["pid"] is None  # the finished run let go of it
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        with open_store(db) as store, store.atomic:  # another supervisor, still running, holds the run
            store.put(
                *owner.OWNER,
                {
                    "host": socket.gethostname(),
                    "pid": other.pid,
                    "started": owner._started(other.pid),
                    "run": f"{other.pid}-1",
                },
            )
            before = len(store.log)
        assert main(["chaos", "--db", db, "--resume"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"db is being run by another chaos supervisor (process {other.pid})" in err
        with open_store(db) as store:
            assert len(store.log) == before and store.get(*owner.OWNER)["pid"] == other.pid
    finally:
        other.stdin.close()
        other.wait()
    assert main(["chaos", "--db", db, "--resume", "--json"]) == 0  # its process is gone: the claim is free
    assert json.loads(capsys.readouterr().out)["done"] == 2
    with open_store(db) as store:
        assert store.get(*owner.OWNER)["pid"] is None


# ---------------------------------------------------------------------- a run stopped halfway
def test_a_full_disk_while_filling_is_one_line_and_resume_finishes_the_run(tmp_path, monkeypatch, capsys):
    real_fill = chaos_run.fill_morning

    def fill_on_a_small_disk(queue, rng, items):
        connection = queue.store._connection
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        room = 60 * 1024 // connection.execute("PRAGMA page_size").fetchone()[0]
        connection.execute(f"PRAGMA max_page_count = {pages + room}")  # as a disk with 60 KB left
        return real_fill(queue, rng, items)

    monkeypatch.setattr(chaos_run, "fill_morning", fill_on_a_small_disk)
    db = f"sqlite:///{tmp_path / 'f.db'}?synchronous=normal"
    args = ["chaos", "--db", db, "--items", "500", "--workers", "2", "--kills", "4", "--seed", "3"]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        "error: The chaos run could not finish: the disk that holds the database is full. Fix: free some "
        f"space, then finish the run: shopops-lab chaos --db {db} --resume.\n"
    )
    with open_store(db) as store:
        enqueued = len(Queue(store=store))
    assert 0 < enqueued < 500 and enqueued % 100 == 0  # whole batches, nothing half-written
    monkeypatch.setattr(chaos_run, "fill_morning", real_fill)  # the space is free again
    assert main(["chaos", "--db", db, "--resume", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["items"], report["kills"], report["lost"], report["valid"]) == (500, 4, 0, True)
    assert report["done"] + report["dead_lettered"] == 500


def test_a_full_disk_in_a_worker_is_one_line_that_says_how_to_finish(tmp_path, monkeypatch, capsys):
    def full(self, *args, **kwargs):
        refused = sqlite3.OperationalError("database or disk is full")
        refused.sqlite_errorcode, refused.sqlite_errorname = 13, "SQLITE_FULL"  # as SQLite raises it
        raise sqlite_store._failed(self.store.target, refused, 30)  # what the store makes of it

    monkeypatch.setattr(Queue, "acquire", full)  # the forked workers inherit it
    db = f"sqlite:///{tmp_path / 'w.db'}"
    assert main(["chaos", "--db", db, "--items", "4", "--kills", "0"]) == 2
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"error: The chaos run could not finish: worker W\d failed: the disk that holds the database is full\. "
        rf"Fix: free some space, then finish the run: shopops-lab chaos --db {re.escape(db)} --resume\.\n",
        err,
    ), err


@pytest.mark.parametrize(
    "error, cause, then",
    [
        (
            StoreFullError(target="t", reason="no room", fix="free some"),
            "the disk that holds the database is full",
            "free some space, then",
        ),
        (
            ConnectionLostError(target="t", reason="refused", outcome=Kept.NOT_SENT, fix="start it"),
            "the database went away and did not come back (refused)",
            "when it is back,",
        ),
        (
            ConnectionLostError(
                target="t", reason="closed (while committing)", outcome=Kept.UNKNOWN, fix="read what it holds"
            ),
            "the connection to the database broke (closed (while committing))",
            "when the database answers,",
        ),
        (
            StoreLockedError(target="t", reason="held 30 s", fix="fuser"),
            "the database stayed locked (held 30 s)",
            "when the process",
        ),
        (
            StoreCorruptError(target="t", reason="a bad page", fix="restore"),
            "the database is damaged (a bad page)",
            "restore it from a copy, then",
        ),
        (
            StoreFailedError(target="t", reason="read-only.", fix="chmod u+w."),
            "the database failed halfway: read-only",
            "chmod u+w; then",
        ),
        (
            OSError("disk I/O error"),
            "the database failed halfway: OSError: disk I/O error",
            "when the database is back,",
        ),
    ],
)
def test_what_stopped_a_run_is_one_line_with_one_fix_that_ends_in_the_resume_command(error, cause, then):
    stopped = chaos_supervisor.halfway("sqlite:///r.db", error, who="worker W2 failed: ")
    message = str(stopped)
    assert message.startswith(f"The chaos run could not finish: worker W2 failed: {cause}. Fix: {then}")
    assert message.endswith("finish the run: shopops-lab chaos --db sqlite:///r.db --resume.")
    assert message.count("Fix:") == 1 and ".." not in message and "\n" not in message


def test_a_run_interrupted_halfway_says_how_to_finish_and_resume_finishes_it(tmp_path, monkeypatch, capsys):
    real_kill, kills = chaos_supervisor._Supervisor._kill, []

    def kill_then_lose_the_database(self, *args):
        real_kill(self, *args)
        kills.append(args)
        if len(kills) == 5:
            raise sqlite3.OperationalError("disk I/O error")  # the database went away

    monkeypatch.setattr(chaos_supervisor._Supervisor, "_kill", kill_then_lose_the_database)
    db = f"sqlite:///{tmp_path / 'r.db'}"
    args = ["chaos", "--db", db, "--seed", "11", *[f"--{k}={v}" for k, v in SMALL.items()]]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the database failed halfway: OperationalError: disk I/O error" in err
    assert f"when the database is back, finish the run: shopops-lab chaos --db {db} --resume" in err
    monkeypatch.setattr(chaos_supervisor._Supervisor, "_kill", real_kill)
    assert main(["chaos", "--db", db, "--resume", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["kills"], report["lost"], report["valid"], report["items"]) == (12, 0, True, 16)
    assert report["done"] + report["dead_lettered"] == 16


def test_resume_without_a_run_is_refused(tmp_path, capsys):
    assert main(["chaos", "--db", f"sqlite:///{tmp_path / 'none.db'}", "--resume"]) == 2
    assert "db holds no chaos run to finish. Fix: start a new run (without --resume)" in capsys.readouterr().err


def test_on_postgres_a_schema_claimed_by_another_run_is_refused():
    server = postgres_url()  # skips (or, in CI, fails) before psycopg is needed
    import psycopg

    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute("DROP SCHEMA IF EXISTS chaos_claim CASCADE")
        admin.execute("CREATE SCHEMA chaos_claim")
        try:
            db = with_schema(server, "chaos_claim")
            with open_store(db) as store, store.atomic:
                store.put("chaos", "run", {"seed": 1})
            with pytest.raises(BadArgumentError, match="already claimed by another chaos run"):
                run_chaos(db, items=2, workers=1, kills=0)
            with open_store(db) as store:
                assert len(Queue(store=store)) == 0
        finally:
            admin.execute("DROP SCHEMA chaos_claim CASCADE")


def test_an_interrupted_run_says_how_to_finish_it(tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(chaos_run, "run_chaos", interrupted)
    db = f"sqlite:///{tmp_path / 'i.db'}"
    assert main(["chaos", "--db", db]) == 130
    assert capsys.readouterr().err == f"interrupted: finish the run with shopops-lab chaos --db {db} --resume\n"


def test_a_kill_whose_worker_stood_there_when_the_run_broke_off_is_written_on_resume():
    """The supervisor SIGKILLs its workers where they stand when a run breaks off; one may stand
    at its item's planned kill (after the ack) with its word unread. The resume writes that kill
    into the history instead of waiting for it forever, and plans the others as before."""
    from shopops_lab.events import EventKind
    from shopops_lab.worker.queue import Queue

    queue = Queue(lease_seconds=30)
    done = queue.enqueue(case_id="O-1", payload={"to": "a@example.com"})
    waiting = queue.enqueue(case_id="O-2", payload={"to": "b@example.com"})
    lease = queue.acquire("W2")
    queue.ack(lease)  # done, and its worker stood at after_ack when the run broke off
    plan = (
        Kill(item_id=done, attempt=1, point=KillPoint.AFTER_ACK),
        Kill(item_id=waiting, attempt=1, point=KillPoint.AFTER_SEND),
    )
    assert chaos_run._still_to_land(plan, queue) == (plan[1],)
    (crash,) = queue.log.where(EventKind.WORKER_CRASHED)
    assert (crash.item_id, crash.worker_id, crash.attempt, crash.info["point"]) == (done, "W2", 1, "after_ack")
    assert chaos_run._still_to_land(plan, queue) == (plan[1],)  # written once: now it is history
    assert len(queue.log.where(EventKind.WORKER_CRASHED)) == 1
