"""The grader's pure parts: the answer key, reading a submission, rebuilding one from its
master, and what a stopped cell costs (finding and matching submissions: test_grade_matching.py).
No processes here (tests/test_grade.py runs them)."""

from __future__ import annotations

import json
from typing import Any

import grade_fixtures as fx
import nbformat
import pytest

from shopops_lab.course.errors import SubmissionInvalidError
from shopops_lab.course.grade.key import CheckCall, Key, Kind
from shopops_lab.course.grade.rebuild import Role, read, rebuild
from shopops_lab.course.grade.submissions import Submission, lab_in_name
from shopops_lab.errors import BadArgumentError


@pytest.fixture(scope="module")
def key() -> Key:
    return Key.load(fx.SOLUTIONS)


def stems(key: Key) -> dict[str, str]:
    return {lab: master.stem for lab, master in key.masters.items()}


def plan_of(nb: nbformat.NotebookNode, key: Key, lab: str = "01"):
    return rebuild(json.loads(nbformat.writes(nb)), key.masters[lab])


# --- the key ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, expected",
    [
        ("lab01.exercise.grade(send_followup)", ("lab01", "exercise", ("send_followup",))),
        ("lab05.exercise.grade(run)   # raises AssertionError unless correct", ("lab05", "exercise", ("run",))),
        (
            "# the learner's handler, checked on hidden seeds\n### BEGIN HIDDEN TESTS\n"
            "lab01.knowledge.grade(what_can_happen_next)\n### END HIDDEN TESTS",
            ("lab01", "knowledge", ("what_can_happen_next",)),
        ),
        ("lab09.exercise.grade(a, b)", ("lab09", "exercise", ("a", "b"))),
    ],
)
def test_a_test_cell_names_the_check_it_calls(source: str, expected: tuple) -> None:
    call = CheckCall.parse(source)
    assert (call.module, call.attribute, call.answers) == expected


@pytest.mark.parametrize(
    "source",
    [
        "assert answer == 1",
        "lab01.exercise.grade(f)\nprint('done')",
        "lab01.exercise.check(f)",
        "x = lab01.exercise.grade(f)",
    ],
)
def test_a_test_cell_doing_anything_else_is_run_as_nbgrader_runs_it(source: str) -> None:
    assert CheckCall.parse(source) is None


def test_the_key_finds_every_graded_cell_of_every_master(key: Key) -> None:
    assert sorted(key.masters) == ["00", "01", "02", "03", "04", "05", "06", "07", "08", "09"]
    for master in key.masters.values():
        autos = [cell for cell in master.graded if cell.kind is Kind.AUTO]
        assert autos and all(cell.check is not None for cell in autos), master.lab
        assert all(cell.check.grader() is not None for cell in autos)
    assert [c.grade_id for c in key.masters["03"].graded if c.kind is Kind.MANUAL] == ["explain-policy"]
    assert key.masters["03"].manual_points == 3 and key.masters["03"].max_points == 8


def test_a_missing_or_empty_key_is_refused_with_the_fix(tmp_path) -> None:
    with pytest.raises(BadArgumentError, match="--key is missing.*--key solutions/"):
        Key.load(None)
    with pytest.raises(BadArgumentError, match="does not exist"):
        Key.load(tmp_path / "nowhere")
    with pytest.raises(BadArgumentError, match="holds no NN_.*master"):
        Key.load(tmp_path)


# --- reading one ------------------------------------------------------------------------------


def _one(tmp_path, key: Key, name: str, content: bytes | nbformat.NotebookNode) -> Submission:
    """A submission of the file `name` (`test_grade_matching.py` tests how one is found)."""
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        fx.write(content, path)
    named = lab_in_name(path.stem, stems(key))
    return Submission(path=path, name=path.stem, student="learner", lab_hint=named[0] if named else None)


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00garbage", "is not a notebook"),
        (b"", "is not a notebook"),
        (b"[1, 2, 3]", "not an nbformat 4 notebook"),
        (b'{"nbformat": 4, "cells": "no"}', "not an nbformat 4 notebook"),
    ],
)
def test_garbage_is_invalid_with_a_reason(tmp_path, key: Key, content: bytes, problem: str) -> None:
    with pytest.raises(SubmissionInvalidError, match=problem):
        read(_one(tmp_path, key, "alice_lab01.ipynb", content), key)


