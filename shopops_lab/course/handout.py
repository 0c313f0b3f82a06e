"""`shopops-lab notebooks DEST`: the student notebooks the installed kit carries, copied into a
learner's folder, so a hub's admin installs the kit once and each learner gets their own copies.

Run again (a kit with a new lab, or a hub that runs it at every server start) it adds what is
missing and never overwrites: a notebook already in DEST is the learner's, and the report says
which ones it left alone and whether they still match the kit's. Each copy is written to a
temporary file beside its place, then linked to its name, which fails if a file of that name
appeared meanwhile: a notebook is there whole or not at all, and nothing of the learner's is
replaced. The kit's notebooks are whatever `NN_name.ipynb` files it carries (no list of labs
here): the wheel takes them from the checkout's notebooks/ (`notebooks` beside this module is a
link to it), and never the masters.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import re
import secrets
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from shopops_lab.course.errors import KitNotebooksMissingError
from shopops_lab.errors import BadArgumentError

PACKAGED = Path(__file__).resolve().parent / "notebooks"
NOTEBOOK = re.compile(r"^\d{2}_\w+\.ipynb$")
REINSTALL = 'python -m pip install --force-reinstall "shopops-lab[lab] @ <the kit\'s folder or wheel>"'


class Outcome(StrEnum):
    """What happened to one notebook: the words the report shows."""

    COPIED = "copied"
    SAME = "already there"  # as the kit ships it
    KEPT = "kept yours"  # already there and different from the kit's: the learner's edits


@dataclass(frozen=True)
class Handed:
    """One of the kit's notebooks and what `hand_out` did with it."""

    name: str
    outcome: Outcome

    def line(self) -> str:
        if self.outcome is Outcome.KEPT:
            return f"{self.outcome:<13} {self.name} (it differs from the kit's: not overwritten)"
        return f"{self.outcome:<13} {self.name}"


@dataclass(frozen=True)
class Handout:
    """What one run did: the folder, and each of the kit's notebooks in order."""

    dest: Path
    notebooks: tuple[Handed, ...]

    def count(self, outcome: Outcome) -> int:
        return sum(handed.outcome is outcome for handed in self.notebooks)

    def lines(self) -> list[str]:
        """One line per notebook, then the summary; a line on how to get the kit's copy of a kept one."""
        lines = [handed.line() for handed in self.notebooks]
        lines.append(
            f"{len(self.notebooks)} notebooks in {self.dest}: {self.count(Outcome.COPIED)} copied, "
            f"{self.count(Outcome.SAME)} already there, {self.count(Outcome.KEPT)} kept as you left them"
        )
        if self.count(Outcome.KEPT):
            lines.append("To get the kit's copy of a kept notebook, rename yours and run this again.")
        return lines


def kit_notebooks(source: Path = PACKAGED) -> list[Path]:
    """The student notebooks the kit carries, by name; refused when there are none."""
    found = sorted(p for p in source.glob("*.ipynb") if NOTEBOOK.match(p.name)) if source.is_dir() else []
    if not found:
        raise KitNotebooksMissingError(where=str(source), fix=REINSTALL)
    return found


def hand_out(dest: str | os.PathLike[str], *, source: Path = PACKAGED) -> Handout:
    """Copy each of the kit's notebooks that `dest` lacks; leave every one it has as it is."""
    folder = Path(dest).expanduser()
    notebooks = kit_notebooks(source)
    _make_folder(folder)
    return Handout(folder, tuple(Handed(n.name, _hand(n, folder / n.name)) for n in notebooks))


def _make_folder(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise BadArgumentError(
            field=f"DEST {folder}", problem="is a file, not a folder", fix="name a folder, e.g. ~/shopops-lab"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _unwritable(folder, err) from None


def _hand(notebook: Path, target: Path) -> Outcome:
    data = notebook.read_bytes()
    if target.exists() or target.is_symlink():
        return Outcome.SAME if target.is_file() and target.read_bytes() == data else Outcome.KEPT
    try:
        return Outcome.COPIED if _write_new(target, data) else _hand(notebook, target)
    except OSError as err:
        raise _unwritable(target.parent, err) from None


def _write_new(target: Path, data: bytes) -> bool:
    """Write `data` to `target` whole, unless a file of that name appeared meanwhile (False).
    The temporary file is made as the learner's own files are (mode 0666 less the umask)."""
    temp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    handle = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        try:
            os.link(temp, target)  # fails if the name exists: never replaces
        except FileExistsError:
            return False
        except OSError as err:  # a file system without hard links: look, then rename
            if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            if target.exists():
                return False
            os.rename(temp, target)
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


def _unwritable(folder: Path, err: OSError) -> BadArgumentError:
    return BadArgumentError(
        field=f"DEST {folder}",
        problem=f"cannot be written ({err.strerror or err}); notebooks already copied there are whole",
        fix="name a folder of your own, e.g. ~/shopops-lab",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dest",
        metavar="DEST",
        help="the learner's folder (made if missing), e.g. ~/shopops-lab; nothing in it is overwritten",
    )


def run(args: argparse.Namespace) -> int:
    for line in hand_out(args.dest).lines():
        print(line)
    return 0
