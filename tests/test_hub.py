"""A class on a real JupyterHub, as docs/hub.md sets one up, driven by headless Chromium.

JupyterHub (PAM login, the local process spawner: one server per user, under that user's uid)
on 127.0.0.1 behind configurable-http-proxy; the kit installed once for everyone with
docs/hub.md's line (non-editable, run from another folder: `hub_env.py`); two throwaway
students and an instructor made with useradd. Each server start hands out the notebooks with
the kit's own command (`shopops-lab notebooks ~/shopops-lab`, the spawner's command in
docs/hub.md). Alice already has an answered lab 00 in her folder, which the hand-out keeps.
Both students log in through the browser and run lab 00 and lab 08 with Run All at the same
time, save, and hand in through the shared folder docs/hub.md describes; lab 08's worker
processes leave none behind. The instructor, a third user who is not root, grades the
collected folder as it is (a folder per student). The users, their homes and the hub are
removed afterwards, also when the test fails.

Needs root (useradd), Chromium and Playwright (as test_browser.py), npm, and PyPI the first
time; elsewhere it skips and says how to get them. About 2 minutes once the venv is cached.
"""

from __future__ import annotations

import contextlib
import csv
import grp
import json
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

if os.geteuid() != 0:
    pytest.skip(
        "the hub test makes throwaway users with useradd: run it as root (CI does, through .ci/run)",
        allow_module_level=True,
    )
if shutil.which("npm") is None:
    pytest.skip("the hub test needs npm for configurable-http-proxy: sudo apt-get install npm", allow_module_level=True)

import psutil  # noqa: E402  (jupyter_server's dependency, in every setup that runs JupyterLab)
from hub_env import DROP_BOX_MODE, HAND_IN, START, HubInstall, HubUnavailable, hub_install  # noqa: E402
from test_browser import (  # noqa: E402  (skips, saying how to get them, without Chromium or Playwright)
    CHROMIUM,
    FLAGS,
    WAIT_MS,
    assert_ran_to_the_end,
    command,
    free_port,
    playwright,
    server,
    wait_for_prompt,
    watched_page,
)

ROOT = Path(__file__).resolve().parent.parent
LABS = ("00_start_here", "08_real_crashes")
IDLE = "Python 3 (ipykernel) | Idle"
KIT_NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
ALICE_ANSWER = '    return queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")\n'


@dataclass(frozen=True)
class Person:
    name: str
    password: str
    home: Path

    @property
    def ids(self) -> tuple[int, int]:
        entry = pwd.getpwnam(self.name)
        return entry.pw_uid, entry.pw_gid


@dataclass(frozen=True)
class Class:
    """The people this test made: two students and the instructor, and the instructors' group."""

    students: tuple[Person, Person]
    instructor: Person
    staff: str


# ---------------------------------------------------------------------------- people
@contextlib.contextmanager
def throwaway_class() -> Iterator[Class]:
    """Two students and an instructor (in a group of their own), removed with their homes and
    any process of theirs still running, however the test ends."""
    tag = secrets.token_hex(3)
    staff = f"shs{tag}"
    people = [Person(f"sh{tag}{role}", secrets.token_urlsafe(12), Path(f"/home/sh{tag}{role}")) for role in "abi"]
    made: list[str] = []
    try:
        subprocess.run(["groupadd", staff], check=True, capture_output=True)
        for person in people:
            groups = ["-G", staff] if person is people[2] else []
            subprocess.run(["useradd", "-m", "-s", "/bin/sh", *groups, person.name], check=True, capture_output=True)
            made.append(person.name)
            subprocess.run(["chpasswd"], input=f"{person.name}:{person.password}\n", text=True, check=True)
        yield Class(students=(people[0], people[1]), instructor=people[2], staff=staff)
    finally:
        for name in made:
            for process in processes_of(pwd.getpwnam(name).pw_uid):
                with contextlib.suppress(psutil.Error):
                    process.kill()  # a process this test started, by its pid
            subprocess.run(["userdel", "-r", name], capture_output=True)
        subprocess.run(["groupdel", staff], capture_output=True)


def processes_of(uid: int) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid]


