"""Generate the student notebooks in notebooks/ from the masters in solutions/.

The master is the single source: answers, hidden tests and nbgrader metadata live there,
and the student copy is derived the way nbgrader's generate_assignment derives its
release (same stubs, same indentation rule), plus what the kit needs on top: locked
cells, and a `raises-exception` tag on every cell that cannot run before the student
answers, so nbval can run the pristine student notebook in CI.
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shopops_lab.course import catalogue, outputs
from shopops_lab.course import source as src
from shopops_lab.course.errors import (
    CourseToolsMissingError,
    NotebookExecutionError,
    NotebookInvalidError,
)
from shopops_lab.course.metadata import (
    INSTRUCTOR_KEYS,
    NOTEBOOK_NAME,
    RAISES_EXCEPTION,
    Problem,
    cell_text,
    is_test_cell,
    nbgrader_checksum,
    validate_notebook,
)
from shopops_lab.errors import BadArgumentError

if TYPE_CHECKING:
    from nbformat import NotebookNode

MASTER_NAME = NOTEBOOK_NAME  # NN_anything.ipynb


def nbformat_module() -> Any:
    """nbformat, imported on first use (it loads jsonschema and traitlets, a tenth of a second):
    the grader reads masters it checked before without it (`grade.checked`)."""
    try:
        _skip_format_checkers()
        import nbformat
    except ImportError as exc:  # the engine installs without the notebook extra
        raise CourseToolsMissingError(package="nbformat") from exc
    return nbformat


# What jsonschema (which nbformat imports) loads to check string formats, when installed: the
# IRI grammars alone (rfc3987_syntax: 39 lark grammars) are 3.5 s of CPU, arrow and dateutil
# (isoduration) 0.1 s more. No notebook schema has a `format` keyword, so none is ever used.
FORMAT_CHECKERS = (
    "rfc3987_syntax",
    "rfc3987",
    "rfc3986_validator",
    "rfc3339_validator",
    "isoduration",
    "uri_template",
    "webcolors",
    "jsonpointer",
    "fqdn",
    "idna",
)


def _skip_format_checkers() -> None:
    """Import jsonschema without its optional format checkers (it picks them once, on import),
    then let those modules be imported again by anything else that needs them."""
    if "jsonschema" in sys.modules:
        return
    blocked = [name for name in FORMAT_CHECKERS if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # its import fails: that format is skipped
    try:
        import jsonschema  # noqa: F401
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


CELL_TIMEOUT = 120
KERNEL = "python3"


class NotebookState(StrEnum):
    """Where one notebook stands after a build (or, with --check, would stand)."""

    UP_TO_DATE = "up to date"
    WRITTEN = "written"
    EXECUTED = "executed"
    STALE = "stale"  # --check: the student copy differs from what the master gives
    MISSING = "missing"  # --check: no student copy yet
    EXTRA = "extra"  # a student copy with no master


_GOOD = frozenset({NotebookState.UP_TO_DATE, NotebookState.WRITTEN, NotebookState.EXECUTED})


@dataclass(frozen=True)
class NotebookResult:
    """What the build did, or would do, to one notebook; `line()` is the CLI's summary."""

    path: str
    state: NotebookState
    detail: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", NotebookState(self.state))

    @property
    def ok(self) -> bool:
        return self.state in _GOOD

    def line(self) -> str:
        return f"{self.path}: {self.state}" + (f": {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class BuildReport:
    """All notebooks of one build, in order; `ok` is False when --check found drift or a
    student notebook has no master."""

    results: tuple[NotebookResult, ...]
    check: bool
    execute: bool

    @property
    def ok(self) -> bool:
        return all(result.ok for result in self.results)

    def lines(self) -> list[str]:
        return [result.line() for result in self.results]


def _is_answer(cell: NotebookNode) -> bool:
    return cell.get("metadata", {}).get("nbgrader", {}).get("solution") is True


def _needs_answer(cell: NotebookNode) -> bool:
    kit = cell.get("metadata", {}).get("shopops_lab", {})
    return isinstance(kit, dict) and kit.get("needs_answer") is True


def answer_dependent_cells(master: NotebookNode) -> set[int]:
    """Indices of code cells that raise in the pristine student copy, judged from what the
    student sees (answers stubbed, hidden tests removed): cells that raise as they run (an
    answer stubbed at module level), cells marked needs_answer, and cells reading a name an
    answer binds (or such a cell, transitively), except as the argument of `.check()`,
    `.hint()` or `.answered()`, which never raise, or behind an `if ....answered(...):`
    guard (names bound only there count as missing). A later clean rebinding of a name
    clears it again.
    A graded test cell whose grading sits in a hidden-test region shows the student only a
    comment, so it runs, and Run All goes on to the end."""
    tainted: set[str] = set()
    dependent: set[int] = set()
    for index, cell in enumerate(master.cells):
        if cell.cell_type != "code":
            continue
        tree = src.parse_python(_student_text(cell))
        answered = src.parse_python(cell_text(cell))  # the master's text: what runs once answered
        bound = src.defined_names(answered)
        if src.raises_when_run(tree) or _needs_answer(cell) or src.names_read_outside_checks(tree) & tainted:
            dependent.add(index)
            tainted |= bound
        elif _is_answer(cell):
            tainted |= bound  # a stubbed function: calling it raises
        else:
            tainted = (tainted - bound) | src.bound_behind_answered(answered)
    return dependent


def _student_text(cell: NotebookNode) -> str:
    """What the student copy of `cell` says: answer regions stubbed, hidden tests removed."""
    text = cell_text(cell)
    if _is_answer(cell):
        stub = src.CODE_STUB if cell.cell_type == "code" else src.TEXT_STUB
        text, replaced = src.replace_regions(text, src.BEGIN_SOLUTION, src.END_SOLUTION, stub)
        if not replaced:
            text = "\n".join(stub)
    text, _ = src.replace_regions(text, src.BEGIN_HIDDEN, src.END_HIDDEN, ())
    return text


def _check_master(master: NotebookNode, name: str) -> None:
    problems = validate_notebook(master, name, role="master")
    if problems:
        raise NotebookInvalidError.of(name, problems)


def build_student(master: NotebookNode, *, name: str = "master notebook") -> NotebookNode:
    """The student copy of a valid master: answers stubbed, hidden tests removed, outputs
    cleared, cells locked, dependent cells tagged. Cell ids and metadata carry over, so
    the result is a pure function of the master. Raises NotebookInvalidError first if the
    master breaks any rule of `validate_notebook`."""
    _check_master(master, name)
    return _student(master)


def _student(master: NotebookNode) -> NotebookNode:
    """`build_student` for a master already validated."""
    dependent = answer_dependent_cells(master)
    student = copy.deepcopy(master)
    student.metadata.pop("celltoolbar", None)  # nbgrader drops it from releases too
    for index, cell in enumerate(student.cells):
        answer = _is_answer(cell)
        cell.source = _student_text(cell)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
        _drop_instructor_notes(cell)
        cell.metadata["editable"] = answer
        cell.metadata["deletable"] = False
        tags = [tag for tag in cell.metadata.get("tags", []) if tag != RAISES_EXCEPTION]
        if index in dependent:
            tags.append(RAISES_EXCEPTION)
        if tags:
            cell.metadata["tags"] = tags
        else:
            cell.metadata.pop("tags", None)
        _release_metadata(cell)
    return student


def _release_metadata(cell: NotebookNode) -> None:
    """What nbgrader's own release adds to a graded, answer or locked cell, computed as it
    computes them: the cell's type and its checksum (`metadata.nbgrader_checksum`), so the
    student copy is nbgrader's release copy in its metadata too."""
    meta = cell.metadata["nbgrader"]
    if meta.get("grade") or meta.get("solution") or meta.get("locked"):
        meta["checksum"] = nbgrader_checksum(cell)
        meta["cell_type"] = cell.cell_type


def _drop_instructor_notes(cell: NotebookNode) -> None:
    """A written answer's rubric is for the grader: the student copy keeps none of it (its
    text sits in the answer cell, which the stub replaces whole)."""
    kit = cell.metadata.get("shopops_lab")
    if not isinstance(kit, dict):
        return
    for key in INSTRUCTOR_KEYS:
        kit.pop(key, None)
    if not kit:
        del cell.metadata["shopops_lab"]


def _cell_label(cell: NotebookNode) -> str:
    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    return f"grade_id {grade_id}" if grade_id else f"id {cell.get('id', '?')}"


def execute_notebook(nb: NotebookNode, name: str, *, master: bool) -> NotebookNode:
    """Run `nb` top to bottom in a fresh kernel (python3, PYTHONHASHSEED=0, cwd an empty
    temp dir, 120 s per cell) and return it with outputs. Errors are allowed only in cells
    tagged raises-exception; any stderr output fails (nbgrader scores a test cell that
    writes to stderr as 0), and so does a displayed value in a master's test cell (nbgrader
    would read it as partial credit). Metadata is restored afterwards, so executing never
    changes what --check compares."""
    ran = copy.deepcopy(nb)
    _run(ran, name, master=master)
    _refuse_outputs(ran, name, master=master)
    ran.metadata = copy.deepcopy(nb.metadata)
    for cell, original in zip(ran.cells, nb.cells):
        cell.metadata = copy.deepcopy(original.metadata)
    return normalise_outputs(ran)


def _run(nb: NotebookNode, name: str, *, master: bool) -> None:
    """Execute `nb` in place; a failing cell or kernel becomes NotebookExecutionError."""
    try:
        from jupyter_client.manager import AsyncKernelManager
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
    except ImportError as exc:
        raise CourseToolsMissingError(package="nbclient") from exc
    current: dict[str, int | None] = {"index": None}

    def on_cell_start(cell: NotebookNode, cell_index: int) -> None:
        current["index"] = cell_index

    with tempfile.TemporaryDirectory(prefix="shopops-lab-run-") as scratch:
        # The kernel's cwd is an empty folder of its own; its IPC sockets sit beside it
        # (no TCP ports, and no ipykernel warning about unencrypted TCP on every run).
        workdir = os.path.join(scratch, "cwd")
        os.mkdir(workdir)
        manager = AsyncKernelManager(kernel_name=KERNEL, transport="ipc", ip=os.path.join(scratch, "kernel"))
        client = NotebookClient(
            nb,
            km=manager,
            timeout=CELL_TIMEOUT,
            kernel_name=KERNEL,
            allow_errors=False,
            record_timing=False,
            extra_arguments=["--HistoryManager.hist_file=:memory:"],
            resources={"metadata": {"path": workdir}},
            on_cell_start=on_cell_start,
        )
        env = dict(os.environ, PYTHONHASHSEED="0")
        try:
            # we made the manager, so nbclient would leave the kernel running
            client.execute(cwd=workdir, env=env, cleanup_kc=True)
        except CellExecutionError as exc:
            index = current["index"]
            raise NotebookExecutionError(
                notebook=name,
                cell=index,
                grade_id=_cell_label(nb.cells[index]) if index is not None else "?",
                problem=f"raised {exc.ename}: {exc.evalue}"
                + ("" if master else " in a cell without the raises-exception tag"),
                fix="make the master run cleanly top to bottom"
                if master
                else "mark the cell needs_answer (cells.code(..., needs_answer=True)) if it needs an answer, "
                "or make it independent of the answers",
            ) from exc
        except Exception as exc:  # timeouts, dead kernels, missing kernelspec
            index = current["index"]
            raise NotebookExecutionError(
                notebook=name,
                cell="-" if index is None else index,
                grade_id=_cell_label(nb.cells[index]) if index is not None else "kernel start",
                problem=f"{type(exc).__name__}: {exc}".rstrip(),
                fix=f"keep each cell under {CELL_TIMEOUT} s and check that the {KERNEL!r} kernel starts "
                "(shopops-lab doctor)",
            ) from exc


def _refuse_outputs(nb: NotebookNode, name: str, *, master: bool) -> None:
    """Outputs nbgrader would score wrongly: stderr anywhere, a value shown by a master's test cell."""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for output in cell.outputs:
            if output.get("output_type") == "stream" and output.get("name") == "stderr":
                raise NotebookExecutionError(
                    notebook=name,
                    cell=index,
                    grade_id=_cell_label(cell),
                    problem=f"wrote to stderr: {output.get('text', '').strip()[:200]!r}",
                    fix="remove the cause (a warning, a logging call, a print to sys.stderr); "
                    "nbgrader scores a test cell with stderr output as 0",
                )
            if master and is_test_cell(cell) and output.get("output_type") == "execute_result":
                raise NotebookExecutionError(
                    notebook=name,
                    cell=index,
                    grade_id=_cell_label(cell),
                    problem="a test cell displayed a value, which nbgrader reads as partial credit",
                    fix="end the test with an assert, or assign the value (_ = check())",
                )


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def normalise_outputs(nb: NotebookNode) -> NotebookNode:
    """Make stored outputs the same on every build, so a rebuild rewrites nothing:
    - consecutive prints to one stream become one output (the kernel splits them by timing);
    - live-widget views are dropped: a saved notebook keeps no widget state, so the view
      would open as "model not found", and its model id is random; the HTML and text that
      travel with it stay;
    - an expected error (a student's unanswered exercise) keeps its one-line message, not the
      traceback, whose frames name files on the machine that built it."""
    for cell in nb.cells:
        if "outputs" not in cell:
            continue
        merged: list = []
        for output in cell.outputs:
            data = output.get("data")
            if data and WIDGET_VIEW in data and len(data) > 1:
                del data[WIDGET_VIEW]
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
            previous = merged[-1] if merged else None
            if (
                output.get("output_type") == "stream"
                and previous is not None
                and previous.get("output_type") == "stream"
                and previous.get("name") == output.get("name")
            ):
                previous["text"] = previous["text"] + output["text"]
            else:
                merged.append(output)
        cell.outputs = merged
    return nb


def _serialize(nb: NotebookNode) -> str:
    return nbformat_module().writes(nb) + "\n"  # nbformat.write ends files with a newline too


def umask() -> int:
    """The process's umask (read by setting it and putting it back: the OS offers no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path, text: str) -> None:
    """Write via a temp file in the same directory and os.replace, so a crash or an error
    mid-write leaves the old file, never half a notebook. The file gets the permissions any
    new file gets here (0666 less the umask: 0644 as a rule, as nbgrader writes them), not
    the temp file's private 0600, so a shared release or feedback folder can be read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
            stream.flush()
            os.fchmod(stream.fileno(), 0o666 & ~umask())
            os.fsync(stream.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise


def _differences(expected: NotebookNode, actual: NotebookNode) -> list[str]:
    """What --check compares: nbformat version, notebook metadata, and per cell its type,
    id, source and metadata. Outputs and execution counts are ignored."""
    found: list[str] = []
    if (expected.nbformat, expected.nbformat_minor) != (actual.get("nbformat"), actual.get("nbformat_minor")):
        found.append(
            f"nbformat {actual.get('nbformat')}.{actual.get('nbformat_minor')} "
            f"(expected {expected.nbformat}.{expected.nbformat_minor})"
        )
    if expected.metadata != actual.get("metadata", {}):
        keys = sorted(
            k
            for k in set(expected.metadata) | set(actual.metadata)
            if expected.metadata.get(k) != actual.metadata.get(k)
        )
        found.append(f"notebook metadata differs ({', '.join(keys)})")
    if len(expected.cells) != len(actual.cells):
        found.append(f"{len(actual.cells)} cells, the master gives {len(expected.cells)}")
    for index, (want, have) in enumerate(zip(expected.cells, actual.cells)):
        for part in ("cell_type", "id", "source", "metadata"):
            mine: Any = cell_text(want) if part == "source" else want.get(part)
            theirs: Any = cell_text(have) if part == "source" else have.get(part)
            if mine != theirs:
                label = "type" if part == "cell_type" else part
                if part == "metadata":
                    keys = sorted(
                        k for k in set(mine or {}) | set(theirs or {}) if (mine or {}).get(k) != (theirs or {}).get(k)
                    )
                    label += f" ({', '.join(keys)})"
                found.append(f"cell {index} {label} differs")
    return found


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _masters(solutions: Path) -> list[Path]:
    return sorted(p for p in solutions.glob("*.ipynb") if MASTER_NAME.match(p.name))


def _read(path: Path) -> NotebookNode:
    try:
        return nbformat_module().read(path, as_version=4)
    except Exception as exc:  # bad JSON, unknown nbformat
        problem = Problem(
            _display(path),
            None,
            "file",
            f"cannot be read as a notebook ({type(exc).__name__}: {exc})",
            "restore it from git or rebuild it",
        )
        raise NotebookInvalidError.of(problem.notebook, [problem]) from exc


def _planned(solutions: Path, labs: frozenset[str] | None = None) -> Iterator[tuple[Path, NotebookNode, NotebookNode]]:
    """(master path, master, student) for every master (or those of `labs`), all validated before any is built."""
    loaded = [(path, _read(path)) for path in _masters(solutions) if labs is None or path.name[:2] in labs]
    problems: list[Problem] = []
    for path, master in loaded:
        problems.extend(validate_notebook(master, _display(path), role="master"))
    if problems:
        names = ", ".join(dict.fromkeys(p.notebook for p in problems))
        raise NotebookInvalidError.of(names, problems)
    for path, master in loaded:
        yield path, master, _student(master)  # validated above, all of them before any is built


def build_notebooks(
    solutions_dir: str | os.PathLike[str],
    notebooks_dir: str | os.PathLike[str],
    *,
    check: bool = False,
    execute: bool = False,
    labs: Iterable[str] | None = None,
    force: bool = False,
) -> BuildReport:
    """Build (or with check=True only compare) the student notebook of every NN_*.ipynb
    master, or only those whose number is in `labs`. Everything is validated, built and,
    with execute=True, run before the first file is written, so a failing build changes
    nothing on disk but the course map: it follows the masters' text alone and is written
    before they run, so lab 00's progress table shows it. `notebooks_dir` follows
    `outputs.claim` (`force`: write into a folder that holds other files too)."""
    solutions, notebooks = Path(solutions_dir), Path(notebooks_dir)
    chosen = _check_arguments(solutions, notebooks, check=check, execute=execute, labs=labs, force=force)
    planned = list(_planned(solutions, chosen))
    mapped = _course_map(solutions, check=check) if _ships(notebooks) else None  # before lab 00 runs: it shows it
    if execute:
        planned = [
            (
                path,
                execute_notebook(master, _display(path), master=True),
                execute_notebook(student, _display(notebooks / path.name), master=False),
            )
            for path, master, student in planned
        ]
    results: list[NotebookResult] = []
    for path, master, student in planned:
        if execute:
            write_atomic(path, _serialize(master))
            results.append(NotebookResult(_display(path), NotebookState.EXECUTED))
        target = notebooks / path.name
        results.append(_compare(student, target) if check else _write(student, target))
    built = {path.name for path, _, _ in planned}
    if notebooks.is_dir():
        results += [
            NotebookResult(
                _display(extra),
                NotebookState.EXTRA,
                f"no master {_display(solutions / extra.name)}; delete it or add the master",
            )
            for extra in _masters(notebooks)
            if extra.name not in built and (chosen is None or extra.name[:2] in chosen)
        ]
    if mapped is not None:
        results.append(mapped)
    return BuildReport(tuple(results), check=check, execute=execute)


STUDENT_NOTEBOOKS = outputs.Owned(
    outputs.only(lambda name: MASTER_NAME.match(name) is not None), "a folder of student notebooks (NN_*.ipynb)"
)


def _ships(notebooks: Path) -> bool:
    """Is `notebooks` the folder of student notebooks the kit ships (the checkout's)? Then
    the course map beside the package follows the masters too (`catalogue`)."""
    from shopops_lab.course.handout import PACKAGED

    return notebooks.resolve() == PACKAGED.resolve()


def _course_map(solutions: Path, *, check: bool) -> NotebookResult:
    """Write the course map from every master (or, with --check, compare it)."""
    text = catalogue.map_text(catalogue.course_map((path.name, _read(path)) for path in _masters(solutions)))
    shown = _display(catalogue.MAP)
    if catalogue.MAP.exists() and catalogue.MAP.read_text(encoding="utf-8") == text:
        return NotebookResult(shown, NotebookState.UP_TO_DATE)
    if check:
        return NotebookResult(shown, NotebookState.STALE, "run shopops-lab build-notebooks")
    write_atomic(catalogue.MAP, text)
    return NotebookResult(shown, NotebookState.WRITTEN)


def _check_arguments(
    solutions: Path, notebooks: Path, *, check: bool, execute: bool, labs: Iterable[str] | None, force: bool = False
) -> frozenset[str] | None:
    """The labs to build (None: all), once the folders and flags make sense together."""
    chosen = None if labs is None else frozenset(labs)
    if chosen is not None and not all(isinstance(lab, str) and len(lab) == 2 and lab.isdigit() for lab in chosen):
        raise BadArgumentError(
            field="--lab",
            problem=f"{sorted(chosen)} are not all two-digit lab numbers",
            fix="pass e.g. --lab 01 --lab 05",
        )
    if check and execute:
        raise BadArgumentError(
            field="--check/--execute",
            problem="cannot be combined: --check writes nothing and ignores outputs",
            fix="run one, then the other",
        )
    if not solutions.is_dir():
        raise BadArgumentError(
            field="--solutions",
            problem=f"{solutions} is not a directory",
            fix="run from the repository root or pass --solutions DIR",
        )
    if not check:
        kept = [outputs.Kept(solutions, "the masters folder (--solutions)"), *outputs.masters()]
        outputs.claim(
            notebooks, field="--notebooks", example="notebooks/", owned=STUDENT_NOTEBOOKS, force=force, kept=kept
        )
    elif notebooks.exists() and not notebooks.is_dir():
        raise BadArgumentError(
            field="--notebooks", problem=f"{notebooks} is not a directory", fix="pass --notebooks DIR"
        )
    if chosen is not None:
        found = {path.name[:2] for path in _masters(solutions)}
        missing = sorted(chosen - found)
        if missing:
            raise BadArgumentError(
                field="--lab",
                problem=f"{', '.join(missing)} names no master notebook in {solutions}",
                fix=f"pass one of {', '.join(sorted(found)) or '(none: the folder has no NN_*.ipynb)'}",
            )
    return chosen


def _compare(student: NotebookNode, target: Path) -> NotebookResult:
    """--check: is the student notebook on disk the one the master gives?"""
    shown = _display(target)
    if not target.exists():
        return NotebookResult(shown, NotebookState.MISSING, "run shopops-lab build-notebooks")
    try:
        existing = nbformat_module().read(target, as_version=4)
    except Exception as exc:
        return NotebookResult(shown, NotebookState.STALE, f"unreadable ({type(exc).__name__})")
    found = _differences(student, existing)
    if not found:
        return NotebookResult(shown, NotebookState.UP_TO_DATE)
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return NotebookResult(shown, NotebookState.STALE, found[0] + more)


def _write(student: NotebookNode, target: Path) -> NotebookResult:
    """Write the student notebook, unless the file already holds exactly that."""
    text = _serialize(student)
    if target.exists() and target.read_text(encoding="utf-8") == text:
        return NotebookResult(_display(target), NotebookState.UP_TO_DATE)
    write_atomic(target, text)
    return NotebookResult(_display(target), NotebookState.WRITTEN)
