"""A term, as an instructor runs it with `shopops-lab grade` (docs/instructors.md, "Run a
term", walks through the same steps): a class of 10 students on a roster hands in labs 00,
01 and 03 through three systems, 33 files in all:

* lab 00 as a folder per student (`folders/<alias>/lab00.ipynb`, as JupyterLite downloads);
* lab 03 as a Canvas export (`lovelaceada_10001_50001_lab03.ipynb`), two students handing in
  again after the due date (Canvas marks those `LATE`), and a stray `Untitled.ipynb`;
* lab 01 through the nbgrader/JupyterHub exchange (`inbound/<user>+lab01+<time>+<random>/`),
  two students submitting twice, one of them late, and a user who is not on the roster.

Then it grades them in one run, scores the written answers in manual.csv and merges the
scores without running a check, regrades a new Canvas export of lab 03 into the same folder
(one written answer unchanged, one changed to "I do not know."), scores the changed answer,
and exports. Nothing is lost, the stale score is flagged until it is scored again, the late
resubmissions are the ones graded, and every file is graded or listed.

Answers are cheap ones (lab 00's, lab 03's policy, lab 01's knowledge check, unanswered
exercises), so the class grades in seconds; the whole test is one of conftest's GRADING_RUNS."""

from __future__ import annotations

import csv
import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import grade_fixtures as fx
import pytest

from shopops_lab import cli
from shopops_lab.course.grade import pool

ROSTER = {  # id: (name, the alias their folder and their exchange user name use)
    "s01": ("Ada Lovelace", "alovelace"),
    "s02": ("Alan Turing", "aturing"),
    "s03": ("Grace Hopper", "ghopper"),
    "s04": ("Margaret Hamilton", "mhamilton"),
    "s05": ("Leslie Lamport", "llamport"),
    "s06": ("Barbara Liskov", "bliskov"),
    "s07": ("Edsger Dijkstra", "edijkstra"),
    "s08": ("Donald Knuth", "dknuth"),
    "s09": ("Frances Allen", "fallen"),
    "s10": ("John Backus", "jbackus"),
}
ALIVE = "A queue cannot tell a crash before the send from one after it, so it sends again."
POLICY_WHY = "A 60 s TTL bounds how long a dead worker's case waits; a heartbeat every 15 s keeps it."
DUE = "2026-03-10T12:00:00+00:00"


def canvas_name(student: str) -> str:
    first, last = ROSTER[student][0].lower().split()
    return last + first  # Canvas's sortable name, as its export spells it


def lab00(student: str) -> object:
    number = int(student[1:])
    answers: dict[str, object] = {}
    if number <= 7:
        answers["warmup-answer"] = fx.RIGHT
    if number % 2 == 0:
        answers["written-why-twice"] = ALIVE
    return fx.submission("00", answers)


def lab03(why: str | None, right: bool = True) -> object:
    answers: dict[str, object] = {"choose-policy": fx.RIGHT} if right else {}
    if why is not None:
        answers["explain-policy"] = why
    return fx.submission("03", answers)


def lab01(knows: bool) -> object:
    return fx.submission("01", {"what-next": fx.RIGHT} if knows else {})


