"""The chaos run's workload: a morning of apology emails, a few of them poison.

Each worker sends the customer's email through the adapter (idempotent, or naive for
contrast) and acks. Its stop points are `KillPoint`s: after the acquire, right after the
send (the crash window between a side effect and its record), inside the ack's transaction,
and after the ack.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from shopops_lab.chaos.plan import KillPoint
from shopops_lab.chaos.worker import Stops
from shopops_lab.clock import SystemClock
from shopops_lab.effects import EmailAdapter, NaiveEmailAdapter
from shopops_lab.store import Store
from shopops_lab.worker.queue import Lease, Queue

__all__ = ["POISON_ERROR", "EmailWorkload", "fill_morning"]

POISON_ERROR = "TemplateError: the order's template cannot be rendered"
_POISON_SHARE = 0.1  # one email in ten cannot be rendered: it must end in the DLQ, not loop


class EmailWorkload:
    points = tuple(KillPoint)

    def __init__(self, adapter: str) -> None:
        self.adapter = adapter

    def prepare(self, store: Store, queue: Queue, stops: Stops, name: str) -> Callable[[Lease], Any]:
        adapter = (EmailAdapter if self.adapter == "idempotent" else NaiveEmailAdapter)(
            store=store, clock=SystemClock()
        )

        def handle(lease: Lease) -> None:
            if lease.payload.get("poison"):
                queue.nack(lease, POISON_ERROR)
                return
            adapter.send(
                lease.payload["idem_key"],
                case_id=lease.case_id,
                to=lease.payload["to"],
                body="Sorry for the delay: your order ships today.",
                worker_id=name,
            )
            stops.at(KillPoint.AFTER_SEND, lease)
            with store.atomic:  # the ack's own transaction, held open so a kill can land inside it
                queue.ack(lease)
                stops.at(KillPoint.IN_ACK, lease)
            stops.at(KillPoint.AFTER_ACK, lease)

        return handle


def fill_morning(queue: Queue, rng: random.Random, items: int) -> tuple[list[str], set[str]]:
    """A morning's emails: about one case in five has two, served in order; one in ten is poison."""
    ids: list[str] = []
    poison: set[str] = set()
    case = 0
    while len(ids) < items:
        case += 1
        case_id = f"O-{1000 + case}"
        for n in range(1 if rng.random() < 0.8 or len(ids) + 1 == items else 2):
            bad = rng.random() < _POISON_SHARE
            item_id = queue.enqueue(
                case_id=case_id,
                tenant_id="store_northline",
                kind="contact_send",
                payload={
                    "idem_key": f"{case_id}:email:{n + 1}",
                    "to": f"{case_id.lower()}@example.com",
                    **({"poison": True} if bad else {}),
                },
            )
            ids.append(item_id)
            if bad:
                poison.add(item_id)
    return ids, poison
