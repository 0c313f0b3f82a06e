"""Lab 06: a consumer that applies each outbox message once, however often it arrives.

The learner writes `handle(delivery, processed, apply)`. Each seeded scenario commits
refunds through an outbox, lets the dispatcher crash after publishing (so a message is
published twice), has the broker redeliver a copy (a consumer that died before its
ack), and makes the payments API fail once, so the failed delivery must come back and
be applied then. Jordan's case O-1001 has two separate refunds of the same amount: two
messages with the same payload, which only their message ids tell apart.

The check judges what happened to the refunds (each applied exactly once, a failed one
applied later) and what `handle` returned, never how the learner spells the records in
`processed`: a message id, a derived key or a tuple all do. Every seed is a fresh world
with the same message ids, so a memory kept anywhere but in `processed` shows up as a
refund skipped in the next seed.

`replay(handle, seed)` returns the whole story of one scenario as text, for a learner
who wants to see what their function did delivery by delivery.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from shopops_lab import arguments
from shopops_lab.checks.base import Exercise, NotAttempted, Wrong, attempt
from shopops_lab.clock import FakeClock
from shopops_lab.errors import SimulatedCrash
from shopops_lab.events import EventLog
from shopops_lab.outbox import Broker, Delivery, Dispatcher, OutboxStore
from shopops_lab.widgets.quiz import Quiz

SEEDS = (1, 2, 3, 4, 5)
FAILURE = "payments API timed out"


@dataclass
class _Story:
    """What happened in one scenario: a line per delivery, the first problem, the counts."""

    seed: int
    lines: list[str] = field(default_factory=list)
    problem: str | None = None
    applied: dict[str, list[int]] = field(default_factory=dict)   # message id -> delivery seqs that applied it
    messages: dict[str, str] = field(default_factory=dict)        # message id -> "O-1001 12.5"
    processed: set = field(default_factory=set)

    def fail(self, text: str) -> None:
        if self.problem is None:
            self.problem = text
            self.lines.append(f"   ^ {text}")


def _outbox(rng: random.Random, story: _Story) -> tuple[Broker, dict[int, str]]:
    """Commit the refunds, dispatch with crashes; returns the broker and why each copy exists."""
    clock = FakeClock()
    log = EventLog()
    outbox, broker = OutboxStore(clock=clock, log=log), Broker()
    dispatcher = Dispatcher(outbox, broker)
    cases = [f"O-{1001 + n}" for n in range(rng.randint(3, 5))]
    for n, case in enumerate(cases):
        amount = rng.choice((12.5, 20.0, 35.0))
        for _ in range(2 if n == 0 else 1):  # O-1001: two mugs returned, two refunds of one size
            message_id = outbox.commit({"id": case, "status": "refund_approved"},
                                       {"topic": "refund.issued", "payload": {"case_id": case, "amount": amount}})
            story.messages[message_id] = f"{amount:.2f} for {case}"
    origin: dict[int, str] = {}
    first: dict[str, int] = {}  # message id -> the delivery that published it first
    crashed = False
    while outbox.pending():
        clock.advance(1)
        crash = not crashed or rng.random() < 0.3
        before = len(broker.deliveries)
        try:
            dispatcher.dispatch_once(crash_after_publish=crash)
        except SimulatedCrash:
            crashed = True
            story.lines.append(f"dispatcher published {broker.deliveries[-1].message_id} as "
                               f"#{broker.deliveries[-1].seq} and crashed before marking it sent")
        else:
            published = ", ".join(f"{d.message_id} as #{d.seq}" for d in broker.deliveries[before:])
            story.lines.append(f"dispatcher published {published} and marked them sent")
        for delivery in broker.deliveries[before:]:
            if delivery.message_id in first:
                origin[delivery.seq] = (f"the dispatcher crashed after publishing #{first[delivery.message_id]}, "
                                        "before marking it sent, so it published the message again")
            else:
                first[delivery.message_id] = delivery.seq
    return broker, origin


def _copy(broker: Broker, delivery: Delivery) -> Delivery:
    """The broker hands the same message out again (same message id, new delivery number)."""
    again = Delivery(seq=len(broker.deliveries) + 1, message_id=delivery.message_id, topic=delivery.topic,
                     payload=delivery.payload)
    broker.deliveries.append(again)
    return again


def _play(handle, seed: int) -> _Story:
    """Run one scenario to the end with the learner's `handle`, noting the first problem."""
    rng = random.Random(seed)
    story = _Story(seed=seed)
    broker, origin = _outbox(rng, story)
    ids = sorted(story.messages)
    failing = rng.choice(ids[1:])                       # its first apply fails
    echoed = rng.choice(broker.deliveries).seq          # the broker delivers this one once more
    failed_once: set[str] = set()
    call = {"raised": False}

    def apply(delivery: Delivery) -> None:
        if not isinstance(delivery, Delivery):
            raise TypeError(f"apply() takes the delivery itself, not {type(delivery).__name__}")
        if delivery.message_id == failing and failing not in failed_once:
            failed_once.add(failing)
            call["raised"] = True
            raise ConnectionError(FAILURE)
        story.applied.setdefault(delivery.message_id, []).append(delivery.seq)

    index = 0
    while index < len(broker.deliveries):
        delivery = broker.deliveries[index]
        index += 1
        done_before = list(story.applied.get(delivery.message_id, ()))
        call["raised"] = False
        returned, raised = attempt(handle, delivery, story.processed, apply)
        if raised is not None:
            _judge_raise(story, broker, origin, delivery, raised, apply_failed=call["raised"])
            continue
        _judge_return(story, delivery, returned, done_before, apply_failed=call["raised"],
                      failed_once=failed_once, origin=origin)
        if delivery.seq == echoed:
            again = _copy(broker, delivery)
            origin[again.seq] = f"the consumer that took #{delivery.seq} died before acknowledging it"
            story.lines.append(f"   (the consumer died before acknowledging #{delivery.seq}: the broker delivers "
                               f"{delivery.message_id} again as #{again.seq})")
    _tally(story, ids)
    return story


