"""Where the workers die: a kill plan drawn from the seed, decided before any process starts.

A kill is named by what it interrupts, not by when: "whoever holds item-0007 on its first
attempt dies right after the email went out". Every worker reads the plan; the one that
reaches a planned point reports it and waits, and the supervisor kills it with SIGKILL
right there (a delivery that lost its lease before getting there passes the kill on to the
item's redelivery). Which process happens to hold the item depends on timing; where the
kill lands does not, so the same seed always interrupts the same work at the same places.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shopops_lab.errors import BadArgumentError

__all__ = ["Kill", "KillPoint", "plan_kills"]


class KillPoint(StrEnum):
    """The places a worker can be stopped, in the order one delivery passes them."""

    AFTER_ACQUIRE = "after_acquire"  # holds the lease, has done nothing yet
    AFTER_SEND = "after_send"  # the email went out; the ack that records it has not: the crash window
    IN_ACK = "in_ack"  # inside the ack's transaction, before it commits
    AFTER_ACK = "after_ack"  # the work is recorded; nothing is lost by dying now

    @property
    def before_the_record(self) -> bool:
        """True where the item is still leased when the worker dies (it will come back)."""
        return self is not KillPoint.AFTER_ACK


@dataclass(frozen=True, kw_only=True, slots=True)
class Kill:
    """Whoever holds `item_id` on delivery number `attempt` dies at `point` (SIGKILL). In a
    record of lab 08's schedules, `pause` marks a worker frozen there instead (until another
    worker took the item over). Points are named by the workload (`KillPoint` for the emails)."""

    item_id: str
    attempt: int
    point: str
    pause: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"item_id": self.item_id, "attempt": self.attempt, "point": str(self.point), "pause": self.pause}

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> Kill:
        return cls(item_id=row["item_id"], attempt=row["attempt"], point=row["point"], pause=row.get("pause", False))

    def __str__(self) -> str:
        return f"{self.item_id} attempt {self.attempt} {'paused' if self.pause else 'killed'} {self.point}"


def plan_kills(
    rng: random.Random, items: Sequence[str], poison: set[str], kills: int, max_attempts: int
) -> tuple[Kill, ...]:
    """`kills` kills over `items`, every one of which will happen.

    An item gets at most `max_attempts - 2` kills on consecutive attempts (1, 2, ...), so a
    slow machine that costs an extra expiry or two never uses up the attempts a planned kill
    needs. Every kill but an item's last one lands before the ack (the item must come back
    for the next); a poison item is only ever killed right after its acquire (it never
    sends). Most kills land right after a send, and at least one always does. Sorted by
    item, then attempt."""
    per_item = max_attempts - 2
    if per_item < 1:
        raise BadArgumentError(
            field="max_attempts",
            problem=f"is {max_attempts}",
            fix="allow at least 3 attempts, so a planned kill leaves room for a retry",
        )
    if kills > per_item * len(items):
        raise BadArgumentError(
            field="kills",
            problem=f"is {kills}, more than {len(items)} items can take",
            fix=f"plan at most {per_item * len(items)} kills, or add items",
        )
    counts = dict.fromkeys(items, 0)
    for _ in range(kills):
        open_items = [item for item, n in counts.items() if n < per_item]
        counts[rng.choice(open_items)] += 1
    plan = []
    for item, n in counts.items():
        for attempt in range(1, n + 1):
            points = (
                [KillPoint.AFTER_ACQUIRE]
                if item in poison
                else [p for p in KillPoint if attempt == n or p.before_the_record]
            )
            point = rng.choices(points, [_WEIGHTS[p] for p in points])[0]
            plan.append(Kill(item_id=item, attempt=attempt, point=point))
    if plan and not any(k.point is KillPoint.AFTER_SEND for k in plan):
        sendable = [i for i, k in enumerate(plan) if k.item_id not in poison]
        if sendable:  # the crash window this whole exercise is about is never left out
            k = plan[sendable[0]]
            plan[sendable[0]] = Kill(item_id=k.item_id, attempt=k.attempt, point=KillPoint.AFTER_SEND)
    return tuple(plan)


# The crash window between a side effect and its record is what the course is about: most kills land there.
_WEIGHTS = {KillPoint.AFTER_ACQUIRE: 2, KillPoint.AFTER_SEND: 4, KillPoint.IN_ACK: 1, KillPoint.AFTER_ACK: 1}
