"""One rule for the folders the commands write (`grade --out`, `build-notebooks --notebooks`,
`lite build --out`): never the filesystem root, the home folder or a folder of masters (nor,
for a command that replaces its folder, one holding what must survive), whatever the flags;
and never a folder that holds files the command did not write, unless `--force`.

Each command says how it knows a folder it wrote (`Owned`): `grade` by the manifest it writes
first (`shopops-gradebook.json`), `lite build` by the site's `jupyter-lite.json`,
`build-notebooks` by holding student notebooks only. Checked before anything is read or
written, so a refusal changes nothing on disk.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from shopops_lab.errors import BadArgumentError

JUPYTER_LEFTOVERS = frozenset({".ipynb_checkpoints", ".DS_Store"})  # what opening a folder in Jupyter leaves


@dataclass(frozen=True)
class Owned:
    """How a command knows a folder it wrote: `test(folder)`, and what such a folder is, for
    the message (`"a gradebook shopops-lab grade wrote"`)."""

    test: Callable[[Path], bool]
    what: str


@dataclass(frozen=True)
class Kept:
    """A folder an output must never be (`its`: the masters, the key), and, when `inside` is
    set, never hold either (a command that replaces its folder would delete it)."""

    path: Path
    its: str
    inside: bool = False


def _same_or_holds(out: Path, kept: Path, inside: bool) -> bool:
    return out == kept or (inside and out in kept.parents)


def claim(
    out: str | Path, *, field: str, example: str, owned: Owned, force: bool = False, kept: Iterable[Kept] = ()
) -> Path:
    """`out`, once the rule allows writing there; BadArgumentError naming the folder and the
    fix otherwise. A new or empty folder, or one the command wrote, is always allowed; another
    non-empty folder only with `force`; the root, home, and `kept` folders never."""
    path = Path(out)
    where = path.resolve()
    never = [Kept(Path(where.anchor), "the filesystem root"), Kept(Path.home().resolve(), "your home folder")]
    for folder in [*never, *kept]:
        if _same_or_holds(where, folder.path.resolve(), folder.inside):
            held = "is" if where == folder.path.resolve() else "holds"
            raise BadArgumentError(
                field=f"{field} {out}",
                problem=f"{held} {folder.its}",
                fix=f"pass a folder of its own, e.g. {field} {example}; nothing was written",
            )
    if not path.exists():
        return path
    if not path.is_dir():
        raise BadArgumentError(
            field=f"{field} {out}",
            problem="is a file, not a folder",
            fix=f"pass a folder, e.g. {field} {example}; nothing was written",
        )
    if force or not _holds_files(path) or owned.test(path):
        return path
    raise BadArgumentError(
        field=f"{field} {out}",
        problem=f"holds files and is not {owned.what}",
        fix=f"pass a new or empty folder, e.g. {field} {example}, or add --force to write into it anyway; "
        "nothing was written",
    )


def _holds_files(path: Path) -> bool:
    return any(entry.name not in JUPYTER_LEFTOVERS for entry in path.iterdir())


def only(names: Callable[[str], bool]) -> Callable[[Path], bool]:
    """A test for a folder holding nothing but entries whose names pass `names` (and what
    Jupyter leaves behind)."""
    return lambda path: all(names(entry.name) for entry in path.iterdir() if entry.name not in JUPYTER_LEFTOVERS)


def masters(*, inside: bool = False) -> list[Kept]:
    """The kit's own masters folder (`solutions/` beside the package, in a checkout), if any."""
    folder = Path(__file__).resolve().parents[2] / "solutions"
    return [Kept(folder, "the kit's masters (solutions/)", inside=inside)] if folder.is_dir() else []


def add_force(parser: argparse.ArgumentParser, option: str, what: str) -> None:
    """`--force`, the one way past the rule's last clause, the same on every command."""
    parser.add_argument(
        "--force", action="store_true", help=f"write into {option} even if it holds files and is not {what}"
    )
