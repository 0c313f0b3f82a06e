"""Burst day with the kit's worker replaced: each delivery goes to an `async def work(lease,
kit)` (lab 09's whole worker), run one kit call at a time among twenty others.

The worker loop is the kit's own (`workers.worker_loop`: the backpressure policy, acquire,
a broker's duplicates); only the delivery is handed to a `Pool`, which starts the worker's
coroutine for a lease and steps it. Each kit call is answered by the world's `KitBackend`
(its queue, its adapter, a drafting model), and time passes where a real worker would wait:
the model streams a draft in pieces of at most `CHUNK_SECONDS`, the whole of one gateway
call, so a worker that heartbeats after each piece keeps its lease. The scenario's faults
strike at the kit calls they name: a kill or a pause at the start of a model call (mid
call), before or after a send; a dropped reply on a send; a lost ack; a duplicate
delivery. A killed worker's coroutine is dropped where it waits and its pool forgets its
memory (`died`), so the restarted worker starts afresh; a worker that raises gives its
delivery back (a nack), and one that loses its lease is noted, as the kit's worker is.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Generator
from typing import Any, Protocol

from shopops_lab.errors import (
    KitMisuseError,
    LeaseExpiredError,
    LeaseSettledError,
    ModelTimeoutError,
    StaleTokenError,
)
from shopops_lab.sim.faults import Point
from shopops_lab.sim.workers import Steps, interrupt, worker_loop
from shopops_lab.sim.world import Program, Worker, World
from shopops_lab.worker.backend import Drafts, KitBackend
from shopops_lab.worker.kit import Finished, KitCall, Refusal, Reply
from shopops_lab.worker.queue import Lease

__all__ = ["CHUNK_SECONDS", "Pool", "Running", "agent_program"]

CHUNK_SECONDS = 10.0  # the longest piece of a draft: a third of the burst day's 30 s lease
MOST_CALLS = 200  # kit calls one delivery may make before the run stops it as a worker that never ends
_LOST = frozenset(kind.__name__ for kind in (StaleTokenError, LeaseExpiredError, LeaseSettledError))


class Running(Protocol):
    """One delivery's worker, as the simulator drives it."""

    def step(self, reply: Reply) -> KitCall | Finished: ...
    def close(self) -> None: ...


class Pool(Protocol):
    """The workers' code: `begin` starts worker `name`'s coroutine for `lease` (in that worker's
    process, its memory kept between deliveries; what it raises is the worker's, as a step's);
    `died` ends that process (the next delivery starts on fresh memory). What a worker raises
    is judged by its class name (`named`, where a stand-in raises it for a worker that ran
    elsewhere): a lost lease, a misused kit, or a failure the queue hears of (a nack)."""

    def begin(self, name: str, lease: Lease) -> Running: ...
    def died(self, name: str) -> None: ...


class Misused(Exception):
    """A worker that never ended its delivery: the run notes it, and the delivery ends."""


def agent_program(pool: Pool, misused: Callable[[str, Exception], None] | None = None) -> Program:
    """The loop every worker runs, handing each delivery to `pool`. `misused(worker, error)`
    hears of a worker that misused its kit or made MOST_CALLS calls in one delivery."""
    backends: weakref.WeakKeyDictionary[World, KitBackend] = weakref.WeakKeyDictionary()

    def backend(world: World) -> KitBackend:
        found = backends.get(world)
        if found is None:
            found = backends[world] = KitBackend(queue=world.queue, adapter=world.adapter, model=Drafts())
        return found

    def deliver(world: World, w: Worker, lease: Lease) -> Steps:
        return _deliver(world, w, lease, pool, backend(world), misused)

    def program(world: World, w: Worker) -> Generator[float, None, None]:
        return worker_loop(world, w, deliver)

    return program


