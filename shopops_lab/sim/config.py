"""What a run is: a scenario and the choices made for it (seed, size, adapter, policy,
faults), checked once and then frozen, with the two lines that play it again.

Everything else about a run follows from its `RunConfig`: the same config gives the same
event log, so the replay lines are all a learner needs to bring a surprising run back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shopops_lab import arguments
from shopops_lab.backpressure import NoBackpressure, describe_policy
from shopops_lab.effects import EmailAdapter, NaiveEmailAdapter
from shopops_lab.errors import BadArgumentError
from shopops_lab.sim.faults import Fault, FaultRates
from shopops_lab.sim.scenarios import MAX_ITEMS, MAX_WORKERS, SCENARIOS, Scenario, get_scenario

__all__ = ["ADAPTERS", "RunConfig"]

ADAPTERS = {"idempotent": EmailAdapter, "naive": NaiveEmailAdapter}


@dataclass(frozen=True, kw_only=True, slots=True)
class RunConfig:
    """One run's settings, resolved: `items`, `workers`, `policy`, `faults` and `rates`
    are what the run uses, whether given or taken from the scenario. `custom_policy` and
    `custom_faults` say they came from Python, where the command line cannot follow.
    Build one with `RunConfig.of(...)`, which checks every argument."""

    scenario: Scenario
    seed: int
    items: int
    workers: int
    adapter: str
    policy: Any
    faults: tuple[Fault, ...]
    rates: FaultRates
    custom_policy: bool = False
    custom_faults: bool = False

    @classmethod
    def of(
        cls,
        scenario: str | Scenario = "burst_day",
        *,
        seed: int = 0,
        items: int | None = None,
        workers: int | None = None,
        adapter: str = "idempotent",
        policy: Any = None,
        faults: Iterable[Fault] | None = None,
    ) -> RunConfig:
        """The run `Simulation(...)` and `run(...)` were asked for. `faults=None` uses the
        scenario's faults and random rates; a list of `Fault` replaces both, so exactly
        those faults happen. `policy=None` uses the scenario's policy."""
        sc = get_scenario(scenario)
        arguments.whole("seed", seed, None, "pass a whole number, e.g. seed=7")
        for name, value, most in (("items", items, MAX_ITEMS), ("workers", workers, MAX_WORKERS)):
            if value is not None:
                arguments.whole(
                    name,
                    value,
                    1,
                    f"pass a whole number from 1 to {most:,}, or leave it out for the scenario's own",
                    most=most,
                )
        arguments.choice("adapter", adapter, ADAPTERS, f"pass one of: {', '.join(ADAPTERS)}")
        chosen = None if faults is None else _fault_list(faults)
        config = cls(
            scenario=sc,
            seed=seed,
            items=sc.items if items is None else items,
            workers=sc.workers if workers is None else workers,
            adapter=adapter,
            policy=policy if policy is not None else (sc.policy if sc.policy is not None else NoBackpressure()),
            faults=sc.faults if chosen is None else chosen,
            rates=sc.rates if chosen is None else FaultRates(),
            custom_policy=policy is not None,
            custom_faults=chosen is not None,
        )
        ids = set(config.worker_ids)
        for i, fault in enumerate(config.faults):
            if fault.worker is not None and fault.worker not in ids:
                raise BadArgumentError(
                    field=f"faults[{i}].worker",
                    problem=f"is {fault.worker!r}",
                    fix=f"name one of this run's workers, W1 to W{config.workers}",
                )
        return config

    @property
    def horizon(self) -> float:
        """When the run stops even if work is left: the scenario's, longer for more items."""
        return self.scenario.horizon * max(1.0, self.items / self.scenario.items)

    @property
    def worker_ids(self) -> tuple[str, ...]:
        return tuple(f"W{n}" for n in range(1, self.workers + 1))

    def cli_replay(self) -> str:
        """The `shopops-lab simulate` line that plays this run again (with a note when part
        of it came from Python, where only the python line can follow)."""
        sc = self.scenario
        parts = ["shopops-lab simulate", sc.name, f"--seed {self.seed}"]
        if self.items != sc.items:
            parts.append(f"--items {self.items}")
        if self.workers != sc.workers:
            parts.append(f"--workers {self.workers}")
        parts.append(f"--adapter {self.adapter}")
        line = " ".join(parts)
        extra = [
            what
            for what, custom in (
                ("scenario", SCENARIOS.get(sc.name) != sc),
                ("policy", self.custom_policy),
                ("faults", self.custom_faults),
            )
            if custom
        ]
        if extra:
            line += f"  # the {' and '.join(extra)} came from Python: use the python line"
        return line

    def python_replay(self) -> str:
        """The one line of Python that plays this run again."""
        sc = self.scenario
        target = repr(sc.name) if SCENARIOS.get(sc.name) == sc else "scenario"
        args = [target, f"seed={self.seed}"]
        if self.items != sc.items:
            args.append(f"items={self.items}")
        if self.workers != sc.workers:
            args.append(f"workers={self.workers}")
        if self.adapter != "idempotent":
            args.append(f"adapter={self.adapter!r}")
        if self.custom_policy:
            args.append(f"policy={describe_policy(self.policy)}")
        if self.custom_faults:
            args.append(f"faults=[{', '.join(repr(f) for f in self.faults)}]")
        line = f"from shopops_lab.sim import run; run({', '.join(args)})"
        if target == "scenario":
            line += f"  # scenario: your Scenario(name={sc.name!r}, ...)"
        return line


def _fault_list(given: Iterable[Fault]) -> tuple[Fault, ...]:
    """`given` as a tuple of `Fault`, or a clear error (a lone Fault or a string is a
    common slip: it needs brackets)."""
    try:
        faults = None if isinstance(given, (str, Fault)) else tuple(given)
    except TypeError:
        faults = None
    if faults is None or not all(isinstance(f, Fault) for f in faults):
        raise BadArgumentError(
            field="faults",
            problem=f"is {given!r}, not a list of Fault",
            fix="pass e.g. faults=[Fault('kill_worker', item='O-1001')], or None",
        )
    return faults
