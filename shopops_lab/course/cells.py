"""Authoring helpers: build master-notebook cells with nbgrader metadata already right.

    from shopops_lab.course import cells
    nb = cells.notebook([
        cells.md("# Leases"),
        cells.answer('''
            def renew(lease):
                ### BEGIN SOLUTION
                return lease.extend()
                ### END SOLUTION
        ''', "renew"),
        cells.test("assert renew(FakeLease()).expires_at > 0", "renew-test", 1),
    ], lab="01", version="1", title="Leases and redelivery")
    nbformat.write(nb, "solutions/01_leases_and_redelivery.ipynb")

Import the module, not the names: a bare `test` imported into a test file would be
collected by pytest. Sources are dedented and stripped of surrounding blank lines, so
triple-quoted strings can be indented with the code that writes them.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import Any

import nbformat
from nbformat import NotebookNode

from shopops_lab.errors import BadArgumentError

GRADE_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _clean(source: str) -> str:
    if not isinstance(source, str):
        raise BadArgumentError(
            field="source", problem=f"is {type(source).__name__}, not str", fix="pass the cell's text as one string"
        )
    return textwrap.dedent(source).strip("\n")


def _grade_id(grade_id: str | None, *, required: bool) -> str | None:
    if grade_id is None and not required:
        return None
    if not (isinstance(grade_id, str) and GRADE_ID.match(grade_id)):
        raise BadArgumentError(
            field="grade_id",
            problem=f"{grade_id!r} is not 1-64 letters, digits, '_' or '-'",
            fix="use a short stable name such as 'reserve-stock' (it becomes the nbgrader grade_id and the cell id)",
        )
    return grade_id


def _points(points: float) -> float:
    if isinstance(points, bool) or not isinstance(points, (int, float)) or points < 0:
        raise BadArgumentError(field="points", problem=f"{points!r} is not a number >= 0", fix="pass e.g. 1 or 2.5")
    return points


def _hints(hints: Sequence[str] | None) -> list[str] | None:
    if hints is None:
        return None
    if isinstance(hints, str) or not all(isinstance(h, str) and h.strip() for h in hints):
        raise BadArgumentError(
            field="hints", problem="must be a list of non-empty strings", fix='pass hints=["first hint", "second hint"]'
        )
    return list(hints)


def _nbgrader(
    grade_id: str | None, *, grade: bool, solution: bool, locked: bool, points: float | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "schema_version": 3,
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "solution": solution,
    }
    if points is not None:
        meta["points"] = points
    return meta


def _kit(cell: NotebookNode, **values: Any) -> NotebookNode:
    kit = {key: value for key, value in values.items() if value not in (None, False)}
    if kit:
        cell.metadata["shopops_lab"] = kit
    return cell


def md(source: str, *, grade_id: str | None = None) -> NotebookNode:
    """Read-only markdown (nbgrader locked); pass grade_id to pin an id that survives reordering."""
    cell = nbformat.v4.new_markdown_cell(_clean(source))
    cell.metadata["nbgrader"] = _nbgrader(_grade_id(grade_id, required=False), grade=False, solution=False, locked=True)
    return cell


def code(source: str, *, grade_id: str | None = None, needs_answer: bool = False) -> NotebookNode:
    """Read-only code the student runs but cannot edit; needs_answer=True when it fails
    until an answer exists in a way names can't show."""
    cell = nbformat.v4.new_code_cell(_clean(source))
    cell.metadata["nbgrader"] = _nbgrader(_grade_id(grade_id, required=False), grade=False, solution=False, locked=True)
    return _kit(cell, needs_answer=bool(needs_answer))


def answer(source: str, grade_id: str, *, hints: Sequence[str] | None = None) -> NotebookNode:
    """Autograded code answer: ### BEGIN/END SOLUTION regions become a NotImplementedError
    stub (no markers: the whole cell)."""
    cell = nbformat.v4.new_code_cell(_clean(source))
    cell.metadata["nbgrader"] = _nbgrader(_grade_id(grade_id, required=True), grade=False, solution=True, locked=False)
    return _kit(cell, hints=_hints(hints))


def written(source: str, grade_id: str, points: float, *, hints: Sequence[str] | None = None) -> NotebookNode:
    """Manually graded markdown answer worth points; the model answer becomes YOUR ANSWER HERE for students."""
    cell = nbformat.v4.new_markdown_cell(_clean(source))
    cell.metadata["nbgrader"] = _nbgrader(
        _grade_id(grade_id, required=True), grade=True, solution=True, locked=False, points=_points(points)
    )
    return _kit(cell, hints=_hints(hints))


def test(source: str, grade_id: str, points: float, *, hints: Sequence[str] | None = None) -> NotebookNode:
    """Autograded, locked test cell worth points: it must raise (e.g. AssertionError) when the answer is wrong."""
    cell = nbformat.v4.new_code_cell(_clean(source))
    cell.metadata["nbgrader"] = _nbgrader(
        _grade_id(grade_id, required=True), grade=True, solution=False, locked=True, points=_points(points)
    )
    return _kit(cell, hints=_hints(hints))


test.__test__ = False  # type: ignore[attr-defined]  # a helper, not a pytest test, even if someone imports it by name


def notebook(cells: Sequence[NotebookNode], lab: str, version: str, title: str) -> NotebookNode:
    """A master notebook: kernel python3, metadata.shopops_lab, grade_ids cell-<lab>-<n>
    where unset, cell id = grade_id; refuses invalid ones."""
    from shopops_lab.course.errors import NotebookInvalidError
    from shopops_lab.course.metadata import LAB_ID, validate_notebook

    if not (isinstance(lab, str) and LAB_ID.match(lab)):
        raise BadArgumentError(
            field="lab",
            problem=f"{lab!r} is not a two-digit lab id",
            fix='pass lab="01" (it matches the file name\'s NN_ prefix)',
        )
    if not (isinstance(version, str) and version.strip()):
        raise BadArgumentError(
            field="version", problem=f"{version!r} is not a non-empty string", fix='pass version="1"'
        )
    if not (isinstance(title, str) and title.strip()):
        raise BadArgumentError(
            field="title", problem=f"{title!r} is not a non-empty string", fix="pass the lab's title"
        )
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["shopops_lab"] = {"lab": lab, "version": version, "title": title}
    for index, cell in enumerate(cells):
        cell = nbformat.from_dict(cell)
        meta = cell.metadata.get("nbgrader")
        if not isinstance(meta, dict):
            raise BadArgumentError(
                field=f"cells[{index}]",
                problem="has no nbgrader metadata",
                fix="make it with cells.md/code/answer/written/test",
            )
        if meta.get("grade_id") is None:
            meta["grade_id"] = f"cell-{lab}-{index}"
        cell["id"] = meta["grade_id"]
        nb.cells.append(cell)
    problems = validate_notebook(nb, f"lab {lab}")
    if problems:
        raise NotebookInvalidError.of(f"lab {lab}", problems)
    return nb
