"""What the hub test installs, kept between runs: JupyterHub and the kit for everyone, in a venv
every user can run, and configurable-http-proxy from npm.

The venv is built once per machine and key (JupyterHub's version, the Python, the kit's declared
dependencies and its `lab` extra); each run removes the kit from it and installs it again with
docs/hub.md's line, run from another folder, so the test installs this checkout the way an admin
would (its dependencies are already there, so that takes seconds). It lives in
/var/cache/shopops-lab/hub ($SHOPOPS_HUB_CACHE overrides it), not in root's ~/.cache: the hub's
users run its Python, and root's home is closed to them; so is a pyenv Python under it, so the
venv is made from a Python every user can run. A run holds an exclusive lock for as long as it
uses the venv (its kit is this checkout's). Delete the folder to rebuild.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HUB_VERSION = "6.1.1"
PROXY_VERSION = "5.3.0"
ROOT = Path(__file__).resolve().parent.parent
READY = ".shopops-lab-ready"  # written last: the venv is complete
# docs/hub.md's install for everyone (tests/test_hub.py checks the doc says it), the kit's folder after it
INSTALL = ("-m", "pip", "install", f"jupyterhub=={HUB_VERSION}", "shopops-lab[lab] @ file://")


# docs/hub.md's shared drop box and hand-in line (tests/test_docs_hub.py checks the doc says them)
DROP_BOX_MODE = 0o3733  # setgid: the staff group owns what is put in; sticky: nobody removes another's folder
START = '{shopops_lab} notebooks "$HOME/shopops-lab" && exec "$0" "$@"'  # the spawner's command: hand out, then start
HAND_IN = 'mkdir -p -m 2750 "{submitted}/$USER" && cp {files} "{submitted}/$USER/"'


class HubUnavailable(RuntimeError):
    """The hub's installs could not be made here; the message says what failed."""


@dataclass(frozen=True)
class HubInstall:
    """The venv's bin folder (jupyterhub, jupyterhub-singleuser, shopops-lab) and the proxy's command."""

    bin: Path
    proxy: Path


def cache_dir() -> Path:
    return Path(os.environ.get("SHOPOPS_HUB_CACHE") or "/var/cache/shopops-lab/hub")


def everyone_can_run(path: Path) -> bool:
    """True when any user may run `path`: the file and every folder above it are open to others."""
    real = path.resolve()
    if not real.is_file() or not real.stat().st_mode & stat.S_IXOTH:
        return False
    return all(folder.stat().st_mode & stat.S_IXOTH for folder in real.parents)


def python_for_everyone() -> Path | None:
    """A Python 3.11+ that every user may run: this one's base interpreter, else the system's."""
    candidates = [Path(sys._base_executable), *(Path(p) for p in ("/usr/bin/python3", "/usr/local/bin/python3"))]
    for python in candidates:
        if python.exists() and everyone_can_run(python):
            done = subprocess.run(
                [python, "-c", "import sys, venv; print(sys.version_info >= (3, 11))"], capture_output=True, text=True
            )
            if done.stdout.strip() == "True":
                return python
    return None


def _key(python: Path) -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    version = subprocess.run([python, "-c", "import sys; print(sys.version)"], capture_output=True, text=True).stdout
    wanted = {
        "jupyterhub": HUB_VERSION,
        "python": version,
        "dependencies": sorted(project["dependencies"]),
        "lab": sorted(project["optional-dependencies"]["lab"]),
    }
    return hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()[:12]


def _run(command: list[str | Path], what: str, *, cwd: Path = Path("/")) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=1200, umask=0o022)
    if done.returncode != 0:
        raise HubUnavailable(f"{what} failed: {(done.stderr or done.stdout).strip()[-600:]}")


def _install_kit(venv: Path) -> None:
    """docs/hub.md's line, run from / with the venv's python: never editable, never this folder's."""
    python = venv / "bin" / "python"
    _run([python, "-m", "pip", "uninstall", "-q", "-y", "shopops-lab"], "removing the last run's kit")
    command = [python, *INSTALL[:-1], f"{INSTALL[-1]}{ROOT}"]
    _run([*command, "-q", "--disable-pip-version-check"], " ".join(map(str, command)))


def _build(venv: Path, python: Path) -> None:
    shutil.rmtree(venv, ignore_errors=True)
    try:
        _run([python, "-m", "venv", venv], f"{python} -m venv")
        _install_kit(venv)
    except HubUnavailable:
        shutil.rmtree(venv, ignore_errors=True)  # never half a venv
        raise
    (venv / READY).write_text("ready\n")


def _proxy(folder: Path) -> Path:
    command = folder / "node_modules" / ".bin" / "configurable-http-proxy"
    if not command.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise HubUnavailable("npm is not installed (sudo apt-get install npm)")
        _run(
            [npm, "install", "--silent", "--prefix", folder, f"configurable-http-proxy@{PROXY_VERSION}"], "npm install"
        )
    return command


@contextlib.contextmanager
def hub_install() -> Iterator[HubInstall]:
    """The venv with this checkout's kit installed for everyone, and the proxy, locked while in use."""
    python = python_for_everyone()
    if python is None:
        raise HubUnavailable("no Python 3.11+ that every user may run (sudo apt-get install python3 python3-venv)")
    base = cache_dir()
    base.mkdir(mode=0o755, parents=True, exist_ok=True)
    if not all(folder.stat().st_mode & stat.S_IXOTH for folder in (base, *base.parents)):
        raise HubUnavailable(f"the hub's users cannot reach {base}: set SHOPOPS_HUB_CACHE to a folder they can")
    venv = base / f"hub-{HUB_VERSION}-{_key(python)}"
    import fcntl

    with open(base / f"{venv.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / READY).exists():
            _install_kit(venv)
        else:
            _build(venv, python)
        yield HubInstall(bin=venv / "bin", proxy=_proxy(base / f"proxy-{PROXY_VERSION}"))
