"""The commands at their edges: a closed standard output, an --out that is not a site, a port
that cannot be listened on. Each is refused in one line with exit status 2, and nothing is
deleted or half-written."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from shopops_lab import cli
from shopops_lab.course import lite
from shopops_lab.errors import BadArgumentError
from shopops_lab.sim import cli as sim_cli

ROOT = Path(__file__).resolve().parent.parent
# one ordinary invocation per subcommand: what each would run if its output were open
INVOCATIONS = {
    "doctor": ["doctor"],
    "build-notebooks": ["build-notebooks", "--check"],
    "grade": ["grade", "--help"],
    "simulate": ["simulate", "burst_day"],
    "lite": ["lite", "serve", "--dir", "."],
    "chaos": ["chaos", "--db", "sqlite:///{tmp}/c.db"],
    "notebooks": ["notebooks", "{tmp}/dest"],
    "reveals": ["reveals"],
}


def one_error_line(err: str) -> bool:
    return err.startswith("error: ") and err.count("\n") == 1


# ---------------------------------------------------------------------------- the parser
def test_a_subcommand_declares_only_its_own_options_and_help_still_lists_every_command():
    """Declaring a subcommand's options imports its module: `grade` waits for none of the others."""
    probe = (
        "import sys; from shopops_lab import cli; "
        "args = cli.build_parser(['grade', 'a.ipynb', '--jobs', '3']).parse_args(['grade', 'a.ipynb', '--jobs', '3']); "
        "print(args.jobs, args.submissions, sorted(m for m in ('shopops_lab.course.lite', 'shopops_lab.sim.cli', "
        "'shopops_lab.chaos.cli', 'shopops_lab.course.grade.command') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.split("\n")[0] == "3 ['a.ipynb'] ['shopops_lab.course.grade.command']"
    listed = subprocess.run(
        [sys.executable, "-m", "shopops_lab", "--help"], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout
    assert all(command.name in listed for command in cli.COMMANDS)
    for name in ("grade", "simulate", "lite"):  # each still knows its own options
        assert (
            "usage: shopops-lab " + name
            in subprocess.run(
                [sys.executable, "-m", "shopops_lab", name, "--help"],
                capture_output=True,
                text=True,
                cwd=ROOT,
                check=True,
            ).stdout
        )


# ---------------------------------------------------------------------------- a closed standard output
def test_every_subcommand_is_covered():
    assert {command.name for command in cli.COMMANDS} == set(INVOCATIONS)


@pytest.mark.parametrize("name", sorted(INVOCATIONS))
def test_with_stdout_closed_every_subcommand_refuses_in_one_line_and_does_nothing(name, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        cli,
        "COMMANDS",
        [
            c
            if c.name != name
            else c.__class__(c.name, c.help, c.add_arguments, lambda args: pytest.fail("the command ran"))
            for c in cli.COMMANDS
        ],
    )
    monkeypatch.setattr(sys, "stdout", None)
    assert cli.main([a.format(tmp=tmp_path) for a in INVOCATIONS[name]]) == 2
    err = capsys.readouterr().err
    assert one_error_line(err) and "standard output is closed (>&-)" in err and "> /dev/null" in err
    assert list(tmp_path.iterdir()) == []


def test_the_simulator_on_its_own_refuses_a_closed_stdout_too(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", None)
    assert sim_cli.main(["burst_day"]) == 2
    assert "standard output is closed" in capsys.readouterr().err


def closed_stdout(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`python -m shopops_lab ARGS >&-`: the child starts with file descriptor 1 closed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "shopops_lab", *args],
        cwd=cwd,
        env=env,
        text=True,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),
        check=False,
    )


def test_a_really_closed_stdout_starts_no_chaos_run_and_opens_no_database(tmp_path):
    done = closed_stdout(
        "chaos", "--db", f"sqlite:///{tmp_path / 'c.db'}", "--items", "2", "--kills", "0", cwd=tmp_path
    )
    assert done.returncode == 2 and one_error_line(done.stderr), done.stderr
    assert not (tmp_path / "c.db").exists()


def test_an_open_stdout_is_not_mistaken_for_a_closed_one(capsys):
    assert not cli.stdout_is_closed()
    assert cli.main(["simulate", "burst_day", "--items", "4"]) in (0, 1)
    assert capsys.readouterr().out


# ---------------------------------------------------------------------------- output folders
# One rule for every command that writes a folder (shopops_lab/course/outputs.py): never the
# root, home or a folder of masters; a folder holding files the command did not write only with
# --force. Each refusal is one line, exit status 2, and nothing is written or deleted.
SUBMISSION = ROOT / "notebooks" / "00_start_here.ipynb"


def writing(command: str, out: str) -> list[str]:
    """The command line of `command` writing its folder to `out`."""
    return {
        "grade": ["grade", str(SUBMISSION), "--key", str(ROOT / "solutions"), "--out", out],
        "build-notebooks": ["build-notebooks", "--solutions", str(ROOT / "solutions"), "--notebooks", out],
        "lite build": ["lite", "build", "--out", out],
    }[command]


COMMANDS = ("grade", "build-notebooks", "lite build")


def refused(args: list[str], capsys) -> str:
    assert cli.main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and one_error_line(captured.err), captured
    return captured.err


def listing(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


@pytest.mark.parametrize("command", COMMANDS)
def test_no_command_writes_into_the_root_home_or_the_masters(command, tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("mine")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    masters = listing(ROOT / "solutions")
    for out, words in (("/", "is the filesystem root"), (str(home), "is your home folder")):
        for force in ([], ["--force"]):  # --force never makes these right
            assert words in refused(writing(command, out) + force, capsys)
    if command != "lite build":  # lite's --out holding solutions/ is refused as holding the masters, below
        assert "masters" in refused(writing(command, str(ROOT / "solutions")) + ["--force"], capsys)
    assert listing(home) == [".bashrc"] and listing(ROOT / "solutions") == masters


def test_grade_refuses_the_key_it_grades_with(tmp_path, capsys):
    key = tmp_path / "key"
    key.mkdir()
    (key / "00_start_here.ipynb").write_bytes((ROOT / "solutions" / "00_start_here.ipynb").read_bytes())
    err = refused(["grade", str(SUBMISSION), "--key", str(key), "--out", str(key), "--force"], capsys)
    assert "is the key (the masters --key names)" in err and listing(key) == ["00_start_here.ipynb"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_folder_with_other_files_is_refused_unless_force(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "thesis.tex").write_text("years")
    err = refused(writing(command, str(work)), capsys)
    assert "holds files and is not" in err and "--force" in err and "nothing was written" in err
    assert listing(work) == ["thesis.tex"]
    (tmp_path / "a-file").write_text("x")
    assert "is a file, not a folder" in refused(writing(command, str(tmp_path / "a-file")), capsys)


def test_build_notebooks_writes_into_a_new_an_empty_or_its_own_folder_and_with_force_into_another(tmp_path, capsys):
    from shopops_lab.course.build import build_notebooks

    solutions = ROOT / "solutions"
    before = os.umask(0o022)
    try:
        for out in (tmp_path / "new", tmp_path / "empty"):
            (tmp_path / "empty").mkdir(exist_ok=True)
            assert build_notebooks(solutions, out, labs=["00"]).ok
            assert (out / "00_start_here.ipynb").stat().st_mode & 0o777 == 0o644  # readable in a shared release folder
    finally:
        os.umask(before)
    own = tmp_path / "new"
    (own / ".ipynb_checkpoints").mkdir()  # what opening the folder in Jupyter leaves
    assert build_notebooks(solutions, own, labs=["00"]).ok  # its own folder: student notebooks only
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.md").write_text("mine")
    with pytest.raises(BadArgumentError, match="holds files and is not a folder of student notebooks"):
        build_notebooks(solutions, work, labs=["00"])
    assert build_notebooks(solutions, work, labs=["00"], force=True).ok
    assert listing(work) == ["00_start_here.ipynb", "notes.md"] and (work / "notes.md").read_text() == "mine"
    assert build_notebooks(solutions, work, labs=["00"], check=True).ok  # --check writes nothing: no rule


def test_grade_merges_into_its_own_gradebook_and_with_force_writes_into_another_folder(tmp_path, capsys):
    from shopops_lab.course.grade import gradebook

    mine = tmp_path / "grades"
    mine.mkdir()
    (mine / gradebook.MANIFEST).write_text(gradebook.manifest())
    (mine / "grades.csv").write_text("an earlier run's")
    assert gradebook.claim(mine, force=False, key=None) == mine  # a gradebook grade wrote: merged into
    old = tmp_path / "old"
    old.mkdir()
    (old / "grades.csv").write_text("not marked as this command's gradebook")
    with pytest.raises(BadArgumentError, match="not a gradebook shopops-lab grade wrote"):
        gradebook.claim(old, force=False, key=None)
    assert gradebook.claim(old, force=True, key=None) == old


def test_lite_build_out_dot_is_refused_and_nothing_is_deleted(tmp_path, monkeypatch, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    err = refused(["lite", "build", "--out", ".", "--force"], capsys)  # --force would replace it: never
    assert "--out . is the folder you run this from" in err
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_lite_build_refuses_every_folder_that_is_not_a_previous_site(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    notebooks = tmp_path / "course" / "notebooks"
    notebooks.mkdir(parents=True)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "thesis.tex").write_text("years")
    (tmp_path / "a-file").write_text("x")
    for out, words in (
        (tmp_path / "work", "holds files and is not a site this command built"),
        (tmp_path / "a-file", "is a file, not a folder"),
        (tmp_path / "course", "holds the notebooks"),
        (tmp_path.parent, "holds the folder you run"),
    ):
        with pytest.raises(BadArgumentError, match=words):
            lite.build_site(out, notebooks_dir=notebooks)
    assert (tmp_path / "work" / "thesis.tex").read_text() == "years" and (tmp_path / "a-file").exists()


def test_a_new_an_empty_and_a_previous_site_folder_may_be_replaced_and_another_with_force(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "jupyter-lite.json").write_text("{}")
    (site / "old.whl").write_text("")
    empty = tmp_path / "empty"
    empty.mkdir()
    for out in (tmp_path / "new", empty, site):
        lite._replaceable(out, tmp_path / "notebooks")  # no refusal
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("x")
    lite._replaceable(work, tmp_path / "notebooks", force=True)  # no refusal: the user said so


# ---------------------------------------------------------------------------- lite serve --port
@pytest.fixture
def site(tmp_path):
    (tmp_path / "jupyter-lite.json").write_text("{}")
    return tmp_path


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_a_port_out_of_range_is_one_line_and_exit_2(port, site, capsys):
    assert cli.main(["lite", "serve", "--dir", str(site), "--port", port]) == 2
    err = capsys.readouterr().err
    assert one_error_line(err) and f"port is {port}, not a port (0 to 65535)" in err


def test_a_port_in_use_says_so_in_one_line(site, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["lite", "serve", "--dir", str(site), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert one_error_line(err) and f"port {port} is already in use on 127.0.0.1" in err and "--port" in err


def test_a_host_that_cannot_be_listened_on_is_named(site, capsys):
    assert cli.main(["lite", "serve", "--dir", str(site), "--port", "0", "--host", "203.0.113.9"]) == 2
    err = capsys.readouterr().err
    assert one_error_line(err) and "host '203.0.113.9' cannot be listened on" in err


def test_reveals_off_removes_the_model_answers_from_an_installed_kit_and_solution_says_so(tmp_path: Path) -> None:
    """`shopops-lab reveals` says whether model answers can be shown; `--off` removes them from the
    kit it runs from (an admin on a hub, a Binder image's postBuild), after which solution()
    says reveals are off and every check still works. Run on a copy of the kit."""
    import shutil
    import subprocess
    import sys

    shutil.copytree(ROOT / "shopops_lab", tmp_path / "shopops_lab", ignore=shutil.ignore_patterns("__pycache__"))
    model = tmp_path / "shopops_lab" / "checks" / "answer_keys" / "model_answers.py"

    def run(*argv: str) -> str:
        done = subprocess.run([sys.executable, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert run("-m", "shopops_lab", "reveals").startswith(
        f"on: solution(confirm=True) shows model answers from {model}"
    )
    assert run("-m", "shopops_lab", "reveals", "--off").startswith(f"removed {model}")
    assert not model.exists() and run("-m", "shopops_lab", "reveals").startswith(
        "off: this kit carries no model answers"
    )
    said = run("-c", "from shopops_lab.checks import lab01; lab01.exercise.solution(confirm=True)")
    assert "Model answers are turned off here" in said and "def send_followup" not in said
