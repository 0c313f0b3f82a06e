"""How long do the metrics take on a burst-day log, next to what produced the log?

A seeded run pushes 100,000 items through an InMemoryQueue (20 workers, some nacks, some
crashed leases that expire), which writes a few hundred thousand events. We then time
`queue_metrics(log)` and `series(log, 60)` and print them beside two peers from the same
run: producing the log, and the simplest useful reader (counting events by kind over
`log.rows()`), the floor for any pure-Python pass. Target: both metrics together in about a second (<= 1.5 s).

Run: `python benchmarks/bench_metrics.py`. Prints PASS/FAIL and always exits 0.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from time import perf_counter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, installed or not

from shopops_lab.clock import FakeClock  # noqa: E402
from shopops_lab.metrics import queue_metrics, series  # noqa: E402
from shopops_lab.worker.queue import InMemoryQueue  # noqa: E402

SEED = 20240601
ITEMS = 100_000
REPEATS = 3
TARGET_SECONDS = 1.5


def burst_day(seed: int) -> InMemoryQueue:
    """90% of deliveries ack, 7% nack, 3% crash and leave their lease to expire."""
    rng, clock = random.Random(seed), FakeClock()
    q = InMemoryQueue(lease_seconds=30, max_attempts=3, clock=clock)
    for i in range(ITEMS):
        q.enqueue(case_id=f"O-{i % 5000:04d}", payload={"idem_key": f"O-{i % 5000:04d}:email:{i}"})
    while q.depth or q.counts()["leased"]:
        clock.advance(0.01)
        lease = q.acquire(f"W{rng.randrange(1, 21)}")
        if lease is None:
            clock.advance(30)  # only crashed leases remain: let them expire
            continue
        roll = rng.random()
        if roll < 0.90:
            q.ack(lease)
        elif roll < 0.97:
            q.nack(lease, "gateway 503")
    return q


def best(fn) -> float:
    times = []
    for _ in range(REPEATS):
        start = perf_counter()
        fn()
        times.append(perf_counter() - start)
    return min(times)


def main() -> int:
    start = perf_counter()
    q = burst_day(SEED)
    produce = perf_counter() - start
    log = q.log
    print(f"Python {sys.version.split()[0]}; {ITEMS:,} items, {len(log):,} events; seed {SEED}; best of {REPEATS}")

    def count_kinds() -> None:
        counts: dict = {}
        for row in log.rows():
            counts[row.kind] = counts.get(row.kind, 0) + 1

    scan = best(count_kinds)
    metrics = best(lambda: queue_metrics(log))
    buckets = best(lambda: series(log, 60))
    total = metrics + buckets
    print(f"producing the log (the run itself)  : {produce:8.3f} s")
    print(f"counting events by kind (the floor) : {scan:8.3f} s")
    print(f"queue_metrics(log)                  : {metrics:8.3f} s   {metrics / scan:5.1f}x the floor")
    print(f"series(log, 60)                     : {buckets:8.3f} s   {buckets / scan:5.1f}x the floor")
    print(f"both, as a share of producing the log: {total / produce:7.1%}")
    print(
        f"both together                       : {total:8.3f} s   target <= {TARGET_SECONDS:g} s  "
        f"{'PASS' if total <= TARGET_SECONDS else 'FAIL'}"
    )
    print()
    print(queue_metrics(log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
