"""Shared by the learner-check tests: the names a lab's answers define, in its master
and in the student notebook generated from it."""

from __future__ import annotations

import nbformat


def answers(nb: nbformat.NotebookNode) -> dict:
    """Run the notebook's set-up cell (the first code cell) and its answer cells; return the names."""
    namespace: dict = {}
    code = [c for c in nb.cells if c.cell_type == "code"]
    exec(compile(code[0].source, "<set-up>", "exec"), namespace)  # our own notebook
    for cell in code:
        if cell.metadata["nbgrader"]["solution"]:
            exec(compile(cell.source, "<answer>", "exec"), namespace)
    return namespace
