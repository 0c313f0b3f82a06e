"""Whose each file is, from the layouts real systems produce (folder per student, Canvas and
Moodle exports, the nbgrader/JupyterHub exchange, nbgrader's submitted/, an instructor's
pattern, a roster), which of several submissions is graded, and how late it is. No grading
here: the files are the released notebook, and only their paths and metadata matter."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grade_fixtures as fx
import pytest

from shopops_lab.course.grade.late import Lateness, LatePolicy, due_dates, lateness
from shopops_lab.course.grade.roster import Roster
from shopops_lab.course.grade.run import Matching
from shopops_lab.course.grade.submissions import Layout, Outcome, Submission, choose, find, lab_of
from shopops_lab.errors import BadArgumentError

STEMS = {path.name[:2]: path.stem for path in fx.SOLUTIONS.glob("[0-9][0-9]_*.ipynb")}
NOTEBOOK = fx.submission("01")


def put(root: Path, *files: str) -> Path:
    for file in files:
        fx.write(NOTEBOOK, root / file)
    return root


def whose(root: Path, *arguments: str, **options) -> dict[str, tuple[str, str | None, Layout]]:
    """File (inside `root`) -> (student, lab its path names, layout), for the files matched."""
    found = find([str(root / a) if a else str(root) for a in arguments or ("",)], STEMS, **options)
    return {s.path.relative_to(root).as_posix(): (s.student, s.lab_hint, s.layout) for s in found.submissions}


def unmatched(root: Path, *arguments: str, **options) -> dict[str, str]:
    found = find([str(root / a) if a else str(root) for a in arguments or ("",)], STEMS, **options)
    return {Path(item.file).relative_to(root).as_posix(): item.detail for item in found.unmatched}


# --- each layout --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "student", "lab", "layout"),
    [
        ("alice_lab01.ipynb", "alice", "01", Layout.NAME),
        ("bob-smith_01_leases_and_redelivery.ipynb", "bob-smith", "01", Layout.NAME),
        ("dave_05_anything.ipynb", "dave", "05", Layout.NAME),
        ("frank/lab01.ipynb", "frank", "01", Layout.FOLDER),
        ("grace/01_leases_and_redelivery.ipynb", "grace", "01", Layout.FOLDER),
        ("heidi/lab07/07_burst_day.ipynb", "heidi", "07", Layout.FOLDER),  # a lab's folder is not a student's
        ("carol_123456_7890_Lab_04.ipynb", "carol", "04", Layout.CANVAS),
        ("hamiltonmargaret_late_10001_20002_lab01.ipynb", "hamiltonmargaret", "01", Layout.CANVAS),
        ("lms/lamport_leslie_10005_lab7_final.ipynb", "lamport_leslie", "07", Layout.CANVAS),  # not "lms"
        ("Ada Lovelace_12345_assignsubmission_file_lab05.ipynb", "Ada Lovelace", "05", Layout.MOODLE),
        ("Ada Lovelace_12345_assignsubmission_file_/lab05.ipynb", "Ada Lovelace", "05", Layout.MOODLE),
        ("inbound/dpatel+lab05+2026-03-10 14:05:33.123456 UTC+3f2a/notebook.ipynb", "dpatel", "05", Layout.EXCHANGE),
        ("submitted/zoe/lab01/01_leases_and_redelivery.ipynb", "zoe", "01", Layout.COURSE),
    ],
)
def test_each_layout_names_the_student_and_the_lab(tmp_path, file, student, lab, layout) -> None:
    put(tmp_path, file)
    assert whose(tmp_path) == {file: (student, lab, layout)}


def test_a_canvas_late_mark_after_the_id_and_the_exchanges_and_nbgraders_times_are_kept(tmp_path) -> None:
    put(
        tmp_path,
        "hamilton_margaret_10001_LATE_30003_lab01.ipynb",
        "inbound/dpatel+lab05+2026-03-10 14:05:33.123456 UTC+3f2a/05.ipynb",
        "course/submitted/zoe/lab01/01.ipynb",
    )
    (tmp_path / "course" / "submitted" / "zoe" / "lab01" / "timestamp.txt").write_text("2026-03-09 08:00:00 UTC")
    found = {s.student: s for s in find([str(tmp_path)], STEMS).submissions}
    assert found["hamilton_margaret"].late_mark and found["hamilton_margaret"].submitted is None
    assert found["dpatel"].submitted == datetime(2026, 3, 10, 14, 5, 33, 123456, tzinfo=UTC)
    assert found["zoe"].submitted == datetime(2026, 3, 9, 8, 0, tzinfo=UTC) and not found["zoe"].late_mark


def test_a_file_no_layout_fits_is_listed_never_guessed(tmp_path) -> None:
    put(tmp_path, "lab01/erin.ipynb", "lab01/Untitled.ipynb", "lab01/ok_lab01.ipynb", "lab01/ok_lab02.ipynb")
    listed = unmatched(tmp_path)
    assert sorted(listed) == ["lab01/Untitled.ipynb", "lab01/erin.ipynb"]
    assert all("names no student" in why and "--student-pattern" in why for why in listed.values())
    assert whose(tmp_path) == {
        "lab01/ok_lab01.ipynb": ("ok", "01", Layout.NAME),
        "lab01/ok_lab02.ipynb": ("ok", "02", Layout.NAME),
    }


def test_a_file_named_as_its_lab_belongs_to_the_nearest_folder_that_names_no_lab(tmp_path) -> None:
    """JupyterLite downloads `lab01.ipynb`: the folder it was put in names its owner, whether
    the file, its folder or the folder above is given; a folder of labs names nobody."""
    for name in ("01_leases_and_redelivery.ipynb", "lab01.ipynb"):
        put(tmp_path / "class", f"frank/{name}")
        for given in (f"frank/{name}", "frank", ""):
            assert whose(tmp_path / "class", given) == {f"frank/{name}": ("frank", "01", Layout.FOLDER)}, given
        (tmp_path / "class" / "frank" / name).unlink()
    put(tmp_path / "labs", "lab01/01_leases_and_redelivery.ipynb")
    assert list(unmatched(tmp_path / "labs", "lab01")) == ["lab01/01_leases_and_redelivery.ipynb"]


def test_a_file_passed_by_itself_or_within_folders_gets_one_key(tmp_path) -> None:
    """Passed one by one, as their folder, or as the folder above: the same students, so the
    same keys (student and lab) in the gradebook, never `-2`, `-3`."""
    files = [f"submitted/{who}/lab01/01_leases_and_redelivery.ipynb" for who in ("ann", "ben", "cat")]
    put(tmp_path, *files, "frank/lab01.ipynb")
    every = [*files, "frank/lab01.ipynb"]
    for arguments in (every, ["submitted", "frank"], [""]):
        found = find([str(tmp_path / a) for a in arguments], STEMS)
        keys = sorted(lab_of(s, lambda path: None).key for s in found.submissions)
        assert keys == ["ann/lab01", "ben/lab01", "cat/lab01", "frank/lab01"], arguments


def test_the_same_file_under_two_arguments_is_one_file(tmp_path) -> None:
    put(tmp_path, "class/alice_lab01.ipynb")
    found = find([str(tmp_path / "class"), str(tmp_path / "class" / "alice_lab01.ipynb")], STEMS)
    assert len(found.submissions) == 1


def test_an_instructors_pattern_comes_first(tmp_path) -> None:
    put(tmp_path, "week3/s1234567-final.ipynb", "week3/alice_lab01.ipynb")
    pattern = Matching(pattern=r"^week(?P<lab>\d+)/s(?P<student>\d+)-").compiled()
    assert whose(tmp_path, pattern=pattern) == {
        "week3/s1234567-final.ipynb": ("1234567", "03", Layout.PATTERN),
        "week3/alice_lab01.ipynb": ("alice", "01", Layout.NAME),  # the pattern does not fit: the built-ins do
    }


@pytest.mark.parametrize(
    ("pattern", "words"), [("(?P<who>x)", "has no (?P<student>...) group"), ("(", "not a regular")]
)
def test_a_bad_pattern_is_refused_naming_the_fix(pattern, words) -> None:
    with pytest.raises(BadArgumentError, match=re.escape(words)):
        Matching(pattern=pattern).compiled()


def test_lab_numbers_are_two_digits() -> None:
    assert Matching(labs=["3", "05"]).lab_ids() == {"03", "05"} and Matching().lab_ids() is None
    with pytest.raises(BadArgumentError, match="--lab three is not a lab number"):
        Matching(labs=["three"]).lab_ids()


# --- the roster ---------------------------------------------------------------------------

ROSTER = """id,name,aliases
s10001,Margaret Hamilton,mhamilton;10001
s10005,Leslie Lamport,
s12345,Ada Lovelace,ada
s20000,Ada Byron,ada
"""


@pytest.fixture
def roster(tmp_path) -> Roster:
    path = tmp_path / "roster.csv"
    path.write_text(ROSTER)
    return Roster.read(path)


def test_a_roster_makes_one_student_of_every_spelling(tmp_path, roster) -> None:
    put(
        tmp_path / "in",
        "mhamilton/lab01.ipynb",  # an alias, as a folder
        "hamilton_margaret_10001_LATE_30003_lab03.ipynb",  # Canvas: last name first
        "hamiltonmargaret_10001_30004_lab05.ipynb",  # Canvas as it really spells it
        "Margaret Hamilton_77_assignsubmission_file_lab07.ipynb",  # Moodle: the full name
        "lms/lamport_leslie_10005_lab7_final.ipynb",
        "Ada Lovelace_55_assignsubmission_file_/lab02.ipynb",
        "ada_lab04.ipynb",  # an alias two students share: matches nobody
        "nobody_lab01.ipynb",
    )
    found = find([str(tmp_path / "in")], STEMS, roster=roster)
    students = sorted({(s.student, s.lab_hint) for s in found.submissions})
    assert students == [
        ("s10001", "01"),
        ("s10001", "03"),
        ("s10001", "05"),
        ("s10001", "07"),
        ("s10005", "07"),
        ("s12345", "02"),
    ]
    why = {Path(item.file).name: item.detail for item in found.unmatched}
    assert "'ada' names several students" in why["ada_lab04.ipynb"] and "s12345, s20000" in why["ada_lab04.ipynb"]
    assert "'nobody' is on no line of" in why["nobody_lab01.ipynb"] and "alias" in why["nobody_lab01.ipynb"]
    assert roster.name("s10001") == "Margaret Hamilton" and roster.name("x") == "x"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("name\nAda\n", "has no id column"),
        ("id,name\ns1,Ada\ns1,Bob\n", "line 3, id 's1' is there twice"),
        ("id,name\n,Ada\n", "line 2, id '' is empty"),
    ],
)
def test_a_bad_roster_is_refused_naming_the_line(tmp_path, text, words) -> None:
    path = tmp_path / "roster.csv"
    path.write_text(text)
    with pytest.raises(BadArgumentError, match=re.escape(words)):
        Roster.read(path)


# --- several submissions of one student and lab --------------------------------------------


def sub(name: str, student: str = "amy", lab: str | None = "01", minutes: int | None = None, **more) -> Submission:
    when = None if minutes is None else datetime(2026, 3, 10, 12, tzinfo=UTC) + timedelta(minutes=minutes)
    return Submission(Path(f"{name}.ipynb"), name, student, lab, lab=lab, submitted=when, **more)


def test_the_latest_is_graded_by_time_else_by_name_and_the_others_are_listed() -> None:
    by_time = [sub("b", minutes=5), sub("a", minutes=30), sub("c", minutes=1)]
    chosen, listed = choose(by_time)
    assert [s.name for s in chosen] == ["a"]
    assert [(item.file, item.outcome) for item in listed] == [
        ("c.ipynb", Outcome.SUPERSEDED),
        ("b.ipynb", Outcome.SUPERSEDED),
    ]
    assert listed[0].detail == "a.ipynb is a later submission of amy/lab01"
    by_name = [sub("amy_lab01-10"), sub("amy_lab01-9"), sub("amy_lab01", minutes=3)]  # not every one has a time
    assert [s.name for s in choose(by_name)[0]] == ["amy_lab01-10"]  # 10 after 9: numbers as numbers


def test_other_labs_than_asked_are_skipped_and_a_file_with_no_lab_is_unmatched() -> None:
    chosen, listed = choose([sub("a"), sub("b", lab="05", student="bo"), sub("c", lab=None, student="cy")], {"01"})
    assert [s.name for s in chosen] == ["a"]
    outcomes = {item.file: (item.outcome, item.detail) for item in listed}
    assert outcomes["b.ipynb"] == (Outcome.SKIPPED, "lab 05 is not one --lab names")
    assert outcomes["c.ipynb"][0] is Outcome.UNMATCHED and "names no lab" in outcomes["c.ipynb"][1]


def test_the_lab_comes_from_the_metadata_before_the_name() -> None:
    named_01 = Submission(Path("x.ipynb"), "x", "amy", "01")
    assert lab_of(named_01, lambda path: "05").key == "amy/lab05"
    assert lab_of(named_01, lambda path: None).key == "amy/lab01"


# --- late ---------------------------------------------------------------------------------

DUE = datetime(2026, 3, 10, 12, tzinfo=UTC)


def test_lateness_counts_from_the_due_date_or_the_lms_mark() -> None:
    assert lateness(sub("a", minutes=-1), DUE) == Lateness()
    late = lateness(sub("a", minutes=25 * 60), DUE)
    assert late == Lateness(True, 25 * 3600.0) and late.text() == "late by 1 d 1 h"
    assert lateness(sub("a", late_mark=True), DUE) == Lateness(True, None)  # Canvas said so, no time
    assert lateness(sub("a", minutes=5), None) == Lateness()  # no due date, no mark: not late


@pytest.mark.parametrize(
    ("policy", "late", "expected"),
    [
        ("none", Lateness(True, 3600.0), 0.0),
        ("zero", Lateness(True, 60.0), 4.0),
        ("10%/day", Lateness(True, 3600.0), 0.5),  # part of a day counts as a day: 10% of 5
        ("10%/day", Lateness(True, 2.5 * 24 * 3600), 1.5),  # three days
        ("50%/day", Lateness(True, 9 * 24 * 3600), 4.0),  # never below 0
        ("10%/day", Lateness(True, None), 0.0),  # no time to count days by
        ("zero", Lateness(), 0.0),
    ],
)
def test_a_late_policy_takes_its_share(policy, late, expected) -> None:
    assert late.penalty(LatePolicy.parse(policy), earned=4.0, most=5.0) == expected


@pytest.mark.parametrize("text", ["sometimes", "0%/day", "120%/day", "10%"])
def test_a_bad_late_policy_is_refused(text) -> None:
    with pytest.raises(BadArgumentError, match="--late-policy"):
        LatePolicy.parse(text)


def test_due_dates_for_every_lab_or_one() -> None:
    every = due_dates(["2026-03-10T12:00"], ["01", "05"])
    assert every == {"01": DUE, "05": DUE}  # no zone: UTC
    one = due_dates(["2026-03-10T12:00", "5=2026-03-11T13:00+01:00"], ["01", "05"])
    assert one == {"01": DUE, "05": datetime(2026, 3, 11, 12, tzinfo=UTC)}
    with pytest.raises(BadArgumentError, match="--due tomorrow"):
        due_dates(["tomorrow"], ["01"])
