"""Lab 06's dispatcher world: an outbox, a broker, and one dispatcher process that dies.

The learner writes `dispatch(outbox, broker)`, one pass of the dispatcher: publish what is
pending and note that it went. The world: out-0001 is in the outbox from the start, the
application commits out-0002 at any point, the dispatcher D1 runs a pass whenever something
is pending (up to `PASSES` passes), one publish fails (the broker cannot be reached), and
D1's process dies once, anywhere: before or after any call it makes, or between passes. A
dead process starts again remembering nothing. Every write to the outbox commits on its own.

What is judged is what reached the broker and what the outbox says, never how `dispatch`
is spelled: a message the outbox no longer lists as pending must be on the broker (else it
is lost); messages reach the broker first in the order they were committed; a message goes
out again only after a crash kept its note from being written; at the end, everything is
published and noted. A crash between publish and note gives a duplicate, which the
consumer of exercise 06.2 absorbs: that is the price of never losing one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shopops_lab.checks.base import error_text
from shopops_lab.checks.sealed import behind, seal
from shopops_lab.explore import Bound, FaultKind, Move, Run, Scenario
from shopops_lab.outbox import OutboxMessage

FAILURE = "broker unreachable: the publish was not stored"
MESSAGES: dict[str, tuple[str, Mapping[str, Any]]] = {  # id -> (topic, payload)
    "out-0001": ("refund.approved", {"case_id": "O-1001", "amount": 35.0}),
    "out-0002": ("order.closed", {"case_id": "O-1001"}),
}
PASSES = 4
BOUND = Bound(
    words=f"1 dispatcher, 2 outbox messages (the second committed at any point), up to {PASSES} passes, "
    "1 failed publish, a crash anywhere",
    budget={"crash": 1, "fail": 1},
    faults=(FaultKind.LOST_REQUEST, FaultKind.LOST_REPLY, FaultKind.FAIL),
)


class _Outbox:
    """One schedule's world: the outbox's rows, the broker's log, the dispatcher's passes."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.rows: dict[str, str] = {"out-0001": "pending"}  # message id -> pending, sent or deleted
        self.published: list[str] = []  # the broker's log, in order
        self.passes = 0
        self.in_pass: list[str] = []  # published in the pass being played
        self.said: list[str] = []  # what the pass being played did, in order
        self.failed = False
        self.excused: set[str] = set()  # published before a crash that kept its note from being written
        self.first_pass: dict[str, int] = {}  # message id -> the pass that first published it
        self.failed_passes: set[int] = set()  # the passes in which a publish failed
        self.problem: str | None = None
        self.outbox, self.broker = seal(Outbox(), self), seal(Broker(), self)

    def moves(self) -> list[Move]:
        moves = []
        if "out-0002" not in self.rows:
            moves.append(Move("app commits out-0002", "app", self._commit, peer="outbox"))
        if self.pending() and self.passes < PASSES:
            moves.append(Move("D1 dispatch", "D1", self._dispatch, peer="broker"))
            if self.passes:
                moves.append(Move("D1 crash", "D1", crash=True, cost="crash"))
        return moves

    def fingerprint(self) -> Any:
        return tuple(sorted(self.rows.items())), tuple(self.published), self.passes, tuple(sorted(self.excused))

    def broken(self) -> str | None:
        for mid, state in sorted(self.rows.items()):
            if state != "pending" and mid not in self.published:
                what = "marked sent" if state == "sent" else "deleted from the outbox"
                self._fail(
                    f"{mid} was {what}, but the broker never got it: no pass will publish it again, and the "
                    "message is lost."
                )
        return self.problem

    def finished(self) -> str | None:
        for mid, state in self.rows.items():
            if mid not in self.published:
                return (
                    f"{mid} was committed but never published: after {self.passes} passes of dispatch it is "
                    f"still {state}, and nobody hears of it."
                )
            if state == "pending":
                times = self.published.count(mid)
                return (
                    f"{mid} was published ({times} time{'s' if times > 1 else ''}) but the outbox still lists "
                    f"it as pending after {self.passes} passes: the outbox is all a dispatcher that starts "
                    "knows, and it publishes the message again."
                )
        return None

    def crashed(self, actor: str) -> str | None:
        inside = self.said and self.run.fault is not None  # died inside a pass, not between two
        done = f"in pass {self.passes} it {', '.join(self.said)} before dying; " if inside else ""
        self.said = []
        self.excused |= {mid for mid in self.published if self.rows.get(mid) == "pending"}
        return f"{done}the next pass starts a fresh process"

    def pending(self) -> list[str]:
        return [mid for mid, state in sorted(self.rows.items()) if state == "pending"]

    def message(self, mid: str) -> OutboxMessage:
        topic, payload = MESSAGES[mid]
        return OutboxMessage(id=mid, topic=topic, payload=payload, created_at=float(mid[-1]))

    def _commit(self, run: Run) -> str:
        self.rows["out-0002"] = "pending"
        return "the application commits out-0002 (order.closed for O-1001) with its state change"

    def _dispatch(self, run: Run) -> str:
        self.passes += 1
        self.in_pass, self.said, self.failed = [], [], False
        called = run.call(run.answer("D1"), self.outbox, self.broker)  # a crash inside ends the step here
        if called.error is not None:
            self.said.append(f"raises {type(called.error).__name__}")
            if not self.failed:
                self._fail(
                    f"dispatch raised {error_text(called.error)} in pass {self.passes}, though no publish failed."
                )
        return f"D1 dispatch pass {self.passes}: {', '.join(self.said) or 'does nothing'}"

    def note(self, mid: str, state: str) -> None:
        """An outbox write: `mid` is no longer pending (judged after the step: lost if the broker never got it)."""
        self.rows[mid] = state
        self.said.append(f"marks {mid} sent" if state == "sent" else f"deletes {mid}")

    def publish(self, mid: str) -> None:
        if self.rows.get(mid) != "pending" and mid in self.published:
            self._fail(
                f"{mid} was published again after the outbox had it {self.rows.get(mid)}: a duplicate with "
                "no crash to explain it."
            )
        elif mid in self.in_pass:
            self._fail(f"{mid} was published twice in one pass: publish each pending message once.")
        elif mid in self.published and mid not in self.excused:
            earlier = self.first_pass[mid]
            why = " (a publish after it failed, and the pass stopped)" if earlier in self.failed_passes else ""
            self._fail(
                f"{mid} was published again in pass {self.passes}, with no crash to explain it: pass {earlier} "
                f"published it and ended without noting it{why}, so the outbox still listed it. Only a crash "
                "between a message's publish and its note may cost a duplicate."
            )
        elif mid not in self.published and any(m not in self.published for m in self.pending() if m < mid):
            first = next(m for m in self.pending() if m < mid and m not in self.published)
            self._fail(
                f"the broker got {mid} before {first}, which was committed first: consumers see the case's "
                f"messages out of order. Publish oldest first, and stop the pass when a publish fails."
            )
        self.published.append(mid)
        self.first_pass.setdefault(mid, self.passes)
        self.excused.discard(mid)
        self.in_pass.append(mid)
        self.said.append(f"publishes {mid}")

    def _fail(self, text: str) -> None:
        if self.problem is None:
            self.problem = text


