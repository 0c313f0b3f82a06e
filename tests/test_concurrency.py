"""Concurrency on the SQL stores, Jepsen-style: each decision the course teaches (an
idempotency key, a request key, an idempotent consumer's mark, a first claim) makes one
record however two workers interleave.

Two kinds of test:

* races, deterministic: worker A runs its call on its own connection and is held just before
  its COMMIT (every statement of the call has reached the database, nothing is committed);
  worker B then makes the same call on another connection, and runs until it has finished
  or is waiting for a lock of A's (seen by the database itself: SQLite's writer lock, which
  A holds from its BEGIN IMMEDIATE on; PostgreSQL's pg_stat_activity); only then does A
  commit. With a check-then-insert, B reads "nothing yet" and makes a second record;
* a hammer: N processes x M threads, lined up on a barrier, make the same calls on the same
  keys, cases and jobs, and every record is checked afterwards.

No sleeps and no timed assertions: the waits end on events, and their limits only turn a
hang into a failure.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from typing import Any

import pytest
from store_backends import DURABLE, Backend

from shopops_lab.chaos import owner
from shopops_lab.checkpoint import CheckpointStore
from shopops_lab.clock import FakeClock
from shopops_lab.effects import EmailAdapter
from shopops_lab.errors import BadArgumentError, IdempotencyConflictError, JobLeasedError
from shopops_lab.events import EventKind
from shopops_lab.jobs import JobStore
from shopops_lab.outbox import Delivery, IdempotentConsumer, OutboxStore
from shopops_lab.states import ItemState
from shopops_lab.store import Store, open_store
from shopops_lab.worker.queue import Queue

LIMIT = 120  # seconds: a wait that reaches it has hung, and fails the test instead


@pytest.fixture(params=DURABLE)
def sql(request, tmp_path):
    made = Backend(request.param, tmp_path)
    yield made
    made.close()


# ---------------------------------------------------------------------- two workers, one paused
class Worker(threading.Thread):
    """One worker: its own store (its own connection, opened in its own thread), a component
    made on it, and one call, made on `go`. With `hold`, the call's first commit waits for
    `release`. (Opening the store writes on SQLite, so both open before either calls.)"""

    def __init__(self, url: str, make: Callable[[Store], Any], call: Callable[[Any], Any], *, hold: bool) -> None:
        super().__init__(daemon=True)
        self.url, self.make, self.call, self.hold = url, make, call, hold
        self.opened, self.go, self.held, self.starting, self.release = (threading.Event() for _ in range(5))
        self.result: Any = None
        self.error: BaseException | None = None
        self.pid: int | None = None

    def run(self) -> None:
        try:
            store = open_store(self.url)
            component = self.make(store)
            if getattr(store, "dialect", "") == "postgresql":
                self.pid = store._connection.info.backend_pid
            self._hooks(store)
            self.opened.set()
            assert self.go.wait(LIMIT), "never told to go"
            try:
                self.result = self.call(component)
            finally:
                store.close()
        except BaseException as error:  # handed to the test, which raises it
            self.error = error
        finally:
            self.opened.set()
            self.held.set()

    def _hooks(self, store: Store) -> None:
        start, finish = store._start, store._finish

        def starting() -> None:
            self.starting.set()
            start()

        def held_finish(commit: bool) -> None:
            store._finish = finish  # only the call's first transaction is held
            if getattr(store, "_pending", None):
                store._execute("SELECT 1")  # everything the call wrote reaches the server now
            self.held.set()
            assert self.release.wait(LIMIT), "never released"
            finish(commit)

        store._start = starting
        if self.hold:
            store._finish = held_finish

    def outcome(self) -> Any:
        self.join(LIMIT)
        assert not self.is_alive(), "the worker hung"
        if self.error is not None:
            raise self.error
        return self.result


def waiting_on_a_lock(admin: Any, pid: int) -> bool:
    row = admin.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return row is not None and row[0] == "Lock"


def race(
    sql: Backend,
    make: Callable[[Store], Any],
    call: Callable[[Any], Any],
    call_b: Callable[[Any], Any] | None = None,
    url: str | None = None,
) -> tuple[Any, Any, Store]:
    """A makes `call` and is held before its commit; B makes the same call (or `call_b`), as
    far as it can get; A commits; both finish. Returns both answers (B's error is raised,
    wrapped in `Refused`) and a fresh store on the database."""
    if url is None:
        url = sql.url()
        open_store(url).close()  # set the database up before either worker opens it
    a, b = Worker(url, make, call, hold=True), Worker(url, make, call_b or call, hold=False)
    for worker in (a, b):
        worker.start()
        assert worker.opened.wait(LIMIT)
    a.go.set()
    assert a.held.wait(LIMIT)
    if a.error is not None:
        raise a.error
    b.go.set()
    if sql.name == "sqlite":
        assert b.starting.wait(LIMIT)  # its BEGIN IMMEDIATE now waits for A's transaction to end
    else:
        for _ in range(int(LIMIT / 0.002)):  # polled until B has finished or the database shows it waiting on A
            if not b.is_alive() or (b.pid and waiting_on_a_lock(sql._admin, b.pid)):
                break
            b.join(0.002)
        else:
            pytest.fail("worker B neither finished nor waited for A")
    a.release.set()
    first = a.outcome()
    try:
        second = b.outcome()
    except Exception as error:
        second = Refused(error)
    return first, second, sql.open(url)


class Refused:
    def __init__(self, error: Exception) -> None:
        self.error = error


def test_one_idempotency_key_sends_one_email(sql: Backend):
    first, second, store = race(
        sql,
        lambda s: EmailAdapter(store=s, clock=FakeClock()),
        lambda adapter: adapter.send("O-1001:email:1", case_id="O-1001", to="jordan"),
    )
    assert len(EmailAdapter(store=store).ledger) == 1
    assert first.message_id == second.message_id == "msg-0001"
    assert (first.deduped, second.deduped) == (False, True)
    assert len(store.log.where(EventKind.CONTACT_SENT)) == 1


def test_one_idempotency_key_with_two_bodies_sends_one_email_and_refuses_the_other(sql: Backend):
    """B's different request is compared with A's record under the lock A's INSERT holds,
    so it is refused, never sent, whichever body B carries."""

    def send(body: str) -> Callable[[Any], Any]:
        return lambda adapter: adapter.send("O-1001:decision", case_id="O-1001", to="jordan", body=body)

    first, second, store = race(
        sql, lambda s: EmailAdapter(store=s, clock=FakeClock()), send("voucher"), send("refund")
    )
    assert first.message_id == "msg-0001" and not first.deduped
    assert isinstance(second, Refused) and isinstance(second.error, IdempotencyConflictError)
    assert second.error.key == "O-1001:decision" and "body was 'voucher', now 'refund'" in str(second.error)
    assert [c.message_id for c in EmailAdapter(store=store).ledger.contacts()] == ["msg-0001"]
    assert len(store.log.where(EventKind.CONTACT_SENT)) == 1


def test_one_request_key_with_two_bodies_makes_one_job_and_refuses_the_other(sql: Backend):
    first, second, store = race(
        sql,
        lambda s: JobStore(store=s, clock=FakeClock()),
        lambda jobs: jobs.submit("O-1001:refund", {"approve": True}),
        lambda jobs: jobs.submit("O-1001:refund", {"approve": 1}),
    )
    assert first.id == "job-0001" and isinstance(second, Refused)
    assert isinstance(second.error, IdempotencyConflictError) and second.error.key == "O-1001:refund"
    assert [job.id for job in JobStore(store=store).jobs()] == ["job-0001"]


def test_one_request_key_makes_one_job(sql: Backend):
    first, second, store = race(
        sql, lambda s: JobStore(store=s, clock=FakeClock()), lambda jobs: jobs.submit("O-1001:refund", {"amount": 20})
    )
    assert first.id == second.id == "job-0001"
    assert [job.id for job in JobStore(store=store).jobs()] == ["job-0001"]
    assert len(store.log.where(EventKind.JOB_SUBMITTED)) == 1


def test_one_delivery_is_applied_once_by_two_consumers(sql: Backend):
    applied: list[str] = []
    delivery = Delivery(seq=1, message_id="out-0001", topic="refund.issued", payload={"amount": 20})
    first, second, store = race(
        sql,
        lambda s: IdempotentConsumer(lambda d: applied.append(d.message_id), store=s),
        lambda consumer: consumer.handle(delivery),
    )
    assert sorted([first, second]) == [False, True] and applied == ["out-0001"]
    assert len(store.log.where(EventKind.MESSAGE_APPLIED)) == 1
    assert len(store.log.where(EventKind.MESSAGE_DEDUPED)) == 1


def test_two_first_claims_of_one_checkpoint_get_distinct_tokens(sql: Backend):
    first, second, store = race(
        sql, lambda s: CheckpointStore(store=s, clock=FakeClock()), lambda checkpoints: checkpoints.claim("O-1001")
    )
    assert (first, second) == (1, 2)
    assert CheckpointStore(store=store).token("O-1001") == 2


def test_two_first_claims_of_one_job_leave_one_owner(sql: Backend):
    url = sql.url()
    JobStore(store=sql.open(url)).submit("O-1001:refund")
    first, second, store = race(
        sql,
        lambda s: JobStore(store=s, clock=FakeClock()),
        lambda jobs: jobs.claim("job-0001", "A", lease_seconds=30),
        lambda jobs: jobs.claim("job-0001", "B", lease_seconds=30),
        url=url,
    )
    assert first.token == 1 and isinstance(second.error, JobLeasedError)
    assert JobStore(store=store).get("job-0001").owner == "A"


def test_two_first_writes_of_one_outbox_row_keep_both_changes(sql: Backend):
    first, second, store = race(
        sql,
        lambda s: OutboxStore(store=s, clock=FakeClock()),
        lambda outbox: outbox.commit({"id": "O-1001", "status": "refunded"}, {"topic": "a"}),
        lambda outbox: outbox.commit({"id": "O-1001", "note": "called"}, {"topic": "b"}),
    )
    assert (first, second) == ("out-0001", "out-0002")
    assert OutboxStore(store=store).row("O-1001") == {"status": "refunded", "note": "called"}


def claim_the_run(store: Store) -> str:
    with store.atomic:
        return owner.claim(store)


@pytest.mark.parametrize("before", ["never claimed", "let go"])
def test_two_chaos_resumes_on_one_database_leave_one_supervisor(sql: Backend, before: str):
    """Two `--resume`s at once: B waits for A's claim (its INSERT, or its locked row) and is refused."""
    url = sql.url()
    if before == "let go":
        with sql.open(url) as store:
            owner.release(store, claim_the_run(store))
    first, second, store = race(sql, lambda s: s, claim_the_run, url=url)
    assert isinstance(second, Refused) and isinstance(second.error, BadArgumentError)
    assert "db is being run by another chaos supervisor" in str(second.error)
    assert store.get(*owner.OWNER)["run"] == first


