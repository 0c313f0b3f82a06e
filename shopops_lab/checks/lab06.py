"""Lab 06: the outbox's two ends. Exercise 06.1, the dispatcher `dispatch(outbox, broker)`,
is judged in `checks.outbox_world` (`dispatcher`, `replay_dispatch`); exercise 06.2, below, is
a consumer that applies each outbox message once, however often it arrives.

The learner writes `handle(delivery, processed, apply)`. The check explores: two refunds
of the same case and amount (out-0001 and out-0002, told apart only by their message ids),
two consumers C1 and C2 taking deliveries from one broker, one payment call that times out
(before it reached the payments provider, or after the provider paid: the caller cannot
tell which), one consumer process that dies anywhere (before or after any call it makes to
`processed` or `apply`, or after `handle` returned but before its ack), and, once everything
else is done, a copy of out-0001 replayed from the dead-letter queue a day later. Every
schedule of that is played; a delivery whose consumer died, or whose handle raised, comes
back as a new copy, and a consumer that died starts again from a fresh process.

`processed` is the consumer's own database: each write commits at once. `apply` is a remote
call to the payments provider, which no transaction of the consumer's can take back: it
carries the message id as its idempotency key, and the provider, like Stripe, keeps a key
and the answer it gave for about a day, so a repeat within the day pays nothing more; the
day-late replay finds the key pruned, and pays again unless the consumer's own record stops
it. The check judges what the provider paid (each refund once) and what `handle` returned
(True when its apply went through, False when it skipped a copy), never how the learner
spells the records. `replay(handle, schedule)` plays any schedule.
"""

from __future__ import annotations

import contextlib
import copy
import sys
from typing import Any

from shopops_lab.checks import answers, outbox_world
from shopops_lab.checks.base import Exercise, ForeignAnswer, Wrong, describe, error_text, named, watching
from shopops_lab.checks.fresh import canonical
from shopops_lab.checks.sealed import behind, seal
from shopops_lab.explore import Bound, FaultKind, Move, Replayed, Run, Scenario, copied, explore, refuse
from shopops_lab.explore import replay as replay_schedule
from shopops_lab.outbox import Delivery, IdempotentConsumer

FAILURE = "payments API timed out"  # what the consumer sees, whether or not the provider paid
MESSAGES = {"out-0001": ("O-1001", 35.0), "out-0002": ("O-1001", 35.0)}
PUBLISHED = ("out-0001", "out-0002")  # what the broker holds at the start, oldest first
LATE = "out-0001"  # the copy a DLQ replay delivers a day later, after the provider pruned its keys
CONSUMERS = ("C1", "C2")
BOUND = Bound(
    words="2 consumers, 2 refunds, 1 payment call timing out (paid or not), a crash anywhere, and a copy of "
    "out-0001 replayed from the DLQ a day later",
    budget={"crash": 1, "fail": 1},
    faults=(FaultKind.LOST_REQUEST, FaultKind.LOST_REPLY, FaultKind.FAIL, FaultKind.TIMEOUT),
)
SEEDS = ()  # no random numbers: every schedule within BOUND is played
DISPATCH_BOUND = outbox_world.BOUND  # exercise 06.1's scope
_KIT_APPLY = IdempotentConsumer._apply.__code__
_DELEGATES = (
    "handle hands the delivery to the kit's IdempotentConsumer, which already implements this exercise: "
    "write the duplicate check and the record in handle yourself."
)