class Outbox:
    """The outbox table as the dispatcher sees it: pending(), mark_sent(id), delete(id)."""

    __slots__ = ("__weakref__",)

    def pending(self) -> list[OutboxMessage]:
        """The messages not yet marked sent (or deleted), oldest first."""
        world = behind(self)
        world.run.enter("outbox.pending")
        found = [world.message(mid) for mid in world.pending()]
        world.run.leave("outbox.pending")
        return found

    def mark_sent(self, message_id: str) -> None:
        """Note that `message_id` went out: pending() no longer lists it. Commits at once."""
        _write(self, "outbox.mark_sent", message_id, "sent")

    def delete(self, message_id: str) -> None:
        """Remove `message_id`'s row: pending() no longer lists it. Commits at once."""
        _write(self, "outbox.delete", message_id, "deleted")

    def __repr__(self) -> str:
        return f"<outbox: {len(behind(self).pending())} pending>"


def _write(outbox: Outbox, point: str, message_id: Any, state: str) -> None:
    world = behind(outbox)
    if not isinstance(message_id, str) or message_id not in world.rows:
        raise KeyError(f"{message_id!r} is not in the outbox: pass a message's .id, e.g. 'out-0001'")
    world.run.enter(point)
    if world.rows[message_id] == "pending":
        world.note(message_id, state)
    world.run.leave(point)


class Broker:
    """The broker as the dispatcher sees it: publish(message) stores one more copy, or raises
    ConnectionError when the broker cannot be reached (then nothing was stored)."""

    __slots__ = ("__weakref__",)

    def publish(self, message: OutboxMessage) -> None:
        """Hand `message` (from outbox.pending()) to the broker; returns once it is stored."""
        world = behind(self)
        if not isinstance(message, OutboxMessage) or message.id not in world.rows:
            raise TypeError(f"publish() takes a message from outbox.pending(), not {type(message).__name__}")
        if world.run.enter("broker.publish", can_fail=True):
            world.failed = True
            world.failed_passes.add(world.passes)
            raise ConnectionError(FAILURE)
        world.publish(message.id)
        world.run.leave("broker.publish")

    def __repr__(self) -> str:
        return "<broker>"


def scenario() -> Scenario:
    return Scenario(name="outbox dispatcher", bound=BOUND, start=_Outbox)
