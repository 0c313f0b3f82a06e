"""The discrete-event core: one heap of future events, one seeded rng, one clock.

Events are ordered by (time, priority, sequence number): at the same instant, faults act
first, then the gateway finishes calls, then new items arrive, then workers move; ties
within a rank go in scheduling order. Everything runs in one thread, so a run is a pure
function of its seed and arguments: same seed, same event log, in a notebook, on CI or in
the browser. The queue, the channel adapter and the gateway share one `EventLog` and one
`FakeClock`, which the engine moves to each event's time.

The engine keeps only the heap and the clock. What a run is lives in its `RunConfig`
(`config`), what happens in it in its `World` (`world`): the world schedules actions on
the engine's heap, and the engine calls each back at its time.

`run()` plays a whole scenario and returns its `Report`. `Simulation` is the same run, one
event at a time (`step`, `run_until`), with `snapshot` / `restore` to rewind: restoring
replays from the seed up to the saved step, which is exact because the run is deterministic.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from shopops_lab import arguments
from shopops_lab.checker import CheckResult
from shopops_lab.clock import FakeClock
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import Event, collector_paused
from shopops_lab.sim.config import ADAPTERS, RunConfig
from shopops_lab.sim.faults import Fault
from shopops_lab.sim.report import Report, build_report, judge
from shopops_lab.sim.scenarios import Scenario
from shopops_lab.sim.workers import worker_loop
from shopops_lab.sim.world import Action, Program, World

__all__ = ["ADAPTERS", "SimStep", "Simulation", "Snapshot", "run"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SimStep:
    """One event the engine handled: when, who acted, and what it wrote to the log."""

    number: int
    time: float
    actor: str
    events: tuple[Event, ...]

    def __str__(self) -> str:
        head = f"step {self.number} t={self.time:g} {self.actor}"
        return "\n".join([head, *(f"  {e}" for e in self.events)]) if self.events else f"{head} (nothing logged)"


Step = SimStep  # its name before the kit had other steps (workflow steps, playground actions)


@dataclass(frozen=True, kw_only=True, slots=True)
class Snapshot:
    """Where a simulation stood: enough to come back to it by replaying from the seed."""

    scenario: str
    seed: int
    steps: int
    time: float


class Simulation:
    """One run of a scenario, driven step by step or all at once.

    `faults=None` uses the scenario's own faults and random rates; a list of `Fault`
    replaces both, so exactly those faults happen. `policy=None` uses the scenario's policy.
    `program` is the loop every worker runs (default: the kit's `worker_loop`; lab 09 passes
    one that hands each delivery to the learner's `work`, see `sim.agents`).
    """

    def __init__(
        self,
        scenario: str | Scenario = "burst_day",
        *,
        seed: int = 0,
        items: int | None = None,
        workers: int | None = None,
        adapter: str = "idempotent",
        policy: Any = None,
        faults: Iterable[Fault] | None = None,
        program: Program = worker_loop,
    ) -> None:
        self.config = RunConfig.of(
            scenario, seed=seed, items=items, workers=workers, adapter=adapter, policy=policy, faults=faults
        )
        self.program = program
        self.horizon = self.config.horizon
        with collector_paused():
            self._start()

    def _start(self) -> None:
        self.clock = FakeClock()
        self.steps = 0
        self._last_actor = ""
        self._heap: list[tuple[float, int, int, Action, Any]] = []
        self._seq = 0
        self.world = World(self.config, self.clock, self._push, self.program)

    def _push(self, t: float, rank: int, action: Action, arg: Any) -> int:
        """The world's `schedule`: call `action(arg, seq)` at time `t`; returns `seq`."""
        self._seq += 1
        heapq.heappush(self._heap, (t, rank, self._seq, action, arg))
        return self._seq

    # ------------------------------------------------------------------ what a run is, where it stands
    scenario = property(attrgetter("config.scenario"))
    seed = property(attrgetter("config.seed"))
    items = property(attrgetter("config.items"))
    policy = property(attrgetter("config.policy"))
    log = property(attrgetter("world.log"), doc="The event log everything in the run writes to.")
    now = property(attrgetter("world.now"), doc="The simulated time of the last event handled.")

    # ------------------------------------------------------------------ running
    @property
    def done(self) -> bool:
        """True once nothing is left to happen before the horizon."""
        return not self._heap or self._heap[0][0] > self.horizon

    def step(self) -> SimStep | None:
        """Handle the next event and say what happened; None when the run is over."""
        log = self.world.log
        start = len(log)
        if not self._advance(1, self.horizon):
            return None
        return SimStep(
            number=self.steps,
            time=self.now,
            actor=self._last_actor,
            events=tuple(log[i] for i in range(start, len(log))),
        )

    def run_until(self, t: float | None = None) -> int:
        """Handle every event up to time `t` (default: the end); returns how many."""
        horizon = self.horizon
        if t is not None:
            arguments.number("t", t, "pass a simulated time in seconds")
            horizon = min(horizon, t)
        with collector_paused():
            return self._advance(None, horizon)

    def finish(self) -> Simulation:
        """Run to the end and return self, so `Simulation(...).finish().report()` reads well."""
        self.run_until()
        return self

    def _advance(self, limit: int | None, until: float) -> int:
        """The engine's loop: pop, move the clock, act. Stale entries (a killed worker's
        wake-up) are dropped without counting as a step."""
        heap, world = self._heap, self.world
        handled = 0
        while heap and heap[0][0] <= until and (limit is None or handled < limit):
            t, _, seq, action, arg = heapq.heappop(heap)
            if t != world.now:
                world.now = t
                self.clock.set(t)
            actor = action(arg, seq)
            if actor is not None:
                handled += 1
                self._last_actor = actor
        self.steps += handled
        return handled

    def snapshot(self) -> Snapshot:
        return Snapshot(scenario=self.scenario.name, seed=self.seed, steps=self.steps, time=self.now)

    def restore(self, snap: Snapshot) -> None:
        """Go back (or forward) to `snap`, by replaying this run from its seed."""
        if not isinstance(snap, Snapshot) or (snap.scenario, snap.seed) != (self.scenario.name, self.seed):
            raise BadArgumentError(
                field="snap",
                problem="is not a snapshot of this simulation",
                fix="pass a Snapshot taken from this Simulation with snapshot()",
            )
        with collector_paused():
            if snap.steps < self.steps:
                self._start()
            self._advance(snap.steps - self.steps, self.horizon)

    def report(self) -> Report:
        """The run so far (or, once `done`, the whole run) judged and summarised."""
        with collector_paused():
            return build_report(self.config, self.world, self.done)

    def verdict(self) -> CheckResult:
        """The checker's verdict on the run so far, without the summary and vital signs of
        `report()` (the cheaper read for a check that measures the log itself)."""
        with collector_paused():
            return judge(self.config, self.world, self.done)

    def __repr__(self) -> str:
        config = self.config
        state = "done" if self.done else f"t={self.now:g}"
        return (
            f"Simulation({config.scenario.name!r}, seed={config.seed}, items={config.items}, "
            f"workers={config.workers}, adapter={config.adapter!r}, {state}, steps={self.steps})"
        )


def run(
    scenario: str | Scenario = "burst_day",
    *,
    seed: int = 0,
    items: int | None = None,
    workers: int | None = None,
    adapter: str = "idempotent",
    policy: Any = None,
    faults: Iterable[Fault] | None = None,
) -> Report:
    """Play a scenario to the end and return its `Report` (str() it for a summary with
    the seed and a one-line replay)."""
    return (
        Simulation(scenario, seed=seed, items=items, workers=workers, adapter=adapter, policy=policy, faults=faults)
        .finish()
        .report()
    )
