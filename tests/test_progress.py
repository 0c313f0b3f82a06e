"""Progress across the course: a passing check records its exercise on the learner's machine
(`progress`), lab 00 shows the course with what is passed (`widgets.progress`), the Lite front
page too (`course.home`), and the course map they read follows the masters (`course.catalogue`).
(test_browser_learner.py sees a pass reach lab 00 in JupyterLab and the front page in JupyterLite.)"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import nbformat
import pytest

from shopops_lab import progress
from shopops_lab.checks import lab00
from shopops_lab.course import catalogue, home
from shopops_lab.widgets.progress import ProgressView

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def record(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "config" / "progress.jsonl"
    monkeypatch.setenv(progress.ENV, str(path))
    return path


def right(queue):
    return queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")


def wrong(queue):
    return None


def test_a_passing_check_records_its_exercise_once_and_a_failing_one_nothing(record, capsys):
    lab00.warmup.check(wrong)
    assert progress.passed() == frozenset() and not record.exists()
    lab00.warmup.check(right)
    lab00.warmup.check(right)
    assert progress.passed() == {"00.1"}
    assert record.read_text().splitlines() == ['{"passed": "00.1"}']
    assert "correct." in capsys.readouterr().out  # outside a notebook the verdict is printed, as before


def test_two_kernels_recording_at_once_lose_nothing(record):
    ids = [f"0{n}.1" for n in range(1, 9)]
    threads = [threading.Thread(target=progress.record, args=(i,)) for i in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert progress.passed() == set(ids)


def test_where_the_record_lives(tmp_path, monkeypatch):
    monkeypatch.delenv(progress.ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert progress.where() == tmp_path / "shopops-lab" / "progress.jsonl"
    monkeypatch.setenv(progress.ENV, "off")
    assert progress.where() is None
    progress.record("00.1")
    assert progress.passed() == frozenset() and list(tmp_path.iterdir()) == []


def test_a_record_that_cannot_be_kept_costs_the_record_not_the_check(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(progress.ENV, str(blocker / "progress.jsonl"))  # its folder is a file
    lab00.warmup.check(right)
    assert "correct." in capsys.readouterr().out and progress.passed() == frozenset()


def test_a_damaged_line_is_skipped(record):
    record.parent.mkdir(parents=True)
    record.write_text('{"passed": "01.1"}\nnot json\n{"other": 1}\n{"passed": 7}\n')
    assert progress.passed() == {"01.1"}
    seen = []
    progress.read(seen.append)  # on a computer the answer comes at once
    assert seen == [frozenset({"01.1"})]


def test_the_course_map_is_what_the_masters_say():
    masters = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    expected = catalogue.map_text(catalogue.course_map((p.name, json.loads(p.read_text())) for p in masters))
    assert catalogue.MAP.read_text(encoding="utf-8") == expected, "run shopops-lab build-notebooks"
    labs = progress.course()
    assert [lab.file for lab in labs] == [p.name for p in masters]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for lab in labs:
        row = re.search(rf"^\| \[[^]]+\]\(notebooks/{re.escape(lab.file)}\) \| (\d+) min", readme, re.M)
        assert row is not None and int(row.group(1)) == lab.minutes, lab.file
        master = nbformat.read(ROOT / "solutions" / lab.file, as_version=4)
        points = sum(c.metadata.get("nbgrader", {}).get("points", 0) for c in master.cells)
        assert lab.points == points and lab.goals, lab.file
    assert next(g for g in labs[1].graded if g.id == "01.1").checked


def test_lab_00_shows_the_course_and_ticks_what_was_passed(record):
    view = ProgressView()
    progress.record("01.1")
    text = view.text(progress.passed())
    assert text.startswith("You have passed 1 of the course's")
    first, second = view.labs[1].graded[:2]  # lab 01's first two exercises, as the course map says
    assert (first.id, second.id) == ("01.1", "01.2") and first.checked and second.checked
    assert f"✅ passed: 01.1 {first.title} ({first.points:g} point" in text
    assert f"⬜ not yet: 01.2 {second.title} ({second.points:g} point" in text
    assert "✍ a written answer, graded by hand" in text
    unrun = view.static_html("saved copy")
    assert "✅" not in unrun and f"01.1 {first.title} ({first.points:g} point" in unrun  # no learner's data stored
    assert 'role="status"' in view.view_html(progress.passed())
    assert view.label() == ProgressView().label()  # a stable text line: nbval compares it


def test_the_front_page_says_what_each_lab_teaches_its_time_and_points_and_names_its_links(tmp_path):
    course = json.loads(catalogue.MAP.read_text(encoding="utf-8"))
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    page = home.front_page(notebooks, course=course)
    assert page.count('class="lab-row"') == len(notebooks)
    lab01 = progress.course()[1]
    assert f"About {lab01.minutes} minutes · {lab01.points:g} points · " in page
    assert "write a handler that is safe to run twice" in page
    links = re.findall(r'<a class="also" [^>]*>([^<]*)</a>', page)
    assert links == [f"{lab['title']} in JupyterLab" for lab in course["labs"]]  # nine names, not nine "in JupyterLab"
    assert 'data-exercises="01.1 01.2 01.3"' in page and 'indexedDB.open("shopops-lab", 1)' in page
    assert '<link rel="icon" href="data:,">' in page  # no request for a favicon the site does not have
    unknown = tmp_path / "09_new.ipynb"
    unknown.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": "# Lab 09 · New"}]}))
    assert "Lab 09 · New in JupyterLab" in home.front_page([unknown], course=course)
