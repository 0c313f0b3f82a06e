"""Masters checked once are read again without checking (`grade.checked`): the same Master,
without loading nbformat; changed bytes, a record that cannot be trusted as JSON, or
SHOPOPS_GRADE_RECHECK=1 check the master again; a cache that cannot be written costs nothing
but the time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grade_fixtures as fx
import pytest

from shopops_lab.course.grade import checked
from shopops_lab.course.grade.key import Key
from shopops_lab.errors import BadArgumentError

MASTER = fx.master_path("06")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(checked.FOLDER, str(folder))
    monkeypatch.delenv(checked.RECHECK, raising=False)
    return folder


def _master(key: Path):
    return Key.load(key).masters["06"]


def test_a_master_read_again_from_its_record_is_the_master_checked_before(cache: Path, tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.mkdir()
    shutil.copy(MASTER, key)
    first = _master(key)
    assert len(list(cache.glob("*.json"))) == 1  # remembered, as the notebook nbformat read and its student version
    again = _master(key)
    assert again.notebook == first.notebook and again.student == first.student
    assert again.graded == first.graded and (again.lab, again.version, again.title) == (
        first.lab,
        first.version,
        first.title,
    )
    assert again.notebook.cells[0].cell_type == first.notebook.cells[0].cell_type  # attributes, as nbformat's


def test_grading_with_remembered_masters_loads_no_nbformat(cache: Path) -> None:
    code = (
        "import sys; from shopops_lab.course.grade.key import Key; "
        f"Key.load({str(MASTER.parent)!r}, labs={{'06'}}); "
        "print('nbformat' in sys.modules, 'jsonschema' in sys.modules)"
    )
    env = {**os.environ, checked.FOLDER: str(cache)}
    said = [
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        for _ in "12"
    ]
    assert said == ["True True\n", "False False\n"]  # checked the first time only


def test_changed_bytes_are_checked_again_and_a_broken_master_is_still_refused(cache: Path, tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.mkdir()
    shutil.copy(MASTER, key)
    _master(key)  # remembered
    notebook = json.loads((key / MASTER.name).read_text())
    for cell in notebook["cells"]:
        cell["metadata"].pop("nbgrader", None)  # a copy that lost what makes it a master
    (key / MASTER.name).write_text(json.dumps(notebook))
    with pytest.raises(BadArgumentError, match="not a master notebook of this kit"):
        _master(key)


def test_a_record_that_is_not_json_or_a_recheck_means_checking_again(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = tmp_path / "key"
    key.mkdir()
    shutil.copy(MASTER, key)
    first = _master(key)
    (record,) = cache.glob("*.json")
    record.write_text("{not json")
    assert checked.recalled(MASTER.read_bytes()) is None
    assert _master(key).notebook == first.notebook  # checked again, and remembered again
    assert checked.recalled(MASTER.read_bytes()) == (first.notebook, first.student)
    record.write_text(json.dumps(first.notebook))  # a record of the older kind: the notebook alone
    assert checked.recalled(MASTER.read_bytes()) is None
    monkeypatch.setenv(checked.RECHECK, "1")
    assert checked.recalled(MASTER.read_bytes()) is None


def test_a_change_to_the_code_that_builds_student_versions_means_checking_again(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record holds the student version built from the master: built by other code, it
    might differ, so the record of another build.py is not found."""
    key = tmp_path / "key"
    key.mkdir()
    shutil.copy(MASTER, key)
    _master(key)
    assert checked.recalled(MASTER.read_bytes()) is not None
    other = tmp_path / "kit" / "course"
    (other / "grade").mkdir(parents=True)
    (other / "build.py").write_bytes(
        Path(checked.__file__).parents[1].joinpath("build.py").read_bytes() + b"\n# changed\n"
    )
    monkeypatch.setattr(checked, "__file__", str(other / "grade" / "checked.py"))
    assert checked.recalled(MASTER.read_bytes()) is None


def test_a_cache_that_cannot_be_written_costs_only_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(checked.FOLDER, str(blocked / "masters"))
    key = tmp_path / "key"
    key.mkdir()
    shutil.copy(MASTER, key)
    assert _master(key).lab == "06"
    assert checked.recalled(MASTER.read_bytes()) is None


def test_a_node_is_a_dict_whose_keys_are_attributes() -> None:
    node = checked.Node.of({"cells": [{"source": "x", "metadata": {"tags": []}}]})
    cell = node.cells[0]
    cell.source = "y"
    del cell.metadata.tags
    assert node == {"cells": [{"source": "y", "metadata": {}}]}
    with pytest.raises(AttributeError):
        _ = cell.outputs
    with pytest.raises(AttributeError):
        del cell.outputs
