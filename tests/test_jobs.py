"""Durable jobs: idempotent submission, the transition table, leases and fencing tokens."""

from __future__ import annotations

import pytest

from shopops_lab.clock import FakeClock
from shopops_lab.errors import (
    BadArgumentError,
    IdempotencyConflictError,
    JobLeasedError,
    JobNotRunningError,
    StaleTokenError,
    TransitionError,
    UnknownJobError,
    VersionConflictError,
)
from shopops_lab.events import EventKind, EventLog
from shopops_lab.jobs import JOB_TRANSITIONS, Claim, Job, JobState, JobStore


@pytest.fixture
def store() -> JobStore:
    return JobStore(clock=FakeClock(), log=EventLog())


def running(store: JobStore, worker: str = "A", *, now: float = 0, lease: float = 30) -> tuple[Job, Claim]:
    job = store.submit("O-1001:refund", {"case_id": "O-1001", "amount": 25})
    return job, store.claim(job.id, worker, lease_seconds=lease, now=now)


# ---------------------------------------------------------------------- submission
def test_submit_creates_a_queued_job_with_a_counter_id(store):
    job = store.submit("O-1001:refund", {"case_id": "O-1001"})
    assert (job.id, job.state, job.version, job.token, job.last_step) == ("job-0001", JobState.QUEUED, 1, 0, None)
    assert dict(job.params) == {"case_id": "O-1001"}
    assert store.submit("O-1002:refund", {}).id == "job-0002"


def test_same_key_and_params_is_the_same_job(store):
    first = store.submit("O-1001:refund", {"case_id": "O-1001", "amount": 25})
    again = store.submit("O-1001:refund", {"amount": 25, "case_id": "O-1001"})
    assert again == first
    assert len(store) == 1
    assert len(store.log.where(EventKind.JOB_SUBMITTED)) == 1


def test_same_key_with_other_params_names_the_key_and_the_field(store):
    store.submit("O-1001:refund", {"case_id": "O-1001", "amount": 25})
    with pytest.raises(IdempotencyConflictError) as err:
        store.submit("O-1001:refund", {"case_id": "O-1001", "amount": 40})
    assert err.value.key == "O-1001:refund"
    assert err.value.field == "amount"
    assert "'O-1001:refund'" in str(err.value) and "params['amount'] was 25, now 40" in str(err.value)
    assert len(store) == 1


def test_a_field_present_on_one_side_only_is_the_difference(store):
    store.submit("k", {"a": 1})
    with pytest.raises(IdempotencyConflictError) as err:
        store.submit("k", {"a": 1, "b": 2})
    assert err.value.field == "b" and "'<absent>'" in str(err.value)


def test_submitted_params_cannot_be_changed_behind_the_store(store):
    params = {"case_id": "O-1001"}
    job = store.submit("k", params)
    params["case_id"] = "O-9999"
    assert store.get(job.id).params["case_id"] == "O-1001"
    with pytest.raises(TypeError):
        job.params["case_id"] = "O-9999"


@pytest.mark.parametrize(
    "key, params, field",
    [
        ("", {}, "request_key"),
        (None, {}, "request_key"),
        ("k", ["not", "a", "dict"], "params"),
        ("k", {"when": object()}, "params['when']"),
    ],
)
def test_bad_submissions_name_the_field(store, key, params, field):
    with pytest.raises(BadArgumentError) as err:
        store.submit(key, params)
    assert err.value.field == field
    assert len(store) == 0


# ---------------------------------------------------------------------- transitions as data
def test_the_transition_table_is_data_over_job_states():
    states = {s for edge in JOB_TRANSITIONS for s in edge}
    assert states == set(JobState)
    assert JOB_TRANSITIONS[(JobState.QUEUED, JobState.RUNNING)] == "claim"
    assert (JobState.SUCCEEDED, JobState.RUNNING) not in JOB_TRANSITIONS
    with pytest.raises(TypeError):
        JOB_TRANSITIONS[(JobState.SUCCEEDED, JobState.RUNNING)] = "reopen"


