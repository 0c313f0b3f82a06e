"""The explorer's checks behind the grader's process boundary: an answer that hands the
exercise to the kit's own implementation, keeps its state in memory, or swallows the crash
it is told of (or, in labs 02 and 03, storms, trusts its own list over the queue, or ignores
a refused heartbeat) earns nothing, exactly as in the notebook (each is refused there by the
accuracy suites); so do wrong answers to the exercises whose facades are new (lab 01's
queue and clock, lab 05's job store); the master's answer earns every point (`test_grade_cli.py`)."""

from __future__ import annotations

import grade_fixtures as fx
import pytest

from shopops_lab.course.grade.judge import Limits
from shopops_lab.course.grade.results import Mark
from shopops_lab.course.grade.run import grade

PATIENT = Limits(cell_seconds=900, notebook_seconds=3600)  # right answers are judged, not timed

FENCE_DECIDES = """
from shopops_lab.fencing import TokenFence

class FencedResultStore(NaiveResultStore):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.fence = TokenFence("job")

    def claim(self, job_id, worker_id, *, now=None):
        token = super().claim(job_id, worker_id, now=now)
        self.fence.observe(job_id, token, worker_id=worker_id)
        return token

    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        current = self.current_token(job_id)
        if current is None:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)
        self.fence.check(job_id, token, t=0, op="complete")
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)
"""
RUNNER_RUNS = """
from shopops_lab.recovery import ReceiptRunner

def run(job_id, env):
    return ReceiptRunner()(job_id, env)
"""
CONSUMER_HANDLES = """
from shopops_lab.outbox import IdempotentConsumer

_CONSUMER = IdempotentConsumer()

def handle(delivery, processed, apply):
    _CONSUMER.effect = apply
    return _CONSUMER.handle(delivery)
"""
DISPATCH_MARKS_FIRST = """
def dispatch(outbox, broker):
    for message in outbox.pending():
        outbox.mark_sent(message.id)
        broker.publish(message)
"""
SWALLOWS = """

def run(job_id, env):
    try:
        return _masters_run(job_id, env)
    except BaseException:   # the crash it is told of too: it carries on as if it lived
        return "carried on"
"""
ACKS_FIRST = """
def force_expiry(queue, clock, handle):
    first = queue.acquire("W1")
    handle(first)
    queue.ack(first)
    clock.advance(queue.lease_seconds + 1)
    return first, queue.acquire("W7")
"""
LETS_THE_REFUSAL_OUT = """
def finish_job(jobs, job_id, do_step):
    token = jobs.claim(job_id, "W1", lease_seconds=30).token
    for step_id in ("fetch", "summarize", "publish"):
        do_step(step_id)
        jobs.confirm_step(job_id, step_id, token=token)
    jobs.complete(job_id, token=token, result="done")
    return jobs.get(job_id).state
"""
INTENT_AFTER_SEND = """
def run_with_intent(job_id, env):
    token = env.claim(job_id)
    cp = env.resume(job_id)
    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if not step.effect:
            cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)
            continue
        op_id = cp.op_for(step.id) or env.op_id(job_id, step.id)
        reply = env.lookup(op_id) if op_id in cp.intents else env.send(job_id, step.id, op_id, body="summary")
        cp = env.checkpoints.save(job_id, cp.intend(op_id, step.id), token=token)
        receipt = Receipt(op_id=op_id, step=step.id, message_id=reply.message_id)
        cp = env.checkpoints.save(job_id, cp.receive(receipt).confirm(step.id, reply.message_id), token=token)
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    return cp.artifacts["publish"]
"""

STORMS = """
def replay_and_drain(queue, handler):
    while True:
        for item in queue.dlq_items():
            queue.replay_dlq(item.id)
        if queue.process_one("W1", handler) == "empty":
            break
"""
OWN_LIST = """
def replay_and_drain(queue, handler):
    replayed = [item.id for item in queue.dlq_items()]
    for item_id in replayed:
        queue.replay_dlq(item_id)
    while any(queue.item(item_id).state.value == "ready" for item_id in replayed):
        queue.process_one("W1", handler)
"""
IGNORES_NO = """
def draft_with_heartbeats(lease, queue, model, email):
    draft = []
    while (chunk := model.next_chunk()) is not None:
        draft.append(chunk)
        queue.heartbeat(lease)
    email.send(lease.payload["idem_key"], case_id=lease.case_id, to=lease.payload["to"], body="".join(draft))
    queue.ack(lease)
"""

