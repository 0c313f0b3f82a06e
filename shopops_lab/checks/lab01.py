"""Lab 01: a handler that survives redelivery without emailing the customer twice,
and a knowledge check on what an expired lease does (and does not) stop."""
from __future__ import annotations

import random
from collections.abc import Iterable

from shopops_lab.checks.base import Exercise, Wrong, call_answer, describe
from shopops_lab.clock import FakeClock
from shopops_lab.effects import Contact, EmailAdapter
from shopops_lab.events import EventLog
from shopops_lab.widgets.quiz import Quiz
from shopops_lab.worker.queue import InMemoryQueue, Item

SEEDS = (1, 2, 3, 5, 8)

# How a first delivery ends, as the seed decides. A worker that dies "before_send" never
# reached the adapter; one that dies "after_send" emailed the customer, then lost its ack.
CLEAN, AFTER_SEND, BEFORE_SEND = "clean", "after_send", "before_send"


class _ScenarioAdapter(EmailAdapter):
    """The real idempotent adapter, crediting each send to the worker and item being
    handled, so a wrong answer can be explained item by item."""

    worker_id: str | None = None
    item_id: str | None = None

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.calls: dict[str, int] = {}               # item id -> send() calls made for it
        self.emails: dict[str, list[Contact]] = {}    # item id -> messages that reached the customer

    def send(self, idem_key, *, case_id, to="customer", body="", worker_id=None, now=None):
        before = len(self.ledger)
        result = super().send(idem_key, case_id=case_id, to=to, body=body,
                              worker_id=worker_id or self.worker_id, now=now)
        if self.item_id is not None:
            self.calls[self.item_id] = self.calls.get(self.item_id, 0) + 1
            self.emails.setdefault(self.item_id, []).extend(self.ledger.contacts()[before:])
        return result


def forced_expiry(handler, seed: int) -> tuple[InMemoryQueue, _ScenarioAdapter, list[str]]:
    """Several customers, one of them owed three different emails (an apology and two
    refund confirmations of the same template), and one email submitted twice as two
    separate items (the planner restarted and queued it again). Each first delivery ends
    cleanly, or its worker dies after the handler sent (before the ack), or dies before the
    handler ran, as the seed decides; then every lease runs out and fresh workers redeliver.
    Returns the queue, the adapter and the cases whose first delivery crashed."""
    rng = random.Random(seed)
    clock, log = FakeClock(), EventLog()
    queue = InMemoryQueue(lease_seconds=30, max_attempts=5, clock=clock, log=log)
    adapter = _ScenarioAdapter(log=log, clock=clock)
    cases = [f"O-{1001 + n}" for n in range(rng.randint(3, 6))]
    emails = [(case, {"idem_key": f"{case}:email:3", "to": f"customer-{n + 1}@example.com",
                      "template": "delay_apology"}) for n, case in enumerate(cases)]
    twice = rng.choice(cases)  # this customer is also owed two refund confirmations: two more intents
    address = f"customer-{cases.index(twice) + 1}@example.com"
    for step in (4, 5):
        emails.append((twice, {"idem_key": f"{twice}:email:{step}", "to": address, "template": "refund_confirmation"}))
    emails.append(rng.choice(emails))  # submitted again as a new item: the same email, a new item id
    for case, payload in emails:
        queue.enqueue(case_id=case, tenant_id="store_northline", kind="contact_send", payload=dict(payload))
    endings = {case: rng.choice((CLEAN, AFTER_SEND, AFTER_SEND, BEFORE_SEND)) for case in cases}
    if not {AFTER_SEND, BEFORE_SEND} <= set(endings.values()):  # every run shows both kinds of crash
        endings[cases[0]], endings[cases[-1]] = AFTER_SEND, BEFORE_SEND
    workers = iter(f"W{n}" for n in range(1, 100))
    crashed: list[str] = []
    while (lease := queue.acquire(next(workers))) is not None:
        ending = endings[lease.case_id]
        if ending != BEFORE_SEND:
            _run_handler(handler, lease, adapter)
        if ending == CLEAN:
            queue.ack(lease)
        else:
            crashed.append(lease.case_id)
    clock.advance(31)
    queue.expire_leases()
    while (lease := queue.acquire(next(workers))) is not None:
        _run_handler(handler, lease, adapter)
        queue.ack(lease)
    return queue, adapter, crashed


