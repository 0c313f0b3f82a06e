"""grade(): find, match, rebuild, run and score every submission, then merge the rows into
the gradebook kept in `--out` and write its files. With no submissions and `--manual`, the
hand scores alone are merged into the gradebook: no check runs."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from shopops_lab.course.errors import SubmissionInvalidError, UnconfinedError
from shopops_lab.course.grade import checked, confinement, report
from shopops_lab.course.grade.gradebook import Gradebook, claim
from shopops_lab.course.grade.hand import Applied, ManualScores
from shopops_lab.course.grade.judge import Limits, Warm
from shopops_lab.course.grade.key import Key, master_paths
from shopops_lab.course.grade.late import LatePolicy, due_dates
from shopops_lab.course.grade.pool import Pool, invalid
from shopops_lab.course.grade.rebuild import MAX_BYTES, read, rebuild, without_outputs
from shopops_lab.course.grade.results import Status, SubmissionResult
from shopops_lab.course.grade.roster import Roster
from shopops_lab.course.grade.sheets import Sheet
from shopops_lab.course.grade.submissions import Listed, Outcome, Submission, choose, find, lab_of, read_notebook
from shopops_lab.course.grade.zygote import Zygote
from shopops_lab.errors import BadArgumentError


def _lab_of(path: Path) -> str | None:
    """The lab a notebook says it is (its metadata): which masters the run needs, and half
    of its key. A file that cannot be read says nothing (its row will say why)."""
    try:
        kit = json.loads(read_notebook(path, MAX_BYTES), object_pairs_hook=without_outputs)["metadata"]["shopops_lab"]
        return str(kit["lab"])
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return None


@dataclass(frozen=True)
class GradeReport:
    """A finished run: one result per submission graded (in the order found; hand scores
    merged), where the gradebook is, the files not graded (superseded, unmatched, skipped),
    and warnings (unmatched files, manual scores that matched no answer or a changed one)."""

    results: tuple[SubmissionResult, ...]
    out: Path
    jobs: int
    warnings: tuple[str, ...] = ()
    listed: tuple[Listed, ...] = ()
    hand_scores: int | None = None  # merged without grading: how many manual.csv rows were taken
    walls: confinement.Confinement = confinement.Confinement()  # how learner code was confined

    def grader_failures(self) -> list[SubmissionResult]:
        """The submissions the grader itself failed on (not graded, nothing charged)."""
        return [result for result in self.results if result.status is Status.GRADER_ERROR]

    def summary(self, seconds: float) -> str:
        """The run in one line, e.g. `graded 38, timeout 1, invalid 1, error 0: 40 submissions
        in 6.2 s (0.15 s each, 2 at a time, confined: uid drop, Landlock ABI 7) ->
        grades/grades.csv` (`grader error N` after `error` where the grader itself failed on N)"""
        target = self.out / report.GRADES_CSV
        if self.hand_scores is not None:
            return f"hand scores merged ({self.hand_scores} rows taken), no check run, in {seconds:.1f} s -> {target}"
        counts = report.summary_counts(self.results)
        each = seconds / max(len(self.results), 1)
        parts = ", ".join(
            f"{status} {count}" for status, count in counts.items() if count or status != Status.GRADER_ERROR
        )
        left = f", {len(self.listed)} file{'s' if len(self.listed) != 1 else ''} not graded (files.csv)"
        return (
            f"{parts}: {len(self.results)} submission{'s' if len(self.results) != 1 else ''} in {seconds:.1f} s "
            f"({each:.2f} s each, {self.jobs} at a time, confined: {self.walls.describe()})"
            f"{left if self.listed else ''} -> {target}"
        )


@dataclass(frozen=True)
class Matching:
    """How files are told apart: the roster, the instructor's own pattern, the labs to grade."""

    roster: str | Path | None = None
    pattern: str | None = None
    labs: Collection[str] | None = None

    def lab_ids(self) -> set[str] | None:
        """The labs --lab names, two digits each (None: every lab)."""
        if self.labs is None:
            return None
        wrong = sorted(lab for lab in self.labs if not (lab.isdigit() and len(lab) <= 2))
        if wrong:
            raise BadArgumentError(
                field=f"--lab {wrong[0]}", problem="is not a lab number", fix="pass e.g. --lab 03 --lab 05"
            )
        return {lab.zfill(2) for lab in self.labs}

    def compiled(self) -> re.Pattern[str] | None:
        if self.pattern is None:
            return None
        try:
            found = re.compile(self.pattern)
        except re.error as exc:
            problem = f"is not a regular expression ({exc})"
        else:
            if "student" in found.groupindex:
                return found
            problem = "has no (?P<student>...) group"
        raise BadArgumentError(
            field=f"--student-pattern {self.pattern}",
            problem=problem,
            fix=r"pass a regular expression with a student group, e.g. '^(?P<student>[^/]+)/week\d+/'",
        )


