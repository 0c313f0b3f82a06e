"""A chaos run survives its database: PostgreSQL restarted under it (`pg_ctl restart -m
immediate`, every server process killed) is ridden through by the workers and the
supervisor, and a run killed in any phase (enqueuing, planning, running, judging) is
finished by `--resume` with the report an uninterrupted run of the same seed gives.

Where each interruption lands is fixed by construction, never by timing: the supervisor
kills itself at a named step (a patched function in its own process), and the server is
restarted by the worker that has just acked a chosen email."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_backends import HOW_TO_RUN_POSTGRES, Backend, needs_psycopg

import shopops_lab.chaos.run as chaos_run
from shopops_lab.chaos import run_chaos
from shopops_lab.chaos.emails import FILLED, EmailWorkload, morning
from shopops_lab.chaos.plan import KillPoint
from shopops_lab.chaos.worker import SETUP
from shopops_lab.cli import main
from shopops_lab.store import open_store
from shopops_lab.worker.queue import Queue

ROOT = Path(__file__).resolve().parent.parent
linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="a killed supervisor's workers die with it on Linux (PR_SET_PDEATHSIG)"
)

# ---------------------------------------------------------------------- killed in any phase, then resumed
SETTINGS = {"items": 150, "workers": 3, "kills": 6, "seed": 5}
# The supervisor, run as a command, SIGKILLs itself at one step of one phase.
KILLED_WHILE = """
import os, signal, sys
import shopops_lab.chaos.emails as emails
import shopops_lab.chaos.run as run
import shopops_lab.chaos.supervisor as supervisor
from shopops_lab.cli import main

db, phase, settings = sys.argv[1], sys.argv[2], sys.argv[3:]


def die():
    os.kill(os.getpid(), signal.SIGKILL)


if phase == "enqueuing":  # inside the second batch's transaction: its items written, not committed
    real_once = emails.once

    def once(store, kind, key, write):
        def then_die():
            result = write()
            if key == "0002":
                die()
            return result

        return real_once(store, kind, key, then_die)

    emails.once = once
elif phase == "planning":  # the plan drawn, not yet written
    real_plan = run.plan_kills
    run.plan_kills = lambda *args: (real_plan(*args), die())
elif phase == "running":  # right after the supervisor's third kill landed
    real_kill, kills = supervisor._Supervisor._kill, []

    def kill(self, *args):
        real_kill(self, *args)
        kills.append(args)
        if len(kills) == 3:
            die()

    supervisor._Supervisor._kill = kill
elif phase == "judging":  # the queue drained, the report not yet made
    real_report = run._report
    run._report = lambda *args: (die(), real_report(*args))
sys.exit(main(["chaos", "--db", db, *settings]))
"""


def as_arguments(settings: dict[str, int]) -> list[str]:
    return [f"--{name}={value}" for name, value in settings.items()]


def killed_while(db: str, phase: str, settings: dict[str, int]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WHILE, db, phase, *as_arguments(settings)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def same_report(report: dict, uninterrupted: dict) -> None:
    """What a report says depends only on the seed: the same items end the same way, and the
    same kills land at the same points. Not the redeliveries, nor the delivery a kill landed
    on: the leases a killed supervisor's workers held come back once more."""

    def seen(report: dict) -> dict:
        kept = {k: v for k, v in report.items() if k not in ("db", "redeliveries", "killed")}
        return {**kept, "killed": sorted((k["item_id"], k["point"]) for k in report["killed"])}

    assert seen(report) == seen(uninterrupted)
    assert (report["lost"], report["double_contacts"], report["valid"]) == (0, 0, True)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict:
    db = f"sqlite:///{tmp_path_factory.mktemp('whole') / 'whole.db'}?synchronous=normal"
    return run_chaos(db, **SETTINGS).as_dict()


@linux_only
@pytest.mark.parametrize("phase", ["enqueuing", "planning", "running", "judging"])
def test_a_run_killed_in_any_phase_is_finished_by_resume(phase, tmp_path, uninterrupted, capsys):
    db = f"sqlite:///{tmp_path / 'killed.db'}?synchronous=normal"
    killed_while(db, phase, SETTINGS)
    with open_store(db) as store:
        enqueued = len(Queue(store=store))
        batches = [key for key, _ in store.scan(FILLED)]
        planned = store.get(*SETUP)
    assert (enqueued, batches) == ((100, ["0001"]) if phase == "enqueuing" else (150, ["0001", "0002"]))
    assert (planned is None) is (phase in ("enqueuing", "planning"))
    assert main(["chaos", "--db", db, "--resume", "--json"]) == 0
    same_report(json.loads(capsys.readouterr().out), uninterrupted)
    with open_store(db) as store:  # every email enqueued exactly once
        keys = [row.payload["idem_key"] for row in store.item_rows()]
    assert len(keys) == len(set(keys)) == 150


