"""How fast does `shopops-lab grade` grade a class, next to nbgrader 0.9.6 `autograde`, lab by lab?

Both grade the same class in the same run, laid out the way nbgrader collects them
(`submitted/<student>/<assignment>/`): by default 30 submissions per lab, a class's size, the
master's answers and the untouched student notebook in turn (15 and 15). For each lab the two commands run interleaved,
`--rounds` times each (nbgrader with --force, ours into a fresh --out), and the medians
are compared: wall time of the whole command, start-up included, `shopops-lab grade --jobs 2`
(a warm judge per submission, a fresh confined learner process beside it) against
`nbgrader autograde` (a fresh Jupyter kernel per notebook). Target: >= 10x on every lab.

Both import the kit from this checkout (nbgrader's venv installs it editable), compiled to
bytecode first, as `pip install` leaves an installed kit: where PYTHONDONTWRITEBYTECODE is
set (as in some shells and CI), every run would otherwise compile the kit from source again
(0.6 s for `shopops-lab grade`, and as much for each of nbgrader's kernels).

nbgrader lives in a virtualenv of its own, built once as docs/instructors.md tells instructors
(tests/nbgrader_env.py; it needs PyPI the first time). Run:
`.venv/bin/python benchmarks/bench_grade.py [--labs 01 07] [--submissions 30] [--rounds 3]`.
Prints a line per lab and PASS/FAIL, and always exits 0: benchmarks inform, tests decide.
"""

from __future__ import annotations

import argparse
import compileall
import csv
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median
from time import perf_counter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the nbgrader venv builder and the submission builders

import grade_fixtures as fx  # noqa: E402
import nbgrader_env  # noqa: E402

TARGET = 10.0
JOBS = 2
LABS = sorted(path.name[:2] for path in fx.SOLUTIONS.glob("[0-9][0-9]_*.ipynb"))


def build_class(course: Path, lab: str, count: int) -> str:
    """`count` submissions of `lab` under course/submitted/<student>/<assignment>/; returns the assignment."""
    assignment = f"lab{lab}"
    name = fx.master_path(lab).name
    variants = [fx.all_right(lab), fx.submission(lab)]  # right, untouched
    for number in range(count):
        fx.write(variants[number % 2], course / "submitted" / f"s{number:05d}" / assignment / name)
    return assignment


def nbgrader_course(python: Path, scratch: Path, lab: str, count: int) -> tuple[Path, dict[str, str]]:
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
    return course, env


def time_nbgrader(python: Path, course: Path, env: dict[str, str], lab: str) -> float:
    started = perf_counter()
    done = nbgrader_env.run(python, ["-m", "nbgrader", "autograde", f"lab{lab}", "--force"], cwd=course, env=env)
    seconds = perf_counter() - started
    if done.returncode:
        raise SystemExit(f"nbgrader autograde failed:\n{done.stderr[-3000:]}")
    return seconds


def time_ours(submitted: Path, out: Path) -> tuple[float, list[dict[str, str]]]:
    command = [
        sys.executable,
        "-m",
        "shopops_lab",
        "grade",
        str(submitted),
        "--key",
        str(ROOT / "solutions"),
        "--out",
        str(out),
        "--jobs",
        str(JOBS),
    ]
    started = perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = perf_counter() - started
    if done.returncode:
        raise SystemExit(f"shopops-lab grade failed:\n{done.stderr[-3000:]}")
    with open(out / "grades.csv", newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["submission"] != "max"]
    return seconds, rows


def compare(python: Path, lab: str, count: int, rounds: int) -> float:
    theirs, ours = [], []
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="shopops-bench-grade-") as scratch:
        course, env = nbgrader_course(python, Path(scratch) / "nbgrader", lab, count)
        for number in range(rounds):  # interleaved: a busy moment slows both
            theirs.append(time_nbgrader(python, course, env, lab))
            seconds, rows = time_ours(course / "submitted", Path(scratch) / f"ours{number}")
            ours.append(seconds)
            loads.append(os.getloadavg()[0])
    ratio = median(theirs) / median(ours)
    points = ", ".join(sorted({row["points"] for row in rows}))
    print(
        f"lab {lab}: {count} submissions, median of {rounds}: nbgrader {median(theirs):6.1f} s, "
        f"shopops-lab {median(ours):6.1f} s ({median(ours) / count:.2f} s each; points seen {points}): "
        f"{ratio:4.1f}x  {'PASS' if ratio >= TARGET else 'FAIL'} (target >= {TARGET:g}x); "
        f"load average {min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} cores",
        flush=True,
    )
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--labs", nargs="*", default=LABS)
    parser.add_argument("--submissions", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "shopops_lab"), quiet=1)  # as an install leaves it (see above)
    try:
        python = nbgrader_env.ensure_venv()
    except nbgrader_env.NbgraderUnavailable as exc:
        print(f"skipped: nbgrader is not available here ({exc})")
        return 0
    for lab in args.labs:
        compare(python, lab, args.submissions, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