def grade(
    paths: Sequence[str],
    *,
    key: str | Path | None,
    out: str | Path | None,
    jobs: int = 1,
    limits: Limits = Limits(),
    manual: str | Path | None = None,
    progress: Callable[[int], Any] | None = None,
    zygote: Zygote | None = None,
    matching: Matching = Matching(),
    due: Sequence[str] = (),
    late_policy: str | None = None,
    force: bool = False,
    unconfined: bool = False,
) -> GradeReport:
    """Grade every notebook under `paths` against the masters in `key`, and merge the rows
    into the gradebook in `out`. Bad arguments raise BadArgumentError before anything runs
    or is written. `zygote`: one the caller started (and closes), else one is started here.
    No `paths`: merge `manual`'s hand scores into the gradebook, running nothing. Where nothing
    can confine learner code (`Confinement.detect`), refuses (UnconfinedError) unless
    `unconfined`."""
    folder = claim(out, force=force, key=key)
    stored = Gradebook.load(folder, force=force)
    policy = LatePolicy.parse(late_policy) if late_policy is not None else None
    if not paths:
        return _merge_only(folder, stored, manual, policy)
    walls = confinement.Confinement.detect()
    if not walls.confined and not unconfined:
        raise UnconfinedError(
            why=unconfined_why(),
            fix="grade on Linux 5.13 or later with Landlock on, or as root on Linux; or pass --unconfined to "
            "grade anyway, knowing that a learner's code could then " + "; ".join(confinement.UNCONFINED),
        )
    owned = Zygote.start() if zygote is None else None  # loads the learners' kit while the key loads
    try:
        return _grade(
            paths,
            key=key,
            folder=folder,
            stored=stored,
            jobs=jobs,
            limits=limits,
            manual=manual,
            progress=progress,
            zygote=zygote or owned,
            matching=matching,
            due=due,
            policy=policy,
            walls=walls,
        )
    finally:
        if owned is not None:
            owned.close()


def _warnings(applied: Applied, source: str) -> list[str]:
    return [
        f"{source}: the score for {name} {grade_id} matches no written answer in the gradebook"
        for name, grade_id in applied.unmatched
    ] + [
        f"{source}: the score for {name} {grade_id} was given to an earlier answer: kept aside as stale, "
        "not counted (score the new answer)"
        for name, grade_id in applied.stale
    ]


def _merge_only(folder: Path, stored: Gradebook, manual: str | Path | None, policy: LatePolicy | None) -> GradeReport:
    if manual is None:
        raise BadArgumentError(
            field="submissions",
            problem="are missing",
            fix="pass the notebooks to grade, or --manual manual.csv to merge hand scores into --out's gradebook",
        )
    if not stored.rows:
        raise BadArgumentError(
            field=f"--out {folder}",
            problem="holds no gradebook to merge hand scores into",
            fix="pass the --out folder a grading run wrote",
        )
    scores = ManualScores.read(manual, stored.sheets)
    applied = scores.apply(list(stored.rows.values()))
    book = stored.with_rows(applied.results)
    book = replace(book, policy=policy or book.policy)
    report.Writer(book).write(report.check_out(folder))
    return GradeReport(
        results=(),
        out=folder,
        jobs=0,
        warnings=tuple(_warnings(applied, scores.source)),
        hand_scores=len(scores.entries),
    )