def test_every_state_change_follows_an_edge_and_bumps_the_version(store):
    job, claim = running(store)
    assert (store.get(job.id).state, store.get(job.id).version) == (JobState.RUNNING, 2)
    store.wait_for_approval(job.id, token=claim.token)
    approved = store.approve(job.id, "appr-0007")
    assert (approved.state, approved.version, approved.approval_ref) == (JobState.QUEUED, 4, "appr-0007")
    claim = store.claim(job.id, "B", lease_seconds=30)
    done = store.complete(job.id, token=claim.token, result={"message_id": "msg-0001"})
    assert (done.state, done.version, done.result, done.owner) == (
        JobState.SUCCEEDED,
        6,
        {"message_id": "msg-0001"},
        None,
    )
    changes = [(e.info["source"], e.info["target"]) for e in store.log.where(EventKind.JOB_STATE_CHANGED)]
    assert changes == [
        ("running", "waiting_for_approval"),
        ("waiting_for_approval", "queued"),
        ("running", "succeeded"),
    ]
    assert all(edge in JOB_TRANSITIONS for edge in changes)


def test_a_finished_job_cannot_be_claimed_or_cancelled(store):
    job, claim = running(store)
    store.complete(job.id, token=claim.token)
    with pytest.raises(TransitionError) as err:
        store.claim(job.id, "B", lease_seconds=30)
    assert (err.value.source, err.value.target) == ("succeeded", "running")
    with pytest.raises(TransitionError):
        store.cancel(job.id)
    assert store.get(job.id).version == 3


def test_a_queued_job_cannot_be_approved(store):
    job = store.submit("k", {})
    with pytest.raises(TransitionError):
        store.approve(job.id, "appr-1")
    assert store.get(job.id) == job


def test_cancel_stops_a_running_worker_at_its_next_write(store):
    job, claim = running(store)
    cancelled = store.cancel(job.id, reason="customer withdrew")
    assert (cancelled.state, cancelled.error, cancelled.owner) == (JobState.CANCELLED, "customer withdrew", None)
    with pytest.raises(TransitionError):
        store.complete(job.id, token=claim.token, result="done")
    with pytest.raises(JobNotRunningError) as err:
        store.confirm_step(job.id, "fetch", token=claim.token)
    assert err.value.state == "cancelled" and "confirm_step" in str(err.value)
    assert store.get(job.id) == cancelled


def test_fail_records_the_error(store):
    job, claim = running(store)
    failed = store.fail(job.id, token=claim.token, error="provider refused")
    assert (failed.state, failed.error) == (JobState.FAILED, "provider refused")
    with pytest.raises(BadArgumentError) as err:
        store.fail(store.submit("k2", {}).id, token=1, error="")
    assert err.value.field == "error"


# ---------------------------------------------------------------------- claims and leases
def test_each_claim_gets_the_next_token_and_where_to_resume(store):
    job, first = running(store, now=0, lease=10)
    store.confirm_step(job.id, "fetch", token=first.token, now=1)
    second = store.claim(job.id, "B", lease_seconds=10, now=10)
    assert (first.token, second.token) == (1, 2)
    assert (second.last_step, second.expires_at, second.claimed_at) == ("fetch", 20.0, 10.0)
    assert store.get(job.id).owner == "B"


def test_a_live_lease_of_another_worker_is_refused(store):
    job, claim = running(store, "A", now=0, lease=10)
    with pytest.raises(JobLeasedError) as err:
        store.claim(job.id, "B", lease_seconds=10, now=9.5)
    assert (err.value.owner, err.value.token, err.value.expires_at) == ("A", 1, 10.0)
    assert store.get(job.id).token == 1
    assert store.claim(job.id, "A", lease_seconds=10, now=9.5).token == 2  # its owner may renew


def test_the_lessons_case_token_4_is_rejected_after_token_5(store):
    job = store.submit("O-1001:publish", {"case_id": "O-1001"})
    for t in (0, 2, 4):  # three earlier claims that each lapsed
        store.claim(job.id, "W", lease_seconds=2, now=t)
    a = store.claim(job.id, "A", lease_seconds=4, now=6)
    assert (a.token, a.expires_at) == (4, 10.0)
    b = store.claim(job.id, "B", lease_seconds=10, now=11)  # A paused; its lease ran out
    assert b.token == 5
    before = store.get(job.id)

    with pytest.raises(StaleTokenError) as err:
        store.complete(job.id, token=4, result={"summary": "correct, but too late"}, now=12)
    assert (err.value.token, err.value.current, err.value.what) == (4, 5, f"job {job.id}")
    assert store.get(job.id) == before  # state and version untouched by A
    stale = store.log.where(EventKind.STALE_REJECTED)
    assert [(e.worker_id, e.token, e.info["current"], e.info["op"]) for e in stale] == [("A", 4, 5, "complete")]

    done = store.complete(job.id, token=5, result={"summary": "from B"}, now=13)
    assert (done.state, done.version, done.result) == (JobState.SUCCEEDED, before.version + 1, {"summary": "from B"})


