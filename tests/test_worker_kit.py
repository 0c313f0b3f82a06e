"""The whole worker's machinery (lab 09): the kit a learner's `async def work(lease, kit)` is
handed, what each kit call does (`worker.backend`), the simulator's program that hands every
delivery to such a worker (`sim.agents`), and the transcript a burst day crosses the grader's
boundary as (`checks.worker_day`)."""

from __future__ import annotations

import dataclasses

import pytest

from shopops_lab.checks import worker_day
from shopops_lab.checks.base import ForeignAnswer, applied
from shopops_lab.checks.driven import Delivery
from shopops_lab.checks.lab07 import burst_day
from shopops_lab.clock import FakeClock
from shopops_lab.effects import EmailAdapter, ProviderFault, SendStatus
from shopops_lab.errors import KitMisuseError, StaleTokenError
from shopops_lab.events import EventKind
from shopops_lab.explore import Bound, Move, Scenario, explore
from shopops_lab.sim import Simulation
from shopops_lab.sim.agents import agent_program
from shopops_lab.states import ItemState
from shopops_lab.worker.backend import CHECKPOINTS, Drafts, KitBackend
from shopops_lab.worker.kit import Finished, Kit, KitCall, Refusal, Reply, step
from shopops_lab.worker.queue import InMemoryQueue, Queue

PAYLOAD = {"idem_key": "O-1001:email:1", "to": "jordan@example.com", "schema": 1}


async def sound(lease, kit):
    """A right worker, short: the provider asked first, then draft, send, ack."""
    key = lease.payload["idem_key"]
    if (await kit.lookup(key)).status is not SendStatus.OK:
        body = ""
        while (piece := await kit.next_chunk()) is not None:
            body += piece
            if not await kit.heartbeat():
                return
        result = await kit.send(key, body)
        if result.status is SendStatus.UNKNOWN:
            result = await kit.lookup(key)
        if result.status is not SendStatus.OK:
            raise RuntimeError("not sent")
    await kit.ack()


def shop(chunks: int = 2):
    clock = FakeClock()
    queue = InMemoryQueue(lease_seconds=30, clock=clock)
    queue.enqueue(case_id="O-1001", tenant_id="t", kind="contact_send", payload=PAYLOAD)
    adapter = EmailAdapter(clock=clock, store=queue.store)
    return clock, queue, KitBackend(queue=queue, adapter=adapter, model=Drafts(chunks))


def drive(work, lease, kit: KitBackend) -> list[str]:
    """Run one delivery to its end, answering each call: the calls it made, in words."""
    delivery, reply, said = Delivery(work, lease), Reply(), []
    while not isinstance(call := delivery.step(reply), Finished):
        reply = kit.perform(call, lease)
        said.append(call.name)
    return said


# ---------------------------------------------------------------------------- the kit


def test_a_worker_is_stepped_one_kit_call_at_a_time_and_a_refusal_is_raised_at_its_await() -> None:
    async def work(lease, kit):
        try:
            await kit.save({"a": 1})
        except StaleTokenError as refused:
            return await kit.send("key", str(refused.current))
        return None

    coroutine = work(None, Kit())
    assert step(coroutine, Reply()) == KitCall("save", ({"a": 1},))
    refusal = Refusal.of(StaleTokenError(what="x", token=1, current=2))
    assert step(coroutine, Reply(refused=refusal)) == KitCall("send", ("key", "2"))
    assert step(coroutine, Reply("sent")) == Finished()


def test_a_kit_call_used_without_await_is_named_with_its_line() -> None:
    async def forgets(lease, kit):
        kit.ack()
        await kit.heartbeat()

    async def reads_it(lease, kit):
        if kit.heartbeat():
            await kit.ack()

    with pytest.raises(KitMisuseError, match=r"kit.ack\(\) \(in forgets, line \d+\) was never awaited"):
        step(forgets(None, Kit()), Reply())
    with pytest.raises(KitMisuseError, match=r"kit.heartbeat\(\) was used as a value without `await`"):
        step(reads_it(None, Kit()), Reply())


