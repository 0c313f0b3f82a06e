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
from shopops_lab.store.base import once
from shopops_lab.worker.queue import Lease, Queue

__all__ = ["FILLED", "POISON_ERROR", "EmailWorkload", "fill_morning", "morning"]

POISON_ERROR = "TemplateError: the order's template cannot be rendered"
FILLED = "chaos fill"  # the records of the batches enqueued: ("chaos fill", "0001") -> their item ids
_BATCH = 100  # items enqueued in one transaction (a commit each: fewer waits for the disk)
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


def morning(rng: random.Random, items: int) -> list[dict[str, Any]]:
    """A morning's emails, as `enqueue` arguments: about one case in five has two, served in
    order; one in ten is poison. Drawn from `rng` alone, so a seed always makes the same morning."""
    emails: list[dict[str, Any]] = []
    case = 0
    while len(emails) < items:
        case += 1
        case_id = f"O-{1000 + case}"
        for n in range(1 if rng.random() < 0.8 or len(emails) + 1 == items else 2):
            bad = rng.random() < _POISON_SHARE
            emails.append(
                {
                    "case_id": case_id,
                    "tenant_id": "store_northline",
                    "kind": "contact_send",
                    "payload": {
                        "idem_key": f"{case_id}:email:{n + 1}",
                        "to": f"{case_id.lower()}@example.com",
                        **({"poison": True} if bad else {}),
                    },
                }
            )
    return emails


def fill_morning(queue: Queue, rng: random.Random, items: int) -> tuple[list[str], set[str]]:
    """Enqueue the morning `rng` draws, in batches, each batch exactly once (`once`, keyed by
    its number): a fill stopped anywhere (a kill, a restart, a full disk) is finished by
    calling it again with the same seed, and nothing is ever enqueued twice. Returns the ids,
    in order, and the poison ones."""
    emails = morning(rng, items)
    ids: list[str] = []
    for start in range(0, len(emails), _BATCH):

        def enqueue(batch: list[dict[str, Any]] = emails[start : start + _BATCH]) -> list[str]:
            return [queue.enqueue(**email) for email in batch]

        ids += once(queue.store, FILLED, f"{start // _BATCH + 1:04d}", enqueue)
    return ids, {item_id for item_id, email in zip(ids, emails, strict=True) if email["payload"].get("poison")}
