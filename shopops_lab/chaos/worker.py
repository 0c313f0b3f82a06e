"""One chaos worker: a real process that drains the shared queue until nothing is left.

    python -m shopops_lab.chaos.worker URL NAME [ITEM ATTEMPT POINT KILLED_AT]

It opens its own store on URL, reads the run's settings and kill plan from it, and loops:
acquire, send the customer's email through the adapter, ack. At a planned point it prints
`stopped NAME POINT ITEM ATTEMPT` and waits; the supervisor kills it with SIGKILL there.
A worker restarted after a kill is told what killed its predecessor, and writes that crash
into the history first. Exit status 0 once every item is done or dead-lettered.
"""
from __future__ import annotations

import sys
import time
from typing import Sequence

from shopops_lab.chaos.plan import Kill, KillPoint
from shopops_lab.clock import SystemClock
from shopops_lab.effects import EmailAdapter, NaiveEmailAdapter
from shopops_lab.errors import LeaseExpiredError, StaleTokenError
from shopops_lab.events import EventKind
from shopops_lab.states import ItemState
from shopops_lab.store import open_store
from shopops_lab.worker.queue import Lease, Queue

__all__ = ["POISON_ERROR", "SETUP", "main", "work"]

SETUP = ("chaos", "setup")  # the record the supervisor writes and every worker reads
POISON_ERROR = "TemplateError: the order's template cannot be rendered"
_POLL_SECONDS = 0.02        # how long an idle worker waits before asking again


def work(url: str, name: str, killed: Sequence[str] = ()) -> int:
    store = open_store(url)
    setup = store.get(*SETUP)
    clock = SystemClock()
    queue = Queue(store=store, lease_seconds=setup["lease_seconds"], max_attempts=setup["max_attempts"],
                  clock=clock)
    if killed:
        item_id, attempt, point, at = killed
        queue.log.append(EventKind.WORKER_CRASHED, float(at), worker_id=name, item_id=item_id,
                         case_id=queue.item(item_id).case_id, attempt=int(attempt), point=point, signal="SIGKILL")
    adapter = (EmailAdapter if setup["adapter"] == "idempotent" else NaiveEmailAdapter)(store=store, clock=clock)
    plan = {(kill.item_id, kill.attempt): kill.point for kill in map(Kill.from_dict, setup["kills"])}

    def stop(lease: Lease, point: KillPoint) -> None:
        if plan.get((lease.item_id, lease.attempt)) is point:
            print(f"stopped {name} {point.value} {lease.item_id} {lease.attempt}", flush=True)
            sys.stdin.read()  # the supervisor's SIGKILL ends this; an empty read means it is gone
            raise SystemExit(3)

    while True:
        lease = queue.acquire(name)
        if lease is None:
            counts = queue.counts()
            if not counts[ItemState.READY] and not counts[ItemState.LEASED]:
                return 0
            time.sleep(_POLL_SECONDS)  # a lease elsewhere may still expire and come back
            continue
        stop(lease, KillPoint.AFTER_ACQUIRE)
        if lease.payload.get("poison"):
            queue.nack(lease, POISON_ERROR)
            continue
        adapter.send(lease.payload["idem_key"], case_id=lease.case_id, to=lease.payload["to"],
                     body="Sorry for the delay: your order ships today.", worker_id=name)
        stop(lease, KillPoint.AFTER_SEND)
        try:
            with store.atomic:  # the ack's own transaction, held open so a kill can land inside it
                queue.ack(lease)
                stop(lease, KillPoint.IN_ACK)
        except (StaleTokenError, LeaseExpiredError):
            continue  # the lease ran out while this worker was slow: the redelivery owns the item now
        stop(lease, KillPoint.AFTER_ACK)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 6):
        print("usage: python -m shopops_lab.chaos.worker URL NAME [ITEM ATTEMPT POINT KILLED_AT]", file=sys.stderr)
        return 2
    return work(args[0], args[1], args[2:])


if __name__ == "__main__":
    raise SystemExit(main())
