"""Finding submissions, and telling whose they are, in the shapes instructors get them:

* nbgrader's exchange: `submitted/<student>/<assignment>/<notebook>.ipynb`;
* a flat folder downloaded from an LMS: `<student>_<lab>.ipynb`, where the lab part is a
  master's name (`alice_01_leases_and_redelivery.ipynb`) or `labNN` (`alice_lab01.ipynb`);
* anything else: one notebook per file, the student named by its folder or its file name.

The lab a submission belongs to comes from its metadata when it has some; the name is the
fallback, so it is worked out here too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from shopops_lab.errors import BadArgumentError

SKIPPED_FOLDERS = frozenset({".ipynb_checkpoints", "__MACOSX"})
LAB_PATTERNS = (re.compile(r"lab[ _-]?(\d{2})(?!\d)"), re.compile(r"(?:^|[ _-])(\d{2})_[a-z]"))
SEPARATORS = " _-."


@dataclass(frozen=True, slots=True)
class Submission:
    """One notebook to grade: where it is, its name in the gradebook, whose it is, and the
    lab its path names (None when the path names none)."""

    path: Path
    name: str
    student: str
    lab_hint: str | None


def lab_in_name(text: str, stems: Mapping[str, str]) -> tuple[str, int, int] | None:
    """(lab, start, end) of the lab named in `text`: a master's file name, else labNN, else NN_."""
    lowered = text.lower()
    for lab, stem in sorted(stems.items()):
        at = lowered.find(stem.lower())
        if at >= 0:
            return lab, at, at + len(stem)
    for pattern in LAB_PATTERNS:
        match = pattern.search(lowered)
        if match:
            return match.group(1), match.start(), match.end()
    return None


def describe(path: Path, name: str, stems: Mapping[str, str]) -> Submission:
    """Whose `path` is and which lab its path names; `name` is its place in the gradebook."""
    parts = path.resolve().parts
    student = parts[-3] if len(parts) >= 4 and parts[-4] == "submitted" else None  # nbgrader's exchange
    folders = name.split("/")[:-1]
    lab = None
    for text in (path.stem, *reversed(folders)):  # the file name first, then its folders
        found = lab_in_name(text, stems)
        if found:
            lab = found[0]
            if student is None and text == path.stem:
                student = text[: found[1]].strip(SEPARATORS) or None
            break
    if student is None:  # `<lab>.ipynb` as JupyterLite downloads it: the folder it was put in names its owner
        student = folders[-1] if folders else path.resolve().parent.name if lab is not None else path.stem
    return Submission(path=path, name=name, student=student, lab_hint=lab)


def _notebooks(root: Path) -> Iterable[Path]:
    if root.is_file():
        yield root
        return
    for path in sorted(root.rglob("*.ipynb")):
        if path.is_file() and not SKIPPED_FOLDERS & set(path.relative_to(root).parts[:-1]):
            yield path


def find(arguments: Sequence[str], stems: Mapping[str, str]) -> list[Submission]:
    """Every notebook under `arguments` (files, or folders searched recursively), named by its
    path inside the folder given. Refuses a path that is missing or a search that finds nothing."""
    found: list[tuple[Path, str]] = []
    for argument in arguments:
        root = Path(argument)
        if not root.exists():
            raise BadArgumentError(
                field=f"submission {argument}",
                problem="does not exist",
                fix="pass notebook files, or folders that hold them (searched recursively)",
            )
        for path in _notebooks(root):
            inside = path.relative_to(root) if root.is_dir() else Path(path.name)
            found.append((path, inside.with_suffix("").as_posix()))
    if not found:
        raise BadArgumentError(
            field=f"submissions {' '.join(arguments)}",
            problem="hold no .ipynb file",
            fix="pass the folder the notebooks were collected into (e.g. nbgrader's submitted/)",
        )
    taken: dict[str, int] = {}
    submissions = []
    for path, name in found:
        unique = name
        while unique in taken:  # the same relative name under two arguments
            taken[name] += 1
            unique = f"{name}-{taken[name]}"
        taken[unique] = 1
        submissions.append(describe(path, unique, stems))
    return submissions
