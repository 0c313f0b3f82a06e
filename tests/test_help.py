"""What a check shows in a notebook (`widgets.help.present`): its verdict as an announced status
region with the same words `print` gave, and under anything but a pass the help buttons (the
next hint, the counterexample, the model answer behind `solution()`'s confirmation, its mark left
in the next cell run). The buttons themselves are clicked in test_browser_learner.py."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from shopops_lab.checks import lab00, lab01
from shopops_lab.checks.answer_keys.model_answers import MODEL_ANSWERS
from shopops_lab.checks.base import HINTED, REVEALED
from shopops_lab.widgets.help import HelpBar, typed


def keyed_by_item(lease, adapter):
    adapter.send(lease.item_id, case_id=lease.case_id, to=lease.payload["to"])


@pytest.fixture
def shell():
    """An IPython shell, as in a notebook's kernel (its display hook publishes what is shown)."""
    made = InteractiveShell.instance()
    yield made
    InteractiveShell.clear_instance()


def shown(call, *args):
    with capture_output(display=True) as captured:
        call(*args)
    return captured


def test_a_verdict_is_an_announced_status_region_with_the_words_print_gave(shell):
    result = lab00.warmup.result(keyed_by_item)
    captured = shown(lab00.warmup.check, keyed_by_item)
    verdict, bar_script, bar = captured.outputs
    assert verdict.data["text/plain"] == str(result)
    assert verdict.data["text/html"].count('role="status" aria-live="polite" data-shopops-live') == 1
    assert "window.shopopsSay" in verdict.data["text/html"]  # the announcer travels with it
    assert (
        bar.data["text/plain"] == "Help for Exercise 00.1 (enqueue the first case): hints, the model answer (buttons)"
    )
    assert "lab00.warmup.hint(1)" in bar.data["text/html"] and "lab00.warmup.solution()" in bar.data["text/html"]


def test_a_pass_shows_no_help(shell):
    captured = shown(
        lab00.warmup.check,
        lambda queue: queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send"),
    )
    (verdict,) = captured.outputs
    assert "correct." in verdict.data["text/plain"]


def test_a_refusal_with_a_counterexample_offers_it_and_its_viewer_needs_no_widgets(shell):
    captured = shown(lab01.exercise.check, keyed_by_item)
    bar = captured.outputs[-1]
    assert bar.data["text/plain"].endswith("hints, the counterexample, the model answer (buttons)")
    assert '<div class="shopops-stepper"' in bar.data["text/html"]  # the unrun copy carries the viewer itself


def test_the_hint_button_gives_the_hints_in_turn_then_the_last_again():
    bar = HelpBar(lab01.exercise)
    said = [bar.next_hint() for _ in range(len(lab01.exercise.hints) + 1)]
    n = len(lab01.exercise.hints)
    heads = [s.split(":")[0] for s in said]
    assert heads[: n - 1] == [f"Hint {k} of {n} (hint({k + 1}) says more)" for k in range(1, n)]
    assert heads[n - 1] == heads[n] and heads[n].startswith(f"Hint {n} of {n}")  # the last, then the last again
    assert said[n - 1] == said[n]


def test_the_model_answer_button_asks_first_then_shows_it_and_marks_the_next_cell(shell):
    bar = HelpBar(lab01.exercise)
    assert "call solution(confirm=True)" in bar.ask_for_answer() and not bar.revealed
    words, outputs = bar.reveal()
    ((data, metadata),) = outputs
    assert MODEL_ANSWERS["01.1"].strip().splitlines()[0] in data["text/plain"]
    assert metadata == {"shopops_lab": {REVEALED: "01.1"}} and bar.revealed
    with capture_output(display=True) as next_cell:
        shell.run_cell("1 + 1")
    marks = [o for o in next_cell.outputs if o.metadata.get("shopops_lab", {}).get(REVEALED) == "01.1"]
    assert len(marks) == 1 and marks[0].data["text/plain"].startswith("📌 Recorded here: the model answer")
    with capture_output(display=True) as later:
        shell.run_cell("2 + 2")
    assert not any("shopops_lab" in (o.metadata or {}) for o in later.outputs)  # once


def test_in_a_notebook_the_hint_button_shows_the_hint_and_records_it_in_the_next_cell(shell):
    """In a kernel hint() displays its words as a record (checks.base.record); the button says
    those words and, as a button's output is not saved, leaves the record in the next cell."""
    bar = HelpBar(lab01.exercise)
    with capture_output(display=True) as pressed:
        words, pictures = bar.show_hint()
    assert words.startswith("Hint 1 of 3 (hint(2) says more): ") and pictures == [] and not pressed.outputs
    with capture_output(display=True) as next_cell:
        shell.run_cell("1 + 1")
    marks = [o for o in next_cell.outputs if o.metadata.get("shopops_lab", {}).get(HINTED) == ["01.1", 1]]
    assert len(marks) == 1 and marks[0].data["text/plain"].startswith("📌 Recorded here: hint 1 to Exercise 01.1")
    last = [bar.show_hint() for _ in lab01.exercise.hints][-1]
    assert last[0].startswith("Hint 3 of 3, your counterexample")


def test_the_typed_name_of_an_exercise():
    assert typed(lab01.exercise) == "lab01.exercise" and typed(lab00.warmup) == "lab00.warmup"


def test_a_face_that_fails_still_prints_the_verdict(shell, monkeypatch, capsys):
    import IPython.display

    def broken(*args, **kwargs):
        raise RuntimeError("no display today")

    monkeypatch.setattr(IPython.display, "display", broken)
    lab00.warmup.check(keyed_by_item)
    assert "Exercise 00.1 (enqueue the first case): incorrect." in capsys.readouterr().out
