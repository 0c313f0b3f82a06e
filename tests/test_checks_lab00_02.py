"""The learner checks of labs 00-02, judged against the notebooks themselves.

The model answers are read from the master notebooks in solutions/ and must be
"correct"; the pristine stubs come from the student copy the build makes of those
masters and must be "not attempted". Plausible wrong answers, and right answers written
differently, are in the check-accuracy suites (tests/test_check_accuracy_labNN.py).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from shopops_lab.checks import lab00, lab01, lab02
from shopops_lab.checks.base import Exercise, Verdict
from shopops_lab.course.build import build_student

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = {
    "00": "00_start_here.ipynb",
    "01": "01_leases_and_redelivery.ipynb",
    "02": "02_poison_messages_and_the_dlq.ipynb",
}

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
    attribute = next(
        key for key, value in vars({"00": lab00, "01": lab01, "02": lab02}[lab]).items() if value is exercise
    )
    test = cell(master(lab), test_id)
    assert f"{module}.{attribute}.grade({name})" in test.source
    answer = cell(master(lab), grade_id)
    assert answer.metadata["shopops_lab"]["hints"] == list(exercise.hints)
    assert len(exercise.hints) == 3


def test_check_prints_and_never_raises(capsys):
    lab02.exercise.check(lambda queue, handler: None)
    lab01.exercise.hint(99)
    out, err = capsys.readouterr()
    assert out.startswith("❌ Exercise 02.1") and "Hint 3 of 3, your counterexample:" in out and err == ""


def test_the_knowledge_check_of_lab02_agrees_with_a_real_queue():
    assert lab02._replay_deliveries(["crash", "crash", "ok"], 3) == "done"
    assert lab02._replay_deliveries(["crash", "fail", "crash", "ok"], 3) == "dead"
    assert lab02._replay_deliveries(["fail"], 3) == "ready"
    assert lab02._replay_deliveries([], 1) == "ready"
