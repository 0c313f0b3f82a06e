"""Lab 08 around its check: the replay of one schedule, the stub, a notebook without processes,
the recorded runs JupyterLite shows, and the stop map of a run with named stops (real worker
processes killed or frozen at the first point of that name). The wrong and right handlers
themselves are in test_check_accuracy_lab08.py."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest

from shopops_lab.chaos.plan import Kill
from shopops_lab.checks import lab08
from shopops_lab.checks.base import Verdict
from shopops_lab.errors import BadArgumentError
from shopops_lab.viz.stop_map import stop_map as draw_stop_map


def order_and_amount(lease):
    return lease.payload["order"], lease.payload["amount"]


# ---------------------------------------------------------------------- two handlers the map tests run
def ack_then_credit_in_one_transaction(lease, shop):
    with shop.transaction():
        shop.ack(lease)
        shop.credit(*order_and_amount(lease))


def two_commits(lease, shop):
    shop.credit(*order_and_amount(lease))
    shop.ack(lease)


def test_the_replay_tells_one_schedules_story():
    story = lab08.replay(two_commits, "kill@1").splitlines()
    assert story[0] == "schedule kill@1, two worker processes, order O-1003:"
    assert story[1:4] == [
        "t=0   W1 acquires O-1003 (attempt 1, token 1)",
        "t=0   W1 shop.credit('O-1003', 35.00)",
        "t=0   W1 is killed here (SIGKILL): it runs nothing more",
    ]
    assert story[-1].startswith("order O-1003 was refunded 2 times")
    assert lab08.replay(ack_then_credit_in_one_transaction, "freeze@0").endswith("order O-1007 refunded once.")
    with pytest.raises(BadArgumentError, match="schedule is 'seed=1'"):
        lab08.replay(two_commits, "seed=1")


# ---------------------------------------------------------------------- not attempted, not a function
def handle(lease, shop):
    """The student notebook's stub."""
    # YOUR CODE HERE
    raise NotImplementedError()


def test_the_stub_is_not_attempted_and_starts_no_process(monkeypatch):
    monkeypatch.setattr(lab08, "_Lab", lambda *a, **k: pytest.fail("a stub must not start workers"))
    assert lab08.exercise.result(handle).verdict is Verdict.NOT_ATTEMPTED
    assert lab08.replay(handle, "run") == "handle still raises NotImplementedError: write it first."


def test_a_call_instead_of_the_function_is_named():
    result = lab08.exercise.result(None)
    assert result.verdict is Verdict.INCORRECT and "check(handle), not check(handle(...))" in result.message


# ---------------------------------------------------------------------- a notebook without processes
def test_without_processes_the_check_says_where_to_run_it_and_the_cells_show_the_recording(monkeypatch, capsys):
    monkeypatch.setattr(lab08.sys, "platform", "emscripten")
    assert not lab08.processes_available()
    result = lab08.exercise.result(ack_then_credit_in_one_transaction)
    assert result.verdict is Verdict.NOT_JUDGED and "JupyterLite" in result.message and "JupyterLab" in result.message
    lab08.show("naive", lambda: pytest.fail("no live run without processes"))
    assert (
        capsys.readouterr().out == f"(recorded run: this notebook cannot start processes)\n{lab08.RECORDED['naive']}\n"
    )


def test_the_recorded_runs_are_what_the_masters_live_cells_printed():
    """nbval holds the master's stored outputs to its live runs; the recordings JupyterLite shows
    must be those outputs, cell by cell."""
    master = nbformat.read(Path(__file__).resolve().parent.parent / "solutions" / "08_real_crashes.ipynb", as_version=4)
    shown = {}
    for cell in master.cells:
        name = re.search(r'lab08\.show(?:_postgres)?\("([\w-]+)"', cell.source) if cell.cell_type == "code" else None
        if name:
            shown[name.group(1)] = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    assert shown.keys() == lab08.RECORDED.keys()
    assert {name: text.rstrip("\n") for name, text in shown.items()} == lab08.RECORDED


