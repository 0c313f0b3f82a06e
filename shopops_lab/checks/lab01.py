"""Lab 01: a handler that survives redelivery without emailing the customer twice (01.1), the
learner's own forced expiry on the queue's virtual clock (01.2), and a knowledge check on
what an expired lease does (and does not) stop (01.3)."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from shopops_lab import arguments
from shopops_lab.checks import answers
from shopops_lab.checks.base import Exercise, Wrong, attempt, call_answer, describe, error_text, named, plain, restart
from shopops_lab.clock import FakeClock
from shopops_lab.effects import Contact, EmailAdapter
from shopops_lab.errors import BadArgumentError, ShopOpsError
from shopops_lab.events import EventKind, EventLog
from shopops_lab.explore import Bound, Move, Replayed, Run, Scenario, explore, refuse
from shopops_lab.explore import replay as replay_schedule
from shopops_lab.worker.queue import InMemoryQueue, Lease

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
        self.calls: dict[str, int] = {}  # item id -> send() calls made for it
        self.emails: dict[str, list[Contact]] = {}  # item id -> messages that reached the customer

    def send(self, idem_key, *, case_id, to="customer", body="", worker_id=None, now=None):
        before = len(self.ledger)
        result = super().send(
            idem_key, case_id=case_id, to=to, body=body, worker_id=worker_id or self.worker_id, now=now
        )
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
    emails = [
        (case, {"idem_key": f"{case}:email:3", "to": f"customer-{n + 1}@example.com", "template": "delay_apology"})
        for n, case in enumerate(cases)
    ]
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


# ------------------------------------------------------------------ the explored check
# The mornings the check explores, by name (no random numbers: every schedule of each is
# played), each with one lease expiry and one crash anywhere.
SEEDS = ("one email, two workers", "three items of one case")
_CASE, _TO = "O-1002", "customer-2@example.com"
_MORNINGS = {  # the emails queued (step, template), and the workers that take them
    "one email, two workers": ((("4", "refund_confirmation"),), ("W1", "W2")),
    "three items of one case": (
        (("4", "refund_confirmation"), ("4", "refund_confirmation"), ("5", "refund_confirmation")),
        ("W1",),
    ),
}
BOUNDS = {
    "one email, two workers": "1 email taken by 2 workers",
    "three items of one case": "3 items of one case (one email queued twice, and a second email) taken by 1 worker",
}
BOUND_WORDS = "1 lease expiry, a crash anywhere"


class _Morning:
    """One schedule's world: the queue, the real idempotent adapter (its ledger is the
    evidence, never handed to the learner's code), and each worker's step."""

    def __init__(self, run: Run, morning: str) -> None:
        self.run, self.morning = run, morning
        self.clock = FakeClock()
        self.queue = InMemoryQueue(lease_seconds=30, max_attempts=5, clock=self.clock, log=EventLog())
        self.adapter = EmailAdapter(log=self.queue.log, clock=self.clock)
        self.intent: dict[str, str] = {}  # item id -> the email (its key) it carries
        self.template: dict[str, str] = {}
        self.status: dict[str, str] = {}  # item id -> ready / leased / done (as the queue has it)
        self.attempts: dict[str, int] = {}
        emails, self.workers = _MORNINGS[morning]
        for step, template in emails:
            key = f"{_CASE}:email:{step}"
            item_id = self.queue.enqueue(
                case_id=_CASE,
                tenant_id="store_northline",
                kind="contact_send",
                payload={"idem_key": key, "to": _TO, "template": template},
            )
            self.intent[item_id], self.template[key] = key, template
            self.status[item_id], self.attempts[item_id] = "ready", 0
        self.emails: dict[str, list[tuple[Contact, str]]] = {key: [] for key in self.template}  # reached the customer
        self.calls: dict[str, int] = dict.fromkeys(self.template, 0)  # send() calls per email
        self.acked: set[str] = set()
        self.state = dict.fromkeys(self.workers, "idle")
        self.lease: dict[str, Lease] = {}
        self.problem: str | None = None
        self.facade = _adapter_for(run, self)

    def moves(self) -> list[Move]:
        moves: list[Move] = []
        leased = "leased" in self.status.values()
        ready = not leased and "ready" in self.status.values()  # the queue hands out one item of a case at a time
        for who in self.workers:
            state = self.state[who]
            if state == "idle" and ready:
                moves.append(Move(f"{who} acquire", who, self._acquire, peer="queue"))
            elif state == "holding":
                moves.append(Move(f"{who} handle", who, self._handle, peer="provider"))
            elif state == "handled":
                moves.append(Move(f"{who} ack", who, self._ack, peer="queue"))
            if state == "handled":  # a crash before or inside the handler happens at its kit calls
                moves.append(Move(f"{who} crash", who, crash=True, cost="crash"))
        if leased:
            moves.append(Move("leases expire", "clock", self._expire, peer="queue", cost="expiry"))
        return moves

    def fingerprint(self) -> Any:
        items = tuple((i, self.status[i], self.attempts[i]) for i in sorted(self.status))
        sent = tuple(
            (k, tuple((c.message_id, c.to, c.case_id, i) for c, i in v)) for k, v in sorted(self.emails.items())
        )
        held = tuple(
            (
                w,
                self.state[w],
                self.lease[w].item_id if w in self.lease else None,
                self.lease[w].token if w in self.lease else None,
            )
            for w in self.workers
        )
        return items, sent, held, tuple(sorted(self.calls.items())), tuple(sorted(self.acked))

    def broken(self) -> str | None:
        return self.problem

    def finished(self) -> str | None:
        for item_id in sorted(self.acked):
            key = self.intent[item_id]
            if not self.emails[key]:
                return self._never(key, item_id)
        return None

    def crashed(self, actor: str) -> None:
        if actor in self.state:
            self.state[actor] = "idle"  # a fresh process; its lease stays until it expires
            self.lease.pop(actor, None)

    def _acquire(self, run: Run) -> str:
        who = run.current_actor
        lease = self.queue.acquire(who)
        assert lease is not None, "acquire is a move only while an item is ready (moves)"
        self.lease[who], self.state[who] = lease, "holding"
        self.status[lease.item_id], self.attempts[lease.item_id] = "leased", lease.attempt
        return f"{who} acquires {lease.item_id} ({self.intent[lease.item_id]}), attempt {lease.attempt}"

    def _handle(self, run: Run) -> str:
        who = run.current_actor
        lease = self.lease[who]
        before = {key: len(v) for key, v in self.emails.items()}
        self.handling = lease
        called = run.call(run.answer(who), lease, self.facade)
        self.state[who] = "handled"
        if called.error is not None:
            self.problem = (
                f"the handler raised {error_text(called.error)} for {lease.item_id} ({self.intent[lease.item_id]})."
            )
        new = [c for key, v in self.emails.items() for c, _ in v[before[key] :]]
        sent = ", ".join(f"{c.message_id} to {c.to}" for c in new) or "no new email"
        return f"{who} handles {lease.item_id}: {sent}"

    def _ack(self, run: Run) -> str:
        who = run.current_actor
        lease = self.lease.pop(who)
        self.state[who] = "idle"
        try:
            self.queue.ack(lease)
        except ShopOpsError as exc:
            return f"{who} acks {lease.item_id}: refused ({type(exc).__name__})"
        self.acked.add(lease.item_id)
        self.status[lease.item_id] = "done"
        return f"{who} acks {lease.item_id}: done"

    def _expire(self, run: Run) -> str:
        self.clock.advance(31)
        expired = self.queue.expire_leases()
        self.status.update(dict.fromkeys(expired, "ready"))
        return f"31 s pass: the lease on {', '.join(expired)} expires"

    def sent(self, lease: Lease, contacts: list[Contact]) -> None:
        """The adapter delivered `contacts` while `lease` was being handled."""
        key = self.intent[lease.item_id]
        self.calls[key] += 1
        for contact in contacts:
            self.emails[key].append((contact, lease.item_id))
            what = f"case {_CASE}'s email {key} ({self.template[key]})"
            if contact.to != _TO:
                self.problem = f"{what} went to {contact.to!r}, not to the address in the item's payload ({_TO})."
            elif contact.case_id != lease.case_id:
                self.problem = (
                    f"{what} was filed under case_id {contact.case_id!r}: pass the case of the lease "
                    "being handled, so the ledger and the checker can find it."
                )
            elif len(self.emails[key]) > 1:
                self.problem = self._twice(key)

    def _twice(self, key: str) -> str:
        (one, first), (two, second) = self.emails[key][:2]
        why = (
            f"{second} is the same email as {first}, queued again when the planner restarted: a new item, the "
            "same email. Two items of one email must look like one send to the provider."
            if first != second
            else "Both deliveries of the same work must look like one send to the provider."
        )
        return (
            f"case {_CASE}'s email {key} ({self.template[key]}) reached the customer 2 times: {one.message_id} "
            f"sent by {one.worker_id} for {first} and {two.message_id} by {two.worker_id} for {second}. {why}"
        )

    def _never(self, key: str, item_id: str) -> str:
        what = f"case {_CASE}'s email {key} ({self.template[key]}) never reached {_TO}, yet {item_id} was acknowledged"
        if self.calls[key]:
            return (
                f"{what}: the handler did call send(), but with a key the adapter had already seen, so it "
                "returned an earlier message instead. The key must name this one email, not just the case, "
                "the customer or the kind of email."
            )
        return (
            f"{what}: no delivery sent it. Send on every delivery, redeliveries included, and let the adapter's "
            "key decide whether the customer already has it."
        )


def _adapter_for(run: Run, world: _Morning) -> Any:
    """What the handler is handed: an adapter with send() and nothing else. The real
    adapter and its ledger stay with the check."""
    real = world.adapter

    class EmailAdapter:
        """Sends an email through the idempotent provider: send(idem_key, case_id=..., to=..., body=...)."""

        __slots__ = ()

        def send(self, idem_key, *, case_id, to="customer", body="", worker_id=None, now=None):
            lease = world.handling
            run.enter("send")
            before = len(real.ledger)
            result = real.send(
                idem_key, case_id=case_id, to=to, body=body, worker_id=worker_id or run.current_actor, now=now
            )
            world.sent(lease, real.ledger.contacts()[before:] if len(real.ledger) > before else [])
            run.leave("send")
            return result

        def __repr__(self) -> str:
            return "<EmailAdapter: send(idem_key, case_id=..., to=..., body=...)>"

    return EmailAdapter()


def scenario(morning: str = SEEDS[0]) -> Scenario:
    return Scenario(
        name=morning,
        bound=Bound(words=f"{BOUNDS[morning]}, {BOUND_WORDS}", budget={"crash": 1, "expiry": 1}),
        start=lambda run: _Morning(run, morning),
    )


def replay(handler, schedule: str, morning: str = SEEDS[0]) -> Replayed:
    """Play one schedule (as the check's message writes it) of `morning` with your handler:
    print it for the steps, or call .diagram() for the picture."""
    arguments.choice("morning", morning, tuple(_MORNINGS), f"pass one of {', '.join(map(repr, _MORNINGS))}")
    return replay_schedule(scenario(morning), handler, schedule)


def _run(handler) -> str:
    schedules = 0
    for morning in SEEDS:
        found = explore(scenario(morning), handler)
        refuse(found, f'lab01.replay({named(handler, "send_followup")}, "{{schedule}}", morning="{morning}")')
        schedules += found.schedules
    mornings = "; ".join(BOUNDS[morning] for morning in SEEDS)
    return (
        f"checked all {schedules:,} schedules of two mornings, each with {BOUND_WORDS} ({mornings}): every "
        "acknowledged email reached its customer exactly once, redeliveries and crashes included."
    )


exercise = Exercise(
    id="01.1",
    title="a handler that is safe to run twice",
    answer="send_followup",
    run=_run,
    hints=(
        "A redelivery runs your handler again with the same item. What stays the same between the two "
        "deliveries, and what changes (worker, token, attempt)?",
        "The adapter's send(idem_key, ...) returns the first message id when it sees a key again. The "
        "payload already carries a key made for this email, and the customer's address.",
        "Every delivery of this item must name the same email, so the key comes from what was planned with the item, "
        "never from who handles it or how often it was tried; and the handler always sends, leaving the adapter to "
        "absorb a repeat, instead of guessing whether an earlier delivery already did.",
    ),
)


# ------------------------------------------------------------------ 01.2: the learner forces the expiry
# The chapter's first exercise: make a lease run out, on the queue's clock, while its worker
# stalls, and show the same item reaching a second worker. The check plays every queue of its
# scope (a lease of 7.5, 30 or 90 s; a clock starting at t=0 or t=1000), each on a fresh
# queue and a fresh process's copy of the answer. What it judges (the leases the queue
# granted, the expiries, acks and nacks, the handler's runs) is recorded by the queue and by
# the facades on the check's side; the answer is handed only the calls a worker makes.
LEASES, STARTS = (7.5, 30.0, 90.0), (0.0, 1000.0)
EXPIRY_BOUND = (
    f"{len(LEASES) * len(STARTS)} queues (a lease of {', '.join(f'{s:g}' for s in LEASES[:-1])} or "
    f"{LEASES[-1]:g} s, on a clock starting at t={STARTS[0]:g} or t={STARTS[1]:g})"
)


class _Stage:
    """One queue of the scope: Jordan's email queued, the idempotent adapter, and the record
    of what the answer's calls did (never handed to the answer)."""

    def __init__(self, lease_seconds: float, start: float) -> None:
        self.clock, self.clock_start = FakeClock(start), start
        self.queue = InMemoryQueue(lease_seconds=lease_seconds, max_attempts=5, clock=self.clock, log=EventLog())
        self.adapter = EmailAdapter(log=self.queue.log, clock=self.clock)
        self.item_id = self.queue.enqueue(
            case_id="O-1001",
            tenant_id="store_northline",
            kind="contact_send",
            payload={"idem_key": "O-1001:email:3", "to": "jordan@example.com", "template": "delay_apology"},
        )
        self.granted: list[Lease] = []  # every lease acquire() handed out, in order
        self.handled: list[Lease] = []  # every lease the handler ran for
        self.asked: list[tuple[str, float]] = []  # (worker, time) of every acquire that got nothing
        self.facades = _stage_facades(self)

    def story(self) -> str:
        return f"with a {self.queue.lease_seconds:g} s lease on a clock that started at t={self.clock_start:g}"


def _stage_facades(stage: _Stage) -> tuple[Any, Any, Any]:
    """What the answer is handed: a queue with a worker's calls, the queue's clock, and
    `handle(lease)`, the email handler. The real queue, adapter and record stay here."""
    queue, clock = stage.queue, stage.clock

    class Queue:
        """The queue, as a worker sees it: acquire, heartbeat, ack, nack, expire_leases, lease_seconds."""

        __slots__ = ()

        @property
        def lease_seconds(self) -> float:
            return queue.lease_seconds

        def acquire(self, worker_id):
            lease = queue.acquire(worker_id)
            if lease is None:
                stage.asked.append((worker_id, clock.now()))
            else:
                stage.granted.append(lease)
            return lease

        def heartbeat(self, lease):
            return queue.heartbeat(lease)

        def ack(self, lease):
            return queue.ack(lease)

        def nack(self, lease, error=None):
            return queue.nack(lease, error)

        def expire_leases(self):
            return queue.expire_leases()

        def __repr__(self) -> str:
            return f"<Queue: lease_seconds={queue.lease_seconds:g}; acquire, heartbeat, ack, nack, expire_leases>"

    class Clock:
        """The queue's clock (virtual time): now(), advance(seconds), set(when)."""

        __slots__ = ()

        def now(self):
            return clock.now()

        def advance(self, seconds):
            return clock.advance(seconds)

        def set(self, when):
            return clock.set(when)

        def __repr__(self) -> str:
            return f"<Clock: t={clock.now():g}; now(), advance(seconds), set(when)>"

    class Handler:
        """handle(lease): run the email handler for a lease (sends through the idempotent adapter)."""

        __slots__ = ()

        def __call__(self, lease):
            if not isinstance(lease, Lease) or lease not in stage.granted:
                raise BadArgumentError(
                    field="lease",
                    problem=f"is {describe(lease)}, not a lease the queue granted",
                    fix="pass the Lease that queue.acquire(...) returned",
                )
            stage.handled.append(lease)
            payload = lease.payload
            return stage.adapter.send(
                payload["idem_key"],
                case_id=lease.case_id,
                to=payload["to"],
                body="Sorry for the delay.",
                worker_id=lease.worker_id,
            )

        def __repr__(self) -> str:
            return "<handle(lease): the email handler>"

    return Queue(), Clock(), Handler()


def _leases(returned: Any, stage: _Stage) -> tuple[Lease, Lease]:
    """The two leases the answer returned, if they are leases this queue granted."""
    if not isinstance(returned, (tuple, list)) or len(returned) != 2:
        raise Wrong(
            f"force_expiry returned {describe(returned)}; return the pair (first, second): the lease the "
            "first worker got and the lease of the redelivery."
        )
    for which, lease in zip(("first", "second"), returned, strict=True):
        if type(lease) is not Lease or lease not in stage.granted:
            raise Wrong(
                f"the {which} value returned is {describe(lease)}, not a lease this queue granted "
                f"({stage.story()}): return what queue.acquire(...) handed out."
            )
    return returned[0], returned[1]


def _judge_stage(stage: _Stage, returned: Any, error: Exception | None) -> None:
    """Raise `Wrong` unless the answer forced the expiry on this queue and showed the redelivery."""
    story, log = stage.story(), stage.queue.log
    raised = f" Then force_expiry raised {error_text(error)}" if error is not None else ""
    if not stage.granted:
        raise Wrong(f"{story}, no worker ever acquired the item: start with queue.acquire(...).{raised}")
    first = stage.granted[0]
    expired = [e for e in log.where(EventKind.EXPIRED, item_id=first.item_id) if e.token == first.token]
    if not expired:
        raise Wrong(_not_expired(stage, first) + raised)
    if error is not None:
        raise Wrong(f"{story}, force_expiry raised {error_text(error)}")
    redelivered = [lease for lease in stage.granted if lease.item_id == first.item_id and lease.token > first.token]
    if not redelivered:
        raise Wrong(
            f"{story}, {first.worker_id}'s lease ran out, but no worker acquired {first.item_id} again: the "
            "redelivery is the point."
        )
    second = redelivered[0]
    if second.worker_id == first.worker_id:
        raise Wrong(
            f"{story}, both leases went to {first.worker_id}: it is stalled, so let another worker ask the "
            "queue and receive the same item."
        )
    missing = [lease for lease in (first, second) if lease not in stage.handled]
    if missing:
        raise Wrong(
            f"{story}, the handler never ran for {missing[0].worker_id}'s lease (attempt "
            f"{missing[0].attempt}): show it invoked for each delivery."
        )
    acked = [e for e in log.where(EventKind.ACKED, item_id=first.item_id) if e.token == second.token]
    if not acked:
        raise Wrong(
            f"{story}, {second.worker_id} got the redelivery but never acknowledged it: the item is "
            f"{stage.queue.item(first.item_id).state.value}, not done."
        )
    got = _leases(returned, stage)
    if got != (first, second):
        raise Wrong(
            f"{story}, force_expiry returned the leases of {got[0].worker_id} (token {got[0].token}) and "
            f"{got[1].worker_id} (token {got[1].token}); return the first worker's lease, then the "
            "redelivery's."
        )


def _not_expired(stage: _Stage, first: Lease) -> str:
    """Why the first lease did not run out: acked, given back, or the clock did not reach its end."""
    story, log = stage.story(), stage.queue.log
    if any(e.token == first.token for e in log.where(EventKind.ACKED, item_id=first.item_id)):
        return (
            f"{story}, {first.worker_id} acknowledged its lease, so the item was done before any lease could run "
            "out: nothing was redelivered. A worker that stalls has not acked yet."
        )
    if any(e.token == first.token for e in log.where(EventKind.NACKED, item_id=first.item_id)):
        return (
            f"{story}, {first.worker_id}'s lease was handed back with nack(), which is a worker reporting a "
            "failure, not a lease running out while its worker stalls."
        )
    asked = "; ".join(f"{w} asked at t={t:g} and got nothing" for w, t in stage.asked[:2])
    moved = stage.clock.now() - first.leased_at
    if moved == 0:
        why = (
            f"The clock did not move after {first.worker_id} acquired: the queue reads only the virtual clock you "
            "were handed (waiting on your computer's clock does not move it)."
        )
    else:
        why = (
            f"The clock moved {moved:g} s after {first.worker_id} acquired, less than this queue's lease of "
            f"{stage.queue.lease_seconds:g} s."
        )
    return (
        f"{story}, {first.worker_id}'s lease runs to t={first.expires_at:g}, and the queue's clock only reached "
        f"t={stage.clock.now():g}, so it never ran out{f' ({asked})' if asked else ''}. {why}"
    )


def _expiry(force_expiry) -> str:
    for lease_seconds in LEASES:
        for start in STARTS:
            stage = _Stage(lease_seconds, start)
            queue, clock, handle = stage.facades
            returned, error = attempt(restart(force_expiry), queue, clock, handle)
            _judge_stage(stage, returned, error)
    return (
        f"checked all {EXPIRY_BOUND}: each time the first worker's lease ran out on the queue's clock, a second "
        "worker got the same item, the handler ran for both deliveries, and the redelivery was acknowledged."
    )


expiry = Exercise(
    id="01.2",
    title="force the expiry",
    answer="force_expiry",
    run=_expiry,
    hints=(
        "A lease ends in one of three ways: an ack, a nack, or its deadline passing. Only the last one is an "
        "expiry, and the queue measures the deadline on its own clock.",
        "The clock you are handed is the only clock the queue reads. How far must it move, given what "
        "queue.lease_seconds says (and not the 30 s of the story)?",
        "An expiry takes three moments on the queue's own clock: a worker takes the item and gets stuck with it (it "
        "neither acks nor gives it back), time moves past that lease's deadline, however long the lease is, and a "
        "different worker asks again and this time finishes the delivery. Give back both leases so the check can "
        "compare them.",
    ),
)


def expiry_morning(force_expiry, handler, lease_seconds: float = 30) -> tuple[InMemoryQueue, EmailAdapter, Any]:
    """Your `force_expiry` on a fresh queue holding Jordan's email, with your `handler(lease,
    adapter)` as the email handler and the idempotent adapter: returns the queue (its log has
    the story), the adapter (its ledger is Jordan's inbox) and what `force_expiry` returned."""
    arguments.seconds("lease_seconds", lease_seconds, "pass a positive number of seconds, e.g. 30")
    stage = _Stage(lease_seconds, 0.0)
    queue, clock, _ = stage.facades

    def handle(lease):
        stage.handled.append(lease)
        return call_answer(handler, lease, stage.adapter)

    returned = call_answer(force_expiry, queue, clock, handle)
    return stage.queue, stage.adapter, returned


# ---------------------------------------------------------------------------- knowledge check

NEXT_OPTIONS = {
    "redelivered": "another worker acquires the same item and runs the handler again",
    "late_ack_refused": "W1 finishes and acks, and the queue refuses the ack",
    "w1_still_sends": "W1, still running, sends Jordan's email after its lease has run out",
    "w1_stopped": "the queue stops W1's code the moment the lease runs out",
    "case_blocked": "no other worker can get case O-1001 until W1 acks",
    "straight_to_dlq": "the item goes straight to the dead-letter queue",
}


def _knowledge(what_can_happen_next) -> str:
    chosen = plain(call_answer(what_can_happen_next))  # str look-alikes: judged by the text they hold
    if isinstance(chosen, str) or not isinstance(chosen, Iterable):
        raise Wrong(
            f"the function returned {describe(chosen)}; return a set of labels, e.g. {{'label_one', 'label_two'}}."
        )
    chosen = list(chosen)
    unknown = sorted({str(c) for c in chosen if c not in NEXT_OPTIONS})
    if unknown:
        raise Wrong(
            f"{', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not among the labels; "
            f"choose from {', '.join(sorted(NEXT_OPTIONS))}."
        )
    key = answers.load("lab01")  # loaded to judge, never with the module
    picked = set(chosen)
    impossible = sorted(picked - key.CAN_HAPPEN)
    if impossible:
        raise Wrong(f"{impossible[0]!r} cannot happen: {key.WHY_NOT[impossible[0]]}")
    missing = len(key.CAN_HAPPEN - picked)
    if missing:
        raise Wrong(
            f"everything you chose can happen, but {missing} more option{' can' if missing == 1 else 's can'} "
            "too. Look again at W1: what is it doing while the queue hands its item to W7?"
        )
    return "redelivery, a refused late ack, and a stale worker that still acts: an expired lease stops none of them."


knowledge = Exercise(
    id="01.3",
    title="what an expired lease leads to",
    answer="what_can_happen_next",
    run=_knowledge,
    hints=(
        "Keep two things apart: what the queue records, and what W1's code is doing on its own machine.",
        "The queue can refuse W1's later calls (ack, heartbeat) but cannot reach into W1's process.",
        "Three of the six options can happen.",
    ),
)


# Its quizzes (the right option and every explanation) are kept with the answer keys, loaded on
# first use (`checks.answers`): importing this module loads none of them.
__getattr__ = answers.lazy("lab01", ("SAME_KEY_QUIZ",))
