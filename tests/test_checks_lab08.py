"""Lab 08's check, attacked: the handlers a learner would write, each judged by what real
worker processes, killed with SIGKILL at named places, did to the money. Wrong ones are
refused with the order and the place that prove it; right ones written differently pass."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from shopops_lab.checks import lab08
from shopops_lab.checks.base import Verdict
from shopops_lab.errors import StaleTokenError


def order_and_amount(lease):
    return lease.payload["order"], lease.payload["amount"]


# ---------------------------------------------------------------------- right, in several spellings
def ack_then_credit_in_one_transaction(lease, shop):
    with shop.transaction():
        shop.ack(lease)
        shop.credit(*order_and_amount(lease))


def credit_then_ack_in_one_transaction(lease, shop):
    with shop.transaction():
        shop.credit(lease.payload["order"], lease.payload["amount"])
        shop.ack(lease)


def nested_transactions(lease, shop):
    with shop.transaction():
        order, amount = order_and_amount(lease)
        with shop.transaction():
            shop.credit(order, amount)
        shop.ack(lease)


def stale_caught_outside_the_transaction(lease, shop):
    try:
        with shop.transaction():
            shop.ack(lease)
            shop.credit(lease.case_id, lease.payload["amount"])
    except StaleTokenError:
        return  # the transaction already rolled back: nothing of this delivery was kept


@pytest.mark.parametrize("handle", [ack_then_credit_in_one_transaction, credit_then_ack_in_one_transaction,
                                    nested_transactions, stale_caught_outside_the_transaction])
def test_a_handler_that_commits_both_writes_together_passes(handle):
    result = lab08.exercise.result(handle)
    assert result.verdict is Verdict.CORRECT, str(result)
    assert "every order was refunded exactly once" in result.message


# ---------------------------------------------------------------------- wrong, and what proves it
def two_commits(lease, shop):
    shop.credit(*order_and_amount(lease))
    shop.ack(lease)


def ack_first_two_commits(lease, shop):
    shop.ack(lease)
    shop.credit(*order_and_amount(lease))


def ack_after_the_transaction(lease, shop):
    with shop.transaction():
        shop.credit(*order_and_amount(lease))
    shop.ack(lease)


def swallows_the_refusal(lease, shop):
    with shop.transaction():
        shop.credit(*order_and_amount(lease))
        try:
            shop.ack(lease)
        except Exception:
            pass  # "the ack failed, never mind": the credit commits anyway


def hard_coded_amount(lease, shop):
    with shop.transaction():
        shop.ack(lease)
        shop.credit(lease.payload["order"], 35.0)


def only_acks(lease, shop):
    shop.ack(lease)


def credits_twice(lease, shop):
    with shop.transaction():
        shop.ack(lease)
        shop.credit(*order_and_amount(lease))
        shop.credit(*order_and_amount(lease))


def misreads_the_payload(lease, shop):
    with shop.transaction():
        shop.ack(lease)
        shop.credit(lease.payload["order_id"], lease.payload["amount"])


@pytest.mark.parametrize("handle, words", [
    (two_commits, "was refunded 2 times, 40.00 instead of 20.00: a worker was killed right after its credit"),
    (ack_first_two_commits, "was never refunded, yet its delivery was acknowledged: a worker was killed right "
                            "after its ack"),
    (ack_after_the_transaction, "a worker was killed right after one of your transactions committed"),
    (swallows_the_refusal, "woke up and ran your handler with its stale lease"),
    (hard_coded_amount, "but it asked for 20.00: credit the amount its delivery carries"),
    (only_acks, "was never refunded, yet its delivery was acknowledged"),
    (credits_twice, "was refunded 2 times"),
    (misreads_the_payload, "ended in the dead-letter queue: your handler raised KeyError"),
])
def test_a_handler_that_leaves_a_crash_window_is_refused_with_the_order_and_the_place(handle, words):
    result = lab08.exercise.result(handle)
    assert result.verdict is Verdict.INCORRECT
    assert words in result.message, result.message
    assert "Replay it: print(lab08.replay(handle, seed=" in result.message
    assert result.evidence and all(line.startswith("O-10") for line in result.evidence)


def test_the_replay_tells_one_seeds_story():
    story = lab08.replay(two_commits, seed=1)
    assert story.splitlines()[0] == "seed 1, 5 orders, 2 worker processes"
    assert "worker killed after_credit" in story and "problem: order" in story
    assert lab08.replay(ack_then_credit_in_one_transaction, seed=2).endswith("every order refunded exactly once.")


# ---------------------------------------------------------------------- not attempted, not a function
def handle(lease, shop):
    """The student notebook's stub."""
    # YOUR CODE HERE
    raise NotImplementedError()


def test_the_stub_is_not_attempted_and_starts_no_process(monkeypatch):
    monkeypatch.setattr(lab08, "run_refunds", lambda *a, **k: pytest.fail("a stub must not start workers"))
    assert lab08.exercise.result(handle).verdict is Verdict.NOT_ATTEMPTED
    assert lab08.replay(handle, seed=1) == "handle still raises NotImplementedError: write it first."


def test_a_call_instead_of_the_function_is_named():
    result = lab08.exercise.result(None)
    assert result.verdict is Verdict.INCORRECT and "check(handle), not check(handle(...))" in result.message


# ---------------------------------------------------------------------- a notebook without processes
def test_without_processes_the_check_says_where_to_run_it_and_the_cells_show_the_recording(monkeypatch, capsys):
    monkeypatch.setattr(lab08.sys, "platform", "emscripten")
    assert not lab08.processes_available()
    result = lab08.exercise.result(ack_then_credit_in_one_transaction)
    assert result.verdict is Verdict.INCORRECT and "JupyterLite" in result.message and "JupyterLab" in result.message
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
        name = re.search(r'lab08\.show\("([\w-]+)"', cell.source) if cell.cell_type == "code" else None
        if name:
            shown[name.group(1)] = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    assert shown.keys() == lab08.RECORDED.keys()
    assert {name: text.rstrip("\n") for name, text in shown.items()} == lab08.RECORDED


def test_the_chaos_summary_is_the_same_run_after_run(tmp_path):
    first = lab08.chaos_summary(f"sqlite:///{tmp_path / 'a.db'}", adapter="naive")
    assert first == lab08.chaos_summary(f"sqlite:///{tmp_path / 'b.db'}", adapter="naive")
    assert "each of those kills emailed a customer twice, and the checker names every one: True" in first


def test_the_quiz_answer_is_the_rollback():
    assert lab08.CRASH_QUIZ.answer_index == 1
