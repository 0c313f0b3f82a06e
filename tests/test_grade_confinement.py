"""Confinement, one piece at a time: the Landlock calls (each in a forked child, since a
restriction is for good), what a learner's process may read and write, the grader's reaper
of orphans, the process count of an ordinary user's learner, and `grade`'s refusal where
nothing confines learner code. `test_grade_hostile.py` grades a hostile class with all of
it at once."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grade_fixtures as fx
import pytest

from shopops_lab import cli
from shopops_lab.course.errors import UnconfinedError
from shopops_lab.course.grade import confinement, judge, landlock
from shopops_lab.course.grade.confinement import KIT_PACKAGE, Confinement, Reaper
from shopops_lab.course.grade.judge import Limits
from shopops_lab.course.grade.results import Mark, Status
from shopops_lab.course.grade.run import grade

needs_landlock = pytest.mark.skipif(
    not landlock.abi(),
    reason="Landlock needs Linux 5.13 or later with landlock among its security modules (boot with lsm=...,landlock)",
)
LIMITS = Limits(cell_seconds=60.0, notebook_seconds=600.0, memory_mb=512)
ORDINARY_UID = 0x6D000000 + os.getpid() % 2**16  # no account's


def in_child(body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`body()` run in a forked child (whatever it walls itself into ends with it); its result."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            found: dict[str, Any] = body()
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            found = {"error": repr(exc)}
        os.write(write, json.dumps(found).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as handle:
        text = handle.read()
    os.waitpid(pid, 0)
    return dict(json.loads(text))


def attempts(folder: Path, port: int) -> dict[str, bool]:
    """What a process may do, each tried once: True where it worked."""

    def works(action: Callable[[], object]) -> bool:
        try:
            action()
        except OSError:
            return False
        return True

    def signal_own_child() -> None:
        child = os.fork()
        if child == 0:
            signal.pause()
            os._exit(0)
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)

    return {
        "read given": works(lambda: (folder / "given" / "page.txt").read_text()),
        "read other": works(lambda: (folder / "other.txt").read_text()),
        "write scratch": works(lambda: (folder / "scratch" / "new.txt").write_text("x")),
        "write given": works(lambda: (folder / "given" / "page.txt").write_text("x")),
        "write tmp": works(lambda: Path(f"/tmp/shopops-walls-{os.getpid()}").write_text("x")),
        "devnull": works(lambda: open(os.devnull, "w").close()),  # noqa: SIM115 - opened with O_TRUNC, as open() does
        "tcp": works(lambda: socket.create_connection(("127.0.0.1", port), timeout=5).close()),
        "signal parent": works(lambda: os.kill(os.getppid(), 0)),
        "signal own child": works(signal_own_child),
    }


@pytest.fixture()
def walled(tmp_path: Path) -> Path:
    (tmp_path / "given").mkdir()
    (tmp_path / "given" / "page.txt").write_text("readable")
    (tmp_path / "other.txt").write_text("secret")
    (tmp_path / "scratch").mkdir()
    return tmp_path


def _walled_attempts(folder: Path, abi: int) -> dict[str, Any]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        rules = landlock.Rules(read=(str(folder / "given"),), write=(str(folder / "scratch"), os.devnull))

        def body() -> dict[str, Any]:
            landlock.restrict(rules, abi)
            return attempts(folder, port)

        return in_child(body)


@needs_landlock
def test_landlock_keeps_a_process_to_its_rules(walled: Path) -> None:
    assert attempts(walled, socket.create_server(("127.0.0.1", 0)).getsockname()[1])["read other"]  # before: all open
    found = _walled_attempts(walled, landlock.abi())
    assert found == {
        "read given": True,
        "read other": False,
        "write scratch": True,
        "write given": False,
        "write tmp": False,
        "devnull": True,
        "tcp": landlock.abi() < 4,
        "signal parent": landlock.abi() < 6,
        "signal own child": True,
    }


@needs_landlock
def test_an_older_abi_leaves_out_what_it_lacks_and_says_so(walled: Path) -> None:
    """Under ABI 3 (Linux 6.2) the kernel refuses files as before, but not TCP or signals;
    `missing` names exactly those."""
    found = _walled_attempts(walled, min(3, landlock.abi()))
    assert not found["read other"] and not found["write tmp"]
    assert found["tcp"] and found["signal parent"]
    assert landlock.missing(3) == (
        "open TCP connections and listen on TCP ports",
        "use device ioctls",
        "signal processes and reach abstract Unix sockets outside its own",
    )
    assert landlock.missing(6) == landlock.missing(7) == ()
    rights = [landlock.fs_rights(v) for v in (1, 2, 3, 4, 5, 7)]  # ABI 4, 6 and 7 add no file right
    assert rights == [2**13 - 1, 2**14 - 1, 2**15 - 1, 2**15 - 1, 2**16 - 1, 2**16 - 1]


def test_a_learner_reads_python_and_the_kits_package_but_not_the_key_nor_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    (tmp_path / "packages").mkdir()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(sys, "path", [str(KIT_PACKAGE.parent), str(course), str(tmp_path / "packages"), *sys.path])
    rules = confinement.rules(str(scratch), [course / "solutions", tmp_path / "out"])
    assert os.path.dirname(os.__file__) in rules.read
    # the kit's package: every module read, the folders on the way to its answer keys only listed,
    # and the keys neither read nor listed (a learner's process holds no answer data)
    assert str(KIT_PACKAGE) in rules.listed and str(KIT_PACKAGE / "checks") in rules.listed
    assert str(KIT_PACKAGE / "checks" / "lab01.py") in rules.read and str(KIT_PACKAGE / "course") in rules.read
    keys = KIT_PACKAGE / "checks" / "answer_keys"
    assert not any(Path(p) == keys or keys in Path(p).parents for p in (*rules.read, *rules.listed))
    assert str(Path(sys.prefix).resolve()) in rules.read and str((tmp_path / "packages").resolve()) in rules.read
    assert str(KIT_PACKAGE.parent) not in rules.read  # a checkout: its masters and .git beside the package
    assert str(course.resolve()) not in rules.read  # holds the key
    assert not any(str(course) in path or str(tmp_path / "out") in path for path in rules.read)
    assert rules.write == (str(scratch.resolve()), os.devnull)


def _double_fork() -> int:
    """A process that leaves its session and its parent, as an escaping learner's would: its pid."""
    read, write = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(write, str(os.getpid()).encode().ljust(16))
            signal.pause()
        os._exit(0)
    os.waitpid(middle, 0)
    pid = int(os.read(read, 16))
    os.close(read)
    os.close(write)
    return pid


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.mark.skipif(sys.platform != "linux", reason="a child subreaper is Linux's (prctl PR_SET_CHILD_SUBREAPER)")
def test_the_reaper_ends_a_process_that_left_its_group_and_its_parent_and_spares_the_graders_own() -> None:
    def pause_child() -> int:
        pid = os.fork()
        if pid == 0:
            signal.pause()
            os._exit(0)
        return pid

    before = pause_child()  # the grader's own, from before (a zygote, a test's helper)
    reaper = Reaper()
    try:
        judge = pause_child()  # born during the run, in the grader's session: a judge
        escaped = _double_fork()
        assert _parent(escaped) == os.getpid()  # its parent gone: adopted, not handed to init
        assert reaper.sweep() == 1
        assert not _alive(escaped) and _alive(before) and _alive(judge)
    finally:
        reaper.close()
        for pid in (before, judge):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    assert reaper.sweep() == 0  # closed: orphans go where they went before


