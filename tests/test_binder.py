"""Binder / repo2docker: the files it reads give an image that runs every lab, Graphviz included.

repo2docker itself needs Docker, which CI does not have; these check what it will read."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / ".binder"


def test_apt_installs_graphviz():
    assert "graphviz" in (BINDER / "apt.txt").read_text().split()


def test_the_python_version_is_one_the_kit_supports():
    version = re.fullmatch(r"python-(3)\.(\d+)\s*", (BINDER / "runtime.txt").read_text())
    assert version, "runtime.txt must read python-3.N"
    needed = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = tuple(int(n) for n in re.fullmatch(r">=(\d+)\.(\d+)", needed).groups())
    assert (int(version[1]), int(version[2])) >= minimum


def test_binder_installs_the_repositorys_requirements_and_the_kit():
    lines = [line.strip() for line in (BINDER / "requirements.txt").read_text().splitlines() if line.strip()]
    assert lines == ["-r ../requirements.txt"]
    root = (ROOT / "requirements.txt").read_text()
    assert re.search(r"^-e \.(\[[\w,]+\])?$", root, re.M), "the kit itself must be installed"
    assert re.search(r"^ipywidgets", root, re.M) and re.search(r"^graphviz", root, re.M)


def test_the_readme_launch_link_opens_lab_00():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"https://mybinder\.org/v2/gh/[^\s)`]+", readme)
    assert links, "the README gives the Binder link pattern"
    for link in links:
        path = re.search(r"urlpath=lab/tree/(\S+\.ipynb)", link).group(1)
        assert (ROOT / path).is_file(), link
