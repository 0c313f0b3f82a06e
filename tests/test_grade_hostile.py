"""A hostile class, graded by the real command line as root and as an ordinary user.

Each submission's answer cell attacks the host before it defines its (wrong) answer: it
appends to the gradebook, the key, another student's notebook, the kit's own source and a
folder on Python's search path the grading user may write (a `.pth` file there would run
in every later Python); it reads the key and another student's notebook; it stops every
process it can see (the judge, the grader); it forks 300 times; it leaves a detached
process (setsid, double fork) that keeps rewriting grades.csv; it writes big files to
/dev/shm and /tmp; it connects to a TCP listener this test opens on 127.0.0.1. Every cell
then says what it managed, by `sys.exit(...)`, which the grader notes for the instructor.

Held means: the file is unchanged (or was never made), the processes are gone when `grade`
returns, the connection never arrived, nothing is left in /dev/shm or /tmp; and the cell
itself saw each attempt refused. As root the learner runs under a uid of its own in a
mount namespace, with Landlock added; as an ordinary user (here a uid of no account, as
`test_grade_private.py` makes one; run by an ordinary user, that user) it owns every file
of the class, the kit and the key, so only Landlock, its user namespace and the grader's
subreaper stand in the way."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grade_fixtures as fx
import pytest

from shopops_lab.course.grade import confinement, landlock
from shopops_lab.course.grade.learner import PROCESS_LIMIT

MARK = f"hx{os.getpid() % 100000}"  # the attackers' processes and files are named after it
ORDINARY_UID = 0x6E000000 + os.getpid() % 2**16  # no account's
FORKS = 300
WRONG = fx.KEY_FROM_TOKEN.strip("\n")

# Answers that game the checks instead of answering: each finds the right answer where the kit's
# answer keys can be read (a notebook: proved below), and none can in a graded learner's process.
ASKS_THE_CHECK = """
from itertools import combinations
from shopops_lab.checks import lab01 as _lab01
def what_can_happen_next():
    labels = sorted(_lab01.NEXT_OPTIONS)
    for n in range(1, len(labels) + 1):
        for combo in combinations(labels, n):
            try:
                if _lab01.knowledge.result(lambda combo=combo: set(combo)).correct:
                    return set(combo)
            except Exception:
                pass
    return {"w1_stopped"}
"""
READS_THE_KEY = """
def what_can_happen_next():
    from shopops_lab.checks import answers
    return set(answers.load("lab01").CAN_HAPPEN)
"""
READS_THE_FILE = """
def what_can_happen_next():
    import os, shopops_lab
    path = os.path.join(os.path.dirname(shopops_lab.__file__), "checks", "answer_key" + "s", "lab01.py")
    scope = {}
    exec(open(path).read(), scope)
    return set(scope["CAN_HAPPEN"])
"""
EXECS_THE_MODEL_ANSWER = """
import os as _os, shopops_lab as _kit
_scope = {}
exec(open(_os.path.join(_os.path.dirname(_kit.__file__), "checks", "answer_keys", "model_answers.py")).read(), _scope)
exec(_scope["MODEL_ANSWERS"]["01.1"])
"""
# name -> (its answer cells, the test cell it games)
GAMERS = {
    "asks": ({"what-next": ASKS_THE_CHECK, "send-followup": fx.RIGHT}, "what-next-test"),
    "keys": ({"what-next": READS_THE_KEY, "send-followup": fx.RIGHT}, "what-next-test"),
    "file": ({"what-next": READS_THE_FILE, "send-followup": fx.RIGHT}, "what-next-test"),
    "model": ({"send-followup": EXECS_THE_MODEL_ANSWER, "what-next": fx.RIGHT}, "send-followup-test"),
}

APPEND = """
import os, sys
_done = []
for _path in {targets!r}:
    try:
        with open(_path, "a") as _handle:
            _handle.write("\\nhostile\\n")
        _done.append(os.path.basename(_path))
    except OSError:
        pass
"""
READ = """
import sys
_done = []
for _path, _word in {targets!r}:
    try:
        with open(_path, "rb") as _handle:
            if _word.encode() in _handle.read():
                _done.append(_word)
    except OSError:
        pass
"""
STOP = """
import os, signal, sys
_done = []
for _pid in [os.getppid(), *(int(p) for p in os.listdir("/proc") if p.isdigit())]:
    if _pid != os.getpid():
        try:
            os.kill(_pid, signal.SIGSTOP)
            _done.append(_pid)
        except OSError:
            pass
