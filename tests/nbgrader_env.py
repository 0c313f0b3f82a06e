"""nbgrader 0.9.6 in a virtualenv of its own, built exactly as docs/instructors.md tells instructors:

    python -m venv <env>
    <env>/bin/python -m pip install nbgrader==0.9.6 -e <this repository>

Shared by the round-trip test and benchmarks/bench_grade.py. The venv is built once per
machine and kept between runs in ~/.cache/shopops-lab/nbgrader/ ($XDG_CACHE_HOME is honoured;
$SHOPOPS_NBGRADER_CACHE overrides the folder), keyed by what it installs: nbgrader's version,
the Python version and the kit's declared requirements (pyproject.toml's build requirements and
[project] dependencies), so editing the kit's code or its test config never rebuilds it (the kit
is installed editable). Another checkout reuses the same venv: the guide's command is rerun
there to point the editable install at it (seconds: nbgrader is already in). A run holds a shared
lock while it grades, so no other checkout repoints the venv under it. A new key prunes the
venvs of old keys no run is using. Delete the folder to rebuild.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

NBGRADER_VERSION = "0.9.6"
ROOT = Path(__file__).resolve().parent.parent
GUIDE_INSTALL = f"python -m pip install nbgrader=={NBGRADER_VERSION} -e"  # then the path; docs/instructors.md
READY = ".shopops-lab-ready"  # written last: the venv is complete
KIT = ".shopops-lab-kit"  # the checkout the editable install points at


class NbgraderUnavailable(RuntimeError):
    """The venv could not be built (no network to PyPI?); the message says what failed."""


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def cache_dir() -> Path:
    """Where the venvs live between runs (never the temp folder: it is cleaned, and it is shared)."""
    explicit = os.environ.get("SHOPOPS_NBGRADER_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "shopops-lab" / "nbgrader"


def requirements_key(root: Path = ROOT) -> str:
    """A digest of everything the install depends on; the kit's own code and config are not in it."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = {
        "nbgrader": NBGRADER_VERSION,
        "python": sys.version,
        "build": sorted(pyproject.get("build-system", {}).get("requires", [])),
        "dependencies": sorted(pyproject["project"].get("dependencies", [])),
        "requires-python": pyproject["project"].get("requires-python", ""),
    }
    return hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()[:12]


def venv_path(root: Path = ROOT) -> Path:
    major, minor = sys.version_info[:2]
    return cache_dir() / f"nbgrader-{NBGRADER_VERSION}-py{major}{minor}-{requirements_key(root)}"


def _flock(handle: IO[str], mode: str) -> None:
    """ "ex", "sh", "un" or "try-ex" (returns at once; raises BlockingIOError if taken). No-op without fcntl."""
    try:
        import fcntl
    except ImportError:  # no flock here (Windows): build without a lock
        return
    flags = {"ex": fcntl.LOCK_EX, "sh": fcntl.LOCK_SH, "un": fcntl.LOCK_UN, "try-ex": fcntl.LOCK_EX | fcntl.LOCK_NB}
    fcntl.flock(handle, flags[mode])


def _pip_install(venv: Path, root: Path) -> None:
    """docs/instructors.md's nbgrader install, run in `venv`; its log tail is in the error if it fails."""
    command = [str(venv_python(venv)), *GUIDE_INSTALL.split()[1:], str(root)]
    pip = subprocess.run([*command, "--disable-pip-version-check", "-q"], capture_output=True, text=True, timeout=1200)
    if pip.returncode != 0:
        raise NbgraderUnavailable(f"{' '.join(command)} failed: {(pip.stderr or pip.stdout).strip()[-500:]}")


def _build(venv: Path, root: Path) -> None:
    shutil.rmtree(venv, ignore_errors=True)
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
    if made.returncode != 0:
        raise NbgraderUnavailable(f"python -m venv failed: {made.stderr.strip()[-500:]}")
    try:
        _pip_install(venv, root)
    except NbgraderUnavailable:
        shutil.rmtree(venv, ignore_errors=True)  # never leave half a venv behind
        raise
    (venv / KIT).write_text(str(root) + "\n")
    (venv / READY).write_text(f"{GUIDE_INSTALL} {root}\n")


def _prepared(venv: Path, root: Path) -> bool:
    return (venv / READY).exists() and (venv / KIT).read_text().strip() == str(root)


def _prepare(venv: Path, root: Path) -> None:
    """Build the venv, or point its editable kit at `root`; the caller holds the exclusive lock."""
    if not (venv / READY).exists():
        _build(venv, root)
        _prune(venv)
    elif not _prepared(venv, root):
        _pip_install(venv, root)
        (venv / KIT).write_text(str(root) + "\n")


def _prune(keep: Path) -> None:
    """Remove the venvs of other keys that no run is using (their lock is free)."""
    major, minor = sys.version_info[:2]
    for lock in keep.parent.glob(f"nbgrader-*-py{major}{minor}-*.lock"):
        old = lock.with_suffix("")
        if old == keep:
            continue
        with open(lock, "a") as handle:
            try:
                _flock(handle, "try-ex")
            except BlockingIOError:
                continue  # in use by a run right now: leave it
            shutil.rmtree(old, ignore_errors=True)
            lock.unlink(missing_ok=True)


@contextlib.contextmanager
def using_venv(root: Path = ROOT) -> Iterator[Path]:
    """The python of the cached venv, its kit pointing at `root`, held (shared lock) while in use."""
    venv = venv_path(root)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "a") as handle:
        while True:
            _flock(handle, "ex")
            _prepare(venv, root)
            _flock(handle, "sh")  # not atomic: another checkout may repoint in between, so look again
            if _prepared(venv, root):
                break
        try:
            yield venv_python(venv)
        finally:
            _flock(handle, "un")


def ensure_venv(root: Path = ROOT) -> Path:
    """The python of the cached venv, built or repointed at `root` if needed (no lock kept)."""
    with using_venv(root) as python:
        return python


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
    (course / "nbgrader_config.py").write_text(
        textwrap.dedent(f"""
        c = get_config()
        c.CourseDirectory.course_id = "shopops-lab"
        c.CourseDirectory.root = {str(course)!r}
        c.CourseDirectory.db_url = {db_url!r}
        c.Execute.timeout = {timeout}
    """)
    )
    return course, db_url


def run(
    python: Path, args: list[str], *, cwd: Path, env: dict[str, str], timeout: int = 1800
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
