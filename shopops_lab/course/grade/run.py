"""grade(): find, rebuild, run and score every submission, then write the gradebook."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shopops_lab.course.errors import SubmissionInvalidError, UnconfinedError
from shopops_lab.course.grade import checked, confinement, report
from shopops_lab.course.grade.key import Key, master_paths
from shopops_lab.course.grade.pool import Pool, invalid
from shopops_lab.course.grade.rebuild import MAX_BYTES, read, rebuild, without_outputs
from shopops_lab.course.grade.results import Status, SubmissionResult
from shopops_lab.course.grade.sandbox import Limits, Warm
from shopops_lab.course.grade.submissions import Submission, find
from shopops_lab.course.grade.zygote import Zygote


def _lab_of(submission: Submission) -> str | None:
    """The lab a submission says it is (its metadata), else the one its name says: which
    masters the run needs. A file that cannot be read says nothing (its row will say why)."""
    try:
        with open(submission.path, "rb") as handle:
            kit = json.loads(handle.read(MAX_BYTES + 1), object_pairs_hook=without_outputs)["metadata"]["shopops_lab"]
        return str(kit["lab"])
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return submission.lab_hint


@dataclass(frozen=True)
class GradeReport:
    """A finished run: one result per submission (in submission order), where they were
    written, and warnings (e.g. manual scores that matched no submission)."""

    results: tuple[SubmissionResult, ...]
    out: Path
    jobs: int
    warnings: tuple[str, ...] = ()
    walls: confinement.Confinement = confinement.Confinement()  # how learner code was confined

    def grader_failures(self) -> list[SubmissionResult]:
        """The submissions the grader itself failed on (not graded, nothing charged)."""
        return [result for result in self.results if result.status is Status.GRADER_ERROR]

    def summary(self, seconds: float) -> str:
        """The run in one line, e.g. `graded 38, timeout 1, invalid 1, error 0: 40 submissions
        in 6.2 s (0.15 s each, 2 at a time, confined: uid drop, Landlock ABI 7) ->
        grades/grades.csv` (`grader error N` after `error` where the grader itself failed on N)"""
        counts = report.summary_counts(self.results)
        each = seconds / max(len(self.results), 1)
        parts = ", ".join(
            f"{status} {count}" for status, count in counts.items() if count or status != Status.GRADER_ERROR
        )
        return (
            f"{parts}: {len(self.results)} submission{'s' if len(self.results) != 1 else ''} in {seconds:.1f} s "
            f"({each:.2f} s each, {self.jobs} at a time, confined: {self.walls.describe()}) -> "
            f"{self.out / report.GRADES_CSV}"
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
    unconfined: bool = False,
) -> GradeReport:
    """Grade every notebook under `paths` against the masters in `key`; write the gradebook
    to `out`. Bad arguments raise BadArgumentError before anything runs or is written.
    `zygote`: one the caller started (and closes), else one is started here. Where nothing
    can confine learner code (`Confinement.detect`), refuses (UnconfinedError) unless
    `unconfined`."""
    walls = confinement.Confinement.detect()
    if not walls.confined and not unconfined:
        raise UnconfinedError(
            why=unconfined_why(),
            fix="grade on Linux 5.13 or later with Landlock on, or as root on Linux; or pass --unconfined to "
            "grade anyway, knowing that a learner's code could then " + "; ".join(confinement.UNCONFINED),
        )
    owned = Zygote.start() if zygote is None else None  # loads the learners' kit while the key loads
    try:
        return _grade(paths, key, out, jobs, limits, manual, progress, zygote or owned, walls)
    finally:
        if owned is not None:
            owned.close()


def _grade(
    paths: Sequence[str],
    key: str | Path | None,
    out: str | Path | None,
    jobs: int,
    limits: Limits,
    manual: str | Path | None,
    progress: Callable[[int], Any] | None,
    zygote: Zygote | None,
    walls: confinement.Confinement,
) -> GradeReport:
    submissions = find(paths, {path.name[:2]: path.stem for path in master_paths(key)})
    answer_key = Key.load(key, labs={lab for lab in map(_lab_of, submissions) if lab is not None})
    if zygote is not None:
        zygote.load({module for master in answer_key.masters.values() for module in master.learner_imports()})
    scores = report.ManualScores.read(manual, answer_key) if manual else None
    warm = Warm.prepare(answer_key)  # refuses a lab whose imports fail here, before anything is written
    folder = report.prepare_out(out)
    bar = progress(len(submissions)) if progress else None
    rows: dict[str, SubmissionResult] = {}
    work = []
    for submission in submissions:
        try:
            notebook, master, notes = read(submission, answer_key)
        except SubmissionInvalidError as exc:
            rows[submission.name] = invalid(submission, exc.problem + f" (fix: {exc.fix})")
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
            rows[result.submission.name] = result
    finally:
        if bar:
            bar.close()
    results = [rows[submission.name] for submission in submissions]
    warnings: list[str] = []
    if scores is not None:
        results, unmatched = scores.apply(results)
        warnings.extend(
            f"{scores.source}: the score for {name} {grade_id} matches no written answer in this run"
            for name, grade_id in unmatched
        )
    report.write(folder, results, answer_key, confinement=walls.describe())
    return GradeReport(results=tuple(results), out=folder, jobs=jobs, warnings=tuple(warnings), walls=walls)


def unconfined_why() -> str:
    """Why nothing can confine learner code on this host (for the refusal)."""
    import platform

    if platform.system() != "Linux":
        return f"{platform.system()} has neither Landlock nor the grader's uid drop (Linux only)"
    return (
        f"this Linux kernel ({platform.release()}) offers no Landlock (5.13 or later, with landlock among its "
        "security modules: lsm=landlock,...), and the grader does not run as root to drop to a uid of its own"
    )
