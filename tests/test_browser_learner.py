"""A learner's help in a real browser, keyboard only, in JupyterLab and in the offline JupyterLite
site (headless Chromium driven by Playwright, as test_browser.py, whose servers and helpers
this file shares).

In lab 01 the learner writes a handler that keys its email by the item instead of the email:
the check refuses it, and under the verdict (a status region) the buttons offer help. With the
keyboard only: "Show the counterexample" opens the step-through viewer; ▶ (Enter), the arrow
keys, Home and End walk the shortest breaking schedule, and each step is read back from the
accessibility tree (the viewer's status region), in the order the kit itself walks it (the same
answer judged in this process), the breaking step marked; "Hint" gives the hints in turn;
"Show the model answer" asks first, shows it on "Yes", and the next cell run carries the
reveal's mark into the saved notebook (JupyterLab). The right handler then passes, and its pass
is recorded: in JupyterLab in the progress file the server's kernels write, in JupyterLite in
the browser's storage, and lab 00's progress table (and the Lite front page) ticks it.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from pathlib import Path

import pytest
from test_browser import (  # noqa: F401  (fixtures: one Chromium, the Lite site's server and context)
    WAIT_MS,
    chromium,
    jupyterlab,
    lite_browser,
    lite_page,
    lite_server,
    run_all,
    watched_page,
)

from shopops_lab import refusals
from shopops_lab.checks import lab01
from shopops_lab.checks.answer_keys.model_answers import MODEL_ANSWERS

LAB = "01_leases_and_redelivery"
STUB = "def send_followup(lease, adapter):"
CHECK = "lab01.exercise.check(send_followup)"
HIDDEN_TEST = "A hidden test grades this cell when your notebook is graded; meanwhile, run lab01.exercise.check"
WRONG = (  # keyed by the item, not by the email: the same email queued twice reaches the customer twice
    "def send_followup(lease, adapter):\n"
    '    adapter.send(lease.item_id, case_id=lease.case_id, to=lease.payload["to"])\n'
)
RIGHT = (
    "def send_followup(lease, adapter):\n"
    '    adapter.send(lease.payload["idem_key"], case_id=lease.case_id, to=lease.payload["to"])\n'
)


STORED = """async (exercise) => new Promise((resolve) => {
  const open = indexedDB.open("shopops-lab", 1);
  open.onupgradeneeded = () => open.result.createObjectStore("passed");
  open.onsuccess = () => {
    const keys = open.result.transaction("passed", "readonly").objectStore("passed").getAllKeys();
    keys.onsuccess = () => { resolve(keys.result.includes(exercise)); open.result.close(); };
  };
})"""


FOCUSED = "() => { const e = document.activeElement; return e.getAttribute('aria-label') || e.textContent.trim(); }"


def check_cell(page):
    """Lab 01's first check cell: its output holds the verdict, the help and the viewer."""
    return page.locator(".jp-CodeCell", has_text="Run me after your answer").filter(has_text=CHECK).first


def verdict(page, word: str):
    """Lab 01's first check's verdict, a status region, saying `word`."""
    return (
        page.get_by_role("status")
        .filter(has_text=f"Exercise 01.1 (a handler that is safe to run twice): {word}.")
        .first
    )


def walked() -> list[str]:
    """What the viewer must say at each moment: the kit's own walk of WRONG's counterexample."""
    scope: dict = {}
    exec(WRONG, scope)
    result = lab01.exercise.result(scope["send_followup"])
    found = refusals.matching(result.evidence)
    assert found is not None, result
    stepper = found.stepper()
    return [stepper.said(moment) for moment in stepper.moments]


def status_of(viewer) -> str:
    """The viewer's status region, as the accessibility tree has it."""
    tree = viewer.aria_snapshot()
    said = re.search(r"^\s*- status: (.*)$", tree, re.M)
    assert said, tree
    return json.loads(said.group(1)) if said.group(1).startswith('"') else said.group(1)


