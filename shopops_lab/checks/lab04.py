"""Lab 04: the store, not the worker, must refuse a completion under an old token.

The check plays five orders of claims and writes on fresh stores, on five seeds each: a
stale write after the new holder's and one before it (nothing stored yet), tokens never
issued (from a stranger, or under the holder's own name), a worker that claimed again and
still sends its first token, and a job nobody claimed. Only the token may decide: a store
that looks at the worker's name, or at whether a result exists, fails one of them.
"""
from __future__ import annotations

import random

from shopops_lab.checks.base import Exercise, Wrong, attempt, call_answer, describe
from shopops_lab.clock import FakeClock
from shopops_lab.errors import StaleTokenError
from shopops_lab.fencing import NaiveResultStore
from shopops_lab.widgets.quiz import Quiz

SEEDS = (1, 2, 3, 4, 5)


class _Story:
    """One seeded situation on a fresh store: claims happen, writes arrive, and each write
    must be accepted or refused. A write is judged by its token only; the worker's name
    and whether a result is stored yet must not matter."""

    def __init__(self, store_class, seed: int, job: str, situation: str, lesson: str) -> None:
        self.rng = random.Random(seed)
        self.seed, self.job, self.situation, self.lesson = seed, job, situation, lesson
        self.store = store_class(clock=FakeClock())
        self.told: list[str] = []

    def claim(self, worker: str) -> int:
        token = self.store.claim(self.job, worker)
        self.told.append(f"{worker} claims {self.job}: token {token}")
        self.store.clock.advance(self.rng.randint(1, 4))
        return token

    def earlier_claims(self) -> None:
        """Workers that came and went before the story begins (their tokens are long stale)."""
        for n in range(self.rng.randint(1, 3)):
            self.claim(f"W{n + 1}")

    def _what(self) -> str:
        return f"{self.situation} (seed {self.seed}): " + ("; ".join(self.told) or f"nobody has claimed {self.job}")

    def _held(self) -> tuple:
        return self.store.result(self.job), self.store.written_by(self.job)

    def accepts(self, worker: str, token: int) -> None:
        """A write that must be accepted: `token` is the job's current token."""
        result = {"decision": f"by {worker}", "token": token}
        _, err = attempt(self.store.complete, self.job, result, token=token, worker_id=worker)
        if err is not None:  # the learner's store: report what it did
            raise Wrong(f"{self._what()}; then {worker} wrote with token {token}, the current one, and the store "
                        f"refused it with {type(err).__name__}: only tokens other than the current one may be "
                        "refused.", [str(err)])
        self.told.append(f"{worker} writes with token {token}: accepted")
        if self.store.result(self.job) != result:
            raise Wrong(f"{self._what()}; but the store holds {self.store.result(self.job)}: an accepted write "
                        "must be stored.")

    def refuses(self, worker: str, token: int, *, current: int) -> None:
        """A write that must be refused with StaleTokenError(token=token, current=current),
        leaving the store exactly as it was."""
        before = self._held()
        _, err = attempt(self.store.complete, self.job, {"decision": f"by {worker}", "token": token},
                         token=token, worker_id=worker)
        if isinstance(err, StaleTokenError):
            said = (getattr(err, "token", None), getattr(err, "current", None))
            if said != (token, current):
                raise Wrong(f"{self._what()}; {worker}'s write with token {token} was refused, but the "
                            f"StaleTokenError should say which token the write carried and which one is current "
                            f"(token={token}, current={current}); it said token={said[0]}, current={said[1]}.",
                            [str(err)])
        elif err is not None:  # the learner's store: report what it did
            raise Wrong(f"{self._what()}; {worker}'s write with token {token} was refused, but with "
                        f"{type(err).__name__}; raise StaleTokenError so the caller knows it lost ownership.",
                        [str(err)])
        else:
            newest = f"the newest is {current}" if current else "none was ever issued"
            issued = (f"a token the store never issued ({token}, while {newest})"
                      if token > current or token < 1 else f"token {token}, while {newest}")
            raise Wrong(f"{self._what()}; then {worker} wrote with {issued}, and the store accepted it: "
                        f"{self.lesson}. Refuse every token except the current one.",
                        [f"the store now holds {self.store.result(self.job)}, written by "
                         f"{self.store.written_by(self.job)}"])
        if self._held() != before:
            raise Wrong(f"{self._what()}; {worker}'s write with token {token} was refused, but the store now holds "
                        f"{self.store.result(self.job)} written by {self.store.written_by(self.job)}: a refused write "
                        "must change nothing. Decide before you write.")
        self.told.append(f"{worker} writes with token {token}: refused")


def _stale_second(story: _Story) -> None:
    story.earlier_claims()
    a, b = story.claim("A"), story.claim("B")
    story.accepts("B", b)
    story.refuses("A", a, current=b)
    story.accepts("B", b)          # the holder may write again


def _stale_first(story: _Story) -> None:
    story.earlier_claims()
    a, b = story.claim("A"), story.claim("B")
    story.refuses("A", a, current=b)   # nothing stored yet: still stale
    story.accepts("B", b)


def _forged(story: _Story) -> None:
    story.earlier_claims()
    a, b = story.claim("A"), story.claim("B")
    story.refuses("B", b + story.rng.randint(1, 9), current=b)   # under the holder's own name, first write
    story.refuses("A", 0, current=b)
    story.accepts("B", b)
    story.refuses("B", a, current=b)                              # the holder's name, somebody's old token


