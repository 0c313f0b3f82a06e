"""The step-through viewer of a counterexample: the explorer walks a schedule again, looking at
the world at every moment (`explore.replay(..., look=)`), `snapshot` reads what each lab's
world shows, and `viz.stepper` draws it; `refusals` hands a check's counterexample to its verdict.
(test_browser_learner.py walks one with the keyboard in JupyterLab and JupyterLite.)"""

from __future__ import annotations

import html
import re

import pytest

from shopops_lab import refusals
from shopops_lab.checks import lab01, lab04, lab06
from shopops_lab.explore import replay
from shopops_lab.snapshot import take
from shopops_lab.viz.stepper import Moment, Stepper, Table


def keyed_by_item(lease, adapter):
    """Lab 01's plausible mistake: one key per item, so an email queued twice goes twice."""
    adapter.send(lease.item_id, case_id=lease.case_id, to=lease.payload["to"])


def keyed_by_email(lease, adapter):
    adapter.send(lease.payload["idem_key"], case_id=lease.case_id, to=lease.payload["to"])


@pytest.fixture(scope="module")
def refused():
    result = lab01.exercise.result(keyed_by_item)
    return result, refusals.matching(result.evidence)


def test_a_refused_check_leaves_its_counterexample_for_its_verdict_and_a_pass_leaves_none(refused):
    result, found = refused
    assert found is not None and tuple(found.lines) == result.evidence
    assert found.words in result.message
    assert refusals.matching(lab01.exercise.result(keyed_by_email).evidence) is None
    assert refusals.matching(("1. a step nobody took",)) is None


def test_the_walk_plays_the_counterexample_again_and_ends_where_it_broke(refused):
    _, found = refused
    stepper = found.stepper()
    steps = [m for m in stepper.moments if not m.inside]
    assert [m.step for m in steps] == list(range(len(found.events) + 1))  # before the first, then each step
    assert [m.words for m in steps[1:]] == [step.said for step in found.steps]
    assert [m.problem for m in steps] == [None] * len(found.events) + [found.problem]
    assert stepper.steps == len(found.events)


def test_each_moment_shows_the_workers_the_queue_the_effects_and_the_clock(refused):
    _, found = refused
    moments = found.stepper().moments
    first, acquired = moments[0], moments[1]
    assert first.clock == "t=0" and dict(first.workers) == {"W1": "idle"}
    queue = next(t for t in first.tables if t.title == "the queue's items")
    assert queue.columns[:5] == ("item", "case", "state", "attempts", "token")
    assert [row[2] for row in queue.rows] == ["ready", "ready", "ready"]
    assert "lease on item-0001 (O-1002), token 1, until t=30" in dict(acquired.workers)["W1"]
    inside = [m for m in moments if m.inside]
    assert inside and all(m.words == "inside W1's call, send took effect" for m in inside)
    assert dict(inside[0].workers)["W1"].startswith("inside its call (your code is running)")
    assert inside[0].effects == ("msg-0001: email to customer-2@example.com (case O-1002, key item-0001) by W1 at t=0",)
    assert len(moments[-1].effects) == 2  # the second email: what broke the promise
    records = [t for t in moments[-1].tables if t.title == "the check's records"]
    assert records and "intent" not in dict(records[0].rows)  # set-up that never changes shows once, at the start
    assert "intent" in dict(next(t for t in first.tables if t.title == "the check's records").rows)


def test_a_crash_and_a_learners_store_are_shown_in_other_labs():
    class TrustingStore(lab04.NaiveResultStore):
        pass

    schedule = "W7 claim · W7 write · W9 claim · W7 write"
    store_walk = lab04.replay(TrustingStore, schedule).stepper()
    last = store_walk.moments[-1]
    assert last.problem and store_walk.steps == 4 and dict(last.workers)["W9"].startswith("held: 2")
    rows = dict(next(t for t in last.tables if t.title == "the check's records").rows)
    assert rows["store.results"] == "{job-1: {decision: by W7, token: 1}}"  # the learner's store, as it is

    def forgets(delivery, processed, apply):
        apply(delivery)
        processed.add(delivery.message_id)

    crashed = lab06.replay(forgets, "C1 handle (crash after apply)").stepper()
    died = crashed.moments[-1]
    assert dict(died.workers)["C1"].startswith("crashed: its process died")


def test_the_viewer_html_lists_every_moment_and_marks_the_breaking_one(refused):
    _, found = refused
    stepper = found.stepper()
    page = stepper.html()
    items = re.findall(r'<li class="(shopops-moment[^"]*)" data-label="([^"]*)" data-say="([^"]*)">', page)
    assert len(items) == len(stepper.moments)
    assert [cls for cls, *_ in items].count("shopops-moment shopops-breaks") == 1 and items[-1][0].endswith("breaks")
    assert [html.unescape(say) for *_, say in items] == [stepper.said(m) for m in stepper.moments]
    assert 'role="status" aria-live="polite"' in page  # each step said where a screen reader hears it
    assert 'aria-label="previous step"' in page and 'aria-label="next step"' in page
    assert '<div class="shopops-stepper-controls" hidden>' in page  # no script: the list alone, every moment shown
    assert page == found.stepper().html()  # the same on every run: nbval can compare it
    assert not re.search(r"0x[0-9a-f]{6,}", page)


def test_the_text_form_says_every_moment():
    stepper = Stepper(
        title="demo",
        steps=1,
        moments=(
            Moment(step=0, words="the world as the schedule starts", clock="t=0", workers=(("W1", "idle"),)),
            Moment(
                step=1,
                words="W1 acquires item-0001",
                clock="t=0",
                tables=(Table(title="the queue's items", columns=("item",), rows=(("item-0001",),)),),
                effects=("msg-0001",),
                problem="it broke",
            ),
        ),
    )
    assert str(stepper).splitlines() == [
        "demo",
        "Before the first step (t=0): the world as the schedule starts.",
        "   workers: W1 idle",
        "   effects so far: none",
        "Step 1 of 1 (t=0): W1 acquires item-0001. The promise breaks here: it broke",
        "   the queue's items: item-0001",
        "   effects so far: msg-0001",
    ]


def test_a_replay_shows_itself_as_the_viewer_with_its_lines_as_text():
    replayed = lab01.replay(keyed_by_item, "W1 acquire · W1 handle", morning="one email, two workers")
    bundle = replayed._repr_mimebundle_()
    assert bundle["text/plain"] == str(replayed)
    assert bundle["text/html"].startswith('<div class="shopops-stepper"')


def test_reading_a_world_never_raises():
    class Odd:
        @property
        def __dict__(self):
            raise RuntimeError("no")

    moment = take(Odd(), None, number=0, step=None, inside=None, problem=None)
    assert moment.words.startswith("the world as the schedule starts (its state could not be read: RuntimeError)")


def test_a_walk_without_a_look_keeps_no_moments():
    scenario = lab01.scenario()
    plain = replay(scenario, keyed_by_email, "W1 acquire · W1 handle")
    assert plain.moments == ()
    looked = replay(scenario, keyed_by_email, "W1 acquire · W1 handle", look=take)
    assert [m.step for m in looked.moments] == [0, 1, 2, 2]  # before, after step 1, inside step 2, after it
