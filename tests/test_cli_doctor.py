"""The CLI and `doctor`: a learner's first contact with the kit, so its messages are tested.

Doctor lookups are injected (fake `which`, package versions, OS), so these tests pass the
same on a laptop without Graphviz as on CI with it. No sleeping, no network.
"""

from __future__ import annotations

import functools
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shopops_lab import cli, doctor
from shopops_lab.errors import ShopOpsError

ROOT = Path(__file__).resolve().parents[1]

GOOD_VERSIONS = {
    "jupyterlab": "4.2.5",
    "ipython": "8.27.0",
    "ipywidgets": "8.1.5",
    "ipykernel": "6.29.5",
    "nbformat": "5.10.4",
    "nbclient": "0.10.2",
    "matplotlib": "3.9.2",
    "graphviz": "0.21",
    "jsonschema": "4.23.0",
    "pytest": "9.0.1",
    "nbval": "0.11.0",
    "hypothesis": "6.112.0",
    "ruff": "0.17.5",
    "mypy": "2.4.1",
    "pytest-xdist": "3.8.0",
    "shopops-lab": "0.1.0",
    "jupyterlab_widgets": "3.0.13",
    "widgetsnbextension": "4.0.13",
}


def lookups(*, missing: tuple[str, ...] = (), versions: dict[str, str] | None = None, **overrides):
    """A fully healthy simulated machine, with `missing` distributions removed."""
    table = {**GOOD_VERSIONS, **(versions or {})}
    fake = dict(
        which=lambda name: "/usr/bin/dot" if name == "dot" else None,
        run=lambda argv: "dot - graphviz version 12.2.1 (20241206.2353)\n",
        version_of=lambda dist: None if dist in missing else table.get(dist),
        importable=lambda module: True,
        system="Linux",
        os_release={"ID": "debian", "VERSION_ID": "12"},
        kernel_specs=lambda: {"python3": "/venv/share/jupyter/kernels/python3"},
        version_info=(3, 12, 4),
        python="python",
        place=doctor.Place.CHECKOUT,
    )
    fake.update(overrides)
    return fake


def run_doctor(**fake) -> tuple[int, str]:
    out = io.StringIO()
    code = doctor.main(out, **fake)
    return code, out.getvalue()


# --- CLI ---------------------------------------------------------------------------------