def test_an_unknown_lab_or_another_version_is_invalid_naming_the_fix(tmp_path, key: Key) -> None:
    nb = fx.submission("01")
    nb.metadata["shopops_lab"]["lab"] = "42"
    with pytest.raises(SubmissionInvalidError, match="lab 42, which has no master.*--key"):
        read(_one(tmp_path, key, "a.ipynb", nb), key)
    nb.metadata["shopops_lab"].update(lab="01", version="99")
    with pytest.raises(SubmissionInvalidError, match="version '99' of lab 01; the key holds version '1'"):
        read(_one(tmp_path, key, "b.ipynb", nb), key)


def test_without_metadata_the_file_name_decides_and_says_so(tmp_path, key: Key) -> None:
    nb = fx.submission("01")
    del nb.metadata["shopops_lab"]
    _, master, notes = read(_one(tmp_path, key, "alice_lab01.ipynb", nb), key)
    assert master.lab == "01" and notes == ("lab 01 taken from the file name: the notebook carries no lab metadata",)
    with pytest.raises(SubmissionInvalidError, match="says no lab"):
        read(_one(tmp_path, key, "alice.ipynb", nb), key)


def test_large_outputs_are_dropped_while_reading_and_noted(tmp_path, key: Key, monkeypatch) -> None:
    from shopops_lab.course.grade import rebuild as module

    nb = fx.all_right("01")
    fx.cell(nb, "send-followup").outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 3 * 2**20)]
    notebook, _, notes = read(_one(tmp_path, key, "alice_lab01.ipynb", nb), key)
    assert all(cell.get("outputs", []) == [] for cell in notebook["cells"])
    assert notes == ("the file is 3 MB; its cell outputs were dropped before grading",)
    monkeypatch.setattr(module, "MAX_BYTES", 2**20)
    with pytest.raises(SubmissionInvalidError, match="over the 1 MB a notebook may be.*clear its outputs"):
        read(_one(tmp_path, key, "bob_lab01.ipynb", nb), key)


def test_a_revealed_model_answer_is_noted_from_its_mark_or_its_call(tmp_path, key: Key) -> None:
    nb = fx.all_right("01")
    shown = nbformat.v4.new_output(
        "display_data", data={"text/plain": "Model answer ..."}, metadata={"shopops_lab": {"revealed": "01.1"}}
    )
    fx.cell(nb, "send-followup").outputs = [shown]
    _, _, notes = read(_one(tmp_path, key, "alice_lab01.ipynb", nb), key)
    assert notes == ("the model answer to exercise 01.1 was revealed (solution(confirm=True))",)
    nb.cells.append(nbformat.v4.new_code_cell("lab01.exercise.solution( confirm = True )"))
    fx.cell(nb, "send-followup").outputs = []  # the output cleared: the call still says it
    _, _, notes = read(_one(tmp_path, key, "bob_lab01.ipynb", nb), key)
    assert notes == ("a cell calls solution(confirm=True) to reveal a model answer (its output was cleared)",)
    nb.cells[-1].source = "lab01.exercise.solution()  # only asked how"
    shown.metadata = {"shopops_lab": {"revealed": "<b>x</b>"}}  # not an exercise id: not believed
    fx.cell(nb, "send-followup").outputs = [shown]
    assert read(_one(tmp_path, key, "carol_lab01.ipynb", nb), key)[2] == ()


def test_hints_asked_for_are_noted_from_their_records_and_a_demonstrations_are_not(tmp_path, key: Key) -> None:
    nb = fx.all_right("01")

    def hinted(exercise: str, level: int) -> Any:
        return nbformat.v4.new_output(
            "display_data",
            data={"text/plain": "Hint ...", "application/vnd.shopops-lab.record+json": {"exercise": exercise}},
            metadata={"shopops_lab": {"hinted": [exercise, level]}},
        )

    asked = nbformat.v4.new_code_cell("lab01.exercise.hint(1)\nlab01.exercise.hint(3)")
    asked.outputs = [hinted("01.1", 1), hinted("01.1", 3), hinted("01.2", 2)]
    nb.cells.append(asked)
    fx.cell(nb, "send-followup-check").outputs = [hinted("01.3", 1)]  # a locked cell of the master's: not asked
    _, _, notes = read(_one(tmp_path, key, "alice_lab01.ipynb", nb), key)
    assert notes == (
        "hints to exercise 01.1 were asked for, up to hint(3)",
        "hints to exercise 01.2 were asked for, up to hint(2)",
    )
    asked.outputs = [hinted("<b>x</b>", 1), hinted("01.1", 99)]  # not an exercise id, not a level: not believed
    assert read(_one(tmp_path, key, "bob_lab01.ipynb", nb), key)[2] == ()


