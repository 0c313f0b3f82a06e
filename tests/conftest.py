"""Fixtures shared by more than one test module."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_backends import BACKENDS, DURABLE, Backend

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path) -> Iterator[Backend]:
    """A fresh store of each kind in turn: memory, SQLite, PostgreSQL."""
    made = Backend(request.param, tmp_path)
    yield made
    made.close()


@pytest.fixture(params=DURABLE)
def durable(request, tmp_path) -> Iterator[Backend]:
    """A fresh store of each kind that survives its process: SQLite, PostgreSQL."""
    made = Backend(request.param, tmp_path)
    yield made
    made.close()


@pytest.fixture(scope="session")
def offline_site(tmp_path_factory) -> Path:
    """The course as an offline JupyterLite site, built once per test run (test_lite checks
    its files, test_browser runs it). Needs jupyterlite (requirements.txt), npm and PyPI the
    first time; downloads are cached in ~/.cache/shopops-lab/lite."""
    pytest.importorskip("jupyterlite_core", reason="the Lite build needs jupyterlite-core: "
                                                   ".venv/bin/pip install -r requirements.txt")
    from shopops_lab.course.errors import LiteBuildError
    from shopops_lab.course.lite import build_site

    out = tmp_path_factory.mktemp("lite") / "site"
    try:
        build_site(out, offline=True, notebooks_dir=ROOT / "notebooks")
    except LiteBuildError as err:
        if os.environ.get("CI"):  # CI installs npm and reaches PyPI: there the build must work
            raise
        pytest.skip(f"the offline JupyterLite site could not be built here: {err}")
    return out
