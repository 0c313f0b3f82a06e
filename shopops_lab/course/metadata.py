"""Is this notebook something nbgrader 0.9.6 and our build will handle as intended?

Two layers: `nbgrader_v3.schema.json` says what one cell's `metadata.nbgrader` may hold,
and `validate_notebook` adds what a schema cannot see: the cell type, the other cells,
the notebook's own metadata and the reserved marker words. Every rule that nbgrader's
MetadataValidatorV3 enforces is here, stricter where a loose reading would let a master
reach students with a leaked answer, a cell that cannot be graded, or points that never
count. Each finding is a Problem naming the cell and the field, and saying how to fix it.
"""

from __future__ import annotations

import copy
import json
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

from shopops_lab.course import source as src

SCHEMA_FILE = "nbgrader_v3.schema.json"
RAISES_EXCEPTION = "raises-exception"
LAB_ID = re.compile(r"^\d{2}$")
NOTEBOOK_NAME = re.compile(r"^(\d{2})_.+\.ipynb$")
KIT_NOTEBOOK_KEYS = {"lab", "version", "title"}
KIT_CELL_KEYS = {"hints", "needs_answer", "rubric"}
INSTRUCTOR_KEYS = ("rubric",)  # cell-level kit keys for the grader only: the build drops them

Role = Literal["master", "student"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a notebook. `cell` is the 0-based index nbval and nbclient
    report (None for the notebook itself); `field` is the JSON path inside it."""

    notebook: str
    cell: int | None
    field: str
    message: str
    fix: str

    def __str__(self) -> str:
        where = "notebook" if self.cell is None else f"cell {self.cell}"
        return f"{self.notebook}, {where}, {self.field}: {self.message}. Fix: {self.fix}."


@cache
def load_schema() -> dict[str, Any]:
    """The cell-metadata schema shipped with the package (parsed once)."""
    text = resources.files("shopops_lab.course").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


@cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load_schema())


_MISSING_FIX = {
    "schema_version": 'add "schema_version": 3',
    "grade": 'add "grade": false (true only for test cells and written answers)',
    "grade_id": "add a \"grade_id\" made of letters, digits, '_' and '-', unique in the notebook",
    "locked": 'add "locked": true for read-only and test cells, false for answer cells',
    "solution": 'add "solution": false (true only for answer cells)',
    "points": 'add "points": N (a number >= 0) to every graded cell',
}
_NOT_NBGRADER = {
    "checksum": "only nbgrader's own release copies carry checksum; a master must not",
    "cell_type": "only nbgrader's own release copies carry cell_type; a master must not",
}


RELEASE_KEYS = ("checksum", "cell_type")  # what nbgrader's release adds, and the kit's student copies carry


def nbgrader_checksum(cell: Any) -> str:
    """The checksum nbgrader 0.9.6 gives a cell (`nbgrader.utils.compute_checksum`, read from
    its source): MD5 of the source, the cell type, whether it is graded, a solution and locked
    (nbgrader's own rules for each), its grade_id and, for a graded cell, its points as a float.
    nbgrader compares it when it validates a notebook and when it grades an unanswered one."""
    import hashlib

    meta = cell["metadata"]["nbgrader"]
    grade, solution = bool(meta.get("grade", False)), bool(meta.get("solution", False))
    locked = False if solution else True if grade else bool(meta.get("locked", False))
    digest = hashlib.md5(usedforsecurity=False)
    for part in (cell_text(cell), cell["cell_type"], str(grade), str(solution), str(locked), meta["grade_id"]):
        digest.update(part.encode("utf-8"))
    if grade:
        digest.update(str(float(meta["points"])).encode("utf-8"))
    return digest.hexdigest()


def _release_rules(cell: Any, meta: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """A student copy's checksum and cell_type: nbgrader's, for the cell as it is."""
    if meta.get("cell_type") != cell.get("cell_type"):
        yield (
            "metadata.nbgrader.cell_type",
            f"is {meta.get('cell_type')!r}, not the cell's type {cell.get('cell_type')!r}",
            "rebuild the student notebooks (shopops-lab build-notebooks)",
        )
    elif meta.get("checksum") != nbgrader_checksum(cell):
        yield (
            "metadata.nbgrader.checksum",
            "is not nbgrader's checksum of the cell (its source or metadata changed after the build)",
            "rebuild the student notebooks (shopops-lab build-notebooks)",
        )


def check_cell_metadata(meta: Any) -> list[tuple[str, str, str]]:
    """Schema findings for one `metadata.nbgrader` value, as (field, message, fix)."""
    findings: list[tuple[str, str, str]] = []
    properties = load_schema()["properties"]
    errors = sorted(_validator().iter_errors(meta), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    for error in errors:
        path = ".".join(str(part) for part in error.absolute_path)
        field = "metadata.nbgrader" + (f".{path}" if path else "")
        kind = error.validator
        if kind == "type" and not path:
            findings.append((field, f"is {type(meta).__name__}, not an object", "make metadata.nbgrader a JSON object"))
        elif kind == "required":
            for key in error.validator_value:
                if key not in error.instance:
                    why = "graded and task cells need points" if key == "points" else f"{key} is required"
                    findings.append((f"{field}.{key}", why, _MISSING_FIX[key]))
        elif kind == "additionalProperties":
            for key in sorted(set(error.instance) - set(properties)):
                why = _NOT_NBGRADER.get(key, f"{key!r} is not an nbgrader v3 key")
                findings.append((f"{field}.{key}", why, f"delete {key!r}"))
        elif kind == "not":
            findings.append(
                (
                    f"{field}.points",
                    "points on a cell that is neither graded nor a task; nbgrader never counts them",
                    "delete points, or make the cell graded (grade: true)",
                )
            )
        elif kind == "const":
            findings.append(
                (field, f"is {error.instance!r}; nbgrader 0.9.6 reads only schema version 3", "set it to 3")
            )
        elif kind == "type":
            wanted = {"boolean": "true or false", "string": "a string", "number": "a number"}.get(
                error.validator_value, error.validator_value
            )
            findings.append((field, f"is {error.instance!r}, not {wanted}", f"write {wanted}"))
        elif kind == "pattern":
            findings.append(
                (
                    field,
                    f"{error.instance!r} has characters other than letters, digits, '_' and '-'",
                    "use e.g. " + repr(re.sub(r"[^A-Za-z0-9_\-]+", "-", str(error.instance)).strip("-") or "answer-1"),
                )
            )
        elif kind == "minLength":
            findings.append((field, "is empty (nbgrader: 'grade_id is empty')", "give the cell a non-empty grade_id"))
        elif kind == "minimum":
            findings.append((field, f"is {error.instance!r}, below 0", "use a number >= 0"))
        else:
            findings.append((field, error.message, "follow nbgrader_v3.schema.json"))
    return findings


def _flag(meta: dict[str, Any], key: str) -> bool:
    return meta.get(key) is True


def cell_text(cell: Any) -> str:
    """A cell's source as one string (notebooks may store it as a list of lines)."""
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else text


def is_test_cell(cell: Any) -> bool:
    """An autograded test cell: code, graded, not an answer."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and _flag(meta, "grade") and not _flag(meta, "solution")


def _cell_rules(cell: Any, meta: dict[str, Any], role: Role) -> Iterator[tuple[str, str, str]]:
    """nbgrader's cross-field rules (v3.py validate_cell, the create-assignment editor) and
    the kit's: what each kind of cell must look like."""
    kind = cell.get("cell_type")
    grade, solution, locked, task = (_flag(meta, k) for k in ("grade", "solution", "locked", "task"))
    base = "metadata.nbgrader"
    if task:
        if kind != "markdown":
            yield (
                f"{base}.task",
                f"a task cell must be markdown, this is {kind}",
                "make it a markdown cell or drop task",
            )
        if grade or solution:
            yield (
                f"{base}.task",
                "a task cell is neither graded nor a solution (nbgrader's editor)",
                "set grade: false and solution: false",
            )
    elif kind == "markdown" and grade and not solution:
        yield (
            f"{base}.solution",
            "a graded markdown cell must also be a solution cell "
            "(nbgrader: 'Markdown grade cell is not marked as a solution cell')",
            "set solution: true and locked: false (cells.written)",
        )
    elif kind == "markdown" and solution and not grade:
        yield (
            f"{base}.grade",
            "a markdown solution cell must also be graded "
            "(nbgrader: 'Markdown solution cell is not marked as a grade cell')",
            "set grade: true and points (cells.written)",
        )
    if kind == "raw" and (grade or solution):
        yield f"{base}.grade", "a raw cell can only be read-only", "make it markdown or code"
    if solution and meta.get("locked") is not False:
        yield (
            f"{base}.locked",
            "an answer cell must be unlocked, or the student cannot write the answer",
            "set locked: false",
        )
    if not solution and meta.get("locked") is not True:
        yield (
            f"{base}.locked",
            "a read-only or test cell must be locked, so nbgrader restores its source before grading",
            "set locked: true",
        )
    if role == "student":
        wanted = {"editable": solution, "deletable": False}
        for key, value in wanted.items():
            if cell.get("metadata", {}).get(key, True) != value:
                yield (
                    f"metadata.{key}",
                    f"should be {str(value).lower()} in a student notebook",
                    "regenerate it with shopops-lab build-notebooks",
                )


def _kit_cell_rules(cell: Any) -> Iterator[tuple[str, str, str]]:
    """Per-cell kit metadata: `metadata.shopops_lab` may hold hints and needs_answer."""
    kit = cell.get("metadata", {}).get("shopops_lab")
    if kit is None:
        return
    if not isinstance(kit, dict):
        yield "metadata.shopops_lab", "is not an object", 'write {"hints": [...]} or remove it'
        return
    for key in sorted(set(kit) - KIT_CELL_KEYS):
        yield f"metadata.shopops_lab.{key}", f"{key!r} is not a cell-level kit key", f"use only {sorted(KIT_CELL_KEYS)}"
    hints = kit.get("hints")
    if "hints" in kit and not (isinstance(hints, list) and all(isinstance(h, str) and h.strip() for h in hints)):
        yield (
            "metadata.shopops_lab.hints",
            "must be a list of non-empty strings",
            'write hints as ["first hint", "second hint"]',
        )
    if "rubric" in kit:
        yield from _rubric_rules(cell, kit["rubric"])
    if "needs_answer" in kit:
        if not isinstance(kit["needs_answer"], bool):
            yield "metadata.shopops_lab.needs_answer", "must be true or false", "write true or false"
        elif cell.get("cell_type") != "code":
            yield (
                "metadata.shopops_lab.needs_answer",
                "only code cells run, so only they can need an answer",
                "remove it",
            )


def _rubric_rules(cell: Any, rubric: Any) -> Iterator[tuple[str, str, str]]:
    """A written answer's rubric: [{"points": n, "element": "..."}, ...], on a hand-graded
    markdown answer only, its points adding up to the cell's."""
    field = "metadata.shopops_lab.rubric"
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if not (cell.get("cell_type") == "markdown" and _flag(meta, "grade") and _flag(meta, "solution")):
        yield field, "only a hand-graded written answer has a rubric", "move it to the written answer's cell"
        return
    entries = rubric if isinstance(rubric, list) else None
    if not entries or not all(
        isinstance(entry, dict)
        and set(entry) == {"points", "element"}
        and isinstance(entry["points"], (int, float))
        and not isinstance(entry["points"], bool)
        and entry["points"] > 0
        and isinstance(entry["element"], str)
        and entry["element"].strip()
        for entry in entries
    ):
        yield (
            field,
            'must be a non-empty list of {"points": n > 0, "element": "..."}',
            'write [{"points": 1, "element": "names the unknown outcome"}, ...]',
        )
        return
    total, points = sum(entry["points"] for entry in entries), meta.get("points")
    if isinstance(points, (int, float)) and abs(total - points) > 1e-9:
        yield (
            field,
            f"adds up to {total:g} points, the cell is worth {points:g}",
            "make the elements add up to the cell's points",
        )


def _source_rules(cell: Any, meta: dict[str, Any], role: Role) -> Iterator[tuple[str, str, str]]:
    """Reserved words, marker pairing, and (for code) that the cell is Python nbgrader can score."""
    text = cell_text(cell)
    solution = _flag(meta, "solution")
    test = is_test_cell(cell)
    if role == "student":
        for number, line in enumerate(text.split("\n"), start=1):
            word = src.reserved_word_in(line)
            if word is not None:
                yield (
                    "source",
                    f"line {number} still contains {word!r}: "
                    "a student copy must not show markers, answers or hidden tests",
                    "regenerate it with shopops-lab build-notebooks",
                )
    else:
        for issue in src.scan_markers(text, allow_solution=solution, allow_hidden=test):
            yield "source", issue.message, issue.fix
    if cell.get("cell_type") != "code":
        return
    try:
        tree = src.parse_python(text)
    except SyntaxError as exc:
        yield (
            "source",
            f"is not valid Python (line {exc.lineno}: {exc.msg})",
            "fix the syntax; every code cell must run",
        )
        return
    if test:
        value = src.trailing_expression(tree)
        if value is not None:
            yield (
                "source",
                f"ends with the bare expression {ast_text(value)!r}; nbgrader reads a test cell's displayed value "
                "as partial credit (0 scores nothing, more than points crashes autograde)",
                "end the test with an assert, or assign the value (_ = check())",
            )


def ast_text(node: Any) -> str:
    """Source text of an AST node, shortened for a message."""
    import ast

    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."


def _notebook_rules(nb: Any, name: str) -> Iterator[tuple[str, str, str]]:
    """Notebook-level rules: nbformat 4, kernel python3, and the kit's lab metadata."""
    if nb.get("nbformat") != 4:
        yield (
            "nbformat",
            f"is {nb.get('nbformat')!r}; the kit builds nbformat 4 notebooks",
            "save it as nbformat 4 (JupyterLab does)",
        )
        return
    import nbformat

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            nbformat.validate(copy.deepcopy(nb))
        except nbformat.ValidationError as exc:
            yield (
                "nbformat",
                f"does not follow the nbformat schema: {exc.message}",
                "open and save it in JupyterLab, or rebuild it with shopops_lab.course.cells",
            )
    metadata = nb.get("metadata", {})
    kernelspec = metadata.get("kernelspec", {})
    if kernelspec.get("name") != "python3":
        yield (
            "metadata.kernelspec.name",
            f"is {kernelspec.get('name')!r}; nbgrader, nbval and the build run the kernel named here",
            'set it to "python3"',
        )
    if kernelspec.get("language", "python") != "python":
        yield (
            "metadata.kernelspec.language",
            f"is {kernelspec.get('language')!r}; nbgrader picks its stub by language",
            'set it to "python"',
        )
    yield from _kit_notebook_rules(metadata.get("shopops_lab"), name)


def _kit_notebook_rules(kit: Any, name: str) -> Iterator[tuple[str, str, str]]:
    """The kit's own notebook metadata: which lab (agreeing with the file name), which version."""
    if not isinstance(kit, dict):
        yield "metadata.shopops_lab", "is missing", 'add {"lab": "01", "version": "1"} (cells.notebook does)'
        return
    for key in sorted(set(kit) - KIT_NOTEBOOK_KEYS):
        yield (
            f"metadata.shopops_lab.{key}",
            f"{key!r} is not a notebook-level kit key",
            f"use only {sorted(KIT_NOTEBOOK_KEYS)}",
        )
    lab = kit.get("lab")
    if not (isinstance(lab, str) and LAB_ID.match(lab)):
        yield "metadata.shopops_lab.lab", f"is {lab!r}, not a two-digit lab id", 'write it like "01"'
    else:
        named = NOTEBOOK_NAME.match(name.replace("\\", "/").rsplit("/", 1)[-1])
        if named and named.group(1) != lab:
            yield (
                "metadata.shopops_lab.lab",
                f"is {lab!r} but the file name says {named.group(1)!r}",
                "make the lab id and the file name's NN_ prefix agree",
            )
    version = kit.get("version")
    if not (isinstance(version, str) and version.strip()):
        yield "metadata.shopops_lab.version", f"is {version!r}, not a non-empty string", 'write it like "1" or "2026.1"'
    if "title" in kit and not isinstance(kit["title"], str):
        yield "metadata.shopops_lab.title", "is not a string", "write the lab's title as a string"


def validate_notebook(nb: Any, name: str, *, role: Role = "master") -> list[Problem]:
    """Every problem in `nb` (a master by default; role="student" for a generated copy),
    in cell order. An empty list means nbgrader and the build will treat it as intended."""
    if role not in ("master", "student"):
        raise ValueError(f"role must be 'master' or 'student', not {role!r}")
    problems = [Problem(name, None, field, message, fix) for field, message, fix in _notebook_rules(nb, name)]
    seen: dict[str, int] = {}
    for index, cell in enumerate(nb.get("cells", [])):
        found: list[tuple[str, str, str]] = []
        cell_meta = cell.get("metadata", {})
        meta = cell_meta.get("nbgrader")
        if nb.get("nbformat_minor", 0) >= 5 and not cell.get("id"):
            found.append(
                (
                    "id",
                    "is missing; nbformat 4.5 needs a cell id",
                    "give the cell an id (cells.notebook uses its grade_id)",
                )
            )
        if meta is None:
            found.append(
                (
                    "metadata.nbgrader",
                    "is missing; every kit cell is read-only, an answer or a test",
                    "build the cell with shopops_lab.course.cells (md, code, answer, written, test)",
                )
            )
            meta = {}
        else:
            if role == "student" and isinstance(meta, dict) and any(key in meta for key in RELEASE_KEYS):
                found.extend(_release_rules(cell, meta))
                meta = {key: value for key, value in meta.items() if key not in RELEASE_KEYS}
            found.extend(check_cell_metadata(meta))
            if isinstance(meta, dict):
                found.extend(_cell_rules(cell, meta, role))
                grade_id = meta.get("grade_id")
                if isinstance(grade_id, str) and grade_id:
                    if grade_id in seen:
                        found.append(
                            (
                                "metadata.nbgrader.grade_id",
                                f"{grade_id!r} is also the grade_id of cell {seen[grade_id]} "
                                "(nbgrader: 'Duplicate grade id')",
                                "give every cell its own grade_id",
                            )
                        )
                    else:
                        seen[grade_id] = index
            else:
                meta = {}
        found.extend(_kit_cell_rules(cell))
        kit = cell_meta.get("shopops_lab")
        if role == "student" and isinstance(kit, dict) and any(key in kit for key in INSTRUCTOR_KEYS):
            found.append(
                (
                    "metadata.shopops_lab.rubric",
                    "is for the grader and must not reach students",
                    "regenerate it with shopops-lab build-notebooks",
                )
            )
        if role == "master" and RAISES_EXCEPTION in cell_meta.get("tags", []):
            found.append(
                (
                    "metadata.tags",
                    f"a master must not carry the {RAISES_EXCEPTION!r} tag: "
                    "it would hide real errors when nbval runs the master",
                    "remove the tag; build-notebooks adds it to the student copy where needed",
                )
            )
        found.extend(_source_rules(cell, meta, role))
        problems.extend(Problem(name, index, field, message, fix) for field, message, fix in found)
    return problems
