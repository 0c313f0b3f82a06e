"""Masters checked before, read again without checking them (nor loading nbformat).

Reading a master with nbformat and checking it against nbformat's schema and the kit's
metadata rules loads jsonschema and traitlets and compiles a schema: a tenth of a second of
every grading run, more than grading an unanswered submission. A master that passed is
remembered, by the SHA-256 of its bytes and the kit's version, as the notebook nbformat
read (plain JSON: source lines joined), with the student version built from it (stubs for
the answers, which the rebuild compares submissions with: 4 to 12 ms of AST work a lab); the
next run that meets the same bytes takes both as they were, checked already. A changed
master, another kit version, or a change to the code that builds student versions means
reading and checking again.

The record lives in the grading user's cache (`$XDG_CACHE_HOME/shopops-lab/masters`, else
`~/.cache/...`; SHOPOPS_GRADE_CACHE names another folder), written atomically, readable by
that user only. It is data, never code: a
record someone rewrote can change which master a run grades with, which is what editing the
key could do, and as root (docs/instructors.md's setting for grades that matter) learner processes
run under other uids and cannot write it. SHOPOPS_GRADE_RECHECK=1 checks every master.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from shopops_lab import __version__

RECHECK = "SHOPOPS_GRADE_RECHECK"  # set: check every master, remember nothing new
FOLDER = "SHOPOPS_GRADE_CACHE"  # set: keep the records there


class Node(dict):  # type: ignore[type-arg]
    """A notebook as nbformat's NotebookNode gives it: a dict whose keys are attributes too."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(name) from None

    @classmethod
    def of(cls, value: Any) -> Any:
        """`value` (parsed JSON) with every dict in it a Node, as nbformat's `from_dict` makes it."""
        if isinstance(value, dict):
            return cls({key: cls.of(item) for key, item in value.items()})
        if isinstance(value, list):
            return [cls.of(item) for item in value]
        return value


def folder() -> Path:
    """Where the records live: SHOPOPS_GRADE_CACHE, else the user's cache folder."""
    if os.environ.get(FOLDER):
        return Path(os.environ[FOLDER])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "shopops-lab" / "masters"


def _record(text: bytes) -> Path:
    """The record's file: named by the kit's version, the code that derives the student
    version (a change there must not find what the old code made), and the master's bytes."""
    digest = hashlib.sha256(_deriving(Path(__file__)) + b"\0" + text).hexdigest()
    return folder() / f"{digest}.json"


@functools.cache
def _deriving(here: Path) -> bytes:
    """The kit's version and the bytes of the code that builds student versions (read once)."""
    return __version__.encode() + b"\0" + (here.resolve().parents[1] / "build.py").read_bytes()


def recalled(text: bytes) -> tuple[Any, Any] | None:
    """The notebook a master of these bytes was read as when it passed, and the student
    version built from it then; None where there is no such record."""
    if os.environ.get(RECHECK):
        return None
    try:
        found = json.loads(_record(text).read_text(encoding="utf-8"))
        return Node.of(found["master"]), Node.of(found["student"])
    except (OSError, ValueError, TypeError, KeyError):
        return None


def remember(text: bytes, notebook: Any, student: Any) -> None:
    """Remember that a master of these bytes passed, read as `notebook`, with the student
    version built from it; where the cache cannot be written, nothing is remembered (the
    next run checks it again)."""
    record = _record(text)
    with contextlib.suppress(OSError, TypeError, ValueError):
        record.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=record.parent, prefix=".record-")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump({"master": notebook, "student": student}, out)
            os.replace(temporary, record)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
