"""The answer key: the master notebooks, read once, and what each one grades.

A master's autograded test cell calls one of the kit's checks, `labNN.<exercise>.grade(<answer
names>)`, possibly between nbgrader's hidden-test markers and after a comment. The grader reads
that call from the master's source (nothing is added to the checks), so it can take the check
object itself before any learner code runs, and call it with the learner's answers. A test cell
written differently (a plain `assert ...`) is run as nbgrader runs it: it passes if it does not
raise.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from importlib import import_module
from pathlib import Path
from typing import Any

from shopops_lab.course import source as src
from shopops_lab.course.build import MASTER_NAME, build_student, nbformat_module
from shopops_lab.course.errors import NotebookInvalidError
from shopops_lab.course.grade import checked
from shopops_lab.course.metadata import Problem, cell_text, is_test_cell
from shopops_lab.course.source import MARKER_LINES
from shopops_lab.errors import BadArgumentError

# `lab01.exercise.grade(send_followup)`, `lab05.exercise.grade(run)  # a comment`
CHECK_CALL = re.compile(
    r"^(lab\d{2})\.([A-Za-z_]\w*)\.grade\(\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)?\s*,?\s*\)\s*(?:#.*)?$"
)
CHECKS_PACKAGE = "shopops_lab.checks"


class Kind(StrEnum):
    """How a graded cell earns its points."""

    AUTO = "auto"  # a test cell: the kit's check (or the cell itself) decides
    MANUAL = "manual"  # a written answer: the instructor decides


@dataclass(frozen=True, slots=True)
class CheckCall:
    """A test cell's call of a kit check: which check object, with which answer names."""

    module: str
    attribute: str
    answers: tuple[str, ...]

    @classmethod
    def parse(cls, source: str) -> CheckCall | None:
        """The one check call a test cell makes, or None if it does anything else too."""
        lines = [line.strip() for line in source.splitlines()]
        code = [line for line in lines if line and not line.startswith("#") and src.marker_of(line) is None]
        match = CHECK_CALL.match(code[0]) if len(code) == 1 else None
        if match is None:
            return None
        names = tuple(name.strip() for name in (match.group(3) or "").split(",") if name.strip())
        return cls(module=match.group(1), attribute=match.group(2), answers=names)

    def grader(self) -> Any:
        """The kit's check object this call names (imported here, before any learner code)."""
        from shopops_lab.checks.base import Exercise

        found = getattr(import_module(f"{CHECKS_PACKAGE}.{self.module}"), self.attribute, None)
        if not isinstance(found, Exercise):
            raise BadArgumentError(
                field="--key",
                problem=f"names {self.module}.{self.attribute}, which is not one of the kit's checks",
                fix="grade with the solutions/ folder of the kit version installed here",
            )
        return found

    def __str__(self) -> str:
        return f"{self.module}.{self.attribute}.grade({', '.join(self.answers)})"


@dataclass(frozen=True, slots=True)
class RubricElement:
    """One element a hand-graded answer earns points for (the master's `shopops_lab.rubric`)."""

    element: str
    points: float


@dataclass(frozen=True, slots=True)
class GradedCell:
    """One graded cell of a master: its grade_id, points, kind and position; a written
    answer's rubric, numbered from 1 in manual.csv."""

    grade_id: str
    points: float
    kind: Kind
    index: int
    check: CheckCall | None = None
    rubric: tuple[RubricElement, ...] = ()


@dataclass(frozen=True)
class Master:
    """One lab's master notebook and its student version, as the grader needs them."""

    lab: str
    version: str
    title: str
    path: Path
    notebook: Any  # nbformat.NotebookNode
    student: Any
    graded: tuple[GradedCell, ...]

    @property
    def stem(self) -> str:
        return self.path.stem

    @property
    def max_points(self) -> float:
        return sum(cell.points for cell in self.graded)

    @property
    def manual_points(self) -> float:
        return sum(cell.points for cell in self.graded if cell.kind is Kind.MANUAL)

    @cached_property
    def names(self) -> tuple[tuple[frozenset[str], frozenset[str]], ...]:
        """Per cell, the top-level names its code binds and reads (empty for markdown)."""
        return tuple(
            cell_names(cell_text(cell)) if cell.cell_type == "code" else (frozenset(), frozenset())
            for cell in self.notebook.cells
        )

    @cached_property
    def labels(self) -> tuple[str, ...]:
        """What each cell is called for the learner and the instructor (never its grade_id,
        which neither reads): a test cell by its check's name (`the test of Exercise 01.1
        (a handler that is safe to run twice)`), any other by the heading it sits under and
        its place there (`code cell 2 under “The crash”`)."""
        checks = {cell.index: cell.check for cell in self.graded if cell.check is not None}
        places: list[tuple[str, str]] = []  # (heading, kind) per cell
        heading = ""
        for cell in self.notebook.cells:
            if cell.cell_type == "markdown":
                found = next((line for line in cell_text(cell).splitlines() if line.startswith("#")), None)
                heading = found.lstrip("#").strip() if found else heading
            answer = cell.metadata.get("nbgrader", {}).get("solution") is True
            places.append((heading, "answer" if answer else cell.cell_type))
        totals = Counter(places)
        seen: Counter[tuple[str, str]] = Counter()
        labels = []
        for index, place in enumerate(places):
            seen[place] += 1
            heading, kind = place
            number = f" {seen[place]}" if totals[place] > 1 else ""
            under = f"under “{heading}”" if heading else "at the top"
            if index in checks:
                labels.append(f"the test of {checks[index].grader().name}")
            else:
                labels.append(f"{kind} cell{number} {under}")
        return tuple(labels)

    def imports(self) -> set[str]:
        """Modules the master's code cells import at top level (the grader loads them once)."""
        found: set[str] = set()
        for cell in self.notebook.cells:
            if cell.cell_type != "code":
                continue
            try:
                tree = src.parse_python(cell_text(cell))
            except SyntaxError:
                continue
            for node in tree.body:
                if isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module)
        return found

    def check_modules(self) -> set[str]:
        """The kit's check modules behind its test cells (`shopops_lab.checks.lab05`)."""
        return {f"shopops_lab.checks.{cell.check.module}" for cell in self.graded if cell.check is not None}

    def learner_imports(self) -> tuple[str, ...]:
        """What a learner process of this lab loads before the learner's first cell: the
        master's imports and its checks' modules (a master imports those as `from
        shopops_lab.checks import lab05`, which `imports` holds as the package)."""
        return tuple(sorted(self.imports() | self.check_modules()))


