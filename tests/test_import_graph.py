"""No import circles inside the package: a layer below never imports a layer above.

The graph is read from the source with `ast`, not by importing: every `import` counts,
function-local ones included (a circle hidden inside a function is still a circle; it only
moves the failure to run time). Imports under `if TYPE_CHECKING:` are left out: they never
run. An edge goes to the module named (`from shopops_lab.store import open_store` -> the
package `shopops_lab.store`; `from shopops_lab import clock` -> the module
`shopops_lab.clock`), not to the packages Python also initialises on the way.

KNOWN_CIRCLES is the allow-list of circles still to break, one entry per strongly connected
set of modules: empty now (issue 20 broke the last three), and it stays empty: a new circle
fails the first test.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "shopops_lab"

KNOWN_CIRCLES: frozenset[frozenset[str]] = frozenset()


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run, skipping `if TYPE_CHECKING:` bodies (not their else)."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))
    return found


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The absolute module a (possibly relative) `from ... import` names."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_in(source: str, importer: str, is_package: bool, modules: set[str]) -> set[str]:
    """The package's modules that `source` (the text of module `importer`) imports."""
    targets: set[str] = set()
    for node in _runtime_imports(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        named = _absolute(node, importer, is_package)
        for alias in node.names:
            submodule = f"{named}.{alias.name}"
            targets.add(submodule if submodule in modules else named)
    return {target for target in targets if target in modules and target != importer}


def import_graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(path) for path in paths}
    return {
        module_name(path): imports_in(
            path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py", modules
        )
        for path in paths
    }


def circles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected sets of two or more modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: set[frozenset[str]] = set()
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.add(member)
                        if member == node:
                            break
                    if len(members) > 1:
                        found.add(frozenset(members))
            elif step not in index:
                index[step] = low[step] = len(index)
                stack.append(step)
                on_stack.add(step)
                work.append((step, iter(sorted(graph[step]))))
            elif step in on_stack:
                low[node] = min(low[node], index[step])
    return found


def _describe(circle: frozenset[str], graph: dict[str, set[str]]) -> str:
    edges = sorted(f"{a} -> {b}" for a in circle for b in graph[a] if b in circle)
    return "{" + ", ".join(sorted(circle)) + "}: " + "; ".join(edges)


def test_no_new_import_circle() -> None:
    graph = import_graph()
    new = circles(graph) - KNOWN_CIRCLES
    assert not new, "new import circle(s); break them (the layer below must not import the layer above):\n" + (
        "\n".join(_describe(circle, graph) for circle in sorted(new, key=sorted))
    )


def test_every_known_circle_is_still_there() -> None:
    """A broken circle leaves the allow-list, so it cannot come back unnoticed."""
    gone = KNOWN_CIRCLES - circles(import_graph())
    assert not gone, f"these circles are broken: remove them from KNOWN_CIRCLES: {sorted(map(sorted, gone))}"


def test_the_finder_sees_a_circle_closed_inside_a_function() -> None:
    """The finder itself: an import inside a function counts, a TYPE_CHECKING-only import and
    a one-way import make no circle, a relative import resolves."""
    modules = {"shopops_lab.a", "shopops_lab.b", "shopops_lab.c", "shopops_lab.store", "shopops_lab.store.base"}
    sources = {
        "shopops_lab.a": "from shopops_lab.store import base\n",
        "shopops_lab.b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from shopops_lab import a\n",
        "shopops_lab.c": "import shopops_lab.a\n",
        "shopops_lab.store": "from .base import Store\n",
        "shopops_lab.store.base": "def later():\n    from ..a import x\n",
    }
    packages = {"shopops_lab.store"}
    graph = {name: imports_in(source, name, name in packages, modules) for name, source in sources.items()}
    assert graph == {
        "shopops_lab.a": {"shopops_lab.store.base"},
        "shopops_lab.b": set(),
        "shopops_lab.c": {"shopops_lab.a"},
        "shopops_lab.store": {"shopops_lab.store.base"},
        "shopops_lab.store.base": {"shopops_lab.a"},
    }
    assert circles(graph) == {frozenset({"shopops_lab.a", "shopops_lab.store.base"})}
