"""The specification of lab 04's checks: a fenced result store, judged in five orders of
claims and writes, and which control rejects the stale completion."""
from __future__ import annotations

import pytest
from check_accuracy import Spec, accuracy_tests, refused

from shopops_lab.checks import lab04
from shopops_lab.checks.base import Wrong
from shopops_lab.errors import ShopOpsError, StaleTokenError
from shopops_lab.fencing import NaiveResultStore

# ---------------------------------------------------------------------------- 04.1 right, written differently


class AcceptsOnlyTheNewest(NaiveResultStore):
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        newest = self.current_token(job_id)
        if newest > 0 and token == newest:
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


OnlyOlder = fence(lambda store, job, token, worker: token < store.current_token(job))
RefusesTheHolder = fence(lambda store, job, token, worker: token <= store.current_token(job))
OnlyOnceAResultExists = fence(lambda store, job, token, worker:
                              store.result(job) is not None and token != store.current_token(job))
ForgetsTheUnclaimedJob = fence(lambda store, job, token, worker: token != store.current_token(job))
OnlyOlder.__name__, RefusesTheHolder.__name__ = "OnlyOlder", "RefusesTheHolder"
OnlyOnceAResultExists.__name__, ForgetsTheUnclaimedJob.__name__ = "OnlyOnceAResultExists", "ForgetsTheUnclaimedJob"


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
        if token != current or current == 0:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)


class SwappedTokens(NaiveResultStore):
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        current = self.current_token(job_id)
        if token != current or current == 0:
            raise StaleTokenError(what=f"job {job_id}", token=current, current=token)
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class WrongError(NaiveResultStore):
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        if token != self.current_token(job_id) or not token:
            raise ShopOpsError(detail="no")
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)


class NotAStore:
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        return None


STORE = Spec(
    exercise=lab04.exercise,
    right=(AcceptsOnlyTheNewest, KeepsItsOwnLedger),
    wrong=(
        refused(NaiveResultStore, "stale write second (seed 1)", "then A wrote with token", "and the store accepted it",
                "a token older than the newest one belongs to a claim that is over"),
        refused(OnlyOnceAResultExists, "stale write first (seed 1)", "whether or not anything is stored yet"),
        refused(OnlyOlder, "forged tokens (seed 1)", "a token the store never issued (", "whoever sends it"),
        refused(FencesOnTheName, "forged tokens (seed 1)", "then B wrote with a token the store never issued"),
        refused(ForgetsTheUnclaimedJob, "never claimed (seed 1): nobody has claimed",
                "a token the store never issued (0, while none was ever issued)"),
        refused(RefusesTheHolder, "the current one, and the store refused it with StaleTokenError"),
        refused(WritesThenRefuses, "a refused write must change nothing", "Decide before you write"),
        refused(SwappedTokens, "should say which token the write carried and which one is current"),
        refused(WrongError, "was refused, but with ShopOpsError; raise StaleTokenError"),
        refused(NotAStore, "NotAStore is not a subclass of NaiveResultStore"),
        refused(AcceptsOnlyTheNewest(), "this check needs your class FencedResultStore itself",
                "an AcceptsOnlyTheNewest object"),
    ),
    secrets=("token != current", "current_token(job_id)", "current == 0"),
)


@pytest.mark.parametrize(("situation", "store"), [
    ("stale write second", NaiveResultStore),
    ("stale write first", OnlyOnceAResultExists),
    ("forged tokens", OnlyOlder),
    ("re-claimed by the same worker", FencesOnTheName),
    ("never claimed", ForgetsTheUnclaimedJob),
])
def test_each_order_of_claims_and_writes_alone_refuses_the_store_it_is_there_for(situation, store):
    """The check covers every order of the issue: each one, played on its own, refuses the
    store whose mistake it is there to show."""
    (name, play, lesson), = [s for s in lab04.SITUATIONS if s[0] == situation]
    with pytest.raises(Wrong) as caught:
        play(lab04._Story(store, 1, "job-x", name, lesson))
    assert str(caught.value).startswith(f"{situation} (seed 1): ") and lesson in str(caught.value)


# ---------------------------------------------------------------------------- 04.2

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
    ),
)

(test_a_right_answer_written_differently_is_accepted,
 test_a_plausible_wrong_answer_is_refused_with_its_evidence,
 test_the_specification_has_enough_right_and_wrong_answers) = accuracy_tests(STORE, CONTROL)