def as_user(person: Person, argv: list[str], *, staff: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `argv` as `person` (and, given `staff`, in that group too), from their home."""
    uid, gid = person.ids
    env = {"HOME": str(person.home), "USER": person.name, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    extra = [grp.getgrnam(staff).gr_gid] if staff else []
    return subprocess.run(
        argv,
        user=uid,
        group=gid,
        extra_groups=extra,
        env=env,
        cwd=person.home,
        capture_output=True,
        text=True,
        timeout=600,
    )


def grade(instructor: Person, staff: str, shopops_lab: Path, submitted: Path, key: Path, out: Path) -> None:
    """The instructor grades the collected folder as their own user: the one place the grade
    command is spelled. What it prints is not read here; the gradebook is."""
    done = as_user(
        instructor, [str(shopops_lab), "grade", str(submitted), "--key", str(key), "--out", str(out)], staff=staff
    )
    assert done.returncode == 0, done.stderr + done.stdout


# ---------------------------------------------------------------------------- the hub
def hub_config(folder: Path, install: HubInstall, students: tuple[Person, ...], ports: dict[str, int]) -> Path:
    """docs/hub.md's configuration: PAM, the local process spawner, and the hand-out at every start."""
    config = folder / "jupyterhub_config.py"
    handout = START.format(shopops_lab=install.bin / "shopops-lab")
    config.write_text(
        f"""
c = get_config()  # noqa
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {ports["public"]}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {ports["hub"]}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{ports["proxy_api"]}"
c.ConfigurableHTTPProxy.command = [{str(install.proxy)!r}]
c.JupyterHub.db_url = "sqlite:///{folder / "jupyterhub.sqlite"}"
c.JupyterHub.cookie_secret_file = "{folder / "jupyterhub_cookie_secret"}"
c.JupyterHub.pid_file = "{folder / "jupyterhub.pid"}"
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = {set(p.name for p in students)!r}
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = ["sh", "-c", {handout!r}, {str(install.bin / "jupyterhub-singleuser")!r}]
c.Spawner.default_url = "/lab"
c.Spawner.environment = {{"PYTHONHASHSEED": "0"}}
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
"""
    )
    return config


@contextlib.contextmanager
def running_hub(folder: Path, install: HubInstall, students: tuple[Person, ...]) -> Iterator[str]:
    """JupyterHub on 127.0.0.1 until the block ends, then stopped by its PID (it stops the
    proxy and the students' servers)."""
    ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
    config = hub_config(folder, install, students, ports)
    env = dict(os.environ, PATH=f"{install.bin}:{os.environ.get('PATH', '')}")
    url = f"http://127.0.0.1:{ports['public']}"
    with server([str(install.bin / "jupyterhub"), "-f", str(config)], cwd=folder, probe=f"{url}/hub/api", env=env):
        yield url


# ---------------------------------------------------------------------------- the students
def log_in(page, url: str, person: Person) -> None:
    page.goto(f"{url}/hub/login")
    page.locator("#username_input").fill(person.name)
    page.locator("#password_input").fill(person.password)
    page.locator("#login_submit").click()
    page.wait_for_url(f"{url}/user/{person.name}/lab**", timeout=WAIT_MS)


def start_run_all(page, url: str, person: Person, lab: str) -> None:
    page.goto(f"{url}/user/{person.name}/lab/tree/shopops-lab/{lab}.ipynb?reset")
    page.get_by_text(IDLE).first.wait_for()
    command(page, "Clear Outputs of All Cells")
    command(page, "Run All Cells")


def finish_and_save(page, person: Person, lab: str) -> list[str]:
    """Wait for Run All to reach the last cell, save, and wait for the file to hold every output."""
    wait_for_prompt(page, -1)
    page.get_by_text(IDLE).first.wait_for()
    prompts = [p.strip() for p in page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt").all_inner_texts()]
    command(page, "Save Notebook")
    path = person.home / "shopops-lab" / f"{lab}.ipynb"
    deadline = time.monotonic() + 60
    while not all(c.get("execution_count") for c in code_cells(path)):  # the save lands, bounded
        assert time.monotonic() < deadline, f"{path} was not saved with its outputs"
        time.sleep(0.5)
    return prompts


def code_cells(path: Path) -> list[dict]:
    try:
        return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    except (OSError, ValueError):
        return [{}]  # mid-save


def draw_every_cell(person: Person) -> None:
    """JupyterLab draws only the cells in view by default; the test reads every cell's prompt."""
    settings = person.home / ".jupyter" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    subprocess.run(["chown", "-R", person.name, person.home / ".jupyter"], check=True)


def source_of(path: Path) -> str:
    return "".join("".join(c["source"]) for c in code_cells(path))


def answer_lab_00(person: Person) -> None:
    """Alice's lab 00 from an earlier session: the exercise answered, in her folder, hers."""
    folder = person.home / "shopops-lab"
    folder.mkdir()
    notebook = json.loads((ROOT / "notebooks" / "00_start_here.ipynb").read_text())
    (cell,) = [c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "warmup-answer"]
    source = "".join(cell["source"])
    cell["source"] = source.split("    # YOUR CODE HERE")[0] + ALICE_ANSWER
    (folder / "00_start_here.ipynb").write_text(json.dumps(notebook, indent=1) + "\n")
    uid, gid = person.ids
    for path in (folder, folder / "00_start_here.ipynb"):
        os.chown(path, uid, gid)


def hand_in(person: Person, submitted: Path) -> None:
    """docs/hub.md's hand-in: a folder of the student's own in the drop box, readable by staff alone."""
    files = " ".join(f'"$HOME/shopops-lab/{lab}.ipynb"' for lab in LABS)
    line = HAND_IN.format(submitted=submitted, files=files)
    done = as_user(person, ["sh", "-c", line])
    assert done.returncode == 0, done.stderr


def drop_box(folder: Path, instructor: Person, staff: str) -> Path:
    """docs/hub.md's shared folder: students may add a folder of their own, and see no other."""
    submitted = folder / "submitted"
    submitted.mkdir()
    os.chown(submitted, instructor.ids[0], grp.getgrnam(staff).gr_gid)
    submitted.chmod(DROP_BOX_MODE)
    return submitted


# ---------------------------------------------------------------------------- the test
@pytest.fixture(scope="module")
def install() -> Iterator[HubInstall]:
    try:
        with hub_install() as made:
            yield made
    except HubUnavailable as err:
        if os.environ.get("CI"):  # CI reaches PyPI and npm: there the install must work
            raise
        pytest.skip(f"the hub's installs could not be made here: {err}")


def test_two_students_run_labs_00_and_08_on_a_real_jupyterhub_and_an_instructor_grades_them(install):
    course = Path(tempfile.mkdtemp(prefix="shopops-hub-"))
    course.chmod(0o755)
    try:
        with throwaway_class() as people:
            alice, bob = people.students
            answer_lab_00(alice)
            for person in people.students:
                draw_every_cell(person)
            submitted = drop_box(course, people.instructor, people.staff)
            with running_hub(course, install, people.students) as url, playwright.sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                with contextlib.ExitStack() as pages_open:  # a failure leaves each page's screenshot
                    pages = {}
                    for person in people.students:  # log in: the spawner hands out the notebooks
                        context = pages_open.enter_context(contextlib.closing(browser.new_context()))
                        pages[person], _ = pages_open.enter_context(watched_page(context, f"hub-{person.name[-1]}"))
                        log_in(pages[person], url, person)
                    for person in people.students:
                        folder = person.home / "shopops-lab"
                        assert sorted(p.name for p in folder.glob("*.ipynb")) == KIT_NOTEBOOKS
                        assert {p.stat().st_uid for p in folder.iterdir()} == {person.ids[0]}
                    assert ALICE_ANSWER in source_of(alice.home / "shopops-lab" / "00_start_here.ipynb")  # kept
                    for lab in LABS:  # both students at once
                        for person, page in pages.items():
                            start_run_all(page, url, person, lab)
                        for person, page in pages.items():
                            assert_ran_to_the_end(page, lab, finish_and_save(page, person, lab))
                    for person in people.students:  # lab 08's workers are gone: the server and its kernels remain
                        left = [" ".join(p.cmdline()[:3]) for p in processes_of(person.ids[0])]
                        assert all("jupyterhub-singleuser" in c or "ipykernel_launcher" in c for c in left), left
                        hand_in(person, submitted)
                browser.close()
            key = people.instructor.home / "course" / "solutions"
            shutil.copytree(ROOT / "solutions", key)
            subprocess.run(["chown", "-R", people.instructor.name, key.parent], check=True)
            out = people.instructor.home / "grades"
            grade(people.instructor, people.staff, install.bin / "shopops-lab", submitted, key, out)
            with open(out / "grades.csv", newline="") as stream:
                rows = {(r["student"], r["lab"]): r for r in csv.DictReader(stream) if r["submission"] != "max"}
            assert sorted(rows) == sorted((p.name, lab[:2]) for p in people.students for lab in LABS)
            assert all(r["status"] == "graded" for r in rows.values()), {
                k: (r["status"], r.get("problem", "")) for k, r in rows.items()
            }
            assert rows[alice.name, "00"]["warmup-test"] == "1" and rows[bob.name, "00"]["warmup-test"] == "0"
            assert rows[alice.name, "08"]["points"] == rows[bob.name, "08"]["points"] == "0"
            assert out.stat().st_uid == people.instructor.ids[0]
    finally:
        shutil.rmtree(course, ignore_errors=True)