def cell_names(source: str) -> tuple[frozenset[str], frozenset[str]]:
    """(names bound, names read) by a code cell at top level; nothing for one that does not parse."""
    try:
        tree = src.parse_python(source)
    except SyntaxError:
        return frozenset(), frozenset()
    return frozenset(src.defined_names(tree)), frozenset(src.referenced_names(tree))


def _graded(master: Any) -> Iterator[GradedCell]:
    for index, cell in enumerate(master.cells):
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("grade"):
            continue
        if is_test_cell(cell):
            yield GradedCell(
                meta["grade_id"], float(meta.get("points", 0)), Kind.AUTO, index, CheckCall.parse(cell_text(cell))
            )
        else:
            rubric = tuple(
                RubricElement(str(entry["element"]), float(entry["points"]))
                for entry in cell.metadata.get("shopops_lab", {}).get("rubric", ())
            )
            yield GradedCell(meta["grade_id"], float(meta.get("points", 0)), Kind.MANUAL, index, rubric=rubric)


def _master(path: Path) -> Master:
    """The master at `path`, checked (or, where these bytes passed before, taken as then read)."""
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    recalled = checked.recalled(text)
    if recalled is not None:
        return _made(path, *recalled)
    nbformat = nbformat_module()
    try:
        notebook = nbformat.reads(text.decode("utf-8"), as_version=4)
    except Exception as exc:  # not UTF-8, bad JSON, unknown nbformat
        raise _unreadable(path, exc) from exc
    student = build_student(notebook, name=str(path))  # validates the master first
    checked.remember(text, notebook, student)
    return _made(path, notebook, student)


def _unreadable(path: Path, exc: Exception) -> NotebookInvalidError:
    problem = Problem(
        str(path),
        None,
        "file",
        f"cannot be read as a notebook ({type(exc).__name__}: {exc})",
        "restore the master from the kit (git checkout solutions/)",
    )
    return NotebookInvalidError.of(str(path), [problem])


def _made(path: Path, notebook: Any, student: Any) -> Master:
    kit = notebook.metadata["shopops_lab"]
    return Master(
        lab=kit["lab"],
        version=kit["version"],
        title=kit.get("title", ""),
        path=path,
        notebook=notebook,
        student=student,
        graded=tuple(_graded(notebook)),
    )


def master_paths(key: str | Path | None) -> list[Path]:
    """The NN_*.ipynb files of `key` (a folder, or one master); refuses a missing or empty key."""
    if key is None:
        raise BadArgumentError(
            field="--key",
            problem="is missing: the grader rebuilds every submission from its master",
            fix="pass the folder of master notebooks, e.g. --key solutions/",
        )
    path = Path(key)
    if path.is_dir():
        paths = sorted(p for p in path.glob("*.ipynb") if MASTER_NAME.match(p.name))
    elif path.is_file() and MASTER_NAME.match(path.name):
        paths = [path]
    else:
        paths = []
    if not paths:
        what = "does not exist" if not path.exists() else "holds no NN_*.ipynb master notebook"
        raise BadArgumentError(
            field=f"--key {key}",
            problem=what,
            fix="pass the kit's solutions/ folder (or one master, e.g. solutions/01_leases_and_redelivery.ipynb)",
        )
    return paths


