"""The specification of lab 04's checks: a fenced result store, judged on every schedule of
claims and writes within the check's bound (the shortest breaking one shown), and which
control rejects the stale completion."""

from __future__ import annotations

import pytest
from check_accuracy import Spec, accuracy_tests, refused, replay_tests

from shopops_lab.checks import lab04
from shopops_lab.errors import ShopOpsError, StaleTokenError
from shopops_lab.fencing import NaiveResultStore, TokenFence

# ---------------------------------------------------------------------------- 04.1 right, written differently


class AcceptsOnlyTheNewest(NaiveResultStore):
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        newest = self.current_token(job_id)
        if newest is not None and token == newest:
            return super().complete(job_id, result, token=token, worker_id=worker_id, now=now)
        raise StaleTokenError(what=f"the result of {job_id}", token=token, current=newest)


class KeepsItsOwnLedger(NaiveResultStore):
    """Remembers every token it hands out, and takes a write only under the last one."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.issued = {}

    def claim(self, job_id, worker_id, *, now=None):
        token = super().claim(job_id, worker_id, now=now)
        self.issued.setdefault(job_id, []).append(token)
        return token

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        tokens = self.issued.get(job_id, [])
        latest = tokens[-1] if tokens else 0
        if not tokens or token != latest:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=latest)
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


# ---------------------------------------------------------------------------- 04.1 wrong, as learners write them


def fence(condition):
    """A store that refuses a write, with the right error, when `condition(store, job, token, worker)`."""

    class Store(NaiveResultStore):
        def complete(self, job_id, result, *, token, worker_id=None, now=None):
            current = self.current_token(job_id)
            if condition(self, job_id, token, worker_id):
                raise StaleTokenError(what=f"job {job_id}", token=token, current=current)
            super().complete(job_id, result, token=token, worker_id=worker_id, now=now)

    return Store


def _claimed(store, job):
    return store.current_token(job) is not None


OnlyOlder = fence(lambda store, job, token, worker: _claimed(store, job) and token < store.current_token(job))
RefusesTheHolder = fence(
    lambda store, job, token, worker: not _claimed(store, job) or token <= store.current_token(job)
)
OnlyOnceAResultExists = fence(
    lambda store, job, token, worker: store.result(job) is not None and token != store.current_token(job)
)
ForgetsTheUnclaimedJob = fence(
    lambda store, job, token, worker: _claimed(store, job) and token != store.current_token(job)
)
RefusesOnlyTokensBelowTheCurrentOne = fence(  # "older or never issued" read as "older": 99 gets through
    lambda store, job, token, worker: not _claimed(store, job) or token < store.current_token(job)
)
RefusesOnlyTokensBelowTheCurrentOne.__name__ = "RefusesOnlyTokensBelowTheCurrentOne"
OnlyOlder.__name__, RefusesTheHolder.__name__ = "OnlyOlder", "RefusesTheHolder"
OnlyOnceAResultExists.__name__, ForgetsTheUnclaimedJob.__name__ = "OnlyOnceAResultExists", "ForgetsTheUnclaimedJob"


class JustComparesWithTheCurrentToken(NaiveResultStore):
    """The natural answer: None before any claim equals no token, so nothing more is needed."""

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        current = self.current_token(job_id)
        if token != current:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class SaysZeroBeforeAnyClaim(NaiveResultStore):
    """Right too: reports "no token yet" as 0 in its error, as the kit's TokenFence.current() does."""

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        current = self.current_token(job_id) or 0
        if current == 0 or token != current:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class FencesOnTheName(NaiveResultStore):
    """Remembers who claimed last and lets only that worker write, whatever token it sends."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.holder = {}

    def claim(self, job_id, worker_id, *, now=None):
        self.holder[job_id] = worker_id
        return super().claim(job_id, worker_id, now=now)

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        if worker_id != self.holder.get(job_id):
            raise StaleTokenError(what=f"job {job_id}", token=token, current=self.current_token(job_id))
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class WritesThenRefuses(NaiveResultStore):
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)
        current = self.current_token(job_id)
        if token != current:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)


class SwappedTokens(NaiveResultStore):
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        current = self.current_token(job_id)
        if token != current:
            raise StaleTokenError(what=f"job {job_id}", token=current, current=token)
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class WrongError(NaiveResultStore):
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        if token != self.current_token(job_id) or not token:
            raise ShopOpsError(detail="no")
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class LocksOntoTheFirstWriter(NaiveResultStore):
    """Fences the first write by token, then trusts whoever wrote first (the issue's store)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.owner = {}

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        current = self.current_token(job_id)
        owner = self.owner.get(job_id)
        if (owner is None and token != current) or (owner is not None and worker_id != owner):
            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)
        self.owner.setdefault(job_id, worker_id)
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class RemembersTheFirstToken(NaiveResultStore):
    """Accepts the token of the first accepted write ever after (the issue's other store)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.first = {}

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        current = self.current_token(job_id)
        expected = self.first.get(job_id, current)
        if token != expected:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)
        self.first[job_id] = token
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class RefusesOnlyTheTokenJustBefore(NaiveResultStore):
    """A fixed count: only the token one below the newest is treated as stale."""

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        current = self.current_token(job_id)
        if current is None or token == current - 1:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class HidesItsWrite(NaiveResultStore):
    """Writes before deciding, then forges what result() reports so the refusal looks clean."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.shown = {}

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)
        current = self.current_token(job_id)
        if token != current:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)
        self.shown[job_id] = (result, (worker_id, token))

    def result(self, job_id):
        return self.shown.get(job_id, (None, None))[0]

    def written_by(self, job_id):
        return self.shown.get(job_id, (None, None))[1]