def test_a_plain_function_or_a_foreign_await_is_refused_by_name() -> None:
    async def sleeps(lease, kit):
        import asyncio

        await asyncio.sleep(0)

    with pytest.raises(KitMisuseError, match="returned None instead of a coroutine"):
        step(None, Reply())
    with pytest.raises(KitMisuseError, match="awaited None, which is not a call of its kit"):
        step(sleeps(None, Kit()), Reply())


def test_a_dead_workers_finally_reaches_no_kit() -> None:
    async def tidy(lease, kit):
        try:
            await kit.heartbeat()
        finally:
            await kit.ack()

    coroutine = tidy(None, Kit())
    assert step(coroutine, Reply()).name == "heartbeat"
    coroutine.close()  # the kill: the finally's ack raises GeneratorExit at once, nothing is yielded


# ---------------------------------------------------------------------------- the backend


def test_the_backend_answers_every_call_of_one_delivery() -> None:
    clock, queue, kit = shop()
    lease = queue.acquire("W1")
    assert drive(sound, lease, kit) == ["lookup", "next_chunk", "heartbeat", "next_chunk", "heartbeat"] + [
        "next_chunk",
        "send",
        "ack",
    ]
    assert queue.item(lease.item_id).state is ItemState.DONE
    (contact,) = kit.adapter.ledger.contacts("O-1001")
    assert (contact.idem_key, contact.to, contact.worker_id) == ("O-1001:email:1", "jordan@example.com", "W1")


def test_a_save_is_fenced_by_the_items_token_and_a_load_is_a_copy() -> None:
    clock, queue, kit = shop()
    first = queue.acquire("W1")
    assert kit.perform(KitCall("save", ({"intent": "k"},)), first) == Reply(None)
    loaded = kit.perform(KitCall("load"), first).value
    loaded["intent"] = "changed by the worker"
    assert kit.checkpoint("O-1001") == {"intent": "k"}
    clock.advance(31)
    second = queue.acquire("W2")
    stale = kit.perform(KitCall("save", ({"sent": "msg-9"},)), first)
    assert stale.refused is not None and stale.refused.kind == "StaleTokenError"
    assert stale.refused.fields["current"] == second.token
    assert queue.store.get(CHECKPOINTS, "O-1001") == {"intent": "k"}
    assert [e.kind for e in queue.log if e.kind is EventKind.STALE_REJECTED]
    assert kit.perform(KitCall("save", ({"sent": "msg-1"},)), second) == Reply(None)


