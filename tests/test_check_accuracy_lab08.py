"""The specification of lab 08's check: handlers run in real worker processes, each stopped at
every call it makes into the shop and moved on only when the check says so, so every schedule
(a kill after any step, a freeze and a takeover anywhere outside a transaction) happens exactly
as planned. A wrong handler is refused with the schedule that breaks it; a right one passes
however it is written. Nothing here waits on the wall clock: leases run out when the check
moves its clock, and `time.sleep` and the system clock are made to fail while the check runs."""

from __future__ import annotations

import time

import pytest
from check_accuracy import Spec, accuracy_tests, reachable, refused

from shopops_lab.checks import lab08
from shopops_lab.checks.base import Verdict
from shopops_lab.clock import FakeClock, SystemClock
from shopops_lab.errors import StaleTokenError
from shopops_lab.store import MemoryStore
from shopops_lab.worker.queue import Queue


def order_and_amount(lease):
    return lease.payload["order"], lease.payload["amount"]


# ---------------------------------------------------------------------------- right, written differently
def ack_then_credit_in_one_transaction(lease, shop):
    with shop.transaction():
        shop.ack(lease)
        shop.credit(*order_and_amount(lease))


def credit_then_ack_in_one_transaction(lease, shop):
    with shop.transaction():
        shop.credit(lease.payload["order"], lease.payload["amount"])
        shop.ack(lease)


def nested_transactions(lease, shop):
    with shop.transaction():
        order, amount = order_and_amount(lease)
        with shop.transaction():
            shop.credit(order, amount)
        shop.ack(lease)


def stale_caught_outside_the_transaction(lease, shop):
    try:
        with shop.transaction():
            shop.ack(lease)
            shop.credit(lease.case_id, lease.payload["amount"])
    except StaleTokenError:
        return  # the transaction already rolled back: nothing of this delivery was kept


def checks_inside_the_transaction(lease, shop):
    order, amount = order_and_amount(lease)
    with shop.transaction():
        if shop.refunded(order) == 0:
            shop.credit(order, amount)
        shop.ack(lease)


def checks_and_credits_in_one_transaction_then_acks(lease, shop):
    """An idempotent consumer: the check and the credit commit together, so no interleaving
    credits twice, and a lost ack only brings back a delivery that changes nothing."""
    order, amount = order_and_amount(lease)
    with shop.transaction():
        if shop.refunded(order) > 0:
            credit = False
        else:
            shop.credit(order, amount)
            credit = True
    shop.ack(lease)
    return credit


# ---------------------------------------------------------------------------- wrong, as learners write them
def two_commits(lease, shop):
    shop.credit(*order_and_amount(lease))
    shop.ack(lease)


def acks_before_the_commit(lease, shop):
    shop.ack(lease)
    with shop.transaction():
        shop.credit(*order_and_amount(lease))


def acks_after_the_transaction(lease, shop):
    with shop.transaction():
        shop.credit(*order_and_amount(lease))
    shop.ack(lease)


def credits_outside_the_transaction(lease, shop):
    shop.credit(*order_and_amount(lease))
    with shop.transaction():
        shop.ack(lease)


def checks_then_acts_outside_the_transaction(lease, shop):
    order, amount = order_and_amount(lease)
    if shop.refunded(order) == 0:
        shop.credit(order, amount)
    shop.ack(lease)


def checks_outside_then_credits_in_a_transaction(lease, shop):
    order, amount = order_and_amount(lease)
    if shop.refunded(order) == 0:
        with shop.transaction():
            shop.credit(order, amount)
    shop.ack(lease)


def checks_in_one_transaction_credits_in_another(lease, shop):
    order, amount = order_and_amount(lease)
    with shop.transaction():
        done = shop.refunded(order) > 0
    if not done:
        shop.credit(order, amount)
        shop.ack(lease)


def swallows_the_stale_error_and_credits_anyway(lease, shop):
    with shop.transaction():
        try:
            shop.ack(lease)
        except StaleTokenError:
            pass  # "someone else acked it, never mind": the credit commits anyway
        shop.credit(*order_and_amount(lease))


def credits_when_the_ack_is_refused(lease, shop):
    try:
        with shop.transaction():
            shop.ack(lease)
            shop.credit(*order_and_amount(lease))
    except StaleTokenError:
        shop.credit(*order_and_amount(lease))  # "make sure the customer gets it"


