"""`shopops-lab doctor`: check that this machine can run the course, and say how to fix it.

It first works out where it runs (`where_it_runs`): a checkout of the course (`make lab`), the
kit installed by pip without a checkout (a laptop, an instructor's machine), a JupyterHub (the
hub sets JUPYTERHUB_API_URL / JUPYTERHUB_USER in every user's server; Binder is one too) or
JupyterLite (Pyodide reports `sys.platform == "emscripten"`). What it checks and the next step
it gives follow from that: the test tools only in a checkout, `make lab` only there.

Every check is a pure function of injectable lookups (`which=`, `version_of=`, ...), so
the tests can simulate a missing `dot` or package, or another OS, without touching the
machine. Left at their defaults, the lookups read the real machine.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TextIO

from shopops_lab.viz.dot import in_browser

MIN_PYTHON = (3, 11)

# (distribution, import name, version range). Mirrors requirements.txt; a test keeps the
# two in step, so a learner is never told "ok" about a version the kit does not support.
# Each fix installs just that package in its range, so it works from any folder.
REQUIRED_PACKAGES: tuple[tuple[str, str, str], ...] = (
    ("jupyterlab", "jupyterlab", ">=4.2,<5"),
    ("ipython", "IPython", ">=8.12,<10"),
    ("ipywidgets", "ipywidgets", ">=8.1,<9"),
    ("ipykernel", "ipykernel", ">=6.29,<8"),
    ("nbformat", "nbformat", ">=5.10,<6"),
    ("nbclient", "nbclient", ">=0.10,<0.12"),
    ("matplotlib", "matplotlib", ">=3.8,<4"),
    ("graphviz", "graphviz", ">=0.21,<0.22"),
    ("jsonschema", "jsonschema", ">=4.21,<5"),
    # the test tools: a checkout's `make test` needs them, a learner's installed kit does not (TEST_TOOLS)
    ("pytest", "pytest", ">=9,<10"),
    ("nbval", "nbval", ">=0.11,<0.12"),
    ("hypothesis", "hypothesis", ">=6.100,<7"),
    ("ruff", "ruff", ">=0.17,<0.18"),
    ("mypy", "mypy", ">=2.4,<3"),
    ("pytest-xdist", "xdist", ">=3.8,<4"),
)

TEST_TOOLS = frozenset({"pytest", "nbval", "hypothesis", "ruff", "mypy", "pytest-xdist"})


class Place(StrEnum):
    """Where the doctor runs, which decides the next step it gives."""

    CHECKOUT = "checkout"  # the course's folder, set up by make
    INSTALLED = "installed"  # the kit installed by pip, no checkout (a laptop, an instructor's machine)
    HUB = "hub"  # a user's server on a JupyterHub (Binder's too)
    BROWSER = "browser"  # JupyterLite


HUB_VARIABLES = ("JUPYTERHUB_API_URL", "JUPYTERHUB_USER")  # what a hub's spawner puts in every server's environment
HAND_OUT = "shopops-lab notebooks ~/shopops-lab"
NEXT_STEP = {
    Place.CHECKOUT: "Start the course with: make lab",
    Place.INSTALLED: f"Get the notebooks with: {HAND_OUT}, then open them: jupyter lab ~/shopops-lab",
    Place.HUB: f"On a JupyterHub: get your copy of the notebooks in a terminal here with {HAND_OUT} (it adds "
    "new labs and never overwrites yours), then open shopops-lab/00_start_here.ipynb from the file browser",
    Place.BROWSER: "This browser site runs every lab.",
}
HUB_FIXES = "on a JupyterHub the environment is shared: ask the hub's admin to run them"

DOT_NOTE = "the notebooks still work without it: the kit draws every diagram with its own layout"

# In the browser (JupyterLite, Pyodide) nothing can be installed with pip, apt or brew: the
# site ships what the labs need, and the doctor says what this site has and lacks instead.
BROWSER_PACKAGES: tuple[tuple[str, str], ...] = (
    ("ipywidgets", "the playground, the TTL explorer and the quizzes respond to clicks"),
    ("matplotlib", "plots are drawn by matplotlib"),
)
BROWSER_FIXES = {
    "ipywidgets": "reload the page; if it stays missing, the site was built without it: rebuild it "
    "with shopops-lab lite build",
    "matplotlib": "nothing to do: the kit sketches every plot here; the full plots need the online "
    "site (or JupyterLab)",
}


VersionOf = Callable[[str], str | None]


@dataclass(frozen=True)
class Finding:
    """One line of the doctor's report: what was checked, whether it passed, and the fix.

    `required=False` marks advice that does not change the exit status.
    """

    name: str
    ok: bool
    detail: str
    fix: str
    required: bool = True

    def line(self) -> str:
        """Render as the one line a learner reads, e.g. `ok   dot 12.2.1`."""
        if self.ok:
            return f"ok   {self.name} {self.detail}".rstrip()
        label = "MISSING" if self.required else "WARN"
        text = f"{label} {self.name}"
        if self.fix:
            text += f" — run: {self.fix}"
        if self.detail:
            text += f" ({self.detail})"
        return text


# --- real lookups (the defaults) -------------------------------------------------------


def installed_version(distribution: str) -> str | None:
    """Version of an installed distribution, or None: metadata, not import, so it is fast."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def module_importable(module: str) -> bool:
    """True if `import module` would find something, without running the module's code."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def run_command(argv: Sequence[str]) -> str:
    """Run a short probe like `dot -V`; return its combined output or raise on failure."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=20, check=True)
    return (done.stderr or "") + (done.stdout or "")


