"""What every learner check promises, whatever the lab: one message, the same everywhere,
for anything that is not the learner's function; "not attempted" only from the stub
itself; never a raise out of check() (only the learner's own Stop goes through); and one
friendly line, not a traceback, from a cell that shows an answer not written yet."""

from __future__ import annotations

import sys

import pytest

from shopops_lab.checks import lab00, lab01, lab02, lab03, lab04, lab05, lab06, lab07
from shopops_lab.checks.base import ForeignAnswer, NotAttempted, Verdict, attempt, call_each, describe, is_stub
from shopops_lab.fencing import NaiveResultStore

EXERCISES = [
    lab00.warmup,
    lab01.exercise,
    lab01.knowledge,
    lab02.exercise,
    lab02.knowledge,
    lab03.exercise,
    lab04.exercise,
    lab04.knowledge,
    lab05.exercise,
    lab06.exercise,
    lab07.exercise,
    lab07.knowledge,
]
IDS = [exercise.id for exercise in EXERCISES]


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
@pytest.mark.parametrize(
    ("given", "got"),
    [
        ((set(),), "the set set()"),
        ((None,), "None"),
        ((), "nothing"),
        (("done",), "the str 'done'"),
        ((1, 2), "2 things"),
    ],
    ids=["a-set", "none", "nothing", "a-call-result", "two"],
)
def test_anything_but_the_learners_answer_gets_the_one_shared_message(exercise, given, got):
    kind = "class" if exercise.wants_class else "function"
    made = " or making an object from it" if exercise.wants_class else ""
    result = exercise.result(*given)
    assert result.verdict is Verdict.INCORRECT
    assert result.message == (
        f"this check needs your {kind} {exercise.answer} itself, and it got {got}. Pass it by "
        f"name, without calling it{made}: check({exercise.answer}), not "
        f"check({exercise.answer}(...))."
    )
    with pytest.raises(AssertionError, match="This check needs your"):
        exercise.grade(*given)


def test_a_function_where_a_class_is_wanted_and_back_are_misfits_too():
    assert "it got the class NaiveResultStore" in lab01.exercise.result(NaiveResultStore).message
    assert "it got the function print" not in lab04.exercise.result(print).message
    assert (
        "your class FencedResultStore itself, and it got the builtin_function_or_method print"
        in lab04.exercise.result(print).message
    )


def stub(queue):
    raise NotImplementedError()


def started_but_kept_the_raise(queue):
    item_id = queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")
    raise NotImplementedError()
    return item_id


def helper_not_written(queue):
    raise NotImplementedError("helper")


def calls_an_unwritten_helper(queue):
    return helper_not_written(queue)


def test_not_attempted_comes_only_from_the_answer_itself():
    assert lab00.warmup.result(stub).verdict is Verdict.NOT_ATTEMPTED
    assert lab00.warmup.result(started_but_kept_the_raise).verdict is Verdict.NOT_ATTEMPTED
    deeper = lab00.warmup.result(calls_an_unwritten_helper)
    assert deeper.verdict is Verdict.INCORRECT
    assert deeper.message.startswith("your code raised NotImplementedError: helper (in helper_not_written, line ")


def test_attempt_hands_back_what_the_answer_returned_or_raised_but_not_the_stub():
    assert attempt(lambda x, *, y: x + y, 2, y=3) == (5, None)
    returned, raised = attempt(calls_an_unwritten_helper, None)
    assert returned is None and isinstance(raised, NotImplementedError)
    returned, raised = attempt(lambda: {}["order_id"])
    assert returned is None and isinstance(raised, KeyError)
    with pytest.raises(NotAttempted):
        attempt(stub, None)
    with pytest.raises(Meltdown):  # not an Exception: the check's own guard deals with it
        attempt(raises_a_base_exception, None)


def exits(queue):
    sys.exit(3)


class Meltdown(BaseException):
    """Not an Exception: an `except Exception` would let it through."""


def raises_a_base_exception(queue):
    raise Meltdown("gone")


def presses_stop(queue):
    raise KeyboardInterrupt


def test_check_never_raises_whatever_the_learners_code_does(capsys):
    exited = lab00.warmup.result(exits)
    assert exited.verdict is Verdict.INCORRECT
    assert exited.message.startswith("your code called sys.exit(3) (in exits, line ")
    assert "would end the whole worker process" in exited.message
    melted = lab00.warmup.result(raises_a_base_exception)
    assert melted.verdict is Verdict.INCORRECT and melted.message.startswith("your code raised Meltdown: gone")
    for answer in (exits, raises_a_base_exception, stub, calls_an_unwritten_helper, {"a set"}):
        lab00.warmup.check(answer)
    out, err = capsys.readouterr()
    assert out.count("Exercise 00.1") == 5 and err == ""


def test_the_learners_stop_button_still_stops():
    with pytest.raises(KeyboardInterrupt):
        lab00.warmup.check(presses_stop)


