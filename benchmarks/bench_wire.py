"""What one round trip between the judge and a learner process costs, on the grader's wire.

A learner worker (`learner.Worker`, forked here, unconfined) runs a function that calls an
object of the judge's (`remote.JudgePeer`) N times, the shape of lab 05's `env` calls: a light
call (two strings in, a string back) and a checkpoint read and save (a kit record each way).
Both processes are pinned to one core, as the grader pins a judge and its learner, so the
wall time per round trip is the CPU of both processes together; the judge's own CPU and the
worker's are printed too.

Run: `.venv/bin/python benchmarks/bench_wire.py [N]` (default 5,000). To compare two trees,
run it with PYTHONPATH set to each, one after the other, in the same minute.
"""

from __future__ import annotations

import os
import resource
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shopops_lab.checkpoint import Checkpoint  # noqa: E402
from shopops_lab.course.grade.learner import Worker  # noqa: E402
from shopops_lab.course.grade.remote import JudgePeer  # noqa: E402

SAVED = Checkpoint(
    workflow_version="v1",
    completed=("fetch", "summarize"),
    artifacts={"fetch": "source-v1", "summarize": "summary-v1"},
    intents={"O-1001:publish:v1": "publish"},
    token=2,
)


class Env:
    """The judge's object the learner's code calls (a kit class, so it may be handed over)."""

    def resume(self, job_id: str) -> Checkpoint:
        return SAVED

    def save(self, job_id: str, checkpoint: Checkpoint, token: int = 0) -> Checkpoint:
        return checkpoint

    def op_id(self, job_id: str, step: str) -> str:
        return f"{job_id}:{step}:v1"


Env.__module__ = "shopops_lab.bench_wire"

LEARNER = """
def light(env, n):
    for _ in range(n):
        env.op_id("O-1001", "publish")

def record(env, n):
    for _ in range(n):
        env.save("O-1001", env.resume("O-1001"), token=2)
"""
KINDS = (("light", 1), ("record", 2))  # the learner's function, its round trips per loop


def _cpu(who: int) -> float:
    used = resource.getrusage(who)
    return used.ru_utime + used.ru_stime


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        namespace = {"__name__": "__main__"}
        exec(LEARNER, namespace)
        Worker(theirs, namespace).loop()  # never returns
    theirs.close()
    judge, env, rows = JudgePeer(ours), Env(), []
    for name, per in KINDS:
        function = judge.request(["lookup", name])["value"]
        function(env, 100)  # warm
        cpu, wall = _cpu(resource.RUSAGE_SELF), time.perf_counter()
        function(env, n)
        rows.append((name, n * per, _cpu(resource.RUSAGE_SELF) - cpu, time.perf_counter() - wall))
    judge.send(["bye"])
    os.waitpid(pid, 0)
    trips = sum(count for _, count, _, _ in rows) + 100 * sum(per for _, per in KINDS) + 2
    worker = _cpu(resource.RUSAGE_CHILDREN) / trips
    print(f"{'round trip':<12}{'wall us':>9}{'judge CPU us':>14}")
    for name, count, cpu, wall in rows:
        print(f"{name:<12}{wall / count * 1e6:>9.1f}{cpu / count * 1e6:>14.1f}")
    print(f"the worker's CPU, all round trips together: {worker * 1e6:.1f} us each")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
