"""Course-wide promises about the stored notebooks (nbval checks that the outputs are current;
these check what the outputs and sources say)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
LABS = (
    "00_start_here",
    "01_leases_and_redelivery",
    "02_poison_messages_and_the_dlq",
    "03_heartbeats_and_ttl_design",
    "04_fencing_tokens",
    "05_checkpoints_and_receipts",
    "06_outbox",
    "07_burst_day",
    "08_real_crashes",
    "09_the_whole_worker",
)
NOTEBOOKS = [ROOT / folder / f"{lab}.ipynb" for folder in ("solutions", "notebooks") for lab in LABS]
MACHINE_PATH = re.compile(r"/(tmp|root|home|work|Users)/[A-Za-z0-9_.-]+")
ADDRESS = re.compile(r"0x[0-9a-f]{8,}")


def outputs_text(cell) -> str:
    parts = []
    for output in cell.get("outputs", ()):
        parts.append(output.get("text", ""))
        parts.extend(str(value) for value in output.get("data", {}).values())
        parts.extend(output.get("traceback", ()))
    return "".join(parts)


def test_every_lab_exists_as_master_and_student():
    missing = [str(path.relative_to(ROOT)) for path in NOTEBOOKS if not path.exists()]
    assert missing == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_stored_outputs_are_clean_and_reproducible(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata.kernelspec.name == "python3"
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert all(o.get("name") != "stderr" for o in cell.outputs), f"cell {index} wrote to stderr"
        text = outputs_text(cell) + cell.source
        assert not MACHINE_PATH.search(text), f"cell {index} shows a machine path"
        assert not ADDRESS.search(text), f"cell {index} shows a memory address"
        assert "sys.path" not in cell.source, f"cell {index} edits sys.path"
        assert "open(" not in cell.source, f"cell {index} reads a file beside the notebook"


@pytest.mark.parametrize("lab", LABS)
def test_checks_say_correct_in_masters_and_not_attempted_in_students(lab):
    """The stored output of every learner check: nbval proves it is current."""
    seen = 0
    for folder, word in (("solutions", "correct."), ("notebooks", "not attempted.")):
        nb = nbformat.read(ROOT / folder / f"{lab}.ipynb", as_version=4)
        for cell in nb.cells:
            demo = "def " in cell.source  # lab 00 shows the verdicts on stand-ins it defines itself
            code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith("#"))
            if cell.cell_type == "code" and not demo and re.search(r"\b(exercise|knowledge|warmup)\.check\(", code):
                verdicts = re.findall(
                    r"(?:✅|❌|⏳) Exercise [^:]+: (correct\.|incorrect\.|not attempted\.)", outputs_text(cell)
                )
                assert verdicts and set(verdicts) == {word}, (folder, cell.source, verdicts)
                seen += 1
    assert seen >= 2, f"{lab}: no learner check found in both versions"


@pytest.mark.parametrize("lab", LABS)
def test_graded_tests_are_hidden_so_run_all_reaches_the_end(lab):
    """Each graded test cell shows the learner one comment naming the check to run; the grading
    call sits in a hidden-test region (removed from the student copy, restored at grading). So
    no test cell raises in a pristine student notebook, and raises-exception marks exactly the
    cells that do raise there (the stored run proves both ways)."""
    master = nbformat.read(ROOT / "solutions" / f"{lab}.ipynb", as_version=4)
    student = nbformat.read(ROOT / "notebooks" / f"{lab}.ipynb", as_version=4)
    tests = 0
    for ours, theirs in zip(master.cells, student.cells):
        grader = ours.metadata.get("nbgrader", {})
        if ours.cell_type == "code" and grader.get("grade") and not grader.get("solution"):
            tests += 1
            comment, *hidden = ours.source.splitlines()
            call = re.fullmatch(r"(lab\d\d\.\w+)\.grade\((\w+)\)", hidden[1])
            assert hidden[0] == "### BEGIN HIDDEN TESTS" and hidden[-1] == "### END HIDDEN TESTS" and call, ours.source
            assert comment.startswith("# A hidden test grades this cell") and f"{call[1]}.check({call[2]})" in comment
            assert theirs.source == comment
        if theirs.cell_type == "code":
            raised = any(o.output_type == "error" for o in theirs.outputs)
            assert raised == ("raises-exception" in theirs.metadata.get("tags", [])), theirs.source
    assert tests >= 1


def test_stored_diagrams_hold_under_nbval_without_graphviz():
    """The stored outputs were drawn by Graphviz (where CI has it); with Graphviz switched off
    the kit draws the diagrams itself, and nbval, given the committed sanitize file, still
    finds the notebooks' outputs current: it compares what the diagrams show."""
    import os
    import subprocess
    import sys

    labs = [str(ROOT / "solutions" / f"{lab}.ipynb") for lab in ("00_start_here", "06_outbox")]
    env = dict(os.environ, SHOPOPS_NO_DOT="1", PYTHONHASHSEED="0")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--nbval",
            "--nbval-sanitize-with",
            str(ROOT / "tests" / "nbval_sanitize.cfg"),
            *labs,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:]


@pytest.mark.parametrize("lab", LABS)
def test_answer_cells_carry_the_hints_that_hint_prints(lab):
    """An answer cell's `shopops_lab.hints` metadata and its exercise's `hint(n)` say the same,
    so an instructor reading the master sees what a learner is told."""
    checks = importlib.import_module(f"shopops_lab.checks.lab{lab[:2]}")
    exercises = {e.answer: e for e in vars(checks).values() if hasattr(e, "hints") and hasattr(e, "answer")}
    master = nbformat.read(ROOT / "solutions" / f"{lab}.ipynb", as_version=4)
    seen = 0
    for cell in master.cells:
        hints = cell.metadata.get("shopops_lab", {}).get("hints")
        if hints:
            named = [
                exercise
                for name, exercise in exercises.items()
                if re.search(rf"^((async )?def|class) {name}\b|^{name} =", cell.source, re.M)
            ]
            assert len(named) == 1, (lab, cell.source[:80])
            assert tuple(hints) == tuple(named[0].hints), (lab, named[0].id)
            seen += 1
    assert seen == len(exercises)
