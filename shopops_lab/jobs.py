"""Durable job records: the job outlives the request that submitted it.

Submitting creates a record with a stable id and returns at once; the work happens
later, under a claim. Three rules keep the record trustworthy:

* submission is idempotent: the same request key with the same params is the same
  job, so a client that retries after a dropped connection does not start new work;
* every change moves along `JOB_TRANSITIONS` (kept as data, like `states.TRANSITIONS`)
  and bumps the record's `version`;
* every write a worker makes carries the fencing token of its claim, and the store
  refuses an older token. A lease decides who may *claim*; the token decides whose
  *writes* count. A paused worker whose lease ran out is not stopped by its own clock,
  it is stopped here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from shopops_lab import arguments
from shopops_lab.clock import Clock, component_clock, resolve
from shopops_lab.errors import (
    BadArgumentError,
    IdempotencyConflictError,
    JobLeasedError,
    JobNotRunningError,
    UnknownJobError,
    VersionConflictError,
)
from shopops_lab.events import EventKind, EventLog
from shopops_lab.fencing import TokenFence
from shopops_lab.payloads import json_copy
from shopops_lab.states import check_transition
from shopops_lab.store import Store, bind_transactions, store_for, transaction

__all__ = ["Claim", "JOB_TRANSITIONS", "Job", "JobState", "JobStore"]


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING_FOR_APPROVAL = "waiting_for_approval"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


# (from, to) -> the label a diagram puts on that edge.
JOB_TRANSITIONS: Mapping[tuple[JobState, JobState], str] = MappingProxyType(
    {
        (JobState.QUEUED, JobState.RUNNING): "claim",
        (JobState.RUNNING, JobState.RUNNING): "claim again (lease expired, or same worker)",
        (JobState.RUNNING, JobState.WAITING_FOR_APPROVAL): "wait for approval",
        (JobState.WAITING_FOR_APPROVAL, JobState.QUEUED): "approve",
        (JobState.RUNNING, JobState.SUCCEEDED): "complete",
        (JobState.RUNNING, JobState.FAILED): "fail",
        (JobState.QUEUED, JobState.CANCELLED): "cancel",
        (JobState.RUNNING, JobState.CANCELLED): "cancel",
        (JobState.WAITING_FOR_APPROVAL, JobState.CANCELLED): "cancel",
    }
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """A snapshot of one job record. `version` counts changes to the record;
    `last_step` is the last step a worker confirmed; `token` is the newest claim's."""

    id: str
    request_key: str
    params: Mapping[str, Any]
    state: JobState
    version: int
    last_step: str | None
    token: int
    owner: str | None
    lease_expires_at: float | None
    result: Any
    error: str | None
    approval_ref: str | None
    submitted_at: float


@dataclass(frozen=True, kw_only=True, slots=True)
class Claim:
    """What a worker gets from `claim`: the token to put on every write, and where to resume."""

    job_id: str
    worker_id: str
    token: int
    claimed_at: float
    expires_at: float
    last_step: str | None
    version: int


