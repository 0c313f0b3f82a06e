"""What a lab imports, the package declares: `pip install <kit>` alone runs every lab, and
requirements.txt (the learner's full set-up) repeats the kit's ranges exactly."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import nbformat
import pytest

from shopops_lab.course.metadata import cell_text
from shopops_lab.course.source import parse_python

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
# Imported only behind a check that says how to get them: the doctor's probes (jupyter_client
# comes with a Jupyter install, packaging with pip) and build-notebooks --execute (its extra).
# Imports only some commands make: "doctor"/"tests" need nothing declared; an extra's name
# means the module must come from that extra.
OPTIONAL = {
    "jupyter_client": "doctor",
    "packaging": "doctor",
    "nbclient": "execute",
    "pytest": "tests",
    "jupyter_core": "lite",
    "psycopg": "postgres",
}
IN_PYODIDE = {"js", "pyodide"}  # Pyodide's own modules, imported only in the browser (progress's IndexedDB)


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _spec(requirement: str) -> str:
    return requirement[len(re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]) :].replace(" ", "")


def _requirements_txt() -> dict[str, str]:
    found = {}
    for raw in (ROOT / "requirements.txt").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            found[_name(line)] = _spec(line)
    return found


def test_requirements_txt_repeats_every_dependency_of_the_kit_with_the_same_range() -> None:
    declared = {_name(r): _spec(r) for r in PROJECT["dependencies"]}
    assert declared, "pyproject.toml declares no dependencies: `pip install <kit>` could not run the labs"
    listed = _requirements_txt()
    assert {name: listed.get(name) for name in declared} == declared


def test_the_lab_extra_repeats_requirements_txt_ranges_for_jupyterlab_and_the_kernel() -> None:
    """`shopops-lab[lab]`, the hub's install, gives a server what `make lab` gives, in the same ranges."""
    lab = {_name(r): _spec(r) for r in PROJECT["optional-dependencies"]["lab"]}
    assert set(lab) == {"jupyterlab", "ipykernel"}
    listed = _requirements_txt()
    assert {name: listed.get(name) for name in lab} == lab


def _imports(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def _third_party(modules: set[str]) -> set[str]:
    return {m for m in modules if m not in sys.stdlib_module_names and m != "shopops_lab"}


def _labs() -> set[str]:
    found = set()
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                found |= _imports(parse_python(cell_text(cell)))
    return _third_party(found)


def _kit() -> set[str]:
    found = set()
    for path in (ROOT / "shopops_lab").rglob("*.py"):
        found |= _imports(ast.parse(path.read_text(encoding="utf-8")))
    return _third_party(found)


@pytest.mark.parametrize("where, modules", [("the labs", _labs()), ("the kit", _kit())])
def test_every_third_party_import_is_declared(where: str, modules: set[str]) -> None:
    declared = {_name(r) for r in PROJECT["dependencies"]}
    extras = {name: {_name(r) for r in extra} for name, extra in PROJECT.get("optional-dependencies", {}).items()}
    owners = importlib.metadata.packages_distributions()
    undeclared = {}
    for module in sorted(modules - IN_PYODIDE):
        distributions = {d.lower().replace("_", "-") for d in owners.get(module, [module])}
        if distributions & declared:
            continue
        if module in OPTIONAL and (OPTIONAL[module] not in extras or distributions & extras[OPTIONAL[module]]):
            continue
        undeclared[module] = sorted(distributions)
    assert undeclared == {}, f"{where} import these, but pyproject.toml does not declare them"


def test_the_scan_sees_the_imports_we_know_of() -> None:
    cell = "from IPython.display import SVG\nimport shopops_lab.checks\nimport json"  # as a lab's cell may
    assert _third_party(_imports(parse_python(cell))) == {"IPython"}
    assert {"matplotlib", "ipywidgets", "graphviz", "nbformat", "jsonschema"} <= _kit()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The kit's wheel, built from another folder as an admin would (`pip wheel <checkout>`)."""
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check", "-w", out, ROOT],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if built.returncode != 0 and not os.environ.get("CI"):  # the build fetches setuptools the first time
        pytest.skip(f"pip could not build the kit's wheel here (no PyPI?): {built.stderr.strip()[-300:]}")
    assert built.returncode == 0, built.stderr
    (path,) = out.glob("shopops_lab-*.whl")
    return path


def test_the_wheel_carries_every_student_notebook_and_no_master(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        carried = {n.rsplit("/", 1)[-1]: archive.read(n) for n in names if n.endswith(".ipynb")}
    students = {p.name: p.read_bytes() for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert carried == students  # every student notebook, byte for byte, and no other notebook
    assert all(n.startswith("shopops_lab/course/notebooks/") for n in names if n.endswith(".ipynb"))
    masters = {p.read_bytes() for p in (ROOT / "solutions").glob("*.ipynb")}
    assert not masters & set(carried.values()) and not any("solutions/" in n for n in names)
    assert not any(b"### BEGIN SOLUTION" in data for data in carried.values())


def test_the_installed_wheel_hands_out_its_own_notebooks_from_any_folder(wheel: Path, tmp_path: Path) -> None:
    """Installed (not from this checkout), `shopops-lab notebooks` copies what the wheel carries."""
    target, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check"]
    subprocess.run([*pip, "--target", target, wheel], cwd=elsewhere, check=True, capture_output=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(target)}
    code = "import sys, shopops_lab.cli as c, shopops_lab.course.handout as h; print(h.PACKAGED); sys.exit(c.main())"
    done = subprocess.run(
        [sys.executable, "-c", code, "notebooks", "dest"], cwd=elsewhere, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == str(target / "shopops_lab" / "course" / "notebooks")
    copied = {p.name: p.read_bytes() for p in (elsewhere / "dest").iterdir()}
    assert copied == {p.name: p.read_bytes() for p in (ROOT / "notebooks").glob("*.ipynb")}
