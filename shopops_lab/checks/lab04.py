"""Lab 04: the store, not the worker, must refuse a completion under an old token."""
from __future__ import annotations

import random

from shopops_lab.checks.base import Exercise, NotAttempted, Wrong
from shopops_lab.clock import FakeClock
from shopops_lab.errors import ShopOpsError, StaleTokenError
from shopops_lab.fencing import NaiveResultStore

SEEDS = (1, 2, 3, 4, 5)


def _complete(store, job_id, result, token, worker):
    try:
        store.complete(job_id, result, token=token, worker_id=worker)
    except NotImplementedError:
        raise NotAttempted() from None


def _run(store_class) -> str:
    if store_class is None:
        raise NotAttempted()
    if not (isinstance(store_class, type) and issubclass(store_class, NaiveResultStore)):
        raise Wrong("pass the class itself (a subclass of NaiveResultStore), not an instance.")
    for seed in SEEDS:
        rng = random.Random(seed)
        clock = FakeClock()
        store = store_class(clock=clock)
        job = f"job-{seed:04d}"
        for n in range(rng.randint(1, 4)):  # earlier claims that came and went
            store.claim(job, f"W{n + 1}")
        token_a = store.claim(job, "A")
        clock.advance(rng.randint(5, 10))          # A stalls past its lease ...
        token_b = store.claim(job, "B")            # ... and B takes over
        _complete(store, job, {"summary": "by B"}, token_b, "B")
        try:
            _complete(store, job, {"summary": "by A"}, token_a, "A")
        except StaleTokenError as err:
            if (getattr(err, "token", None), getattr(err, "current", None)) != (token_a, token_b):
                raise Wrong(f"the StaleTokenError should name both tokens (token={token_a}, current={token_b}); "
                            f"it said token={getattr(err, 'token', None)}, current={getattr(err, 'current', None)}.")
        except ShopOpsError as err:
            raise Wrong(f"A's stale completion was refused, but with {type(err).__name__}; raise StaleTokenError so "
                        "the caller knows it lost ownership.") from None
        else:
            raise Wrong(f"worker A completed {job} with token {token_a} after B had claimed token {token_b}, and the "
                        f"store accepted it (seed {seed}).",
                        [f"store holds {store.result(job)} written by {store.written_by(job)}"])
        if store.result(job) != {"summary": "by B"}:
            raise Wrong(f"after refusing A, the store holds {store.result(job)}: a refused write must change nothing.")
        _complete(store, job, {"summary": "by B, again"}, token_b, "B")  # the holder may write twice
        if store.result(job) != {"summary": "by B, again"}:
            raise Wrong("the current holder's second write was lost: only older (or never-issued) tokens are refused.")
        try:
            _complete(store, job, {"summary": "forged"}, token_b + 7, "M")
        except ShopOpsError:
            pass
        else:
            raise Wrong(f"a token the store never issued ({token_b + 7}) was accepted: only the current token may write.")
        first_a = store.claim(f"{job}-fresh", "A")
        _complete(store, f"{job}-fresh", {"ok": True}, first_a, "A")
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