def answer(page, source: str) -> None:
    """Put `source` in the answer cell (keyboard text, no auto-indent), run it and its check."""
    cell = page.locator(".jp-CodeCell", has_text=STUB).first
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(source)
    page.keyboard.press("Shift+Enter")  # runs the answer, moves to the check cell
    page.keyboard.press("Shift+Enter")  # runs the check


def tab_to(page, name: str, most: int = 12) -> None:
    """Press Tab until the focused element is named `name` (a keyboard user's way there)."""
    for _ in range(most):
        page.keyboard.press("Tab")
        if page.evaluate(FOCUSED) == name:
            return
    pytest.fail(f"Tab never reached {name!r}")


def steps_through_the_counterexample(page) -> None:
    """The refused check, its help buttons, and the keyboard walk of its counterexample."""
    expected = walked()
    verdict = page.get_by_role("status").filter(
        has_text="Exercise 01.1 (a handler that is safe to run twice): incorrect"
    )
    verdict.first.wait_for()
    cell = check_cell(page)
    cell.get_by_role("button", name="Show the counterexample").focus()
    page.keyboard.press("Enter")
    viewer = cell.locator(".shopops-stepper").first
    viewer.get_by_role("button", name="next step").wait_for()
    tab_to(page, "previous step")
    tab_to(page, "next step", most=2)
    heard = []
    for _ in expected[1:]:
        page.keyboard.press("Enter")
        heard.append(status_of(viewer))
    assert heard == expected[1:]
    assert "The promise breaks here: case O-1002's email O-1002:email:4" in heard[-1]
    assert viewer.locator("li[aria-current=step]").get_attribute("class") == "shopops-moment shopops-breaks"
    page.keyboard.press("ArrowLeft")
    assert status_of(viewer) == expected[-2]
    page.keyboard.press("Home")
    assert status_of(viewer) == expected[0]
    page.keyboard.press("End")
    assert status_of(viewer) == expected[-1]


def hints_for_wrong() -> list[str]:
    """Each hint's words as the button shows them to a learner whose notebook holds WRONG: the
    last one is the counterexample the check finds on WRONG."""
    scope: dict = {}
    exec(WRONG, scope)
    said = []
    for level in range(1, len(lab01.exercise.hints) + 1):
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            lab01.exercise.hint(level, scope["send_followup"])
        said.append(printed.getvalue().strip())
    return said


def said(cell, words: str):
    """The help area's status region saying `words`. Only the help area's: the verdict above it
    says the counterexample too (and Playwright's text match ignores case), so a wait on the
    whole cell would end at once, before the kernel answered the button."""
    return cell.locator(".shopops-help").get_by_role("status").filter(has_text=words).first


def asks_for_help(page) -> None:
    """The hint button gives the hints in turn; the model answer button asks, then shows it.
    Each press waits for the kernel's answer to the one before (the button's new name and the
    help area's words), as a learner reads a hint before asking for the next."""
    cell = check_cell(page)
    hints = hints_for_wrong()
    for n, hint in enumerate(hints, 1):
        cell.get_by_role("button", name=f"Hint {n} of {len(hints)}", exact=True).focus()
        page.keyboard.press("Enter")
        said(cell, hint.split(": ", 1)[1][:60]).wait_for()
        after = f"Hint {n + 1} of {len(hints)}" if n < len(hints) else f"Hint {n} of {n} again"
        cell.get_by_role("button", name=after, exact=True).wait_for()
    cell.get_by_role("button", name="Show the model answer").focus()
    page.keyboard.press("Enter")
    said(cell, "To see it, call solution(confirm=True)").wait_for()
    cell.get_by_role("button", name="Yes, show the model answer").focus()
    page.keyboard.press("Enter")
    first_line = MODEL_ANSWERS["01.1"].strip().splitlines()[0]
    cell.locator(".shopops-help .jp-OutputArea-output", has_text=first_line).first.wait_for()
    said(cell, "Your notebook records that you saw it").wait_for()


# ---------------------------------------------------------------------------- JupyterLab
@pytest.fixture(scope="module")
def learner_lab(tmp_path_factory):
    """JupyterLab whose kernels record progress in a file of this module's own."""
    root = tmp_path_factory.mktemp("learner")
    progress = root.parent / f"{root.name}-progress.jsonl"
    with jupyterlab(root, SHOPOPS_PROGRESS=str(progress)) as url:
        yield url, root, progress


