"""Submissions built from the masters, for the grader's tests and its benchmark: the student
notebook as released, with chosen answer cells filled in (the master's own answer, or a
wrong one a learner would write), and tampered twins of them."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat

from shopops_lab.course.build import build_student
from shopops_lab.course.metadata import cell_text
from shopops_lab.course.source import MARKER_LINES

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
RIGHT = object()  # "the master's answer" in submission(...)

# Wrong answers a learner would write.
KEY_FROM_TOKEN = """
def send_followup(lease, adapter):
    # a fresh key per delivery: the redelivery sends a second email
    return adapter.send(f"{lease.case_id}:{lease.token}", case_id=lease.case_id, to=lease.payload["to"], body="Sorry!")
"""
EVERYTHING_STOPS = """
def what_can_happen_next():
    return {"w1_stopped", "case_blocked"}
"""
# Lab 05's receipt run keeping what it sent in memory, not in the checkpoint: a crash forgets it.
IN_FLIGHT = """
IN_FLIGHT = {}   # the operations this worker started: in memory, not in the checkpoint

def run(job_id, env):
    token = env.claim(job_id)
    cp = env.resume(job_id)
    for step in env.workflow.steps:
        if step.id in cp.completed:
            continue
        if not step.effect:
            cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)
            continue
        op_id = env.op_id(job_id, step.id)
        outcome = env.lookup(op_id) if op_id in IN_FLIGHT else None
        IN_FLIGHT[op_id] = step.id
        if outcome is None or outcome.status is SendStatus.FAILED:
            outcome = env.send(job_id, step.id, op_id, body=cp.artifacts["summarize"])
        if outcome.status is SendStatus.UNKNOWN:
            outcome = env.lookup(op_id)
        if outcome.status is not SendStatus.OK:
            raise EffectFailedError(step=step.id, job_id=job_id, status=outcome.status.value, op_id=op_id)
        cp = env.checkpoints.save(job_id, cp.receive(Receipt(op_id=op_id, step=step.id, message_id=outcome.message_id))
                                  .confirm(step.id, outcome.message_id), token=token)
    env.ack(job_id, token=token, result=cp.artifacts["publish"])
    return cp.artifacts["publish"]
"""


def master_path(lab: str) -> Path:
    return next(SOLUTIONS.glob(f"{lab}_*.ipynb"))


def master(lab: str) -> nbformat.NotebookNode:
    return nbformat.read(master_path(lab), as_version=4)


def grade_id(cell: nbformat.NotebookNode) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


def right_answer(lab: str, answer_id: str) -> str:
    """The master's answer for a cell, as a learner would type it (no marker lines)."""
    cell = next(c for c in master(lab).cells if grade_id(c) == answer_id)
    return "\n".join(line for line in cell_text(cell).split("\n") if line.strip() not in MARKER_LINES)


def submission(lab: str, answers: dict[str, object] | None = None) -> nbformat.NotebookNode:
    """The released student notebook of `lab` with `answers` (grade_id -> source, or RIGHT)
    typed into its answer cells; the answer cells not named stay as released (unanswered)."""
    nb = build_student(master(lab))
    for cell in nb.cells:
        given = (answers or {}).get(grade_id(cell))
        if given is not None:
            cell.source = right_answer(lab, grade_id(cell)) if given is RIGHT else str(given).strip("\n")
    return nb


def all_right(lab: str) -> nbformat.NotebookNode:
    nb = master(lab)
    answers = {grade_id(c): RIGHT for c in nb.cells if c.metadata["nbgrader"].get("solution")}
    return submission(lab, answers)


def cell(nb: nbformat.NotebookNode, wanted: str) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if grade_id(c) == wanted)


def retype(nb: nbformat.NotebookNode, wanted: str) -> None:
    """Turn a code cell into markdown in place, as JupyterLab's cell-type menu does."""
    at = nb.cells.index(cell(nb, wanted))
    old = nb.cells[at]
    nb.cells[at] = nbformat.v4.new_markdown_cell(old.source, metadata=old.metadata, id=old.get("id"))


def twin(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return copy.deepcopy(nb)


def write(nb: nbformat.NotebookNode, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def graded_from_the_command_line(lab: str, answers: dict[str, object], folder: Path, env=None) -> dict[str, dict]:
    """One submission of `lab` with `answers`, graded as an instructor runs the grader (its
    command, in a fresh interpreter): each exercise's row of grades.json, by grade id."""
    import json
    import subprocess
    import sys

    write(submission(lab, answers), folder / "in" / f"learner_lab{lab}.ipynb")
    done = subprocess.run(
        [sys.executable, "-m", "shopops_lab", "grade", str(folder / "in"), "--key", str(SOLUTIONS)]
        + ["--out", str(folder / "out")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (row,) = json.loads((folder / "out" / "grades.json").read_text())["submissions"]
    return {exercise["grade_id"]: exercise for exercise in row["exercises"]}


# Run as root: become an ordinary user (a uid of no account) who can read Python and the
# suite's virtualenv (behind /root where pyenv puts them: opened in a mount namespace of this
# process's own, as the grader does for its learners) and reach its own private folder, then
# run the command given.
AS_ORDINARY_USER = """
import json, os, sys
from shopops_lab.course.grade import view
needs, uid = json.loads(sys.argv[1]), int(sys.argv[2])
view.make(needs, [], uid)
os.setgroups([]); os.setgid(uid); os.setuid(uid)
os.execve(sys.argv[3], sys.argv[3:], os.environ)
"""
