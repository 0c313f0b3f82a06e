"""`shopops-lab grade`: grade a class's notebooks against the masters, fast and hard to fool.

    key.py          the masters, and the kit check behind each test cell
    checked.py      masters checked before, read again without checking them (nor nbformat)
    submissions.py  finding notebooks, telling whose they are (each layout), the latest of several
    roster.py       --roster: one student for every spelling of their name
    late.py         --due and --late-policy: how late a submission is and what that costs
    rebuild.py      a submission rebuilt from its master (answers in, everything else back)
    judge.py        the judge: the warm kit, the snapshot, the checks (never the learner's code)
    remote.py       the learner's process seen from the judge: starting it, the answers the checks call
    messages.py     what a judge tells the grader: one typed record per event
    learner.py      the learner's process: confined, runs the cells, forks a worker per check
    wire.py         the typed JSON wire between them (values by value, objects by handle)
    zygote.py       a warm, clean interpreter each learner process is forked from (Linux)
    confinement.py  how learner code is confined here: its uid, hidden folders, Landlock rules,
                    and ending every process it started (the grader adopts their orphans)
    landlock.py     the kernel's Landlock calls: a process walls itself in, as any user
    layout.py       one address layout for the grader and every process it starts (faster hand-overs)
    pool.py         the parent: children at once, deadlines, restarts, scores
    sheets.py       what a lab grades, as the gradebook keeps it (no master needed to write it)
    hand.py         hand scores from manual.csv, tied to the answer they scored (stale when it changes)
    gradebook.py    the gradebook kept in --out: its record (grades.json), its manifest, the merge
    term.py         the term view (term.csv) and the Canvas and Moodle exports
    spreadsheet.py  CSV a spreadsheet reads safely (no formulas), and the CSV files an instructor gives
    report.py       every file of the gradebook, written from its record
    run.py          grade(): the whole run as one function (or hand scores merged, no check run)
    command.py      the CLI options, progress bar and summary line

Names are imported on first use, so `shopops-lab --help` stays fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "grade": "run",
    "GradeReport": "run",
    "Limits": "judge",
    "Status": "results",
    "Mark": "results",
    "Key": "key",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f"shopops_lab.course.grade.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'shopops_lab.course.grade' has no attribute {name!r}")