# ---------------------------------------------------------------------- the hammer
PROCESSES, THREADS, ROUNDS = 2, 2, 6
KEYS = ("O-1001", "O-1002", "O-1003")


def hammer_thread(url: str, name: str, barrier: Any, results: list) -> None:
    """One thread of one process: every record type, on the same few keys as everyone."""
    store = open_store(url)
    clock = FakeClock()
    jobs, checkpoints = JobStore(store=store, clock=clock), CheckpointStore(store=store, clock=clock)
    adapter, queue = EmailAdapter(store=store, clock=clock), Queue(store=store, clock=clock, lease_seconds=1e6)
    applied: list[str] = []
    consumer = IdempotentConsumer(lambda d: applied.append(d.message_id), store=store, clock=clock)
    mine: dict[str, list] = {"jobs": [], "tokens": [], "messages": [], "acked": []}
    barrier.wait()
    for n in range(ROUNDS):
        key = KEYS[n % len(KEYS)]
        mine["jobs"].append((key, jobs.submit(f"{key}:refund", {"case": key}).id))
        mine["tokens"].append((key, checkpoints.claim(key)))
        mine["messages"].append((key, adapter.send(f"{key}:email", case_id=key, to="jordan").message_id))
        consumer.handle(Delivery(seq=n + 1, message_id=f"out-{key}", topic="t", payload={}))
        queue.enqueue(case_id=key)
        lease = queue.acquire(name)
        if lease is not None:
            queue.ack(lease)
            mine["acked"].append(lease.item_id)
    mine["applied"] = applied
    store.close()
    results.append(mine)


