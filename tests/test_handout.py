"""`shopops-lab notebooks DEST`: the kit's student notebooks copied into a learner's folder.

The rule under test: a first run copies every notebook the kit carries; a run again adds only
what is missing and never overwrites one already there (edited or not), saying which it left
alone; a failed write leaves no half-written notebook; a file that appears while a copy is
written is not replaced. The kit's own notebooks are the checkout's student notebooks,
whatever labs there are (tests/test_packaging.py checks the wheel carries the same).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from shopops_lab import cli
from shopops_lab.course import handout
from shopops_lab.course.errors import KitNotebooksMissingError
from shopops_lab.errors import BadArgumentError

ROOT = Path(__file__).resolve().parent.parent


def kit(folder: Path, *names: str) -> Path:
    """A kit's notebooks folder with one small notebook per name (and a file that is not a lab)."""
    folder.mkdir()
    for name in names:
        (folder / name).write_text(f'{{"lab": "{name}"}}\n')
    (folder / "README.md").write_text("not a notebook\n")
    return folder


def outcomes(result: handout.Handout) -> dict[str, handout.Outcome]:
    return {handed.name: handed.outcome for handed in result.notebooks}


def test_the_kit_carries_the_checkouts_student_notebooks_and_no_master():
    carried = handout.kit_notebooks()
    students = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert [p.name for p in carried] == students
    assert all(p.read_bytes() == (ROOT / "notebooks" / p.name).read_bytes() for p in carried)
    assert all("### BEGIN SOLUTION" not in p.read_text(encoding="utf-8") for p in carried)


def test_a_first_run_copies_every_notebook_the_kit_carries(tmp_path):
    source = kit(tmp_path / "kit", "00_start.ipynb", "01_leases.ipynb")
    dest = tmp_path / "home" / "alice" / "shopops-lab"  # made, parents too
    result = handout.hand_out(dest, source=source)
    assert outcomes(result) == {"00_start.ipynb": "copied", "01_leases.ipynb": "copied"}
    assert sorted(p.name for p in dest.iterdir()) == ["00_start.ipynb", "01_leases.ipynb"]
    assert (dest / "01_leases.ipynb").read_bytes() == (source / "01_leases.ipynb").read_bytes()
    assert result.lines()[-1] == f"2 notebooks in {dest}: 2 copied, 0 already there, 0 kept as you left them"


def test_a_new_file_is_made_as_the_learners_own_files_are(tmp_path):
    source = kit(tmp_path / "kit", "00_start.ipynb")
    old = os.umask(0o027)
    try:
        handout.hand_out(tmp_path / "dest", source=source)
    finally:
        os.umask(old)
    assert (tmp_path / "dest" / "00_start.ipynb").stat().st_mode & 0o777 == 0o640


