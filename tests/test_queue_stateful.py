"""InMemoryQueue against a reference model, driven by Hypothesis through random runs of
enqueue / acquire / ack / nack / heartbeat / process_one / clock jumps / expiry / replay.

The model is the rules written the slow, obvious way (lists and scans); after every step
the queue and the model must agree on every item, and the queue's invariants must hold:
one live lease per case, every item in exactly one state, tokens only growing, stale
tokens refused, attempts within bounds.

Part of the store contract: the same machine runs on every backend (memory, SQLite,
PostgreSQL), each example on a new, empty database.

Profiles: HYPOTHESIS_PROFILE=ci (default: 500 runs on memory, 200 on each database,
derandomized so CI is repeatable) or HYPOTHESIS_PROFILE=dev (quick). The profile applies to this machine only, so
other Hypothesis tests in the session keep their own settings.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from store_backends import Backend

from shopops_lab.clock import FakeClock
from shopops_lab.errors import LeaseExpiredError, LeaseSettledError, NotInDLQError, StaleTokenError
from shopops_lab.events import EventKind
from shopops_lab.states import ItemState
from shopops_lab.store import Store
from shopops_lab.worker.queue import InMemoryQueue, Lease, Outcome, Priority, Queue

settings.register_profile(
    "ci", max_examples=500, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")

READY, LEASED, DONE, DEAD = ItemState.READY, ItemState.LEASED, ItemState.DONE, ItemState.DEAD
LEASE_SECONDS = 10
MAX_ATTEMPTS = 3
CASES = ("O-1001", "A-1002", "B-1003")
WORKERS = ("W1", "W2", "W7")


@dataclass
class ModelItem:
    id: str
    seq: int
    case_id: str
    priority: int
    state: ItemState = READY
    attempts: int = 0
    token: int = 0
    worker_id: str | None = None
    expires_at: float | None = None
    lease_seconds: float = LEASE_SECONDS
    ended_by: str | None = None
    replays: int = 0
    tokens: list[int] = field(default_factory=list)


class Model:
    """The queue's rules, spelled out plainly."""

    def __init__(self) -> None:
        self.items: dict[str, ModelItem] = {}
        self.ready: dict[str, list[str]] = {case: [] for case in CASES}  # per case, FIFO
        self.holder: dict[str, str] = {}  # case -> leased item id
        self.dlq: list[str] = []  # oldest death first
        self.stale_rejections = 0

    def enqueue(self, case_id: str, priority: int) -> str:
        seq = len(self.items) + 1
        item = ModelItem(id=f"item-{seq:04d}", seq=seq, case_id=case_id, priority=priority)
        self.items[item.id] = item
        self.ready[case_id].append(item.id)
        return item.id

    def sweep(self, now: float) -> list[str]:
        due = sorted(
            (i for i in self.items.values() if i.state is LEASED and i.expires_at <= now),
            key=lambda i: (i.expires_at, i.seq),
        )
        for item in due:
            item.ended_by = "expired"
            self._end_attempt(item)
        return [i.id for i in due]

    def acquire(
        self, worker_id: str, now: float, lease_seconds: float | None, max_priority: int | None
    ) -> ModelItem | None:
        self.sweep(now)
        heads = [self.items[ids[0]] for case, ids in self.ready.items() if ids and case not in self.holder]
        if not heads:
            return None
        best = min(heads, key=lambda i: (i.priority, i.seq))
        if max_priority is not None and best.priority > max_priority:
            return None
        self.ready[best.case_id].pop(0)
        self.holder[best.case_id] = best.id
        best.state, best.worker_id, best.ended_by = LEASED, worker_id, None
        best.attempts += 1
        best.token += 1
        best.tokens.append(best.token)
        best.lease_seconds = LEASE_SECONDS if lease_seconds is None else lease_seconds
        best.expires_at = now + best.lease_seconds
        return best

    def verdict(self, lease: Lease, now: float) -> str:
        """What a write under `lease` meets at `now`: live, stale, expired or settled."""
        self.sweep(now)
        item = self.items[lease.item_id]
        if lease.token < item.token:
            self.stale_rejections += 1
            return "stale"
        if item.state is not LEASED:
            return "expired" if item.ended_by == "expired" else "settled"
        return "live"

    def ack(self, item: ModelItem) -> None:
        item.state, item.ended_by = DONE, "acked"
        del self.holder[item.case_id]

    def nack(self, item: ModelItem) -> ItemState:
        item.ended_by = "nacked"
        return self._end_attempt(item)

    def replay(self, item: ModelItem) -> None:
        self.dlq.remove(item.id)
        item.state, item.attempts = READY, 0
        item.replays += 1
        self.ready[item.case_id].append(item.id)

    def _end_attempt(self, item: ModelItem) -> ItemState:
        del self.holder[item.case_id]
        if item.attempts >= MAX_ATTEMPTS:
            item.state = DEAD
            self.dlq.append(item.id)
        else:
            item.state = READY
            self.ready[item.case_id].insert(0, item.id)
        return item.state