def test_a_kernel_leaves_the_records_in_the_saved_notebook_and_the_grader_notes_them(tmp_path, key: Key) -> None:
    """End to end: hint() and solution(confirm=True) run in a real Jupyter kernel, the notebook
    is saved, and the grader reads from the saved file who asked for what (a printed line
    alone would not do: the records live in the outputs' metadata)."""
    from nbclient import NotebookClient

    from shopops_lab.checks import lab01

    last = len(lab01.exercise.hints)
    calls = ["lab01.exercise.hint(1)", f"lab01.exercise.hint({last})", "lab01.exercise.solution(confirm=True)"]
    scratch = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("from shopops_lab.checks import lab01\n" + fx.KEY_FROM_TOKEN)]
        + [nbformat.v4.new_code_cell(call) for call in calls]
    )
    NotebookClient(scratch, timeout=300, kernel_name="python3").execute()
    saved = tmp_path / "scratch.ipynb"
    fx.write(scratch, saved)
    cells = nbformat.read(saved, as_version=4).cells[1:]
    marks = [o.metadata.get("shopops_lab") for c in cells for o in c.outputs if o.output_type == "display_data"]
    assert [m for m in marks if m] == [{"hinted": ["01.1", 1]}, {"hinted": ["01.1", last]}, {"revealed": "01.1"}]
    counterexample = next(o.data["text/plain"] for o in cells[1].outputs if o.output_type == "display_data")
    # the learner's own answer, run by the check: what its shortest breaking schedule did
    assert counterexample.startswith(f"Hint {last} of {last}, your counterexample: ")
    assert "reached the customer 2 times" in counterexample
    nb = fx.all_right("01")
    nb.cells.extend(cells)
    _, _, notes = read(_one(tmp_path, key, "alice_lab01.ipynb", nb), key)
    assert notes == (
        f"hints to exercise 01.1 were asked for, up to hint({last})",
        "the model answer to exercise 01.1 was revealed (solution(confirm=True))",
    )


# --- rebuilding -------------------------------------------------------------------------------


def test_answers_come_from_the_learner_and_everything_else_from_the_master(key: Key) -> None:
    nb = fx.submission("01", {"send-followup": fx.KEY_FROM_TOKEN})
    plan = plan_of(nb, key)
    steps = {step.grade_id: step for step in plan.steps}
    assert steps["send-followup"].source == fx.KEY_FROM_TOKEN.strip("\n")
    assert steps["send-followup"].role is Role.ANSWER and steps["send-followup-test"].role is Role.TEST
    master_cells = {fx.grade_id(c): c.source for c in fx.master("01").cells}
    assert all(step.source == master_cells[gid] for gid, step in steps.items() if step.role is not Role.ANSWER)
    assert plan.restored == () and plan.notes == ()
    assert steps["send-followup-test"].reads == {"send_followup"}


def test_edited_deleted_retyped_reordered_and_added_cells_change_nothing_and_are_listed(key: Key) -> None:
    honest = fx.submission("01", {"send-followup": fx.KEY_FROM_TOKEN})
    nb = fx.twin(honest)
    fx.cell(nb, "send-followup-test").source = "pass  # full marks, surely"
    nb.cells.remove(fx.cell(nb, "what-next-test"))
    fx.retype(nb, "cell-01-2")
    nb.cells.insert(0, nbformat.v4.new_code_cell("print('correct')"))
    nb.cells[1], nb.cells[2] = nb.cells[2], nb.cells[1]
    tampered, original = plan_of(nb, key), plan_of(honest, key)
    assert tampered.steps == original.steps
    assert tampered.restored == (
        "restored 1 deleted cell from the master: the test of Exercise 01.3 (what an expired lease leads to)",
        "restored 1 edited cell from the master: the test of Exercise 01.1 (a handler that is safe to run twice)",
        "restored 1 retyped cell from the master: code cell under “The morning”",  # named, not cell-01-2
        "put the cells back in the master's order",
        "ignored 1 cell the master does not have (answers belong in the answer cells)",
    )


def test_a_duplicated_answer_cell_grades_the_last_copy_that_is_not_the_stub(key: Key) -> None:
    import copy

    stub_first = fx.submission("01", {"send-followup": fx.KEY_FROM_TOKEN})
    at = stub_first.cells.index(fx.cell(stub_first, "send-followup"))
    later = copy.deepcopy(stub_first.cells[at])
    stub_first.cells[at].source = fx.submission("01").cells[at].source  # the stub, then the answer below it
    stub_first.cells.insert(at + 1, later)
    answer_first = fx.submission("01", {"send-followup": fx.KEY_FROM_TOKEN})
    stub = copy.deepcopy(fx.submission("01").cells[at])
    answer_first.cells.insert(at + 1, stub)  # the answer, then a fresh stub copy
    for nb in (stub_first, answer_first):
        plan = plan_of(nb, key)
        assert next(s for s in plan.steps if s.grade_id == "send-followup").source == fx.KEY_FROM_TOKEN.strip("\n")
        assert plan.restored == (
            "answer cell under “Exercise 1 · a handler that is safe to run twice” appears 2 times: "
            "the last one answered was graded",
        )