class _Refunds:
    """One schedule's world: the broker's pending copies, the consumers, their `processed`
    records and the payments provider's ledger and keys, which the learner's code reaches only
    through its two facades."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.pending = [self._copy(mid, n) for n, mid in enumerate(PUBLISHED, 1)]  # the broker's queue, oldest first
        self.seq = len(self.pending)
        self.records: set[Any] = set()  # the processed table
        self.paid: dict[str, list[int]] = {mid: [] for mid in MESSAGES}  # the provider's refunds, by delivery
        self.keys: set[str] = set()  # the provider's idempotency keys, kept for about a day
        self.late = False  # has the day passed and the DLQ replay come?
        self.state = dict.fromkeys(CONSUMERS, "idle")
        self.held: dict[str, Delivery] = {}
        self.history: dict[str, list[str]] = {mid: [] for mid in MESSAGES}
        self.failed = self.through = False  # in the call being played: did an apply fail? did one go through?
        self.paid_unheard = False  # in the call being played: did a call time out after the provider paid?
        self.problem: str | None = None
        self.processed, self.apply = _facades(run, self)

    def _copy(self, mid: str, seq: int) -> Delivery:
        case, amount = MESSAGES[mid]
        return Delivery(seq=seq, message_id=mid, topic="refund.issued", payload={"case_id": case, "amount": amount})

    def _again(self, delivery: Delivery) -> str:
        self.seq += 1
        self.pending.append(self._copy(delivery.message_id, self.seq))
        return f"the broker delivers {delivery.message_id} again as #{self.seq}"

    def moves(self) -> list[Move]:
        moves = []
        for who in CONSUMERS:
            state = self.state[who]
            if state == "idle" and self.pending:
                moves.append(Move(f"{who} handle", who, self._handle, peer="payments"))
            elif state == "handled":
                moves.append(Move(f"{who} ack", who, self._ack, peer="broker"))
                moves.append(Move(f"{who} crash", who, crash=True, cost="crash"))
        if not moves and not self.late:
            moves.append(Move("a day later, the DLQ is replayed", "operator", self._replayed, peer="broker"))
        return moves

    def clone(self, run: Run) -> _Refunds:
        """This schedule's state, copied to go on from: the consumers' copies of the answer
        twinned in their process first (they hold nothing of this world's between calls),
        then the broker, the records, the provider and the history copied here, with facades
        of its own."""
        run.twin()
        twin = copy.copy(self)
        twin.run = run
        twin.pending, twin.records, twin.keys = list(self.pending), copied(self.records), set(self.keys)
        twin.paid = {mid: list(seqs) for mid, seqs in self.paid.items()}
        twin.history = {mid: list(lines) for mid, lines in self.history.items()}
        twin.state, twin.held = dict(self.state), dict(self.held)
        twin.processed, twin.apply = _facades(run, twin)
        return twin

    alike = CONSUMERS  # both run fresh copies of handle with the same facades: the code cannot tell them apart

    def actor_print(self, who: str) -> Any:
        """`who`'s part of the state: where it stands, and the delivery it holds."""
        return self.state[who], self.held[who].seq if who in self.held else None

    def fingerprint(self) -> Any:
        """The broker's queue, the records, the provider; each consumer's part is in
        `actor_print` (the explorer counts C1 and C2 as alike)."""
        return (
            tuple((d.seq, d.message_id) for d in self.pending),
            canonical(self.records),
            tuple((m, tuple(s)) for m, s in self.paid.items()),
            tuple(sorted(self.keys)),
            self.late,
            self.seq,
        )

    def broken(self) -> str | None:
        return self.problem

    def finished(self) -> str | None:
        for mid, seqs in self.paid.items():
            if not seqs:
                return f"{_named(mid)} was never paid, yet every copy of it was acknowledged: {self._why(mid)}"
        return None

    def crashed(self, actor: str) -> str | None:
        delivery = self.held.pop(actor, None)
        self.state[actor] = "idle"
        if delivery is None:
            return None
        how = f" ({self.run.fault.words})" if self.run.fault is not None else " (after handle returned, before its ack)"
        self.history[delivery.message_id].append(f"the consumer died on #{delivery.seq}{how}")
        return self._again(delivery)

    def pay(self, delivery: Delivery) -> bool:
        """The provider receives a refund request keyed by the message id: it pays unless it
        holds that key (then it answers as it did the first time). True if it paid now."""
        mid = delivery.message_id
        if mid in self.keys:
            return False
        self.keys.add(mid)
        seqs = self.paid[mid]
        seqs.append(delivery.seq)
        if len(seqs) > 1:
            late = (
                " a day later, after the provider had pruned the key (payments providers keep one about a day)"
                if (self.late)
                else ""
            )
            self._fail(
                f"{_named(mid)} was paid twice: by delivery #{seqs[0]} and again by #{seqs[1]},{late}. #{seqs[1]} is "
                "a copy of the same message: only the consumer's own record of what it applied can stop a copy the "
                "provider no longer recognises."
            )
        return True

    def _ack(self, run: Run) -> str:
        who = run.current_actor
        delivery = self.held.pop(who)
        self.state[who] = "idle"
        return f"{who} acks #{delivery.seq}"

    def _replayed(self, run: Run) -> str:
        self.late = True
        self.keys.clear()  # pruned: a day has passed
        self.seq += 1
        self.pending.append(self._copy(LATE, self.seq))
        return (
            f"a day later the payments provider has pruned its keys, and a DLQ replay delivers {LATE} again as "
            f"#{self.seq}"
        )

    def _handle(self, run: Run) -> str:
        who = run.current_actor
        delivery = self.pending.pop(0)
        self.held[who], self.state[who] = delivery, "holding"
        self.failed = self.through = self.paid_unheard = False
        before = len(self.paid[delivery.message_id])
        run.facade(processed=self.processed, apply=self.apply)  # each records its writes (`Run.recorded`)
        called = run.call(run.answer(who), delivery, self.processed, self.apply)
        if called.error is not None:
            return self._raised(who, delivery, called.error)
        self.state[who] = "handled"
        paid = len(self.paid[delivery.message_id]) > before
        said = f"{who} takes #{delivery.seq} {delivery.message_id}, handle returns {called.value!r}" + (
            ": refund paid" if paid else ": the provider knew the key and paid nothing more" if self.through else ""
        )
        if self.failed and not self.through:
            what = "the provider had paid" if paid else "the request had never reached the provider: nothing was paid"
            self._fail(
                f"on delivery #{delivery.seq} of {delivery.message_id}, apply raised ConnectionError ({FAILURE}) "
                f"but handle returned {called.value!r}, so the consumer acknowledges the delivery. Here {what}; "
                "after a timeout nobody can tell which. Let the error propagate: the delivery comes back, and the "
                "same key makes the repeat safe."
            )
        elif type(called.value) is not bool or called.value != self.through:
            did = "its apply went through" if self.through else "it did not call apply, or apply did not go through"
            self._fail(
                f"handle returned {describe(called.value)} for delivery #{delivery.seq} of "
                f"{delivery.message_id}, and {did}: return True when you apply a message and False when you skip "
                "a copy."
            )
        if not self.through:
            self.history[delivery.message_id].append(f"#{delivery.seq} was skipped as a duplicate")
        return said

    def _raised(self, who: str, delivery: Delivery, error: Exception) -> str:
        del self.held[who]
        self.state[who] = "idle"
        if not self.failed:
            self._fail(
                f"handle raised {error_text(error)} on delivery #{delivery.seq} of {delivery.message_id}, "
                "though apply did not fail there."
            )
        self.history[delivery.message_id].append(f"its apply timed out on #{delivery.seq}")
        when = "after the provider paid" if self.paid_unheard else "before reaching the provider"
        return (
            f"{who} takes #{delivery.seq} {delivery.message_id}: apply timed out {when}, handle raises "
            f"{type(error).__name__}; {self._again(delivery)}"
        )

    def _fail(self, text: str) -> None:
        if self.problem is None:
            self.problem = text

    def _why(self, mid: str) -> str:
        twins = [m for m in MESSAGES if m != mid and self.paid[m]]
        said = "; ".join(self.history[mid])
        if twins and not any("timed out" in h or "died" in h for h in self.history[mid]):
            return f"{said}, though only {twins[0]}, a different message with the same case and amount, had been paid."
        return f"{said}, though no refund of it had been paid."


def _named(mid: str) -> str:
    case, amount = MESSAGES[mid]
    return f"{mid} (refund {amount:.2f} for {case})"


def _facades(run: Run, world: _Refunds) -> tuple[Any, Any]:
    """What handle is handed: the processed table (in, add, discard, remove, len, iter)
    and apply(delivery). The database behind them stays with the check (`checks.sealed`)."""
    return seal(Processed(), world), seal(Apply(), world)


def _write(processed: Processed, name: str, change: str, key: Any) -> None:
    """The learner's `processed.<name>(key)`, a write of the table (`change` on its set) that
    commits at once: recorded (`Run.recorded`), then between the fault points `processed.<name>`."""
    world = behind(processed)
    hash(key)
    with world.run.recorded(("processed", name), (key,), {}):
        world.run.enter(f"processed.{name}")
        getattr(world.records, change)(key)
        world.run.leave(f"processed.{name}")


class Processed:
    """The durable record of processed messages: `key in processed`, processed.add(key)."""

    __slots__ = ("__weakref__",)

    def __contains__(self, key: Any) -> bool:
        return key in behind(self).records

    def __len__(self) -> int:
        return len(behind(self).records)

    def __iter__(self):
        return iter(sorted(behind(self).records, key=repr))

    def add(self, key: Any) -> None:
        _write(self, "add", "add", key)

    def discard(self, key: Any) -> None:
        _write(self, "discard", "discard", key)

    def remove(self, key: Any) -> None:
        if key not in behind(self).records:
            raise KeyError(key)
        _write(self, "remove", "discard", key)

    def __repr__(self) -> str:
        return f"<processed: {len(behind(self).records)} records>"


class Apply:
    """apply(delivery): ask the payments provider for the refund of `delivery`, keyed by its
    message id; raises ConnectionError when the call times out (paid or not: nobody can tell)."""

    __slots__ = ("__weakref__",)

    def __call__(self, delivery: Delivery) -> None:
        world = behind(self)
        if sys._getframe(1).f_code is _KIT_APPLY:  # called by the kit's own consumer, not by handle
            world._fail(_DELEGATES)
        with world.run.recorded(("apply",), (delivery,), {}):
            if not isinstance(delivery, Delivery):
                raise TypeError(f"apply() takes the delivery itself, not {type(delivery).__name__}")
            if world.run.enter("apply", can_fail=True):  # the request never reached the provider
                world.failed = True
                raise ConnectionError(FAILURE)
            world.pay(delivery)
            if world.run.leave("apply"):  # the provider paid; its reply is lost to the timeout
                world.failed = world.paid_unheard = True
                raise ConnectionError(FAILURE)
            world.through = True

    def __repr__(self) -> str:
        return "<apply>"


def scenario() -> Scenario:
    return Scenario(name="idempotent consumer", bound=BOUND, start=_Refunds)


def replay(handle, schedule: str) -> Replayed:
    """Play one schedule (as the check's message writes it) with your `handle`: print it
    for the steps, or call .diagram() for the picture."""
    return replay_schedule(scenario(), handle, schedule)


def _run(handle) -> str:
    foreign = isinstance(handle, ForeignAnswer)  # in the learner's process: watch the kit's consumer run there
    watch: contextlib.AbstractContextManager[set[str]] = (
        watching(handle, IdempotentConsumer._apply) if foreign else contextlib.nullcontext(set())
    )
    with watch as handed:
        found = explore(scenario(), handle)
    if handed:  # said first, as the notebook says it at the first refund
        raise Wrong(_DELEGATES)
    refuse(found, f'lab06.replay({named(handle, "handle")}, "{{schedule}}")')
    return (
        f"{found.summary}: the provider paid every refund once (effectively once: no copy of a message paid it "
        "again, not even a day later), and handle said each time whether it applied or skipped."
    )


exercise = Exercise(
    id="06.2",
    title="an idempotent consumer",
    answer="handle",
    run=_run,
    hints=(
        "Two deliveries of one message carry the same message id; two different messages never do, "
        "even when their payloads are equal. What must a consumer remember, and when is a message "
        "really done? And what does a timeout tell you about the refund?",
        "delivery.message_id is the outbox's id (out-0001); delivery.seq numbers the copies. processed is a "
        "set that outlives the consumer: `in` to ask, .add() to record. apply(delivery) asks the payments "
        "provider, keyed by the message id, and raises ConnectionError when it times out, paid or not.",
        "A copy your record already names is answered without calling the provider. Anything else goes to "
        "the provider first, and is written down only once the provider said yes: a record written before "
        "the answer can outlive a refund that never happened. A timeout is not an answer, so it is not "
        "caught: the delivery comes back, and the key the call carries makes the repeat safe while the "
        "provider remembers it; after that, only your record does.",
    ),
)


# ------------------------------------------------------------------ 06.1: the dispatcher
def replay_dispatch(dispatch, schedule: str) -> Replayed:
    """Play one schedule of the dispatcher's check (as its message writes it) with your
    `dispatch`: print it for the steps, or call .diagram() for the picture."""
    return replay_schedule(outbox_world.scenario(), dispatch, schedule)


def _run_dispatch(dispatch) -> str:
    found = explore(outbox_world.scenario(), dispatch)
    refuse(found, f'lab06.replay_dispatch({named(dispatch, "dispatch")}, "{{schedule}}")')
    return (
        f"{found.summary}: no message was lost, each reached the broker first in the order it was committed, "
        "and a message went out again only when a crash fell between its publish and its note."
    )


dispatcher = Exercise(
    id="06.1",
    title="an outbox dispatcher",
    answer="dispatch",
    run=_run_dispatch,
    hints=(
        "The dispatcher's process can die between any two of its calls, and the next pass starts from what the "
        "outbox says, not from what the dead process remembered. Which order of the two writes (the broker's "
        "and the outbox's) turns that crash into a duplicate rather than a loss?",
        "outbox.pending() lists what has not gone out yet, oldest first; broker.publish(...) returns once "
        "the broker has stored the message and raises ConnectionError when it cannot be reached; "
        "outbox.mark_sent(id) (or outbox.delete(id)) takes a message off the list for good.",
        "Each message's two writes, the broker's and the outbox's, come in the order that turns a crash between them "
        "into a duplicate rather than a loss, and each message is noted before the next is published, so a failed "
        "publish costs no duplicate. Keep nothing between passes, and catch nothing the broker raises: the next pass "
        "starts from what the outbox still lists.",
    ),
)


# Its quizzes (the right option and every explanation) are kept with the answer keys, loaded on
# first use (`checks.answers`): importing this module loads none of them.
__getattr__ = answers.lazy("lab06", ("CONFIRM_QUIZ", "ORDER_QUIZ"))