def test_run_again_it_adds_what_is_new_and_never_overwrites_an_edited_notebook(tmp_path):
    source = kit(tmp_path / "kit", "00_start.ipynb", "01_leases.ipynb", "02_dlq.ipynb")
    dest = tmp_path / "dest"
    handout.hand_out(dest, source=source)
    (dest / "01_leases.ipynb").write_text("the learner's work\n")
    (dest / "02_dlq.ipynb").unlink()  # deleted by the learner: copied again
    (source / "09_capstone.ipynb").write_text('{"lab": "new"}\n')  # the kit's new lab
    result = handout.hand_out(dest, source=source)
    assert outcomes(result) == {
        "00_start.ipynb": "already there",
        "01_leases.ipynb": "kept yours",
        "02_dlq.ipynb": "copied",
        "09_capstone.ipynb": "copied",
    }
    assert (dest / "01_leases.ipynb").read_text() == "the learner's work\n"
    assert (dest / "09_capstone.ipynb").read_text() == '{"lab": "new"}\n'
    lines = result.lines()
    assert "kept yours    01_leases.ipynb (it differs from the kit's: not overwritten)" in lines
    assert lines[-2:] == [
        f"4 notebooks in {dest}: 2 copied, 1 already there, 1 kept as you left them",
        "To get the kit's copy of a kept notebook, rename yours and run this again.",
    ]
    assert not [p for p in dest.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_a_failed_write_leaves_no_half_written_notebook(tmp_path, monkeypatch):
    source = kit(tmp_path / "kit", "00_start.ipynb", "01_leases.ipynb")
    dest = tmp_path / "dest"
    dest.mkdir()
    real_fsync = os.fsync
    calls = []

    def disk_full_on_the_second(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(handout.os, "fsync", disk_full_on_the_second)
    with pytest.raises(BadArgumentError) as refused:
        handout.hand_out(dest, source=source)
    assert refused.value.field == f"DEST {dest}" and "No space left on device" in refused.value.problem
    assert sorted(p.name for p in dest.iterdir()) == ["00_start.ipynb"]  # whole; the second not there at all


def test_a_notebook_that_appears_while_its_copy_is_written_is_not_replaced(tmp_path, monkeypatch):
    source = kit(tmp_path / "kit", "00_start.ipynb")
    dest = tmp_path / "dest"
    dest.mkdir()
    real_fsync = os.fsync

    def learner_saves_meanwhile(fd):
        (dest / "00_start.ipynb").write_text("saved by the learner meanwhile\n")
        real_fsync(fd)

    monkeypatch.setattr(handout.os, "fsync", learner_saves_meanwhile)
    result = handout.hand_out(dest, source=source)
    assert outcomes(result) == {"00_start.ipynb": "kept yours"}
    assert (dest / "00_start.ipynb").read_text() == "saved by the learner meanwhile\n"
    assert sorted(p.name for p in dest.iterdir()) == ["00_start.ipynb"]


def test_without_hard_links_it_still_copies_whole_and_never_overwrites(tmp_path, monkeypatch):
    source = kit(tmp_path / "kit", "00_start.ipynb", "01_leases.ipynb")
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "01_leases.ipynb").write_text("mine\n")

    def no_links(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(handout.os, "link", no_links)
    result = handout.hand_out(dest, source=source)
    assert outcomes(result) == {"00_start.ipynb": "copied", "01_leases.ipynb": "kept yours"}
    assert (dest / "00_start.ipynb").read_bytes() == (source / "00_start.ipynb").read_bytes()
    assert sorted(p.name for p in dest.iterdir()) == ["00_start.ipynb", "01_leases.ipynb"]


def test_a_dest_that_is_a_file_is_refused_by_name_and_nothing_is_written(tmp_path):
    source = kit(tmp_path / "kit", "00_start.ipynb")
    dest = tmp_path / "notes.txt"
    dest.write_text("a file\n")
    with pytest.raises(BadArgumentError) as refused:
        handout.hand_out(dest, source=source)
    assert refused.value.field == f"DEST {dest}" and "name a folder" in refused.value.fix
    assert dest.read_text() == "a file\n"


def test_a_kit_without_notebooks_says_how_to_reinstall(tmp_path):
    with pytest.raises(KitNotebooksMissingError) as refused:
        handout.hand_out(tmp_path / "dest", source=kit(tmp_path / "kit"))
    assert "--force-reinstall" in str(refused.value)
    assert not (tmp_path / "dest").exists()


def test_the_command_copies_then_reports_what_it_left_alone(tmp_path, capsys):
    dest = tmp_path / "alice"
    assert cli.main(["notebooks", str(dest)]) == 0
    first = capsys.readouterr().out.splitlines()
    carried = [p.name for p in handout.kit_notebooks()]
    assert first[:-1] == [f"copied        {name}" for name in carried]
    (dest / carried[0]).write_text("edited\n")
    assert cli.main(["notebooks", str(dest)]) == 0
    again = capsys.readouterr().out.splitlines()
    assert again[0] == f"kept yours    {carried[0]} (it differs from the kit's: not overwritten)"
    assert again[1:-2] == [f"already there {name}" for name in carried[1:]]
    assert (dest / carried[0]).read_text() == "edited\n"


def test_the_command_refuses_a_file_in_one_line(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    assert cli.main(["notebooks", str(tmp_path / "f")]) == 2
    assert capsys.readouterr().err.startswith(f"error: DEST {tmp_path / 'f'} is a file, not a folder.")