REFUNDED_HERE: set[str] = set()


def remembers_refunds_in_the_process(lease, shop):
    order, amount = order_and_amount(lease)
    if order not in REFUNDED_HERE:  # lives in this process only: a restarted worker forgets it
        shop.credit(order, amount)
        REFUNDED_HERE.add(order)
    shop.ack(lease)


def hard_coded_amount(lease, shop):
    with shop.transaction():
        shop.ack(lease)
        shop.credit(lease.payload["order"], 35.0)


def credits_twice(lease, shop):
    with shop.transaction():
        shop.ack(lease)
        shop.credit(*order_and_amount(lease))
        shop.credit(*order_and_amount(lease))


def only_acks(lease, shop):
    shop.ack(lease)


def never_acks(lease, shop):
    with shop.transaction():
        shop.credit(*order_and_amount(lease))


def misreads_the_payload(lease, shop):
    with shop.transaction():
        shop.ack(lease)
        shop.credit(lease.payload["order_id"], lease.payload["amount"])


def acks_in_a_finally(lease, shop):
    """'Always ack, whatever happens': the ack is its own commit after the credit's."""
    try:
        with shop.transaction():
            shop.credit(lease.payload["order"], lease.payload["amount"])
    finally:
        shop.ack(lease)


def only_the_ack_in_the_transaction(lease, shop):
    shop.credit(lease.payload["order"], lease.payload["amount"])
    with shop.transaction():
        shop.ack(lease)


def acks_first_then_checks_and_credits(lease, shop):
    shop.ack(lease)
    if shop.refunded(lease.payload["order"]) == 0:
        shop.credit(lease.payload["order"], lease.payload["amount"])


def forges_the_refund_row(lease, shop):
    """Credits and acks in two commits, and in between looks for the shop's database by
    introspection, to write the refund row back to one credit."""
    order, amount = order_and_amount(lease)
    shop.credit(order, amount)
    for found in reachable(shop, shop.credit, shop.ack, shop.refunded, shop.transaction()):
        if type(found).__name__.endswith("Store") and hasattr(found, "put"):
            found.put("refund", order, {"refunded": amount, "credits": 1})
    shop.ack(lease)


SECRETS = ("with shop.transaction():\n", "shop.ack(lease); shop.credit")