@pytest.mark.skipif(
    not confinement.can_count(), reason="needs user namespaces (Linux 5.14+, user.max_user_namespaces > 0)"
)
def test_an_ordinary_users_learner_counts_its_processes_from_its_own_start() -> None:
    def body() -> dict[str, Any]:
        import ctypes
        import resource

        if os.getuid() == 0:  # root is never counted: become an ordinary user (of no account) first
            os.setgroups([])
            os.setgid(ORDINARY_UID)
            os.setuid(ORDINARY_UID)
            ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE, as exec would make it (its /proc its own)
        confinement.count_from_here()
        resource.setrlimit(resource.RLIMIT_NPROC, (8, 8))
        forked = []
        for _ in range(20):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                signal.pause()
                os._exit(0)
            forked.append(pid)
        for pid in forked:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        return {"forked": len(forked), "uid": os.getuid()}

    uid = ORDINARY_UID if os.getuid() == 0 else os.getuid()
    assert in_child(body) == {"forked": 7, "uid": uid}  # 8 with itself, whatever else the user runs


def test_grade_refuses_where_nothing_confines_learner_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Confinement, "detect", classmethod(lambda cls: cls()))
    fx.write(fx.all_right("00"), tmp_path / "in" / "ada_lab00.ipynb")
    with pytest.raises(UnconfinedError) as refused:
        grade([str(tmp_path / "in")], key=fx.SOLUTIONS, out=tmp_path / "out", jobs=1, limits=LIMITS)
    assert "nothing was graded" in str(refused.value) and "--unconfined" in str(refused.value)
    assert "read the key" in str(refused.value) and not (tmp_path / "out").exists()


def test_unconfined_grades_and_first_says_what_a_learner_could_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(Confinement, "detect", classmethod(lambda cls: cls()))
    fx.write(fx.all_right("00"), tmp_path / "in" / "ada_lab00.ipynb")
    args = ["grade", str(tmp_path / "in"), "--key", str(fx.SOLUTIONS), "--out", str(tmp_path / "out"), "--jobs", "1"]
    assert cli.main(args) == 2
    assert "error: Learner code cannot be confined here" in capsys.readouterr().err
    assert cli.main([*args, "--unconfined"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("warning: grading unconfined: a learner's code can read the key, every submission")
    assert "confined: none)" in out
    assert json.loads((tmp_path / "out" / "grades.json").read_text())["confinement"] == "none"


@needs_landlock
def test_a_learner_process_that_cannot_read_python_within_its_walls_is_the_graders_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Walls that leave out Python's library would fail the learner's later imports: the
    process checks before any learner code, and the row charges nothing."""
    real = judge._learner_config

    def narrow(job: Any, warm: Any) -> dict[str, Any]:
        return {**real(job, warm), "landlock": {"abi": landlock.abi(), "read": [], "write": [job.learner_scratch]}}

    monkeypatch.setattr(judge, "_learner_config", narrow)
    fx.write(fx.all_right("01"), tmp_path / "in" / "right_lab01.ipynb")
    report = grade([str(tmp_path / "in")], key=fx.SOLUTIONS, out=tmp_path / "out", jobs=1, limits=LIMITS)
    (result,) = report.results
    assert result.status is Status.GRADER_ERROR and "within its Landlock walls" in result.reason, result.reason
    assert os.path.dirname(os.__file__) in result.reason
    auto = [e for e in result.exercises if e.kind.value == "auto"]
    assert auto and all(e.mark is Mark.NOT_GRADED and e.points is None for e in auto)