def test_without_a_postgres_server_the_race_on_postgresql_is_the_recorded_one(monkeypatch, capsys):
    monkeypatch.delenv("SHOPOPS_POSTGRES_URL", raising=False)
    lab08.show_postgres("claim-race-postgres", lambda: print("live"))
    assert capsys.readouterr().out == (
        "(recorded on PostgreSQL 15: set SHOPOPS_POSTGRES_URL to run it here)\n"
        f"{lab08.RECORDED['claim-race-postgres']}\n"
    )


def test_the_chaos_summary_is_the_same_run_after_run(tmp_path):
    first = lab08.chaos_summary(f"sqlite:///{tmp_path / 'a.db'}", adapter="naive")
    assert first == lab08.chaos_summary(f"sqlite:///{tmp_path / 'b.db'}", adapter="naive")
    assert "each of those kills emailed a customer twice, and the checker names every one: True" in first


def test_the_quiz_answer_is_the_rollback():
    assert lab08.CRASH_QUIZ.answer_index == 1


# ---------------------------------------------------------------------- the stop map
NAIVE_PLACES = (("after_credit", False), ("after_handler", False), ("after_ack", False))
CELLS = re.compile(r'<g class="stop ([\w-]+)"><title>([^<]*)</title>(.*?)</g>')


def cells(svg):
    """(outcome class, the cell's tooltip, its fill and words) per cell, left to right: what a
    cell shows, wherever it sits."""
    return [
        (outcome, tip, re.search(r'fill="(#\w+)"', drawing).group(1), tuple(re.findall(r">([^<]+)</text>", drawing)))
        for outcome, tip, drawing in CELLS.findall(svg)
    ]


def master_picture(grade_id):
    master = nbformat.read(Path(__file__).resolve().parent.parent / "solutions" / "08_real_crashes.ipynb", as_version=4)
    cell = next(c for c in master.cells if c.metadata["nbgrader"]["grade_id"] == grade_id)
    return next(o["data"]["image/svg+xml"] for o in cell.outputs if "image/svg+xml" in o.get("data", {}))


def test_the_naive_handlers_stop_map_is_red_where_the_kill_fell_between_the_credit_and_the_ack():
    run = lab08.run_refunds(two_commits, seed=4, stops=NAIVE_PLACES)
    picture = lab08.stop_map(run, "the naive handler")
    found = cells(picture.svg)
    assert [(outcome, fill) for outcome, _, fill, _ in found] == [
        ("repeated", "#f8c9c9"),
        ("once", "#dff0e3"),
        ("once", "#dff0e3"),
    ]
    assert [tip.split(":")[0] for _, tip, _, _ in found] == [  # in the order a delivery reaches the stops
        "O-1001 killed after_credit",
        "O-1003 killed after_ack",
        "O-1002 killed after_handler",
    ]
    assert found[0][3] == (
        "killed after_credit",
        "order O-1001, asked 20.00",
        "refunded 2\u00d7",
        "40.00 paid for 20.00, in 2 credits",
    )
    assert [words[2] for _, _, _, words in found[1:]] == ["refunded once", "refunded once"]
    title = "stop map: the naive handler, seed 4"
    assert f'aria-label="{title}"' in picture.svg and f"<title>{title}</title>" in picture.svg
    assert "<desc>O-1001 killed after_credit: refunded 2\u00d7, 40.00 paid for 20.00, in 2 credits; " in picture.svg
    assert 'role="img"' in picture.svg and "recorded run" not in picture.svg
    # what JupyterLite draws from the recording is this run's picture, byte for byte, marked as recorded
    recorded = lab08.RECORDED_RUNS["naive"]
    assert lab08.stop_map(replace(recorded, recorded=False), "the naive handler").svg == picture.svg
    assert cells(lab08.stop_map(recorded, "the naive handler").svg) == found


def test_a_correct_handlers_stop_map_is_green_everywhere_live_and_recorded():
    run = lab08.run_refunds(ack_then_credit_in_one_transaction, seed=4)
    live = lab08.stop_map(run, "your handler")
    found = cells(live.svg)
    assert [(outcome, fill) for outcome, _, fill, _ in found] == [("once", "#dff0e3")] * 5
    assert [tip.split(":")[0] for _, tip, _, _ in found] == [
        "O-1004 frozen after_acquire",
        "O-1001 killed after_credit",
        "O-1002 killed after_ack",
        "O-1003 killed after_commit",
        "O-1005 killed after_handler",
    ]
    assert "#f8c9c9" not in live.svg and 'width="1150"' in live.svg  # fits the 1,220 px output area
    recorded = lab08.stop_map(replace(run, recorded=True), "your handler")
    assert cells(recorded.svg) == found
    assert "<title>stop map: your handler, seed 4 (recorded run)</title>" in recorded.svg
    assert 'class="note">recorded run: this notebook cannot start processes' in recorded.svg