@linux_only
def test_a_run_killed_while_enqueuing_on_postgres_is_finished_by_resume(durable_postgres: Backend, capsys):
    db = durable_postgres.url()
    killed_while(db, "enqueuing", {**SETTINGS, "kills": 3})  # dies in its second batch: 100 enqueued
    with open_store(db) as store:
        assert len(Queue(store=store)) == 100
    assert main(["chaos", "--db", db, "--resume", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["items"], report["kills"], report["lost"], report["double_contacts"], report["valid"]) == (
        150,
        3,
        0,
        0,
        True,
    )
    with open_store(db) as store:
        keys = [row.payload["idem_key"] for row in store.item_rows()]
    assert len(keys) == len(set(keys)) == 150


@pytest.fixture
def durable_postgres(tmp_path) -> Iterator[Backend]:
    made = Backend("postgresql", tmp_path)  # skips (or, in CI, fails) without a server
    yield made
    made.close()


# ---------------------------------------------------------------------- PostgreSQL restarted under a run
def server_binaries() -> None:
    """Skip (locally) / fail (in CI) without PostgreSQL's server programs: this test restarts its own."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")) or shutil.which("pg_ctl")
    if not found:
        message = f"this test runs a PostgreSQL server of its own. {HOW_TO_RUN_POSTGRES}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def own_server() -> Iterator[tuple[str, Path]]:
    """A throwaway cluster only this module uses (its restarts must not stop anyone else's
    tests), with `synchronous_commit` on: a restart keeps every commit it acknowledged."""
    server_binaries()
    needs_psycopg()
    folder = Path(
        tempfile.mkdtemp(prefix="shopops-restart-")
    )  # not under pytest's 0700 folder: the server's user reads it
    script = str(ROOT / "scripts" / "postgres.sh")
    url = subprocess.run(
        ["sh", script, "start", str(folder), "durable"], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        yield url, folder
    finally:
        subprocess.run(["sh", script, "stop", str(folder)], capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)


class RestartsTheServer(EmailWorkload):
    """The email workload, whose worker restarts the server (`pg_ctl restart -m immediate`)
    right after it acked one of the chosen emails; the other workers are mid-flight."""

    folder: Path
    after: frozenset[str]  # the idempotency keys of the emails after whose ack the server restarts

    def prepare(self, store, queue, stops, name):
        handle = super().prepare(store, queue, stops, name)

        def then_restart(lease):
            handle(lease)
            key = lease.payload.get("idem_key")
            if key in self.after and not lease.payload.get("poison"):
                try:  # once per email, whichever worker acked it
                    os.close(os.open(self.folder / f"restarted-{key}", os.O_CREAT | os.O_EXCL))
                except FileExistsError:
                    return
                subprocess.run(["sh", str(ROOT / "scripts" / "postgres.sh"), "restart", str(self.folder)], check=True)

        return then_restart


def test_postgres_restarted_three_times_under_a_run_of_2000_items_and_8_workers_finishes_by_itself(
    own_server, monkeypatch
):
    url, folder = own_server
    settings = {"items": 2_000, "workers": 8, "kills": 12, "seed": 7}
    emails = morning(random.Random(settings["seed"]), settings["items"])
    sendable = [e["payload"]["idem_key"] for e in emails if not e["payload"].get("poison")]
    after = frozenset(sendable[n] for n in (450, 900, 1350))
    workload = type("Restarts", (RestartsTheServer,), {"folder": folder, "after": after})
    monkeypatch.setattr(chaos_run, "EmailWorkload", workload)  # the forked workers inherit it
    log = folder / "server.log"
    shutdowns = log.read_text().count("received immediate shutdown request")
    report = run_chaos(url, **settings)  # no --resume: it finishes by itself
    assert sorted(p.name for p in folder.glob("restarted-*")) == sorted(f"restarted-{key}" for key in after)
    assert log.read_text().count("received immediate shutdown request") == shutdowns + 3
    poison = sum(1 for e in emails if e["payload"].get("poison"))
    assert (report.items, report.lost, report.double_contacts, report.valid) == (2_000, 0, 0, True)
    assert (report.done, report.dead_lettered, report.kills) == (2_000 - poison, poison, 12)
    assert any(k.point is KillPoint.AFTER_SEND for k in report.killed)
