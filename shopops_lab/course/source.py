"""Reading cell sources the way nbgrader does: marker lines, regions, and Python names.

nbgrader 0.9.6 finds its delimiters with `"BEGIN SOLUTION" in line` (substring,
case-sensitive, anywhere in the line), so the words themselves are reserved: in prose or
a string they would silently cut the cell. We accept them only as the exact marker lines
below and refuse them anywhere else.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeGuard

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
MARKER_LINES = (BEGIN_SOLUTION, END_SOLUTION, BEGIN_HIDDEN, END_HIDDEN)

# Every delimiter nbgrader 0.9.6 searches for by substring (ClearSolutions,
# ClearHiddenTests, ClearMarkScheme, InstantiateTests). The kit uses the first four as
# marker lines only; mark schemes and autotests it does not use at all.
RESERVED_WORDS = (
    "BEGIN SOLUTION",
    "END SOLUTION",
    "BEGIN HIDDEN TESTS",
    "END HIDDEN TESTS",
    "BEGIN MARK SCHEME",
    "END MARK SCHEME",
    "AUTOTEST",
)

CODE_STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")
TEXT_STUB = ("YOUR ANSWER HERE",)


@dataclass(frozen=True)
class MarkerIssue:
    """One misuse of a reserved word, by line number (1-based) within the cell."""

    line: int
    message: str
    fix: str


def marker_of(line: str) -> str | None:
    """The exact marker this line is (any indentation, nothing else on it), or None."""
    stripped = line.strip()
    return stripped if stripped in MARKER_LINES else None


def reserved_word_in(line: str) -> str | None:
    """The first reserved word nbgrader would react to in this line, or None."""
    for word in RESERVED_WORDS:
        if word in line:
            return word
    return None


def scan_markers(source: str, *, allow_solution: bool, allow_hidden: bool) -> Iterator[MarkerIssue]:
    """Misplaced, malformed, unpaired or nested markers: what would make nbgrader cut the
    wrong lines or fail half-way through generate_assignment."""
    open_marker: str | None = None
    open_line = 0
    for number, line in enumerate(source.split("\n"), start=1):
        marker = marker_of(line)
        misplaced = _misplaced(number, line, marker, allow_solution=allow_solution, allow_hidden=allow_hidden)
        if misplaced is not None:
            yield misplaced
        elif marker is None:
            continue
        elif marker in (BEGIN_SOLUTION, BEGIN_HIDDEN):
            if open_marker is not None:
                yield MarkerIssue(
                    number,
                    f"line {number} opens {marker!r} while {open_marker!r} from line {open_line} is still open",
                    "close each region before opening the next; regions do not nest",
                )
                continue
            open_marker, open_line = marker, number
        else:
            expected = END_SOLUTION if open_marker == BEGIN_SOLUTION else END_HIDDEN
            if open_marker is None or marker != expected:
                yield MarkerIssue(
                    number,
                    f"line {number} is {marker!r} with no matching open region",
                    "pair every END marker with the BEGIN marker of the same kind above it",
                )
                continue
            open_marker = None
    if open_marker is not None:
        closing = END_SOLUTION if open_marker == BEGIN_SOLUTION else END_HIDDEN
        yield MarkerIssue(
            open_line,
            f"line {open_line} opens {open_marker!r} and nothing closes it",
            f"add a {closing!r} line after the region",
        )


def _misplaced(
    number: int, line: str, marker: str | None, *, allow_solution: bool, allow_hidden: bool
) -> MarkerIssue | None:
    """A reserved word where nbgrader would cut mid-line, or a marker in the wrong kind of cell."""
    if marker is None:
        word = reserved_word_in(line)
        if word is None:
            return None
        return MarkerIssue(
            number,
            f"line {number} contains {word!r} outside a marker line; nbgrader matches "
            f"it anywhere in a line and would cut the cell there",
            f"reword it (e.g. 'start of the solution'), or write the marker alone on "
            f"its line as {BEGIN_SOLUTION!r} / {END_SOLUTION!r} / {BEGIN_HIDDEN!r} / "
            f"{END_HIDDEN!r}",
        )
    if marker in (BEGIN_SOLUTION, END_SOLUTION):
        if allow_solution:
            return None
        return MarkerIssue(
            number,
            f"line {number} is {marker!r} but this is not an answer cell",
            "move the solution into an answer cell (cells.answer / cells.written), or mark this cell solution: true",
        )
    if allow_hidden:
        return None
    return MarkerIssue(
        number,
        f"line {number} is {marker!r} but hidden tests belong only in test cells",
        "move the hidden tests into a test cell (cells.test: grade: true, solution: false)",
    )


def replace_regions(source: str, begin: str, end: str, stub: tuple[str, ...]) -> tuple[str, bool]:
    """nbgrader's ClearSolutions/ClearHiddenTests line walk: each region, marker lines
    included, becomes `stub` at the BEGIN line's indentation. Returns (source, replaced?)."""
    out: list[str] = []
    inside = False
    replaced = False
    for line in source.split("\n"):
        marker = marker_of(line)
        if marker == begin:
            inside = True
            replaced = True
            indent = line[: len(line) - len(line.lstrip())]
            out.extend(indent + stub_line for stub_line in stub)
        elif marker == end:
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out), replaced