class JobStore:
    """The authoritative job records. See the module docstring for the rules.

    They live in `store` (a Store or a URL; by default in this process): a job's record, its
    request key's idempotency record and its fencing token, each change one transaction."""

    def __init__(
        self, clock: Clock | None = None, log: EventLog | None = None, *, store: Store | str | None = None
    ) -> None:
        self.clock: Clock = component_clock(clock)
        self.store: Store = store_for(store, log)
        self.log = self.store.log
        self._fence = TokenFence("job", store=self.store)
        bind_transactions(self, self.store)

    # ------------------------------------------------------------------ submitting
    @transaction
    def submit(self, request_key: str, params: Mapping[str, Any] | None = None, *, now: float | None = None) -> Job:
        """Record a job, or return the one this request key already made. The same key
        with different params is a client bug, refused with IdempotencyConflictError."""
        arguments.text("request_key", request_key, "a key the client reuses on every retry, e.g. 'O-1001:refund'")
        body = json_copy({} if params is None else params, "params")
        if not isinstance(body, dict):
            raise BadArgumentError(
                field="params",
                problem=f"is {arguments.a(type(params).__name__)}",
                fix="pass a dict, e.g. params={'case_id': 'O-1001'}",
            )
        t = resolve(self.clock, now)
        # One INSERT decides which of any number of concurrent submits makes the job; the
        # others wait for it to commit and then read its job id.
        if not self.store.put_new(_REQUESTS, request_key, ""):
            job = self._get(self.store.get(_REQUESTS, request_key))
            if _canonical(job.params) != _canonical(body):  # {"approve": 1} is not {"approve": True}
                field = _first_difference(job.params, body)
                raise IdempotencyConflictError(
                    key=request_key,
                    field=field,
                    difference=f"params[{field!r}] was {job.params.get(field, '<absent>')!r}, "
                    f"now {body.get(field, '<absent>')!r}",
                )
            return _handed(job)
        job_id = f"job-{self.store.next_number('job'):04d}"
        job = Job(
            id=job_id,
            request_key=request_key,
            params=MappingProxyType(body),
            state=JobState.QUEUED,
            version=1,
            last_step=None,
            token=0,
            owner=None,
            lease_expires_at=None,
            result=None,
            error=None,
            approval_ref=None,
            submitted_at=t,
        )
        self.store.put(_REQUESTS, request_key, job_id)  # the request's idempotency record, complete
        self._keep(job)
        self.log.append(EventKind.JOB_SUBMITTED, t, item_id=job_id, request_key=request_key)
        return _handed(job)

    # ------------------------------------------------------------------ claiming
    @transaction
    def claim(self, job_id: str, worker_id: str, *, lease_seconds: float, now: float | None = None) -> Claim:
        """Take ownership until now + `lease_seconds`, with a token one above the last.
        A live lease held by another worker is refused (JobLeasedError); an expired one
        is taken over, and from then on the old holder's writes are stale."""
        job = self._get(job_id)
        arguments.text("worker_id", worker_id, "the worker's name, e.g. 'A'")
        arguments.seconds("lease_seconds", lease_seconds, "pass a positive, finite number of seconds, e.g. 30")
        t = resolve(self.clock, now)
        held_until = job.lease_expires_at
        if job.state is JobState.RUNNING and job.owner != worker_id and held_until is not None and t < held_until:
            raise JobLeasedError(job_id=job_id, owner=job.owner, token=job.token, expires_at=job.lease_expires_at)
        self._check(job, JobState.RUNNING)
        token = self._fence.claim(job_id, worker_id=worker_id)
        expires_at = t + lease_seconds
        job = self._save(job, state=JobState.RUNNING, token=token, owner=worker_id, lease_expires_at=expires_at)
        self.log.append(
            EventKind.JOB_CLAIMED,
            t,
            item_id=job_id,
            worker_id=worker_id,
            token=token,
            expires_at=job.lease_expires_at,
            version=job.version,
        )
        return Claim(
            job_id=job_id,
            worker_id=worker_id,
            token=IssuedToken(token, _issuer(self.store)),
            claimed_at=t,
            expires_at=expires_at,
            last_step=job.last_step,
            version=job.version,
        )

    # ------------------------------------------------------------------ fenced writes
    @transaction
    def confirm_step(
        self, job_id: str, step_id: str, *, token: int, expected_version: int | None = None, now: float | None = None
    ) -> Job:
        """Record `step_id` as the last confirmed step. With `expected_version`, also
        refuse (VersionConflictError) if the record changed since the caller read it."""
        arguments.text("step_id", step_id, "the id of the step you finished, e.g. 'summarize'")
        if expected_version is not None:
            arguments.whole(
                "expected_version",
                expected_version,
                None,
                "pass the version from the Job or Claim you read, or leave it out",
            )
        job, t = self._fenced(job_id, token, "confirm_step", now)
        if expected_version is not None:
            if expected_version != job.version:
                raise VersionConflictError(job_id=job_id, expected=expected_version, current=job.version)
        self._running(job, "confirm_step")
        job = self._save(job, last_step=step_id)
        self.log.append(
            EventKind.JOB_STEP_CONFIRMED,
            t,
            item_id=job_id,
            worker_id=job.owner,
            token=token,
            step=step_id,
            version=job.version,
        )
        return _handed(job)

    @transaction
    def complete(self, job_id: str, *, token: int, result: Any = None, now: float | None = None) -> Job:
        """Finish the job with `result` (JSON). Rejected if a newer claim exists, even
        when the result is right: ownership, not correctness, decides."""
        body = json_copy(result, "result")
        job, t = self._fenced(job_id, token, "complete", now)
        return self._move(job, JobState.SUCCEEDED, t, token=token, result=body, owner=None, lease_expires_at=None)

    @transaction
    def fail(self, job_id: str, *, token: int, error: str, now: float | None = None) -> Job:
        """End the job as failed, saying why."""
        arguments.text("error", error, "what went wrong, e.g. error='provider refused the message'")
        job, t = self._fenced(job_id, token, "fail", now)
        return self._move(job, JobState.FAILED, t, token=token, error=error, owner=None, lease_expires_at=None)

    @transaction
    def wait_for_approval(self, job_id: str, *, token: int, now: float | None = None) -> Job:
        """Park the job until a person approves; the worker lets go of it meanwhile."""
        job, t = self._fenced(job_id, token, "wait_for_approval", now)
        return self._move(job, JobState.WAITING_FOR_APPROVAL, t, token=token, owner=None, lease_expires_at=None)

    # ------------------------------------------------------------------ people's actions
    @transaction
    def approve(self, job_id: str, approval_ref: str, *, now: float | None = None) -> Job:
        """A person approved: the job is queued again, carrying the approval's reference."""
        arguments.text("approval_ref", approval_ref, "the approval's id, e.g. 'appr-0007'")
        job = self._get(job_id)
        return self._move(job, JobState.QUEUED, resolve(self.clock, now), approval_ref=approval_ref)

    @transaction
    def cancel(self, job_id: str, *, reason: str = "cancelled", now: float | None = None) -> Job:
        """Stop the job. A worker still running it finds out on its next write."""
        arguments.text("reason", reason, "the reason, e.g. reason='customer withdrew the request'")
        job = self._get(job_id)
        return self._move(
            job, JobState.CANCELLED, resolve(self.clock, now), error=reason, owner=None, lease_expires_at=None
        )

    # ------------------------------------------------------------------ reading
    def get(self, job_id: str) -> Job:
        """A snapshot of the job: changing its params or result changes nothing here."""
        return _handed(self._get(job_id))

    def jobs(self, state: JobState | str | None = None) -> list[Job]:
        """Every job in submission order, optionally only those in `state`."""
        wanted = (
            None if state is None else arguments.member("state", state, JobState, ", or leave it out for every job")
        )
        return [_handed(job) for job in self._all() if wanted is None or job.state is wanted]

    def __len__(self) -> int:
        return len(self.store.scan(_JOBS))

    def __repr__(self) -> str:
        counts = {s: 0 for s in JobState}
        for job in self._all():
            counts[job.state] += 1
        return "JobStore(" + ", ".join(f"{s.value}={n}" for s, n in counts.items()) + ")"

    # ------------------------------------------------------------------ internals
    def _get(self, job_id: str) -> Job:
        record = self.store.get(_JOBS, job_id) if isinstance(job_id, str) else None
        if record is None:
            raise UnknownJobError(job_id=job_id)
        return _job(record, self._fence.current(job_id))

    def _all(self) -> list[Job]:
        return [_job(record, self._fence.current(job_id)) for job_id, record in self.store.scan(_JOBS)]

    def _fenced(self, job_id: str, token: int, op: str, now: float | None) -> tuple[Job, float]:
        """The job, if `token` is its current one. An older token is logged and refused."""
        job = self._get(job_id)
        if not arguments.is_whole(token) or not 1 <= token <= job.token:
            raise BadArgumentError(
                field="token",
                problem=f"is {token!r}, which job {job_id} never issued",
                fix="pass the token from the Claim that claim() returned",
            )
        issuer = getattr(token, "issuer", None)
        if issuer is not None and issuer != _issuer(self.store):
            raise BadArgumentError(
                field="token",
                problem=f"is token {int(token)} of another job store's {job_id}",
                fix="pass the token from a Claim this job store's claim() returned",
            )
        t = resolve(self.clock, now)
        self._fence.check(job_id, token, t=t, op=op, current=job.token)
        return job, t

    def _running(self, job: Job, action: str) -> None:
        if job.state is not JobState.RUNNING:
            raise JobNotRunningError(job_id=job.id, state=job.state.value, action=action)

    def _check(self, job: Job, target: JobState) -> None:
        check_transition(f"job {job.id}", job.state, target, JOB_TRANSITIONS)

    def _move(self, job: Job, target: JobState, t: float, *, token: int | None = None, **changes: Any) -> Job:
        self._check(job, target)
        source = job.state
        job = self._save(job, state=target, **changes)
        self.log.append(
            EventKind.JOB_STATE_CHANGED,
            t,
            item_id=job.id,
            token=token,
            source=source.value,
            target=target.value,
            version=job.version,
        )
        return _handed(job)

    def _save(self, job: Job, **changes: Any) -> Job:
        job = replace(job, version=job.version + 1, **changes)
        self._keep(job)
        return job

    def _keep(self, job: Job) -> None:
        """Store the record; its token is the fence's, kept beside it."""
        record = {name: getattr(job, name) for name in _RECORD}
        record["state"], record["params"] = job.state.value, dict(job.params)
        self.store.put(_JOBS, job.id, record)