def _named(story: _Story, delivery: Delivery) -> str:
    return f"#{delivery.seq} {delivery.message_id} (refund {story.messages[delivery.message_id]})"


def _judge_raise(story: _Story, broker: Broker, origin: dict[int, str], delivery: Delivery, exc: Exception, *,
                 apply_failed: bool) -> None:
    """`handle` raised: right when apply failed (the delivery comes back), wrong otherwise."""
    seq, mid, name = delivery.seq, delivery.message_id, _named(story, delivery)
    if apply_failed:
        again = _copy(broker, delivery)
        origin[again.seq] = f"its apply failed on #{seq} ({FAILURE}), so #{seq} was never acknowledged"
        story.lines.append(f"{name}: apply failed ({FAILURE}); handle raised {type(exc).__name__}: "
                           f"not acknowledged, the broker delivers it again as #{again.seq}")
    else:
        story.lines.append(f"{name}: handle raised {type(exc).__name__}: {exc}")
        story.fail(f"handle raised {type(exc).__name__}: {exc} on delivery #{seq} of {mid} (seed {story.seed}), "
                   "though apply did not fail there.")


def _judge_return(story: _Story, delivery: Delivery, returned: Any, done_before: list[int], *, apply_failed: bool,
                  failed_once: set[str], origin: dict[int, str]) -> None:
    """`handle` returned: the delivery is acknowledged, so it must have applied a new
    message once, skipped a copy, and said which it did."""
    seq, mid, seed = delivery.seq, delivery.message_id, story.seed
    applied_now = len(story.applied.get(mid, [])) > len(done_before)
    story.lines.append(f"{_named(story, delivery)}: handle returned {returned!r}"
                       + (" - refund applied" if applied_now else "")
                       + (f" - apply failed ({FAILURE}) and the error was swallowed" if apply_failed else ""))
    if apply_failed:
        story.fail(f"on delivery #{seq} of {mid}, apply raised ConnectionError ({FAILURE}) but handle returned "
                   f"{returned!r}, so the consumer acknowledges the delivery and the refund never happens "
                   f"(seed {seed}). Let the error propagate: an unacknowledged delivery comes back.")
    elif applied_now and done_before:
        why = origin.get(seq, "the broker delivered it again")
        story.fail(f"{mid} (refund {story.messages[mid]}) was applied twice, by delivery #{done_before[0]} and "
                   f"again by #{seq} (seed {seed}). #{seq} is a copy of the same message: {why}.")
    elif not applied_now and not done_before:
        if mid in failed_once:
            reason = (f"its first apply failed ({FAILURE}), and a message whose apply failed has not been "
                      "processed yet")
        else:
            twins = [m for m, text in story.messages.items() if text == story.messages[mid] and m != mid
                     and story.applied.get(m)]
            reason = (f"only {twins[0]}, a different message with the same case and amount, had been "
                      "applied" if twins else "nothing had applied it before in this scenario, which starts "
                      "with an empty processed set")
        story.fail(f"delivery #{seq} of {mid} (refund {story.messages[mid]}) was skipped although {mid} had "
                   f"never been applied (seed {seed}): {reason}.")
    elif bool(returned) != applied_now:
        story.fail(f"handle returned {returned!r} for delivery #{seq} of {mid}, which it "
                   f"{'applied' if applied_now else 'skipped'}: return True when you apply a message and "
                   "False when you skip a duplicate.")


