"""The burst-day simulator: a pool of workers, a queue, a model gateway and a channel
adapter on one virtual clock, with named faults, in one thread (so it runs in the browser).

    from shopops_lab.sim import run
    report = run("burst_day", seed=7, adapter="naive")
    print(report)          # counts, the checker's verdict, and the line that replays it

Modules: `config` (a run's settings, checked and frozen, and its replay lines), `world`
(what the workers act on: queue, log, adapter, gateway, faults), `workers` (the worker
loop), `engine` (the event heap, the clock and `Simulation`), `faults` (named faults and
rates), `scenarios` (the registry), `report` (the summary).
"""

from shopops_lab.sim.engine import (
    ADAPTERS,
    SimStep,
    Simulation,
    Snapshot,
    Step,  # noqa: F401 - SimStep's old name, still importable
    run,
)
from shopops_lab.sim.faults import Fault, FaultKind, FaultRates, Point
from shopops_lab.sim.report import Report
from shopops_lab.sim.scenarios import SCENARIOS, Scenario, get_scenario

__all__ = [
    "ADAPTERS",
    "SCENARIOS",
    "Fault",
    "FaultKind",
    "FaultRates",
    "Point",
    "Report",
    "Scenario",
    "SimStep",
    "Simulation",
    "Snapshot",
    "get_scenario",
    "run",
]