SPEC = Spec(
    exercise=lab08.exercise,
    right=(
        ack_then_credit_in_one_transaction,
        credit_then_ack_in_one_transaction,
        nested_transactions,
        stale_caught_outside_the_transaction,
        checks_inside_the_transaction,
        checks_and_credits_in_one_transaction_then_acks,
    ),
    wrong=(
        refused(
            two_commits,
            "refunded 2 times, 70.00 instead of 35.00: W1 was killed right after a shop.credit",
            "replay(two_commits, 'kill@1')",
            "W1 is killed here (SIGKILL)",
            "W2 shop.credit('O-1003', 35.00)",
        ),
        refused(
            acks_before_the_commit,
            "was never refunded, yet its delivery was acknowledged: W1 was killed right after a shop.ack, and the "
            "order was never delivered again: its ack had committed",
            "replay(acks_before_the_commit, 'kill@1')",
        ),
        refused(
            acks_after_the_transaction,
            "W1 was killed right after one of your transactions committed",
            "replay(acks_after_the_transaction, 'kill@2')",
        ),
        refused(credits_outside_the_transaction, "W1 was killed right after a shop.credit", "'kill@1'"),
        refused(
            checks_then_acts_outside_the_transaction,
            "W2 stopped right after reading shop.refunded while W1 woke up with its stale lease",
            "replay(checks_then_acts_outside_the_transaction, 'freeze@0/1')",
            "W1 freezes here",
            "W1's lease (30 s) has run out",
            "W2 waits here",
            "W1 shop.ack(lease) is refused: StaleTokenError",
        ),
        refused(checks_outside_then_credits_in_a_transaction, "refunded 2 times", "'freeze@0/1'"),
        refused(
            checks_in_one_transaction_credits_in_another,
            "ended in the dead-letter queue (after 1 credit(s)): no delivery of it was ever acknowledged",
            "'kill@3'",
            "W2 shop.refunded('O-1005') -> 12.50",
        ),
        refused(
            swallows_the_stale_error_and_credits_anyway,
            "W1 was frozen right after acquiring the order, before "
            "your handler ran; its lease ran out, W2 took the order over and ran your handler to the end",
            "'freeze@0'",
            "W1 shop.ack(lease) is refused: StaleTokenError",
            "W1 commits its transaction",
        ),
        refused(
            credits_when_the_ack_is_refused,
            "refunded 2 times",
            "'freeze@0'",
            "W1 its transaction rolls back: nothing in it is kept",
        ),
        refused(remembers_refunds_in_the_process, "W1 was killed right after a shop.credit", "'kill@1'"),
        refused(hard_coded_amount, "order O-1001 was refunded 35.00, but it asked for 12.50", "'run'"),
        refused(credits_twice, "refunded 2 times, 25.00 instead of 12.50: with no worker stopped at all"),
        refused(only_acks, "order O-1001 was never refunded, yet its delivery was acknowledged"),
        refused(
            never_acks, "ended in the dead-letter queue (after 4 credit(s)): no delivery of it was ever acknowledged"
        ),
        refused(
            acks_in_a_finally,
            "W1 was killed right after one of your transactions committed",
            "replay(acks_in_a_finally, 'kill@2')",
        ),
        refused(
            only_the_ack_in_the_transaction,
            "refunded 2 times, 70.00 instead of 35.00: W1 was killed right after a shop.credit",
            "'kill@1'",
        ),
        refused(
            acks_first_then_checks_and_credits,
            "was never refunded, yet its delivery was acknowledged: W1 was killed right after a shop.ack",
            "'kill@1'",
        ),
        refused(
            forges_the_refund_row,
            "refunded 2 times, 70.00 instead of 35.00: W1 was killed right after a shop.credit",
            "'kill@1'",
        ),
        refused(
            misreads_the_payload,
            "ended in the dead-letter queue: your handler raised KeyError on every delivery",
            "W1 your handler raised KeyError; the worker gives the delivery back (nack)",
        ),
    ),
    secrets=SECRETS,
)

(
    test_a_right_answer_written_differently_is_accepted,
    test_a_plausible_wrong_answer_is_refused_with_its_evidence,
    test_the_specification_has_enough_right_and_wrong_answers,
) = accuracy_tests(SPEC)


@pytest.fixture(autouse=True)
def no_wall_clock(monkeypatch):
    """No verdict here may wait on, or read, the wall clock: in the check or in its workers
    (forked after this, so they inherit it)."""

    def refuse(*args):
        raise AssertionError("the lab 08 check read or waited on the wall clock")

    monkeypatch.setattr(time, "sleep", refuse)
    monkeypatch.setattr(SystemClock, "now", refuse)


# ---------------------------------------------------------------------------- the schedule is the evidence
def test_the_breaking_schedule_replays_to_the_same_story():
    result = lab08.exercise.result(checks_then_acts_outside_the_transaction)
    story = lab08.replay(checks_then_acts_outside_the_transaction, "freeze@0/1")
    assert story.splitlines()[1:-1] == list(result.evidence)
    assert story.splitlines()[-1] in result.message


def test_a_schedule_the_check_never_plays_is_named():
    text = lab08.replay(ack_then_credit_in_one_transaction, "freeze@2")  # point 2 is inside the transaction
    assert text.startswith("the check does not play freeze@2 with your handler")


def test_the_passing_message_states_the_bound():
    result = lab08.exercise.result(ack_then_credit_in_one_transaction)
    assert result.message.startswith(
        "checked all 9 schedules of two worker processes, one order each: your handler "
        "run whole, SIGKILLed right after each of its 5 steps, and frozen 3 ways"
    )


# ---------------------------------------------------------------------------- a run that did not go as planned
def test_a_handler_that_takes_another_path_on_a_replay_voids_the_run(tmp_path):
    first = tmp_path / "first-delivery-seen"

    def looks_once(lease, shop):
        if not first.exists():  # only the very first delivery ever reads the refund
            first.touch()
            shop.refunded(lease.payload["order"])
        ack_then_credit_in_one_transaction(lease, shop)

    result = lab08.exercise.result(looks_once)
    assert result.verdict is Verdict.NOT_JUDGED, str(result)
    assert "this run is void, so nothing was judged" in result.message
    assert "did not stop at its point 1 (after_refunded) as planned" in result.message
    first.unlink()
    with pytest.raises(AssertionError, match="not judged"):  # a void run is never a pass
        lab08.exercise.grade(looks_once)


