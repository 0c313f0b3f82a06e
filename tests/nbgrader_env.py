"""nbgrader 0.9.6 in a virtualenv of its own, built exactly as the README tells instructors:

    python -m venv <env>
    <env>/bin/python -m pip install nbgrader==0.9.6 -e <this repository>

Shared by the round-trip test and benchmarks/bench_grade.py. The venv is built once per
machine under the temp dir (or $SHOPOPS_NBGRADER_CACHE), keyed by nbgrader's version, the
Python version, the checkout and its pyproject.toml (the kit's dependencies); the kit is
installed editable, so code changes need no rebuild. Delete the folder to rebuild.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

NBGRADER_VERSION = "0.9.6"
ROOT = Path(__file__).resolve().parent.parent
README_INSTALL = f"python -m pip install nbgrader=={NBGRADER_VERSION} -e"  # then the path of the checkout


class NbgraderUnavailable(RuntimeError):
    """The venv could not be built (no network to PyPI?); the message says what failed."""


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder at a time per venv (parallel runs share the cache)."""
    try:
        import fcntl
    except ImportError:  # no flock here: build without a lock
        yield
        return
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_venv(root: Path = ROOT) -> Path:
    """The python of a cached venv made by the README's instructor install; builds it if needed."""
    pyproject = (root / "pyproject.toml").read_bytes()
    key = hashlib.sha256(b"\n".join([sys.version.encode(), str(root).encode(), pyproject])).hexdigest()[:10]
    cache = Path(os.environ.get("SHOPOPS_NBGRADER_CACHE", tempfile.gettempdir()))
    venv = cache / f"shopops-lab-nbgrader-{NBGRADER_VERSION}-py{sys.version_info[0]}{sys.version_info[1]}-{key}"
    ready = venv / ".shopops-lab-ready"
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / f"{venv.name}.lock"):
        if not ready.exists():
            shutil.rmtree(venv, ignore_errors=True)
            made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
            if made.returncode != 0:
                raise NbgraderUnavailable(f"python -m venv failed: {made.stderr.strip()[-500:]}")
            command = [str(venv_python(venv)), *README_INSTALL.split()[1:], str(root)]
            pip = subprocess.run(
                [*command, "--disable-pip-version-check", "-q"], capture_output=True, text=True, timeout=1200
            )
            if pip.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                raise NbgraderUnavailable(f"{' '.join(command)} failed: {(pip.stderr or pip.stdout).strip()[-500:]}")
            ready.write_text(" ".join(command) + "\n")
    return venv_python(venv)


def environment(python: Path, scratch: Path) -> dict[str, str]:
    """What nbgrader runs with: the venv first on PATH (its Gradebook runs `alembic` by name),
    no PYTHONPATH (the kit must come from the install alone), no user-level Jupyter config."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_PATH", "PYTHONHOME")}
    env.update(
        PATH=str(python.parent) + os.pathsep + env.get("PATH", ""),
        PYTHONHASHSEED="0",
        JUPYTER_DATA_DIR=str(scratch / "jupyter-data"),
        JUPYTER_CONFIG_DIR=str(scratch / "jupyter-config"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    return env


def make_course(scratch: Path, *, timeout: int = 120) -> tuple[Path, str]:
    """An empty nbgrader course folder with its config; returns (course, gradebook db url)."""
    course = scratch / "course"
    db_url = f"sqlite:///{(scratch / 'gradebook.db').as_posix()}"
    course.mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(textwrap.dedent(f"""
        c = get_config()
        c.CourseDirectory.course_id = "shopops-lab"
        c.CourseDirectory.root = {str(course)!r}
        c.CourseDirectory.db_url = {db_url!r}
        c.Execute.timeout = {timeout}
    """))
    return course, db_url


def run(
    python: Path, args: list[str], *, cwd: Path, env: dict[str, str], timeout: int = 1800
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