"""
FORK = """
import ctypes, os, signal, sys
_done = []
for _ in range({forks}):
    try:
        _pid = os.fork()
    except OSError:
        break
    if _pid == 0:
        ctypes.CDLL(None).prctl(15, {mark!r}.encode(), 0, 0, 0)  # its name, as /proc/<pid>/comm shows it
        signal.pause()
        os._exit(0)
    _done.append(_pid)
_done = len(_done)
"""
ESCAPE = """
import ctypes, os, sys, time
_read, _write = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, {mark!r}.encode(), 0, 0, 0)
        os.write(_write, str(os.getpid()).encode().ljust(16))
        while True:  # outlive the run, rewriting the gradebook
            try:
                with open({gradebook!r}, "w") as _handle:
                    _handle.write("submission,points\\nescapee,99\\n")
            except OSError:
                pass
            time.sleep(0.05)
    os._exit(0)
_done = int(os.read(_read, 16))
"""
LEFTOVERS = """
import sys
_done = []
for _path in {targets!r}:
    try:
        with open(_path, "wb") as _handle:
            _handle.write(b"x" * 2**23)
        _done.append(_path)
    except OSError:
        pass
"""
CONNECT = """
import socket, sys
_done = []
for _what in ("connect", "bind"):
    _sock = socket.socket()
    try:
        _sock.connect(("127.0.0.1", {port})) if _what == "connect" else _sock.bind(("127.0.0.1", 0))
        _done.append(_what)
    except OSError:
        pass
    _sock.close()
"""


@dataclass(frozen=True)
class Class:
    """The folders of one hostile run (`private` holds them all, owned by the grading user)."""

    private: Path
    kit: Path  # a copy of the kit, graded from
    key: Path
    site: Path  # a folder on Python's search path that the grading user may write
    submissions: Path
    out: Path

    @classmethod
    def at(cls, private: Path) -> Class:
        kit = private / "course"
        return cls(private, kit, kit / "solutions", private / "packages", private / "class", private / "out")

    def targets(self) -> dict[str, list[str]]:
        """What each append attack writes to."""
        import sysconfig

        return {
            "gradebook": [str(self.out / "grades.csv"), str(self.out / "planted.txt")],
            "key": [str(next(self.key.glob("01_*.ipynb")))],
            "classmate": [str(self.submissions / "right_lab01.ipynb")],
            "kit": [str(self.kit / "shopops_lab" / "__init__.py")],
            "sitepackages": [
                str(self.site / f"{MARK}.pth"),
                str(Path(sysconfig.get_paths()["purelib"]) / f"{MARK}.pth"),
            ],
        }


def attacks(room: Class, port: int) -> dict[str, str]:
    """Each attack's code, by submission name: it ends `sys.exit(f"<name> {what it managed}")`."""
    targets = room.targets()
    code = {name: APPEND.format(targets=paths) for name, paths in targets.items()}
    code["read"] = READ.format(
        targets=[(str(next(room.key.glob("01_*.ipynb"))), "BEGIN SOLUTION"), (targets["classmate"][0], "nbformat")]
    )
    code["stop"] = STOP
    code["fork"] = FORK.format(forks=FORKS, mark=MARK + "f")
    code["escape"] = ESCAPE.format(mark=MARK + "e", gradebook=str(room.out / "grades.csv"))
    code["leftovers"] = LEFTOVERS.format(targets=[f"/dev/shm/{MARK}-shm", f"/tmp/{MARK}-tmp"])
    code["tcp"] = CONNECT.format(port=port)
    return {name: f"{source}\nsys.exit(f'{name} {{_done}}')\n{WRONG}" for name, source in code.items()}


@dataclass(frozen=True)
class Graded:
    mode: str  # "root" or "ordinary user"
    room: Class
    rows: dict[str, dict[str, Any]]
    before: dict[str, bytes | None]
    listener: socket.socket
    stdout: str


def _snapshot(room: Class) -> dict[str, bytes | None]:
    return {
        path: Path(path).read_bytes() if Path(path).exists() else None
        for paths in room.targets().values()
        for path in paths
    }


def _marked(name: str) -> list[int]:
    """Live processes called `name` (the forks', the escapee's); zombies do not count."""
    found = []
    for name in os.listdir("/proc"):
        try:
            comm = Path(f"/proc/{name}/comm").read_text().strip()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if comm == name and state not in ("Z", "X"):
            found.append(int(name))
    return found