def read_os_release(paths: Iterable[str] = ("/etc/os-release", "/usr/lib/os-release")) -> dict[str, str]:
    """Parse os-release (KEY=value lines) so the fix can name the distro's package manager."""
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        return parse_os_release(text)
    return {}


def parse_os_release(text: str) -> dict[str, str]:
    """KEY=value pairs with shell quotes stripped; comments and junk lines ignored."""
    fields: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        fields[key.strip()] = value.strip().strip("'\"")
    return fields


def find_kernel_specs() -> dict[str, str]:
    """Kernel names Jupyter can launch, mapped to their directories."""
    from jupyter_client.kernelspec import KernelSpecManager

    return dict(KernelSpecManager().find_kernel_specs())


def python_command() -> str:
    """How to name this interpreter in a fix: its absolute path (not resolved: a venv's python
    is a link), so the command works from any folder and installs into this environment."""
    return _quoted(os.path.abspath(sys.executable or "python"))


def _quoted(text: str) -> str:
    """Double-quoted when it holds a space or a shell character: sh, PowerShell and cmd accept that."""
    return f'"{text}"' if re.search(r"""[\s<>&|;()'"$`]""", text) else text


def kit_checkout() -> Path | None:
    """The source checkout this kit runs from (pyproject.toml beside the package), if any."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() else None


def kit_install_command(python: str | None = None) -> str:
    """Installs the kit with every dependency its labs need, from any folder: the checkout
    this copy runs from, editable (a learner's edits show up at once); without a checkout, the
    install for everyone that docs/hub.md gives."""
    python = python or python_command()
    checkout = kit_checkout()
    if checkout is None:
        return f'{python} -m pip install "shopops-lab[lab] @ <the kit\'s folder or wheel>"'
    return f"{python} -m pip install -e {_quoted(str(checkout))}"


def package_install_command(distribution: str, spec: str = "", python: str = "python") -> str:
    """Installs one package in the supported range, from any folder."""
    return f'{python} -m pip install "{distribution}{spec}"'


# --- pure logic ------------------------------------------------------------------------


def where_it_runs(
    *,
    environ: Mapping[str, str] | None = None,
    platform: str | None = None,
    checkout: Path | None | bool = True,
) -> Place:
    """The browser first (nothing else applies there), then a hub (a hub's server may also hold a
    checkout, as Binder's does: `make lab` still does not apply), then a checkout, else an install."""
    environ = os.environ if environ is None else environ
    if (sys.platform if platform is None else platform) == "emscripten":
        return Place.BROWSER
    if any(environ.get(name) for name in HUB_VARIABLES):
        return Place.HUB
    if checkout is True:
        checkout = kit_checkout()
    return Place.CHECKOUT if checkout else Place.INSTALLED


def graphviz_install_command(system: str, os_release: Mapping[str, str]) -> str:
    """The one command that installs Graphviz here, or "" when we cannot name one."""
    if system == "Darwin":
        return "brew install graphviz"
    if system == "Windows":
        return "winget install graphviz"
    if system != "Linux":
        return ""
    ids = {os_release.get("ID", "").lower(), *os_release.get("ID_LIKE", "").lower().split()}
    if ids & {"debian", "ubuntu"}:
        return "sudo apt-get install graphviz"
    if ids & {"fedora", "rhel", "centos"}:
        return "sudo dnf install graphviz"
    if ids & {"arch"}:
        return "sudo pacman -S graphviz"
    if ids & {"opensuse", "suse", "opensuse-leap", "opensuse-tumbleweed"}:
        return "sudo zypper install graphviz"
    if ids & {"alpine"}:
        return "sudo apk add graphviz"
    return ""


def version_in_range(version: str, spec: str) -> bool | None:
    """True/False if `version` satisfies `spec`; None when `packaging` is not there to judge."""
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return None
    try:
        return Version(version) in SpecifierSet(spec)
    except (InvalidSpecifier, InvalidVersion):
        return None


def check_python(version_info: Sequence[int] = tuple(sys.version_info[:3])) -> Finding:
    """The kit uses 3.11+ syntax and stdlib; older interpreters fail in confusing ways."""
    shown = ".".join(str(part) for part in version_info[:3])
    if tuple(version_info[:2]) >= MIN_PYTHON:
        return Finding("python", True, shown, "")
    return Finding(
        "python",
        False,
        f"{shown} is too old; install Python 3.11+ (https://www.python.org/downloads/) first",
        "make clean setup",
    )


def check_packages(
    *,
    version_of: VersionOf = installed_version,
    importable: Callable[[str], bool] = module_importable,
    python: str = "python",
    browser: bool | None = None,
    tests: bool = True,
) -> list[Finding]:
    """Each package the notebooks (and with `tests`, the test suite) import, present and in the
    supported range (in the browser: what the site has of what the labs use, see
    `check_browser_packages`)."""
    if in_browser() if browser is None else browser:
        return check_browser_packages(version_of=version_of)
    findings = []
    for dist, module, spec in REQUIRED_PACKAGES:
        if dist in TEST_TOOLS and not tests:
            continue
        fix = package_install_command(dist, spec, python)
        version = version_of(dist)
        if version is None or not importable(module):
            detail = "not installed" if version is None else f"{version} installed but `import {module}` fails"
            findings.append(Finding(dist, False, detail, fix))
        elif version_in_range(version, spec) is False:
            findings.append(Finding(dist, False, f"{version} installed; the kit needs {spec}", fix))
        else:
            findings.append(Finding(dist, True, version, ""))
    return findings


def check_browser_packages(*, version_of: VersionOf = installed_version) -> list[Finding]:
    """In JupyterLite: ipywidgets must be there (the site loads it as the kernel starts);
    matplotlib is only on the online site, and its absence is advice, not a failure."""
    findings = []
    for dist, what in BROWSER_PACKAGES:
        version = version_of(dist)
        if version is not None:
            findings.append(Finding(dist, True, version, ""))
        else:
            findings.append(
                Finding(
                    dist,
                    False,
                    f"not on this site, so not everywhere: {what}",
                    BROWSER_FIXES[dist],
                    required=dist != "matplotlib",
                )
            )
    return findings


def check_browser_diagrams() -> Finding:
    """Graphviz cannot run in a browser; that is expected, and the pictures do not suffer."""
    return Finding("diagrams", True, "drawn by the kit itself (Graphviz cannot run in the browser)", "")


def check_kit(*, version_of: VersionOf = installed_version, python: str = "python") -> Finding:
    """Notebooks run with notebooks/ as cwd, so they import the kit only if it is installed."""
    version = version_of("shopops-lab")
    if version is None:
        return Finding(
            "shopops-lab",
            False,
            "the kit itself is not installed in this environment",
            kit_install_command(python),
        )
    return Finding("shopops-lab", True, version, "")


def check_dot(
    *,
    which: Callable[[str], str | None] = shutil.which,
    run: Callable[[Sequence[str]], str] = run_command,
    system: str = "",
    os_release: Mapping[str, str] | None = None,
) -> Finding:
    """Graphviz's `dot` renders the state-machine diagrams; the python package alone cannot."""
    install = graphviz_install_command(system, os_release or {})
    if not install:
        note = f"install Graphviz from https://graphviz.org/download/; {DOT_NOTE}"
    else:
        note = DOT_NOTE
    path = which("dot")
    if path is None:
        return Finding("dot", False, f"not on PATH; {note}", install)
    try:
        output = run([path, "-V"])
    except (OSError, subprocess.SubprocessError) as exc:
        return Finding("dot", False, f"{path} is there but `dot -V` failed ({exc}); {note}", install)
    match = re.search(r"version\s+(\S+)", output)
    return Finding("dot", True, match.group(1) if match else output.strip() or path, "")


def check_widgets_frontend(*, version_of: VersionOf = installed_version, python: str = "python") -> list[Finding]:
    """Sliders render only if the browser side of ipywidgets is installed too.

    JupyterLab 4 loads it from the `jupyterlab_widgets` prebuilt extension; the
    classic Notebook (<7) uses `widgetsnbextension`, so that one is advice only.
    """
    findings = []
    lab = version_of("jupyterlab_widgets")
    if lab is None:
        findings.append(
            Finding(
                "jupyterlab_widgets",
                False,
                "not installed; without it JupyterLab 4 shows widgets as plain text",
                package_install_command("jupyterlab_widgets", python=python),
            )
        )
    else:
        findings.append(Finding("jupyterlab_widgets", True, lab, ""))
    classic = version_of("widgetsnbextension")
    if classic is None:
        findings.append(
            Finding(
                "widgetsnbextension",
                False,
                "not installed; only the classic Notebook (<7) needs it",
                package_install_command("widgetsnbextension", python=python),
                required=False,
            )
        )
    else:
        findings.append(Finding("widgetsnbextension", True, classic, "", required=False))
    return findings


def check_kernelspec(
    *, kernel_specs: Callable[[], Mapping[str, str]] = find_kernel_specs, python: str = "python"
) -> Finding:
    """The notebooks ask for the `python3` kernel; without it JupyterLab cannot run a cell."""
    fix = f"{python} -m ipykernel install --user"
    try:
        specs = kernel_specs()
    except Exception as exc:  # a broken jupyter_client install must not crash the doctor
        return Finding("kernel python3", False, f"cannot list kernels ({type(exc).__name__}: {exc})", fix)
    if "python3" in specs:
        return Finding("kernel python3", True, str(specs["python3"]), "")
    found = ", ".join(sorted(specs)) or "none"
    return Finding("kernel python3", False, f"not found (kernels: {found})", fix)


def run_checks(
    *,
    which: Callable[[str], str | None] | None = None,
    version_of: VersionOf | None = None,
    importable: Callable[[str], bool] | None = None,
    run: Callable[[Sequence[str]], str] | None = None,
    system: str | None = None,
    os_release: Mapping[str, str] | None = None,
    kernel_specs: Callable[[], Mapping[str, str]] | None = None,
    version_info: Sequence[int] | None = None,
    python: str | None = None,
    place: Place | None = None,
) -> list[Finding]:
    """All findings in report order; any lookup left as None uses the real machine. In the
    browser: Python, the kit, the packages the labs use, and how diagrams are drawn; the test
    tools only in a checkout."""
    version_of = version_of or installed_version
    place = where_it_runs() if place is None else place
    if place is Place.BROWSER:
        return [
            check_python(tuple(sys.version_info[:3]) if version_info is None else version_info),
            check_kit(version_of=version_of, python="python"),
            *check_browser_packages(version_of=version_of),
            check_browser_diagrams(),
        ]
    python = python or python_command()
    system = platform.system() if system is None else system
    if os_release is None:
        os_release = read_os_release() if system == "Linux" else {}
    return [
        check_python(tuple(sys.version_info[:3]) if version_info is None else version_info),
        *check_packages(
            version_of=version_of,
            importable=importable or module_importable,
            python=python,
            browser=False,
            tests=place is Place.CHECKOUT,
        ),
        check_kit(version_of=version_of, python=python),
        check_dot(which=which or shutil.which, run=run or run_command, system=system, os_release=os_release),
        *check_widgets_frontend(version_of=version_of, python=python),
        check_kernelspec(kernel_specs=kernel_specs or find_kernel_specs, python=python),
    ]


def exit_code(findings: Iterable[Finding]) -> int:
    """0 when every required finding is ok, else 1: what `make doctor` and CI look at."""
    return 0 if all(f.ok for f in findings if f.required) else 1


def summary(findings: Sequence[Finding], *, place: Place | None = None) -> str:
    """The closing line: "ready" and the next step where it runs, or how many things to fix."""
    place = where_it_runs() if place is None else place
    failed = [f for f in findings if f.required and not f.ok]
    warned = [f for f in findings if not f.required and not f.ok]
    extra = f" ({len(warned)} optional warning{'s' if len(warned) != 1 else ''})" if warned else ""
    if not failed:
        return f"All required checks passed{extra}. {NEXT_STEP[place]}"
    admin = f" ({HUB_FIXES})" if place is Place.HUB else ""
    return (
        f"{len(failed)} of {len(findings)} checks need attention{extra}: run the commands above{admin}, "
        "then `shopops-lab doctor` again."
    )


def main(out: TextIO | None = None, **lookups: Any) -> int:
    """Print the report and return the exit status; `lookups` go to run_checks()."""
    out = out or sys.stdout
    place = lookups.pop("place", None) or where_it_runs()
    findings = run_checks(place=place, **lookups)
    for finding in findings:
        print(_showable(finding.line(), out), file=out)
    print(_showable(summary(findings, place=place), out), file=out)
    return exit_code(findings)


def _showable(text: str, out: TextIO) -> str:
    """`text` as `out` can show it: on an ASCII-only terminal the em dash becomes "--" (and
    anything else it cannot show "?"), so the fixes are still printed, and readable."""
    encoding = getattr(out, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
        return text
    except (UnicodeEncodeError, LookupError):
        plain = text.replace("\u2014", "--")
        try:
            return plain.encode(encoding, "replace").decode(encoding)
        except LookupError:
            return plain.encode("ascii", "replace").decode("ascii")