def test_a_worker_that_never_reaches_its_next_stop_voids_the_run(monkeypatch):
    monkeypatch.setattr(lab08, "PATIENCE", 0.3)

    def waits_forever(lease, shop):
        import threading

        threading.Event().wait()

    result = lab08.exercise.result(waits_forever)
    assert result.verdict is Verdict.NOT_JUDGED, str(result)
    assert "worker W1 said nothing for 0.3 s (does your handler wait for something, or loop?)" in result.message


def test_a_handler_that_ends_its_process_voids_the_run():
    def exits(lease, shop):
        import os

        os._exit(0)

    result = lab08.exercise.result(exits)
    assert result.verdict is Verdict.NOT_JUDGED and "ended without a word" in result.message


def test_without_processes_the_check_says_where_to_run_it_and_never_incorrect(monkeypatch):
    monkeypatch.setattr(lab08.sys, "platform", "emscripten")
    for answer in (ack_then_credit_in_one_transaction, two_commits):
        result = lab08.exercise.result(answer)
        assert result.verdict is Verdict.NOT_JUDGED
        assert result.message.startswith("this check needs real processes: run it in JupyterLab")
        assert "incorrect" not in str(result)


def test_the_shop_leads_nowhere_near_the_database():
    """What the check judges (the refunds table) is reachable from the shop a handler gets
    by no attribute, vars(), closure, __self__ of its bound methods or gc.get_referents,
    however deep; `forges_the_refund_row` above is the same search, refused."""
    store = MemoryStore()
    queue = Queue(store=store, clock=FakeClock())
    shop = lab08.Shop(store, queue)
    assert [n for n in dir(shop) if not n.startswith("__")] == ["ack", "credit", "refunded", "transaction"]
    assert not hasattr(shop, "__dict__")
    handed = (shop, shop.credit, shop.ack, shop.refunded, shop.transaction(), shop.credit.__self__)
    reached = {id(x) for x in reachable(*handed)}
    assert not [x for x in (store, queue, store.atomic) if id(x) in reached]


# ============================================================================ 08.2 and 08.3: the claim in SQL
CLAIMABLE_SQLITE = "SELECT id FROM queue WHERE state = 'ready' OR (state = 'leased' AND expires_at <= ?) ORDER BY id"
CLAIMABLE_POSTGRES = CLAIMABLE_SQLITE.replace("?", "%s")


def claims_in_one_statement(db, worker_id, now, lease_seconds):
    """No transaction of its own: one UPDATE picks and leases the row, and SQLite runs a write whole."""
    rows = db.execute(
        "UPDATE queue SET state = 'leased', worker_id = ?, token = token + 1, expires_at = ? "
        f"WHERE id = ({CLAIMABLE_SQLITE} LIMIT 1) RETURNING id, token",
        (worker_id, now + lease_seconds, now),
    )
    return tuple(rows[0]) if rows else None


def reads_then_writes_under_the_lock(db, worker_id, now, lease_seconds):
    """Two statements, but the write lock is taken before the read."""
    db.execute("BEGIN IMMEDIATE")
    found = db.execute(
        f"SELECT id, token FROM ({CLAIMABLE_SQLITE.replace('SELECT id', 'SELECT id, token')}) LIMIT 1", (now,)
    )
    if not found:
        db.execute("COMMIT")
        return None
    item, token = found[0]
    db.execute(
        "UPDATE queue SET state = 'leased', worker_id = ?, token = ?, expires_at = ? WHERE id = ?",
        (worker_id, token + 1, now + lease_seconds, item),
    )
    db.execute("COMMIT")
    return item, token + 1


def retries_a_conditional_write(db, worker_id, now, lease_seconds):
    """No lock taken by hand: the write checks what it read (the token, and that the row is still
    claimable: a stale owner may have finished it meanwhile), and a claim that changed no row looks again."""
    for _ in range(3):
        found = db.execute(CLAIMABLE_SQLITE.replace("SELECT id", "SELECT id, token") + " LIMIT 1", (now,))
        if not found:
            return None
        item, token = found[0]
        changed = db.execute(  # still claimable, and nobody claimed it since we read it
            "UPDATE queue SET state = 'leased', worker_id = ?, token = ?, expires_at = ? WHERE id = ? AND token = ? "
            "AND (state = 'ready' OR (state = 'leased' AND expires_at <= ?)) RETURNING id",
            (worker_id, token + 1, now + lease_seconds, item, token, now),
        )
        if changed:
            return item, token + 1
    return None