def _checked(path: Path, key: str | Path) -> Master:
    """A master of this kit, or one line saying what `path` is instead: a notebook of another
    course (not a valid master), or a student notebook (every answer is still its stub)."""
    try:
        master = _master(path)
    except NotebookInvalidError as exc:
        if any(str(getattr(problem, "field", "")).endswith(".checksum") for problem in exc.problems):
            raise _student_notebook(path, key) from None
        first = str(exc.problems[0]).splitlines()[0] if exc.problems else "not a master"
        raise BadArgumentError(
            field=f"--key {key}",
            problem=f"holds {path.name}, which is not a master notebook of this kit ({first[:200]})",
            fix="pass the kit's solutions/ folder (the masters, with their answers and hidden tests)",
        ) from None
    marked = any(
        line.strip() in MARKER_LINES
        for cell in master.notebook.cells
        if cell.cell_type == "code"
        for line in cell_text(cell).splitlines()
    )
    if not marked:  # a master marks its solutions (and hidden tests); its student copy has none left
        raise _student_notebook(path, key)
    return master


def _student_notebook(path: Path, key: str | Path) -> BadArgumentError:
    return BadArgumentError(
        field=f"--key {key}",
        problem=f"holds {path.name}, a student notebook: no cell marks a solution",
        fix="pass the kit's solutions/ folder (the masters), not notebooks/ or a learner's copy",
    )


@dataclass(frozen=True)
class Key:
    """Every master of the key, by lab id."""

    masters: dict[str, Master]
    source: Path

    @classmethod
    def load(cls, key: str | Path | None, labs: Collection[str] | None = None) -> Key:
        """Read `key` (a folder of NN_*.ipynb masters, or one master); refuse anything else.
        With `labs`, only the masters whose file names start with those lab ids are read (all,
        if none does): checking a master costs more than grading a submission of it."""
        path, paths = Path(str(key)), master_paths(key)
        if labs is not None:
            paths = [p for p in paths if p.name[:2] in labs] or paths
        masters: dict[str, Master] = {}
        for master in (_checked(p, str(key)) for p in paths):
            if master.lab in masters:
                raise BadArgumentError(
                    field=f"--key {key}",
                    problem=f"holds two masters of lab {master.lab} "
                    f"({masters[master.lab].path.name}, {master.path.name})",
                    fix="keep one master per lab in the key",
                )
            masters[master.lab] = master
        return cls(masters=masters, source=path)


# --- model answers, for `labNN.<exercise>.solution()` ------------------------------------------

MODEL_ANSWERS_MODULE = Path(__file__).resolve().parents[2] / "checks" / "answer_keys" / "model_answers.py"


def model_answers(folder: str | Path) -> dict[str, str]:
    """Exercise id -> the model answer its master's answer cell holds (the cell without
    nbgrader's markers): what `Exercise.solution(confirm=True)` reveals.
    The cell is the one that defines the exercise's `answer` name."""
    import nbformat

    from shopops_lab.checks.base import Exercise

    found: dict[str, str] = {}
    for path in master_paths(folder):
        checks = import_module(f"{CHECKS_PACKAGE}.lab{path.name[:2]}")
        exercises = [value for value in vars(checks).values() if isinstance(value, Exercise)]
        notebook = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
        cells = [
            cell
            for cell in notebook.cells
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution") is True
        ]
        for exercise in exercises:
            name = re.escape(exercise.answer)
            pattern = re.compile(rf"^((async )?def|class) {name}\b|^{name}\s*=", re.M)
            for cell in cells:
                if pattern.search(cell.source):
                    found[exercise.id] = _solution_regions(cell.source)
    return dict(sorted(found.items()))


def _solution_regions(text: str) -> str:
    """The answer cell as the master has it, minus nbgrader's marker lines."""
    return "\n".join(line for line in text.splitlines() if line.strip() not in MARKER_LINES).strip("\n")


def model_answers_module(folder: str | Path) -> str:
    """The text of `shopops_lab/checks/answer_keys/model_answers.py`, made from the masters in `folder`
    (write it with `python -m shopops_lab.course.grade.key solutions/`)."""
    lines = [
        "# ruff: noqa: E501  (the masters' own lines, as they are)",
        '"""The model answers `Exercise.solution(confirm=True)` reveals, by exercise id.',
        "",
        "Made from the masters' answer cells by `python -m shopops_lab.course.grade.key solutions/`;",
        'a test keeps it equal to them. Never edit it by hand."""',
        "",
        "MODEL_ANSWERS: dict[str, str] = {",
    ]
    first: dict[str, str] = {}  # an answer's text -> the first exercise it answers
    same: list[str] = []  # exercises judging an answer written above (lab 09's three judges of one worker)
    for exercise, answer in model_answers(folder).items():
        if answer in first:
            same.append(f"MODEL_ANSWERS[{exercise!r}] = MODEL_ANSWERS[{first[answer]!r}]")
            continue
        first[answer] = exercise
        lines.append(f"    {exercise!r}: (")
        lines.extend(f"        {line!r}" for line in answer.splitlines(keepends=True))
        lines.append("    ),")
    lines.append("}")
    return "\n".join([*lines, *same]) + "\n"


if __name__ == "__main__":
    import sys

    MODEL_ANSWERS_MODULE.write_text(model_answers_module(sys.argv[1] if len(sys.argv) > 1 else "solutions"))
