"""ShopOps Lab: the teaching engine behind the course notebooks.

The front door holds what a first session needs: a clock, a queue, the idempotent email
adapter, the checker and the errors a worker meets. Everything else is imported from the
module that defines it (one idea each; docs/internals.md's module table lists them): effects,
fencing, jobs, checkpoint, recovery, outbox, backpressure, metrics, crash, explore, the
simulator in `shopops_lab.sim`. The pictures and widgets live in `shopops_lab.viz` and
`shopops_lab.widgets` (they need matplotlib and ipywidgets, so importing this package does
not load them). The front door's names load on first use, so `shopops-lab grade` starts
without them (the grader runs itself again at once: see `course.grade.layout`).
"""

from __future__ import annotations

from shopops_lab._lazy import lazy_names

__version__ = "0.1.0"

__all__ = [
    "FakeClock",
    "SystemClock",  # time
    "InMemoryQueue",
    "Queue",
    "Lease",
    "Priority",
    "open_store",  # the queue, on any store
    "EmailAdapter",
    "EventLog",
    "check",
    "queue_metrics",  # effects and reading the log
    "BadArgumentError",
    "ShopOpsError",
    "SimulatedCrash",
    "StaleTokenError",  # what a worker meets
]

_FROM = {
    "FakeClock": "clock",
    "SystemClock": "clock",
    "InMemoryQueue": "worker.queue",
    "Queue": "worker.queue",
    "Lease": "worker.queue",
    "Priority": "worker.queue",
    "open_store": "store",
    "EmailAdapter": "effects",
    "EventLog": "events",
    "check": "checker",
    "queue_metrics": "metrics",
    "BadArgumentError": "errors",
    "ShopOpsError": "errors",
    "SimulatedCrash": "errors",
    "StaleTokenError": "errors",
}


__getattr__, __dir__ = lazy_names(__name__, _FROM)
