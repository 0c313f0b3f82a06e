"""Checkpoints, receipts and the two runners: what a restart repeats, and what it must not."""

from __future__ import annotations

import copy
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shopops_lab.checkpoint import PUBLISH_WORKFLOW, Checkpoint, CheckpointStore, Receipt, Step, Workflow
from shopops_lab.effects import Contact, ProviderFault, SendResult, SendStatus
from shopops_lab.errors import (
    BadArgumentError,
    BudgetExhaustedError,
    EffectFailedError,
    ShopOpsError,
    SimulatedCrash,
    StaleTokenError,
    WorkflowVersionError,
)
from shopops_lab.events import EventKind
from shopops_lab.recovery import CrashPoint, Env, NaiveCheckpointRunner, PointKind, ReceiptRunner

JOB = "O-1001"
V2 = Workflow(version="v2", steps=PUBLISH_WORKFLOW.steps)


def crash(runner, env, point):
    with pytest.raises(SimulatedCrash) as err:
        runner(JOB, env, crash_at=point)
    assert err.value.point == str(point)


# ---------------------------------------------------------------------- the plan
def test_the_publish_workflow_is_steps_as_data():
    assert PUBLISH_WORKFLOW.step_ids == ("fetch", "summarize", "publish")
    assert [s.effect for s in PUBLISH_WORKFLOW.steps] == [False, False, True]
    assert str(PUBLISH_WORKFLOW) == "v1 (fetch, summarize, publish*)"
    assert Workflow(version="v3", steps=[Step(id="a")]).steps == (Step(id="a"),)


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: Step(id="has space"), "Step.id"),
        (lambda: Step(id="publish", effect="yes"), "Step.effect"),
        (lambda: Workflow(version="", steps=[Step(id="a")]), "Workflow.version"),
        (lambda: Workflow(version="v1", steps=[]), "Workflow.steps"),
        (lambda: Workflow(version="v1", steps=["fetch"]), "Workflow.steps"),
        (lambda: Workflow(version="v1", steps=[Step(id="a"), Step(id="a")]), "Workflow.steps"),
        (lambda: PUBLISH_WORKFLOW.step("deploy"), "step_id"),
    ],
)
def test_bad_plans_name_the_field(make, field):
    with pytest.raises(BadArgumentError) as err:
        make()
    assert err.value.field == field


# ---------------------------------------------------------------------- the record
def test_a_checkpoint_is_immutable_and_grows_by_returning_new_ones():
    start = Checkpoint.start("v1", budgets={"tool_calls": 2})
    receipt = Receipt(op_id="O-1001:publish:v1", step="publish", message_id="msg-0001")
    cp = (
        start.confirm("fetch", "source-v1")
        .spend("tool_calls")
        .intend(receipt.op_id, "publish")
        .receive(receipt)
        .approve("appr-7")
    )
    assert start.completed == () and dict(start.budgets) == {"tool_calls": 2}
    assert cp.completed == ("fetch",) and dict(cp.artifacts) == {"fetch": "source-v1"}
    assert dict(cp.intents) == {receipt.op_id: "publish"} and cp.receipts[receipt.op_id] == receipt
    assert (dict(cp.budgets), cp.approval_refs) == ({"tool_calls": 1}, ("appr-7",))
    assert cp.op_for("publish") == receipt.op_id and cp.op_for("summarize") is None
    with pytest.raises(TypeError):
        cp.artifacts["fetch"] = "source-v2"
    with pytest.raises(AttributeError):
        cp.completed = ()
    assert repr(cp).startswith(
        "Checkpoint(workflow_version='v1', completed=('fetch',), artifacts={'fetch': 'source-v1'}"
    )


def test_a_record_nothing_can_change_is_its_own_copy_and_a_world_holding_it_copies():
    """The explorer copies a world's records by the thousand: an immutable one is shared, as a
    str is, and a checkpoint (whose read-only mappings `copy` could not copy at all) copies."""
    receipt = Receipt(op_id="O-1:publish:v1", step="publish", message_id="msg-0001")
    cp = Checkpoint.start("v1", budgets={"sends": 1}).intend(receipt.op_id, "publish").receive(receipt)
    records = [
        receipt,
        cp,
        PUBLISH_WORKFLOW,
        PUBLISH_WORKFLOW.steps[0],
        CrashPoint.after_effect("publish"),
        SendResult(status=SendStatus.OK, op_id="O-1", message_id="msg-0001"),
        Contact(
            message_id="msg-0001", channel="email", case_id="O-1", to="a@b", idem_key="k", time=0.0, worker_id=None
        ),
    ]
    from shopops_lab.explore import _immutable

    for record in records:
        assert copy.deepcopy(record) is record
        with pytest.raises(AttributeError):
            record.__setattr__(dataclasses.fields(record)[0].name, "changed")
        # what the explorer takes such a record to be without looking (shares it between worlds)
        assert _immutable(record) and all(_immutable(getattr(record, f.name)) for f in dataclasses.fields(record))
    world = {"checkpoint": cp, "log": [cp, receipt]}
    copied = copy.deepcopy(world)
    assert copied == world and copied["log"] is not world["log"] and copied["checkpoint"] is cp


