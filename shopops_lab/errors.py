"""One exception root for the kit's refusals (`ShopOpsError`); control flow (`SimulatedCrash`)
stands outside it. Each class's docstring is its message template,
filled from the structured fields it carries, so a learner reads what went wrong and
code can read `err.token`, `err.field` and friends (annotated under each docstring, for the
type checker; `fields` has them all)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class _Templated(BaseException):
    """The docstring is the message, filled from the fields the exception carries."""

    def __init__(self, **fields: Any) -> None:
        self.fields = dict(fields)
        for name, value in fields.items():
            setattr(self, name, value)
        super().__init__((type(self).__doc__ or "").format(**fields))

    def __reduce__(self) -> tuple[Any, ...]:
        """Made again from its fields (a worker process sends its error to its supervisor)."""
        return (_rebuilt, (type(self), self.fields))


def _rebuilt(kind: type[_Templated], fields: dict[str, Any]) -> _Templated:
    return kind(**fields)


class ShopOpsError(_Templated, Exception):
    """ShopOps Lab: {detail}"""

    refusal: ClassVar[bool] = False
    # True on the engine's refusals of a well-formed request (a stale token, a lease that is
    # over): the call's own transaction keeps what it wrote before refusing (the refusal's
    # record, the expiries it ran into). Any other error rolls the call back
    # (store.base.bind_transactions): decided here, class by class.


class BadArgumentError(ShopOpsError, ValueError):
    """{field} {problem}. Fix: {fix}."""

    field: str
    problem: str
    fix: str


class StaleTokenError(ShopOpsError):
    """Stale fencing token for {what}: this write carries token {token}, but the store's current token is {current}. Another worker claimed it after you; stop and do not write."""

    refusal = True

    what: str
    token: int | None
    current: int | None


class LeaseExpiredError(ShopOpsError):
    """The lease on item {item_id} (token {token}) expired at t={expires_at:g}; the item went back to the queue. Stop: a redelivery will handle it."""

    refusal = True

    item_id: str
    token: int
    expires_at: float


class LeaseSettledError(ShopOpsError):
    """The lease on item {item_id} (token {token}) was already {how}; a lease can be settled once (ack or nack)."""

    refusal = True

    item_id: str
    token: int
    how: str


class UnknownLeaseError(ShopOpsError):
    """No lease like this exists: {reason}. Use the Lease that acquire() returned."""

    reason: str


class UnknownItemError(ShopOpsError):
    """No item {item_id} in this queue. Fix: pass an id returned by enqueue() or shown by items()/dlq_items()."""

    item_id: str


class NotInDLQError(ShopOpsError):
    """Item {item_id} is {state}, not in the dead-letter queue; only dead items can be replayed. Fix: replay an id from dlq_items()."""

    refusal = True

    item_id: str
    state: str


class TransitionError(ShopOpsError):
    """{what} cannot move from {source} to {target}: that edge is not in the transition table."""

    what: str
    source: str
    target: str


class IdempotencyConflictError(ShopOpsError):
    """Idempotency key {key!r} was already used for a different request ({difference}). A key names one request: repeat it only to retry that same request, and use a new key for a different request."""

    refusal = True

    key: str
    difference: str


class WorkflowVersionError(ShopOpsError):
    """The checkpoint was written by workflow version {stored!r} but this runner is {current!r}. Refusing to resume under a changed plan: migrate the checkpoint explicitly."""

    refusal = True

    stored: int
    current: int


class LeaseLostError(ShopOpsError):
    """Worker {worker_id} lost its lease on {item_id} (token {token}); stop side effects now."""

    item_id: str
    token: int
    worker_id: str


class UnknownJobError(ShopOpsError):
    """No job {job_id} in this store. Fix: pass an id returned by submit() or listed by jobs()."""

    job_id: str


class JobLeasedError(ShopOpsError):
    """Job {job_id} is leased to worker {owner} (token {token}) until t={expires_at:g}. Wait for the lease to expire or for its owner to finish; do not start the same work twice."""

    refusal = True

    job_id: str
    owner: str
    token: int
    expires_at: float


class JobNotRunningError(ShopOpsError):
    """Job {job_id} is {state}, not running: {action} needs a running job that you have claimed."""

    refusal = True

    job_id: str
    state: str
    action: str


