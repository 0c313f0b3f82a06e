"""Chaos with real processes: worker processes on a shared database, killed with SIGKILL at
seeded points, restarted, and the database's history judged by the checker.

    from shopops_lab.chaos import run_chaos
    report = run_chaos("sqlite:///chaos.db", items=40, workers=3, kills=12, seed=7)

or `shopops-lab chaos --db sqlite:///chaos.db --items 40 --workers 3 --kills 12 --seed 7`.
"""

from shopops_lab.chaos.plan import Kill, KillPoint, plan_kills
from shopops_lab.chaos.run import ADAPTERS, ChaosError, ChaosReport, run_chaos, run_workers

__all__ = ["ADAPTERS", "ChaosError", "ChaosReport", "Kill", "KillPoint", "plan_kills", "run_chaos", "run_workers"]