def _run_handler(handler, lease, adapter: _ScenarioAdapter) -> None:
    adapter.worker_id, adapter.item_id = lease.worker_id, lease.item_id
    call_answer(handler, lease, adapter)


def _deliveries(queue: InMemoryQueue, items: list[Item]) -> str:
    leases = [e for item in items for e in queue.log.where("leased", item_id=item.id)]
    return " and ".join(f"{e.worker_id} at t={e.time:g}" for e in leases)


def _run(handler) -> str:
    for seed in SEEDS:
        queue, adapter, crashed = forced_expiry(handler, seed)
        intents: dict[str, list[Item]] = {}
        for item in queue.items():
            intents.setdefault(item.payload["idem_key"], []).append(item)
        for key, items in intents.items():
            _judge(seed, queue, adapter, key, items)
    return (f"in {len(SEEDS)} seeded runs some workers died after sending and some before, and one email was "
            "queued twice; every crashed case was delivered again, and every email reached its customer exactly once.")


def _judge(seed: int, queue: InMemoryQueue, adapter: _ScenarioAdapter, key: str, items: list[Item]) -> None:
    """One planned email (`key`), queued as `items` (two when it was submitted twice)."""
    first = items[0]
    to, case = first.payload["to"], first.case_id
    what = f"case {case}'s email {key} ({first.payload['template']})"
    emails = [email for item in items for email in adapter.emails.get(item.id, [])]
    if not emails:
        if any(adapter.calls.get(item.id) for item in items):
            raise Wrong(
                f"{what} never reached {to} (seed {seed}): the handler did call send(), but with a key "
                "the adapter had already seen, so it returned an earlier message instead. The key must "
                "name this one email, not just the case, the customer or the kind of email.")
        raise Wrong(
            f"{what} never reached {to} (seed {seed}): it was delivered to {_deliveries(queue, items)}, "
            "and no delivery sent it. Send on every delivery, redeliveries included, and let the "
            "adapter's key decide whether the customer already has it.")
    if len(emails) > 1:
        emails.sort(key=lambda c: c.message_id)
        by_item = {c.message_id: item.id for item in items for c in adapter.emails.get(item.id, [])}
        one, two = emails[0], emails[1]
        resubmitted = by_item[one.message_id] != by_item[two.message_id]
        why = (f"{by_item[two.message_id]} is the same email as {by_item[one.message_id]}, queued again when the "
               "planner restarted: a new item, the same email. Two items of one email must look like one send "
               "to the provider." if resubmitted else
               "Both deliveries of the same work must look like one send to the provider.")
        raise Wrong(
            f"{what} reached the customer {len(emails)} times (seed {seed}): {one.message_id} at t={one.time:g} by "
            f"{one.worker_id} for {by_item[one.message_id]} and {two.message_id} at t={two.time:g} by "
            f"{two.worker_id} for {by_item[two.message_id]}. {why}",
            [f"{c.message_id} to {c.to}, key {c.idem_key}, by {c.worker_id} for {by_item[c.message_id]}"
             for c in emails])
    email = emails[0]
    if email.to != to:
        raise Wrong(f"{what} went to {email.to!r}, not to the address in the item's payload ({to}) (seed {seed}).")
    if email.case_id != case:
        raise Wrong(f"{what} was filed under case_id {email.case_id!r} (seed {seed}): pass the case of the lease "
                    "being handled, so the ledger and the checker can find it.")


