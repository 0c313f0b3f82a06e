"""Rebuild a submission from its master: the learner's answer cells (matched by grade_id)
go into the master's cells, and everything else comes from the master.

So an edited, deleted, reordered or retyped cell changes nothing, an added cell is ignored,
and the master's test cells (hidden tests included) are the ones that run. What was put
back is listed, for the instructor and the learner. The result is a `Plan`: the code cells
to run in order, with the names each binds and reads, so that when one of them hangs or
kills its process the grader knows exactly which later cells, and which exercises, that
costs (`Plan.blocked`).
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from shopops_lab.course.errors import SubmissionInvalidError
from shopops_lab.course.grade.key import CheckCall, GradedCell, Key, Master, cell_names
from shopops_lab.course.grade.submissions import NotARegularFile, Submission, read_notebook
from shopops_lab.course.metadata import LAB_ID, cell_text, is_test_cell

MAX_BYTES = 256 * 1024 * 1024  # a file larger than this is refused unread (outputs included)
NOTED_OUTPUT_BYTES = 1024 * 1024  # outputs are dropped while parsing; a notebook this large says so


def without_outputs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as parsed, minus what grading never reads: cell outputs and attachments
    (so printing a lot, or a large plot, does not cost the learner their notebook)."""
    return {key: [] if key == "outputs" else {} if key == "attachments" else value for key, value in pairs}


REVEAL_CALL = re.compile(r"\.solution\(\s*confirm\s*=\s*True\b")
EXERCISE_ID = re.compile(r"\d{2}\.\d{1,2}")
REVEALED, HINTED = "revealed", "hinted"  # checks.base's marks in an output's metadata: a model answer, a hint
# What an answer that reaches for the answer keys names: the keys' package and loader, the model
# answers, a folder of masters. Read from the source, in the grader: nothing the learner's process says.
REACHING = re.compile(r"answer_keys|model_answers|MODEL_ANSWERS|checks\.answers|answers\.load\(|solutions[/\\]")


class _Reveals:
    """`without_outputs`, noting on the way the records the outputs carry: model answers shown
    (`Exercise.solution(confirm=True)`) and hints asked for (`Exercise.hint(n)`), the one thing
    grading reads from outputs. A record in a locked cell of the master's (lab 00 shows a hint
    as a demonstration) is not the learner's asking, and is not noted."""

    def __init__(self) -> None:
        self.shown: set[str] = set()
        self.hinted: dict[str, int] = {}  # exercise id -> the highest hint level asked for

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        cell = dict(pairs)
        if "cell_type" in cell and isinstance(cell.get("outputs"), list) and not _locked(cell.get("metadata")):
            for output in cell["outputs"]:
                meta = output.get("metadata") if isinstance(output, dict) else None
                kit = meta.get("shopops_lab") if isinstance(meta, dict) else None
                kit = kit if isinstance(kit, dict) else {}
                said, hinted = kit.get(REVEALED), kit.get(HINTED)
                if isinstance(said, str) and EXERCISE_ID.fullmatch(said):
                    self.shown.add(said)
                if type(hinted) is list and len(hinted) == 2 and isinstance(hinted[0], str) and type(hinted[1]) is int:
                    if EXERCISE_ID.fullmatch(hinted[0]) and 0 < hinted[1] < 10:
                        self.hinted[hinted[0]] = max(hinted[1], self.hinted.get(hinted[0], 0))
        return without_outputs(pairs)

    def notes(self, notebook: dict[str, Any]) -> list[str]:
        """One note per exercise hinted (its highest level) and per model answer shown; one for a
        reveal whose output is gone."""
        notes = [f"hints to exercise {ex} were asked for, up to hint({n})" for ex, n in sorted(self.hinted.items())]
        notes += [
            f"the model answer to exercise {shown} was revealed (solution(confirm=True))"
            for shown in sorted(self.shown)
        ]
        if not self.shown and any(
            REVEAL_CALL.search(_joined(cell.get("source")))
            for cell in notebook["cells"]
            if isinstance(cell, dict) and cell.get("cell_type") == "code"
        ):
            notes.append("a cell calls solution(confirm=True) to reveal a model answer (its output was cleared)")
        return notes


def _locked(metadata: Any) -> bool:
    """A cell of the master's own: locked for the learner, and no answer."""
    grading = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return isinstance(grading, dict) and grading.get("locked") is True and not grading.get("solution")


def _joined(source: Any) -> str:
    if isinstance(source, list):
        return "".join(part for part in source if isinstance(part, str))
    return source if isinstance(source, str) else ""