def parse_python(source: str) -> ast.Module:
    """Parse a code cell, turning IPython syntax (%magic, !shell) into plain calls first.
    Raises SyntaxError when the cell is not Python even then."""
    try:
        return ast.parse(source)
    except SyntaxError:
        pass
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        lines = []
        for line in source.split("\n"):
            stripped = line.lstrip()
            if stripped.startswith(("%", "!")):
                line = line[: len(line) - len(stripped)] + "pass  # " + stripped
            lines.append(line)
        return ast.parse("\n".join(lines))
    return ast.parse(TransformerManager().transform_cell(source))


def _target_names(target: ast.AST) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _target_names(element)
    elif isinstance(target, ast.Starred):
        yield from _target_names(target.value)


def defined_names(tree: ast.Module) -> set[str]:
    """Names a cell binds at module level: def/class, assignment and loop/with targets,
    imports, walrus. Function and class bodies are not entered: their locals stay local."""
    names: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
                continue
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    names.update(_target_names(target))
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                names.update(_target_names(node.target))
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                names.update(_target_names(node.target))
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        names.update(_target_names(item.optional_vars))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if alias.name != "*":
                        names.add((alias.asname or alias.name).split(".")[0])
            for child in ast.walk(node):
                if isinstance(child, ast.NamedExpr):
                    names.update(_target_names(child.target))
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if isinstance(block, list):
                    visit(block)
            for handler in getattr(node, "handlers", []):
                if handler.name:
                    names.add(handler.name)
                visit(handler.body)
            for case in getattr(node, "cases", []):
                visit(case.body)

    visit(tree.body)
    return names


def referenced_names(tree: ast.Module) -> set[str]:
    """Every plain name the cell reads anywhere, function bodies included: calling a
    function that calls an unanswered one fails just the same. A name only assigned to
    is not read (`x = 10` does not need the old x)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AugAssign):  # `x += 1` reads x first
            names.update(_target_names(node.target))
    return names


NEVER_RAISES = frozenset({"check", "hint", "answered"})
"""The kit's Exercise.check, hint and answered print a verdict, a hint or one friendly line
and never raise, whatever answer they are given: a cell that only passes an unanswered
function to them runs."""


def _behind_answered(node: ast.AST) -> TypeGuard[ast.If]:
    """`if labNN.exercise.answered(...):` - its body runs only once the answer is written."""
    test = getattr(node, "test", None)
    return (
        isinstance(node, ast.If)
        and isinstance(test, ast.Call)
        and isinstance(test.func, ast.Attribute)
        and test.func.attr == "answered"
    )


def names_read_outside_checks(tree: ast.Module) -> set[str]:
    """`referenced_names`, leaving out names read only as arguments of a `.check(...)`,
    `.hint(...)` or `.answered(...)` call (NEVER_RAISES), or inside the body of an
    `if ....answered(...):` guard: `lab01.exercise.check(send_followup)` runs fine while
    send_followup is still a stub, and so does a picture of it behind the guard."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in NEVER_RAISES:
            for argument in [*node.args, *(keyword.value for keyword in node.keywords)]:
                skipped.update(id(child) for child in ast.walk(argument))
        elif _behind_answered(node):
            for statement in node.body:
                skipped.update(id(child) for child in ast.walk(statement))
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AugAssign):
            names.update(_target_names(node.target))
    return names


# Compound statements whose bodies may not run: a binding inside one is not a sure one.
_MAY_NOT_RUN = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith, ast.Match)


def bound_behind_answered(tree: ast.Module) -> set[str]:
    """Names bound only inside `if ....answered(...):` bodies: in the pristine student copy
    they stay undefined, so a later cell reading them outside such a guard fails. A name the
    cell also binds unconditionally (`shown = None` before the guard) is defined either way."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if _behind_answered(node):
            names |= defined_names(ast.Module(body=node.body, type_ignores=[]))
    always = [statement for statement in tree.body if not isinstance(statement, _MAY_NOT_RUN)]
    return names - defined_names(ast.Module(body=always, type_ignores=[]))


def raises_when_run(tree: ast.Module) -> bool:
    """True when a `raise` statement runs as the cell runs (one outside any def or class),
    e.g. an answer stubbed at module level."""
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Raise):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))
    return False


SILENT_CALLS = frozenset({"print", "display"})  # they return None: nothing is displayed
# The kit's Exercise.grade/check/hint return None too, so `lab01.exercise.grade(answer)` may end a cell.
SILENT_METHODS = frozenset({"grade", "check", "hint"})


def trailing_expression(tree: ast.Module) -> ast.expr | None:
    """The cell's last statement if it is a bare expression that may display a value,
    i.e. anything but print(...)/display(...)/<exercise>.grade(...). nbgrader reads a test cell's displayed value
    as partial credit (utils.determine_grade): 0 scores nothing, more than the cell's
    points crashes autograde, so a stray trailing value silently changes the score."""
    if not tree.body:
        return None
    last = tree.body[-1]
    if not isinstance(last, ast.Expr):
        return None
    value = last.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in SILENT_CALLS:
        return None
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in SILENT_METHODS:
        return None
    return value