exercise = Exercise(
    id="01.1", title="a handler that is safe to run twice", answer="send_followup", run=_run,
    hints=("A redelivery runs your handler again with the same item. What stays the same between the two "
           "deliveries, and what changes (worker, token, attempt)?",
           "The adapter's send(idem_key, ...) returns the first message id when it sees a key again. The "
           "payload already carries a key made for this email, and the customer's address.",
           "Shape: adapter.send(<the payload's idem_key>, case_id=<the lease's case>, to=<the payload's address>, "
           "body=...). Do not build the key from the token or the attempt, and always send: never skip a "
           "redelivery."),
)


# ---------------------------------------------------------------------------- knowledge check

NEXT_OPTIONS = {
    "redelivered": "another worker acquires the same item and runs the handler again",
    "late_ack_refused": "W1 finishes and acks, and the queue refuses the ack",
    "w1_still_sends": "W1, still running, sends Jordan's email after its lease has run out",
    "w1_stopped": "the queue stops W1's code the moment the lease runs out",
    "case_blocked": "no other worker can get case O-1001 until W1 acks",
    "straight_to_dlq": "the item goes straight to the dead-letter queue",
}
_CAN_HAPPEN = frozenset({"redelivered", "late_ack_refused", "w1_still_sends"})
_WHY_NOT = {
    "w1_stopped": "a lease is a record in the queue, not a signal to the worker: nothing interrupts W1's code.",
    "case_blocked": "the lease is over, so the case is free: that is the whole point of a lease that expires.",
    "straight_to_dlq": "this was attempt 1 of 5: an item reaches the DLQ only after its last allowed attempt.",
}


def _knowledge(what_can_happen_next) -> str:
    chosen = call_answer(what_can_happen_next)
    if isinstance(chosen, str) or not isinstance(chosen, Iterable):
        raise Wrong(f"the function returned {describe(chosen)}; return a set of labels, "
                    "e.g. {'label_one', 'label_two'}.")
    chosen = list(chosen)
    unknown = sorted({str(c) for c in chosen if c not in NEXT_OPTIONS})
    if unknown:
        raise Wrong(f"{', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not among the labels; "
                    f"choose from {', '.join(sorted(NEXT_OPTIONS))}.")
    picked = set(chosen)
    impossible = sorted(picked - _CAN_HAPPEN)
    if impossible:
        raise Wrong(f"{impossible[0]!r} cannot happen: {_WHY_NOT[impossible[0]]}")
    missing = len(_CAN_HAPPEN - picked)
    if missing:
        raise Wrong(f"everything you chose can happen, but {missing} more option{' can' if missing == 1 else 's can'} "
                    "too. Look again at W1: what is it doing while the queue hands its item to W7?")
    return "redelivery, a refused late ack, and a stale worker that still acts: an expired lease stops none of them."


knowledge = Exercise(
    id="01.2", title="what an expired lease leads to", answer="what_can_happen_next", run=_knowledge,
    hints=("Keep two things apart: what the queue records, and what W1's code is doing on its own machine.",
           "The queue can refuse W1's later calls (ack, heartbeat) but cannot reach into W1's process.",
           "Three of the six options can happen."),
)


# ------------------------------------------------------------------ quizzes
# Kept here, not in the notebook, so the cell that shows a quiz does not show its answer.

SAME_KEY_QUIZ = Quiz(
    "W1 emailed Jordan with key O-1001:email:3 and crashed. W7 now sends with the same key through "
    "the idempotent adapter. What does W7's send return?",
    ["A new message id: the email goes out again.",
     "The first message id, and Jordan receives nothing new.",
     "An error, because the key was already used.",
     "Nothing yet: the adapter waits until W1 acks."],
    answer_index=1,
    explanations=[
        "That is the naive adapter's behaviour, the double contact you watched above.",
        "The adapter recognises the key and returns msg-0001. W7 can carry on as if it had sent the email itself.",
        "An error would leave W7 unsure whether Jordan was emailed. Returning the first result answers that question.",
        "W1 is dead and will never ack; the adapter does not know about leases at all, only keys.",
    ],
)