def _tally(story: _Story, ids: list[str]) -> None:
    """Every message applied exactly once, over the whole scenario."""
    for mid in ids:
        seqs = story.applied.get(mid, [])
        if not seqs:
            story.fail(f"{mid} (refund {story.messages[mid]}) was never applied (seed {story.seed}).")
        elif len(seqs) > 1:
            by = (f"all by delivery #{seqs[0]}" if len(set(seqs)) == 1
                  else "by deliveries " + ", ".join(f"#{n}" for n in seqs))
            story.fail(f"{mid} (refund {story.messages[mid]}) was applied {len(seqs)} times, {by} "
                       f"(seed {story.seed}): call apply once per message.")
    counts = ", ".join(f"{mid} x{len(story.applied.get(mid, []))}" for mid in ids)
    story.lines.append(f"refunds applied per message: {counts}")


def replay(handle, seed: int) -> str:
    """The story of scenario `seed` with your `handle`, delivery by delivery."""
    arguments.whole("seed", seed, None, "pass a whole number, e.g. replay(handle, seed=3)")
    try:
        story = _play(handle, seed)
    except NotAttempted:
        return "handle still raises NotImplementedError: write it first."
    verdict = f"problem: {story.problem}" if story.problem else "every message applied exactly once."
    return "\n".join([f"scenario seed {seed}", *story.lines, verdict])


def _run(handle) -> str:
    copies = 0
    for seed in SEEDS:
        story = _play(handle, seed)
        if story.problem:
            raise Wrong(f"{story.problem} Replay it: print(lab06.replay(handle, seed={seed}))", story.lines)
        copies += sum(len(seqs) for seqs in story.applied.values())
    return (f"in {len(SEEDS)} seeded scenarios (dispatcher crashes, broker redeliveries, a failed payment "
            f"call, two refunds with the same payload) every one of {copies} refunds was applied exactly once.")


exercise = Exercise(
    id="06.1", title="an idempotent consumer", answer="handle", run=_run,
    hints=("Two deliveries of one message carry the same message id; two different messages never do, "
           "even when their payloads are equal. What must a consumer remember, and when is a message "
           "really done?",
           "delivery.message_id is the outbox's id (out-0001); delivery.seq numbers the copies. processed is a "
           "set that outlives the consumer: `in` to ask, .add() to record. apply(delivery) performs the "
           "refund and raises if the payments API fails.",
           "Shape: already in processed? return False. Otherwise apply(delivery) first, and only when it "
           "returned, add the message id to processed and return True. Do not catch the error from apply."),
)


# ------------------------------------------------------------------ quizzes
# Kept here, not in the notebook, so the cell that shows a quiz does not show its answer.

CONFIRM_QUIZ = Quiz(
    "The broker confirmed out-0001 to the dispatcher. What does that confirm prove?",
    ["That the payments service applied the refund.",
     "That the broker has stored the message; nothing yet about the consumer.",
     "That out-0001 will be delivered exactly once.",
     "That the outbox entry is marked sent."],
    1,
    ["That would be the consumer's business, after the second boundary; the confirm comes from the broker.",
     "A publisher confirm covers one hand-over: publisher to broker.",
     "Brokers deliver at least once: a consumer crash before its ack means another delivery.",
     "Marking sent is the dispatcher's own write after the confirm; a crash can fall in between."],
    hint="Which two parties does the publisher confirm connect?")

ORDER_QUIZ = Quiz(
    "A consumer records out-0003 as processed, then calls the payments API, which times out. "
    "The broker delivers out-0003 again. What happens?",
    ["The refund is applied on the redelivery, as it should be.",
     "Jordan is refunded twice.",
     "The redelivery is skipped as a duplicate, so the refund never happens.",
     "The broker notices the timeout and cancels the message."],
    2,
    ["Not with this order: the id is already in processed, so the copy looks done.",
     "The first call failed, so there was no first refund.",
     "Recording before the effect turns a failure into a silent loss. Record after, or in one transaction.",
     "The broker knows nothing about the payments API; it only sees acks."],
    hint="Where is the id written relative to the effect?")