def reads_then_writes(db, worker_id, now, lease_seconds):
    found = db.execute(CLAIMABLE_SQLITE.replace("SELECT id", "SELECT id, token") + " LIMIT 1", (now,))
    if not found:
        return None
    item, token = found[0]
    db.execute(
        "UPDATE queue SET state = 'leased', worker_id = ?, token = ?, expires_at = ? WHERE id = ?",
        (worker_id, token + 1, now + lease_seconds, item),
    )
    return item, token + 1


def reads_then_writes_in_a_deferred_transaction(db, worker_id, now, lease_seconds):
    """BEGIN, not BEGIN IMMEDIATE: the read comes before the write lock."""
    db.execute("BEGIN")
    result = reads_then_writes(db, worker_id, now, lease_seconds)
    db.execute("COMMIT")
    return result


def leaves_the_token_alone(db, worker_id, now, lease_seconds):
    db.execute("BEGIN IMMEDIATE")
    rows = db.execute(
        f"UPDATE queue SET state = 'leased', worker_id = ?, expires_at = ? WHERE id = ({CLAIMABLE_SQLITE} LIMIT 1) "
        "RETURNING id, token",
        (worker_id, now + lease_seconds, now),
    )
    db.execute("COMMIT")
    return tuple(rows[0]) if rows else None


def takes_ready_items_only(db, worker_id, now, lease_seconds):
    rows = db.execute(
        "UPDATE queue SET state = 'leased', worker_id = ?, token = token + 1, expires_at = ? "
        "WHERE id = (SELECT id FROM queue WHERE state = 'ready' ORDER BY id LIMIT 1) RETURNING id, token",
        (worker_id, now + lease_seconds),
    )
    return tuple(rows[0]) if rows else None


def takes_any_unfinished_item(db, worker_id, now, lease_seconds):
    rows = db.execute(
        "UPDATE queue SET state = 'leased', worker_id = ?, token = token + 1, expires_at = ? "
        "WHERE id = (SELECT id FROM queue WHERE state != 'done' AND coalesce(worker_id, '') != ? ORDER BY id LIMIT 1) "
        "RETURNING id, token",
        (worker_id, now + lease_seconds, worker_id),
    )
    return tuple(rows[0]) if rows else None


def never_commits(db, worker_id, now, lease_seconds):
    db.execute("BEGIN IMMEDIATE")  # ... and no COMMIT after the claim
    return claims_in_one_statement(db, worker_id, now, lease_seconds)


def returns_the_old_token(db, worker_id, now, lease_seconds):
    db.execute("BEGIN IMMEDIATE")
    found = db.execute(CLAIMABLE_SQLITE.replace("SELECT id", "SELECT id, token") + " LIMIT 1", (now,))
    if found:
        db.execute(
            "UPDATE queue SET state = 'leased', worker_id = ?, token = token + 1, expires_at = ? WHERE id = ?",
            (worker_id, now + lease_seconds, found[0][0]),
        )
    db.execute("COMMIT")
    return tuple(found[0]) if found else None


def gives_up_when_locked(db, worker_id, now, lease_seconds):
    """Catches the lock error and says 'nothing to take': work is left on the table."""
    try:
        return reads_then_writes_in_a_deferred_transaction(db, worker_id, now, lease_seconds)
    except Exception:  # noqa: BLE001 - the mistake under test
        db.execute("ROLLBACK")
        return None


def checks_the_token_but_not_the_state(db, worker_id, now, lease_seconds):
    """A conditional write on the token alone: a stale owner that finished the item meanwhile left its
    token as it was, so the claim brings a finished item back."""
    for _ in range(3):
        found = db.execute(CLAIMABLE_SQLITE.replace("SELECT id", "SELECT id, token") + " LIMIT 1", (now,))
        if not found:
            return None
        item, token = found[0]
        changed = db.execute(
            "UPDATE queue SET state = 'leased', worker_id = ?, token = ?, expires_at = ? WHERE id = ? AND token = ? "
            "RETURNING id",
            (worker_id, token + 1, now + lease_seconds, item, token),
        )
        if changed:
            return item, token + 1
    return None


