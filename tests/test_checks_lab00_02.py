"""The learner checks of labs 00-02, judged against the notebooks themselves.

The model answers are read from the master notebooks in solutions/ and must be
"correct"; the pristine stubs come from the student copy the build makes of those
masters and must be "not attempted"; and plausible wrong answers (the mistakes a
learner actually makes) must be "incorrect", with a message naming the mistake.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from shopops_lab.checks import lab00, lab01, lab02
from shopops_lab.checks.base import Exercise, Verdict
from shopops_lab.course.build import build_student

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = {"00": "00_start_here.ipynb", "01": "01_leases_and_redelivery.ipynb",
             "02": "02_poison_messages_and_the_dlq.ipynb"}

# (lab, grade_id of the answer cell, the function it defines, its exercise, the graded test cell)
ANSWERS = [
    ("00", "warmup-answer", "enqueue_first_case", lab00.warmup, "warmup-test"),
    ("01", "send-followup", "send_followup", lab01.exercise, "send-followup-test"),
    ("01", "what-next", "what_can_happen_next", lab01.knowledge, "what-next-test"),
    ("02", "replay-and-drain", "replay_and_drain", lab02.exercise, "replay-and-drain-test"),
    ("02", "where-does-it-end", "where_does_it_end", lab02.knowledge, "where-does-it-end-test"),
]
IDS = [name for _, _, name, _, _ in ANSWERS]


def master(lab: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "solutions" / NOTEBOOKS[lab], as_version=4)


def cell(nb: nbformat.NotebookNode, grade_id: str) -> nbformat.NotebookNode:
    found = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    assert len(found) == 1, f"expected one cell with grade_id {grade_id!r}, found {len(found)}"
    return found[0]


def define(source: str, name: str):
    """Run an answer cell on its own (answers must not lean on other cells) and return `name`."""
    namespace: dict = {}
    exec(compile(source, f"<answer {name}>", "exec"), namespace)
    return namespace[name]


def verdict_of(exercise: Exercise, answer) -> tuple[Verdict, str]:
    result = exercise.result(answer)
    return result.verdict, str(result)


@pytest.mark.parametrize(("lab", "grade_id", "name", "exercise", "test_id"), ANSWERS, ids=IDS)
def test_the_masters_answer_is_correct(lab, grade_id, name, exercise, test_id):
    answer = define(cell(master(lab), grade_id).source, name)
    verdict, text = verdict_of(exercise, answer)
    assert verdict is Verdict.CORRECT, text
    assert exercise.grade(answer) is None


@pytest.mark.parametrize(("lab", "grade_id", "name", "exercise", "test_id"), ANSWERS, ids=IDS)
def test_the_pristine_student_stub_is_not_attempted(lab, grade_id, name, exercise, test_id):
    student = build_student(master(lab), name=NOTEBOOKS[lab])
    stub = define(cell(student, grade_id).source, name)
    verdict, text = verdict_of(exercise, stub)
    assert verdict is Verdict.NOT_ATTEMPTED, text
    with pytest.raises(AssertionError, match="not attempted"):
        exercise.grade(stub)


@pytest.mark.parametrize(("lab", "grade_id", "name", "exercise", "test_id"), ANSWERS, ids=IDS)
def test_the_graded_cell_grades_this_answer_with_this_exercise(lab, grade_id, name, exercise, test_id):
    module = {"00": "lab00", "01": "lab01", "02": "lab02"}[lab]
    attribute = next(key for key, value in vars({"00": lab00, "01": lab01, "02": lab02}[lab]).items()
                     if value is exercise)
    test = cell(master(lab), test_id)
    assert f"{module}.{attribute}.grade({name})" in test.source
    answer = cell(master(lab), grade_id)
    assert answer.metadata["shopops_lab"]["hints"] == list(exercise.hints)
    assert len(exercise.hints) == 3


# ---------------------------------------------------------------------------- lab 00 wrong answers

def forgets_to_return(queue):
    queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")


def wrong_store(queue):
    return queue.enqueue(case_id="O-1001", tenant_id="northline", kind="contact_send")


def also_acquires(queue):
    item_id = queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")
    queue.acquire("W1")
    return item_id


def returns_the_case_id(queue):
    queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")
    return "O-1001"


# ---------------------------------------------------------------------------- lab 01 wrong answers

def key_from_the_attempt(lease, adapter):
    return adapter.send(f"{lease.case_id}:email:{lease.attempt}", case_id=lease.case_id,
                        to=lease.payload["to"], body="sorry")


def skips_redeliveries(lease, adapter):
    if lease.attempt > 1:
        return None  # "someone already handled this"
    return adapter.send(lease.payload["idem_key"], case_id=lease.case_id, to=lease.payload["to"], body="sorry")


def key_is_the_case(lease, adapter):
    return adapter.send(lease.case_id, case_id=lease.case_id, to=lease.payload["to"], body="sorry")


def forgets_the_address(lease, adapter):
    return adapter.send(lease.payload["idem_key"], case_id=lease.case_id, body="sorry")


def hard_codes_the_case(lease, adapter):
    return adapter.send(lease.payload["idem_key"], case_id="O-1001", to=lease.payload["to"], body="sorry")


# ---------------------------------------------------------------------------- lab 02 wrong answers

def replays_but_never_drains(queue, handler):
    for item in queue.dlq_items():
        queue.replay_dlq(item.id)


def drains_without_replaying(queue, handler):
    while queue.process_one("W1", handler) != "empty":
        pass


def stops_at_the_first_failure(queue, handler):
    for item in queue.dlq_items():
        queue.replay_dlq(item.id)
    while queue.process_one("W1", handler) == "ok":
        pass


def replays_until_the_dlq_is_clean(queue, handler):
    while True:
        for item in queue.dlq_items():
            queue.replay_dlq(item.id)
        if queue.process_one("W1", handler) == "empty":
            break


def loops_while_truthy(queue, handler):
    for item in queue.dlq_items():
        queue.replay_dlq(item.id)
    while queue.process_one("W1", handler):  # "empty" is a non-empty string
        pass


def crashes_are_free(deliveries, max_attempts):
    failures = 0
    for outcome in deliveries:
        if outcome == "ok":
            return "done"
        if outcome == "fail":
            failures += 1
        if failures == max_attempts:
            return "dead"
    return "ready"


def one_attempt_too_many(deliveries, max_attempts):
    for attempt, outcome in enumerate(deliveries, start=1):
        if outcome == "ok":
            return "done"
        if attempt > max_attempts:
            return "dead"
    return "ready"


def names_the_queue_not_the_state(deliveries, max_attempts):
    return "dlq" if "fail" in deliveries else "done"


WRONG = [
    (lab00.warmup, forgets_to_return, ["returned None", "item id"]),
    (lab00.warmup, wrong_store, ["tenant_id is 'northline'"]),
    (lab00.warmup, also_acquires, ["leased, not ready"]),
    (lab00.warmup, returns_the_case_id, ["'O-1001', the case id"]),
    (lab01.exercise, key_from_the_attempt, ["reached the customer 2 times", "by W1", "msg-0001"]),
    (lab01.exercise, skips_redeliveries, ["never reached", "no delivery sent it"]),
    (lab01.exercise, key_is_the_case, ["email:4", "key the adapter had already seen"]),
    (lab01.exercise, forgets_the_address, ["went to 'customer'"]),
    (lab01.exercise, hard_codes_the_case, ["filed under case_id 'O-1001'"]),
    (lab01.knowledge, lambda: {"redelivered", "late_ack_refused"}, ["1 more option"]),
    (lab01.knowledge, lambda: {"redelivered", "late_ack_refused", "w1_still_sends", "w1_stopped"},
     ["'w1_stopped' cannot happen", "nothing interrupts W1"]),
    (lab01.knowledge, lambda: "redelivered", ["return a set of labels"]),
    (lab01.knowledge, lambda: {"W7 takes over"}, ["not among the labels"]),
    (lab02.exercise, replays_but_never_drains, ["replayed but not processed"]),
    (lab02.exercise, drains_without_replaying, ["still in the DLQ"]),
    (lab02.exercise, stops_at_the_first_failure, ["stopped after process_one returned 'retried'", "unfinished"]),
    (lab02.exercise, replays_until_the_dlq_is_clean, ["replayed 2 times", "retry storm"]),
    (lab02.exercise, loops_while_truthy, ["the loop does not stop"]),
    (lab02.knowledge, crashes_are_free, ["as if a crash did not use up an attempt"]),
    (lab02.knowledge, one_attempt_too_many, ["one delivery more than max_attempts"]),
    (lab02.knowledge, names_the_queue_not_the_state, ["return the item's state"]),
]


@pytest.mark.parametrize(("exercise", "answer", "phrases"), WRONG,
                         ids=[f"{e.id}-{getattr(a, '__name__', 'lambda')}-{n}" for n, (e, a, _) in enumerate(WRONG)])
def test_a_plausible_wrong_answer_is_incorrect_and_the_message_names_the_mistake(exercise, answer, phrases):
    verdict, text = verdict_of(exercise, answer)
    assert verdict is Verdict.INCORRECT, text
    for phrase in phrases:
        assert phrase in text, f"{phrase!r} not in: {text}"
    with pytest.raises(AssertionError) as raised:
        exercise.grade(answer)
    assert str(raised.value) == text


def test_every_exercise_has_at_least_two_wrong_answers_tested():
    counts = {}
    for exercise, _, _ in WRONG:
        counts[exercise.id] = counts.get(exercise.id, 0) + 1
    assert counts == {e.id: counts.get(e.id, 0) for _, _, _, e, _ in ANSWERS}
    assert min(counts.values()) >= 2


def test_check_prints_and_never_raises(capsys):
    lab02.exercise.check(stops_at_the_first_failure)
    lab01.exercise.hint(99)
    out, err = capsys.readouterr()
    assert out.startswith("❌ Exercise 02.1") and "Hint 3 of 3:" in out and err == ""


def test_the_knowledge_check_of_lab02_agrees_with_a_real_queue():
    assert lab02.replay_deliveries(["crash", "crash", "ok"], 3) == "done"
    assert lab02.replay_deliveries(["crash", "fail", "crash", "ok"], 3) == "dead"
    assert lab02.replay_deliveries(["fail"], 3) == "ready"
    assert lab02.replay_deliveries([], 1) == "ready"