_JOBS, _REQUESTS = "job", "job request"  # the records: job id -> job, request key -> job id
_RECORD = (
    "id",
    "request_key",
    "params",
    "state",
    "version",
    "last_step",
    "owner",
    "lease_expires_at",
    "result",
    "error",
    "approval_ref",
    "submitted_at",
)


def _job(record: Mapping[str, Any], token: int) -> Job:
    return Job(
        **{**record, "state": JobState(record["state"]), "params": MappingProxyType(record["params"]), "token": token}
    )


def _handed(job: Job) -> Job:
    """A copy of a stored job for a caller: its params and result are fresh copies, so
    the caller may change them without changing the store (or a later idempotency check)."""
    return replace(
        job, params=MappingProxyType(json_copy(job.params, "params")), result=json_copy(job.result, "result")
    )


def _canonical(value: Any) -> str:
    """`value` as JSON text with sorted keys: equal only if the JSON is equal, so True is not
    1 and 1 is not 1.0, as a client's request body would differ."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=dict)


def _first_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    return next(
        key
        for key in sorted(set(old) | set(new))
        if key not in old or key not in new or _canonical(old[key]) != _canonical(new[key])
    )


class IssuedToken(int):
    """A claim's token: an int, which also remembers the job store that issued it, so a
    token from another store (whose job-0001 has a token 1 too) is refused, not taken for
    this store's. Two stores on one database are one issuer."""

    issuer: Any

    def __new__(cls, value: int, issuer: Any = None) -> IssuedToken:
        token = super().__new__(cls, value)
        token.issuer = issuer
        return token


def _issuer(store: Store) -> Any:
    """Who issues tokens for `store`: its database (by URL) when shared, else the store itself."""
    return store.url if store.shared else store