def _wait_until_gone(name: str, deadline_seconds: float = 30.0) -> list[int]:
    """The processes called `name` still alive after polling up to the deadline (none: all gone)."""
    deadline = time.monotonic() + deadline_seconds
    while (left := _marked(name)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _setup(root: Path, owner: int | None, port: int) -> Class:
    room = Class.at(root / "private")
    room.private.mkdir(mode=0o700)
    shutil.copytree(fx.ROOT / "shopops_lab", room.kit / "shopops_lab", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(fx.SOLUTIONS, room.key)
    room.site.mkdir()
    room.out.mkdir()
    fx.write(fx.all_right("01"), room.submissions / "right_lab01.ipynb")
    for name, (cells, _) in GAMERS.items():
        fx.write(fx.submission("01", cells), room.submissions / f"{name}_lab01.ipynb")
    for name, source in attacks(room, port).items():
        fx.write(
            fx.submission("01", {"send-followup": source, "what-next": fx.RIGHT}),
            room.submissions / f"{name}_lab01.ipynb",
        )
    if owner is not None:
        for path in (room.private, *room.private.rglob("*")):
            os.chown(path, owner, owner)
    return room


def _command(room: Class, as_ordinary: bool) -> tuple[list[str], dict[str, str]]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COV_"))},
        "PYTHONPATH": str(room.site),
        "HOME": str(room.private),
        "SHOPOPS_GRADE_CACHE": str(room.private / "cache"),
    }
    command = [sys.executable, "-m", "shopops_lab", "grade", str(room.submissions)]
    command += ["--key", str(room.key), "--out", str(room.out), "--jobs", "2", "--timeout", "60"]
    if as_ordinary:
        from shopops_lab.course.grade import view

        needs = [*view.needed("/"), str(room.private)]
        command = [sys.executable, "-c", fx.AS_ORDINARY_USER, json.dumps(needs), str(ORDINARY_UID), *command]
    return command, env


@pytest.fixture(scope="module", params=["root", "ordinary user"])
def hostile(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    root_here = confinement.can_drop()
    if request.param == "root" and not (root_here and confinement.can_hide()):
        pytest.skip("grading as root needs Linux, root and mount namespaces (run the suite as root, as .ci/run does)")
    if request.param == "ordinary user":
        if not landlock.abi():
            pytest.skip("an ordinary user's grading needs Landlock: Linux 5.13 or later with landlock in its lsm= list")
        if root_here and not confinement.can_hide():
            pytest.skip("becoming an ordinary user who can read this Python needs mount namespaces (root on Linux)")
    as_ordinary = request.param == "ordinary user" and root_here
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    room = _setup(tmp_path_factory.mktemp("hostile"), ORDINARY_UID if as_ordinary else None, listener.getsockname()[1])
    before = _snapshot(room)
    command, env = _command(room, as_ordinary)
    grader = subprocess.Popen(
        command,
        cwd=room.kit,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = grader.communicate(timeout=240)
    except subprocess.TimeoutExpired:  # a stopped grader: say so, and leave none of its group behind
        os.killpg(grader.pid, 9)
        grader.communicate()
        pytest.fail("grade did not finish in 240 s: an attack stopped it")
    assert grader.returncode == 0, stderr
    rows = {row["student"] + "_lab01": row for row in json.loads((room.out / "grades.json").read_text())["submissions"]}
    yield Graded(request.param, room, rows, before, listener, stdout)
    listener.close()
    for path in (f"/dev/shm/{MARK}-shm", f"/tmp/{MARK}-tmp"):
        Path(path).unlink(missing_ok=True)


def managed(graded: Graded, attack: str) -> str:
    """What the attack's cell said it managed (its sys.exit, noted by the grader)."""
    row = graded.rows[f"{attack}_lab01"]
    said = [m.group(1) for note in row["notes"] if (m := re.search(rf"sys\.exit\('{attack} (.*?)'\)", note))]
    assert said, row["notes"]  # the attack ran, and its cell ended as it says
    return said[0]


def test_every_attacker_is_graded_and_scores_only_its_honest_exercise(hostile: Graded) -> None:
    """The fork bomb's own processes, held until its submission ends, use up its limit: its
    checks cannot fork a worker, which costs it (and nobody else) the honest exercise too."""
    assert set(hostile.rows) == {f"{name}_lab01" for name in [*attacks(hostile.room, 1), *GAMERS, "right"]}
    for name, row in hostile.rows.items():
        if name.removesuffix("_lab01") in GAMERS:
            continue
        points = {e["grade_id"]: e["points"] for e in row["exercises"]}
        assert points["send-followup-test"] == (1 if name == "right_lab01" else 0), (name, row["reason"])
        if name != "fork_lab01":
            assert row["status"] == "graded" and points["what-next-test"] == 1, (name, row["reason"])


@pytest.mark.parametrize("name", sorted(GAMERS))
def test_an_answer_that_games_the_checks_finds_the_key_in_a_notebook(name: str) -> None:
    """The attack is real: in one process, where the answer keys can be read, each gamer finds
    the right answer (and the check passes it)."""
    from shopops_lab.checks import lab01

    cells, test = GAMERS[name]
    namespace: dict[str, Any] = {}
    for cell, source in cells.items():
        exec(fx.right_answer("01", cell) if source is fx.RIGHT else source, namespace)
    exercise, answer = (
        (lab01.knowledge, "what_can_happen_next") if test == "what-next-test" else (lab01.exercise, "send_followup")
    )
    assert exercise.result(namespace[answer]).correct


@pytest.mark.parametrize("name", sorted(GAMERS))
def test_an_answer_that_games_the_checks_cannot_read_the_keys_and_is_named(hostile: Graded, name: str) -> None:
    """Graded, the learner's process holds no answer data: asking the knowledge check for each
    option, loading the keys, reading their file or the model answers all fail, so the gamed
    exercise scores 0 (the honest one beside it full), and an answer that names the keys is
    named to the instructor."""
    row = hostile.rows[f"{name}_lab01"]
    points = {e["grade_id"]: e["points"] for e in row["exercises"]}
    _, gamed = GAMERS[name]
    honest = ({"what-next-test", "send-followup-test"} - {gamed}).pop()
    assert (points[gamed], points[honest]) == (0, 1), (name, row["exercises"])
    named = any("reaches for the kit's answer keys" in note for note in row["notes"])
    assert named == (name in ("keys", "model")), row["notes"]  # "file" spells the folder's name apart


@pytest.mark.parametrize("attack", ["gradebook", "key", "classmate", "kit", "sitepackages"])
def test_no_file_outside_the_scratch_folder_is_written(hostile: Graded, attack: str) -> None:
    assert managed(hostile, attack) == "[]"
    for path in hostile.room.targets()[attack]:
        now = Path(path).read_bytes() if Path(path).exists() else None
        if path.endswith("grades.csv"):  # the grader's own, written at the end
            assert now is not None and now.startswith(b"submission,student,lab,status") and b"\nhostile\n" not in now
        else:
            assert now == hostile.before[path], path


def test_the_key_and_other_notebooks_cannot_be_read(hostile: Graded) -> None:
    assert managed(hostile, "read") == "[]"


def test_no_process_of_the_grader_can_be_stopped(hostile: Graded) -> None:
    assert managed(hostile, "stop") == "[]"  # and the run finished (the fixture)


def test_a_fork_bomb_is_bounded_and_ended(hostile: Graded) -> None:
    forked = int(managed(hostile, "fork"))
    assert 0 < forked < PROCESS_LIMIT < FORKS
    assert _wait_until_gone(MARK + "f") == []


def test_a_detached_process_is_ended_with_its_submission(hostile: Graded) -> None:
    escaped = int(managed(hostile, "escape"))  # it did start, in a session of its own
    assert escaped > 1
    assert _wait_until_gone(MARK + "e") == []
    text = (hostile.room.out / "grades.csv").read_bytes()
    assert text.startswith(b"submission,student,lab,status") and b"escapee" not in text


def test_nothing_is_left_in_dev_shm_or_tmp(hostile: Graded) -> None:
    assert managed(hostile, "leftovers") == "[]"
    left = [f"{folder}/{name}" for folder in ("/dev/shm", "/tmp") for name in os.listdir(folder) if MARK in name]
    assert left == []


def test_no_tcp_connection_is_made_nor_port_bound(hostile: Graded) -> None:
    assert managed(hostile, "tcp") == "[]"
    with pytest.raises(BlockingIOError):  # nothing arrived at the listener
        hostile.listener.accept()


def test_the_summary_line_says_how_learner_code_was_confined(hostile: Graded) -> None:
    said = re.search(r"confined: ([^)]*)\)", hostile.stdout)
    assert said, hostile.stdout
    document = json.loads((hostile.room.out / "grades.json").read_text())
    assert document["confinement"] == said.group(1)
    assert f"Landlock ABI {landlock.abi()}" in said.group(1)
    assert ("uid drop" in said.group(1)) == (hostile.mode == "root")