def test_confirming_a_step_twice_is_refused():
    with pytest.raises(BadArgumentError) as err:
        Checkpoint.start("v1").confirm("fetch", "source-v1").confirm("fetch", "source-v2")
    assert err.value.field == "step"


def test_budgets_run_out():
    cp = Checkpoint.start("v1", budgets={"tool_calls": 1}).spend("tool_calls")
    with pytest.raises(BudgetExhaustedError) as err:
        cp.spend("tool_calls")
    assert (err.value.budget, err.value.remaining, err.value.wanted) == ("tool_calls", 0, 1)
    with pytest.raises(BadArgumentError) as err:
        cp.spend("tokens")
    assert err.value.field == "budget"


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"workflow_version": ""}, "workflow_version"),
        ({"completed": ("fetch", "fetch")}, "completed"),
        ({"completed": "fetch"}, "completed"),
        ({"artifacts": {"fetch": 8}}, "artifacts"),
        ({"intents": ["op"]}, "intents"),
        ({"receipts": {"op": "msg-0001"}}, "receipts"),
        ({"receipts": {"op-a": Receipt(op_id="op-b", step="publish", message_id="m")}}, "receipts['op-a']"),
        ({"budgets": {"tool_calls": -1}}, "budgets['tool_calls']"),
        ({"budgets": {"tool_calls": True}}, "budgets['tool_calls']"),
        ({"approval_refs": ("",)}, "approval_refs"),
        ({"token": -1}, "token"),
    ],
)
def test_bad_checkpoints_name_the_field(kwargs, field):
    with pytest.raises(BadArgumentError) as err:
        Checkpoint(**{"workflow_version": "v1", **kwargs})
    assert err.value.field == field


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"op_id": ""}, "Receipt.op_id"),
        ({"message_id": None}, "Receipt.message_id"),
        ({"via": "guess"}, "Receipt.via"),
    ],
)
def test_bad_receipts_name_the_field(kwargs, field):
    with pytest.raises(BadArgumentError) as err:
        Receipt(**{"op_id": "op", "step": "publish", "message_id": "msg-0001", **kwargs})
    assert err.value.field == field


# ---------------------------------------------------------------------- the store
def test_the_store_fences_saves_with_the_newest_token():
    store = CheckpointStore()
    assert store.load(JOB) is None and store.token(JOB) == 0
    a = store.claim(JOB)
    saved = store.save(JOB, Checkpoint.start("v1").confirm("fetch", "source-v1"), token=a)
    assert saved.token == a == 1 and store.load(JOB) == saved
    b = store.claim(JOB)
    with pytest.raises(StaleTokenError) as err:
        store.save(JOB, saved.confirm("summarize", "summary-v1"), token=a)
    assert (err.value.token, err.value.current) == (1, 2)
    assert store.load(JOB) == saved and len(store.history(JOB)) == 1  # nothing written
    assert [(e.token, e.info["current"], e.info["op"]) for e in store.log.where(EventKind.STALE_REJECTED)] == [
        (1, 2, "save")
    ]
    store.save(JOB, saved.confirm("summarize", "summary-v1"), token=b)
    assert [cp.completed for cp in store.history(JOB)] == [("fetch",), ("fetch", "summarize")]
    assert store.jobs() == [JOB]


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda s: s.save(JOB, Checkpoint.start("v1"), token=1), "token"),  # never claimed
        (lambda s: s.save(JOB, {"completed": []}, token=1), "checkpoint"),
        (lambda s: s.claim(""), "job_id"),
        (lambda s: s.load(None), "job_id"),
        (lambda s: s.migrate(JOB, "v2", lambda cp: cp), "job_id"),  # nothing to migrate
    ],
)
def test_bad_store_calls_name_the_field(call, field):
    store = CheckpointStore()
    with pytest.raises(BadArgumentError) as err:
        call(store)
    assert err.value.field == field
    assert store.history(JOB) == ()