def returns_the_row_as_a_dict(db, worker_id, now, lease_seconds):
    found = claims_in_one_statement(db, worker_id, now, lease_seconds)
    return None if found is None else {"id": found[0], "token": found[1]}


SQLITE_CLAIM = Spec(
    exercise=lab08.sqlite_claim,
    right=(claims_in_one_statement, reads_then_writes_under_the_lock, retries_a_conditional_write),
    wrong=(
        refused(
            reads_then_writes,
            "P1 and P2 both claimed item-0001 (tokens 1 and 1): P2's claim picked the row before P1's claim had "
            "committed",
            "two claimers: P1 P2 P1 P2",
            "replay_claim(reads_then_writes, 'two claimers: P1 P2 P1 P2', database='sqlite')",
            "2. P2: SELECT id, token FROM",
        ),
        refused(
            reads_then_writes_in_a_deferred_transaction,
            "claim raised OperationalError: database is locked",
            "Take the write lock before you read",
            "gives up: its busy timeout runs out",
        ),
        refused(
            leaves_the_token_alone,
            "P1's claim of item-0001 returned token 0, but the token was 0 before it: a claim raises the token by one",
        ),
        refused(takes_ready_items_only, "claimed nothing, though item-0004 could be taken (its lease (W0, token 1)"),
        refused(
            takes_any_unfinished_item,
            "P2 claimed item-0001 under token 2 while P1's claim of it (token 1, until t=130) was live",
        ),
        refused(never_commits, "P1's claim returned with its transaction still open"),
        refused(returns_the_old_token, "P1's claim of item-0001 returned token 0, but the token was 0 before it"),
        refused(gives_up_when_locked, "P2 claimed nothing, though item-0004 could be taken"),
        refused(returns_the_row_as_a_dict, "P1's claim returned the dict", "return (item_id, token), or None"),
        refused(
            checks_the_token_but_not_the_state,
            "W0, whose lease had run out, completed item-0001 under token 1, and P1 claimed it too",
            "a stale writer: P1 W0 P1",
        ),
    ),
    secrets=("FOR UPDATE SKIP LOCKED", "token = token + 1"),  # the evidence shows the learner's own statements
)

(
    test_a_right_sql_claim_written_differently_is_accepted,
    test_a_plausible_wrong_sql_claim_is_refused_with_its_evidence,
    test_the_sql_claim_specification_has_enough_right_and_wrong_answers,
) = accuracy_tests(SQLITE_CLAIM)


# ---------------------------------------------------------------------------- 08.3, on PostgreSQL
class _Percent:
    """A PostgreSQL connection that takes SQLite's placeholders (and, told to, locks the row its
    subquery picks): one claim, written once, run on both."""

    def __init__(self, db, lock):
        self.db, self.lock = db, lock

    def execute(self, sql, params=()):
        return self.db.execute(sql.replace("?", "%s").replace(" LIMIT 1)", f" LIMIT 1{self.lock})"), params)


def on_postgres(claim, lock=""):
    def twin(db, worker_id, now, lease_seconds):
        return claim(_Percent(db, lock), worker_id, now, lease_seconds)

    twin.__name__ = twin.__qualname__ = f"postgres_{claim.__name__}"
    return twin


postgres_skips_locked_rows = on_postgres(claims_in_one_statement, " FOR UPDATE SKIP LOCKED")


def postgres_waits_for_locked_rows(db, worker_id, now, lease_seconds):
    """FOR UPDATE without SKIP LOCKED: claims queue behind each other, and still never share a row."""
    found = db.execute(f"{CLAIMABLE_POSTGRES} LIMIT 1 FOR UPDATE", (now,))
    if not found:
        return None
    (taken,) = db.execute(
        "UPDATE queue SET state = 'leased', worker_id = %s, token = token + 1, expires_at = %s WHERE id = %s "
        "RETURNING id, token",
        (worker_id, now + lease_seconds, found[0][0]),
    )
    return tuple(taken)


postgres_reads_then_writes = on_postgres(reads_then_writes)
# One statement is not one moment on PostgreSQL: the subquery picks before the UPDATE waits for
# the row's lock, so the claim SQLite runs whole races here.
postgres_one_statement_without_a_lock = on_postgres(claims_in_one_statement)


