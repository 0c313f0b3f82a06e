"""How long does an explored check take, next to running the master's answer once?

For labs 01, 02, 03 (the heartbeat loop), 04, 05 and 06 the check plays every schedule
within its bound (fresh world and fresh answer per schedule). The peer, timed in the same
run, is the master's own answer called directly on one plain situation (one delivery
handled, one dead letter replayed and drained, one draft of two chunks, one claim and
write, one refund applied, one job run to the end), which is the least any check must do.
Printed per lab: the check's wall-clock seconds and processor seconds (best of --runs
each; on a shared machine the second says what the check costs, the first what the load
added), the schedules it covers, the peer's seconds per call, the ratio check / peer, and
PASS/FAIL (wall clock) against the issue's budget of 2 s per check on this machine. Always
exits 0: benchmarks inform, tests decide.

Run: `.venv/bin/python benchmarks/bench_checks.py [--runs 3]`.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path
from time import perf_counter, process_time

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from notebook_answers import answers  # noqa: E402

from shopops_lab.checks import lab01, lab02, lab03, lab04, lab05, lab06, recovery_world  # noqa: E402
from shopops_lab.clock import FakeClock  # noqa: E402
from shopops_lab.effects import EmailAdapter  # noqa: E402
from shopops_lab.explore import explore  # noqa: E402
from shopops_lab.outbox import Delivery  # noqa: E402
from shopops_lab.recovery import Env  # noqa: E402
from shopops_lab.worker.queue import InMemoryQueue  # noqa: E402

BUDGET = 2.0
MASTERS = {"01": "01_leases_and_redelivery", "02": "02_poison_messages_and_the_dlq",
           "03": "03_heartbeats_and_ttl_design", "04": "04_fencing_tokens", "05": "05_checkpoints_and_receipts",
           "06": "06_outbox"}


def _master(lab: str, name: str):
    with contextlib.redirect_stdout(io.StringIO()):   # the set-up cell prints its settings
        return answers(nbformat.read(ROOT / "solutions" / f"{MASTERS[lab]}.ipynb", as_version=4))[name]


def _peer_01(handler) -> None:
    queue = InMemoryQueue(clock=FakeClock())
    adapter = EmailAdapter(clock=queue.clock)
    queue.enqueue(case_id="O-1002", payload={"idem_key": "O-1002:email:4", "to": "c@example.com"})
    lease = queue.acquire("W1")
    handler(lease, adapter)
    queue.ack(lease)


def _peer_02(replay_and_drain) -> None:
    queue, _, _, handler, _ = lab02.poisoned_queue(("fixed",))
    replay_and_drain(queue, handler)


class _Draft:
    """Two chunks, then the end of the draft."""

    def __init__(self) -> None:
        self.left = ["Dear Jordan, ", "your refund is on its way."]

    def next_chunk(self):
        return self.left.pop(0) if self.left else None


def _peer_03(draft_with_heartbeats) -> None:
    queue = InMemoryQueue(clock=FakeClock())
    email = EmailAdapter(clock=queue.clock)
    queue.enqueue(case_id="O-1001", payload={"idem_key": "O-1001:email:3", "to": "jordan@example.com"})
    draft_with_heartbeats(queue.acquire("W1"), queue, _Draft(), email)


def _peer_04(store_class) -> None:
    store = store_class(clock=FakeClock())
    store.complete("job-1", {"ok": True}, token=store.claim("job-1", "W7"), worker_id="W7")


def _peer_05(run) -> None:
    run("O-1001", Env().for_worker())


def _peer_06(handle) -> None:
    handle(Delivery(seq=1, message_id="out-0001", topic="refund.issued", payload={"case_id": "O-1001"}), set(),
           lambda delivery: None)


def _best(fn, runs: int, repeat: int = 1, clock=perf_counter) -> float:
    best = float("inf")
    for _ in range(runs):
        start = clock()
        for _ in range(repeat):
            fn()
        best = min(best, (clock() - start) / repeat)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    labs = [("01", lab01, "send_followup", _peer_01, [lab01.scenario(m) for m in lab01.SEEDS]),
            ("02", lab02, "replay_and_drain", _peer_02, [lab02.scenario()]),
            ("03", lab03, "draft_with_heartbeats", _peer_03, [lab03.loop_scenario()]),
            ("04", lab04, "FencedResultStore", _peer_04, [lab04.scenario()]),
            ("05", lab05, "run", _peer_05, [recovery_world.scenario(setting, faults, job)
                                            for setting, faults, job in lab05.SETTINGS]),
            ("06", lab06, "handle", _peer_06, [lab06.scenario()])]
    print(f"{'lab':<4}{'check s':>9}{'cpu s':>8}{'schedules':>11}{'peer s':>11}{'ratio':>10}  budget {BUDGET:g} s")
    for lab, checks, name, peer, scenarios in labs:
        answer = _master(lab, name)
        exercise = checks.loop if lab == "03" else checks.exercise
        assert exercise.result(answer).correct, lab
        check = _best(lambda a=answer, e=exercise: e.result(a), runs)
        cpu = _best(lambda a=answer, e=exercise: e.result(a), runs, clock=process_time)   # this process's share
        schedules = sum(explore(s, answer).schedules for s in scenarios)
        plain = _best(lambda a=answer, p=peer: p(a), runs, repeat=200)
        verdict = "PASS" if check <= BUDGET else "FAIL"
        print(f"{lab:<4}{check:>9.3f}{cpu:>8.3f}{schedules:>11,}{plain:>11.6f}{check / plain:>10,.0f}  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