@pytest.fixture(scope="module")
def term(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("term")
    (root / "roster.csv").write_text(
        "id,name,aliases\n" + "".join(f"{sid},{name},{alias}\n" for sid, (name, alias) in ROSTER.items())
    )
    for student, (_, alias) in ROSTER.items():  # lab 00: a folder per student
        fx.write(lab00(student), root / "folders" / alias / "lab00.ipynb")
    for number, student in enumerate(sorted(ROSTER)[:9], start=1):  # lab 03: Canvas, s10 never hands in
        why = POLICY_WHY if number <= 6 else None
        fx.write(lab03(why), root / "canvas" / f"{canvas_name(student)}_{10000 + number}_{50000 + number}_lab03.ipynb")
    for student, late_answer in (("s01", POLICY_WHY + " Fixed a typo."), ("s02", POLICY_WHY)):
        uid = 10000 + int(student[1:])
        fx.write(lab03(late_answer), root / "canvas" / f"{canvas_name(student)}_LATE_{uid}_{60000 + uid}_lab03.ipynb")
    fx.write(fx.submission("03"), root / "canvas" / "Untitled.ipynb")  # Canvas never names a file so: unmatched
    for number, student in enumerate(sorted(ROSTER)[:8], start=1):  # lab 01: the exchange
        alias = ROSTER[student][1]
        folder = f"{alias}+lab01+2026-03-09 1{number}:00:00.000000 UTC+a{number}"
        fx.write(
            lab01(knows=number % 2 == 1), root / "exchange" / "inbound" / folder / "01_leases_and_redelivery.ipynb"
        )
    again = {"alovelace": "2026-03-09 23:00:00.000000 UTC", "aturing": "2026-03-11 09:30:00.000000 UTC"}
    for alias, when in again.items():  # both fix their knowledge check; Alan after the due date
        fx.write(
            lab01(True), root / "exchange" / "inbound" / f"{alias}+lab01+{when}+b1" / "01_leases_and_redelivery.ipynb"
        )
    fx.write(lab01(True), root / "exchange" / "inbound" / "visitor+lab01+2026-03-09 10:00:00 UTC+c1" / "01.ipynb")
    return root


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def table(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def write_table(path: Path, rows: list[dict[str, str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def record(out: Path) -> dict:
    return json.loads((out / "grades.json").read_text(encoding="utf-8"))


def rows_by_key(out: Path) -> dict[str, dict]:
    return {row["submission"]: row for row in record(out)["submissions"]}


def exercise(out: Path, key: str, grade_id: str) -> dict:
    return next(e for e in rows_by_key(out)[key]["exercises"] if e["grade_id"] == grade_id)


def test_a_term_graded_hand_scored_regraded_and_exported_loses_nothing(term: Path, monkeypatch) -> None:
    out = term / "grades"
    key = str(fx.SOLUTIONS)
    common = ["--key", key, "--out", str(out), "--roster", str(term / "roster.csv"), "--jobs", "2"]
    policy = ["--due", f"01={DUE}", "--due", f"03={DUE}", "--late-policy", "10%/day"]

    # 1. the whole class, three layouts, one run
    code, said, err = run(
        "grade", str(term / "folders"), str(term / "canvas"), str(term / "exchange"), *common, *policy
    )
    assert code == 0, err
    assert said.startswith("graded 27, timeout 0, invalid 0, error 0: 27 submissions") and "6 files not graded" in said
    files = {row["file"]: row for row in table(out / "files.csv")}
    found = sorted(p.as_posix() for p in term.rglob("*.ipynb") if "grades" not in p.parts)
    assert sorted(files) == found and len(found) == 33  # every file graded or listed
    outcomes = {}
    for row in files.values():
        outcomes[row["outcome"]] = outcomes.get(row["outcome"], 0) + 1
    assert outcomes == {"graded": 27, "superseded": 4, "unmatched": 2}
    unmatched = {Path(f).name: row["detail"] for f, row in files.items() if row["outcome"] == "unmatched"}
    assert "names no student" in unmatched["Untitled.ipynb"] and "'visitor' is on no line" in unmatched["01.ipynb"]
    assert err.count("warning: ") == 2  # the unmatched files, each with its fix; the superseded only listed
    rows = rows_by_key(out)
    assert sorted(rows) == sorted(
        [f"{s}/lab00" for s in ROSTER]
        + [f"{s}/lab03" for s in sorted(ROSTER)[:9]]
        + [f"{s}/lab01" for s in sorted(ROSTER)[:8]]
    )
    # the late resubmissions are the ones graded: Canvas's LATE for lab 03, the exchange's later time for lab 01
    assert "_LATE_" in rows["s01/lab03"]["file"] and rows["s01/lab03"]["late"] == "late (marked so by the LMS)"
    assert "2026-03-11 09:30" in rows["s02/lab01"]["file"] and rows["s02/lab01"]["late"] == "late by 21 h 30 min"
    assert rows["s02/lab01"]["penalty"] == pytest.approx(0.4)  # 10% of lab 01's 4 points, one day
    assert rows["s02/lab01"]["final_points"] == pytest.approx(rows["s02/lab01"]["points"] - 0.4)
    assert "2026-03-09 23:00" in rows["s01/lab01"]["file"] and rows["s01/lab01"]["late"] == ""
    assert rows["s01/lab01"]["points"] == 1  # the knowledge check, answered in the second submission

    # 2. the written answers scored in manual.csv, merged without running a check
    manual = table(out / "manual.csv")
    assert {(r["submission"], r["grade_id"]) for r in manual} == {
        *((f"{s}/lab00", "written-why-twice") for s in ("s02", "s04", "s06", "s08", "s10")),
        *((f"{s}/lab03", "explain-policy") for s in ("s01", "s02", "s03", "s04", "s05", "s06")),
    }
    for row in manual:
        if row["grade_id"] == "explain-policy":
            row["found"], row["comment"] = "1 2", "Name the cost of a frozen worker too."
        else:
            row["score"] = "1"
    write_table(term / "scored.csv", manual)
    monkeypatch.setattr(pool.Pool, "run", lambda *a, **k: pytest.fail("merging hand scores ran a check"))
    code, said, err = run("grade", "--out", str(out), "--manual", str(term / "scored.csv"))
    assert code == 0 and err == "" and said.startswith("hand scores merged (11 rows taken), no check run")
    monkeypatch.undo()
    scored = exercise(out, "s03/lab03", "explain-policy")
    assert (scored["points"], scored["mark"], scored["found"]) == (1.5, "graded by hand", [1, 2])
    page = (out / "feedback" / "s03" / "lab03.html").read_text(encoding="utf-8")
    assert "Your instructor's comment:" in page and "Name the cost of a frozen worker too." in page
    before = rows_by_key(out)
    term_csv = {row["student"]: row for row in table(out / "term.csv")}
    assert term_csv["s03"]["lab 03"] == "3.5" and term_csv["s03"]["lab 03 standing"] == "graded"
    assert (
        term_csv["s10"]["lab 03 standing"] == "not submitted" and term_csv["s10"]["lab 01 standing"] == "not submitted"
    )
    assert term_csv["s09"]["lab 00 standing"] == "not attempted"  # nothing answered: not "0, incorrect"

    # 3. a new Canvas export of lab 03, graded into the same folder with --lab 03
    again = term / "canvas-2"
    fx.write(lab03(POLICY_WHY), again / f"{canvas_name('s03')}_10003_70003_lab03.ipynb")  # the same words
    fx.write(lab03("I do not know."), again / f"{canvas_name('s04')}_10004_70004_lab03.ipynb")
    fx.write(lab03(None, right=False), again / f"{canvas_name('s09')}_10009_70009_lab03.ipynb")
    fx.write(lab00("s09"), again / "fallen" / "lab00.ipynb")  # another lab in the export: left alone
    code, said, err = run("grade", str(again), *common, "--lab", "03")
    assert code == 0, err
    assert said.startswith("graded 3,") and "1 file not graded" in said
    after = rows_by_key(out)
    assert sorted(after) == sorted(before)  # no row lost, none added
    assert {k: v for k, v in after.items() if k not in ("s03/lab03", "s04/lab03", "s09/lab03")} == {
        k: v for k, v in before.items() if k not in ("s03/lab03", "s04/lab03", "s09/lab03")
    }
    kept = exercise(out, "s03/lab03", "explain-policy")  # the answer it scored: the score and comment stay
    assert (kept["points"], kept["comment"], kept["stale"]) == (1.5, "Name the cost of a frozen worker too.", False)
    stale = exercise(out, "s04/lab03", "explain-policy")
    assert (stale["points"], stale["hand"], stale["stale"], stale["mark"]) == (None, 1.5, True, "to be graded by hand")
    grades = {row["submission"]: row for row in table(out / "grades.csv")}
    assert "the hand score 1.5 of 3 was given to an earlier answer (stale" in grades["s04/lab03"]["notes"]
    assert grades["s04/lab03"]["needs_manual"] == "yes" and grades["s09/lab03"]["points"] == "0"
    flagged = {(r["submission"], r["grade_id"]): r for r in table(out / "manual.csv")}
    assert flagged[("s04/lab03", "explain-policy")]["stale"] == "1.5 was given to an earlier answer: score this one"
    assert flagged[("s04/lab03", "explain-policy")]["answer"] == "I do not know."
    assert {row["student"]: row for row in table(out / "term.csv")}["s04"]["lab 03 standing"] == "stale hand score"
    canvas = {row["SIS User ID"]: row for row in table(out / "canvas.csv")[1:]}
    assert canvas["s04"]["Lab 03: Heartbeats and TTL design"] == ""  # not final: never exported as a grade
    listed = {row["file"]: row for row in table(out / "files.csv")}
    assert listed[str(again / "fallen" / "lab00.ipynb")]["outcome"] == "skipped"
    assert listed[str(again / "fallen" / "lab00.ipynb")]["detail"] == "lab 00 is not one --lab names"
    first = listed[str(term / "canvas" / f"{canvas_name('s04')}_10004_50004_lab03.ipynb")]  # graded in its time
    assert (first["outcome"], first["submission"]) == ("superseded", "s04/lab03") and "in its place later" in first[
        "detail"
    ]
    assert sum(row["outcome"] == "graded" for row in listed.values()) == len(after)  # one file graded per row

    # 4. the changed answer scored, merged; the exports hold every final grade
    manual = table(out / "manual.csv")
    for row in manual:
        if row["submission"] == "s04/lab03":
            row["score"] = "0"
    write_table(term / "scored-2.csv", manual)
    code, said, err = run("grade", "--out", str(out), "--manual", str(term / "scored-2.csv"))
    assert code == 0 and err == ""
    assert exercise(out, "s04/lab03", "explain-policy")["points"] == 0.0
    assert (
        exercise(out, "s03/lab03", "explain-policy")["points"] == 1.5
    )  # an older row, passed again, takes nothing back
    final = rows_by_key(out)
    terms = {row["student"]: row for row in table(out / "term.csv")}
    for student in ROSTER:
        mine = [row for key, row in final.items() if key.startswith(f"{student}/")]
        assert float(terms[student]["total"]) == pytest.approx(sum(row["final_points"] for row in mine))
    assert terms["s01"]["max_points"] == "14"  # labs 00, 01 and 03: 2 + 5 + 7
    moodle = {row["ID number"]: row for row in table(out / "moodle.csv")}
    canvas = {row["SIS User ID"]: row for row in table(out / "canvas.csv")[1:]}
    assert (
        moodle["s04"]["Lab 03: Heartbeats and TTL design"] == canvas["s04"]["Lab 03: Heartbeats and TTL design"] == "2"
    )
    assert canvas["s02"]["Lab 01: Leases and redelivery"] == "0.6" and canvas["s02"]["Student"] == "Alan Turing"
    assert table(out / "canvas.csv")[0]["Student"].strip() == "Points Possible"
