"""ShopOps Lab: the teaching engine behind the course notebooks.

Start with `InMemoryQueue` and a `FakeClock`; every other piece (effects, jobs,
checkpoints, outbox, backpressure, the simulator) builds on the same event log.
"""
from shopops_lab.clock import Clock, FakeClock, SystemClock
from shopops_lab.errors import (BadArgumentError, LeaseExpiredError, LeaseSettledError,
                                NotInDLQError, ShopOpsError, StaleTokenError, UnknownItemError,
                                UnknownLeaseError)
from shopops_lab.events import Event, EventKind, EventLog
from shopops_lab.states import TRANSITIONS, ItemState
from shopops_lab.worker.queue import InMemoryQueue, Item, Lease, Outcome, Priority

__version__ = "0.1.0"

__all__ = [
    "BadArgumentError", "Clock", "Event", "EventKind", "EventLog", "FakeClock", "InMemoryQueue",
    "Item", "ItemState", "Lease", "LeaseExpiredError", "LeaseSettledError", "NotInDLQError",
    "Outcome", "Priority", "ShopOpsError", "StaleTokenError", "SystemClock", "TRANSITIONS",
    "UnknownItemError", "UnknownLeaseError",
]
