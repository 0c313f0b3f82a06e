"""One fence, one contract (huey's StorageTests in spirit): what every fenced store promises,
written once as `FencedStoreContract` and run against each store that fences through
`TokenFence` (the queue, the job store, the checkpoint store, the bare fence) on every
backend, and against `NaiveResultStore`, which stays naive on purpose and fails it."""

from __future__ import annotations

import pytest
from store_backends import Backend

from shopops_lab.checkpoint import Checkpoint, CheckpointStore
from shopops_lab.clock import FakeClock
from shopops_lab.errors import StaleTokenError
from shopops_lab.events import EventKind
from shopops_lab.fencing import NaiveResultStore, TokenFence
from shopops_lab.jobs import JobStore
from shopops_lab.worker.queue import Queue

LEASE = 10
NAIVE = "the naive store accepts a stale write (it raises nothing): that is lab 04's bug"


class FencedStoreContract:
    """Subclasses say how to make the store, claim a key, write under a token, and read back
    everything a write could have changed."""

    keys = ("A", "B")

    @pytest.fixture(autouse=True)
    def _made(self, backend):
        self.clock = FakeClock()
        self.make(backend)

    def make(self, backend: Backend) -> None:
        raise NotImplementedError

    def claim(self, key: str) -> int:
        raise NotImplementedError

    def write(self, key: str, token: int) -> None:
        raise NotImplementedError

    def state(self, key: str) -> object:
        raise NotImplementedError

    @property
    def log(self):
        return self.fenced.log

    # ------------------------------------------------------------------ the promises
    def test_each_claim_of_a_key_gets_a_larger_token_and_keys_count_apart(self):
        a, b = self.keys
        assert [self.claim(a), self.claim(a), self.claim(a)] == [1, 2, 3]
        assert self.claim(b) == 1

    def test_the_newest_token_writes(self):
        a, _ = self.keys
        self.claim(a)
        newest = self.claim(a)
        self.write(a, newest)

    def test_an_older_token_is_refused_logged_and_changes_nothing(self):
        a, _ = self.keys
        older, newest = self.claim(a), self.claim(a)
        before, events = self.state(a), len(self.log)
        self.clock.advance(1)
        with pytest.raises(StaleTokenError) as refused:
            self.write(a, older)
        assert (refused.value.token, refused.value.current) == (older, newest)
        assert self.state(a) == before
        [event] = self.log.events[events:]
        assert (event.kind, event.token, event.info["current"], event.time) == (
            EventKind.STALE_REJECTED,
            older,
            newest,
            self.clock.now(),
        )
        assert isinstance(event.info["op"], str) and event.info["op"]

    def test_a_late_write_is_refused_after_the_new_owner_wrote(self):
        a, _ = self.keys
        older, newest = self.claim(a), self.claim(a)
        self.write(a, newest)
        written = self.state(a)
        with pytest.raises(StaleTokenError):
            self.write(a, older)
        assert self.state(a) == written

    def test_a_claim_of_one_key_leaves_the_others_writable(self):
        a, b = self.keys
        mine = self.claim(b)
        self.claim(a)
        self.claim(a)
        self.write(b, mine)


class TestTheFence(FencedStoreContract):
    def make(self, backend):
        self.fenced = TokenFence("job", store=backend.open())

    def claim(self, key):
        with self.fenced.store.atomic:
            return self.fenced.claim(key, worker_id=f"W{self.fenced.current(key) + 1}")

    def write(self, key, token):
        self.fenced.check(key, token, t=self.clock.now(), op="write")  # alone: its refusal's record is kept

    def state(self, key):
        return self.fenced.current(key)

    def test_the_refusal_names_the_holder_of_the_old_token(self):
        self.claim("A")
        self.claim("A")
        with pytest.raises(StaleTokenError, match="job A: this write carries token 1"):
            self.write("A", 1)
        assert self.log.last.worker_id == "W1"


class TestTheJobStore(FencedStoreContract):
    def make(self, backend):
        self.fenced = JobStore(self.clock, store=backend.open())
        self.ids = {key: self.fenced.submit(f"{key}:refund", {"case_id": key}).id for key in self.keys}

    def claim(self, key):
        self.clock.advance(LEASE)  # the last claim's lease ran out: a new owner takes over
        return self.fenced.claim(self.ids[key], f"W{self.clock.now():g}", lease_seconds=LEASE).token

    def write(self, key, token):
        self.fenced.confirm_step(self.ids[key], "summarize", token=token)

    def state(self, key):
        job = self.fenced.get(self.ids[key])
        return job.state, job.version, job.last_step, job.token


class TestTheCheckpointStore(FencedStoreContract):
    def make(self, backend):
        self.fenced = CheckpointStore(clock=self.clock, store=backend.open())

    def claim(self, key):
        return self.fenced.claim(key)

    def write(self, key, token):
        self.fenced.save(key, Checkpoint.start("v1").confirm("fetch", "source-v1"), token=token)

    def state(self, key):
        return self.fenced.history(key), self.fenced.token(key)


class TestTheQueue(FencedStoreContract):
    def make(self, backend):
        store = None if backend.name == "memory" else backend.open()
        self.fenced = Queue(lease_seconds=LEASE, clock=self.clock, store=store)
        self.items = {self.fenced.enqueue(case_id=key): key for key in self.keys}
        self.held = {}  # key -> the live lease on its item
        self.leases = {}  # (key, token) -> every lease granted

    def claim(self, key):
        """Give the item back (a nack), so the next acquire is a new claim with a new token;
        an acquire that lands on another key's item keeps that lease for its key."""
        if key in self.held:
            self.fenced.nack(self.held.pop(key), "handed to a new owner")
        while key not in self.held:
            lease = self.fenced.acquire("W")
            self.held[self.items[lease.item_id]] = self.leases[self.items[lease.item_id], lease.token] = lease
        return self.held[key].token

    def write(self, key, token):
        self.fenced.ack(self.leases[key, token])

    def state(self, key):
        item = self.fenced.item(next(i for i, k in self.items.items() if k == key))
        return item.state, item.token, item.attempts


class TestTheNaiveResultStore(FencedStoreContract):
    """Lab 04's starting point: it claims like the others and writes whatever it is given."""

    @pytest.fixture(autouse=True)
    def _made(self):
        self.clock = FakeClock()
        self.fenced = NaiveResultStore(clock=self.clock)

    def claim(self, key):
        return self.fenced.claim(key, "W")

    def write(self, key, token):
        self.fenced.complete(key, f"result under token {token}", token=token)

    def state(self, key):
        return self.fenced.result(key), self.fenced.written_by(key)

    @pytest.mark.xfail(raises=pytest.fail.Exception, strict=True, reason=NAIVE)
    def test_an_older_token_is_refused_logged_and_changes_nothing(self):
        super().test_an_older_token_is_refused_logged_and_changes_nothing()

    @pytest.mark.xfail(raises=pytest.fail.Exception, strict=True, reason=NAIVE)
    def test_a_late_write_is_refused_after_the_new_owner_wrote(self):
        super().test_a_late_write_is_refused_after_the_new_owner_wrote()

    def test_it_logs_the_stale_write_it_accepts(self):
        self.claim("A")
        self.claim("A")
        self.write("A", 1)
        assert self.log.where(EventKind.STALE_WRITE_ACCEPTED)[-1].token == 1
        assert self.state("A") == ("result under token 1", (None, 1))