HELPER = "def key_of(lease):\n    return lease.payload['idem_key']\n"
USES_HELPER = (
    "def send_followup(lease, adapter):\n    return adapter.send(key_of(lease), case_id=lease.case_id, "
    "to=lease.payload['to'], body='Sorry!')\n"
)


def test_an_answer_typed_into_a_new_cell_below_its_stub_counts(key: Key) -> None:
    nb = fx.submission("01")
    at = nb.cells.index(fx.cell(nb, "send-followup"))
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(fx.right_answer("01", "send-followup")))
    nb.cells.insert(0, nbformat.v4.new_code_cell("print('just trying things')"))
    plan = plan_of(nb, key)
    order = [step.grade_id for step in plan.steps]
    assert order.index("send-followup") < order.index("added-2") < order.index("send-followup-test")
    assert "added-1" not in order  # a cell no answer needs is still ignored
    assert plan.restored == (
        "kept 1 cell you added that your answers use",
        "ignored 1 cell the master does not have (answers belong in the answer cells)",
    )


def test_a_helper_in_an_added_cell_counts_wherever_it_was_added(key: Key) -> None:
    for above in (True, False):
        nb = fx.submission("01", {"send-followup": USES_HELPER})
        at = nb.cells.index(fx.cell(nb, "send-followup"))
        nb.cells.insert(at if above else at + 1, nbformat.v4.new_code_cell(HELPER))
        steps = [step for step in plan_of(nb, key).steps if step.role is Role.ANSWER]
        assert [s.grade_id for s in steps][:2] == (
            ["added-1", "send-followup"] if above else ["send-followup", "added-1"]
        )


def test_a_notebook_stripped_of_its_metadata_and_ids_is_matched_by_content_and_place(key: Key) -> None:
    honest = fx.all_right("03")
    nb = fx.twin(honest)
    for number, cell in enumerate(nb.cells):
        cell.metadata = {}
        cell.id = f"renewed-{number}"
    plan, original = plan_of(nb, key, "03"), plan_of(honest, key, "03")
    assert plan.steps == original.steps and plan.written == original.written
    assert plan.written[0].answered and plan.written[0].text.startswith("I chose a 60 s lease")
    assert plan.restored == ()


def test_a_missing_or_retyped_answer_cell_is_graded_as_unanswered(key: Key) -> None:
    nb = fx.submission("01", {"send-followup": fx.KEY_FROM_TOKEN, "what-next": fx.EVERYTHING_STOPS})
    nb.cells.remove(fx.cell(nb, "send-followup"))
    fx.retype(nb, "what-next")
    plan = plan_of(nb, key)
    released = {fx.grade_id(c): c.source for c in fx.submission("01").cells}
    for grade_id in ("send-followup", "what-next"):
        assert plan.step(fx_index(key, grade_id)).source == released[grade_id]
        assert "raise NotImplementedError()" in released[grade_id]
    assert plan.notes == (
        "answer cell under “Exercise 1 · a handler that is safe to run twice” is missing: graded as unanswered",
        "answer cell under “Knowledge check” is no longer code: graded as unanswered",
    )


def fx_index(key: Key, grade_id: str, lab: str = "01") -> int:
    return next(i for i, c in enumerate(key.masters[lab].notebook.cells) if fx.grade_id(c) == grade_id)


def test_the_master_test_cells_run_even_where_the_student_copy_hides_them(key: Key) -> None:
    master = key.masters["01"]
    plan = plan_of(fx.submission("01"), key)
    for cell in master.graded:
        if cell.kind is Kind.AUTO:
            assert plan.step(cell.index).source == master.notebook.cells[cell.index].source


def test_written_answers_are_kept_for_the_instructor(key: Key) -> None:
    nb = fx.submission("03", {"explain-policy": "A 45 s lease, renewed every 10 s."})
    (written,) = plan_of(nb, key, "03").written
    assert (written.grade_id, written.points, written.answered) == ("explain-policy", 3, True)
    (untouched,) = plan_of(fx.submission("03"), key, "03").written
    assert not untouched.answered


# --- what a stopped cell costs ----------------------------------------------------------------