class Role(StrEnum):
    CODE = "code"  # the master's own code: set-up, demonstrations, check() calls
    ANSWER = "answer"  # the learner's answer cell
    TEST = "test"  # the master's autograded test cell


@dataclass(frozen=True, slots=True)
class PlannedCell:
    """One code cell to run: its index in the master, its grade_id and role, the source to
    run, and the top-level names it binds and reads."""

    index: int
    grade_id: str
    role: Role
    source: str
    defines: frozenset[str]
    reads: frozenset[str]
    graded: GradedCell | None = None


@dataclass(frozen=True, slots=True)
class Written:
    """A written answer, graded by hand: its text as the learner left it."""

    grade_id: str
    points: float
    text: str
    answered: bool


@dataclass(frozen=True)
class Plan:
    """A submission rebuilt from its master, ready to run."""

    lab: str
    steps: tuple[PlannedCell, ...]
    written: tuple[Written, ...]
    restored: tuple[str, ...]
    notes: tuple[str, ...]

    def step(self, index: int) -> PlannedCell:
        return next(step for step in self.steps if step.index == index)

    def blocked(self, stopped: Collection[int]) -> dict[int, int]:
        """Which steps cannot run once the steps in `stopped` were stopped (they hung or
        ended the process): step index -> the stopped step to blame. A stopped step blocks
        itself, and a later step that reads a name it binds, or an answer it was using,
        is blocked too (and so on, down the chain); a clean rebinding clears the name."""
        tainted: set[str] = set()  # names that hold, or were computed from, an answer
        poisoned: dict[str, int] = {}
        blocked: dict[int, int] = {}
        for step in self.steps:
            culprit = (
                step.index
                if step.index in stopped
                else next((poisoned[name] for name in sorted(step.reads) if name in poisoned), None)
            )
            answer_linked = step.role is Role.ANSWER or bool(step.reads & tainted)
            if culprit is not None:
                blocked[step.index] = culprit
                poisoned.update(dict.fromkeys(step.defines | (step.reads & tainted), culprit))
            else:
                for name in step.defines:
                    poisoned.pop(name, None)
            tainted = tainted | step.defines if answer_linked else tainted - step.defines
        return blocked

    def needed(self) -> frozenset[int]:
        """The steps whose effects can reach a verdict: every answer and test cell, and each
        master cell that binds a name a needed step reads, or may change what one reads (it
        reads such a name, other than a module, function, class or constant of the notebook's).
        The rest only demonstrate, for the reader: a simulation printed, a `check()` that
        prints a verdict, a picture. They are not run: an answer is graded on what the answer
        and the cells it reads leave, not on what a demonstration did with it. A step that
        reads names out of sight (`globals()`, `eval`, `sys`, ...) or does not parse keeps them all."""
        shapes = [_Shape.of(step.source) for step in self.steps]
        if any(shape.hidden for step, shape in zip(self.steps, shapes) if step.role is not Role.CODE):
            return frozenset(step.index for step in self.steps)
        assigned = {name for step, shape in zip(self.steps, shapes) for name in step.defines - shape.static}
        changeable = assigned - {name for shape in shapes for name in shape.static}  # a builtin is not: never bound
        live: set[str] = set()
        keep: set[int] = set()
        for step, shape in reversed(list(zip(self.steps, shapes))):
            if step.role is not Role.CODE or shape.hidden or step.defines & live or step.reads & live & changeable:
                keep.add(step.index)
                live |= step.reads
        return frozenset(keep)


HIDDEN_READS = frozenset(
    {"globals", "locals", "vars", "eval", "exec", "__import__", "sys", "gc", "inspect", "get_ipython"}
)


@dataclass(frozen=True)
class _Shape:
    """What `Plan.needed` must know of a cell beyond the names it binds and reads: the names
    it binds only as a module, function, class or constant (`static`: nothing can change
    them but rebinding), and whether it can reach names out of sight (`hidden`: it does not
    parse, star-imports, or reads a name in HIDDEN_READS)."""

    static: frozenset[str]
    hidden: bool

    @classmethod
    def of(cls, source: str) -> _Shape:
        from shopops_lab.course import source as src

        try:
            tree = src.parse_python(source)
        except SyntaxError:
            return cls(frozenset(), True)
        static: set[str] = set()
        hidden = bool(src.referenced_names(tree) & HIDDEN_READS)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                static.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                hidden = hidden or any(alias.name == "*" for alias in node.names)
                static.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            elif isinstance(node, ast.Assign) and _constant(node.value):
                static.update(target.id for target in node.targets if isinstance(target, ast.Name))
        return cls(frozenset(static), hidden)


