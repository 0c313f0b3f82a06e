"""Bad input gets a clear error and changes nothing.

One table of (call, bad value) rows over the engine's public constructors, methods and
functions. Every row must raise a `ShopOpsError` (never a TypeError, KeyError, ...), and
the world it was called in must look exactly as before: same store contents, same event
log, same clock. To cover a new call, add a `Call` to its world's list with the family of
bad values it must refuse; the CLI has its own table at the end (exit status 2, one line).
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from shopops_lab import cli
from shopops_lab.backpressure import (
    BackpressurePolicy,
    Decision,
    Gateway,
    Signals,
    acquire,
    as_policy,
    wait,
)
from shopops_lab.checker import check
from shopops_lab.checkpoint import Checkpoint, CheckpointStore, Receipt, Step, Workflow
from shopops_lab.clock import FakeClock
from shopops_lab.crash import explore
from shopops_lab.effects import EmailAdapter, Provider
from shopops_lab.errors import ShopOpsError, StoreCorruptError, StoreFullError
from shopops_lab.events import EventKind, EventLog
from shopops_lab.fencing import NaiveResultStore
from shopops_lab.jobs import JobStore
from shopops_lab.latency import LatencyModel
from shopops_lab.metrics import Summary, percentile, queue_metrics, series
from shopops_lab.outbox import Broker, Delivery, Dispatcher, IdempotentConsumer, NaiveConsumer, OutboxStore
from shopops_lab.recovery import CrashPoint, Env, ReceiptRunner
from shopops_lab.sim import run as simulate
from shopops_lab.states import ItemState
from shopops_lab.worker.queue import InMemoryQueue, Queue

# --------------------------------------------------------------------------- families of bad values

_loop: dict = {"lines": []}
_loop["lines"].append(_loop)  # a payload that contains itself

TEXT = [None, "", "   ", 7, b"W1", ["W1"]]
TIME = [math.nan, math.inf, -math.inf, True, "5", 1e20, [3]]  # for now= (None means "the clock")
READING = [math.nan, math.inf, "5", None, True, 1e20]  # what a broken clock's now() returns
SECONDS = [0, -1, math.nan, math.inf, True, "30", 1e13]
WHOLE = [0, -1, 1.5, True, "3", None]
JSON = [{"x": math.nan}, {"x": math.inf}, {"x": {1, 2}}, {1: "a"}, _loop, {"x": object()}]
CLOCK = [object(), "clock", 5]
LOG = [object(), [], "log"]
FUNCTION = [5, "handler"]
TOKEN = [0, -1, 99, "1", True, None, 1.5]
FRACTION = [0, 1, -0.5, "0.5", None, math.nan, True]


class SwitchClock:
    """A clock whose reading a row can set to nonsense, as a broken clock would return."""

    def __init__(self, value: float = 10.0) -> None:
        self.value = value

    def now(self) -> Any:
        return self.value


def reading(bad: Any, clock: SwitchClock, call: Callable[[], Any]) -> Any:
    """Run `call` while `clock` reads `bad`, then put the clock back."""
    good, clock.value = clock.value, bad
    try:
        return call()
    finally:
        clock.value = good


# --------------------------------------------------------------------------- the worlds rows run in


def queue_world() -> SimpleNamespace:
    clock = SwitchClock(10.0)
    q = InMemoryQueue(lease_seconds=30, max_attempts=1, clock=clock)
    q.enqueue(case_id="O-1001", payload={"idem_key": "O-1001:email:3", "lines": [{"sku": "A"}]})
    q.enqueue(case_id="A-1002")
    q.enqueue(case_id="B-1003")
    lease = q.acquire("W1")
    q.nack(q.acquire("W2"), error="bad address")  # max_attempts=1: item-0002 is dead
    return SimpleNamespace(clock=clock, q=q, lease=lease)


def observe_queue(w: SimpleNamespace) -> tuple:
    q = w.q
    return q.items(), q.counts(), q.dlq_items(), q.log.to_dicts(), w.clock.now(), q._last_time


def jobs_world() -> SimpleNamespace:
    clock = SwitchClock(10.0)
    store = JobStore(clock=clock)
    job = store.submit("O-1001:refund", {"case_id": "O-1001", "lines": [{"sku": "A"}]})
    store.submit("A-1002:refund", {"case_id": "A-1002"})
    claim = store.claim(job.id, "A", lease_seconds=30)
    return SimpleNamespace(clock=clock, store=store, job=job, claim=claim)


def observe_jobs(w: SimpleNamespace) -> tuple:
    return w.store.jobs(), w.store.log.to_dicts(), w.clock.now()


def checkpoints_world() -> SimpleNamespace:
    clock = SwitchClock(10.0)
    store = CheckpointStore(clock=clock)
    token = store.claim("O-1001")
    store.save("O-1001", Checkpoint.start("v1", budgets={"tool_calls": 2}), token=token)
    return SimpleNamespace(clock=clock, store=store, token=token, cp=store.load("O-1001"))


def observe_checkpoints(w: SimpleNamespace) -> tuple:
    return w.store.token("O-1001"), w.store.history("O-1001"), w.store.jobs(), w.store.log.to_dicts(), w.cp


def env_world() -> SimpleNamespace:
    return SimpleNamespace(env=Env())


def observe_env(w: SimpleNamespace) -> tuple:
    env = w.env
    return (
        env.log.to_dicts(),
        tuple(env.trace),
        tuple(env.effects),
        len(env.adapter.ledger),
        env.checkpoints.jobs(),
        tuple(env.reached),
    )


def effects_world() -> SimpleNamespace:
    clock = SwitchClock(10.0)
    email = EmailAdapter(clock=clock)
    email.send("O-1001:email:3", case_id="O-1001", to="jordan@example.com", body="sorry")
    return SimpleNamespace(clock=clock, email=email, provider=email.provider)


def observe_effects(w: SimpleNamespace) -> tuple:
    return (
        w.email.ledger.contacts(),
        w.provider.log.to_dicts(),
        w.provider.store.scan(w.provider._operations),
        tuple(w.provider._faults),
    )


def outbox_world() -> SimpleNamespace:
    clock = SwitchClock(10.0)
    outbox, broker = OutboxStore(clock=clock), Broker()
    outbox.commit({"id": "O-1001", "status": "refunded"}, {"topic": "refund.issued", "payload": {"amount": 20}})
    Dispatcher(outbox, broker).dispatch_once()
    outbox.commit({"id": "A-1002", "status": "refunded"}, {"topic": "refund.issued", "payload": {"amount": 5}})
    consumer = IdempotentConsumer(clock=clock, log=outbox.log)
    return SimpleNamespace(
        clock=clock, outbox=outbox, broker=broker, dispatcher=Dispatcher(outbox, broker), consumer=consumer
    )


def observe_outbox(w: SimpleNamespace) -> tuple:
    return (
        w.outbox.rows(),
        w.outbox.messages(),
        w.outbox.log.to_dicts(),
        list(w.broker.deliveries),
        w.consumer.position,
        list(w.consumer.applied),
        set(w.consumer.processed),
    )


def fencing_world() -> SimpleNamespace:
    clock = SwitchClock(10.0)
    store = NaiveResultStore(clock=clock)
    token = store.claim("job-1", "A")
    store.complete("job-1", {"ok": True}, token=token, worker_id="A")
    return SimpleNamespace(clock=clock, store=store, token=token)


def observe_fencing(w: SimpleNamespace) -> tuple:
    s = w.store
    return s.current_token("job-1"), s.result("job-1"), s.written_by("job-1"), s.log.to_dicts()


def log_world() -> SimpleNamespace:
    log = EventLog()
    q = InMemoryQueue(clock=FakeClock(), log=log)
    q.enqueue(case_id="O-1001")
    q.ack(q.acquire("W1"))
    return SimpleNamespace(log=log)


def observe_log(w: SimpleNamespace) -> tuple:
    return (w.log.to_dicts(),)


def clock_world() -> SimpleNamespace:
    return SimpleNamespace(clock=FakeClock(5))


def observe_clock(w: SimpleNamespace) -> tuple:
    return (w.clock.now(),)


def gateway_world() -> SimpleNamespace:
    gateway = Gateway(capacity=4)
    gateway.record(7.5, 100.0)
    gateway.spike(2)
    return SimpleNamespace(gateway=gateway)


def observe_gateway(w: SimpleNamespace) -> tuple:
    g = w.gateway
    return g.calls, g.in_flight, g.timeouts, g.p95(), g.latency, g.slowdown, g.log.to_dicts()


def nothing() -> SimpleNamespace:
    """For constructors and pure functions: the only state is what they would return."""
    return SimpleNamespace(log=log_world().log, report=explore(ReceiptRunner()))


def observe_nothing(w: SimpleNamespace) -> tuple:
    return (w.log.to_dicts(),)


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Call:
    label: str
    call: Callable[[SimpleNamespace, Any], Any]
    bad: list


WORLDS: dict[str, tuple[Callable[[], SimpleNamespace], Callable[[SimpleNamespace], tuple], list[Call]]] = {
    "queue": (
        queue_world,
        observe_queue,
        [
            Call("InMemoryQueue(lease_seconds=)", lambda w, b: InMemoryQueue(lease_seconds=b), [*SECONDS, None]),
            Call("InMemoryQueue(max_attempts=)", lambda w, b: InMemoryQueue(max_attempts=b), WHOLE),
            Call("InMemoryQueue(clock=)", lambda w, b: InMemoryQueue(clock=b), CLOCK),
            Call("InMemoryQueue(log=)", lambda w, b: InMemoryQueue(log=b), LOG),
            Call("enqueue(case_id=)", lambda w, b: w.q.enqueue(case_id=b), TEXT),
            Call("enqueue(tenant_id=)", lambda w, b: w.q.enqueue(case_id="O-1", tenant_id=b), TEXT),
            Call("enqueue(kind=)", lambda w, b: w.q.enqueue(case_id="O-1", kind=b), TEXT),
            Call("enqueue(payload=)", lambda w, b: w.q.enqueue(case_id="O-1", payload=b), [*JSON, "x", [1]]),
            Call("enqueue(priority=)", lambda w, b: w.q.enqueue(case_id="O-1", priority=b), ["1", 1.5, True, None]),
            Call("enqueue(now=)", lambda w, b: w.q.enqueue(case_id="O-1", now=b), [*TIME, 5]),
            Call("enqueue, clock reads", lambda w, b: reading(b, w.clock, lambda: w.q.enqueue(case_id="O-1")), READING),
            Call("acquire(worker_id=)", lambda w, b: w.q.acquire(b), TEXT),
            Call("acquire(now=)", lambda w, b: w.q.acquire("W3", now=b), [*TIME, 5]),
            Call("acquire(lease_seconds=)", lambda w, b: w.q.acquire("W3", lease_seconds=b), SECONDS),
            Call("acquire(max_priority=)", lambda w, b: w.q.acquire("W3", max_priority=b), ["1", 1.5, True]),
            Call("acquire, clock reads", lambda w, b: reading(b, w.clock, lambda: w.q.acquire("W3")), READING),
            Call("ack(lease=)", lambda w, b: w.q.ack(b), [None, "lease", {"item_id": "item-0001", "token": 1}]),
            Call(
                "ack(forged lease)",
                lambda w, b: w.q.ack(w.lease._replace(**b)),
                [
                    {"token": 2},
                    {"token": 0},
                    {"item_id": "item-0404"},
                    {"case_id": "A-1002"},
                    {"queue": None},
                    {"item_id": 5},
                ],
            ),
            Call("ack(now=)", lambda w, b: w.q.ack(w.lease, now=b), [*TIME, 5]),
            Call("nack(now=)", lambda w, b: w.q.nack(w.lease, error="x", now=b), TIME),
            Call("heartbeat(lease=)", lambda w, b: w.q.heartbeat(b), [None, ("item-0001", 1)]),
            Call("heartbeat(now=)", lambda w, b: w.q.heartbeat(w.lease, now=b), TIME),
            Call("heartbeat, clock reads", lambda w, b: reading(b, w.clock, lambda: w.q.heartbeat(w.lease)), READING),
            Call("process_one(worker_id=)", lambda w, b: w.q.process_one(b, lambda lease: None), TEXT),
            Call("process_one(handler=)", lambda w, b: w.q.process_one("W3", b), [None, *FUNCTION]),
            Call("process_one(now=)", lambda w, b: w.q.process_one("W3", lambda lease: None, now=b), TIME),
            Call("_expire_leases(now=)", lambda w, b: w.q._expire_leases(now=b), TIME),
            Call(
                "replay_dlq(item_id=)",
                lambda w, b: w.q.replay_dlq(b),
                [None, 5, "item-0404", "item-0001", ["item-0002"]],
            ),
            Call("replay_dlq(now=)", lambda w, b: w.q.replay_dlq("item-0002", now=b), TIME),
            Call("item(item_id=)", lambda w, b: w.q.item(b), [None, 5, "item-0404", ["item-0001"]]),
            Call("items(state=)", lambda w, b: w.q.items(b), ["waiting", 3, ["ready"]]),
        ],
    ),
    "jobs": (
        jobs_world,
        observe_jobs,
        [
            Call("JobStore(clock=)", lambda w, b: JobStore(clock=b), CLOCK),
            Call("JobStore(log=)", lambda w, b: JobStore(log=b), LOG),
            Call("submit(request_key=)", lambda w, b: w.store.submit(b, {}), TEXT),
            Call("submit(params=)", lambda w, b: w.store.submit("B-1003:refund", b), [*JSON, "x", [1]]),
            Call("submit(now=) of a new key", lambda w, b: w.store.submit("B-1003:refund", now=b), TIME),
            Call(
                "submit(now=) of a known key",
                lambda w, b: w.store.submit("A-1002:refund", {"case_id": "A-1002"}, now=b),
                TIME,
            ),
            Call(
                "submit, clock reads",
                lambda w, b: reading(b, w.clock, lambda: w.store.submit("B-1003:refund")),
                READING,
            ),
            Call(
                "claim(job_id=)",
                lambda w, b: w.store.claim(b, "B", lease_seconds=30),
                [None, 5, "job-0404", ["job-0002"]],
            ),
            Call("claim(worker_id=)", lambda w, b: w.store.claim("job-0002", b, lease_seconds=30), TEXT),
            Call("claim(lease_seconds=)", lambda w, b: w.store.claim("job-0002", "B", lease_seconds=b), SECONDS),
            Call("claim(now=)", lambda w, b: w.store.claim("job-0002", "B", lease_seconds=30, now=b), TIME),
            Call("confirm_step(step_id=)", lambda w, b: w.store.confirm_step("job-0001", b, token=1), TEXT),
            Call("confirm_step(token=)", lambda w, b: w.store.confirm_step("job-0001", "fetch", token=b), TOKEN),
            Call(
                "confirm_step(expected_version=)",
                lambda w, b: w.store.confirm_step("job-0001", "fetch", token=1, expected_version=b),
                ["2", 1.5, True],
            ),
            Call("confirm_step(now=)", lambda w, b: w.store.confirm_step("job-0001", "fetch", token=1, now=b), TIME),
            Call("complete(result=)", lambda w, b: w.store.complete("job-0001", token=1, result=b), JSON),
            Call("complete(token=)", lambda w, b: w.store.complete("job-0001", token=b), TOKEN),
            Call("complete(now=)", lambda w, b: w.store.complete("job-0001", token=1, now=b), TIME),
            Call("fail(error=)", lambda w, b: w.store.fail("job-0001", token=1, error=b), TEXT),
            Call("wait_for_approval(token=)", lambda w, b: w.store.wait_for_approval("job-0001", token=b), TOKEN),
            Call("approve(approval_ref=)", lambda w, b: w.store.approve("job-0001", b), TEXT),
            Call("cancel(reason=)", lambda w, b: w.store.cancel("job-0002", reason=b), TEXT),
            Call("cancel(now=)", lambda w, b: w.store.cancel("job-0002", now=b), TIME),
            Call("get(job_id=)", lambda w, b: w.store.get(b), [None, 5, "job-0404"]),
            Call("jobs(state=)", lambda w, b: w.store.jobs(b), ["bogus", 3, ["queued"]]),
        ],
    ),
    "checkpoints": (
        checkpoints_world,
        observe_checkpoints,
        [
            Call("CheckpointStore(clock=)", lambda w, b: CheckpointStore(clock=b), CLOCK),
            Call("CheckpointStore(log=)", lambda w, b: CheckpointStore(log=b), LOG),
            Call("CheckpointStore(on_save=)", lambda w, b: CheckpointStore(on_save=b), FUNCTION),
            Call("claim(job_id=)", lambda w, b: w.store.claim(b), TEXT),
            Call("claim(now=)", lambda w, b: w.store.claim("O-1001", now=b), TIME),
            Call("claim, clock reads", lambda w, b: reading(b, w.clock, lambda: w.store.claim("O-1001")), READING),
            Call("token(job_id=)", lambda w, b: w.store.token(b), TEXT),
            Call("verify(token=)", lambda w, b: w.store.verify("O-1001", b), TOKEN),
            Call("verify(now=)", lambda w, b: w.store.verify("O-1001", w.token, now=b), TIME),
            Call("load(job_id=)", lambda w, b: w.store.load(b), TEXT),
            Call("history(job_id=)", lambda w, b: w.store.history(b), TEXT),
            Call("save(checkpoint=)", lambda w, b: w.store.save("O-1001", b, token=w.token), [None, {}, "cp"]),
            Call("save(token=)", lambda w, b: w.store.save("O-1001", w.cp, token=b), TOKEN),
            Call(
                "save(now=)",
                lambda w, b: w.store.save("O-1001", w.cp.confirm("fetch", "source-v1"), token=w.token, now=b),
                TIME,
            ),
            Call(
                "save, clock reads",
                lambda w, b: reading(b, w.clock, lambda: w.store.save("O-1001", w.cp, token=w.token)),
                READING,
            ),
            Call("migrate(job_id=)", lambda w, b: w.store.migrate(b, "v2", lambda cp: cp), [*TEXT, "A-1002"]),
            Call("migrate(to_version=)", lambda w, b: w.store.migrate("O-1001", b, lambda cp: cp), TEXT),
            Call("migrate(fn=)", lambda w, b: w.store.migrate("O-1001", "v2", b), [None, *FUNCTION, lambda cp: None]),
            Call("migrate(now=)", lambda w, b: w.store.migrate("O-1001", "v2", lambda cp: cp, now=b), TIME),
            Call("Checkpoint(workflow_version=)", lambda w, b: Checkpoint(workflow_version=b), TEXT),
            Call(
                "Checkpoint.start(budgets=)",
                lambda w, b: Checkpoint.start("v1", budgets=b),
                ["x", 5, {"calls": -1}, {"calls": 1.5}, {"calls": True}, {1: 2}, {"": 1}],
            ),
            Call(
                "Checkpoint(completed=)",
                lambda w, b: Checkpoint(workflow_version="v1", completed=b),
                ["fetch", [""], [5], ["fetch", "fetch"]],
            ),
            Call("Checkpoint(token=)", lambda w, b: Checkpoint(workflow_version="v1", token=b), [-1, True, "1", 1.5]),
            Call("confirm(step=)", lambda w, b: w.cp.confirm(b, "artifact-1"), TEXT),
            Call("confirm(artifact=)", lambda w, b: w.cp.confirm("fetch", b), [None, "", 5]),
            Call("intend(op_id=)", lambda w, b: w.cp.intend(b, "publish"), [None, "", 5]),
            Call("receive(receipt=)", lambda w, b: w.cp.receive(b), [None, "msg-1", {"op_id": "x"}]),
            Call("spend(budget=)", lambda w, b: w.cp.spend(b), [None, "nope", ["tool_calls"]]),
            Call("spend(amount=)", lambda w, b: w.cp.spend("tool_calls", b), [0, -1, 1.5, True, "1", None, 3]),
            Call("approve(approval_ref=)", lambda w, b: w.cp.approve(b), [None, "", 5]),
            Call("Step(id=)", lambda w, b: Step(id=b), [None, "", "a b", 5]),
            Call("Step(effect=)", lambda w, b: Step(id="x", effect=b), ["yes", 1, None]),
            Call("Workflow(version=)", lambda w, b: Workflow(version=b, steps=[Step(id="x")]), [None, "", "v 1", 1]),
            Call(
                "Workflow(steps=)",
                lambda w, b: Workflow(version="v1", steps=b),
                [None, [], [1], [Step(id="x"), Step(id="x")], "x"],
            ),
            Call("Receipt(op_id=)", lambda w, b: Receipt(op_id=b, step="publish", message_id="msg-1"), [None, "", 5]),
            Call(
                "Receipt(via=)", lambda w, b: Receipt(op_id="o", step="publish", message_id="m", via=b), ["email", None]
            ),
            Call("CrashPoint(kind=)", lambda w, b: CrashPoint(kind=b), ["nope", None, 5]),
            Call("CrashPoint(nth=)", lambda w, b: CrashPoint(kind="before_ack", nth=b), [0, True, "1", 1.5]),
            Call(
                "CrashPoint.parse(text=)", lambda w, b: CrashPoint.parse(b), [None, 5, "", "???", "after_effect(a b)"]
            ),
        ],
    ),
    "env": (
        env_world,
        observe_env,
        [
            Call("Env(workflow=)", lambda w, b: Env(b), ["v1", 5]),
            Call("Env(adapter=)", lambda w, b: Env(adapter=b), [object(), "email"]),
            Call("Env(clock=)", lambda w, b: Env(clock=b), CLOCK),
            Call("Env(log=)", lambda w, b: Env(log=b), LOG),
            Call("Env(budgets=)", lambda w, b: Env(budgets=b), ["x", {"calls": -1}, {1: 2}]),
            Call("Env(faults=)", lambda w, b: Env(faults=b), ["boom", [5], ["boom"], 5]),
            Call("arm(point=)", lambda w, b: w.env.arm(b), [5, "nope", "after_effect(a b)"]),
            Call("make(step_id=)", lambda w, b: w.env.make("O-1001", b), [None, "nope", "publish"]),
            Call("send(step_id=)", lambda w, b: w.env.send("O-1001", b, "op-1"), [None, "nope", "fetch"]),
            Call("op_id(step_id=)", lambda w, b: w.env.op_id("O-1001", b), [None, "nope"]),
            Call("lookup(op_id=)", lambda w, b: w.env.lookup(b), [None, "", 5]),
            Call("claim(job_id=)", lambda w, b: w.env.claim(b), TEXT),
        ],
    ),
    "effects": (
        effects_world,
        observe_effects,
        [
            Call("Provider(channel=)", lambda w, b: Provider(b), TEXT),
            Call("Provider(ledger=)", lambda w, b: Provider(ledger=b), [object(), []]),
            Call("Provider(log=)", lambda w, b: Provider(log=b), LOG),
            Call("Provider(clock=)", lambda w, b: Provider(clock=b), CLOCK),
            Call("EmailAdapter(provider=)", lambda w, b: EmailAdapter(b), [object(), "provider"]),
            Call("EmailAdapter(clock=)", lambda w, b: EmailAdapter(clock=b), CLOCK),
            Call("inject(fault=)", lambda w, b: w.provider.inject(b), ["boom", None, 5]),
            Call("inject(times=)", lambda w, b: w.provider.inject("fail", b), WHOLE),
            Call("send(idem_key=)", lambda w, b: w.email.send(b, case_id="O-1001", to="j@example.com"), TEXT),
            Call("send(case_id=)", lambda w, b: w.email.send("k-2", case_id=b, to="j@example.com"), TEXT),
            Call("send(to=)", lambda w, b: w.email.send("k-2", case_id="O-1001", to=b), TEXT),
            Call("send(body=)", lambda w, b: w.email.send("k-2", case_id="O-1001", body=b), [None, 5, b"hi", ["hi"]]),
            Call("send(worker_id=)", lambda w, b: w.email.send("k-2", case_id="O-1001", worker_id=b), ["", " ", 5]),
            Call("send(now=)", lambda w, b: w.email.send("k-2", case_id="O-1001", now=b), TIME),
            Call(
                "send, clock reads",
                lambda w, b: reading(b, w.clock, lambda: w.email.send("k-2", case_id="O-1001")),
                READING,
            ),
            Call(
                "send, key reused",
                lambda w, b: w.email.send("O-1001:email:3", **b),
                [{"case_id": "O-2002", "to": "jordan@example.com"}, {"case_id": "O-1001", "to": "bob@example.com"}],
            ),
            Call("lookup(op_id=)", lambda w, b: w.email.lookup(b), TEXT),
            Call("ledger.record(contact=)", lambda w, b: w.email.ledger.record(b), [None, {"message_id": "m"}]),
        ],
    ),
    "outbox": (
        outbox_world,
        observe_outbox,
        [
            Call("OutboxStore(clock=)", lambda w, b: OutboxStore(clock=b), CLOCK),
            Call("OutboxStore(log=)", lambda w, b: OutboxStore(log=b), LOG),
            Call(
                "commit(state_change=)",
                lambda w, b: w.outbox.commit(b, {"topic": "t"}),
                [None, {}, {"id": ""}, {"id": "   "}, {"id": 5}, {"id": "O-1", "x": math.nan}, _loop, "O-1"],
            ),
            Call(
                "commit(message=)",
                lambda w, b: w.outbox.commit({"id": "O-1"}, b),
                [
                    None,
                    {},
                    {"topic": " "},
                    {"topic": "t", "payload": [1]},
                    {"topic": "t", "extra": 1},
                    {"topic": "t", "payload": {"x": math.inf}},
                ],
            ),
            Call("commit(now=)", lambda w, b: w.outbox.commit({"id": "O-1"}, {"topic": "t"}, now=b), TIME),
            Call(
                "commit, clock reads",
                lambda w, b: reading(b, w.clock, lambda: w.outbox.commit({"id": "O-1"}, {"topic": "t"})),
                READING,
            ),
            Call("mark_sent(message_id=)", lambda w, b: w.outbox.mark_sent(b), [None, "out-0404", 5]),
            Call("mark_sent(now=)", lambda w, b: w.outbox.mark_sent("out-0002", now=b), TIME),
            Call("row(row_id=)", lambda w, b: w.outbox.row(b) or _refused("row"), [None]),
            Call("Broker.publish(message=)", lambda w, b: w.broker.publish(b), [None, {"id": "out-0001"}]),
            Call("Dispatcher(outbox=)", lambda w, b: Dispatcher(b, w.broker), [None, "outbox"]),
            Call("Dispatcher(broker=)", lambda w, b: Dispatcher(w.outbox, b), [None, []]),
            Call("dispatch_once(now=)", lambda w, b: w.dispatcher.dispatch_once(now=b), TIME),
            Call("dispatch_once, clock reads", lambda w, b: reading(b, w.clock, w.dispatcher.dispatch_once), READING),
            Call(
                "dispatch_once(crash_after_publish=)",
                lambda w, b: w.dispatcher.dispatch_once(crash_after_publish=b),
                ["yes", 1, None],
            ),
            Call("IdempotentConsumer(effect=)", lambda w, b: IdempotentConsumer(b), FUNCTION),
            Call("NaiveConsumer(clock=)", lambda w, b: NaiveConsumer(clock=b), CLOCK),
            Call("IdempotentConsumer(log=)", lambda w, b: IdempotentConsumer(log=b), LOG),
            Call("consume(broker=)", lambda w, b: w.consumer.consume(b), [None, [], "broker"]),
            Call(
                "consume, clock reads", lambda w, b: reading(b, w.clock, lambda: w.consumer.consume(w.broker)), READING
            ),
            Call("handle(delivery=)", lambda w, b: w.consumer.handle(b), [None, {"message_id": "out-0001"}]),
        ],
    ),
    "fencing": (
        fencing_world,
        observe_fencing,
        [
            Call("NaiveResultStore(clock=)", lambda w, b: NaiveResultStore(clock=b), CLOCK),
            Call("NaiveResultStore(log=)", lambda w, b: NaiveResultStore(log=b), LOG),
            Call("claim(job_id=)", lambda w, b: w.store.claim(b, "B"), TEXT),
            Call("claim(worker_id=)", lambda w, b: w.store.claim("job-1", b), TEXT),
            Call("claim(now=)", lambda w, b: w.store.claim("job-1", "B", now=b), TIME),
            Call("claim, clock reads", lambda w, b: reading(b, w.clock, lambda: w.store.claim("job-1", "B")), READING),
            Call("complete(job_id=)", lambda w, b: w.store.complete(b, {}, token=1), TEXT),
            Call("complete(token=)", lambda w, b: w.store.complete("job-1", {}, token=b), ["1", True, None, 1.5]),
            Call("complete(result=)", lambda w, b: w.store.complete("job-1", b, token=1), JSON),
            Call("complete(worker_id=)", lambda w, b: w.store.complete("job-1", {}, token=1, worker_id=b), ["", 5]),
            Call("complete(now=)", lambda w, b: w.store.complete("job-1", {}, token=1, now=b), TIME),
            Call("current_token(job_id=)", lambda w, b: w.store.current_token(b), TEXT),
            Call("result(job_id=)", lambda w, b: w.store.result(b), TEXT),
            Call("written_by(job_id=)", lambda w, b: w.store.written_by(b), TEXT),
        ],
    ),
    "log": (
        log_world,
        observe_log,
        [
            Call("append(kind=)", lambda w, b: w.log.append(b, 1.0), ["nope", None, 5]),
            Call(
                "append(time=)",
                lambda w, b: w.log.append(EventKind.STEP_RAN, b),
                [math.nan, math.inf, "5", None, True, 1e20],
            ),
            Call(
                "append(info=)",
                lambda w, b: w.log.append(EventKind.STEP_RAN, 1.0, **b),
                [{"x": {1, 2}}, {"x": [object()]}, {"x": _loop}, {"x": [math.nan]}],
            ),
            Call("show(limit=)", lambda w, b: w.log.show(b), [-1, 1.5, "3", True, None]),
            Call("where(kind=)", lambda w, b: w.log.where(b), ["nope", 5, ("leased", "nope")]),
            Call(
                "EventLog.from_dicts(rows=)",
                lambda w, b: EventLog.from_dicts(b),
                [
                    None,
                    "x",
                    [None],
                    [{}],
                    [{"kind": "nope", "time": 1}],
                    [{"kind": "leased", "time": "x"}],
                    [{"kind": "leased", "time": math.inf}],
                    [{"kind": "leased", "time": 1, "info": [1]}],
                    [{"kind": "leased", "time": 1, "token": "3"}],
                    [{"kind": "leased", "time": 1, "item_id": 5}],
                ],
            ),
        ],
    ),
    "clock": (
        clock_world,
        observe_clock,
        [
            Call("FakeClock(start=)", lambda w, b: FakeClock(b), [math.nan, math.inf, "0", True, 1e20, None]),
            Call(
                "advance(seconds=)", lambda w, b: w.clock.advance(b), [math.nan, math.inf, -1, "1", True, 1e300, None]
            ),
            Call("set(when=)", lambda w, b: w.clock.set(b), [math.nan, math.inf, "5", None, 1e20, 1]),
        ],
    ),
    "gateway": (
        gateway_world,
        observe_gateway,
        [
            Call("Gateway(latency=)", lambda w, b: Gateway(b), [5, "fast"]),
            Call("Gateway(window=)", lambda w, b: Gateway(window=b), WHOLE),
            Call("Gateway(capacity=)", lambda w, b: Gateway(capacity=b), [0, -1, 1.5, True, "3"]),
            Call("Gateway(max_age=)", lambda w, b: Gateway(max_age=b), [0, -1, math.nan, "3"]),
            Call("Gateway(log=)", lambda w, b: Gateway(log=b), LOG),
            Call("start_call(rng=)", lambda w, b: w.gateway.start_call(b), [None, 5, "seed"]),
            Call(
                "finish_call(seconds=)",
                lambda w, b: w.gateway.finish_call(b, now=200.0),
                [-1, math.nan, "3", None, True],
            ),
            Call("finish_call(now=)", lambda w, b: w.gateway.finish_call(3.0, now=b), [*TIME, None]),
            Call("record(latency=)", lambda w, b: w.gateway.record(b, 200.0), [-1, math.nan, math.inf, "3", None]),
            Call("record(now=)", lambda w, b: w.gateway.record(3.0, b), [*TIME, None]),
            Call("p95(now=)", lambda w, b: w.gateway.p95(b), TIME),
            Call("spike(factor=)", lambda w, b: w.gateway.spike(b), [0, -1, math.nan, math.inf, "2", None, True]),
            Call("end_spike(factor=)", lambda w, b: w.gateway.end_spike(b), [3, "2", None, math.nan, [2]]),
        ],
    ),
    "pure": (
        nothing,
        observe_nothing,
        [
            Call(
                "LatencyModel(p50=)",
                lambda w, b: LatencyModel(p50=b),
                [0, -1, math.nan, math.inf, "8", None, True, 100],
            ),
            Call("LatencyModel(max=)", lambda w, b: LatencyModel(max=b), [0, math.inf, "120", 50]),
            Call("LatencyModel.quantile(q=)", lambda w, b: LatencyModel().quantile(b), FRACTION),
            Call(
                "LatencyModel.exceed_probability(seconds=)",
                lambda w, b: LatencyModel().exceed_probability(b),
                ["x", None, math.nan, True],
            ),
            Call(
                "LatencyModel.scaled(factor=)",
                lambda w, b: LatencyModel().scaled(b),
                [0, -1, "2", math.nan, math.inf, True, None],
            ),
            Call("LatencyModel.sample(rng=)", lambda w, b: LatencyModel().sample(b), [None, 5, "seed"]),
            Call("Decision(max_priority=)", lambda w, b: Decision(max_priority=b), ["1", 1.5, True]),
            Call("Decision(wait_seconds=)", lambda w, b: Decision(wait_seconds=b), [-1, math.nan, math.inf, "1", None]),
            Call("Decision(reason=)", lambda w, b: Decision(reason=b), [None, 5]),
            Call("acquire(max_priority=)", lambda w, b: acquire(b), ["1", 1.5, True]),
            Call("wait(seconds=)", lambda w, b: wait(b), [0, -1, math.nan, math.inf, "1", None, True]),
            Call("BackpressurePolicy(p95_budget=)", lambda w, b: BackpressurePolicy(p95_budget=b), SECONDS),
            Call(
                "BackpressurePolicy(soft_depth=)",
                lambda w, b: BackpressurePolicy(soft_depth=b),
                [-1, 1.5, True, "0", None],
            ),
            Call("BackpressurePolicy(max_in_flight=)", lambda w, b: BackpressurePolicy(max_in_flight=b), [0, 1.5, "3"]),
            Call(
                "BackpressurePolicy.decide(...)",
                lambda w, b: BackpressurePolicy().decide(**b),
                [
                    {"gateway_p95": "slow", "depth": 3, "in_flight": 0, "now": 0.0},
                    {"gateway_p95": 1.0, "depth": None, "in_flight": 0, "now": 0.0},
                    {"gateway_p95": math.nan, "depth": 3, "in_flight": 0, "now": 0.0},
                ],
            ),
            Call("as_policy(policy=)", lambda w, b: as_policy(b), [None, 5, "shed"]),
            Call(
                "as_policy(...) returning junk",
                lambda w, b: as_policy(lambda s: b)(Signals(gateway_p95=1.0, depth=1, in_flight=0, now=0.0)),
                [None, "acquire", 0],
            ),
            Call(
                "Signals(...)",
                lambda w, b: Signals(**b),
                [
                    {"gateway_p95": "x", "depth": 1, "in_flight": 0, "now": 0.0},
                    {"gateway_p95": 1.0, "depth": -1, "in_flight": 0, "now": 0.0},
                    {"gateway_p95": 1.0, "depth": 1, "in_flight": 0, "now": math.nan},
                ],
            ),
            Call("percentile(sorted_values=)", lambda w, b: percentile(b, 95), [[], None, "abc", [3, "x"], 5]),
            Call("percentile(q=)", lambda w, b: percentile([1.0, 2.0], b), [0, 101, "95", True, math.nan, None]),
            Call("Summary.of(values=)", lambda w, b: Summary.of(b), [None, 5, ["a"], [math.nan], [1, None]]),
            Call("queue_metrics(log=)", lambda w, b: queue_metrics(b), [None, [], "log"]),
            Call("queue_metrics(now=)", lambda w, b: queue_metrics(w.log, now=b), TIME),
            Call("series(bucket_seconds=)", lambda w, b: series(w.log, b), SECONDS),
            Call("series(now=)", lambda w, b: series(w.log, 10, now=b), TIME),
            Call("explore(run=)", lambda w, b: explore(b), [None, 5]),
            Call("explore(workflow=)", lambda w, b: explore(ReceiptRunner(), b), ["v1", 5]),
            Call("explore(invariants=)", lambda w, b: explore(ReceiptRunner(), invariants=b), [[], [5], 5, None]),
            Call("explore(faults=)", lambda w, b: explore(ReceiptRunner(), faults=b), [["boom"], 5, [None]]),
            Call("explore(job_id=)", lambda w, b: explore(ReceiptRunner(), job_id=b), TEXT),
            Call("ExplorationReport.result(point=)", lambda w, b: w.report.result(b), ["nope", 5, "after_ack#9"]),
            Call("check(log=)", lambda w, b: check(b), [None, [], "log"]),
            Call(
                "sim.run(items=)", lambda w, b: simulate("poison", items=b), [0, -1, 1_000_001, 10**18, True, "5", 2.5]
            ),
            Call("sim.run(workers=)", lambda w, b: simulate("poison", workers=b), [0, 1_001, 10**9, True, "2"]),
            Call("sim.run(scenario=)", lambda w, b: simulate(b), ["no_such_scenario", None, 5]),
        ],
    ),
}


def _refused(what: str) -> None:
    """For reads that answer None for an unknown id: fail the row if nothing was refused."""
    raise AssertionError(f"{what} accepted the bad value silently")


def _shown(value: Any) -> str:
    text = repr(value)
    return f"<{type(value).__name__}>" if " at 0x" in text else text[:40]  # test ids without addresses


ROWS = [
    pytest.param(world, call, bad, id=f"{call.label}-{_shown(bad)}")
    for world, (_, _, calls) in WORLDS.items()
    for call in calls
    for bad in call.bad
]


@pytest.mark.parametrize("world, call, bad", ROWS)
def test_bad_input_is_a_kit_error_and_changes_nothing(world, call, bad):
    build, observe, _ = WORLDS[world]
    w = build()
    before = observe(w)
    with pytest.raises(ShopOpsError) as err:
        call.call(w, bad)
    assert str(err.value).strip(), "the error says nothing"
    assert observe(w) == before, f"{call.label} refused {bad!r} but changed state first"


def test_every_refusal_names_its_field_and_its_fix_in_a_sentence():
    """BadArgumentErrors read "<field> <problem>. Fix: <what to do>." with a verb after Fix."""
    w = queue_world()
    with pytest.raises(ShopOpsError) as err:
        w.q.acquire("  ")
    assert str(err.value) == "worker_id is '  ', not a non-empty string. Fix: pass the worker's name, e.g. 'W1'."


def test_a_rng_that_is_a_random_random_is_what_the_latency_model_wants():
    """The valid neighbour of the rng rows above, so those rows test the refusal, not the call."""
    assert 0 < LatencyModel().sample(random.Random(3)) <= 120


# --------------------------------------------------------------------------- what no store can hold, on every backend

HUGE = 10**5000  # more digits than Python will print


def store_world(backend) -> SimpleNamespace:
    """Every store-backed component on one store of `backend`, with a little history."""
    store = backend.open()
    clock = FakeClock(10)
    w = SimpleNamespace(
        store=store,
        clock=clock,
        q=Queue(store=store, clock=clock),
        jobs=JobStore(store=store, clock=clock),
        checkpoints=CheckpointStore(store=store, clock=clock),
        outbox=OutboxStore(store=store, clock=clock),
        email=EmailAdapter(store=store, clock=clock),
        consumer=IdempotentConsumer(store=store, clock=clock),
    )
    w.q.enqueue(case_id="O-1001", payload={"n": 1})
    w.jobs.submit("O-1001:refund", {"case_id": "O-1001"})
    w.checkpoints.claim("O-1001")
    w.outbox.commit({"id": "O-1001", "status": "refunded"}, {"topic": "refund.issued"})
    w.email.send("O-1001:email:1", case_id="O-1001")
    return w


def observe_store(w: SimpleNamespace) -> tuple:
    return (
        w.q.items(),
        w.q.counts(),
        w.jobs.jobs(),
        w.checkpoints.jobs(),
        w.outbox.rows(),
        w.outbox.messages(),
        w.email.ledger.contacts(),
        w.consumer.processed,
        w.store.log.to_dicts(),
    )


NUL, LONE = "O-10\x0001", "O-10\ud80001"  # a NUL character; half of a surrogate pair
STORE_ROWS: dict[str, Callable[[SimpleNamespace], Any]] = {
    "enqueue(priority=2**31)": lambda w: w.q.enqueue(case_id="O-1", priority=2**31),
    "enqueue(priority=-2**31-1)": lambda w: w.q.enqueue(case_id="O-1", priority=-(2**31) - 1),
    "enqueue(priority=2**63)": lambda w: w.q.enqueue(case_id="O-1", priority=2**63),
    "enqueue(priority=10**5000)": lambda w: w.q.enqueue(case_id="O-1", priority=HUGE),
    "acquire(max_priority=2**63)": lambda w: w.q.acquire("W1", max_priority=2**63),
    "enqueue(case_id= NUL)": lambda w: w.q.enqueue(case_id=NUL),
    "enqueue(case_id= lone surrogate)": lambda w: w.q.enqueue(case_id=LONE),
    "enqueue(tenant_id= NUL)": lambda w: w.q.enqueue(case_id="O-1", tenant_id=NUL),
    "enqueue(kind= lone surrogate)": lambda w: w.q.enqueue(case_id="O-1", kind=LONE),
    "enqueue(payload= 10**5000)": lambda w: w.q.enqueue(case_id="O-1", payload={"n": HUGE}),
    "enqueue(payload= nested 10**5000)": lambda w: w.q.enqueue(case_id="O-1", payload={"n": [HUGE]}),
    "acquire(worker_id= NUL)": lambda w: w.q.acquire(NUL),
    "acquire(worker_id= lone surrogate)": lambda w: w.q.acquire(LONE),
    "item(item_id= 30 digits)": lambda w: w.q.item("item-" + "9" * 30),
    "submit(request_key= NUL)": lambda w: w.jobs.submit(NUL),
    "submit(params= 10**5000)": lambda w: w.jobs.submit("B-1003:refund", {"n": HUGE}),
    "get(job_id= lone surrogate)": lambda w: w.jobs.get(LONE),
    "claim(worker_id= NUL)": lambda w: w.jobs.claim("job-0001", NUL, lease_seconds=30),
    "checkpoints.claim(job_id= NUL)": lambda w: w.checkpoints.claim(NUL),
    "outbox.commit(id= lone surrogate)": lambda w: w.outbox.commit({"id": LONE}, {"topic": "t"}),
    "outbox.commit(payload= 10**5000)": lambda w: w.outbox.commit(
        {"id": "O-1"}, {"topic": "t", "payload": {"n": HUGE}}
    ),
    "email.send(idem_key= NUL)": lambda w: w.email.send(NUL, case_id="O-1001"),
    "email.send(to= lone surrogate)": lambda w: w.email.send("k", case_id="O-1001", to=LONE),
    "consumer.handle(message_id= NUL)": lambda w: w.consumer.handle(
        Delivery(seq=1, message_id=NUL, topic="t", payload={})
    ),
    "log.append(info nan)": lambda w: w.store.log.append(EventKind.ACKED, 1.0, x=math.nan),
    "log.append(info 10**5000)": lambda w: w.store.log.append(EventKind.ACKED, 1.0, x=HUGE),
}


@pytest.mark.parametrize("row", list(STORE_ROWS))
def test_a_value_no_store_can_hold_is_refused_alike_on_every_backend(backend, row):
    w = store_world(backend)
    before = observe_store(w)
    with pytest.raises(ShopOpsError) as err:
        STORE_ROWS[row](w)
    assert str(err.value).strip()
    assert observe_store(w) == before, f"{row} was refused but changed the store first"
    assert w.q.enqueue(case_id="O-1002") == "item-0002"  # and the store still works (the connection too)


def test_an_error_text_no_store_can_hold_is_kept_escaped_on_every_backend(backend):
    w = store_world(backend)
    w.q.nack(w.q.acquire("W1"), error=RuntimeError("bad \x00 byte and \ud800 half"))
    assert w.q.item("item-0001").last_error == "RuntimeError: bad \\x00 byte and \\ud800 half"


@pytest.mark.parametrize("info", [{"x": math.nan}, {"x": math.inf}, {"x": HUGE}, {"x": [math.nan]}])
def test_an_event_log_refuses_what_json_cannot_carry(info):
    with pytest.raises(ShopOpsError, match="info"):
        EventLog().append(EventKind.ACKED, 1.0, **info)
    with pytest.raises(ShopOpsError, match=r"rows\[0\]"):
        EventLog.from_dicts([{"kind": "acked", "time": 1.0, "info": info}])


def test_a_whole_number_too_long_to_print_is_still_a_kit_error():
    with pytest.raises(ShopOpsError, match="too large to print"):
        InMemoryQueue(max_attempts=-HUGE)


# --------------------------------------------------------------------------- SQLite failing under a run


def sqlite_queue(tmp_path: Path) -> Queue:
    q = Queue(store=f"sqlite:///{tmp_path / 'shopops.db'}", clock=FakeClock())
    q.enqueue(case_id="O-1001")
    return q


def test_a_read_only_database_is_a_kit_error_naming_the_file_and_the_fix(tmp_path):
    q = sqlite_queue(tmp_path)
    q.store._connection.execute("PRAGMA query_only = 1")  # as a read-only file refuses every write
    with pytest.raises(ShopOpsError, match=r"shopops\.db failed: the file or its folder is read-only.*chmod"):
        q.enqueue(case_id="O-1002")
    q.store._connection.execute("PRAGMA query_only = 0")
    assert q.enqueue(case_id="O-1002") == "item-0002"  # nothing was left half-open


def test_a_full_disk_is_a_kit_error_naming_the_file_and_the_fix(tmp_path):
    q = sqlite_queue(tmp_path)
    pages = q.store._connection.execute("PRAGMA page_count").fetchone()[0]
    q.store._connection.execute(f"PRAGMA max_page_count = {pages}")  # as a full disk refuses to grow the file
    with pytest.raises(StoreFullError, match=r"shopops\.db is full: the disk .* has no room.*free some space"):
        for n in range(500):
            q.enqueue(case_id=f"O-{n}", payload={"text": "x" * 500})
    q.store._connection.execute(f"PRAGMA max_page_count = {pages * 1000}")
    assert q.counts()[ItemState.READY] >= 1 and q.enqueue(case_id="O-9999")


def test_a_corrupt_page_is_a_kit_error_naming_the_file_and_the_fix(tmp_path):
    q = sqlite_queue(tmp_path)
    for n in range(300):
        q.enqueue(case_id=f"O-{n}", payload={"text": "x" * 200})
    root, page = (
        q.store._connection.execute("SELECT rootpage FROM sqlite_master WHERE name = 'items'").fetchone()[0],
        q.store._connection.execute("PRAGMA page_size").fetchone()[0],
    )
    q.store.close()  # the last connection folds the WAL into the file
    path = tmp_path / "shopops.db"
    data = bytearray(path.read_bytes())
    data[(root - 1) * page : root * page] = b"\xa5" * page  # the items table's first page, overwritten
    path.write_bytes(bytes(data))
    q = Queue(store=f"sqlite:///{path}")  # the schema and the meta table are intact: it opens
    with pytest.raises(StoreCorruptError, match=r"shopops\.db is damaged: SQLite read a damaged page.*restore it from"):
        q.counts()
    with pytest.raises(StoreCorruptError, match=r"shopops\.db is damaged"):
        q.enqueue(case_id="O-1002")


# --------------------------------------------------------------------------- the command line

CLI_ROWS = [
    ["simulate", "no_such_scenario"],
    ["simulate", "poison", "--items", "0"],
    ["simulate", "poison", "--items", "1000001"],
    ["simulate", "poison", "--items", str(10**18)],
    ["simulate", "poison", "--workers", "0"],
    ["simulate", "poison", "--workers", "1001"],
    ["simulate", "poison", "--items", "many"],
    ["simulate", "poison", "--seed", "x"],
    ["simulate", "poison", "--adapter", "smtp"],
    ["simulate"],
    ["build-notebooks", "--check", "--lab", "99"],
    ["build-notebooks", "--lab", "1"],
    ["build-notebooks", "--solutions", "no/such/folder"],
    ["build-notebooks", "--check", "--execute"],
    ["no-such-command"],
]


@pytest.mark.parametrize("argv", CLI_ROWS, ids=lambda argv: " ".join(argv) or "(nothing)")
def test_bad_command_lines_exit_2_with_one_line_and_no_output(argv, capsys):
    status = cli.main(argv)
    out, err = capsys.readouterr()
    assert status == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(("error:", "shopops-lab")), err


# --------------------------------------------------------------------------- where the output goes

ROOT = Path(__file__).resolve().parents[1]


def kit(*argv: str, stdout: Any = subprocess.PIPE, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "shopops_lab", *argv],
        cwd=ROOT,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_output_to_a_closed_pipe_ends_quietly():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        done = kit("simulate", "poison", stdout=write_end)
    finally:
        os.close(write_end)
    assert done.returncode == 1
    assert done.stderr == ""  # no traceback, no "Exception ignored"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux) to fill a disk on demand")
def test_output_to_a_full_disk_is_one_line_of_error():
    with open("/dev/full", "w") as full:
        done = kit("simulate", "poison", stdout=full)
    assert done.returncode == 1
    assert done.stderr == "error: cannot write the output: No space left on device\n"


def test_doctor_prints_its_fixes_on_a_terminal_that_cannot_show_an_em_dash():
    done = kit("doctor", env={"PATH": "/nonexistent", "PYTHONIOENCODING": "ascii"})  # no `dot` on this PATH
    assert done.returncode == 1 and done.stderr == ""
    assert "MISSING dot -- run: " in done.stdout
    assert done.stdout.rstrip().endswith("then `shopops-lab doctor` again.")
