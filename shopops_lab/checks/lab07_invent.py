"""Lab 07, exercise 7.5: a failure of the learner's own, and the invariant that catches it.

The chapter ends by asking for "a failure you want to test". The learner writes a class,
`MyChaosTest`, with two methods:

- `fault(self)`: the failure, with the simulator's own fault API: a `Fault` (or a list of up to
  five), such as `Fault("kill_worker", item="O-1001", point="after_send")`;
- `invariant(self, log)`: what must hold in any run under that failure, read from the run's
  event log: it raises `AssertionError` when the run broke it, and returns quietly otherwise.

The check plays a 200-item burst day (seed 21, no other chaos: exactly the learner's faults)
three times. First with the kit's correct worker: the fault must strike, and the invariant
must pass (a test that fails a correct system is switched off by the next person who meets
it). Then twice with a bug planted, each a mistake an earlier lab taught: sends without an
idempotency key (the naive adapter: a redelivery reaches the customer again), and checkpoint
writes the store does not fence (a stale worker's write is taken). Whether a bug really broke
the run is read from a record the invariant is never handed (the provider's ledger, the
store's own note of a stale write, which is taken out of the log the invariant reads). Under
the learner's fault at least one bug must really break the run, the invariant must catch it,
and it must never fail a run that broke nothing. The invariant reads the log's events, not the
kit's checker (an answer that hands the log to `check` is refused).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shopops_lab.checker.verdict import check as checker_check
from shopops_lab.checks.base import Exercise, Wrong, attempt, call_answer, describe, error_text, watching
from shopops_lab.checks.lab07_chaos import is_assertion
from shopops_lab.effects import ContactLedger
from shopops_lab.events import EventKind, EventLog
from shopops_lab.sim import Fault, Simulation, get_scenario

__all__ = ["BUGS", "invent", "trial_fault"]

ITEMS, SEED = 200, 21
MAX_FAULTS = 5
HIDDEN = frozenset({EventKind.STALE_WRITE_ACCEPTED.value})  # the store's own note: the truth, not evidence


@dataclass(frozen=True, slots=True)
class Bug:
    """A mistake the check plants: its name, how a run gets it, and how the check knows it broke the run."""

    name: str
    adapter: str
    fenced: bool
    broke: Callable[[EventLog, ContactLedger], str | None]


def _double_contacts(log: EventLog, ledger: ContactLedger) -> str | None:
    twice = ledger.duplicates()
    if not twice:
        return None
    (case, key), sends = next(iter(twice.items()))
    return f"{len(twice)} customer(s) got the same email twice (case {case}: key {key}, {len(sends)} sends)"


def _stale_writes(log: EventLog, ledger: ContactLedger) -> str | None:
    taken = log.where(EventKind.STALE_WRITE_ACCEPTED)
    if not taken:
        return None
    first = taken[0]
    return (
        f"{len(taken)} stale checkpoint write(s) taken (the first: {first.worker_id} wrote {first.item_id} under "
        f"token {first.token} at t={first.time:g}, after token {first.info.get('current')} was issued)"
    )


BUGS = (
    Bug("sends without an idempotency key (the naive adapter)", "naive", True, _double_contacts),
    Bug("checkpoint writes the store does not fence", "idempotent", False, _stale_writes),
)


def trial_fault(faults: Any, *, adapter: str = "idempotent", fenced: bool = True) -> Simulation:
    """The check's day (200 items of burst day, seed 21) with exactly `faults`, finished: the
    kit's worker with the idempotent adapter and fenced checkpoints, unless told otherwise."""
    day = dataclasses.replace(get_scenario("burst_day"), fenced_checkpoints=fenced)
    listed = list(faults) if isinstance(faults, (list, tuple)) else [faults]
    return Simulation(day, seed=SEED, items=ITEMS, adapter=adapter, faults=listed).finish()


def _as_read(log: EventLog) -> EventLog:
    """The log the invariant reads: what the workers and the queue recorded, without the store's
    own note of a stale write (that note is the check's truth, not evidence for the invariant)."""
    return EventLog.from_dicts([row for row in log.to_dicts() if row["kind"] not in HIDDEN])


def _faults(test: Any) -> list[Fault]:
    made, err = attempt(test.fault)
    if err is not None:
        raise Wrong(f"fault() raised {error_text(err)}")
    listed = list(made) if isinstance(made, (list, tuple)) else [made]
    if not listed or len(listed) > MAX_FAULTS or not all(isinstance(f, Fault) for f in listed):
        raise Wrong(
            f"fault() returned {describe(made)}: return one Fault, or a list of 1 to {MAX_FAULTS}, made with the "
            'simulator\'s Fault(...), e.g. Fault("lose_ack", item="O-1004").'
        )
    return listed