def _reclaimed(story: _Story) -> None:
    story.earlier_claims()
    first, b = story.claim("A"), story.claim("B")
    again = story.claim("A")                                      # A takes it back with a new token
    story.refuses("A", first, current=again)
    story.refuses("B", b, current=again)
    story.accepts("A", again)


def _never_claimed(story: _Story) -> None:
    story.refuses("A", 0, current=0)                              # nobody ever claimed this job
    story.refuses("A", 1, current=0)
    story.accepts("A", story.claim("A"))


# (the situation, how it plays, what an accepted refusal-worthy write there shows)
SITUATIONS = (
    ("stale write second", _stale_second, "a token older than the newest one belongs to a claim that is over"),
    ("stale write first", _stale_first, "a stale token is stale whether or not anything is stored yet"),
    ("forged tokens", _forged, "a token that is not the newest belongs to no live claim, whoever sends it"),
    ("re-claimed by the same worker", _reclaimed,
     "a claim ends when a newer one is issued, even to the same worker: the token says which claim a write "
     "belongs to, the name cannot"),
    ("never claimed", _never_claimed, "nobody holds a job that was never claimed, so no token is current for it"),
)


def _run(store_class) -> str:
    if not issubclass(store_class, NaiveResultStore):
        raise Wrong(f"{store_class.__name__} is not a subclass of NaiveResultStore: write "
                    "class FencedResultStore(NaiveResultStore) and override complete(...).")
    for seed in SEEDS:
        for n, (situation, play, lesson) in enumerate(SITUATIONS):
            play(_Story(store_class, seed, f"job-{seed}{n}", situation, lesson))
    return (f"in {len(SEEDS)} seeded runs of {len(SITUATIONS)} situations (a stale write second and first, forged "
            "tokens, a worker that re-claimed, a job never claimed) the store refused every token but the current "
            "one, changed nothing when it refused, and accepted the current holder's writes.")


exercise = Exercise(
    id="04.1", title="fence the result store", answer="FencedResultStore", run=_run, wants_class=True,
    hints=("Which part of the system knows the newest token for a job? That is where the check must live.",
           "self.current_token(job_id) gives the newest token; StaleTokenError(what=..., token=..., current=...) "
           "is the error to raise; super().complete(...) does the actual write.",
           "Shape: compare the token you were given with the current one; refuse unless they are equal and "
           "somebody has claimed the job (the current token is above 0), otherwise hand over to the parent class."),
)


# ------------------------------------------------------------------ knowledge check
# The labels `rejecting_control()` may return, one per control in the story.
CONTROLS = ("worker_lease_check", "lease_expiry", "store_token_check", "idempotency_key")

_WHY_NOT = {
    "worker_lease_check": ("the stale worker's look at its own lease deadline happened in its own memory, "
                           "before the pause; when it wakes it writes without looking again, and nothing "
                           "outside it stops the write."),
    "lease_expiry": ("the expiry let the new worker claim the job, but it stops nothing: the stale worker "
                     "never hears that its lease ended, and a store that does not compare tokens accepts "
                     "its write."),
    "idempotency_key": ("a key makes a repeated operation return the first result; it does not know who owns "
                        "the job, and the stale worker's completion is a different write, not a repeat."),
}


def _control(rejecting_control) -> str:
    label = call_answer(rejecting_control)
    if not isinstance(label, str) or label not in CONTROLS:
        raise Wrong(f"rejecting_control() returned {describe(label)}; return one of the labels in lab04.CONTROLS: "
                    f"{', '.join(CONTROLS)}.")
    if label in _WHY_NOT:
        raise Wrong(f"{label!r} does not reject the stale completion: {_WHY_NOT[label]}")
    return ("the authoritative store compares the stale worker's token 4 with its current token 5 at the moment "
            "of the write and refuses it, whatever the worker believes.")


knowledge = Exercise(
    id="04.2", title="which control rejects the stale completion", answer="rejecting_control", run=_control,
    hints=("Ask of each control: where does it run, and does it run at the moment the stale write arrives?",
           "A paused worker checks nothing while it is paused, and a check inside the worker cannot help once it "
           "has woken up and decided to write: look for a check made by whoever receives the write."),
)


# ------------------------------------------------------------------ quizzes
# Kept here, not in the notebook, so the cell that shows a quiz does not show its answer.

PAYMENT_GUARD_QUIZ = Quiz(
    "The result store now refuses W1's token 4. Still stale, W1 asks the payment provider to refund "
    "Jordan's 40 EUR. What prevents a refund on top of W7's voucher?",
    ["The result store's token check.",
     "The queue, because it refused W1's ack.",
     "Only a guard on the payment call itself: an idempotency key for this refund, a token the provider "
     "checks, or a go-between that checks W1's token before calling the provider.",
     "W1's lease expiry at t=10."],
    2,
    ["The store checks writes to the store. The payment call never passes through it.",
     "The ack comes after the work; by then the refund has been requested.",
     "A token protects only what compares it. Anything else needs an idempotency key or a fencing check of its own, "
     "or must be reached through something that checks the token.",
     "The expiry let W7 in; it did nothing to stop W1, which never noticed it."],
)