def _deliver(
    world: World,
    w: Worker,
    lease: Lease,
    pool: Pool,
    kit: KitBackend,
    misused: Callable[[str, Exception], None] | None,
) -> Steps:
    """One delivery, handed to the pool's worker. Returns True if the worker died on the way."""
    world.began(w, lease)
    running: Running | None = None
    try:
        reply, calls, drafting = Reply(), 0, [0.0, 0, 0]  # the model call: seconds, pieces, pieces given
        while True:
            try:
                if running is None:
                    running = pool.begin(w.id, lease)
                call = running.step(reply)
            except Exception as error:  # noqa: BLE001 - the worker raised: how the delivery ends depends on what
                named = _named(error)
                if named in _LOST:
                    world.lost(w, lease, "kit", f"your worker raised {named}")
                    return False
                if named == KitMisuseError.__name__ and misused is not None:
                    misused(w.id, error)
                world.fail(w, lease, _said(error))  # given back: the queue hands it out again, or dead-letters it
                return False
            if isinstance(call, Finished):
                w.lease = None
                return False
            calls += 1
            if calls > MOST_CALLS:
                if misused is not None:
                    misused(w.id, Misused(f"made {MOST_CALLS} kit calls in one delivery of {lease.case_id}"))
                world.fail(w, lease, "stopped: the worker never ended its delivery")
                return False
            if call.name == "next_chunk":
                answer = yield from _chunk(world, w, lease, kit, drafting)
            elif call.name == "send":
                answer = yield from _send(world, w, lease, kit, call)
            elif call.name == "ack" and world.fault_at(Point.ACK, w, lease):
                world.ack_lost(w, lease)
                answer = Reply()  # the worker believes it acked
            else:
                answer = kit.perform(call, lease)
            if answer is None:  # killed where it waited
                pool.died(w.id)
                return True
            reply = answer
    except GeneratorExit:  # killed from outside (a timed fault): the process is gone
        pool.died(w.id)
        raise
    finally:
        if running is not None:
            running.close()


def _chunk(
    world: World, w: Worker, lease: Lease, kit: KitBackend, drafting: list[Any]
) -> Generator[float, None, Reply | None]:
    """The model's next piece. A delivery's first call starts its drafting: one gateway call,
    streamed in pieces of at most CHUNK_SECONDS, each taking its share of the call's time (a
    call that timed out fails on its last piece); once the draft is complete, None. The
    reply, or None if the worker was killed mid call."""
    if not drafting[1]:  # the delivery's first call to the model: its one drafting begins
        seconds = world.call_model(w, lease)
        drafting[:] = [seconds, max(1, math.ceil(seconds / CHUNK_SECONDS)), 0]
        kit.model.plan(lease, drafting[1])
        fault = world.fault_at(Point.MID_CALL, w, lease)
        if fault is not None and (yield from interrupt(world, w, fault)):
            return None
    reply = kit.perform(KitCall("next_chunk"), lease)
    if isinstance(reply.value, str):
        drafting[2] += 1
        yield drafting[0] / drafting[1]
        if drafting[2] == drafting[1] and world.gateway.timed_out(drafting[0]):
            return Reply(refused=Refusal.of(ModelTimeoutError(case_id=lease.case_id, seconds=drafting[0])))
    return reply


def _send(
    world: World, w: Worker, lease: Lease, kit: KitBackend, call: KitCall
) -> Generator[float, None, Reply | None]:
    """A send, with the faults that strike around it: the reply, or None if the worker died."""
    fault = world.fault_at(Point.BEFORE_SEND, w, lease)
    if fault is not None and (yield from interrupt(world, w, fault)):
        return None
    if world.fault_at(Point.SEND, w, lease):
        world.drop_next_reply()
    reply = kit.perform(call, lease)
    fault = world.fault_at(Point.AFTER_SEND, w, lease)
    if fault is not None and (yield from interrupt(world, w, fault)):
        return None
    return reply


def _named(error: Exception) -> str:
    """The class name of what the worker raised (a stand-in for it says the original's)."""
    named = getattr(error, "named", None)
    return named if isinstance(named, str) else type(error).__name__


def _said(error: Exception) -> str:
    text = str(error)
    return f"{_named(error)}: {text}" if text else _named(error)
