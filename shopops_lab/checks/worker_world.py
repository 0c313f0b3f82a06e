"""Lab 09's world for the schedule explorer: one case, two worker processes running the
learner's `async def work(lease, kit)`, and every way their kit calls can interleave.

Each step of a schedule is one kit call answered: the worker waiting on it gets the answer
and runs on to its next call (`Delivery.step`). Between any two steps another worker may go
first; the schedule may also make a model call outlast the worker's lease (a stall: the case
goes back to the queue while the worker still drafts), kill a worker's process right before
the call it waits on (the request is lost) or right after a call that changed something (the
reply is lost), or lose a send's request or reply at the provider (the worker sees UNKNOWN).
A dead worker's lease, or one its worker left without an ack, runs out on its own. The
queue hands a ready case to an idle worker; a worker that raised gives its delivery back (a
nack). A restarted process runs a fresh copy of the answer (`restart`): nothing it kept in
memory survives.

The promises, asked after every step: the customer is emailed at most once; a key whose
outcome is not a known failure is looked up, not sent again; a worker stops at once when
its heartbeat is refused; nothing is acknowledged before the email went out; a delivery
stops within `MOST_CALLS` calls; the kit is used as documented. At the end: the case is
done, unless every delivery met a fault of the schedule; a poison case fails on every
delivery, so the queue dead-letters it with a reason.

The explorer goes on from copies of a world (`clone`): the stores are copied, and each
worker process is brought back to where it stands by a fresh copy of the answer told again
what it was told since it started; the two workers are alike (`alike`), so a state and its
mirror image are searched once.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from shopops_lab.checks.base import NotAttempted, error_text, memory
from shopops_lab.checks.driven import Delivery
from shopops_lab.checks.fresh import NotCopyable
from shopops_lab.clock import FakeClock
from shopops_lab.effects import EmailAdapter, SendResult, SendStatus
from shopops_lab.errors import CheckStopped, KitMisuseError, LeaseExpiredError, LeaseSettledError, StaleTokenError
from shopops_lab.explore import Bound, Move, Run, Scenario, copied
from shopops_lab.payloads import json_copy
from shopops_lab.states import ItemState
from shopops_lab.worker.backend import Drafts, KitBackend
from shopops_lab.worker.kit import Finished, KitCall, Reply
from shopops_lab.worker.queue import InMemoryQueue, Lease

__all__ = ["MOST_CALLS", "SETTINGS", "Case", "Setting", "WorkerWorld", "scenario"]

WORKERS = ("W1", "W2")
LEASE_SECONDS = 30.0
MOST_CALLS = 30  # kit calls one delivery may make before the check stops it
_LOST = (StaleTokenError, LeaseExpiredError, LeaseSettledError)
_PEERS = {"load": "store", "save": "store", "next_chunk": "model", "heartbeat": "queue", "ack": "queue"}
# The calls that change what another worker can see: a death before one of them, or right after,
# is a world of its own; a death anywhere between two of them leaves the same world behind.
_CHANGES = ("save", "send", "ack")


@dataclass(frozen=True)
class Case:
    """The case a world is played on: its id, payload, whether it is poison (no worker can
    ever handle it), the attempts the queue allows, and its customer."""

    case_id: str
    payload: dict[str, Any]
    poison: bool
    max_attempts: int
    customer: str


@dataclass(frozen=True)
class Setting:
    """One part of the bound: a case and the faults a schedule may hold (`budget`)."""

    name: str
    case: Case
    budget: dict[str, int]
    faults: str  # the faults, in words

    @property
    def bound(self) -> Bound:
        what = "a payload with a bad schema" if self.case.poison else "a draft of 2 chunks"
        words = (
            f"2 workers and case {self.case.case_id} ({what}), with {self.faults}, delivered until it is done or "
            f"dead-lettered (the queue allows {self.case.max_attempts} attempts)"
        )
        return Bound(words=words, budget=self.budget, faults=(), max_steps=60)


JORDAN = Case(
    case_id="O-1001",
    payload={"idem_key": "O-1001:email:1", "to": "jordan@example.com", "schema": 1},
    poison=False,
    max_attempts=5,
    customer="Jordan",
)
CASEY = Case(
    case_id="P-2001", payload={"to": "casey@example.com", "schema": 0}, poison=True, max_attempts=3, customer="Casey"
)
# The bound, in four settings (every schedule of each is searched): faults that happen together
# in one schedule multiply the states (all of them at once: about 7,800, twenty seconds), while
# every mistake the check knows shows within one setting.
SETTINGS = (
    Setting("a crash", JORDAN, {"crash": 1}, "1 crash before or after any kit call"),
    Setting("a lost answer", JORDAN, {"lost": 1}, "1 send whose request or reply is lost"),
    Setting("a stall", JORDAN, {"stall": 1}, "1 model call that outlasts the lease while its worker works"),
    Setting("a poison case", CASEY, {"crash": 1}, "1 crash before or after any kit call"),
)


@dataclass
class _Process:
    """One worker process: the delivery it runs, if any, what it learned in it, and `life`:
    every delivery since the process started, with what it was told (to bring a copy back)."""

    life: list[tuple[Lease, list[Reply]]] = field(default_factory=list)
    delivery: Delivery | None = None
    lease: Lease | None = None
    waiting: KitCall | None = None  # the call it waits on, not yet answered
    said: list[str] = field(default_factory=list)  # this delivery's calls and their answers
    known: dict[str, SendStatus] = field(default_factory=dict)  # key -> what this delivery learned of it
    refused_at: int | None = None  # the call number at which its heartbeat said no
    started: Hashable = None  # its memory when the delivery began
    began: int = 0  # the world's step at which the delivery began

    def idle(self) -> _Process:
        """The same process between deliveries."""
        return _Process(life=self.life)


class WorkerWorld:
    """One schedule's world: a queue with the case ready, the stores, and two idle workers."""

    alike = WORKERS  # both run fresh copies of the answer on the same kit: the code cannot tell them apart

    def __init__(self, run: Run, case: Case) -> None:
        self.case = case
        self.clock = FakeClock()
        self.queue = InMemoryQueue(lease_seconds=LEASE_SECONDS, max_attempts=case.max_attempts, clock=self.clock)
        self.queue.enqueue(case_id=case.case_id, tenant_id="store_northline", kind="contact_send", payload=case.payload)
        self.item = self.queue.items()[0].id
        self.adapter = EmailAdapter(clock=self.clock, store=self.queue.store)
        self.kit = KitBackend(queue=self.queue, adapter=self.adapter, model=Drafts(2))
        self.processes = {w: _Process() for w in WORKERS}
        self.sent: dict[str, list[tuple[str, int, int]]] = {}  # key -> each send under it: who, at which step, attempt
        self.steps = 0  # kit calls answered and deliveries begun: the world's own clock of events
        self.ended: list[str] = []  # how each delivery ended, in words
        self.problem: str | None = None

    # ------------------------------------------------------------------ the explorer's side
    def clone(self, run: Run) -> WorkerWorld:
        """This schedule's state, to go on from: the stores copied, each process brought back
        by a fresh copy of the answer told again what it was told since it started."""
        run.rebuilt()
        twin = copy.copy(self)
        twin.clock, twin.queue, twin.adapter, twin.kit = copied((self.clock, self.queue, self.adapter, self.kit))
        twin.sent = {key: list(sends) for key, sends in self.sent.items()}
        twin.ended = list(self.ended)
        twin.processes = {w: _revived(run, w, process) for w, process in self.processes.items()}
        return twin

    def moves(self) -> list[Move]:
        found: list[Move] = []
        item = self.queue.item(self.item)
        for w, process in self.processes.items():
            if process.waiting is not None:
                found += self._call_moves(w, process.waiting)
            elif process.delivery is None and item.state is ItemState.READY:
                found.append(Move(f"{w} takes {self.case.case_id}", w, self._take(w), peer="queue"))
        if item.state is ItemState.LEASED and item.worker_id is not None:
            if self.processes[item.worker_id].delivery is None:  # dead, or done without an ack: it runs out
                found.append(Move(f"{item.worker_id}'s lease runs out", "queue", self._expire, peer=item.worker_id))
            elif not self.case.poison:  # its worker is slow: the model call it just made outlasted the lease
                found.append(
                    Move(
                        f"{item.worker_id}'s lease runs out while it works",
                        "queue",
                        self._expire,
                        peer=item.worker_id,
                        cost="stall",
                    )
                )
        return found

    def _call_moves(self, w: str, call: KitCall) -> list[Move]:
        peer = _PEERS.get(call.name, "provider")
        found = [Move(f"{w} {call.name}", w, self._answer(w), peer=peer)]
        if call.name == "send" and not self.case.poison:
            found += [
                Move(f"{w} send (request lost)", w, self._answer(w, lost="request"), peer=peer, cost="lost"),
                Move(f"{w} send (reply lost)", w, self._answer(w, lost="reply"), peer=peer, cost="lost"),
            ]
        if call.name in _CHANGES or len(self.processes[w].said) == 0:  # a death between two reads is one of these
            found.append(Move(f"{w} dies before {call.name}", w, peer=peer, cost="crash", crash=True))
        if call.name in _CHANGES:
            found.append(
                Move(f"{w} {call.name}, then dies", w, self._perform_only(w), peer=peer, cost="crash", crash=True)
            )
        return found

    def fingerprint(self) -> Hashable:
        """What the future depends on, naming no worker (each one's part is `actor_print`)."""
        item = self.queue.item(self.item)
        return (
            item.state,
            item.token,
            item.attempts,
            repr(self.kit.checkpoint(self.case.case_id)),
            tuple((c.message_id, c.idem_key) for c in self.adapter.ledger.contacts()),
            tuple(sorted(self.sent)),  # when each send was is a worker's part (`actor_print`)
            repr(sorted(self.queue.store.scan(self.adapter.provider._operations))),
            Drafts.draftings(self.queue.store, self.case.case_id),  # a new draft reads differently
            self.problem,
        )

    def actor_print(self, w: str) -> Hashable:
        process = self.processes[w]
        lease = process.lease
        holds = self.queue.item(self.item).worker_id == w
        return (
            holds,
            None if lease is None else lease.token,
            repr(process.waiting),
            tuple(process.said),
            tuple(sorted(process.known.items())),
            process.refused_at,
            process.started,
            tuple(sorted(key for key, sends in self.sent.items() if any(at < process.began for _, at, _ in sends))),
        )

    def broken(self) -> str | None:
        if self.problem is not None:
            return self.problem
        contacts = self.adapter.ledger.contacts(self.case.case_id)
        if len(contacts) > 1:
            said = ", ".join(f"{c.message_id} by {c.worker_id} under key {c.idem_key}" for c in contacts)
            return f"{self.case.customer} was emailed {len(contacts)} times about {self.case.case_id}: {said}."
        return None

    def finished(self) -> str | None:
        item = self.queue.item(self.item)
        if self.case.poison:
            return None  # each of its deliveries failed (one that did not is `broken` at once)
        if item.state is ItemState.DONE:
            return None
        last = self.ended[-1]
        if item.state is ItemState.DEAD:
            return (
                f"{self.case.case_id} ended in the dead-letter queue after {item.attempts} deliveries, yet nothing "
                f"stops it from being handled: {last}."
            )
        sent = " (the email had gone out)" if self.adapter.ledger.contacts(self.case.case_id) else ""
        return f"{self.case.case_id} was never finished{sent}: {last}."

    def crashed(self, actor: str) -> str | None:
        process = self.processes[actor]
        if process.delivery is not None:
            process.delivery.close()
        self.processes[actor] = _Process()  # a fresh process: nothing of the old one's life
        if process.lease is not None:
            self.ended.append(f"{actor}'s process died (its delivery had done: {'; '.join(process.said) or 'nothing'})")
        return None

    # ------------------------------------------------------------------ moves
    def _take(self, w: str) -> Callable[[Run], str]:
        def act(run: Run) -> str:
            lease = self.queue.acquire(w)
            assert lease is not None, "a ready case is handed out"
            answer = run.answer(w)
            process = self.processes[w]
            process.life.append((lease, []))
            self.steps += 1
            process.lease, process.started, process.began = lease, memory(answer), self.steps
            said = f"{w} takes {self.case.case_id} (attempt {lease.attempt}, token {lease.token})"
            try:
                process.delivery = Delivery(answer, lease)
            except NotAttempted:
                raise
            except KitMisuseError as misuse:  # its call gave nothing to step: said as a step would say it
                self.problem = f"{w}'s worker misused its kit: {misuse}"
                return f"{said}; {self._ends(w, misuse)}"
            except Exception as error:  # noqa: BLE001 - the learner's call failed: its delivery ends so
                return f"{said}; {self._ends(w, error)}"
            return f"{said}; {self._run_on(w, Reply())}"

        return act

    def _answer(self, w: str, *, lost: str | None = None) -> Callable[[Run], str]:
        def act(run: Run) -> str:
            call = self.processes[w].waiting
            assert call is not None
            reply, said = self._perform(w, call, lost)
            if self.problem is not None:
                return said
            return f"{said}; {self._run_on(w, reply)}"

        return act

    def _perform_only(self, w: str) -> Callable[[Run], str]:
        def act(run: Run) -> str:
            call = self.processes[w].waiting
            assert call is not None
            return self._perform(w, call, None)[1]

        return act

    def _expire(self, run: Run) -> str:
        item = self.queue.item(self.item)
        due = item.lease_expires_at
        assert due is not None
        self.clock.set(max(self.clock.now(), due) + 1)
        self.queue.expire_leases()
        where = "the dead-letter queue" if self.queue.item(self.item).state is ItemState.DEAD else "the queue"
        return f"{item.worker_id}'s lease on {self.case.case_id} runs out: the case goes back to {where}"

    # ------------------------------------------------------------------ what a step does
    def _perform(self, w: str, call: KitCall, lost: str | None) -> tuple[Reply, str]:
        """Do `call` for worker `w` (a send's request or reply possibly lost): its reply, in words."""
        process = self.processes[w]
        lease = process.lease
        assert lease is not None
        n = len(process.said) + 1
        self.steps += 1
        if process.refused_at is not None and self.problem is None:
            self.problem = (
                f"{w}'s heartbeat was refused (call {process.refused_at} of its delivery: the case was no longer "
                f"its own), yet it then called {call.words}: a refused heartbeat means stop at once, with no "
                "further call."
            )
        if n > MOST_CALLS and self.problem is None:
            self.problem = (
                f"{w} made {MOST_CALLS} kit calls in one delivery of {self.case.case_id} and was stopped: it does "
                f"not stop (its last calls: {'; '.join(process.said[-3:])})."
            )
        if call.name == "send" and self.problem is None:
            self._blind(w, call)
        contacts = len(self.adapter.ledger.contacts(self.case.case_id))
        if lost == "request":
            reply = Reply(SendResult(status=SendStatus.UNKNOWN, op_id=str(call.args[0])))
        else:
            reply = self.kit.perform(call, lease)
            if lost == "reply" and reply.refused is None:
                reply = Reply(SendResult(status=SendStatus.UNKNOWN, op_id=str(call.args[0])))
        value = reply.value
        if call.name in ("send", "lookup") and isinstance(value, SendResult):
            key = str(call.args[0])
            if call.name == "send":
                self.sent.setdefault(key, []).append((w, self.steps, lease.attempt))
            process.known[key] = value.status
        if call.name == "heartbeat" and value is False and process.refused_at is None:
            process.refused_at = n
        if call.name == "ack" and reply.refused is None and self.problem is None:
            self._acked(w, contacts)
        answer = _words(reply)
        process.said.append(f"{call.words} -> {answer}")
        loss = {"request": " (the request is lost: nothing reaches the provider)", "reply": " (the reply is lost)"}
        return reply, f"{w} {call.words}{loss.get(lost or '', '')} -> {answer}"

    def _blind(self, w: str, call: KitCall) -> None:
        """A send under a key that was sent under before this delivery began, or earlier in it,
        whose failure this delivery has not learned: a blind resend. (A stale worker's send
        racing a later delivery's is not: that one could not have known; the provider's
        idempotency is what answers it.)"""
        key = str(call.args[0]) if call.args else ""
        process = self.processes[w]
        earlier = [send for send in self.sent.get(key, ()) if send[1] < process.began or send[0] == w]
        if earlier and process.known.get(key) is not SendStatus.FAILED:
            who, at, attempt = earlier[-1]
            by = (
                "it had sent under that key itself, earlier in this delivery"
                if at > process.began
                else f"{who}'s delivery of attempt {attempt} had sent under that key before this one began"
            )
            self.problem = (
                f"{w} sent under {key} again without looking it up first: {by}, and {w} did not know that send "
                "failed. An operation whose outcome is not a known failure is looked up, not sent again."
            )

    def _acked(self, w: str, contacts: int) -> None:
        if self.case.poison:
            self.problem = (
                f"{w} acknowledged {self.case.case_id}, a case that can never be drafted: a poison case must fail "
                "on every delivery, so the queue dead-letters it with the reason, not be marked done."
            )
        elif not contacts:
            self.problem = (
                f"{w} acknowledged {self.case.case_id}, but {self.case.customer} was never emailed: an acknowledged "
                "case is never delivered again, so the customer never hears."
            )

    def _run_on(self, w: str, reply: Reply) -> str:
        """Run `w`'s worker on with `reply`: its next call, or how its delivery ended."""
        process = self.processes[w]
        assert process.delivery is not None
        process.life[-1][1].append(_fresh(reply))  # told again to a copy of this process
        try:
            found = process.delivery.step(reply)
        except NotAttempted:
            raise
        except KitMisuseError as misuse:
            self.problem = f"{w}'s worker misused its kit: {misuse}"
            return self._ends(w, misuse)
        except Exception as error:  # noqa: BLE001 - the worker raised: the delivery is given back
            return self._ends(w, error)
        except BaseException as error:  # noqa: BLE001 - sys.exit and the like: the learner's, judged as raised
            if isinstance(error, (KeyboardInterrupt, CheckStopped)):
                raise
            return self._ends(w, Exception(error_text(error)))
        if isinstance(found, Finished):
            return self._ends(w, None)
        if found.name == "next_chunk" and self.problem is None:  # the model's answer concerns this worker alone
            process.waiting = found
            reply, said = self._perform(w, found, None)
            return f"{said}; {self._run_on(w, reply) if self.problem is None else 'stopped'}"
        process.waiting = found
        return f"then waits on {found.words}"

    def _ends(self, w: str, error: BaseException | None) -> str:
        """`w`'s delivery ended: returned (`error` None) or raised. A raise gives it back (a nack)."""
        process = self.processes[w]
        lease = process.lease
        assert lease is not None
        if error is None:
            how = f"{w}'s delivery returned"
            if self.case.poison and self.problem is None:
                self.problem = (
                    f"{w}'s delivery of {self.case.case_id} returned quietly, though the case cannot be drafted: "
                    "without an error the queue learns nothing, the lease runs out, and the case goes round until "
                    "it dies of expired leases, with no reason a person could act on."
                )
        else:
            how = f"{w}'s delivery raised {error_text(error)}"
            if not isinstance(error, _LOST):
                try:
                    self.queue.nack(lease, error_text(error))
                    how += ": it is given back (nack)"
                except _LOST:
                    pass
        self.processes[w] = process.idle()
        self.ended.append(how)
        return how


