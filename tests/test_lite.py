"""`shopops-lab lite build`: what the static JupyterLite site holds (test_browser.py runs it).

Offline, every file the kernel asks for is on the site, each wheel matches the sha256 its
lock gives (Pyodide refuses a mismatch and the kernel never starts), and nothing points at
another host. Online, Pyodide's own packages come from their CDN and the course's from the site.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path

import pytest

from shopops_lab.course import lite
from shopops_lab.course.errors import LiteBuildError
from shopops_lab.errors import BadArgumentError

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("0*.ipynb"))


def kernel_settings(site: Path) -> dict:
    config = json.loads((site / "jupyter-lite.json").read_text())["jupyter-config-data"]
    return config["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]


def site_lock(site: Path) -> dict:
    return json.loads((site / lite.LOCK).read_text())["packages"]


def test_the_offline_site_holds_the_notebooks_and_starts_its_kernel_from_its_own_files(offline_site):
    assert sorted(p.name for p in (offline_site / "files").glob("*.ipynb")) == NOTEBOOKS
    for name in NOTEBOOKS:  # the student notebooks, as they are
        assert (offline_site / "files" / name).read_bytes() == (ROOT / "notebooks" / name).read_bytes()
    settings = kernel_settings(offline_site)
    assert settings["disablePyPIFallback"] is True
    assert settings["pyodideUrl"] == "./static/pyodide/pyodide.mjs"
    assert settings["loadPyodideOptions"]["lockFileURL"] == f"./{lite.LOCK}"
    packages = settings["loadPyodideOptions"]["packages"]
    assert set(lite.CORE_PACKAGES) | {"shopops-lab", "ipywidgets"} <= set(packages) and "matplotlib" not in packages
    for name in ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip"):
        assert (offline_site / "static" / "pyodide" / name).is_file(), name


def test_every_offline_wheel_is_shipped_with_the_sha256_its_lock_names(offline_site):
    lock = site_lock(offline_site)
    needed, pending = set(), list(kernel_settings(offline_site)["loadPyodideOptions"]["packages"])
    while pending:  # everything the kernel loads as it starts, dependencies included
        name = pending.pop()
        name = re.sub(r"[-_.]+", "-", name).lower()
        if name not in needed:
            needed.add(name)
            pending.extend(lock[name]["depends"])
    assert {"ipython", "jedi", "parso", "traitlets", "micropip", "comm", "pyodide-kernel", "prompt-toolkit"} <= needed
    assert set(lock) == needed, "the lock lists only what the site ships"
    for name, entry in lock.items():
        wheel = offline_site / lite.WHEELS / entry["file_name"]
        assert "/" not in entry["file_name"] and wheel.is_file(), name
        assert hashlib.sha256(wheel.read_bytes()).hexdigest() == entry["sha256"], name
        assert entry["file_name"].endswith(("-py3-none-any.whl", "-py2.py3-none-any.whl")), name


def test_the_offline_site_names_no_other_host_where_the_kernel_looks(offline_site):
    for path in (offline_site / "jupyter-lite.json", offline_site / lite.LOCK):
        assert "http" not in path.read_text(), path
    assert "matplotlib" not in site_lock(offline_site)


def test_the_kits_wheel_is_the_installed_package_and_the_same_bytes_every_time(tmp_path):
    first = lite.kit_wheel(tmp_path)
    second_dir = tmp_path / "again"
    second_dir.mkdir()
    assert lite.kit_wheel(second_dir).read_bytes() == first.read_bytes()
    with zipfile.ZipFile(first) as wheel:
        names = wheel.namelist()
        assert "shopops_lab/__init__.py" in names and "shopops_lab/viz/sketch.py" in names
        assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
        record = wheel.read("shopops_lab-0.1.0.dist-info/RECORD").decode()
        assert "shopops_lab/cli.py,sha256=" in record
        assert b"Tag: py3-none-any" in wheel.read("shopops_lab-0.1.0.dist-info/WHEEL")
    sys.path.insert(0, str(first))
    try:  # a wheel is a zip Python can import from: the package inside is whole
        import importlib

        code = importlib.util.find_spec("shopops_lab.viz.boundaries")
        assert code is not None
    finally:
        sys.path.remove(str(first))


def test_the_online_lock_points_pyodides_packages_at_its_cdn_and_the_courses_at_the_site(offline_site, tmp_path):
    upstream = json.loads((offline_site / "static" / "pyodide" / "pyodide-lock.json").read_text())
    course = [
        p
        for p in (offline_site / lite.WHEELS).glob("*.whl")
        if p.name.startswith(("ipywidgets-", "jupyterlab_widgets-", "comm-", "widgetsnbextension-"))
    ]
    shipped = [lite.kit_wheel(tmp_path), *course]
    assert len(course) == 4
    lock = lite._lock(upstream, shipped, offline=False, version="314.0.6")["packages"]
    assert lock["matplotlib"]["file_name"].startswith("https://cdn.jsdelivr.net/pyodide/v314.0.6/full/matplotlib-")
    assert lock["matplotlib"]["sha256"] == upstream["packages"]["matplotlib"]["sha256"]
    assert lock["shopops-lab"]["file_name"] == shipped[0].name
    assert lock["ipython"]["file_name"].startswith("https://cdn.jsdelivr.net/")  # not shipped online
    assert lock["ipywidgets"]["depends"] == ["comm", "ipython", "traitlets", "widgetsnbextension", "jupyterlab-widgets"]
    with pytest.raises(LiteBuildError, match="ipywidgets"):  # the kit depends on it: a lock without it is refused
        lite._lock(upstream, shipped[:1], offline=True, version="314.0.6")


def test_bad_input_is_named_and_nothing_is_written(tmp_path, monkeypatch):
    out = tmp_path / "site"
    with pytest.raises(BadArgumentError, match="notebooks"):
        lite.build_site(out, notebooks_dir=tmp_path / "none")
    assert not out.exists()
    monkeypatch.setitem(sys.modules, "jupyterlite_core", None)
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "00_x.ipynb").write_text("{}")
    with pytest.raises(LiteBuildError, match="jupyterlite-core.*pip install"):
        lite.build_site(out, notebooks_dir=tmp_path / "nb")
    assert not out.exists()
    with pytest.raises(BadArgumentError, match="not a built JupyterLite site"):
        lite.serve(tmp_path)


def test_the_cli_parses_lite_build_and_serve():
    from shopops_lab.cli import build_parser

    args = build_parser().parse_args(["lite", "build", "--out", "site", "--offline"])
    assert (args.lite_action, args.out, args.offline, args.notebooks) == ("build", "site", True, "notebooks")
    args = build_parser().parse_args(["lite", "serve", "--dir", "site", "--port", "0"])
    assert (args.lite_action, args.dir, args.port) == ("serve", "site", 0)


def test_the_same_inputs_build_the_same_site(offline_site, tmp_path):
    again = tmp_path / "again"
    lite.build_site(again, offline=True, notebooks_dir=ROOT / "notebooks")

    def files(site):
        return {
            p.relative_to(site).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(site.rglob("*"))
            if p.is_file()
        }

    assert files(again) == files(offline_site)


def test_the_front_page_opens_each_lab_alone_and_in_jupyterlab_in_a_workspace_of_its_own(offline_site):
    page = (offline_site / "index.html").read_text(encoding="utf-8")
    assert "config-utils.js" not in page  # JupyterLite's redirect to lab/ is gone
    assert 'id="jupyter-config-data"' in page  # the apps read their parent page's config script
    assert 'name="viewport" content="width=device-width' in page
    singles = re.findall(r'class="lab" href="notebooks/index.html\?path=([^"]+)"', page)
    assert singles == NOTEBOOKS
    in_lab = re.findall(r'href="lab/index.html\?path=([^"&]+)&amp;workspace=([^"&]+)"', page)
    assert in_lab == [(name, name.removesuffix(".ipynb")) for name in NOTEBOOKS]  # each lab its own workspace
    assert "Lab 04 · Fencing tokens" in page  # titles, not file names
    overrides = json.loads((offline_site / "overrides.json").read_text())
    assert overrides["@jupyterlab/notebook-extension:tracker"]["kernelShutdown"] is True


def test_the_kernel_is_fetched_into_the_cache_and_never_installed_beside_jupyterlab(offline_site):
    """Its lab extension, installed here, would be loaded by the learner's JupyterLab and fail."""
    import importlib.util

    from jupyter_core.paths import jupyter_path

    assert importlib.util.find_spec("jupyterlite_pyodide_kernel") is None
    assert not any((Path(p) / lite.KERNEL_EXTENSION).exists() for p in jupyter_path("labextensions"))
    assert (offline_site / "extensions" / lite.KERNEL_EXTENSION / "package.json").is_file()