@pytest.mark.parametrize("write", ["confirm_step", "fail", "wait_for_approval"])
def test_every_fenced_write_refuses_an_old_token(store, write):
    job, old = running(store, "A", now=0, lease=5)
    store.claim(job.id, "B", lease_seconds=5, now=6)
    before = store.get(job.id)
    call = {
        "confirm_step": lambda: store.confirm_step(job.id, "fetch", token=old.token),
        "fail": lambda: store.fail(job.id, token=old.token, error="boom"),
        "wait_for_approval": lambda: store.wait_for_approval(job.id, token=old.token),
    }[write]
    with pytest.raises(StaleTokenError):
        call()
    assert store.get(job.id) == before
    assert store.log.where(EventKind.STALE_REJECTED)[-1].info["op"] == write


def test_the_current_owner_may_write_after_its_lease_lapsed_if_nobody_took_over(store):
    job, claim = running(store, "A", now=0, lease=5)
    assert store.complete(job.id, token=claim.token, now=50).state is JobState.SUCCEEDED


def test_confirm_step_with_expected_version_refuses_a_changed_record(store):
    job, claim = running(store)
    confirmed = store.confirm_step(job.id, "fetch", token=claim.token, expected_version=claim.version)
    assert (confirmed.last_step, confirmed.version) == ("fetch", claim.version + 1)
    with pytest.raises(VersionConflictError) as err:
        store.confirm_step(job.id, "summarize", token=claim.token, expected_version=claim.version)
    assert (err.value.expected, err.value.current) == (claim.version, confirmed.version)
    assert store.get(job.id).last_step == "fetch"
    assert [e.info["step"] for e in store.log.where(EventKind.JOB_STEP_CONFIRMED)] == ["fetch"]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"worker_id": "", "lease_seconds": 5}, "worker_id"),
        ({"worker_id": "A", "lease_seconds": 0}, "lease_seconds"),
        ({"worker_id": "A", "lease_seconds": float("inf")}, "lease_seconds"),
        ({"worker_id": "A", "lease_seconds": True}, "lease_seconds"),
        ({"worker_id": "A", "lease_seconds": 5, "now": "soon"}, "now"),
    ],
)
def test_bad_claims_name_the_field(store, kwargs, field):
    job = store.submit("k", {})
    with pytest.raises(BadArgumentError) as err:
        store.claim(job.id, **kwargs)
    assert err.value.field == field
    assert store.get(job.id) == job


@pytest.mark.parametrize("token", [0, 2, True, "1", None])
def test_a_token_never_issued_is_a_bad_argument_not_a_stale_one(store, token):
    job, _ = running(store)
    with pytest.raises(BadArgumentError) as err:
        store.complete(job.id, token=token)
    assert err.value.field == "token"


def test_other_bad_inputs_name_the_field(store):
    job, claim = running(store)
    cases = [
        (lambda: store.confirm_step(job.id, "", token=claim.token), "step_id"),
        (lambda: store.confirm_step(job.id, "s", token=claim.token, expected_version="2"), "expected_version"),
        (lambda: store.complete(job.id, token=claim.token, result={1, 2}), "result"),
        (lambda: store.approve(job.id, ""), "approval_ref"),
        (lambda: store.cancel(job.id, reason=""), "reason"),
        (lambda: JobStore(clock="noon"), "clock"),
    ]
    for call, field in cases:
        with pytest.raises(BadArgumentError) as err:
            call()
        assert err.value.field == field
    assert store.get(job.id).version == claim.version


def test_unknown_job_ids_are_reported(store):
    with pytest.raises(UnknownJobError) as err:
        store.get("job-0042")
    assert err.value.job_id == "job-0042" and "submit()" in str(err.value)
    with pytest.raises(UnknownJobError):
        store.claim("job-0042", "A", lease_seconds=5)


def test_reading_jobs_and_repr_are_deterministic(store):
    a = store.submit("a", {})
    b = store.submit("b", {})
    store.claim(b.id, "W", lease_seconds=5)
    assert [j.id for j in store.jobs()] == [a.id, b.id]
    assert [j.id for j in store.jobs("running")] == [b.id]
    assert repr(store) == ("JobStore(queued=1, running=1, waiting_for_approval=0, succeeded=0, failed=0, cancelled=0)")


def test_the_injected_clock_times_claims(store):
    store.clock.advance(100)
    job = store.submit("k", {})
    claim = store.claim(job.id, "A", lease_seconds=30)
    assert (job.submitted_at, claim.claimed_at, claim.expires_at) == (100.0, 100.0, 130.0)
