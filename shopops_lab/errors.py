"""One exception root for the kit. Each class's docstring is its message template,
filled from the structured fields it carries, so a learner reads what went wrong and
code can read `err.token`, `err.field` and friends."""
from __future__ import annotations

from typing import Any


class ShopOpsError(Exception):
    """ShopOps Lab: {detail}"""

    def __init__(self, **fields: Any) -> None:
        self.fields = dict(fields)
        for name, value in fields.items():
            setattr(self, name, value)
        super().__init__(type(self).__doc__.format(**fields))


class BadArgumentError(ShopOpsError, ValueError):
    """{field} {problem}. Fix: {fix}."""


class StaleTokenError(ShopOpsError):
    """Stale fencing token for {what}: this write carries token {token}, but the store's current token is {current}. Another worker claimed it after you; stop and do not write."""


class LeaseExpiredError(ShopOpsError):
    """The lease on item {item_id} (token {token}) expired at t={expires_at:g}; the item went back to the queue. Stop: a redelivery will handle it."""


class LeaseSettledError(ShopOpsError):
    """The lease on item {item_id} (token {token}) was already {how}; a lease can be settled once (ack or nack)."""


class UnknownLeaseError(ShopOpsError):
    """No lease like this exists: {reason}. Use the Lease that acquire() returned."""


class UnknownItemError(ShopOpsError):
    """No item {item_id} in this queue. Fix: pass an id returned by enqueue() or shown by items()/dlq_items()."""


class NotInDLQError(ShopOpsError):
    """Item {item_id} is {state}, not in the dead-letter queue; only dead items can be replayed. Fix: replay an id from dlq_items()."""


class TransitionError(ShopOpsError):
    """{what} cannot move from {source} to {target}: that edge is not in the transition table."""


class IdempotencyConflictError(ShopOpsError):
    """Request key {key!r} was already used with different parameters ({difference}). Fix: reuse the key only to retry the same request; use a new key for new work."""


class WorkflowVersionError(ShopOpsError):
    """The checkpoint was written by workflow version {stored!r} but this runner is {current!r}. Refusing to resume under a changed plan: migrate the checkpoint explicitly."""


class LeaseLostError(ShopOpsError):
    """Worker {worker_id} lost its lease on {item_id} (token {token}); stop side effects now."""
