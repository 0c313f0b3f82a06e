"""ShopOps Lab: the teaching engine behind the course notebooks.

Start with `InMemoryQueue` and a `FakeClock`; every other piece (effects, jobs,
checkpoints, outbox, backpressure, the simulator in `shopops_lab.sim`) writes to the
same kind of `EventLog`, which `check` and `queue_metrics` read. The pictures and
widgets live in `shopops_lab.viz` and `shopops_lab.widgets` (they need matplotlib and
ipywidgets, so importing this package does not load them).
"""
from shopops_lab.backpressure import (
                                      BackpressurePolicy,
                                      Decision,
                                      Gateway,
                                      NoBackpressure,
                                      Signals,
                                      acquire,
                                      wait,
)
from shopops_lab.checker import Anomaly, AnomalyName, CheckResult, check
from shopops_lab.checkpoint import (
                                      PUBLISH_WORKFLOW,
                                      Checkpoint,
                                      CheckpointStore,
                                      Receipt,
                                      Step,
                                      Workflow,
                                      WorkflowStep,
)
from shopops_lab.clock import Clock, FakeClock, SystemClock
from shopops_lab.crash import ExplorationReport, explore
from shopops_lab.effects import (
                                      ContactLedger,
                                      EmailAdapter,
                                      NaiveEmailAdapter,
                                      NaiveSmsAdapter,
                                      Provider,
                                      SendResult,
                                      SendStatus,
                                      SmsAdapter,
)
from shopops_lab.errors import (
                                      BadArgumentError,
                                      IdempotencyConflictError,
                                      LeaseExpiredError,
                                      LeaseLostError,
                                      LeaseSettledError,
                                      NotInDLQError,
                                      ShopOpsError,
                                      SimulatedCrash,
                                      StaleTokenError,
                                      TransitionError,
                                      UnknownItemError,
                                      UnknownLeaseError,
                                      WorkflowVersionError,
)
from shopops_lab.events import Event, EventKind, EventLog
from shopops_lab.fencing import NaiveResultStore, TokenFence
from shopops_lab.jobs import JOB_TRANSITIONS, Job, JobState, JobStore
from shopops_lab.latency import LatencyModel
from shopops_lab.metrics import QueueMetrics, queue_metrics, series
from shopops_lab.outbox import (
                                      Broker,
                                      Dispatcher,
                                      IdempotentConsumer,
                                      NaiveConsumer,
                                      OutboxStore,
)
from shopops_lab.recovery import CrashPoint, Env, NaiveCheckpointRunner, ReceiptRunner
from shopops_lab.states import TRANSITIONS, ItemState
from shopops_lab.store import open_store
from shopops_lab.worker.queue import InMemoryQueue, Item, Lease, Outcome, Priority, Queue

__version__ = "0.1.0"

__all__ = [
    "PUBLISH_WORKFLOW", "TRANSITIONS", "JOB_TRANSITIONS",
    # time and records
    "Clock", "FakeClock", "SystemClock", "Event", "EventKind", "EventLog",
    # the queue
    "InMemoryQueue", "Item", "ItemState", "Lease", "Outcome", "Priority", "Queue", "open_store",
    # effects, fencing, jobs, checkpoints, outbox
    "ContactLedger", "EmailAdapter", "NaiveEmailAdapter", "NaiveSmsAdapter", "Provider", "SendResult",
    "SendStatus", "SmsAdapter", "NaiveResultStore", "TokenFence", "Job", "JobState", "JobStore", "Checkpoint",
    "CheckpointStore", "CrashPoint", "Env", "NaiveCheckpointRunner", "Receipt", "ReceiptRunner", "Step", "WorkflowStep",
    "Workflow", "Broker", "Dispatcher", "IdempotentConsumer", "NaiveConsumer", "OutboxStore",
    # load
    "BackpressurePolicy", "Decision", "Gateway", "LatencyModel", "NoBackpressure", "Signals", "acquire", "wait",
    # reading the log
    "Anomaly", "AnomalyName", "CheckResult", "check", "ExplorationReport", "explore", "QueueMetrics",
    "queue_metrics", "series",
    # errors
    "BadArgumentError", "IdempotencyConflictError", "LeaseExpiredError", "LeaseLostError", "LeaseSettledError",
    "NotInDLQError", "ShopOpsError", "SimulatedCrash", "StaleTokenError", "TransitionError", "UnknownItemError",
    "UnknownLeaseError", "WorkflowVersionError",
]