class KeepsTheWriterInAClassAttribute(NaiveResultStore):
    """Right, written with its ledger of claims in a class attribute: each fresh store (each
    schedule) starts from a fresh class, so nothing leaks from one schedule into the next."""

    claims = {}

    def claim(self, job_id, worker_id, *, now=None):
        token = super().claim(job_id, worker_id, now=now)
        type(self).claims[job_id] = token
        return token

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        newest = type(self).claims.get(job_id)
        if newest is None or token != newest:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=newest or 0)
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class DelegatesToTheKitFence(NaiveResultStore):
    """Hands the decision to the kit's TokenFence instead of writing the comparison."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.fence = TokenFence("job")

    def claim(self, job_id, worker_id, *, now=None):
        token = super().claim(job_id, worker_id, now=now)
        self.fence.observe(job_id, token, worker_id=worker_id)
        return token

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        self.fence.check(job_id, token, t=0, op="complete")
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class NotAStore:
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        return None


BOUND = "checked all 4,032 schedules of W7 (claim, write, write), W9 (claim, write, claim, write)"

STORE = Spec(
    exercise=lab04.exercise,
    right=(
        AcceptsOnlyTheNewest,
        KeepsItsOwnLedger,
        KeepsTheWriterInAClassAttribute,
        JustComparesWithTheCurrentToken,
        SaysZeroBeforeAnyClaim,
    ),
    wrong=(
        refused(
            NaiveResultStore,
            "the store accepted X's write with token 0, a token it never issued (nobody has claimed job-1)",
            "The shortest schedule that shows it (1 step): X write",
            'lab04.replay(NaiveResultStore, "X write")',
            "1. X's write with token 0: accepted",
        ),
        refused(OnlyOnceAResultExists, "the store accepted X's write with token 0, a token it never issued"),
        refused(OnlyOlder, "the store accepted X's write with token 0, a token it never issued"),
        refused(
            RefusesOnlyTokensBelowTheCurrentOne,
            "the store accepted Y's write with token 99, a token it never issued (the newest is 1)",
            "(2 steps): W7 claim · Y write",
            'lab04.replay(RefusesOnlyTokensBelowTheCurrentOne, "W7 claim · Y write")',
        ),
        refused(
            FencesOnTheName,
            "the store accepted W9's late copy of its write with token 1, while token 2 (W9's claim) is the newest",
            "whoever sends it",
            "(4 steps): W9 claim · W9 write · W9 claim · W9 write again",
        ),
        refused(
            ForgetsTheUnclaimedJob,
            "the store accepted X's write with token 0, a token it never issued (nobody has claimed job-1)",
        ),
        refused(
            RefusesTheHolder,
            "the store refused W7's write with token 1, the newest token, with StaleTokenError",
            "(2 steps): W7 claim · W7 write",
        ),
        refused(WritesThenRefuses, "a refused write must change nothing", "Decide before you write"),
        refused(
            SwappedTokens,
            "its StaleTokenError said token=None, current=0; it should say which token the write "
            "carried and which one is current (token=0, current=None, as current_token() says before any claim)",
        ),
        refused(WrongError, "the store refused X's write with token 0 with ShopOpsError, not StaleTokenError"),
        refused(
            LocksOntoTheFirstWriter,
            "the store accepted W7's write with token 1, while token 2 (W9's claim) is the newest",
            "(4 steps): W7 claim · W7 write · W9 claim · W7 write",
            'lab04.replay(LocksOntoTheFirstWriter, "W7 claim · W7 write · W9 claim · W7 write")',
        ),
        refused(
            RemembersTheFirstToken,
            "the store accepted W7's write with token 1, while token 2 (W9's claim) is the newest",
            "W7 claim · W7 write · W9 claim · W7 write",
        ),
        refused(
            RefusesOnlyTheTokenJustBefore,
            "the store accepted X's write with token 0, a token it never issued (the newest is 2)",
            "(3 steps): W7 claim · W9 claim · X write",
        ),
        refused(
            HidesItsWrite,
            "the store refused X's write with token 0, but it now holds the dict",
            "a refused write must change nothing",
        ),
        refused(
            DelegatesToTheKitFence,
            "the store hands the decision to the kit's TokenFence, which already implements this rule",
        ),
        refused(NotAStore, "NotAStore is not a subclass of NaiveResultStore"),
        refused(
            AcceptsOnlyTheNewest(),
            "this check needs your class FencedResultStore itself",
            "an AcceptsOnlyTheNewest object",
        ),
    ),
    secrets=("token != current", "current_token(job_id)", "is not None"),
    replay=lambda answer, schedule, message: lab04.replay(answer, schedule),
)


def test_the_issue_schedule_refuses_the_stale_writer_and_replays_without_a_seed():
    """W7 writes, W9 claims, stale W7 writes again: refused by a fenced store, accepted by
    the store that locks onto its first writer, and the replay says so step by step."""
    schedule = "W7 claim · W7 write · W9 claim · W7 write"
    good, bad = lab04.replay(AcceptsOnlyTheNewest, schedule), lab04.replay(LocksOntoTheFirstWriter, schedule)
    assert good.problem is None and "4. W7's write with token 1: refused (StaleTokenError)" in str(good)
    assert bad.problem.startswith("the store accepted W7's write with token 1, while token 2")
    assert str(bad).splitlines()[3] == "4. W7's write with token 1: accepted"
    svg = bad.diagram().svg
    assert (
        'role="img"' in svg
        and "aria-label=" in svg
        and svg == lab04.replay(LocksOntoTheFirstWriter, schedule).diagram().svg
    )


def test_a_right_store_is_told_the_bound_it_was_checked_in():
    assert lab04.exercise.result(AcceptsOnlyTheNewest).message.startswith(BOUND)


def test_a_schedule_that_cannot_happen_is_a_bad_argument():
    with pytest.raises(ShopOpsError, match="schedule"):
        lab04.replay(AcceptsOnlyTheNewest, "W7 write")


# ---------------------------------------------------------------------------- 04.2


class AlwaysEqual(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


def returns_a_string_that_equals_anything():
    """A look-alike that says yes to every comparison: judged by the text it holds."""
    return AlwaysEqual("yes")


def names_it_by_position():
    return lab04.CONTROLS[2]


def finds_the_store():
    return next(control for control in lab04.CONTROLS if control.startswith("store"))


CONTROL = Spec(
    exercise=lab04.knowledge,
    right=(names_it_by_position, finds_the_store),
    wrong=(
        refused(
            lambda: "worker_lease_check",
            "'worker_lease_check' does not reject",
            "in its own memory",
            hidden=("store_token_check",),
        ),
        refused(
            lambda: "lease_expiry", "'lease_expiry' does not reject", "stops nothing", hidden=("store_token_check",)
        ),
        refused(
            lambda: "idempotency_key",
            "'idempotency_key' does not reject",
            "a different write",
            hidden=("store_token_check",),
        ),
        refused(lambda: {"store_token_check"}, "returned the set {'store_token_check'}", "return one of the labels"),
        refused(lambda: None, "returned None", "return one of the labels"),
        refused(lambda: "store token check", "returned the str 'store token check'"),
        refused(lambda: "the store", "returned the str 'the store'"),
        refused(returns_a_string_that_equals_anything, "returned the str 'yes'", "return one of the labels"),
    ),
)

(
    test_a_right_answer_written_differently_is_accepted,
    test_a_plausible_wrong_answer_is_refused_with_its_evidence,
    test_the_specification_has_enough_right_and_wrong_answers,
) = accuracy_tests(STORE, CONTROL)
test_the_schedule_a_refusal_shows_replays_to_the_same_problem = replay_tests(STORE)