def _ask(answer: Any, test: Any, log: EventLog, run: str) -> bool:
    """Did the invariant fail the run (raise AssertionError)? Anything else it raises is refused."""
    with watching(answer, checker_check) as handed:
        _, err = attempt(test.invariant, _as_read(log))
    if handed:
        raise Wrong(
            "your invariant hands the log to the kit's checker (check(log)): write it from the log's own events, "
            "the one promise your failure puts at risk."
        )
    if err is None:
        return False
    if is_assertion(err):
        return True
    raise Wrong(
        f"your invariant raised {error_text(err)} on {run}: a test runner reads that as a broken test. Raise "
        "AssertionError (use assert), and only when the run broke its promise."
    )


def _struck(log: EventLog) -> int:
    return sum(1 for event in log.where(EventKind.FAULT_INJECTED) if event.info.get("source") == "explicit")


def _judge(answer: Any) -> str:
    test = call_answer(answer)
    faults = _faults(test)
    named = ", ".join(repr(f) for f in faults)
    sound = trial_fault(faults)
    if not _struck(sound.log):
        raise Wrong(
            f"your fault ({named}) never struck during the check's day ({ITEMS} items of burst day, seed {SEED}): "
            "name a case of that day (O-1001 to O-1200) or a worker W1 to W20, and a point where that fault can "
            "strike."
        )
    if _ask(answer, test, sound.log, "the correct worker's run"):
        raise Wrong(
            f"your invariant failed the correct worker's run under your fault ({named}): every customer was "
            "contacted once and no stale write was taken, so a test with this invariant would fail a sound system "
            "and be switched off."
        )
    caught: list[tuple[Bug, str]] = []
    missed: list[tuple[Bug, str]] = []
    for bug in BUGS:
        run = trial_fault(faults, adapter=bug.adapter, fenced=bug.fenced)
        broke = bug.broke(run.log, run.world.adapter.ledger)
        failed = _ask(answer, test, run.log, f"the run with {bug.name}")
        if failed and broke is None:
            raise Wrong(
                f"your invariant failed the run with {bug.name} under your fault, but that run broke nothing the "
                "bug could break (every customer contacted once, no stale write taken): it cries wolf."
            )
        if broke is not None:
            (caught if failed else missed).append((bug, broke))
    if not caught and not missed:
        raise Wrong(
            f"under your fault ({named}) neither planted bug breaks anything: not {BUGS[0].name}, not "
            f"{BUGS[1].name}. Choose a failure that can cost a customer a second email or let a stale worker's "
            "write in."
        )
    if not caught:
        bug, broke = missed[0]
        raise Wrong(
            f"under your fault ({named}) the run with {bug.name} broke its promise ({broke}), and your invariant "
            "passed it: in CI, that bug ships."
        )
    also = (
        f" Your fault also exposed {missed[0][0].name} ({missed[0][1]}), which your invariant does not look at: a "
        "second invariant would catch it."
        if missed
        else ""
    )
    found = "; ".join(f"{bug.name} ({broke})" for bug, broke in caught)
    return (
        f"under your fault ({named}) the correct worker passed your invariant, and your invariant failed the run "
        f"with {found}, reading the log alone.{also}"
    )


invent = Exercise(
    id="07.5",
    title="a failure of your own, and its invariant",
    answer="MyChaosTest",
    run=_judge,
    wants_class=True,
    hints=(
        "Pick a failure an earlier lab taught you to fear, then ask what a customer, or the store, would see "
        "go wrong if the protection against it were missing. That is the promise your invariant states.",
        'Fault("kill_worker", item="O-1003", point="after_send"), Fault("pause_worker", item="O-1005"), '
        'Fault("lose_ack", item="O-1007") are faults of the simulator. In the log: "contact_sent" (case_id, '
        'info[\'idem_key\']), "leased" (item_id, token), "checkpoint_written" (item_id, token). '
        "lab07.trial_fault(MyChaosTest().fault()) runs the check's day so you can read its log.",
        "An invariant is a sentence about every run: for instance, that no message went out twice for one "
        "case and key, or that no checkpoint was written under a token older than the newest its item was "
        "leased with by then. Write it so a sound run passes it and the run the missing protection breaks "
        "fails it, and make the failure message name the offender.",
    ),
)