def test_the_graders_stop_goes_through_a_check_and_is_neither_ctrl_c_nor_an_exception():
    """The grader's control exceptions (a cell's timer, the learner's process gone, a message off
    the protocol) are CheckStopped: a check lets them through, as it does the learner's stop,
    but neither `except Exception` nor `except KeyboardInterrupt` in anyone's code takes them."""
    from shopops_lab.course.grade.judge import CellTimeout
    from shopops_lab.course.grade.remote import LearnerDied
    from shopops_lab.course.grade.wire import PeerGone, ProtocolError
    from shopops_lab.errors import CheckStopped

    for stop in (CellTimeout, PeerGone, ProtocolError, LearnerDied):
        assert issubclass(stop, CheckStopped) and not issubclass(stop, (Exception, KeyboardInterrupt)), stop

    def stopped(queue):
        raise CellTimeout()

    with pytest.raises(CellTimeout):
        lab00.warmup.result(stopped)


def test_a_cell_that_shows_the_answer_says_one_friendly_line_until_it_is_written(capsys):
    assert lab00.warmup.answered(stub) is False
    assert capsys.readouterr().out == (
        "⏳ This cell shows your enqueue_first_case at work: write it in Exercise 00.1 "
        "(enqueue the first case) above, run that cell, then run this one again.\n"
    )
    assert lab00.warmup.answered(calls_an_unwritten_helper) is True
    assert lab00.warmup.answered(None) is False
    assert capsys.readouterr().out.startswith("❌ this check needs your function enqueue_first_case itself")


def test_a_stub_is_recognised_in_a_function_a_method_and_a_class():
    class StubStore(NaiveResultStore):
        def complete(self, job_id, result, *, token, worker_id=None, now=None):
            """The learner's docstring stays."""
            # YOUR CODE HERE
            raise NotImplementedError()

    assert is_stub(stub) and is_stub(StubStore) and is_stub(StubStore().complete)
    assert not is_stub(started_but_kept_the_raise) and not is_stub(NaiveResultStore) and not is_stub(print)


def test_values_are_described_without_memory_addresses():
    assert describe(None) == "None" and describe({"a"}) == "the set {'a'}"
    assert describe(object()) == "an object object" and describe(NaiveResultStore()) == "a NaiveResultStore object"
    assert describe(stub) == "the function stub" and describe(NaiveResultStore) == "the class NaiveResultStore"
    assert describe("x" * 100).endswith("...") and len(describe("x" * 100)) < 80


# --- the model answer, shown only when asked twice --------------------------------------------


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_every_exercise_reveals_its_model_answer_only_on_confirmation(exercise, capsys):
    from shopops_lab.checks.answer_keys.model_answers import MODEL_ANSWERS

    answer = MODEL_ANSWERS[exercise.id]
    exercise.solution()
    said = capsys.readouterr().out
    assert "solution(confirm=True)" in said and answer.splitlines()[-1] not in said
    exercise.solution(confirm="yes")  # only True confirms
    assert capsys.readouterr().out == said
    exercise.solution(confirm=True)
    shown = capsys.readouterr().out
    assert shown.startswith(f"Model answer to {exercise.name}") and answer in shown
    assert f"def {exercise.answer}" in answer or f"class {exercise.answer}" in answer


def test_in_jupyter_the_reveal_leaves_a_mark_the_grader_finds(monkeypatch):
    import IPython
    import IPython.display

    from shopops_lab.course.grade.rebuild import REVEALED

    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.append((a, k)))
    lab01.exercise.solution(confirm=True)
    ((data,), options) = shown[0]
    assert options == {"raw": True, "metadata": {"shopops_lab": {REVEALED: "01.1"}}}
    assert "```python\ndef send_followup" in data["text/markdown"]


def test_the_kits_model_answers_are_the_masters():
    """The kit keeps its own copy (the student notebooks hold none): equal to the masters'
    answer cells. If this fails, run: python -m shopops_lab.course.grade.key solutions/"""
    from pathlib import Path

    from shopops_lab.course.grade.key import MODEL_ANSWERS_MODULE, model_answers_module

    solutions = Path(__file__).resolve().parent.parent / "solutions"
    assert MODEL_ANSWERS_MODULE.read_text() == model_answers_module(solutions)


class _Batched(ForeignAnswer):
    """An answer in another process, as far as `call_each` needs one: it counts its messages."""

    def __init__(self, answer):
        self.answer, self.messages = answer, 0

    def each(self, calls):
        self.messages += 1
        outcomes = []
        for args, kwargs in calls:
            try:
                outcomes.append((self.answer(*args, **kwargs), None))
            except Exception as exc:  # noqa: BLE001 - handed back, as the grader's learner process does
                outcomes.append((None, exc))
        return outcomes

    def __call__(self, *args, **kwargs):
        raise AssertionError("call_each sends a batch, never one call per input")

    is_stub = restart = memory = picture = twins = in_turn = around = applied = watch = watched = __call__


