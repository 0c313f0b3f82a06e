"""Finding submissions, and telling whose they are, in the shapes instructors get them.

Each notebook is matched by the first of these that fits (`Layout`), and never guessed: a
file none of them fits is listed as unmatched, with the fix.

1. `--student-pattern`: a regular expression the instructor gives, searched in the file's
   path inside the folder given (`alice/lab01.ipynb`; a file given by itself: its name),
   with a `student` group (and optionally `lab` and `time`);
2. the nbgrader/JupyterHub exchange: a folder `<student>+<assignment>+<time>[+<random>]`
   (its time is the submission's);
3. nbgrader's course folder: `submitted/<student>/<assignment>/` (its `timestamp.txt`);
4. a Moodle export: `<Full Name>_<number>_assignsubmission_file_...`, a file or a folder;
5. a Canvas export: `<name>_[LATE_]<user id>_[LATE_][<submission id>_]<file>` (Canvas's
   own late mark is kept);
6. a file named `<student>_<lab>` (`alice_lab01.ipynb`, `alice_01_leases_and_redelivery.ipynb`);
7. a folder per student: a file named as its lab only (`01_leases_and_redelivery.ipynb`,
   `lab01.ipynb`, as JupyterLite downloads it): the nearest folder above it that names no
   lab is the student's (the folder given, or a file's own folder, counts).

With `--roster`, each name found is matched against the roster's ids, names and aliases
(`roster.py`) and the submission is the roster id's; a name the roster does not know is
unmatched. Several submissions of one student and lab: the latest is graded (by the time
the layout gives, else by name), the others are listed as superseded (`choose`).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from shopops_lab.course.grade.roster import Roster
from shopops_lab.errors import BadArgumentError

SKIPPED_FOLDERS = frozenset({".ipynb_checkpoints", "__MACOSX"})
LAB_PATTERNS = (re.compile(r"lab[ _-]?(\d{1,2})(?!\d)"), re.compile(r"(?:^|[ _-])(\d{2})_[a-z]"))
SEPARATORS = " _-."
EXCHANGE = re.compile(r"^(?P<student>[^+]+)\+(?P<assignment>[^+]+)\+(?P<time>[^+]+)(?:\+[^+]*)?$")
MOODLE = re.compile(r"^(?P<student>.+?)_(?P<number>\d+)_assignsubmission_[a-z]+_?(?P<rest>.*)$", re.I)
CANVAS = re.compile(
    r"^(?P<student>[^\W\d_](?:[^\W\d]|-)*?)_(?P<late>late_)?(?P<uid>\d{3,})_(?P<late2>late_)?(?:(?P<attempt>\d+)_)?(?P<rest>.+)$",
    re.I,
)


class Layout(StrEnum):
    """What told whose a file is (a column of files.csv)."""

    PATTERN = "--student-pattern"
    EXCHANGE = "nbgrader exchange"
    COURSE = "nbgrader submitted/"
    MOODLE = "Moodle export"
    CANVAS = "Canvas export"
    NAME = "<student>_<lab> file name"
    FOLDER = "folder per student"


@dataclass(frozen=True, slots=True)
class Submission:
    """One notebook to grade: where it is, its path inside the folder given (`name`), whose
    it is, the lab its path names (`lab_hint`), and once read the lab it is (`lab`: its
    metadata's, else `lab_hint`). `submitted`: when it was handed in, where the layout says;
    `late_mark`: the LMS marked it late. The gradebook knows it by `key`, student and lab,
    however the file was passed."""

    path: Path
    name: str
    student: str
    lab_hint: str | None
    lab: str | None = None
    layout: Layout = Layout.NAME
    submitted: datetime | None = None
    late_mark: bool = False

    @property
    def key(self) -> str:
        return f"{self.student}/lab{self.lab or self.lab_hint or '??'}"

    @property
    def file(self) -> str:
        return self.path.as_posix()


class Outcome(StrEnum):
    """What became of a file the search found (files.csv)."""

    GRADED = "graded"
    SUPERSEDED = "superseded"  # a later submission of the same student and lab was graded
    UNMATCHED = "unmatched"  # no layout (or the roster) told whose it is, or no lab
    SKIPPED = "skipped"  # not one of the labs --lab named
    REFUSED = "refused"  # a link to a folder in the class folder: not followed


@dataclass(frozen=True, slots=True)
class Listed:
    """One file the search found and what became of it: graded (as `submission`), or why not."""

    file: str
    outcome: Outcome
    detail: str = ""
    submission: Submission | None = None


def lab_in_name(text: str, stems: Mapping[str, str]) -> tuple[str, int, int] | None:
    """(lab, start, end) of the lab named in `text`: a master's file name, else labN(N), else NN_."""
    lowered = text.lower()
    for lab, stem in sorted(stems.items()):
        at = lowered.find(stem.lower())
        if at >= 0:
            return lab, at, at + len(stem)
    for pattern in LAB_PATTERNS:
        match = pattern.search(lowered)
        if match:
            return match.group(1).zfill(2), match.start(), match.end()
    return None


def parse_time(text: str) -> datetime | None:
    """A submission time as nbgrader writes it (`2026-03-10 14:05:33.123456 UTC`) or in ISO 8601;
    a time without a zone is UTC. None if it is neither."""
    cleaned = text.strip()
    for zone in (" UTC", " GMT", "Z"):
        if cleaned.endswith(zone):
            cleaned = cleaned[: -len(zone)] + "+00:00"
    try:
        when = datetime.fromisoformat(cleaned)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


@dataclass(frozen=True)
class _Match:
    student: str
    layout: Layout
    lab: str | None = None
    submitted: datetime | None = None
    late_mark: bool = False


def _timestamp_file(folder: Path) -> datetime | None:
    try:
        return parse_time((folder / "timestamp.txt").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def _lab_of_text(texts: Iterable[str], stems: Mapping[str, str]) -> str | None:
    for text in texts:
        found = lab_in_name(text, stems)
        if found:
            return found[0]
    return None


def _match(
    path: Path, inside: str, given: str, stems: Mapping[str, str], pattern: re.Pattern[str] | None
) -> _Match | None:
    """Whose the file at `path` is (`inside`: its path inside the folder given, `given` that
    folder's name), by the first layout that fits; None if none does."""
    stem = Path(inside).stem
    folders = inside.split("/")[:-1]
    lab = _lab_of_text([stem, *reversed(folders)], stems)
    if pattern is not None:
        found = pattern.search(inside)
        if found and found.group("student"):
            groups = found.groupdict()
            given_lab = groups.get("lab") or ""
            named = given_lab.zfill(2) if given_lab.isdigit() else _lab_of_text([given_lab], stems)
            when = parse_time(groups["time"]) if groups.get("time") else None
            return _Match(found.group("student"), Layout.PATTERN, named or lab, when)
    parts = path.resolve().parts
    for part in reversed(parts[:-1]):
        exchange = EXCHANGE.match(part)
        if exchange:
            assignment = _lab_of_text([exchange.group("assignment")], stems)
            when = parse_time(exchange.group("time"))
            return _Match(exchange.group("student"), Layout.EXCHANGE, lab or assignment, when)
    if len(parts) >= 4 and parts[-4] == "submitted":
        assignment = _lab_of_text([parts[-2]], stems)
        return _Match(parts[-3], Layout.COURSE, lab or assignment, _timestamp_file(path.parent))
    for text in (stem, *reversed(folders)):
        moodle = MOODLE.match(text)
        if moodle:
            return _Match(moodle.group("student").strip(), Layout.MOODLE, lab)
    canvas = CANVAS.match(stem)
    if canvas:
        late = bool(canvas.group("late") or canvas.group("late2"))
        return _Match(canvas.group("student"), Layout.CANVAS, lab, late_mark=late)
    in_stem = lab_in_name(stem, stems)
    if in_stem is not None:
        student = stem[: in_stem[1]].strip(SEPARATORS)
        if student:
            return _Match(student, Layout.NAME, lab)
        owners = [folder for folder in reversed([given, *folders]) if lab_in_name(folder, stems) is None]
        if owners:
            return _Match(owners[0], Layout.FOLDER, lab)
    return None


def _notebooks(root: Path) -> Iterable[Path]:
    """Every `*.ipynb` under `root` that is not a folder: a symbolic link, a FIFO or a device
    of that name too (`read_notebook` refuses those, so each gets a row saying why). Folders
    reached through a link are not searched: nothing is followed out of the class folder."""
    if not root.is_dir():
        yield root
        return
    for path in sorted(root.rglob("*.ipynb")):
        if not path.is_dir() and not SKIPPED_FOLDERS & set(path.relative_to(root).parts[:-1]):
            yield path


def _linked_folders(root: Path) -> list[Listed]:
    """The links to folders inside a class folder: listed, never searched (a link may lead to
    the key, or anywhere else outside the class folder)."""
    if not root.is_dir():
        return []
    return [
        Listed(path.as_posix(), Outcome.REFUSED, f"a symbolic link to a folder (to {os.readlink(path)}), not followed")
        for path in sorted(root.rglob("*"))
        if path.is_symlink() and path.is_dir()
    ]


class NotARegularFile(OSError):
    """A submission that is a symbolic link, a FIFO, a device or a socket: never opened as a
    notebook (a link may point at the key; a FIFO would block the reader for ever)."""


def read_notebook(path: Path, most: int) -> bytes:
    """The bytes of the regular file at `path` (at most `most` + 1), opened without following
    a link and without blocking; NotARegularFile names what it is instead."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if os.path.islink(path):
            raise NotARegularFile(f"is a symbolic link (to {os.readlink(path)}), which is not followed") from None
        raise exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
            raise NotARegularFile(f"is {kind}, not a file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(most + 1)
    finally:
        os.close(fd)


UNMATCHED_FIX = "put it in a folder named for its student, name it <student>_labNN.ipynb, or pass --student-pattern"


@dataclass(frozen=True)
class Found:
    """Every notebook the search found: those matched to a student, and the others, listed."""

    submissions: tuple[Submission, ...]
    unmatched: tuple[Listed, ...]


def find(
    arguments: Sequence[str],
    stems: Mapping[str, str],
    *,
    roster: Roster | None = None,
    pattern: re.Pattern[str] | None = None,
) -> Found:
    """Every notebook under `arguments` (files, or folders searched recursively), each matched
    to its student (and the roster's id for that student, with `roster`) or listed as
    unmatched. Refuses a path that is missing or a search that finds nothing."""
    submissions: list[Submission] = []
    unmatched: list[Listed] = []
    seen: set[Path] = set()
    for argument in arguments:
        root = Path(argument)
        if not root.exists():
            raise BadArgumentError(
                field=f"submission {argument}",
                problem="does not exist",
                fix="pass notebook files, or folders that hold them (searched recursively)",
            )
        unmatched.extend(_linked_folders(root))
        for path in _notebooks(root):
            if path.resolve() in seen:  # the same file under two arguments is one file
                continue
            seen.add(path.resolve())
            name = path.relative_to(root).with_suffix("").as_posix() if root.is_dir() else path.stem
            inside = path.relative_to(root).as_posix() if root.is_dir() else path.name
            given = root.resolve().name if root.is_dir() else path.resolve().parent.name
            matched = _match(path, inside, given, stems, pattern)
            if matched is None:
                unmatched.append(
                    Listed(path.as_posix(), Outcome.UNMATCHED, f"its path names no student ({UNMATCHED_FIX})")
                )
                continue
            student = matched.student
            if roster is not None:
                known = roster.match(student)
                if known.student is None:
                    unmatched.append(Listed(path.as_posix(), Outcome.UNMATCHED, known.problem))
                    continue
                student = known.student
            submissions.append(
                Submission(
                    path=path,
                    name=name,
                    student=student,
                    lab_hint=matched.lab,
                    layout=matched.layout,
                    submitted=matched.submitted,
                    late_mark=matched.late_mark,
                )
            )
    if not submissions and not unmatched:
        raise BadArgumentError(
            field=f"submissions {' '.join(arguments)}",
            problem="hold no .ipynb file",
            fix="pass the folder the notebooks were collected into (e.g. nbgrader's submitted/)",
        )
    return Found(tuple(submissions), tuple(unmatched))


def lab_of(submission: Submission, read_lab: Callable[[Path], str | None]) -> Submission:
    """`submission` with its lab: what its metadata says (`read_lab`), else what its path says."""
    return replace(submission, lab=read_lab(submission.path) or submission.lab_hint)


def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """`lab01-10` after `lab01-9`: digits compare as numbers."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text.lower()) if part)


def choose(
    submissions: Sequence[Submission], labs: Collection[str] | None = None
) -> tuple[list[Submission], list[Listed]]:
    """The submissions to grade (one per student and lab: the latest, by the time its layout
    gives when every one has a time, else by name) and the rest listed: superseded, without a
    lab, or (with `labs`) of a lab not asked for. Order: as found."""
    chosen: list[Submission] = []
    listed: list[Listed] = []
    groups: dict[str, list[Submission]] = {}
    for submission in submissions:
        if submission.lab is None:
            listed.append(
                Listed(
                    submission.file,
                    Outcome.UNMATCHED,
                    "names no lab: it has no metadata.shopops_lab.lab and its name has no labNN "
                    "(rename it <student>_labNN.ipynb)",
                    submission,
                )
            )
        elif labs is not None and submission.lab not in labs:
            listed.append(
                Listed(submission.file, Outcome.SKIPPED, f"lab {submission.lab} is not one --lab names", submission)
            )
        else:
            groups.setdefault(submission.key, []).append(submission)
    for group in groups.values():
        timed = all(item.submitted is not None for item in group)
        order = sorted(
            range(len(group)),
            key=lambda n: (group[n].submitted, _natural(group[n].name), n) if timed else (_natural(group[n].name), n),
        )
        latest = group[order[-1]]
        chosen.append(latest)
        listed.extend(
            Listed(group[n].file, Outcome.SUPERSEDED, f"{latest.file} is a later submission of {latest.key}", group[n])
            for n in order[:-1]
        )
    place = {id(submission): n for n, submission in enumerate(submissions)}
    chosen.sort(key=lambda item: place[id(item)])
    return chosen, listed