def _constant(node: ast.expr) -> bool:
    """An immutable literal: a number, a string, None, or a tuple of those (`-1`, `(8, 90)`)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _constant(node.operand)
    if isinstance(node, ast.Tuple):
        return all(_constant(item) for item in node.elts)
    return isinstance(node, ast.Constant)


def read(submission: Submission, key: Key) -> tuple[dict[str, Any], Master, tuple[str, ...]]:
    """The submission's JSON, its lab's master and notes on how the lab was found; raises
    SubmissionInvalidError for anything that is not a notebook of a lab in the key."""

    def invalid(problem: str, fix: str) -> SubmissionInvalidError:
        return SubmissionInvalidError(submission=submission.name, problem=problem, fix=fix)

    reupload = "ask the learner to upload the .ipynb file again (File > Download in JupyterLab)"
    path = Path(submission.path)
    try:
        data = read_notebook(path, MAX_BYTES)
        size = len(data)
        if size > MAX_BYTES:
            size = path.stat().st_size
            raise invalid(
                f"is {size / 2**20:.0f} MB, over the {MAX_BYTES // 2**20} MB a notebook may be",
                "ask the learner to clear its outputs (Edit > Clear Outputs of All Cells), then upload it",
            )
        reveals = _Reveals()
        notebook = json.loads(data, object_pairs_hook=reveals)
    except NotARegularFile as exc:
        raise invalid(str(exc), "ask the learner for the notebook file itself") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise invalid(f"is not a notebook ({type(exc).__name__}: {str(exc)[:200]})", reupload) from None
    if not (isinstance(notebook, dict) and notebook.get("nbformat") == 4 and isinstance(notebook.get("cells"), list)):
        raise invalid("is JSON but not an nbformat 4 notebook", reupload)
    metadata = notebook.get("metadata")
    kit = metadata.get("shopops_lab") if isinstance(metadata, dict) else None
    kit = kit if isinstance(kit, dict) else {}
    lab = kit.get("lab") if isinstance(kit.get("lab"), str) and LAB_ID.match(kit["lab"]) else None
    notes: list[str] = reveals.notes(notebook)
    if size > NOTED_OUTPUT_BYTES:
        notes.append(f"the file is {size / 2**20:.0f} MB; its cell outputs were dropped before grading")
    if lab is None:
        if submission.lab_hint is None:
            raise invalid(
                "says no lab: it has no metadata.shopops_lab.lab and its name has no labNN",
                "rename it <student>_labNN.ipynb, or grade the notebook the learner was given",
            )
        lab = submission.lab_hint
        notes.append(f"lab {lab} taken from the file name: the notebook carries no lab metadata")
    elif submission.lab_hint not in (None, lab):
        notes.append(f"graded as lab {lab} (its metadata); its name says lab {submission.lab_hint}")
    master = key.masters.get(lab)
    if master is None:
        known = ", ".join(sorted(key.masters))
        raise invalid(
            f"is lab {lab}, which has no master in the key {key.source} (labs: {known})",
            f"pass --key with the folder that holds lab {lab}'s master",
        )
    version = kit.get("version")
    if version is not None and version != master.version:
        raise invalid(
            f"was released from version {version!r} of lab {lab}; the key holds version {master.version!r}",
            "grade it with the solutions/ folder of the kit version it was released from (--key)",
        )
    return notebook, master, tuple(notes)


def _grade_id(cell: Any) -> str | None:
    """A learner cell's grade_id (nbgrader metadata), else its cell id (the kit makes them equal)."""
    if not isinstance(cell, dict):
        return None
    meta = cell.get("metadata")
    nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
    for found in (nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None, cell.get("id")):
        if isinstance(found, str):
            return found
    return None


