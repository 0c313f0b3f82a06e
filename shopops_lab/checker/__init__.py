"""The referee: reads an event log and names every promise the run broke, with the events
that prove it.

It trusts nothing but the log, so it judges a live queue's log and one rebuilt from JSON
(`EventLog.from_dicts`) the same way. One pass in `seq` order rebuilds what the queue and
the adapters knew at each moment: lease intervals per case, the newest token per item,
contacts grouped by intent, how long each approval has been waiting. A verdict is
`True` (nothing wrong), `False` (at least one anomaly) or `None` (cannot tell yet: the log
is empty, or not final while items are still in flight).

Its parts: `result` (what it says: `CheckResult`, `Anomaly`, `AnomalyName`), `replay` (the
pass over the log), `starvation` (the approval clocks, and what counts as an approval),
`messages` (each anomaly in words, from its evidence), `verdict` (`check` itself).
"""

from shopops_lab.checker.replay import DEFAULT_MAX_ATTEMPTS
from shopops_lab.checker.result import Anomaly, AnomalyName, CheckResult
from shopops_lab.checker.starvation import APPROVAL_KIND, DEFAULT_APPROVAL_WAIT_BUDGET, is_approval
from shopops_lab.checker.verdict import check

__all__ = [
    "APPROVAL_KIND",
    "DEFAULT_APPROVAL_WAIT_BUDGET",
    "DEFAULT_MAX_ATTEMPTS",
    "Anomaly",
    "AnomalyName",
    "CheckResult",
    "check",
    "is_approval",
]