def hammer_process(url: str, process: int, barrier: Any, out: Any) -> None:
    results: list = []
    threads = [
        threading.Thread(target=hammer_thread, args=(url, f"P{process}T{t}", barrier, results)) for t in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.put(results)


def test_many_processes_and_threads_on_the_same_keys_make_one_record_each(sql: Backend):
    url = sql.url()
    open_store(url).close()
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(PROCESSES * THREADS), ctx.Queue()
    processes = [ctx.Process(target=hammer_process, args=(url, p, barrier, out)) for p in range(PROCESSES)]
    for process in processes:
        process.start()
    results = [mine for _ in processes for mine in out.get(timeout=LIMIT)]
    for process in processes:
        process.join(LIMIT)
        assert process.exitcode == 0
    assert len(results) == PROCESSES * THREADS, "a thread failed (its error is printed above)"
    every = {name: [entry for mine in results for entry in mine[name]] for name in results[0]}
    # one job per request key, the same one for every submitter
    made = {key: {job for k, job in every["jobs"] if k == key} for key in KEYS}
    assert all(len(jobs) == 1 for jobs in made.values()) and len(set.union(*made.values())) == len(KEYS)
    assert len(JobStore(store=sql.open(url))) == len(KEYS)
    # every claim of a checkpoint got its own token: 1..n per key, none twice
    for key in KEYS:
        tokens = sorted(token for k, token in every["tokens"] if k == key)
        assert tokens == list(range(1, len(tokens) + 1))
    # one email per idempotency key, and every sender was told its id
    store = sql.open(url)
    contacts = EmailAdapter(store=store).ledger.contacts()
    assert sorted(c.case_id for c in contacts) == sorted(KEYS)
    assert all(len({m for k, m in every["messages"] if k == key}) == 1 for key in KEYS)
    # each message applied once among all consumers
    assert sorted(every["applied"]) == sorted(f"out-{key}" for key in KEYS)
    # no item acked twice, none lost: every acked item is done, and the rest still there
    assert len(every["acked"]) == len(set(every["acked"]))
    queue = Queue(store=store)
    assert {i.id for i in queue.items(ItemState.DONE)} == set(every["acked"])
    assert len(queue) == PROCESSES * THREADS * ROUNDS