def _identify(cells: list[Any], master: Master) -> list[str | None]:
    """Each learner cell's grade_id: from its nbgrader metadata, else its cell id; for a cell
    with neither (metadata stripped, ids renewed), from its text (a locked cell, or a stub as
    released), and an answer's from where it stands: right after the cell the master has
    before that answer."""
    master_ids = [cell.metadata["nbgrader"]["grade_id"] for cell in master.notebook.cells]
    where = {grade_id: index for index, grade_id in enumerate(master_ids)}
    texts = Counter(cell_text(given).strip() for given in master.student.cells)
    by_text = {
        cell_text(given).strip(): master_ids[n]
        for n, given in enumerate(master.student.cells)
        if texts[cell_text(given).strip()] == 1
    }
    ids = [_grade_id(cell) for cell in cells]
    present = {grade_id for grade_id in ids if grade_id in where}
    anchor = -1
    for number, cell in enumerate(cells):
        if ids[number] not in where and isinstance(cell, dict):
            found = by_text.get(_text(cell).strip())
            following = master_ids[anchor + 1] if anchor + 1 < len(master_ids) else None
            if (
                found is None
                and following is not None
                and following not in present
                and master.notebook.cells[anchor + 1].metadata["nbgrader"].get("solution") is True
                and master.notebook.cells[anchor + 1].cell_type == cell.get("cell_type")
            ):
                found = following
            if found is not None and found not in present:
                ids[number] = found
                present.add(found)
        anchor = where.get(ids[number], anchor)
    return ids


def _match(
    cells: list[Any], ids: list[str | None], known: set[str], stubs: Mapping[str, str]
) -> tuple[dict[str, Mapping[str, Any]], list[str], Counter[str], int]:
    """The learner's cells by grade_id, their order, how often each grade_id came, and how
    many cells the master does not have. Of an answer cell that came twice (a copy pasted
    to try something), the last one that is not the stub counts; of any other, the first."""
    mine: dict[str, Mapping[str, Any]] = {}
    order: list[str] = []
    counts: Counter[str] = Counter()
    stray = 0
    for cell, grade_id in zip(cells, ids):
        if grade_id not in known:
            stray += 1
            continue
        counts[grade_id] += 1
        if grade_id not in mine:
            mine[grade_id] = cell
            order.append(grade_id)
        elif grade_id in stubs and _text(cell).strip() != stubs[grade_id]:
            mine[grade_id] = cell
    return mine, order, counts, stray


def _text(cell: Mapping[str, Any]) -> str:
    text = cell.get("source", "")
    if isinstance(text, list):
        return "".join(part for part in text if isinstance(part, str))
    return text if isinstance(text, str) else ""


def _summarise(kind: str, labels: list[str]) -> Iterator[str]:
    if labels:
        plural = "s" if len(labels) > 1 else ""
        yield f"restored {len(labels)} {kind} cell{plural} from the master: {'; '.join(labels)}"


ADDED = 100_000  # the index of the first added cell kept (master cells count from 0)


def _added(
    cells: list[Any], ids: list[str | None], master_ids: list[str]
) -> list[tuple[int, str, frozenset[str], frozenset[str]]]:
    """The learner's added code cells: (master index of the cell above it, text, binds, reads)."""
    where = {grade_id: index for index, grade_id in enumerate(master_ids)}
    anchor, found = -1, []
    for cell, grade_id in zip(cells, ids):
        if grade_id in where:
            anchor = where[grade_id]
        elif isinstance(cell, dict) and cell.get("cell_type") == "code":
            text = _text(cell)
            found.append((anchor, text, *cell_names(text)))
    return found


def _keep_added(
    cells: list[Any], ids: list[str | None], master_ids: list[str], steps: list[PlannedCell], stubs: Mapping[str, str]
) -> tuple[list[PlannedCell], int]:
    """`steps` with the added cells the answers need: a helper an answer calls, or the answer
    itself typed into a new cell next to its untouched stub (after that stub, so it counts)."""
    added = _added(cells, ids, master_ids)
    stub_steps = [s for s in steps if s.role is Role.ANSWER and s.source.strip() == stubs.get(s.grade_id)]
    provided = {name for s in steps if s not in stub_steps for name in s.defines}
    needed = {name for s in steps if s.role is Role.ANSWER for name in s.reads}
    needed |= {name for s in stub_steps for name in s.defines}
    keep: set[int] = set()
    grew = True
    while grew:
        grew = False
        for number, (_, _, defines, reads) in enumerate(added):
            if number not in keep and defines & (needed - provided):
                keep.add(number)
                needed |= reads
                grew = True
    pending = sorted(
        (max([added[n][0], *(s.index for s in stub_steps if s.defines & added[n][2])]), n) for n in keep
    )  # after the cell above it, and after the stub it replaces
    result: list[PlannedCell] = []
    for step in [*steps, None]:
        while pending and (step is None or pending[0][0] < step.index):
            _, number = pending.pop(0)
            _, text, defines, reads = added[number]
            result.append(PlannedCell(ADDED + number, f"added-{number + 1}", Role.ANSWER, text, defines, reads))
        if step is not None:
            result.append(step)
    return result, len(keep)


