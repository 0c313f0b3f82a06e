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
Each lab's line is followed by the least time any grader could take: the CPU seconds of one
right submission's checks, run once in one process (no boundary, nothing looked at twice),
times the right submissions, over the cores. Where nbgrader's time is under 10x that, no grader
that runs each check once can reach the target.
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


FLOOR = """
import contextlib, io, os, sys
from pathlib import Path
from IPython.display import display
from shopops_lab.course.grade import rebuild
from shopops_lab.course.grade.key import Key
from shopops_lab.course.grade.submissions import Submission

lab, path, key = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
notebook, master, notes = rebuild.read(Submission(path, path.name, "floor", lab), Key.load(key, [lab]))
plan = rebuild.rebuild(notebook, master, notes)
needed, namespace, spent = plan.needed(), {"display": display}, 0.0
for step in plan.steps:
    if step.index not in needed:
        continue
    source = "\\n".join(line for line in step.source.splitlines() if not line.lstrip().startswith(("%", "!")))
    before = os.times()
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(source, step.grade_id or "cell", "exec"), namespace)
    after = os.times()
    if step.role is rebuild.Role.TEST:
        spent += sum(after[:4]) - sum(before[:4])
print(spent)
"""


def checks_once(lab: str, scratch: Path) -> float:
    """Processor seconds (its own and its children's) of a right submission's test cells run once
    in one process, after the cells they need: what any grader that runs each check once pays at
    the least per right submission (no process boundary, no second look at anything)."""
    path = scratch / "floor" / fx.master_path(lab).name
    fx.write(fx.all_right(lab), path)
    command = [sys.executable, "-c", FLOOR, lab, str(path), str(ROOT / "solutions")]
    done = subprocess.run(command, capture_output=True, text=True, cwd=scratch)
    if done.returncode:
        raise SystemExit(f"the checks of lab {lab} failed in one process:\n{done.stderr[-3000:]}")
    return float(done.stdout.split()[-1])


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
        floor = median(checks_once(lab, Path(scratch)) for _ in range(rounds))
    ratio = median(theirs) / median(ours)
    points = ", ".join(sorted({row["points"] for row in rows}))
    least = (count + 1) // 2 * floor / JOBS  # the right submissions' checks, each run once, on JOBS cores
    print(
        f"lab {lab}: {count} submissions, median of {rounds}: nbgrader {median(theirs):6.1f} s, "
        f"shopops-lab {median(ours):6.1f} s ({median(ours) / count:.2f} s each; points seen {points}): "
        f"{ratio:4.1f}x  {'PASS' if ratio >= TARGET else 'FAIL'} (target >= {TARGET:g}x); "
        f"load average {min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} cores",
        flush=True,
    )
    print(
        f"  the checks of one right submission, once, in one process: {floor:.2f} CPU s, so its "
        f"{(count + 1) // 2} right submissions take at least {least:.1f} s on {JOBS} cores for any grader "
        f"that runs each check once: nbgrader's time is {median(theirs) / least:.1f}x that",
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