class VersionConflictError(ShopOpsError):
    """Job {job_id} is at version {current}, not the version {expected} you read. Someone changed it since; get() the job again and decide from what it says now."""

    refusal = True

    job_id: str
    expected: int
    current: int


class CheckStopped(BaseException):
    """A check stopped from outside the learner's code: the grader's timer, the learner's
    process gone, a message off the protocol. Neither a KeyboardInterrupt (it is not the
    learner pressing *stop*) nor an Exception (no `except Exception` swallows it); like the
    learner's *stop*, no check turns it into a verdict."""


class SimulatedCrash(_Templated):
    """Simulated crash at {point}: the worker stopped here and lost everything it had not written to a store. Restart by running it again with the same stores."""

    # Control flow, not a refusal, so outside the ShopOpsError root (as Hypothesis and huey
    # keep theirs): a worker's `except ShopOpsError` or `except Exception` cannot swallow its
    # own death, as a dead process runs no except block.

    point: str


class EffectFailedError(ShopOpsError):
    """The {step} effect of {job_id} came back {status} (operation {op_id}), so the step is not confirmed. The next run must find out what happened before it tries again."""

    step: str
    job_id: str
    status: str
    op_id: str


class DraftError(ShopOpsError):
    """The model cannot draft case {case_id}: {reason}."""

    case_id: str
    reason: str


class ModelTimeoutError(ShopOpsError):
    """The model call for case {case_id} timed out after {seconds:g} s: the draft so far is lost."""

    case_id: str
    seconds: float


class KitMisuseError(ShopOpsError):
    """{problem}. Fix: {fix}."""

    problem: str
    fix: str


class BudgetExhaustedError(ShopOpsError):
    """Budget {budget!r} has {remaining} left, not enough for {wanted}. The checkpoint carries budgets across restarts, so a resumed run cannot start over with a fresh one."""

    budget: str
    remaining: float
    wanted: float


class UnknownScenarioError(ShopOpsError):
    """No simulation scenario named {name!r}. Known scenarios: {known}. Fix: pass one of those names, or a Scenario object."""

    name: str
    known: str


class StoreError(ShopOpsError):
    """The store {target} failed: {reason}. Fix: {fix}."""

    # The root of what a database can do to a call; each cause below is its own class with its
    # own fix, so code tells them apart by class and a person by the one line it prints.
    target: str
    reason: str
    fix: str
    retry: bool = False  # nothing of the call was kept and running it again may work (see bind_transactions)


class StoreOpenError(StoreError):
    """Cannot open the store {target}: {reason}. Nothing was written. Fix: {fix}."""


class StoreFailedError(StoreError):
    """The store {target} failed: {reason}. This call's changes were rolled back. Fix: {fix}."""


class StoreLockedError(StoreFailedError):
    """The store {target} stayed locked: {reason}. Nothing of this call was kept. Fix: {fix}."""


class StoreFullError(StoreFailedError):
    """The store {target} is full: {reason}. Nothing of this call was kept. Fix: {fix}."""


class StoreCorruptError(StoreFailedError):
    """The store {target} is damaged: {reason}. Nothing of this call was kept. Fix: {fix}."""


class Kept(StrEnum):
    """What became of a call whose connection to the database was lost."""

    NOTHING = "This call's changes were rolled back."  # the server never saw its COMMIT
    UNKNOWN = "Whether this call's change was kept is unknown: look before you do it again."  # COMMIT on its way
    NOT_SENT = "Nothing of this call reached the database."  # the server did not come back in time


class ConnectionLostError(StoreError):
    """The connection to the store {target} was lost: {reason}. {outcome} Fix: {fix}."""

    # `retry` is True only for Kept.NOTHING: the call can simply run again once the store has
    # reconnected (the kit's own calls do). Kept.UNKNOWN: the caller looks before doing it
    # again. Kept.NOT_SENT: the store waited its patience out; the server is still away.
    outcome: Kept


class ForeignStoreError(ShopOpsError):
    """{target} {found}, so it is not a ShopOps Lab store this kit can use (it reads schema version {expected}). It was left exactly as it is. Fix: {fix}."""

    target: str
    expected: str
    found: str
    fix: str


class AnswersUnavailableError(ShopOpsError):
    """{what} is not available here: {why}. The check judges your answer where the keys are; write your own and run the check."""

    what: str
    why: str