def test_migration_is_explicit_checked_and_fences_the_old_worker():
    store = CheckpointStore()
    token = store.claim(JOB)
    store.save(JOB, Checkpoint.start("v1").confirm("fetch", "source-v1"), token=token)
    for to_version, fn, field in [
        ("", lambda cp: cp, "to_version"),
        ("v2", "not callable", "fn"),
        ("v2", lambda cp: None, "fn"),
    ]:
        with pytest.raises(BadArgumentError) as err:
            store.migrate(JOB, to_version, fn)
        assert err.value.field == field
    assert len(store.history(JOB)) == 1
    migrated = store.migrate(JOB, "v2", lambda cp: cp.approve("re-approved-for-v2"))
    assert (migrated.workflow_version, migrated.completed, migrated.approval_refs) == (
        "v2",
        ("fetch",),
        ("re-approved-for-v2",),
    )
    with pytest.raises(StaleTokenError):
        store.save(JOB, Checkpoint.start("v1"), token=token)
    assert store.load(JOB) == migrated


# ---------------------------------------------------------------------- crash points
def test_crash_points_have_names_that_round_trip():
    points = [
        CrashPoint.before_effect("fetch"),
        CrashPoint.after_effect("publish"),
        CrashPoint.after_intent("publish"),
        CrashPoint.after_receipt("publish"),
        CrashPoint.after_checkpoint("summarize"),
        CrashPoint.before_ack(),
        CrashPoint.after_ack(),
        CrashPoint(kind="after_save", nth=2),
    ]
    names = [str(p) for p in points]
    assert names == [
        "before_effect(fetch)",
        "after_effect(publish)",
        "after_intent(publish)",
        "after_receipt(publish)",
        "after_checkpoint(summarize)",
        "before_ack",
        "after_ack",
        "after_save#2",
    ]
    assert [CrashPoint.parse(n) for n in names] == points
    assert CrashPoint.parse("after_ack").kind is PointKind.AFTER_ACK


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: CrashPoint(kind="during_lunch"), "kind"),
        (lambda: CrashPoint(kind="before_ack", nth=0), "nth"),
        (lambda: CrashPoint.parse("after effect publish"), "text"),
        (lambda: Env().arm(42), "crash_at"),
    ],
)
def test_bad_crash_points_name_the_field(make, field):
    with pytest.raises(BadArgumentError) as err:
        make()
    assert err.value.field == field


def test_a_simulated_crash_is_control_flow_outside_the_error_root():
    # A worker's `except ShopOpsError` (or `except Exception`) must not swallow its own death.
    assert not issubclass(SimulatedCrash, ShopOpsError)
    assert not issubclass(SimulatedCrash, Exception)
    crash = SimulatedCrash(point="after send")
    assert crash.point == "after send" and "after send" in str(crash)


# ---------------------------------------------------------------------- the lesson's example
@pytest.mark.parametrize("runner", [NaiveCheckpointRunner(), ReceiptRunner()], ids=repr)
def test_the_lessons_example_crash_after_summarize_then_resume(runner):
    env = Env()
    crash(runner, env, CrashPoint.after_checkpoint("summarize"))
    assert env.checkpoints.load(JOB).completed == ("fetch", "summarize")
    receipt = runner(JOB, env)
    assert receipt == "msg-0001"
    assert env.effects == ["fetch", "summarize", "publish"]  # each once
    assert [c.message_id for c in env.adapter.ledger.contacts(JOB)] == ["msg-0001"]
    final = env.checkpoints.load(JOB)
    assert final.artifacts["summarize"] == "summary-v1"  # reused, not regenerated
    assert final.completed == PUBLISH_WORKFLOW.step_ids
    assert env.acks == [(JOB, 2, "msg-0001")]
    assert "skip summarize: confirmed as summary-v1" in env.trace


def test_a_crash_before_the_summary_was_checkpointed_reruns_it_with_a_new_version():
    env = Env()
    crash(ReceiptRunner(), env, CrashPoint.after_effect("summarize"))
    ReceiptRunner()(JOB, env)
    assert env.effects == ["fetch", "summarize", "summarize", "publish"]
    assert env.checkpoints.load(JOB).artifacts["summarize"] == "summary-v2"  # v1 was never confirmed
    assert env.adapter.ledger.contacts()[0].idem_key == "O-1001:publish:v1"
    assert env.regenerated == []


