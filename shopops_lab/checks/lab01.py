"""Lab 01: a handler that survives redelivery without emailing the customer twice."""
from __future__ import annotations

import random

from shopops_lab.checks.base import Exercise, Wrong, call_answer
from shopops_lab.clock import FakeClock
from shopops_lab.effects import EmailAdapter
from shopops_lab.events import EventLog
from shopops_lab.worker.queue import InMemoryQueue

SEEDS = (1, 2, 3, 5, 8)


class _ScenarioAdapter(EmailAdapter):
    """The real idempotent adapter, crediting each send to the worker running the handler."""

    worker_id: str | None = None

    def send(self, idem_key, *, case_id, to="customer", body="", worker_id=None, now=None):
        return super().send(idem_key, case_id=case_id, to=to, body=body,
                            worker_id=worker_id or self.worker_id, now=now)


def forced_expiry(handler, seed: int) -> tuple[InMemoryQueue, EmailAdapter, list[str]]:
    """Several cases; each first delivery runs the handler and then its worker dies before
    the ack, or not, as the seed decides. Returns the queue, the adapter and the cases that crashed."""
    rng = random.Random(seed)
    clock, log = FakeClock(), EventLog()
    queue = InMemoryQueue(lease_seconds=30, max_attempts=5, clock=clock, log=log)
    adapter = _ScenarioAdapter(log=log, clock=clock)
    cases = [f"O-{1001 + n}" for n in range(rng.randint(3, 6))]
    for n, case in enumerate(cases):
        queue.enqueue(case_id=case, tenant_id="store_northline", kind="contact_send",
                      payload={"idem_key": f"{case}:email:3", "to": f"customer-{n + 1}@example.com",
                               "template": "delay_apology"})
    crashed = [case for case in cases if rng.random() < 0.7] or cases[:1]
    workers = iter(f"W{n}" for n in range(1, 100))
    for _ in cases:
        lease = queue.acquire(next(workers))
        adapter.worker_id = lease.worker_id
        call_answer(handler, lease, adapter)
        if lease.case_id not in crashed:
            queue.ack(lease)
    clock.advance(31)
    queue._expire_leases()
    while (lease := queue.acquire(next(workers))) is not None:
        adapter.worker_id = lease.worker_id
        call_answer(handler, lease, adapter)
        queue.ack(lease)
    return queue, adapter, crashed


def _run(handler) -> str:
    for seed in SEEDS:
        queue, adapter, crashed = forced_expiry(handler, seed)
        address = {item.case_id: item.payload["to"] for item in queue.items()}
        for case in sorted(address):
            contacts = adapter.ledger.contacts(case)
            if not contacts:
                raise Wrong(f"case {case} never got its email (seed {seed}): the handler must send through the adapter.")
            if len(contacts) > 1:
                first, second = contacts[0], contacts[1]
                raise Wrong(
                    f"case {case} was emailed {len(contacts)} times (seed {seed}): {first.message_id} at "
                    f"t={first.time:g} by {first.worker_id} and {second.message_id} at t={second.time:g} by {second.worker_id}. "
                    "Both deliveries of the same work must look like one send to the provider.",
                    [f"{c.message_id} to {c.to}, key {c.idem_key}" for c in contacts])
            if contacts[0].to != address[case]:
                raise Wrong(f"case {case}'s email went to {contacts[0].to}, not to the address in its payload.")
        if any(len(adapter.ledger.contacts(c)) != 1 for c in crashed):
            raise Wrong(f"a crashed case did not end with exactly one email (seed {seed}).")
    return (f"in {len(SEEDS)} seeded runs every crashed case was delivered twice and every customer got exactly "
            "one email.")


exercise = Exercise(
    id="01.1", title="a handler that is safe to run twice", run=_run,
    hints=("A redelivery runs your handler again with the same item. What stays the same between the two "
           "deliveries, and what changes (worker, token, attempt)?",
           "The adapter's send(idem_key, ...) returns the first message id when it sees a key again. The "
           "payload already carries a key made for this email.",
           "Shape: adapter.send(<the payload's idem_key>, case_id=<the lease's case>, to=<the payload's address>, "
           "body=...). Do not build the key from the token or the attempt."),
)