def test_a_save_is_one_transaction_on_every_store(backend, monkeypatch) -> None:
    """The checkpoint, its fence and its event are written together or not at all: a save
    whose event cannot be written keeps no checkpoint (each call is looked up as it is made,
    so the save that `bind_transactions` wrapped is the one that runs)."""
    queue = Queue(store=backend.open(), lease_seconds=30, clock=FakeClock())
    queue.enqueue(case_id="O-1001", tenant_id="t", kind="contact_send", payload=PAYLOAD)
    kit = KitBackend(queue=queue, adapter=EmailAdapter(clock=queue.clock, store=queue.store), model=Drafts(2))
    lease = queue.acquire("W1")
    append = type(kit.store.log).append

    def failing(log, kind, *args, **kwargs):
        if kind is EventKind.CHECKPOINT_WRITTEN:
            raise RuntimeError("the disk filled up")
        return append(log, kind, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(type(kit.store.log), "append", failing)
        with pytest.raises(RuntimeError, match="disk"):
            kit.perform(KitCall("save", ({"intent": "O-1001:email:1"},)), lease)
    assert kit.checkpoint("O-1001") is None
    assert kit.perform(KitCall("save", ({"intent": "O-1001:email:1"},)), lease) == Reply(None)
    assert kit.checkpoint("O-1001") == {"intent": "O-1001:email:1"}


@pytest.mark.parametrize(
    ("call", "kind"),
    [
        (KitCall("save", ("not a dict",)), "BadArgumentError"),
        (KitCall("save", ({"x": object()},)), "BadArgumentError"),
        (KitCall("send", (7, "body")), "BadArgumentError"),
        (KitCall("lookup", ()), "BadArgumentError"),
        (KitCall("teleport"), "BadArgumentError"),
    ],
)
def test_a_malformed_call_is_a_refusal_not_a_crash(call: KitCall, kind: str) -> None:
    clock, queue, kit = shop()
    reply = kit.perform(call, queue.acquire("W1"))
    assert reply.refused is not None and reply.refused.kind == kind


def test_a_second_drafting_reads_differently_and_a_poison_payload_cannot_be_drafted() -> None:
    clock, queue, kit = shop(chunks=1)
    first = queue.acquire("W1")
    assert kit.perform(KitCall("next_chunk"), first).value == "Dear customer, "
    assert kit.perform(KitCall("next_chunk"), first).value is None
    clock.advance(31)
    again = queue.acquire("W2")
    assert kit.perform(KitCall("next_chunk"), again).value == "[draft 2] Dear customer, "
    queue.enqueue(case_id="P-1", tenant_id="t", kind="contact_send", payload={"to": "x@y", "schema": 0})
    queue.ack(again)
    poison = queue.acquire("W1")
    assert kit.perform(KitCall("next_chunk"), poison).refused.kind == "DraftError"


def test_a_send_whose_reply_is_lost_is_unknown_and_its_lookup_knows() -> None:
    clock, queue, kit = shop()
    lease = queue.acquire("W1")
    kit.adapter.provider.inject(ProviderFault.DROP_REPLY)
    assert kit.perform(KitCall("send", ("O-1001:email:1", "hi")), lease).value.status is SendStatus.UNKNOWN
    found = kit.perform(KitCall("lookup", ("O-1001:email:1",)), lease).value
    assert (found.status, found.message_id) == (SendStatus.OK, "msg-0001")


# ---------------------------------------------------------------------------- the explorer's crash with an act


def test_a_crash_move_with_an_act_does_the_call_then_kills_the_process() -> None:
    class World:
        def __init__(self, run):
            self.run, self.done, self.dead = run, [], []

        def moves(self):
            if self.done:
                return []
            return [Move("W1 send, then dies", "W1", lambda run: self.done.append("send") or "W1 sends", crash=True)]

        def fingerprint(self):
            return tuple(self.done)

        def broken(self):
            return None

        def finished(self):
            return None

        def crashed(self, actor):
            self.dead.append(actor)
            return "nothing more"

    worlds = []
    scenario = Scenario(
        "act then die", Bound("one move", budget={}), lambda run: worlds.append(World(run)) or worlds[-1]
    )
    found = explore(scenario, lambda: None)
    assert found.counterexample is None and found.schedules == 1
    assert worlds[-1].done == ["send"] and worlds[-1].dead == ["W1"]


# ---------------------------------------------------------------------------- the simulator's program


def test_burst_day_with_the_learners_worker_is_the_same_day_from_the_same_seed() -> None:
    days = [worker_day.day(sound, seed=5, items=200) for _ in range(2)]
    assert days[0] == days[1]
    assert days[0].problems() == [] and days[0].done + days[0].dead == 200


def test_a_killed_worker_starts_its_next_delivery_on_fresh_memory() -> None:
    """The pool hears of every death (at a fault point or from a timed kill), so a restarted
    worker's code runs on a fresh copy."""
    died: list[str] = []

    class Watching:
        def begin(self, name, lease):
            return Delivery(sound, lease)

        def died(self, name):
            died.append(name)

    sim = Simulation(
        dataclasses.replace(burst_day(5), rates=worker_day.CHAOS),
        seed=5,
        items=300,
        program=agent_program(Watching()),
    )
    sim.run_until()
    crashed = [e.worker_id for e in sim.log if e.kind is EventKind.WORKER_CRASHED]
    assert crashed and sorted(died) == sorted(crashed)


# ---------------------------------------------------------------------------- the transcript across the boundary


class _Elsewhere(ForeignAnswer):
    """An answer "in another process" that plays the day where it lives (this process), and
    may tamper with the transcript on the way back, or play the day with another worker than
    itself, as a learner's process could. Notes which kit function each step was taken by."""

    kind = "function"
    __name__ = "work"

    def __init__(self, work, tamper=None, plays=None) -> None:
        self.work, self.tamper, self.plays = work, tamper, plays or work
        self.by: list[str] = []  # the kit functions a step crossed by, one at a time
        self.played_here: list[str] = []  # the kit functions run where the answer lives

    def applied(self, function, args):
        self.played_here.append(function.__name__)
        if function is not worker_day.played:  # the spot check's lives: the answer's own code
            return function(self.work, *args)
        found = function(self.plays, *args)
        return self.tamper(found) if self.tamper else found

    def __call__(self, *args, **kwargs):
        return self.work(*args, **kwargs)

    def restart(self):
        return self

    def is_stub(self):
        return False

    def each(self, calls):
        raise NotImplementedError

    def memory(self):
        return ()

    def picture(self, value):
        return ()

    def twins(self, values, swap):
        raise NotImplementedError

    def in_turn(self, value, calls):
        self.by += [name.__name__ for name, _ in calls]
        return [name(value, *args) for name, args in calls]

    def around(self, value, call, reads):
        raise NotImplementedError

    def watch(self, functions):
        pass

    def watched(self):
        return frozenset()


def test_a_day_played_where_the_answer_lives_is_replayed_here_to_the_same_day() -> None:
    here = worker_day.day(sound, seed=5, items=200)
    elsewhere = _Elsewhere(sound)
    assert worker_day.day(elsewhere, seed=5, items=200) == here
    assert elsewhere.by == [], "the transcript fit: no step crossed one at a time"
    assert elsewhere.played_here[0] == "played" and set(elsewhere.played_here[1:]) == {"lived"}, "then a spot check"


@pytest.mark.parametrize(
    "tamper",
    [
        lambda found: [found[0].replace('"ack"', '"load"', 1), found[1]],  # a step the worker never took
        lambda found: [found[0], "0" * 64],  # answers the judge's day did not give
        lambda found: [found[0][: len(found[0]) // 2], found[1]],  # cut short: not JSON
        lambda found: "no transcript",
    ],
    ids=["a-forged-step", "another-digest", "cut-short", "not-a-transcript"],
)
def test_a_transcript_that_does_not_fit_is_thrown_away_and_the_day_stepped_here(tamper) -> None:
    here = worker_day.day(sound, seed=5, items=200)
    elsewhere = _Elsewhere(sound, tamper)
    assert worker_day.day(elsewhere, seed=5, items=200) == here
    assert "step" in elsewhere.by


async def one_key_per_attempt(lease, kit):
    """Wrong: a new key for every attempt."""
    body = ""
    while (piece := await kit.next_chunk()) is not None:
        body += piece
        if not await kit.heartbeat():
            return
    result = await kit.send(f"{lease.case_id}:{lease.attempt}", body)
    if result.status is not SendStatus.OK:
        raise RuntimeError("not sent")
    await kit.ack()


def test_a_day_played_by_another_worker_than_the_answer_is_caught_and_the_answer_judged() -> None:
    """The transcript of a right worker's day fits the judge's day step for step; a process that
    sends it for a wrong answer is caught by the answer's own code, played again on a sample
    of workers, and the wrong answer's own day is judged."""
    here = worker_day.day(one_key_per_attempt, seed=5, items=300)
    assert here.doubled
    elsewhere = _Elsewhere(one_key_per_attempt, plays=sound)
    assert worker_day.day(elsewhere, seed=5, items=300) == here
    assert "step" in elsewhere.by


def test_applied_runs_a_kit_function_on_the_answer_where_it_lives() -> None:
    assert applied(sound, lambda work, n: (work.__name__, n), 3) == ("sound", 3)