# ---------------------------------------------------------------------- the window
def test_naive_runner_publishes_twice_after_a_crash_between_effect_and_checkpoint():
    env = Env()
    crash(NaiveCheckpointRunner(), env, CrashPoint.after_effect("publish"))
    assert env.checkpoints.load(JOB).completed == ("fetch", "summarize")  # publish happened, unrecorded
    NaiveCheckpointRunner()(JOB, env)
    assert env.deliveries(JOB, "publish") == ["msg-0001", "msg-0002"]
    assert env.effects == ["fetch", "summarize", "publish", "publish"]


def test_receipt_runner_reconciles_the_same_window_by_lookup():
    env = Env()
    crash(ReceiptRunner(), env, CrashPoint.after_effect("publish"))
    stored = env.checkpoints.load(JOB)
    assert dict(stored.intents) == {"O-1001:publish:v1": "publish"} and not stored.receipts
    assert ReceiptRunner()(JOB, env) == "msg-0001"
    assert env.deliveries(JOB, "publish") == ["msg-0001"]
    receipt = env.checkpoints.load(JOB).receipts["O-1001:publish:v1"]
    assert (receipt.message_id, receipt.via) == ("msg-0001", "lookup")
    assert env.log.where(EventKind.CONTACT_DEDUPED) == []  # not repeated and deduped: never repeated
    assert env.blind_resends == []


def test_an_intent_whose_send_never_happened_is_looked_up_then_sent():
    env = Env()
    crash(ReceiptRunner(), env, CrashPoint.before_effect("publish"))
    assert ReceiptRunner()(JOB, env) == "msg-0001"
    assert "lookup O-1001:publish:v1 -> failed" in env.trace
    assert env.deliveries(JOB, "publish") == ["msg-0001"]
    assert env.checkpoints.load(JOB).receipts["O-1001:publish:v1"].via == "reply"


def test_an_unknown_outcome_is_reconciled_via_lookup_not_repeated():
    env = Env(faults=[ProviderFault.DROP_REPLY])
    assert ReceiptRunner()(JOB, env) == "msg-0001"
    assert "send publish O-1001:publish:v1 -> unknown" in env.trace
    assert "lookup O-1001:publish:v1 -> ok msg-0001" in env.trace
    assert env.checkpoints.load(JOB).receipts["O-1001:publish:v1"].via == "lookup"
    assert len(env.adapter.ledger) == 1
    assert [
        e.kind
        for e in env.log.where(
            (EventKind.CONTACT_SENT, EventKind.EFFECT_UNKNOWN, EventKind.EFFECT_RECONCILED, EventKind.CONTACT_DEDUPED)
        )
    ] == [EventKind.CONTACT_SENT, EventKind.EFFECT_UNKNOWN, EventKind.EFFECT_RECONCILED]


def test_naive_runner_repeats_an_unknown_outcome():
    env = Env(faults=[ProviderFault.DROP_REPLY])
    with pytest.raises(EffectFailedError) as err:
        NaiveCheckpointRunner()(JOB, env)
    assert err.value.status == "unknown"
    NaiveCheckpointRunner()(JOB, env)
    assert env.deliveries(JOB, "publish") == ["msg-0001", "msg-0002"]


def test_a_refused_send_leaves_the_intent_and_the_next_run_retries_under_the_same_id():
    env = Env(faults=[ProviderFault.FAIL])
    with pytest.raises(EffectFailedError) as err:
        ReceiptRunner()(JOB, env)
    assert (err.value.step, err.value.op_id, err.value.status) == ("publish", "O-1001:publish:v1", "failed")
    assert "O-1001:publish:v1" in env.checkpoints.load(JOB).intents
    assert ReceiptRunner()(JOB, env) == "msg-0001"
    assert env.deliveries(JOB, "publish") == ["msg-0001"] and env.blind_resends == []


def test_a_duplicate_delivery_of_a_finished_job_changes_nothing():
    env = Env()
    first = ReceiptRunner()(JOB, env)
    history = env.checkpoints.history(JOB)
    assert ReceiptRunner()(JOB, env) == first
    assert env.checkpoints.history(JOB) == history
    assert env.effects == ["fetch", "summarize", "publish"]
    assert [token for _, token, _ in env.acks] == [1, 2]