def test_module_help_lists_doctor_in_a_subprocess():
    done = subprocess.run(
        [sys.executable, "-m", "shopops_lab", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "usage: shopops-lab" in done.stdout
    assert re.search(r"^\s+doctor\s", done.stdout, re.MULTILINE)


def test_main_help_lists_doctor(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\s+doctor\s", out, re.MULTILINE)


def test_unknown_subcommand_exits_2_with_one_line_pointing_at_help(capsys):
    assert cli.main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "invalid choice: 'frobnicate'" in err and "shopops-lab --help" in err


def test_unknown_subcommand_in_a_subprocess():
    done = subprocess.run(
        [sys.executable, "-m", "shopops_lab", "frobnicate"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 2
    assert "invalid choice" in done.stderr and "shopops-lab --help" in done.stderr


def test_no_subcommand_prints_help_and_fails(capsys):
    assert cli.main([]) == 2
    assert "doctor" in capsys.readouterr().err


def test_shopops_error_becomes_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(cli, "COMMANDS", list(cli.COMMANDS))

    @cli.register("explode", "raise a kit error")
    def _explode(args):
        raise ShopOpsError(detail="the queue is on fire")

    assert cli.main(["explode"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "error: ShopOps Lab: the queue is on fire\n"
    assert "Traceback" not in captured.err


def test_registered_command_gets_its_arguments(monkeypatch, capsys):
    monkeypatch.setattr(cli, "COMMANDS", list(cli.COMMANDS))

    def add(parser):
        parser.add_argument("--seed", type=int, required=True)

    @cli.register("echo-seed", "print the seed", add_arguments=add)
    def _echo(args):
        print(args.seed)
        return 3

    assert cli.main(["echo-seed", "--seed", "7"]) == 3
    assert capsys.readouterr().out == "7\n"


def test_register_refuses_a_duplicate_name(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", list(cli.COMMANDS))
    with pytest.raises(ValueError, match="doctor"):
        cli.register("doctor", "again")(lambda args: 0)


def test_cli_doctor_healthy_machine_exits_0(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "run_checks", functools.partial(doctor.run_checks, **lookups()))
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "ok   dot 12.2.1" in out
    assert out.splitlines()[-1].startswith("All required checks passed")


def test_cli_doctor_on_this_machine_reports_every_check(capsys):
    code = cli.main(["doctor"])
    lines = capsys.readouterr().out.splitlines()
    assert code in (0, 1)
    names = {line.split()[1] for line in lines[:-1]}
    assert {"python", "jupyterlab", "nbval", "dot", "jupyterlab_widgets", "kernel"} <= names


# --- doctor ------------------------------------------------------------------------------


def test_everything_present_exits_0():
    code, out = run_doctor(**lookups())
    assert code == 0
    assert "ok   python 3.12.4" in out
    assert "ok   nbval 0.11.0" in out
    assert "ok   dot 12.2.1" in out
    assert "ok   kernel python3 /venv/share/jupyter/kernels/python3" in out
    assert "MISSING" not in out


@pytest.mark.parametrize(
    ("system", "os_release", "command"),
    [
        ("Linux", {"ID": "debian"}, "sudo apt-get install graphviz"),
        ("Darwin", {}, "brew install graphviz"),
    ],
)
def test_missing_dot_exits_1_with_the_os_install_command(system, os_release, command):
    code, out = run_doctor(**lookups(which=lambda name: None, system=system, os_release=os_release))
    assert code == 1
    assert f"MISSING dot — run: {command} (" in out
    assert "notebooks still work without it" in out
    assert "1 of" in out.splitlines()[-1]


@pytest.mark.parametrize(
    ("system", "os_release", "command"),
    [
        ("Linux", {"ID": "ubuntu", "ID_LIKE": "debian"}, "sudo apt-get install graphviz"),
        ("Linux", {"ID": "pop", "ID_LIKE": "ubuntu debian"}, "sudo apt-get install graphviz"),
        ("Linux", {"ID": "fedora"}, "sudo dnf install graphviz"),
        ("Linux", {"ID": "rocky", "ID_LIKE": "rhel centos fedora"}, "sudo dnf install graphviz"),
        ("Darwin", {}, "brew install graphviz"),
        ("Windows", {}, "winget install graphviz"),
        ("Linux", {"ID": "mystery"}, ""),
        ("SunOS", {}, ""),
    ],
)
def test_graphviz_install_command(system, os_release, command):
    assert doctor.graphviz_install_command(system, os_release) == command


def test_missing_dot_on_unknown_os_points_to_graphviz_download():
    finding = doctor.check_dot(which=lambda name: None, system="Linux", os_release={"ID": "mystery"})
    assert not finding.ok
    assert "— run:" not in finding.line()
    assert "https://graphviz.org/download/" in finding.line()


def test_dot_that_cannot_run_is_reported():
    def broken(argv):
        raise subprocess.CalledProcessError(127, argv)

    finding = doctor.check_dot(which=lambda name: "/opt/dot", run=broken, system="Darwin")
    assert not finding.ok
    assert finding.fix == "brew install graphviz"
    assert "/opt/dot" in finding.detail


def test_missing_package_names_its_own_install_command():
    code, out = run_doctor(**lookups(missing=("nbval",)))
    assert code == 1
    assert 'MISSING nbval — run: python -m pip install "nbval>=0.11,<0.12" (not installed)' in out


def test_package_outside_the_supported_range_is_reported():
    code, out = run_doctor(**lookups(versions={"jupyterlab": "3.6.7"}))
    assert code == 1
    assert 'MISSING jupyterlab — run: python -m pip install "jupyterlab>=4.2,<5"' in out
    assert "3.6.7 installed; the kit needs >=4.2,<5" in out


def test_installed_but_not_importable_package_is_reported():
    findings = doctor.check_packages(version_of=GOOD_VERSIONS.get, importable=lambda module: module != "matplotlib")
    bad = [f for f in findings if not f.ok]
    assert [f.name for f in bad] == ["matplotlib"]
    assert "import matplotlib" in bad[0].detail


def test_missing_kit_suggests_editable_install_of_this_checkout():
    code, out = run_doctor(**lookups(missing=("shopops-lab",)))
    assert code == 1
    assert f"MISSING shopops-lab — run: python -m pip install -e {ROOT}" in out


def test_every_fix_works_from_any_folder(tmp_path, monkeypatch):
    """No fix names a path relative to the checkout: run from anywhere, it does the same."""
    monkeypatch.chdir(tmp_path)
    missing = tuple(dist for dist, _, _ in doctor.REQUIRED_PACKAGES) + ("shopops-lab", "jupyterlab_widgets")
    findings = doctor.run_checks(**{**lookups(missing=missing), "python": None})
    fixes = [f.fix for f in findings if not f.ok]
    assert len(fixes) == len(missing)
    python = doctor.python_command()
    assert Path(python.strip('"')).is_absolute() and Path(python.strip('"')).exists()
    for fix in fixes:
        assert fix.startswith(f"{python} -m pip install "), fix
        assert "requirements.txt" not in fix and not fix.endswith(" ."), fix
    assert str(ROOT) in next(f.fix for f in findings if f.name == "shopops-lab")


def test_missing_jupyterlab_widgets_fails_but_widgetsnbextension_only_warns():
    code, out = run_doctor(**lookups(missing=("widgetsnbextension",)))
    assert code == 0
    assert "WARN widgetsnbextension" in out
    assert "1 optional warning" in out.splitlines()[-1]
    code, out = run_doctor(**lookups(missing=("jupyterlab_widgets",)))
    assert code == 1
    assert 'MISSING jupyterlab_widgets — run: python -m pip install "jupyterlab_widgets"' in out


def test_missing_kernelspec_suggests_ipykernel_install():
    code, out = run_doctor(**lookups(kernel_specs=lambda: {"ir": "/k/ir"}))
    assert code == 1
    assert "MISSING kernel python3 — run: python -m ipykernel install --user (not found (kernels: ir))" in out


def test_broken_kernelspec_lookup_does_not_crash_the_doctor():
    def boom():
        raise ImportError("no jupyter_client")

    finding = doctor.check_kernelspec(kernel_specs=boom)
    assert not finding.ok
    assert finding.fix == "python -m ipykernel install --user"


def test_old_python_is_reported():
    code, out = run_doctor(**lookups(version_info=(3, 10, 14)))
    assert code == 1
    assert "MISSING python — run: make clean setup (3.10.14 is too old" in out


def test_findings_are_frozen():
    finding = doctor.Finding("dot", True, "12.2.1", "")
    with pytest.raises(AttributeError):
        finding.ok = False  # type: ignore[misc]


def test_parse_os_release_strips_quotes_and_comments():
    text = "# comment\nNAME=\"Ubuntu\"\nID=ubuntu\nID_LIKE=debian\nPRETTY_NAME='Ubuntu 24.04'\njunk\n"
    assert doctor.parse_os_release(text) == {
        "NAME": "Ubuntu",
        "ID": "ubuntu",
        "ID_LIKE": "debian",
        "PRETTY_NAME": "Ubuntu 24.04",
    }


def test_required_packages_mirror_requirements_txt():
    specs = {}
    for raw in (ROOT / "requirements.txt").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name, spec = re.match(r"([A-Za-z0-9_.\-]+)\s*(.*)", line).groups()
        specs[name.lower()] = spec.replace(" ", "")
    assert specs == {dist: spec for dist, _module, spec in doctor.REQUIRED_PACKAGES}


# --- in the browser (JupyterLite) ----------------------------------------------------------


def test_in_the_browser_the_doctor_reports_the_site_without_install_advice():
    fake = lookups(
        missing=("matplotlib", "jupyterlab", "nbval", "pytest"),
        which=lambda name: None,
        place=doctor.Place.BROWSER,
        versions={"shopops-lab": "0.1.0"},
    )
    code, out = run_doctor(**fake)
    assert code == 0, out  # nothing required is missing on the offline site
    assert "ok   ipywidgets" in out and "ok   shopops-lab 0.1.0" in out
    assert "WARN matplotlib" in out and "the full plots need the online site" in out
    assert "ok   diagrams drawn by the kit itself (Graphviz cannot run in the browser)" in out
    for advice in ("apt-get", "brew", "sudo", "pip install", "make lab", "jupyterlab", "nbval"):
        assert advice not in out, advice
    assert out.rstrip().endswith("This browser site runs every lab.")


def test_in_the_browser_a_missing_ipywidgets_is_a_failure_with_a_browser_fix(monkeypatch):
    monkeypatch.setattr(doctor.sys, "platform", "emscripten")  # as Pyodide reports itself
    findings = doctor.check_packages(version_of=lambda dist: None)
    assert [(f.name, f.ok, f.required) for f in findings] == [("ipywidgets", False, True), ("matplotlib", False, False)]
    assert "lite build" in findings[0].fix and "pip" not in findings[0].fix
    assert doctor.exit_code(findings) == 1


# --- where it runs: a checkout, an installed kit, a hub, the browser ---------------------


@pytest.mark.parametrize(
    "environ, platform, checkout, place",
    [
        ({}, "linux", ROOT, doctor.Place.CHECKOUT),
        ({}, "darwin", None, doctor.Place.INSTALLED),
        ({"JUPYTERHUB_API_URL": "http://127.0.0.1:8081/hub/api"}, "linux", None, doctor.Place.HUB),
        ({"JUPYTERHUB_USER": "alice"}, "linux", ROOT, doctor.Place.HUB),  # Binder: a hub's server holding a checkout
        ({"JUPYTERHUB_USER": ""}, "linux", None, doctor.Place.INSTALLED),  # set but empty: no hub named
        ({"JUPYTERHUB_USER": "alice"}, "emscripten", None, doctor.Place.BROWSER),
    ],
)
def test_the_doctor_knows_where_it_runs(environ, platform, checkout, place):
    assert doctor.where_it_runs(environ=environ, platform=platform, checkout=checkout) is place


def test_this_checkout_is_a_checkout_unless_a_hub_says_otherwise(monkeypatch):
    for name in doctor.HUB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert doctor.where_it_runs() is doctor.Place.CHECKOUT
    monkeypatch.setenv("JUPYTERHUB_API_URL", "http://127.0.0.1:8081/hub/api")
    assert doctor.where_it_runs() is doctor.Place.HUB


@pytest.mark.parametrize("place", [doctor.Place.HUB, doctor.Place.INSTALLED])
def test_an_installed_kit_needs_no_test_tools_and_is_told_to_copy_the_notebooks(place):
    tools = tuple(sorted(doctor.TEST_TOOLS))
    code, out = run_doctor(**lookups(missing=tools, place=place))
    assert code == 0, out
    assert not any(tool in out for tool in ("pytest", "nbval", "hypothesis", "ruff", "mypy"))
    last = out.splitlines()[-1]
    assert last.startswith("All required checks passed.") and "shopops-lab notebooks ~/shopops-lab" in last
    assert "make lab" not in out
    assert ("file browser" in last) is (place is doctor.Place.HUB)
    assert ("jupyter lab ~/shopops-lab" in last) is (place is doctor.Place.INSTALLED)


def test_a_checkout_still_needs_its_test_tools_and_is_told_make_lab():
    code, out = run_doctor(**lookups(missing=("pytest",)))
    assert code == 1 and "MISSING pytest" in out
    assert run_doctor(**lookups())[1].splitlines()[-1] == "All required checks passed. Start the course with: make lab"


def test_on_a_hub_the_fixes_are_for_its_admin():
    code, out = run_doctor(**lookups(which=lambda name: None, place=doctor.Place.HUB))
    assert code == 1
    assert "ask the hub's admin to run them" in out.splitlines()[-1]
    assert "admin" not in run_doctor(**lookups(which=lambda name: None))[1]


def test_the_doctor_on_a_hub_in_a_real_process_gives_the_hubs_next_step():
    """The hub's variable, read from the real environment; ready or not, the last line is the hub's."""
    env = {k: v for k, v in os.environ.items() if k not in doctor.HUB_VARIABLES} | {"JUPYTERHUB_USER": "alice"}
    done = subprocess.run([sys.executable, "-m", "shopops_lab", "doctor"], capture_output=True, text=True, env=env)
    last = done.stdout.splitlines()[-1]
    assert "make lab" not in done.stdout
    assert last.endswith(doctor.NEXT_STEP[doctor.Place.HUB]) if done.returncode == 0 else doctor.HUB_FIXES in last


def test_without_a_checkout_the_kit_fix_is_the_install_for_everyone(monkeypatch):
    monkeypatch.setattr(doctor, "kit_checkout", lambda: None)
    assert (
        doctor.kit_install_command("python")
        == 'python -m pip install "shopops-lab[lab] @ <the kit\'s folder or wheel>"'
    )