def _grade(
    paths: Sequence[str],
    key: str | Path | None,
    folder: Path,
    stored: Gradebook,
    jobs: int,
    limits: Limits,
    manual: str | Path | None,
    progress: Callable[[int], Any] | None,
    zygote: Zygote | None,
    matching: Matching,
    due: Sequence[str],
    policy: LatePolicy | None,
    walls: confinement.Confinement,
) -> GradeReport:
    roster = Roster.read(matching.roster) if matching.roster else None
    stems = {path.name[:2]: path.stem for path in master_paths(key)}
    found = find(paths, stems, roster=roster, pattern=matching.compiled())
    labs = matching.lab_ids()
    submissions, listed = choose([lab_of(submission, _lab_of) for submission in found.submissions], labs)
    listed = [*found.unmatched, *listed]
    answer_key = Key.load(key, labs={submission.lab for submission in submissions if submission.lab})
    due_by_lab = due_dates(due, sorted({s.lab for s in submissions if s.lab} | set(labs or ())))
    if zygote is not None:
        zygote.load({module for master in answer_key.masters.values() for module in master.learner_imports()})
    sheets = {**stored.sheets, **{lab: Sheet.of(master) for lab, master in answer_key.masters.items()}}
    scores = ManualScores.read(manual, sheets) if manual else None
    warm = Warm.prepare(answer_key)  # refuses a lab whose imports fail here, before anything is written
    report.check_out(folder)
    bar = progress(len(submissions)) if progress else None
    rows: dict[str, SubmissionResult] = {}
    work = []
    for submission in submissions:
        try:
            notebook, master, notes = read(submission, answer_key)
        except SubmissionInvalidError as exc:
            rows[submission.key] = replace(invalid(submission, exc.problem + f" (fix: {exc.fix})"), lab=submission.lab)
            if bar:
                bar.advance()
            continue
        work.append((submission, master, rebuild(notebook, master, notes)))

    def done(result: SubmissionResult) -> None:
        if bar:
            bar.advance(result)

    try:
        paths_in = [submission.path for submission in submissions]
        hide = confinement.hidden(answer_key.source, folder, paths_in)
        private = tuple(map(str, (answer_key.source, folder, checked.folder(), *(p.parent for p in paths_in))))
        pool = Pool(
            answer_key, limits, jobs, warm=warm, hide=hide, walls=walls, private=private, zygote=zygote, on_result=done
        )
        for result in pool.run(work):
            rows[result.submission.key] = result
    finally:
        if bar:
            bar.close()
    graded = [Listed(s.file, Outcome.GRADED, "", s) for s in submissions]
    book = stored.merged(
        [rows[submission.key] for submission in submissions],
        masters=[master for lab, master in answer_key.masters.items() if lab in {s.lab for s in submissions}],
        due=due_by_lab,
        files=[*graded, *listed],
        names={s.id: s.name for s in roster.students.values() if s.name} if roster else None,
        policy=policy,
    )
    warnings = [f"{item.file}: not graded, {item.outcome.value}: {item.detail}" for item in listed if _warn(item)]
    if scores is not None:
        applied = scores.apply(list(book.rows.values()))
        book = book.with_rows(applied.results)
        warnings.extend(_warnings(applied, scores.source))
    report.Writer(book, confinement=walls.describe()).write(folder)
    results = tuple(book.rows[submission.key] for submission in submissions)
    return GradeReport(
        results=results, out=folder, jobs=jobs, warnings=tuple(warnings), listed=tuple(listed), walls=walls
    )


def _warn(item: Listed) -> bool:
    """Unmatched files and links not followed are warned of (a student may be missing a
    grade); superseded and skipped ones only listed."""
    return item.outcome in (Outcome.UNMATCHED, Outcome.REFUSED)


def unconfined_why() -> str:
    """Why nothing can confine learner code on this host (for the refusal)."""
    import platform

    if platform.system() != "Linux":
        return f"{platform.system()} has neither Landlock nor the grader's uid drop (Linux only)"
    return (
        f"this Linux kernel ({platform.release()}) offers no Landlock (5.13 or later, with landlock among its "
        "security modules: lsm=landlock,...), and the grader does not run as root to drop to a uid of its own"
    )


__all__ = ["GradeReport", "Matching", "Submission", "grade"]