# ---------------------------------------------------------------------- plan versions
def test_a_changed_workflow_version_is_refused_until_migrated():
    env = Env()
    crash(ReceiptRunner(), env, CrashPoint.after_checkpoint("summarize"))
    env.workflow = V2  # a new plan was deployed while the job was half done
    before = env.checkpoints.history(JOB)
    with pytest.raises(WorkflowVersionError) as err:
        ReceiptRunner()(JOB, env)
    assert (err.value.stored, err.value.current) == ("v1", "v2")
    assert env.checkpoints.history(JOB) == before and env.effects == ["fetch", "summarize"]

    env.checkpoints.migrate(JOB, "v2", lambda cp: cp)
    assert ReceiptRunner()(JOB, env) == "msg-0001"
    final = env.checkpoints.load(JOB)
    assert (final.workflow_version, final.artifacts["summarize"]) == ("v2", "summary-v1")
    assert list(final.receipts) == ["O-1001:publish:v2"]
    assert env.effects == ["fetch", "summarize", "publish"]


def test_a_migration_keeps_an_in_flight_operation_under_its_first_id():
    env = Env()
    crash(ReceiptRunner(), env, CrashPoint.after_effect("publish"))  # sent under v1, not recorded
    env.workflow = V2
    env.checkpoints.migrate(JOB, "v2", lambda cp: cp)
    assert ReceiptRunner()(JOB, env) == "msg-0001"
    assert env.deliveries(JOB, "publish") == ["msg-0001"]
    assert list(env.checkpoints.load(JOB).receipts) == ["O-1001:publish:v1"]


# ---------------------------------------------------------------------- budgets and fencing in runs
def test_budgets_are_carried_across_a_restart():
    env = Env(budgets={"tool_calls": 2})
    crash(ReceiptRunner(), env, CrashPoint.after_effect("summarize"))  # summarize's call was spent
    assert dict(env.checkpoints.load(JOB).budgets) == {"tool_calls": 0}
    with pytest.raises(BudgetExhaustedError):
        ReceiptRunner()(JOB, env)  # the rerun of summarize would need a third call
    assert env.effects == ["fetch", "summarize"] and len(env.adapter.ledger) == 0


def test_a_budget_big_enough_lets_the_restart_finish():
    env = Env(budgets={"tool_calls": 2})
    crash(ReceiptRunner(), env, CrashPoint.after_checkpoint("summarize"))
    assert ReceiptRunner()(JOB, env) == "msg-0001"
    assert dict(env.checkpoints.load(JOB).budgets) == {"tool_calls": 0}


def test_a_stale_runner_cannot_checkpoint_or_ack():
    env = Env()
    old = env.claim(JOB)
    env.claim(JOB)
    with pytest.raises(StaleTokenError):
        env.checkpoints.save(JOB, Checkpoint.start("v1"), token=old)
    with pytest.raises(StaleTokenError):
        env.ack(JOB, token=old, result="msg-0001")
    assert env.acks == [] and env.checkpoints.load(JOB) is None


# ---------------------------------------------------------------------- the env's guard rails
@pytest.mark.parametrize(
    "call, field",
    [
        (lambda env: env.make(JOB, "publish"), "step_id"),
        (lambda env: env.send(JOB, "summarize", "op"), "step_id"),
        (lambda env: env.make(JOB, "deploy"), "step_id"),
        (lambda env: Env(workflow="v1"), "workflow"),
    ],
)
def test_env_refuses_the_wrong_call_for_a_step(call, field):
    env = Env()
    with pytest.raises(BadArgumentError) as err:
        call(env)
    assert err.value.field == field
    assert env.effects == []


def test_env_notices_a_blind_resend():
    env = Env(faults=[ProviderFault.DROP_REPLY])
    first = env.send(JOB, "publish", "op-1", body="summary-v1")
    assert first.status is SendStatus.UNKNOWN
    env.send(JOB, "publish", "op-1", body="summary-v1")  # deduped by the provider, but blind
    assert env.blind_resends == ["op-1"]
    assert env.deliveries(JOB, "publish") == ["msg-0001"]


def test_crash_at_accepts_a_name_and_env_records_points_passed():
    env = Env()
    crash(ReceiptRunner(), env, "after_intent(publish)")
    assert [str(p) for p in env.reached][-3:] == [
        "after_effect(summarize)",
        "after_checkpoint(summarize)",
        "after_intent(publish)",
    ]
    assert env.crashed_at == CrashPoint.after_intent("publish")
    assert env.log.where(EventKind.WORKER_CRASHED)[0].info["point"] == "after_intent(publish)"


