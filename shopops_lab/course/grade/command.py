"""`shopops-lab grade`: the options, their checks, a progress bar and the summary line.

Usage errors (a missing --key, an empty folder, an --out that is not a gradebook, a bad
--manual, --roster or --due) are refused before anything runs, as one line naming the fix
(exit 2). Once grading starts every submission gets a row, whatever its code does, and the
exit status is 0, or 1 where the grader itself failed on a submission (one line says why;
that row charges nothing)."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import TextIO

from shopops_lab.course import outputs
from shopops_lab.course.command import add_lab_option
from shopops_lab.errors import BadArgumentError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "submissions",
        nargs="*",
        metavar="SUBMISSION_OR_DIR",
        help="notebooks, or folders searched recursively (nbgrader's submitted/ or exchange, an LMS download); "
        "none, with --manual: merge hand scores into --out's gradebook without running a check",
    )
    parser.add_argument("--key", metavar="DIR", help="the master notebooks to grade against (the kit's solutions/)")
    parser.add_argument(
        "--out",
        metavar="OUTDIR",
        help="the gradebook folder: a new or empty one, or one grade wrote before (merged into)",
    )
    outputs.add_force(parser, "--out", "a gradebook")
    add_lab_option(parser, "grade only this lab's submissions (repeatable); the gradebook's other rows stay")
    parser.add_argument("--roster", metavar="ROSTER.csv", help="the class: columns id,name,aliases (aliases: a;b)")
    parser.add_argument(
        "--student-pattern",
        metavar="REGEX",
        help="how to read a student (and lab, time) from a file's path, e.g. '^(?P<student>[^/]+)/'",
    )
    parser.add_argument(
        "--due",
        metavar="[LAB=]WHEN",
        action="append",
        default=[],
        help="due date (ISO 8601; UTC unless it says), for every lab graded or one: --due 05=2026-03-10T23:59+01:00",
    )
    parser.add_argument(
        "--late-policy",
        metavar="POLICY",
        help="none (flag only, the default), zero, or N%%/day of the lab's points per day late",
    )
    parser.add_argument(
        "--jobs",
        metavar="N",
        type=int,
        default=os.cpu_count() or 1,
        help="submissions graded at once (default: the number of cores)",
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        default=60.0,
        help="limit per cell, so per exercise: a hung answer costs its exercise (default: 60)",
    )
    parser.add_argument(
        "--notebook-timeout",
        metavar="SECONDS",
        type=float,
        default=600.0,
        help="limit for a whole submission (default: 600)",
    )
    parser.add_argument(
        "--memory",
        metavar="MB",
        type=int,
        default=2048,
        help="memory a submission may add to the grader's own, where the OS enforces it (default: 2048)",
    )
    parser.add_argument(
        "--unconfined",
        action="store_true",
        help="grade even where nothing can confine learner code (no Landlock, not root): it then runs with "
        "your rights; where confinement is available it is used all the same",
    )
    parser.add_argument(
        "--manual",
        metavar="SCORES.csv",
        help="a manual.csv from an earlier run with its score column filled in: merged into the grades",
    )


MAX_SECONDS = 7 * 24 * 3600.0  # a week: any longer limit is no limit
MAX_MEMORY_MB = 2**20  # a terabyte


def _positive(name: str, value: float, most: float, example: str) -> None:
    if not (math.isfinite(value) and 0 < value <= most):
        raise BadArgumentError(
            field=name,
            problem=f"is {value:g}",
            fix=f"pass a number above 0 and at most {most:.0f}, e.g. {name} {example}",
        )


@dataclass
class Progress:
    """`[#####.....] 12/40` on one line of a terminal; silent when stderr is not one (logs, CI)."""

    total: int
    stream: TextIO
    width: int = 30
    done: int = 0

    def advance(self, _result: object = None) -> None:
        self.done += 1
        if self.stream.isatty():
            filled = self.width * self.done // max(self.total, 1)
            self.stream.write(f"\rgrading [{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total}")
            self.stream.flush()

    def close(self) -> None:
        if self.stream.isatty() and self.done:
            self.stream.write("\r" + " " * (self.width + 30) + "\r")
            self.stream.flush()


def run(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    from shopops_lab.course.grade.zygote import Zygote

    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    started = time.monotonic()
    if args.jobs < 1:
        raise BadArgumentError(field="--jobs", problem=f"is {args.jobs}", fix="pass 1 or more")
    _positive("--timeout", args.timeout, MAX_SECONDS, "60")
    _positive("--notebook-timeout", args.notebook_timeout, MAX_SECONDS, "600")
    _positive("--memory", args.memory, MAX_MEMORY_MB, "2048")
    _say_what_stays_open(stderr, unconfined=args.unconfined)
    zygote = Zygote.start() if args.submissions else None  # the learners' kit loads while the grader loads its own
    try:
        from shopops_lab.course.grade.judge import Limits
        from shopops_lab.course.grade.run import Matching, grade

        limits = Limits(
            cell_seconds=args.timeout, notebook_seconds=max(args.notebook_timeout, args.timeout), memory_mb=args.memory
        )
        report = grade(
            args.submissions,
            key=args.key,
            out=args.out,
            jobs=args.jobs,
            limits=limits,
            manual=args.manual,
            progress=lambda total: Progress(total, stderr),
            zygote=zygote,
            matching=Matching(roster=args.roster, pattern=args.student_pattern, labs=args.labs),
            due=args.due,
            late_policy=args.late_policy,
            force=args.force,
            unconfined=args.unconfined,
        )
    finally:
        if zygote is not None:
            zygote.close()
    for warning in report.warnings:
        print(f"warning: {warning}", file=stderr)
    print(report.summary(time.monotonic() - started), file=stdout)
    failed = report.grader_failures()
    if failed:
        names = ", ".join(result.submission.name for result in failed[:5]) + (", ..." if len(failed) > 5 else "")
        print(
            f"error: the grader failed on {len(failed)} submission{'s' if len(failed) != 1 else ''} ({names}), "
            f"not graded and charged nothing: {failed[0].reason}. Fix that and grade them again.",
            file=stderr,
        )
        return 1
    return 0


def _say_what_stays_open(stderr: TextIO, *, unconfined: bool) -> None:
    """Before grading: what a learner's code could do on this host that confinement would stop
    (a warning with --unconfined where nothing confines it; a note where the kernel's Landlock
    is older than the grader uses). Where nothing confines it and --unconfined is not given,
    `grade` refuses."""
    from shopops_lab.course.grade.confinement import Confinement

    walls = Confinement.detect()
    if not walls.confined and unconfined:
        print(f"warning: grading unconfined: a learner's code can {'; '.join(walls.left_open())}", file=stderr)
    elif walls.confined and walls.left_open():
        print(
            f"note: confined by {walls.describe()}, a learner's code can still {'; '.join(walls.left_open())}",
            file=stderr,
        )