def _restored(
    changed: dict[str, list[str]],
    reordered: bool,
    kept: int,
    stray: int,
    counts: Counter[str],
    stubs: Mapping[str, str],
    labels: Mapping[str, str],
) -> list[str]:
    """What the rebuild put back or kept, one line each, for the learner and the instructor."""
    restored = [line for kind, ids in changed.items() for line in _summarise(kind, ids)]
    if reordered:
        restored.append("put the cells back in the master's order")
    if kept:
        restored.append(f"kept {kept} cell{'s' if kept > 1 else ''} you added that your answers use")
    if stray:
        restored.append(
            f"ignored {stray} cell{'s' if stray > 1 else ''} the master does not have "
            "(answers belong in the answer cells)"
        )
    restored.extend(
        f"{labels.get(grade_id, grade_id)} appears {count} times: "
        + ("the last one answered was graded" if grade_id in stubs else "the master's own was run")
        for grade_id, count in sorted(counts.items())
        if count > 1
    )
    return restored


def rebuild(notebook: Mapping[str, Any], master: Master, notes: tuple[str, ...] = ()) -> Plan:
    """The plan for `notebook` (a submission of `master`'s lab, as parsed JSON)."""
    master_ids = [cell.metadata["nbgrader"]["grade_id"] for cell in master.notebook.cells]
    stubs = {
        master_ids[index]: cell_text(given).strip()
        for index, (cell, given) in enumerate(zip(master.notebook.cells, master.student.cells))
        if cell.metadata["nbgrader"].get("solution") is True
    }
    ids = _identify(notebook["cells"], master)
    mine, order, counts, stray = _match(notebook["cells"], ids, set(master_ids), stubs)
    graded = {cell.index: cell for cell in master.graded}
    changed: dict[str, list[str]] = {"deleted": [], "edited": [], "retyped": []}
    answer_notes: list[str] = []
    steps: list[PlannedCell] = []
    written: list[Written] = []
    for index, (cell, given) in enumerate(zip(master.notebook.cells, master.student.cells)):
        grade_id = master_ids[index]
        theirs = mine.get(grade_id)
        is_answer = cell.metadata["nbgrader"].get("solution") is True
        if is_answer:
            usable = theirs is not None and theirs.get("cell_type") == cell.cell_type
            if not usable:
                answer_notes.append(
                    f"{master.labels[index]} is {'missing' if theirs is None else 'no longer ' + cell.cell_type}: "
                    "graded as unanswered"
                )
            text = _text(theirs) if theirs is not None and usable else cell_text(given)
        else:
            text = cell_text(cell)
            if theirs is None:
                changed["deleted"].append(master.labels[index])
            elif theirs.get("cell_type") != cell.cell_type:
                changed["retyped"].append(master.labels[index])
            elif _text(theirs) != cell_text(given):
                changed["edited"].append(master.labels[index])
        if cell.cell_type == "markdown":
            if is_answer and index in graded:
                written.append(
                    Written(grade_id, graded[index].points, text, answered=text.strip() != cell_text(given).strip())
                )
            continue
        reaching = REACHING.search(text) if is_answer and cell.cell_type == "code" else None
        if reaching is not None:
            answer_notes.append(
                f"{master.labels[index]} reaches for the kit's answer keys or a folder of masters "
                f"({reaching.group(0)!r}); a graded learner's process cannot read them"
            )
        role = Role.ANSWER if is_answer else Role.TEST if is_test_cell(cell) else Role.CODE
        check = graded[index].check if role is Role.TEST else None
        defines, reads = master.names[index]
        if is_answer:  # what the learner binds, and what the master's answer binds (the tests read those)
            learner_defines, reads = cell_names(text)
            defines = defines | learner_defines
        if isinstance(check, CheckCall):
            defines, reads = frozenset(), frozenset(check.answers)
        steps.append(PlannedCell(index, grade_id, role, text, defines, reads, graded.get(index)))
    steps, kept = _keep_added(notebook["cells"], ids, master_ids, steps, stubs)
    stray -= kept
    reordered = order != [grade_id for grade_id in master_ids if grade_id in mine]
    restored = _restored(changed, reordered, kept, stray, counts, stubs, dict(zip(master_ids, master.labels)))
    return Plan(
        lab=master.lab,
        steps=tuple(steps),
        written=tuple(written),
        restored=tuple(restored),
        notes=(*notes, *answer_notes),
    )
