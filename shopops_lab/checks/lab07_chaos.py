"""Lab 07, exercise 7.3: the chaos test's assertion, judged on runs the check knows the truth of.

The learner writes `assert_no_double_contact(log)`: given one run's event log, it raises
`AssertionError` when a customer was sent the same message twice, and returns quietly
otherwise. A chaos test in CI is only as good as that line, so the check plays it against
runs whose answer the kit knows from a record the assertion is never handed (the channel
provider's ledger of what reached customers): two bad runs (the naive adapter, under staged
kills right after the send and under a forced lease expiry) that it must catch, and three
good ones it must pass, each built to trip a near miss: redeliveries whose repeat sends the
idempotency key absorbed, a run the checker finds wrong for another reason (a stale write),
and one customer sent two *different* emails. Every run is made afresh for each answer, so
nothing the assertion does to a log reaches another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from shopops_lab.checker.verdict import check as checker_check
from shopops_lab.checks.base import Exercise, Wrong, attempt, error_text, watching
from shopops_lab.clock import FakeClock
from shopops_lab.effects import ContactLedger, EmailAdapter
from shopops_lab.events import EventLog
from shopops_lab.sim import Fault, FaultKind, Point, Simulation, get_scenario

__all__ = ["RUNS", "chaos"]

ITEMS = 300  # small days: the assertion is judged, not the simulator


@dataclass(frozen=True, slots=True)
class ChaosRun:
    """One run the assertion is tried on: what it is, in words, and how to make it afresh."""

    name: str
    make: Callable[[], tuple[EventLog, ContactLedger]]


def _staged(adapter: str) -> tuple[EventLog, ContactLedger]:
    """Burst day, five workers killed right after their send and before their ack."""
    day = get_scenario("burst_day")
    kills = [Fault(FaultKind.KILL_WORKER, worker=f"W{n}", at=30.0 * n, point=Point.AFTER_SEND) for n in range(1, 6)]
    sim = Simulation(day, seed=3, items=ITEMS, adapter=adapter, faults=[day.faults[0], *kills]).finish()
    return sim.log, sim.world.adapter.ledger


def _scenario(name: str, adapter: str, *, fenced_checkpoints: bool | None = None) -> tuple[EventLog, ContactLedger]:
    """The scenario `name` (its checkpoints fenced as it says, unless `fenced_checkpoints` is given), 200 items."""
    day = get_scenario(name)
    if fenced_checkpoints is not None:
        day = dataclasses.replace(day, fenced_checkpoints=fenced_checkpoints)
    sim = Simulation(day, seed=3, items=200, adapter=adapter).finish()
    return sim.log, sim.world.adapter.ledger


def _two_emails() -> tuple[EventLog, ContactLedger]:
    """Case O-1001 is sent two different emails (two steps, two keys), and one repeat of the
    first is absorbed by its key; O-1002 gets one."""
    log = EventLog()
    adapter = EmailAdapter(log=log, clock=FakeClock())
    for key, case in (
        ("O-1001:email:1", "O-1001"),
        ("O-1001:email:2", "O-1001"),
        ("O-1001:email:1", "O-1001"),
        ("O-1002:email:1", "O-1002"),
    ):
        adapter.send(key, case_id=case, to=f"{case.lower()}@customers.example")
    return log, adapter.ledger


RUNS = (
    ChaosRun(
        "burst day with five workers killed right after sending, naive adapter (seed 3, 300 items)",
        lambda: _staged("naive"),
    ),
    ChaosRun(
        "the same day with idempotency keys: the same redeliveries, every repeat send absorbed by its key",
        lambda: _staged("idempotent"),
    ),
    ChaosRun(
        "one customer (O-1001) sent two different emails, two steps with two keys, and a repeat of the first "
        "absorbed by its key",
        _two_emails,
    ),
    ChaosRun(
        "a stale-worker day with unfenced checkpoints and idempotency keys: the checker finds a stale write, "
        "yet no customer heard anything twice",
        lambda: _scenario("stale_worker", "idempotent", fenced_checkpoints=False),
    ),
    ChaosRun("a forced lease expiry, naive adapter (seed 3, 200 items)", lambda: _scenario("forced_expiry", "naive")),
)


def _judge(assertion: object) -> str:
    caught = passed = 0
    for run in RUNS:
        log, ledger = run.make()
        twice = ledger.duplicates()
        with watching(assertion, checker_check) as handed:
            _, err = attempt(assertion, log)
        if handed:
            raise Wrong(
                "your assertion hands the question to the kit's checker (check(log)); write it from the "
                "log's own events: it is one small piece of what the checker does."
            )
        if twice and err is None:
            (case, key), sends = next(iter(twice.items()))
            raise Wrong(
                f"your assertion passed a bad run: {run.name}. {len(twice)} customer(s) got the same email "
                f"twice (case {case}: key {key} sent {len(sends)} times). In CI that is the regression "
                "reaching customers."
            )
        if err is not None and not is_assertion(err):
            raise Wrong(
                f"your assertion raised {error_text(err)} on a {'bad' if twice else 'good'} run ({run.name}): "
                "a test runner reads that as a broken test. An assertion raises AssertionError (use assert), "
                "and only when the run broke its promise."
            )
        if not twice and err is not None:
            said = str(err).strip().split("\n", 1)[0][:160]  # its first line: what a test report shows first
            said = f" (it said: {said})" if said else ""
            raise Wrong(
                f"your assertion failed a good run: {run.name}. Nobody got the same email twice there{said}; "
                "a chaos test that fails good builds gets switched off."
            )
        caught, passed = caught + bool(twice), passed + (not twice)
    return (
        f"your assertion caught the {caught} bad runs and passed the {passed} good ones, among them "
        "redeliveries whose repeats the key absorbed, a run wrong for another reason, and one customer sent two "
        "different emails."
    )


def is_assertion(err: BaseException | None) -> bool:
    """AssertionError, also as the grader names one raised in the learner's process."""
    return err is not None and (isinstance(err, AssertionError) or type(err).__name__ == "AssertionError")


chaos = Exercise(
    id="07.3",
    title="the chaos test's assertion",
    answer="assert_no_double_contact",
    run=_judge,
    hints=(
        (
            "A customer hears twice when the same message, for the same case and the same idempotency key, "
            "really went out twice. Which event in the log says a message reached a customer, and which says a "
            "repeat was absorbed?"
        ),
        (
            "log.where('contact_sent') lists the messages that went out; each has a case_id and "
            "info['idem_key']. A run may send one customer two different messages; that is not a double contact."
        ),
        (
            "Count what really went out per customer and per message (its key), not per delivery: a repeat the key "
            "absorbed did not go out. Any count above one fails the assertion, with a message that names the first "
            "offender."
        ),
    ),
)
