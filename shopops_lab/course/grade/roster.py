"""`--roster roster.csv`: the class as the instructor knows it (`id`, `name`, `aliases`), so
that one student is one student whichever system handed their files in: `mhamilton` (a
folder), `hamilton_margaret` and `hamiltonmargaret` (Canvas), `Margaret Hamilton` (Moodle),
the Canvas user id `10001` (an alias).

A name found in a file's path matches a roster entry when, compared without case, accents,
spaces or punctuation, it equals the entry's id, one of its aliases, or its name in either
order (first names first, or the last name first as Canvas sorts). A name that matches no
entry, or more than one, matches nobody: the file is listed, never guessed.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from shopops_lab.course.grade.spreadsheet import read_rows
from shopops_lab.errors import BadArgumentError

ALIAS_SEPARATORS = re.compile(r"[;|]")


def folded(text: str) -> str:
    """`Hamilton, Margaret` -> `hamiltonmargaret`: what two spellings of one name share."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return "".join(char for char in plain.casefold() if char.isalnum())


def _spellings(name: str) -> set[str]:
    """A full name, and its last word first (Canvas's sortable name)."""
    words = name.replace(",", " ").split()
    found = {folded(name)}
    if len(words) > 1:
        found.add(folded(" ".join([words[-1], *words[:-1]])))
    return found


@dataclass(frozen=True, slots=True)
class Student:
    """One line of the roster."""

    id: str
    name: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Known:
    """What the roster says of a name: the student's id, or why there is none."""

    student: str | None
    problem: str = ""


@dataclass(frozen=True)
class Roster:
    """The roster's students, by id, and every spelling that names one of them."""

    students: dict[str, Student]
    spellings: dict[str, tuple[str, ...]]
    source: str = ""

    @classmethod
    def read(cls, path: str | Path) -> Roster:
        """Read roster.csv (a header, then one student a line: id, name, aliases separated by ; or |);
        refuse a missing id column, an empty or repeated id, or an alias two students share."""
        where = f"--roster {path}"
        rows = read_rows(path, field=where, fix="pass a CSV file with the columns id,name,aliases (UTF-8)")
        if "id" not in (rows.fieldnames or ()):
            raise BadArgumentError(
                field=where,
                problem="has no id column",
                fix="start it with the header id,name,aliases",
            )
        students: dict[str, Student] = {}
        for line, row in enumerate(rows, start=2):
            student = Student(
                id=(row.get("id") or "").strip(),
                name=(row.get("name") or "").strip(),
                aliases=tuple(
                    alias.strip() for alias in ALIAS_SEPARATORS.split(row.get("aliases") or "") if alias.strip()
                ),
            )
            if not student.id or student.id in students or "/" in student.id:
                problem = "is empty" if not student.id else "has a /" if "/" in student.id else "is there twice"
                raise BadArgumentError(
                    field=f"{where}, line {line}, id",
                    problem=f"{student.id!r} {problem}",
                    fix="give every student one id of their own (no /)",
                )
            students[student.id] = student
        spellings: dict[str, set[str]] = {}
        for student in students.values():
            names = {folded(student.id), *(folded(alias) for alias in student.aliases)}
            names |= _spellings(student.name) if student.name else set()
            for spelling in names - {""}:
                spellings.setdefault(spelling, set()).add(student.id)
        return cls(students, {key: tuple(sorted(ids)) for key, ids in spellings.items()}, str(path))

    def match(self, found: str) -> Known:
        """The roster's id for a name found in a path, or why none (unknown, or ambiguous)."""
        ids = self.spellings.get(folded(found), ())
        if len(ids) == 1:
            return Known(ids[0])
        if not ids:
            return Known(None, f"{found!r} is on no line of {self.source} (add it as an alias of its student)")
        return Known(None, f"{found!r} names several students of {self.source}: {', '.join(ids)}")

    def name(self, student: str) -> str:
        known = self.students.get(student)
        return known.name if known is not None and known.name else student
