"""The exercises a learner has passed, kept on the learner's own machine: every check that
says "correct" records its exercise, and lab 00 (and the browser course's front page) shows
the whole course with what is done, the points and the time each lab takes.

Where the record lives:
- a Python on a computer (JupyterLab, a hub, a terminal): a file in the learner's config
  folder, `~/.config/shopops-lab/progress.jsonl` (`$XDG_CONFIG_HOME`, or `%APPDATA%` on
  Windows), one line per pass, appended: two kernels recording at once lose nothing, and a
  folder that cannot be written costs the record, never the check. `SHOPOPS_PROGRESS` names
  another file, or switches recording off with "off".
- JupyterLite (Python in the browser): a kernel's files live in memory and vanish with its
  tab, so the record is the browser's own storage for the site, an IndexedDB database
  (`shopops-lab`, store `passed`, one key per exercise), which the site's front page reads
  too. IndexedDB answers later, so reading takes a callback (`read`).
Nothing leaves the machine. The course's shape (labs, their exercises and points, their
minutes) is `course_map.json`, written by `shopops-lab build-notebooks` from the masters.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["DATABASE", "ENV", "Graded", "Lab", "course", "passed", "read", "record", "where"]

ENV = "SHOPOPS_PROGRESS"
DATABASE, STORE = "shopops-lab", "passed"  # the browser's record: IndexedDB database and object store
MAP = Path(__file__).with_name("course_map.json")


@dataclass(frozen=True, kw_only=True, slots=True)
class Graded:
    """One graded part of a lab: an exercise a check judges (`checked`), or a written answer."""

    id: str
    title: str
    points: float
    checked: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class Lab:
    """One lab as the course map has it."""

    lab: str
    title: str
    minutes: int
    file: str
    goals: tuple[str, ...]
    graded: tuple[Graded, ...]

    @property
    def points(self) -> float:
        return sum(g.points for g in self.graded)


@cache
def course() -> tuple[Lab, ...]:
    """The labs in order, from the map the kit ships (none if it is missing)."""
    try:
        data = json.loads(MAP.read_text(encoding="utf-8"))
    except OSError:
        return ()
    return tuple(
        Lab(
            lab=lab["lab"],
            title=lab["title"],
            minutes=lab["minutes"],
            file=lab["file"],
            goals=tuple(lab["goals"]),
            graded=tuple(Graded(**graded) for graded in lab["graded"]),
        )
        for lab in data["labs"]
    )


def in_browser() -> bool:
    return sys.platform == "emscripten"


def where() -> Path | None:
    """The record's file here (None: switched off, or in the browser, where IndexedDB keeps it)."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off", "0") else Path(chosen)
    if in_browser():
        return None
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "shopops-lab" / "progress.jsonl"


def record(exercise_id: str) -> None:
    """Note that `exercise_id` passed. Never raises: a record that cannot be kept is skipped."""
    path = where()
    if path is None:
        if in_browser() and ENV not in os.environ:
            _browser(lambda db: db.transaction(STORE, "readwrite").objectStore(STORE).put(exercise_id, exercise_id))
        return
    if exercise_id in passed():
        return
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"passed": exercise_id}) + "\n")


def passed() -> frozenset[str]:
    """The exercises recorded as passed in the file (empty in the browser: use `read`)."""
    path = where()
    if path is None:
        return frozenset()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return frozenset()
    found = set()
    for line in lines:
        with contextlib.suppress(ValueError, AttributeError):
            value = json.loads(line).get("passed")
            if isinstance(value, str):
                found.add(value)
    return frozenset(found)


def read(then: Callable[[frozenset[str]], None]) -> None:
    """Call `then` with the exercises passed: now from the file, or when the browser's
    storage answers (in JupyterLite), never if it cannot."""
    if where() is not None or not in_browser() or ENV in os.environ:
        then(passed())
        return

    def got(db: Any) -> None:
        from pyodide.ffi import create_once_callable

        request = db.transaction(STORE, "readonly").objectStore(STORE).getAllKeys()
        request.onsuccess = create_once_callable(lambda _: then(frozenset(str(k) for k in request.result.to_py())))

    _browser(got)


def _browser(then: Callable[[Any], Any]) -> None:
    """Open the site's IndexedDB database (making its store the first time), then `then(db)`."""
    import js
    from pyodide.ffi import create_once_callable

    request = js.indexedDB.open(DATABASE, 1)
    request.onupgradeneeded = create_once_callable(lambda _: request.result.createObjectStore(STORE))
    request.onsuccess = create_once_callable(lambda _: then(request.result))