def test_a_lab_title_is_its_first_heading(tmp_path):
    from shopops_lab.course.home import lab_title

    notebook = tmp_path / "09_x.ipynb"
    notebook.write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "code", "source": "# not a title"},
                    {"cell_type": "markdown", "source": ["intro\n", "# Lab 09 · X\n"]},
                ]
            }
        )
    )
    assert lab_title(notebook) == "Lab 09 · X"
    notebook.write_text(json.dumps({"cells": []}))
    assert lab_title(notebook) == "09_x"


def test_a_kit_built_without_reveals_carries_no_model_answers_and_solution_says_so(tmp_path: Path) -> None:
    """`lite build --no-reveals` (and `kit_wheel(reveals=False)`): the site's kit has its checks
    and their keys but no model answers; `solution(confirm=True)` says reveals are off, and
    the rest of the lab works (a quiz still knows its right option)."""
    import os
    import subprocess

    wheel = lite.kit_wheel(tmp_path, reveals=False)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(tmp_path / "site")
    assert lite.MODEL_ANSWERS not in names and "shopops_lab/checks/answer_keys/lab01.py" in names
    (tmp_path / "full").mkdir()
    with zipfile.ZipFile(lite.kit_wheel(tmp_path / "full")) as full:  # the default keeps them
        assert lite.MODEL_ANSWERS in full.namelist()
    import sysconfig

    said = subprocess.run(  # without site: the checkout's editable install would win over the wheel's copy
        [
            sys.executable,
            "-S",
            "-c",
            "from shopops_lab.checks import lab01; print(lab01.__file__); "
            "lab01.exercise.solution(confirm=True); print('quiz', lab01.SAME_KEY_QUIZ.answer_index)",
        ],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), sysconfig.get_paths()["purelib"]]),
            "MPLBACKEND": "Agg",
        },
        cwd=tmp_path,  # not the checkout: `-c` puts the current folder first on the search path
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert said.returncode == 0, said.stderr
    first, *rest = said.stdout.splitlines()
    assert first.startswith(str(tmp_path / "site"))
    assert any("Model answers are turned off here" in line for line in rest) and "quiz 1" in rest
    assert "def send_followup" not in said.stdout


