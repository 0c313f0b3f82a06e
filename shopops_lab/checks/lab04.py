"""Lab 04: the store, not the worker, must refuse a completion under an old token."""
from __future__ import annotations

import random

from shopops_lab.checks.base import Exercise, NotAttempted, Wrong, call_answer
from shopops_lab.clock import FakeClock
from shopops_lab.errors import ShopOpsError, StaleTokenError
from shopops_lab.fencing import NaiveResultStore

SEEDS = (1, 2, 3, 4, 5)



def _holder_writes(store, job_id, result, token, worker, why) -> None:
    """A write that must be accepted: the worker holds the job's current token."""
    try:
        call_answer(store.complete, job_id, result, token=token, worker_id=worker)
    except ShopOpsError as err:
        raise Wrong(f"{worker} holds the current token {token} for {job_id} ({why}), yet its completion was "
                    f"refused with {type(err).__name__}: only tokens other than the current one may be refused.",
                    [str(err)]) from None


def _run(store_class) -> str:
    if store_class is None:
        raise NotAttempted()
    if not (isinstance(store_class, type) and issubclass(store_class, NaiveResultStore)):
        what = f"an instance of {type(store_class).__name__}" if not isinstance(store_class, type) else store_class.__name__
        raise Wrong(f"the check got {what}; pass the class itself (a subclass of NaiveResultStore), "
                    "e.g. check(FencedResultStore), not FencedResultStore().")
    for seed in SEEDS:
        rng = random.Random(seed)
        clock = FakeClock()
        store = store_class(clock=clock)
        job = f"job-{seed:04d}"
        for n in range(rng.randint(1, 4)):  # earlier claims that came and went
            store.claim(job, f"W{n + 1}")
            clock.advance(rng.randint(1, 3))
        token_a = store.claim(job, "A")
        clock.advance(rng.randint(5, 10))          # A stalls past its lease ...
        token_b = store.claim(job, "B")            # ... and B takes over
        clock.advance(1)
        _holder_writes(store, job, {"summary": "by B"}, token_b, "B", f"B claimed it after A's token {token_a}")
        clock.advance(rng.randint(1, 5))
        try:
            call_answer(store.complete, job, {"summary": "by A"}, token=token_a, worker_id="A")
        except StaleTokenError as err:
            said = (getattr(err, "token", None), getattr(err, "current", None))
            if said != (token_a, token_b):
                raise Wrong(f"A's stale write was refused, but the StaleTokenError should say which token A "
                            f"carried and which one is current (token={token_a}, current={token_b}); it said "
                            f"token={said[0]}, current={said[1]} (seed {seed}).", [str(err)]) from None
        except ShopOpsError as err:
            raise Wrong(f"A's stale completion was refused, but with {type(err).__name__}; raise StaleTokenError "
                        "so the caller knows it lost ownership.", [str(err)]) from None
        else:
            raise Wrong(f"worker A completed {job} with token {token_a} after B had claimed token {token_b}, and the "
                        f"store accepted it (seed {seed}): A's result replaced B's.",
                        [f"the store now holds {store.result(job)}, written by {store.written_by(job)}"])
        if store.result(job) != {"summary": "by B"} or store.written_by(job) != ("B", token_b):
            raise Wrong(f"after refusing A, the store holds {store.result(job)} written by {store.written_by(job)}: "
                        f"a refused write must change nothing (B's result, token {token_b}, should still be there): "
                        f"decide before you write (seed {seed}).")
        _holder_writes(store, job, {"summary": "by B, again"}, token_b, "B", "a second write by the holder")
        if store.result(job) != {"summary": "by B, again"}:
            raise Wrong("the current holder's second write was lost: only older (or never-issued) tokens are refused.")
        forged = token_b + 7
        try:
            call_answer(store.complete, job, {"summary": "forged"}, token=forged, worker_id="M")
        except ShopOpsError:
            pass
        else:
            raise Wrong(f"a token the store never issued ({forged}, while the newest is {token_b}) was accepted: "
                        "refuse every token except the current one, not only older ones.",
                        [f"the store now holds {store.result(job)}, written by {store.written_by(job)}"])
        first_a = store.claim(f"{job}-fresh", "A")
        _holder_writes(store, f"{job}-fresh", {"ok": True}, first_a, "A", "the first claim on a fresh job")
    return (f"in {len(SEEDS)} seeded runs the store refused every stale or forged token, kept B's result, and "
            "accepted the current holder's writes.")


exercise = Exercise(
    id="04.1", title="fence the result store", run=_run,
    hints=("Which part of the system knows the newest token for a job? That is where the check must live.",
           "self.current_token(job_id) gives the newest token; StaleTokenError(what=..., token=..., current=...) "
           "is the error to raise; super().complete(...) does the actual write.",
           "Shape: compare the token you were given with the current one; refuse unless they are equal, "
           "otherwise hand over to the parent class."),
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
    if label not in CONTROLS:
        raise Wrong(f"rejecting_control() returned {label!r}; return one of the labels in lab04.CONTROLS: "
                    f"{', '.join(CONTROLS)}.")
    if label in _WHY_NOT:
        raise Wrong(f"{label!r} does not reject the stale completion: {_WHY_NOT[label]}")
    return ("the authoritative store compares the stale worker's token 4 with its current token 5 at the moment "
            "of the write and refuses it, whatever the worker believes.")


knowledge = Exercise(
    id="04.2", title="which control rejects the stale completion", run=_control,
    hints=("Ask of each control: where does it run, and does it run at the moment the stale write arrives?",
           "A paused worker checks nothing while it is paused, and a check inside the worker cannot help once it "
           "has woken up and decided to write: look for a check made by whoever receives the write."),
)