WRONG = {
    "storm_lab02": ("02", "replay-and-drain", STORMS, "retry storm by hand"),
    "ownlist_lab02": (
        "02",
        "replay-and-drain",
        OWN_LIST,
        "DLQ: fixed · R replays and drains (crash after replay_dlq) · R runs again",
    ),
    "ignores_lab03": ("03", "heartbeat-loop", IGNORES_NO, "yet your loop asked the model for another chunk"),
    "fence_lab04": ("04", "fenced-store", FENCE_DECIDES, "hands the decision to the kit's TokenFence"),
    "runner_lab05": ("05", "receipt-run", RUNNER_RUNS, "hands the job to the kit's ReceiptRunner"),
    "consumer_lab06": (
        "06",
        "idempotent-handle",
        CONSUMER_HANDLES,
        "hands the delivery to the kit's IdempotentConsumer",
    ),
    "dispatch_lab06": (
        "06",
        "outbox-dispatch",
        DISPATCH_MARKS_FIRST,
        "out-0001 was marked sent, but the broker never got it",
    ),
    "inflight_lab05": ("05", "receipt-run", fx.IN_FLIGHT, "was sent again without being looked up first"),
    "swallows_lab05": ("05", "receipt-run", None, "returned the str 'carried on'"),
    "acks_first_lab01": ("01", "force-expiry", ACKS_FIRST, "W1 acknowledged its lease"),
    "refusal_out_lab05": ("05", "finish-job", LETS_THE_REFUSAL_OUT, "and your function raised it"),
    "intent_after_send_lab05": ("05", "record-intent", INTENT_AFTER_SEND, "was sent again without being looked up"),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("explorer")
    for name, (lab, cell, source, _) in WRONG.items():
        if source is None:  # the master's own run, called by a wrapper that swallows every exception
            source = fx.right_answer(lab, cell).replace("def run(", "def _masters_run(", 1) + SWALLOWS
        fx.write(fx.submission(lab, {cell: source}), root / "class" / f"{name}.ipynb")
    report = grade([str(root / "class")], key=fx.SOLUTIONS, out=root / "out", jobs=2, limits=PATIENT)
    return {result.submission.name: result for result in report.results}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_answer_the_explorer_refuses_in_the_notebook_earns_nothing_from_the_grader(graded, name) -> None:
    lab, cell, _, why = WRONG[name]
    found = next(e for e in graded[name].exercises if e.grade_id == f"{cell}-test")
    assert (found.mark, found.points) == (Mark.INCORRECT, 0), found.message
    assert why in found.message, found.message


# Lab 07 behind the process boundary: the check remembers a pure policy's answers by value,
# so a policy with memory is asked again after the day (in the learner's process, where its
# memory lives); the chaos test's assertion is handed a log by handle and its AssertionError
# crosses back as the learner's own.
COUNTS_ITS_CALLS = """
CALLS = {"n": 0}

def my_policy(signals):
    CALLS["n"] += 1
    if CALLS["n"] > 2500:   # state that never resets: past the rules' questions it stops shedding
        return acquire()
    return acquire(max_priority=Priority.APPROVAL) if signals.in_flight >= GATEWAY_CAPACITY else acquire()
"""
ONE_EMAIL_PER_CASE = """
from collections import Counter

def assert_no_double_contact(log):
    per_case = Counter(event.case_id for event in log.where("contact_sent"))
    assert max(per_case.values()) == 1, "a customer heard from us twice"
"""


@pytest.fixture(scope="module")
def lab07_graded(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("lab07")
    answers = {"my-policy": COUNTS_ITS_CALLS, "chaos-assertion": ONE_EMAIL_PER_CASE}
    fx.write(fx.submission("07", answers), root / "class" / "lab07.ipynb")
    report = grade([str(root / "class")], key=fx.SOLUTIONS, out=root / "out", jobs=1, limits=PATIENT)
    (result,) = report.results
    return {e.grade_id: e for e in result.exercises}


@pytest.mark.parametrize(
    ("grade_id", "whys"),
    [
        # The notebook's own cells (its check() cell, its 10,000-item day) asked the policy first, in
        # the same process, so by the graded cell its counter may already have flipped: then it is a
        # policy without backpressure, and the day shows it.
        (
            "my-policy-test",
            (
                "when the check asked again after the day: the same signals must always get the same decision",
                "the gateway melted",
            ),
        ),
        (
            "chaos-assertion-test",
            ("your assertion failed a good run: one customer (O-1001) sent two different emails",),
        ),
    ],
)
def test_lab07s_wrong_answers_earn_nothing_from_the_grader(lab07_graded, grade_id, whys) -> None:
    found = lab07_graded[grade_id]
    assert (found.mark, found.points) == (Mark.INCORRECT, 0), found.message
    assert any(why in found.message for why in whys), found.message


PATCHES_RESTART = """
import shopops_lab.checks.fresh as _fresh
_fresh.fresh_copy = lambda answer, learners: answer   # a simulated crash now keeps this process's memory
"""


@pytest.mark.xfail(
    strict=True,
    reason="a known gap (docs/internals.md, threat model): simulated crashes reset memory with the kit's code in the "
    "learner's own process, which an answer can patch; a fork per crash would still share what the cells "
    "mapped shared, so closing it takes a new interpreter running the cells again per crash",
)
def test_an_answer_that_patches_the_restart_in_its_process_is_still_refused_by_the_explorer(tmp_path) -> None:
    """IN_FLIGHT keeps in memory what it sent. With the kit's restart patched in its own
    process, that memory survives every simulated crash, and the explorer's settings no
    longer catch the blind resend (the answer still scores 0, on a later check)."""
    fx.write(fx.submission("05", {"receipt-run": fx.IN_FLIGHT + PATCHES_RESTART}), tmp_path / "class" / "s.ipynb")
    report = grade([str(tmp_path / "class")], key=fx.SOLUTIONS, out=tmp_path / "out", jobs=1, limits=PATIENT)
    (result,) = report.results
    found = next(e for e in result.exercises if e.grade_id == "receipt-run-test")
    assert found.points == 0
    assert "was sent again without being looked up first" in found.message, found.message


# Lab 09 behind the process boundary: one answer, three judges, three graded cells. The explorer
# steps the learner's coroutine across the boundary one kit call at a time; a burst day is played
# in the learner's process and replayed in the judge from its transcript; real worker processes
# each get a learner process of their own. A worker's mistake costs the cells of the judges that
# see it; a process that hands the judge another worker's day is caught by the answer's own code.
KEY_PER_ATTEMPT = """
async def work(lease, kit):
    draft = ""
    while (piece := await kit.next_chunk()) is not None:
        draft += piece
        if not await kit.heartbeat():
            return
    result = await kit.send(f"{lease.case_id}:{lease.attempt}", draft)
    if result.status is SendStatus.UNKNOWN:
        result = await kit.lookup(f"{lease.case_id}:{lease.attempt}")
    if result.status is not SendStatus.OK:
        raise RuntimeError("not sent")
    await kit.ack()
"""
PLAYS_ANOTHER_WORKER = """
import shopops_lab.checks.worker_day as _day

_their_day = _day.played

def _played(work, seed, items):   # the day played with the master's worker, whatever `work` is
    return _their_day(_honest, seed, items)

_played.__module__, _played.__qualname__ = "shopops_lab.checks.worker_day", "played"
_day.played = _played
"""


def _ignores_refusals() -> str:
    master = fx.right_answer("09", "work")
    obeys = (
        "            if not await kit.heartbeat():         # the case is someone else's now: stop\n"
        "                return\n"
    )
    assert obeys in master
    return master.replace(obeys, "            await kit.heartbeat()\n")


@pytest.fixture(scope="module")
def lab09_graded(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("lab09")
    honest = fx.right_answer("09", "work").replace("async def work(", "async def _honest(", 1)
    answers = {
        "key_per_attempt": {"work": KEY_PER_ATTEMPT},
        "ignores_refusals": {"work": _ignores_refusals()},
        "plays_another_worker": {"work": KEY_PER_ATTEMPT + honest + PLAYS_ANOTHER_WORKER},
    }
    for name, cells in answers.items():
        fx.write(fx.submission("09", cells), root / "class" / f"{name}_lab09.ipynb")
    report = grade([str(root / "class")], key=fx.SOLUTIONS, out=root / "out", jobs=2, limits=PATIENT)
    return {result.submission.student: {e.grade_id: e for e in result.exercises} for result in report.results}


@pytest.mark.parametrize(
    ("name", "refused_by", "whys"),
    [
        (
            "key_per_attempt",
            ("work-explored-test", "work-at-scale-test", "work-in-processes-test"),
            ("Jordan was emailed 2 times", "customer(s) were emailed more than once", "customer was emailed 2 times"),
        ),
        ("ignores_refusals", ("work-explored-test",), ("W1's heartbeat was refused",)),
        ("plays_another_worker", ("work-at-scale-test",), ("customer(s) were emailed more than once",)),
    ],
)
def test_lab09s_wrong_workers_lose_the_cells_of_the_judges_that_see_their_mistake(
    lab09_graded, name, refused_by, whys
) -> None:
    graded = lab09_graded[name]
    for grade_id, why in zip(refused_by, whys, strict=True):
        found = graded[grade_id]
        assert (found.mark, found.points) == (Mark.INCORRECT, 0), found.message
        assert why in found.message, found.message
    if name == "ignores_refusals":  # a mistake only the explorer's stall shows: the other two judges pass it
        assert [graded[g].mark for g in ("work-at-scale-test", "work-in-processes-test")] == [Mark.CORRECT] * 2
