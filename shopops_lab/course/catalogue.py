"""The course map the kit ships (`shopops_lab/course_map.json`): each lab's title, minutes,
goals and graded parts with their points, read from the masters, for the progress views
(`shopops_lab.progress`: lab 00, the Lite site's front page).

`shopops-lab build-notebooks` writes it whenever it builds the notebooks the kit ships (the
checkout's `notebooks/`), and `--check` says when it is out of date, so it follows the masters
as the student notebooks do. An exercise's id and title are its check's (`labNN.name.grade(...)`
in the graded test cell); a written answer (a graded markdown cell) keeps its grade id.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["MAP", "course_map", "map_text"]

MAP = Path(__file__).resolve().parent.parent / "course_map.json"
_GRADE_CALL = re.compile(r"\b(lab\d\d)\.(\w+)\.grade\(")
_MINUTES = re.compile(r"about (\d+) minutes")
_ITEM = re.compile(r"^(?:-|\d+\.)\s+(.*)$")
WRITTEN = "a written answer, graded by hand"


def course_map(masters: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The map of (file name, master notebook as a dict) pairs, in lab order."""
    return {"labs": [_lab(name, master) for name, master in sorted(masters)]}


def map_text(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def _lab(name: str, master: Mapping[str, Any]) -> dict[str, Any]:
    cells = master.get("cells", [])
    first = _source(cells[0]) if cells else ""
    minutes = _MINUTES.search(first)
    title = next((line[2:].strip() for line in first.splitlines() if line.startswith("# ")), name)
    return {
        "lab": name[:2],
        "title": title,
        "minutes": int(minutes.group(1)) if minutes else 0,
        "file": name,
        "goals": _goals(first),
        "graded": [graded for cell in cells if (graded := _graded(cell)) is not None],
    }


def _goals(text: str) -> list[str]:
    """The list under the first line that says what the learner will be able to do."""
    goals: list[str] = []
    started = False
    for line in text.splitlines():
        if not started:
            started = "able to" in line
            continue
        item = _ITEM.match(line.strip())
        if item:
            goals.append(item.group(1).strip())
        elif goals and line[:1].isspace() and line.strip():
            goals[-1] += " " + line.strip()
        elif goals:
            break
    return [re.sub(r"[;.]$", "", goal.replace("*", "").replace("`", "")) for goal in goals]


def _graded(cell: Mapping[str, Any]) -> dict[str, Any] | None:
    grader = cell.get("metadata", {}).get("nbgrader", {})
    points = grader.get("points")
    if not grader.get("grade") or not points:
        return None
    if cell.get("cell_type") == "markdown":
        return {"id": grader["grade_id"], "title": WRITTEN, "points": points, "checked": False}
    call = _GRADE_CALL.search(_source(cell))
    if call is None:
        return {"id": grader["grade_id"], "title": "a graded test", "points": points, "checked": False}
    exercise = getattr(importlib.import_module(f"shopops_lab.checks.{call.group(1)}"), call.group(2))
    return {"id": exercise.id, "title": exercise.title, "points": points, "checked": True}


def _source(cell: Mapping[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source
