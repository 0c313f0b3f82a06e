"""Workers and the queue they compete on."""

from shopops_lab.worker.queue import InMemoryQueue, Item, Lease, Outcome, Priority, Queue

__all__ = ["InMemoryQueue", "Item", "Lease", "Outcome", "Priority", "Queue"]