def refund_run(**outcomes):
    """A run with one order per stop, ended as given: order -> (credits, refunded, end)."""
    run = lab08.RefundRun(seed=9)
    for n, (point, (credits, refunded, end)) in enumerate(outcomes.items(), start=1):
        order = f"O-{1000 + n}"
        run.orders[order] = 20.0
        run.refunds[order] = {"refunded": refunded, "credits": credits}
        run.ends[order] = end
        run.stops[order] = Kill(item_id=f"item-{n:04d}", attempt=1, point=point, pause=point == "after_acquire")
    run.happened = set(list(run.orders)[:-1])  # the last stop was never reached
    return run


def test_every_way_an_order_can_end_has_its_own_cell():
    run = refund_run(
        after_handler=(1, 20.0, "done"),
        after_ack=(0, 0.0, "done"),
        after_commit=(1, 35.0, "done"),
        after_acquire=(0, 0.0, "dead"),
        after_credit=(3, 60.0, "done"),
    )
    picture = lab08.stop_map(run, "a handler")
    found = cells(picture.svg)
    assert [(outcome, tip) for outcome, tip, _, _ in found] == [
        ("dead", "O-1004 frozen after_acquire: dead-lettered, 0.00 paid; the handler raised"),
        (
            "repeated",
            "O-1005 killed after_credit (never reached): refunded 3\u00d7, 60.00 paid for 20.00, in 3 credits",
        ),
        ("never", "O-1002 killed after_ack: never refunded, 0.00 paid for 20.00"),
        ("wrong-amount", "O-1003 killed after_commit: refunded once, 35.00 paid for 20.00"),
        ("once", "O-1001 killed after_handler: refunded once, 20.00 paid for 20.00"),
    ]
    assert len({fill for _, _, fill, _ in found}) == 5  # five outcomes, five colours
    assert [words[-1] == "(no worker ever reached this stop)" for _, _, _, words in found] == [
        False,
        True,
        False,
        False,
        False,
    ]
    assert picture.svg.count('stroke-dasharray="5 4"') == 1  # its border is dashed
    assert len(run.problems()) == 4  # the map and the check read the same outcomes


def test_the_learners_map_without_a_run_prints_one_line_and_bad_input_is_named(monkeypatch, capsys):
    assert lab08.stop_map(None, "your handler") is None
    assert capsys.readouterr().out == "Your handler's stop map appears here once the cell above has run your handle.\n"
    monkeypatch.setattr(lab08.sys, "platform", "emscripten")
    assert lab08.stop_map(None, "your handler") is None
    assert "open the lab in JupyterLab" in capsys.readouterr().out
    with pytest.raises(BadArgumentError, match="run"):
        lab08.stop_map("O-1001", "your handler")
    with pytest.raises(BadArgumentError, match="handler"):
        lab08.stop_map(lab08.RECORDED_RUNS["naive"], "")
    with pytest.raises(BadArgumentError, match="stops"):
        draw_stop_map([], title="nothing")


def test_without_processes_the_naive_map_is_drawn_from_the_recording_the_master_stored(monkeypatch, capsys):
    monkeypatch.setattr(lab08.sys, "platform", "emscripten")
    run = lab08.show("naive", lambda: pytest.fail("no live run without processes"))
    capsys.readouterr()
    assert run is lab08.RECORDED_RUNS["naive"] and run.recorded
    assert lab08.story(run) == lab08.RECORDED["naive"]
    shown = lab08.stop_map(run, "the naive handler")
    stored = master_picture("kill-map")
    assert cells(shown.svg) == cells(stored)
    assert lab08.stop_map(replace(run, recorded=False), "the naive handler").svg == stored
    assert "(recorded run)" in shown.title and "(recorded run)" not in stored