lease_index = st.integers(min_value=0, max_value=10_000)


class QueueMachine(RuleBasedStateMachine):
    backend = "memory"
    _backends: dict[str, Backend] = {}  # one per backend for the whole run
    _stores: dict[str, tuple[str, Store]] = {}  # its database's URL and the store open on it

    def __init__(self) -> None:
        super().__init__()
        self.queue = self.new_queue()
        self.model = Model()
        self.now = 0.0
        self.leases: list[Lease] = []  # every lease ever granted: old ones become stale or settled

    def new_queue(self) -> Queue:
        if self.backend == "memory":
            return InMemoryQueue(lease_seconds=LEASE_SECONDS, max_attempts=MAX_ATTEMPTS, clock=FakeClock())
        if self.backend not in self._stores:  # one database per backend, emptied for each example
            backend = self._backends[self.backend] = Backend(self.backend, Path(tempfile.mkdtemp(prefix="stateful-")))
            url = backend.url()
            self._stores[self.backend] = (url, backend.open(url))
        url, store = self._stores[self.backend]
        self._backends[self.backend].empty(url)
        store.log.forget(0)  # history was rewritten under it (only tests ever do that)
        return Queue(lease_seconds=LEASE_SECONDS, max_attempts=MAX_ATTEMPTS, clock=FakeClock(), store=store)

    def pick(self, index: int) -> Lease:
        return self.leases[index % len(self.leases)]

    # ------------------------------------------------------------------ rules
    @rule(case_id=st.sampled_from(CASES), priority=st.sampled_from(list(Priority)))
    def enqueue(self, case_id, priority):
        got = self.queue.enqueue(case_id=case_id, priority=priority, now=self.now)
        assert got == self.model.enqueue(case_id, int(priority))

    @rule(
        worker_id=st.sampled_from(WORKERS),
        lease_seconds=st.one_of(st.none(), st.sampled_from([3, 10, 25])),
        max_priority=st.one_of(st.none(), st.sampled_from(list(Priority))),
    )
    def acquire(self, worker_id, lease_seconds, max_priority):
        lease = self.queue.acquire(worker_id, now=self.now, lease_seconds=lease_seconds, max_priority=max_priority)
        expected = self.model.acquire(worker_id, self.now, lease_seconds, max_priority)
        if expected is None:
            assert lease is None
            return
        assert lease is not None
        assert (lease.item_id, lease.case_id, lease.worker_id) == (expected.id, expected.case_id, worker_id)
        assert (lease.token, lease.attempt, lease.expires_at) == (
            expected.token,
            expected.attempts,
            expected.expires_at,
        )
        self.leases.append(lease)

    @precondition(lambda self: self.leases)
    @rule(index=lease_index)
    def ack(self, index):
        lease = self.pick(index)
        verdict = self.model.verdict(lease, self.now)
        if verdict == "live":
            self.queue.ack(lease, now=self.now)
            self.model.ack(self.model.items[lease.item_id])
        else:
            self._refused(verdict, lambda: self.queue.ack(lease, now=self.now))

    @precondition(lambda self: self.leases)
    @rule(index=lease_index)
    def nack(self, index):
        lease = self.pick(index)
        verdict = self.model.verdict(lease, self.now)
        if verdict == "live":
            state = self.queue.nack(lease, "handler failed", now=self.now)
            assert state is self.model.nack(self.model.items[lease.item_id])
        else:
            self._refused(verdict, lambda: self.queue.nack(lease, "late", now=self.now))

    @precondition(lambda self: self.leases)
    @rule(index=lease_index)
    def heartbeat(self, index):
        lease = self.pick(index)
        verdict = self.model.verdict(lease, self.now)
        assert self.queue.heartbeat(lease, now=self.now) is (verdict == "live")
        if verdict == "live":
            item = self.model.items[lease.item_id]
            item.expires_at = self.now + item.lease_seconds
            event("extended a live lease")

    @rule(worker_id=st.sampled_from(WORKERS), fails=st.booleans())
    def process_one(self, worker_id, fails):
        def handler(lease):
            if fails:
                raise RuntimeError("handler failed")

        outcome = self.queue.process_one(worker_id, handler, now=self.now)
        item = self.model.acquire(worker_id, self.now, None, None)
        if item is None:
            assert outcome is Outcome.EMPTY
        elif not fails:
            self.model.ack(item)
            assert outcome is Outcome.OK
        else:
            state = self.model.nack(item)
            assert outcome is (Outcome.DEAD if state is DEAD else Outcome.RETRIED)

    @rule(seconds=st.sampled_from([0, 1, 2, 5, 9, 10, 11, 30]))
    def advance(self, seconds):
        self.now += seconds

    @rule()
    def expire_leases(self):
        expired = self.queue._expire_leases(now=self.now)
        assert expired == self.model.sweep(self.now)
        if expired:
            event("forced an expiry")

    @precondition(lambda self: self.model.items)
    @rule(index=lease_index, from_dlq=st.booleans())
    def replay(self, index, from_dlq):
        ids = self.model.dlq if from_dlq and self.model.dlq else sorted(self.model.items)
        item = self.model.items[ids[index % len(ids)]]
        if item.state is DEAD:
            self.queue.replay_dlq(item.id, now=self.now)
            self.model.replay(item)
            event("replayed a dead item")
        else:
            with pytest.raises(NotInDLQError):
                self.queue.replay_dlq(item.id, now=self.now)

    def _refused(self, verdict, call):
        """A write under a lease that is over is refused with the reason the model predicts
        (the invariants then prove it changed nothing beyond the expiries due anyway)."""
        error = {"stale": StaleTokenError, "expired": LeaseExpiredError, "settled": LeaseSettledError}[verdict]
        with pytest.raises(error) as caught:
            call()
        event(f"refused a lease: {verdict}")  # shown by --hypothesis-show-statistics
        if verdict == "stale":
            current = self.model.items[caught.value.what.removeprefix("item ")].token
            assert caught.value.token < caught.value.current == current

    # ------------------------------------------------------------------ invariants
    @invariant()
    def at_most_one_live_lease_per_case(self):
        cases = [item.case_id for item in self.queue.leases()]
        assert len(cases) == len(set(cases))

    @invariant()
    def every_item_is_in_exactly_one_state(self):
        counts = self.queue.counts()
        assert sum(counts.values()) == len(self.queue) == len(self.model.items)
        by_state = {state: {i.id for i in self.queue.items(state)} for state in ItemState}
        assert sum(len(ids) for ids in by_state.values()) == len(self.model.items)  # disjoint ...
        assert set().union(*by_state.values()) == set(self.model.items)  # ... and complete
        for state, ids in by_state.items():
            assert len(ids) == counts[state]
            assert ids == {i.id for i in self.model.items.values() if i.state is state}
        assert self.queue.depth == counts[READY]

    @invariant()
    def queue_and_model_agree_on_every_item_and_attempts_stay_in_bounds(self):
        for item in self.queue.items():  # read once: on a database every read is a query
            expected = self.model.items[item.id]
            assert (item.state, item.attempts, item.token, item.replays) == (
                expected.state,
                expected.attempts,
                expected.token,
                expected.replays,
            )
            if item.state is LEASED:
                assert (item.worker_id, item.lease_expires_at) == (expected.worker_id, expected.expires_at)
            assert 0 <= item.attempts <= MAX_ATTEMPTS
            if item.state is not DEAD:
                assert item.attempts < MAX_ATTEMPTS or item.state in (LEASED, DONE)
        assert [i.id for i in self.queue.dlq_items()] == self.model.dlq

    @invariant()
    def tokens_only_grow(self):
        for item in self.model.items.values():
            assert item.tokens == sorted(set(item.tokens))  # strictly increasing
            assert item.tokens == list(range(1, item.token + 1))

    def teardown(self):
        assert len(self.queue.log.where(EventKind.STALE_REJECTED)) == self.model.stale_rejections


class SQLiteQueueMachine(QueueMachine):
    backend = "sqlite"


class PostgresQueueMachine(QueueMachine):
    backend = "postgresql"


@pytest.fixture(scope="module", autouse=True)
def databases_removed_at_the_end():
    yield
    for backend in QueueMachine._backends.values():
        backend.close()
    QueueMachine._backends.clear()
    QueueMachine._stores.clear()


# The queue's rules are searched hardest on memory; a database backend runs the same machine
# on fewer runs (each on a new, empty database), what it adds being its storage, not the rules.
DATABASE_RUNS = 200
for machine in (QueueMachine, SQLiteQueueMachine, PostgresQueueMachine):
    base = settings.get_profile(PROFILE)
    runs = base.max_examples if machine is QueueMachine else min(base.max_examples, DATABASE_RUNS)
    machine.TestCase.settings = settings(base, stateful_step_count=50, max_examples=runs)
TestQueueMachine = QueueMachine.TestCase
TestQueueMachineOnSQLite = SQLiteQueueMachine.TestCase
TestQueueMachineOnPostgres = PostgresQueueMachine.TestCase