# ---------------------------------------------------------------- derived checkpoints
_TEXT = st.text(alphabet="abc-1", max_size=3)
_CHANGES = st.fixed_dictionaries(
    {},
    optional={
        "workflow_version": st.one_of(_TEXT, st.integers(), st.none()),
        "completed": st.one_of(st.lists(_TEXT, max_size=3).map(tuple), st.lists(_TEXT, max_size=2), st.none()),
        "artifacts": st.one_of(st.dictionaries(_TEXT, st.one_of(_TEXT, st.integers()), max_size=2), st.just([])),
        "intents": st.dictionaries(_TEXT, _TEXT, max_size=2),
        "receipts": st.dictionaries(
            _TEXT,
            st.builds(Receipt, op_id=st.sampled_from(["a", "b"]), step=st.just("s"), message_id=st.just("m")),
            max_size=2,
        ),
        "budgets": st.dictionaries(_TEXT, st.integers(-1, 3), max_size=2),
        "approval_refs": st.lists(_TEXT, max_size=2).map(tuple),
        "token": st.one_of(st.integers(-1, 3), st.booleans(), st.text(max_size=1)),
    },
)


@settings(max_examples=300, deadline=None)
@given(_CHANGES)
def test_a_derived_checkpoint_is_what_replace_makes_or_the_same_refusal(changes: dict) -> None:
    """`confirm`, `intend`, ... and the store's stamp derive a checkpoint checking only the
    fields they change (`_with`): the same checkpoint `dataclasses.replace` makes, and for a
    bad value the same error, naming the same field first."""
    start = Checkpoint(workflow_version="v1", completed=("fetch",), artifacts={"fetch": "src-1"}, budgets={"llm": 2})
    try:
        expected: object = dataclasses.replace(start, **changes)
    except BadArgumentError as exc:
        expected = str(exc)
    try:
        found: object = start._with(**changes)
    except BadArgumentError as exc:
        found = str(exc)
    assert found == expected
    if isinstance(found, Checkpoint):
        assert type(found.artifacts) is type(expected.artifacts) and type(found.completed) is tuple  # type: ignore[union-attr]


def test_load_reads_the_last_record_whatever_was_built_from_an_earlier_one() -> None:
    """`load` reuses the checkpoint it built from the job's last record while that record is
    the last; a write undone by its transaction, or a record another writer put, is read anew."""
    store = CheckpointStore()
    token = store.claim(JOB)
    first = store.save(JOB, Checkpoint.start("v1").confirm("fetch", "src-1"), token=token)
    assert store.load(JOB) == first
    with pytest.raises(RuntimeError), store.store.atomic:  # a save whose transaction is undone
        store.save(JOB, first.confirm("summarize", "sum-1"), token=token)
        raise RuntimeError
    assert store.load(JOB) == first and store.load(JOB).completed == ("fetch",)
    other = CheckpointStore(store=store.store)  # a second component on the same store writes
    second = other.save(JOB, first.confirm("summarize", "sum-2"), token=other.claim(JOB))
    assert store.load(JOB) == second and store.load(JOB).artifacts["summarize"] == "sum-2"


def test_a_copied_env_goes_on_as_the_original_would_and_apart_from_it() -> None:
    """The explorer goes on from copies of a world (`payloads.state_copy`): a copy taken after
    a crash finishes the job exactly as the original then does, and neither sees the
    other's work (its stores, its adapter, its checkpoint hook are its own)."""
    env = Env()
    crash(ReceiptRunner(), env, CrashPoint.after_checkpoint("summarize"))
    twin = copy.deepcopy(env)
    assert twin.checkpoints.load(JOB) == env.checkpoints.load(JOB) and twin.effects == env.effects
    assert ReceiptRunner()(JOB, twin) == "msg-0001"
    assert env.effects == ["fetch", "summarize"] and env.acks == [] and env.adapter.ledger.contacts() == []
    assert ReceiptRunner()(JOB, env) == "msg-0001"
    for world in (env, twin):
        assert world.effects == ["fetch", "summarize", "publish"] and world.acks == [(JOB, 2, "msg-0001")]
        assert [c.message_id for c in world.adapter.ledger.contacts(JOB)] == ["msg-0001"]
    assert twin.checkpoints.load(JOB) == env.checkpoints.load(JOB)
    assert twin.trace == env.trace and twin.log is not env.log and len(twin.log) == len(env.log)