def test_call_each_calls_a_grid_in_order_and_raises_the_first_failure_as_one_call_would():
    def halve(n):
        if n == 3:
            raise ValueError("odd three")
        return n / 2

    grid = [((n,), {}) for n in (2, 4, 6)]
    assert call_each(halve, grid) == [1.0, 2.0, 3.0]
    remote = _Batched(halve)
    assert call_each(remote, grid) == [1.0, 2.0, 3.0] and remote.messages == 1  # one message, not three
    for answer in (halve, _Batched(halve)):
        with pytest.raises(ValueError, match="odd three"):
            call_each(answer, [((2,), {}), ((3,), {}), ((5,), {})])

    def stub(n):
        raise NotImplementedError

    with pytest.raises(NotAttempted):
        call_each(stub, grid)


def test_in_turn_reads_an_object_in_order_and_stops_at_the_first_raise():
    from shopops_lab.checks.base import in_turn
    from shopops_lab.errors import BadArgumentError
    from shopops_lab.fencing import NaiveResultStore

    store = NaiveResultStore()
    store.complete("job-1", {"x": 1}, token=store.claim("job-1", "W1"), worker_id="W1")
    assert in_turn(store, store, ("result", ("job-1",)), ("written_by", ("job-1",))) == [{"x": 1}, ("W1", 1)]
    with pytest.raises(BadArgumentError):
        in_turn(store, store, ("result", (5,)), ("claim", ("job-2", "W1")))
    assert store.claim("job-2", "W1") == 1


# ------------------------------------------------------------------ a check made of parts


def _parted():
    """Three parts, each asking the answer to double its number once."""
    from shopops_lab.checks.base import Exercise, Wrong, call_answer

    def part(number: int):
        def judged(answer):
            said = call_answer(answer, number)
            if said != 2 * number:
                raise Wrong(f"part {number}: {number} doubled is not {said}")
            return said

        return judged

    return Exercise(
        id="99.1",
        title="double",
        answer="double",
        parts=tuple(part(n) for n in range(3)),
        summary=lambda found: f"doubled right: {found}",
    )


def _answer(source: str):
    namespace: dict = {}
    exec(compile(source, "<cell answer>", "exec"), namespace)  # the learner's code, as a cell defines it
    return namespace["double"]


def test_a_check_of_parts_says_the_first_part_that_failed_in_order_else_its_summary() -> None:
    exercise = _parted()
    right = exercise.result(_answer("def double(x):\n    return x + x"))
    assert (right.verdict, right.message) == (Verdict.CORRECT, "doubled right: [0, 2, 4]")
    wrong = _answer("def double(x):\n    return 0 if x else x")  # wrong on parts 1 and 2
    said = exercise.result(wrong)
    assert (said.verdict, said.message) == (Verdict.INCORRECT, "part 1: 1 doubled is not 0")
    assert exercise.result(_answer("def double(x):\n    raise NotImplementedError()")).verdict is Verdict.NOT_ATTEMPTED


def test_each_part_alone_gives_what_the_whole_check_gives_from_it() -> None:
    """What the grader's judges send for each part, put together as the parent does, is the
    verdict of one run in order: a failed part's own Result, or the summary of what all found."""
    exercise = _parted()
    right = _answer("def double(x):\n    return 2 * x")
    found = [exercise.part_result(n, right) for n in range(3)]
    assert found == [(None, 0), (None, 2), (None, 4)]
    assert exercise.summarised([data for _, data in found]) == exercise.result(right)
    wrong = _answer("def double(x):\n    return 2 * x if x < 2 else 5")  # only the last part fails
    failed, data = exercise.part_result(2, wrong)
    assert data is None and failed == exercise.result(wrong)
    assert exercise.part_result(0, wrong) == (None, 0)


def test_each_part_plays_a_fresh_restart_of_the_answer() -> None:
    """Right on its first call only: each part is a freshly started answer (what an earlier
    part left in memory never reaches the next), so the parts can run in any process."""
    exercise = _parted()
    once = _answer("CALLS = []\ndef double(x):\n    CALLS.append(x)\n    return 2 * x if len(CALLS) == 1 else -1")
    assert exercise.result(once).verdict is Verdict.CORRECT
    assert [exercise.part_result(n, once)[0] for n in (2, 1, 0)] == [None, None, None]


def test_an_exercise_is_run_or_parts_with_a_summary_never_both() -> None:
    from shopops_lab.checks.base import Exercise

    for wrong in (
        {},
        {"run": str, "parts": (str,), "summary": str},
        {"parts": (str,)},
        {"run": str, "summary": str},
    ):
        with pytest.raises(ValueError, match="give it `run`, or `parts` and their `summary`"):
            Exercise(id="99.2", title="t", answer="a", **wrong)