def test_a_stopped_cell_blocks_what_uses_it_and_nothing_else(key: Key) -> None:
    plan = plan_of(fx.all_right("01"), key)
    index = {step.grade_id: step.index for step in plan.steps}
    by_answer = plan.blocked({index["send-followup"]})
    assert index["send-followup-test"] in by_answer and index["send-followup-check"] in by_answer
    assert index["what-next-test"] not in by_answer and index["what-next"] not in by_answer
    by_check_cell = plan.blocked({index["send-followup-check"]})
    assert by_check_cell[index["send-followup-test"]] == index["send-followup-check"]
    assert index["what-next-test"] not in by_check_cell
    assert plan.blocked(set()) == {}


def test_a_clean_rebinding_clears_a_stopped_name() -> None:
    from shopops_lab.course.grade.rebuild import Plan, PlannedCell

    def step(index: int, role: Role, defines: set[str], reads: set[str]) -> PlannedCell:
        return PlannedCell(index, f"c{index}", role, "", frozenset(defines), frozenset(reads))

    plan = Plan(
        lab="01",
        written=(),
        restored=(),
        notes=(),
        steps=(
            step(0, Role.ANSWER, {"f"}, set()),
            step(1, Role.CODE, {"x"}, {"f"}),  # calls the answer and hangs: stopped
            step(2, Role.CODE, {"y"}, {"x"}),  # uses x: blocked
            step(3, Role.CODE, {"x"}, set()),  # binds x afresh
            step(4, Role.CODE, set(), {"x"}),  # so this runs
            step(5, Role.TEST, set(), {"f"}),  # the answer hung once: not run again, blamed on cell 1
            step(6, Role.TEST, set(), {"y"}),  # y never came: blocked by cell 1
            step(7, Role.CODE, set(), {"z"}),  # unrelated: runs
        ),
    )
    assert plan.blocked({1}) == {1: 1, 2: 1, 5: 1, 6: 1}
    assert plan.blocked({4}) == {4: 4}
    assert plan.blocked({0}) == {0: 0, 1: 0, 2: 0, 5: 0, 6: 0}  # x is bound afresh at 3


# --- what runs: a demonstration no verdict reads does not -------------------------------------


def planned(*cells: tuple[Role, str]):
    from shopops_lab.course.grade.key import cell_names
    from shopops_lab.course.grade.rebuild import Plan, PlannedCell

    steps = tuple(
        PlannedCell(index, f"c{index}", role, source, *cell_names(source)) for index, (role, source) in enumerate(cells)
    )
    return Plan(lab="01", steps=steps, written=(), restored=(), notes=())


def test_a_demonstration_no_verdict_reads_is_not_run(key: Key) -> None:
    plan = plan_of(fx.all_right("07"), key, "07")
    needed = {step.grade_id for step in plan.steps if step.index in plan.needed()}
    assert {"cell-07-4", "pool-size", "my-policy-check", "chaos-assertion-run"}.isdisjoint(
        needed
    )  # simulations, check()
    assert "cell-07-2" in needed  # the set-up: the answer reads what it imports
    assert all(step.grade_id in needed for step in plan.steps if step.role is not Role.CODE)


def test_an_answer_that_reads_a_demonstrations_result_runs_that_demonstration(key: Key) -> None:
    reader = "def my_policy(signals):\n    return acquire() if melt else wait()"
    plan = plan_of(fx.submission("07", {"my-policy": reader}), key, "07")
    needed = {step.grade_id for step in plan.steps if step.index in plan.needed()}
    assert {"cell-07-4", "cell-07-2"} <= needed and "pool-size" not in needed


def test_a_cell_that_may_change_what_an_answer_reads_runs() -> None:
    plan = planned(
        (Role.CODE, "import json\nx = []\nLIMIT = 3"),
        (Role.CODE, "x.append(1)"),  # changes x, which the answer reads
        (Role.CODE, "print(LIMIT, json.dumps(LIMIT))"),  # reads a constant and a module only
        (Role.CODE, "z = 2 * LIMIT"),  # binds what nothing reads
        (Role.ANSWER, "def f():\n    return len(x)"),
        (Role.TEST, "assert f() == 1"),
    )
    assert plan.needed() == {0, 1, 4, 5}


@pytest.mark.parametrize("reader", ["globals()['x']", "eval('x')", "sys.modules['__main__'].x"])
def test_an_answer_that_reads_names_out_of_sight_runs_every_cell(reader: str) -> None:
    plan = planned(
        (Role.CODE, "import sys\nx = 1"),
        (Role.CODE, "y = 2"),
        (Role.ANSWER, f"def f():\n    return {reader}"),
        (Role.TEST, "assert f() == 1"),
    )
    assert plan.needed() == {0, 1, 2, 3}