def postgres_leaves_the_token_alone(db, worker_id, now, lease_seconds):
    found = db.execute(
        CLAIMABLE_POSTGRES.replace("SELECT id", "SELECT id, token") + " LIMIT 1 FOR UPDATE SKIP LOCKED", (now,)
    )
    if not found:
        return None
    db.execute(
        "UPDATE queue SET state = 'leased', worker_id = %s, expires_at = %s WHERE id = %s",
        (worker_id, now + lease_seconds, found[0][0]),
    )
    return tuple(found[0])


postgres_takes_ready_items_only = on_postgres(takes_ready_items_only, " FOR UPDATE SKIP LOCKED")


POSTGRES_RIGHT = (postgres_skips_locked_rows, postgres_waits_for_locked_rows)
POSTGRES_WRONG = (
    (postgres_reads_then_writes, "P1 and P2 both claimed item-0001 (tokens 1 and 1)"),
    (
        postgres_one_statement_without_a_lock,
        "both claimed item-0001 (tokens 1 and 2): P2's claim picked the row before",
    ),
    (postgres_leaves_the_token_alone, "returned token 0, but the token was 0 before it"),
    (postgres_takes_ready_items_only, "claimed nothing, though item-0004 could be taken"),
)
needs_postgres = pytest.mark.skipif(
    not lab08.postgres_available(),
    reason="needs a PostgreSQL server: SHOPOPS_POSTGRES_URL=$(sh scripts/postgres.sh start /tmp/pg), and psycopg",
)


@needs_postgres
@pytest.mark.parametrize("answer", POSTGRES_RIGHT, ids=lambda a: a.__name__)
def test_a_right_postgres_claim_written_differently_is_accepted(answer):
    result = lab08.postgres_claim.result(answer)
    assert result.verdict is Verdict.CORRECT, str(result)
    assert "on PostgreSQL (READ COMMITTED)" in result.message


@needs_postgres
@pytest.mark.parametrize(("answer", "evidence"), POSTGRES_WRONG, ids=lambda a: getattr(a, "__name__", "evidence"))
def test_a_plausible_wrong_postgres_claim_is_refused_with_its_evidence(answer, evidence):
    result = lab08.postgres_claim.result(answer)
    assert result.verdict is Verdict.INCORRECT, str(result)
    assert evidence in str(result) and "database='postgresql'" in result.message
    assert not any(secret in str(result) for secret in ("FOR UPDATE", "SKIP LOCKED"))


def test_without_a_postgres_server_08_3_is_not_judged(monkeypatch):
    monkeypatch.delenv("SHOPOPS_POSTGRES_URL", raising=False)
    result = lab08.postgres_claim.result(postgres_skips_locked_rows)
    assert result.verdict is Verdict.NOT_JUDGED and "needs a PostgreSQL server" in result.message


def test_the_sql_claims_schedule_replays_to_the_same_story():
    message = lab08.sqlite_claim.result(reads_then_writes).message
    story = lab08.replay_claim(reads_then_writes, "two claimers: P1 P2 P1 P2")
    assert story.splitlines()[-1] == "broken: " + message.split(" The schedule:")[0]
    assert story == lab08.replay_claim(reads_then_writes, "two claimers: P1 P2 P1 P2")  # the same, every time


def test_a_killed_claimer_leaves_nothing_locked_and_the_next_one_claims():
    story = lab08.replay_claim(reads_then_writes_under_the_lock, "a kill: P1 killed after 2")
    assert "P1: is killed (SIGKILL) after 2 statements" in story
    assert "P2's claim returned ('item-0001', 1)" in story and story.endswith("nothing broken.")


def test_a_frozen_holder_keeps_its_lock_until_it_is_killed():
    told = lab08.frozen_holder(reads_then_writes_under_the_lock).splitlines()
    assert told[:4] == [
        "1. P1: BEGIN IMMEDIATE -> done",
        "2. P2: BEGIN IMMEDIATE -> waits: database is locked",
        "3. P1: is killed (SIGKILL) after 1 statement",
        "4. P2: BEGIN IMMEDIATE (again) -> done",
    ]
    assert "within one statement" in lab08.frozen_holder(claims_in_one_statement)
