"""ShopOps Lab: the teaching engine behind the course notebooks.

The front door holds what a first session needs: a clock, a queue, the idempotent email
adapter, the checker and the errors a worker meets. Everything else is imported from the
module that defines it (one idea each; the README's module table lists them): effects,
fencing, jobs, checkpoint, recovery, outbox, backpressure, metrics, crash, explore, the
simulator in `shopops_lab.sim`. The pictures and widgets live in `shopops_lab.viz` and
`shopops_lab.widgets` (they need matplotlib and ipywidgets, so importing this package does
not load them).
"""

from shopops_lab.checker import check
from shopops_lab.clock import FakeClock, SystemClock
from shopops_lab.effects import EmailAdapter
from shopops_lab.errors import BadArgumentError, ShopOpsError, SimulatedCrash, StaleTokenError
from shopops_lab.events import EventLog
from shopops_lab.metrics import queue_metrics
from shopops_lab.store import open_store
from shopops_lab.worker.queue import InMemoryQueue, Lease, Priority, Queue

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