def test_a_refused_check_is_walked_by_keyboard_and_help_and_progress_work_in_jupyterlab(chromium, learner_lab):  # noqa: F811
    url, root, progress = learner_lab
    context = chromium.new_context()
    with watched_page(context, "learner-jupyterlab") as (page, console_errors):
        page.goto(f"{url}/lab/tree/{LAB}.ipynb?reset")
        run_all(page, "Python 3 (ipykernel) | Idle")
        answer(page, WRONG)
        steps_through_the_counterexample(page)
        asks_for_help(page)
        page.locator(".jp-CodeCell", has_text=HIDDEN_TEST).first.locator(".cm-content").click()
        page.keyboard.press("Escape")
        page.keyboard.press("Shift+Enter")  # the next cell run carries the reveal's mark
        page.get_by_text("Recorded here: the model answer to Exercise 01.1").first.wait_for()
        assert not progress.exists() or "01.1" not in progress.read_text()
        answer(page, RIGHT)
        page.get_by_role("status").filter(
            has_text="Exercise 01.1 (a handler that is safe to run twice): correct"
        ).first.wait_for()
        page.keyboard.press("Escape")
        page.keyboard.press("Control+s")
        assert json.loads(progress.read_text().splitlines()[-1]) == {"passed": "01.1"}
        saved = _saved(root / f"{LAB}.ipynb", lambda nb: _marks(nb) == ["01.1"])
        assert _marks(saved) == ["01.1"]  # what the grader reads: solution(confirm=True)'s mark
        page.goto(f"{url}/lab/tree/00_start_here.ipynb?reset")
        run_all(page, "Python 3 (ipykernel) | Idle")
        table = page.locator(".shopops-progress").first
        table.get_by_text("✅ passed: 01.1 a handler that is safe to run twice").wait_for()
        assert table.get_by_text("⬜ not yet: 01.2 force the expiry").count() == 1
        assert console_errors == []
    context.close()


def _saved(path: Path, done) -> dict:
    """The notebook as JupyterLab saved it, once `done(notebook)` (a save lands a little later)."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while True:  # waits on the file, bounded; not a timing assertion
        notebook = json.loads(path.read_text())
        if done(notebook) or time.monotonic() > deadline:
            return notebook
        time.sleep(0.2)


def _marks(notebook: dict) -> list[str]:
    return [
        output["metadata"]["shopops_lab"]["revealed"]
        for cell in notebook["cells"]
        for output in cell.get("outputs", [])
        if "revealed" in output.get("metadata", {}).get("shopops_lab", {})
    ]


# ---------------------------------------------------------------------------- JupyterLite, offline
def test_a_refused_check_is_walked_by_keyboard_and_help_and_progress_work_in_jupyterlite(lite_server, lite_browser):  # noqa: F811
    with lite_page(lite_browser, "learner-jupyterlite") as page:
        page.goto(f"{lite_server}/lab/index.html?path={LAB}.ipynb&workspace=learner")
        run_all(page, "Python (Pyodide) | Idle")
        answer(page, WRONG)
        steps_through_the_counterexample(page)
        asks_for_help(page)
        answer(page, RIGHT)
        page.get_by_role("status").filter(
            has_text="Exercise 01.1 (a handler that is safe to run twice): correct"
        ).first.wait_for()
        page.wait_for_function(STORED, arg="01.1", timeout=WAIT_MS)  # the browser's storage has it before we leave
        page.goto(f"{lite_server}/")
        page.get_by_text("1 of 3 exercises passed in this browser").wait_for()
        assert page.get_by_role("status").filter(has_text="you have passed 1 of the course's").count() == 1
        page.goto(f"{lite_server}/lab/index.html?path=00_start_here.ipynb&workspace=learner-00")
        run_all(page, "Python (Pyodide) | Idle")
        table = page.locator(".shopops-progress").first
        table.get_by_text("✅ passed: 01.1 a handler that is safe to run twice").wait_for()
