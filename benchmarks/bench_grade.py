"""How fast does `shopops-lab grade` grade a class, next to nbgrader 0.9.6 `autograde`?

Both grade the same submissions in the same run, laid out the way nbgrader collects them
(`submitted/<student>/<assignment>/`): a third right, a third wrong, a third unanswered.

1. Lab 01, 40 submissions: `shopops-lab grade --jobs 2` (a warm parent forking one child
   per submission) against `nbgrader autograde` (a fresh Jupyter kernel per notebook).
   Seconds per submission for both, wall time of the whole command (start-up included);
   target: at least 10x nbgrader's throughput.
2. The slowest lab (07, burst day: its check simulates three days of 3,000 items), fewer
   submissions; printed for information.

nbgrader lives in a virtualenv of its own, built once as the README tells instructors
(tests/nbgrader_env.py; it needs PyPI the first time). Run:
`.venv/bin/python benchmarks/bench_grade.py [--submissions 40] [--slow-submissions 6]`.
Prints numbers, the 10,000-submission estimate and PASS/FAIL, and always exits 0:
benchmarks inform, tests decide.
"""
from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from time import perf_counter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the nbgrader venv builder and the submission builders

import grade_fixtures as fx  # noqa: E402
import nbgrader_env  # noqa: E402

TARGET = 10.0
JOBS = 2
CLASS = 10_000
WRONG = {"01": {"send-followup": fx.KEY_FROM_TOKEN, "what-next": fx.EVERYTHING_STOPS},
         "07": {"my-policy": "def my_policy(signals):\n    return acquire()"}}


def build_class(course: Path, lab: str, count: int) -> str:
    """`count` submissions of `lab` under course/submitted/<student>/<assignment>/; returns the assignment."""
    assignment = f"lab{lab}"
    name = fx.master_path(lab).name
    variants = [fx.all_right(lab), fx.submission(lab, WRONG[lab]), fx.submission(lab)]
    for number in range(count):
        fx.write(variants[number % 3], course / "submitted" / f"s{number:05d}" / assignment / name)
    return assignment


def time_nbgrader(python: Path, scratch: Path, lab: str, count: int) -> tuple[float, Path]:
    course, _ = nbgrader_env.make_course(scratch)
    env = nbgrader_env.environment(python, scratch)
    assignment = f"lab{lab}"
    source = course / "source" / assignment
    source.mkdir(parents=True)
    shutil.copy(fx.master_path(lab), source)
    done = nbgrader_env.run(
        python, ["-m", "nbgrader", "generate_assignment", assignment, "--force"], cwd=course, env=env
    )
    if done.returncode:
        raise SystemExit(f"nbgrader generate_assignment failed:\n{done.stderr[-3000:]}")
    build_class(course, lab, count)
    started = perf_counter()
    done = nbgrader_env.run(python, ["-m", "nbgrader", "autograde", assignment, "--force"], cwd=course, env=env)
    seconds = perf_counter() - started
    if done.returncode:
        raise SystemExit(f"nbgrader autograde failed:\n{done.stderr[-3000:]}")
    return seconds, course


def time_ours(submitted: Path, out: Path) -> tuple[float, list[dict[str, str]]]:
    command = [sys.executable, "-m", "shopops_lab", "grade", str(submitted),
               "--key", str(ROOT / "solutions"), "--out", str(out), "--jobs", str(JOBS)]
    started = perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = perf_counter() - started
    if done.returncode:
        raise SystemExit(f"shopops-lab grade failed:\n{done.stderr[-3000:]}")
    with open(out / "grades.csv", newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["submission"] != "max"]
    return seconds, rows


def compare(python: Path, lab: str, count: int, *, target: float | None) -> None:
    with tempfile.TemporaryDirectory(prefix="shopops-bench-grade-") as scratch:
        theirs, course = time_nbgrader(python, Path(scratch) / "nbgrader", lab, count)
        one, _ = time_ours(course / "submitted" / "s00000", Path(scratch) / "one")
        ours, rows = time_ours(course / "submitted", Path(scratch) / "ours")
    graded = sum(row["status"] == "graded" for row in rows)
    points = sorted({row["points"] for row in rows})
    ratio = theirs / ours
    each = max(ours - one, 0.0) / max(count - 1, 1)  # start-up (imports, loading the key) paid once
    print(f"lab {lab}, {count} submissions (right / wrong / unanswered):")
    print(f"  nbgrader {nbgrader_env.NBGRADER_VERSION} autograde : {theirs:7.1f} s  {theirs / count:6.3f} s/submission")
    print(f"  shopops-lab grade --jobs {JOBS}: {ours:7.1f} s  {ours / count:6.3f} s/submission  "
          f"({graded}/{count} graded, points seen: {', '.join(points)}); one submission alone: {one:.1f} s")
    print(
        f"  throughput ratio: {ratio:.1f}x. Beyond start-up each further submission costs {each:.3f} s, so "
        f"{CLASS:,} would take ~{(one + each * CLASS) / 60:.0f} min here with {JOBS} jobs "
        f"(nbgrader: ~{theirs / count * CLASS / 3600:.1f} h)"
    )
    if target is not None:
        print(f"  {'PASS' if ratio >= target else 'FAIL'}: target >= {target:g}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--submissions", type=int, default=40)
    parser.add_argument("--slow-submissions", type=int, default=6)
    args = parser.parse_args()
    try:
        python = nbgrader_env.ensure_venv()
    except nbgrader_env.NbgraderUnavailable as exc:
        print(f"skipped: nbgrader is not available here ({exc})")
        return 0
    compare(python, "01", args.submissions, target=TARGET)
    compare(python, "07", args.slow_submissions, target=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