def _revived(run: Run, w: str, process: _Process) -> _Process:
    """`process` in the copied run: a fresh copy of the answer told again what each delivery
    of its life was told; its delivery still running waits where the original waits."""
    twin = copy.copy(process)
    twin.life = [(lease, list(replies)) for lease, replies in process.life]
    twin.said, twin.known = list(process.said), dict(process.known)
    if not process.life:
        return twin
    answer = run.answer(w)
    running = process.delivery is not None
    for n, (lease, replies) in enumerate(process.life):
        try:
            delivery = Delivery(answer, lease)
            found: Any = delivery.steps([_fresh(r) for r in replies])[-1] if replies else None
        except Exception as error:  # noqa: BLE001 - a delivery whose call raised: as it did before
            found = error
        last = n == len(process.life) - 1
        if last and running:
            if not isinstance(found, KitCall) or found != process.waiting:
                raise NotCopyable("the worker did not come back to the call it waits on")
            twin.delivery = delivery
        elif isinstance(found, KitCall):
            raise NotCopyable("a delivery that ended did not end when played again")
    return twin


def _fresh(reply: Reply) -> Reply:
    """`reply` as it may be handed out again: a loaded checkpoint (a dict the worker may
    change) as a copy of its own; everything else cannot change."""
    return Reply(json_copy(reply.value)) if type(reply.value) is dict else reply


def _words(reply: Reply) -> str:
    if reply.refused is not None:
        return f"refused: {reply.refused.kind}"
    value = reply.value
    if isinstance(value, SendResult):
        return value.status.value + (f" {value.message_id}" if value.message_id else "")
    if isinstance(value, str) and len(value) > 24:
        return repr(value[:20] + "...")
    return repr(value)


def scenario(setting: Setting, worlds: list[WorkerWorld] | None = None) -> Scenario:
    """The explorer's scenario of `setting`; `worlds` (if given) collects the last world started."""

    def start(run: Run) -> WorkerWorld:
        world = WorkerWorld(run, setting.case)
        if worlds is not None:
            worlds[:] = [world]
        return world

    return Scenario(name=f"lab 09, {setting.name}", bound=setting.bound, start=start)