def test_the_site_answers_every_favicon_its_apps_ask_for(offline_site):
    """JupyterLite's apps swap the page's icon as a kernel goes busy and idle; each one missing
    was a 404 in the learner's console."""
    for name in ("favicon.ico", "favicon-busy-1.ico", "favicon-notebook.ico"):
        assert (offline_site / "static" / "favicons" / name).is_file(), name
    assert (offline_site / "favicon.ico").is_file()


def test_on_a_phone_the_notebook_views_menu_gets_the_whole_width(offline_site):
    page = (offline_site / "notebooks" / "index.html").read_text(encoding="utf-8")
    assert lite.PHONE_MENU in page and page.index(lite.PHONE_MENU) < page.index("</head>")
    assert lite.PHONE_MENU not in (offline_site / "lab" / "index.html").read_text(encoding="utf-8")


def test_the_wheels_the_kernel_loads_carry_bytecode_for_the_sites_own_python(offline_site):
    """Compiled at build time by Pyodide's Python (a kernel otherwise compiles IPython from source
    at every start): unchecked hash-based .pyc beside every module, for Pyodide's Python version."""
    upstream = json.loads((offline_site / "static" / "pyodide" / "pyodide-lock.json").read_text())
    tag = "cpython-" + "".join(upstream["info"]["python"].split(".")[:2])
    for name in ("ipython", "shopops_lab"):
        wheel = next((offline_site / lite.WHEELS).glob(f"{name}-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
            sources = [n for n in names if n.endswith(".py")]
            compiled = [n for n in names if n.endswith(f".{tag}.pyc")]
            assert sources and len(compiled) == len(sources), name
            header = archive.read(compiled[0])[4:8]
        assert int.from_bytes(header, "little") == 0b01, "an unchecked hash-based .pyc (PEP 552)"
