"""The parent: run every submission in a child process of its own, `jobs` at a time, and
turn what the children report into scored rows.

The parent watches two deadlines per submission: the current cell's (its limit plus a grace,
for an answer that swallows the child's own timer) and the whole notebook's. A child that
passes the first, or dies in a cell (a crash, `os._exit`, the kernel's OOM killer), is
killed and started again from the warm parent with that cell stopped: the cell, and what
depends on it (`Plan.blocked`), are skipped, the exercises already scored are not run again,
so a hang costs the exercise it is in once and the others are still graded.
"""

from __future__ import annotations

import gc
import multiprocessing
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import wait
from typing import Any

from shopops_lab.course.grade import confinement, judge
from shopops_lab.course.grade.judge import Job, Limits
from shopops_lab.course.grade.key import Key, Kind, Master
from shopops_lab.course.grade.messages import (
    CellStarted,
    CellStopped,
    Done,
    GraderFailed,
    LearnerStarted,
    Message,
    MessageError,
    Note,
    Restarting,
    Verdict,
    decode,
)
from shopops_lab.course.grade.rebuild import Plan
from shopops_lab.course.grade.remote import death
from shopops_lab.course.grade.results import ExerciseResult, Mark, Status, SubmissionResult
from shopops_lab.course.grade.submissions import Submission
from shopops_lab.course.grade.zygote import Zygote

AUTO_MARKS = frozenset({Mark.CORRECT, Mark.INCORRECT, Mark.NOT_ATTEMPTED, Mark.ERROR})
START_SECONDS = 60.0
MESSAGES_PER_WAKE = 1000
MESSAGE_BYTES = 1 << 20  # a child that has not reached its first cell by then is stuck (a spawn re-imports the kit)


def _context() -> Any:
    """Fork where the platform has it (each child starts warm), else spawn (each child warms itself)."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


@dataclass
class _Run:
    """The parent's bookkeeping for one submission (mutable: it follows the child)."""

    submission: Submission
    master: Master
    plan: Plan
    started: float
    slot: int = 0  # which of the `jobs` submissions graded at once
    core: int | None = None  # the slot's core, kept by its judge and learner for every attempt
    stopped: dict[int, str] = field(default_factory=dict)  # step index -> why it stopped
    results: dict[int, list[Any]] = field(default_factory=dict)  # test step index -> [mark, message, evidence]
    learners: list[int] = field(default_factory=list)  # process groups of the learner's processes
    noted: list[str] = field(default_factory=list)  # what the judge noted for the instructor
    uid: int | None = None
    process: Any = None
    connection: Any = None
    scratch: str = ""
    current: int | None = None
    since: float = 0.0
    done: bool = False
    out_of_time: bool = False
    failure: str = ""
    fault: str = ""  # why the grader itself failed on this submission (then it charges nothing)


@dataclass
class Pool:
    """Grades plans with at most `jobs` children at once."""

    key: Key
    limits: Limits
    jobs: int
    warm: judge.Warm | None = None  # prepared already (the key's imports checked), else prepared here
    hide: tuple[str, ...] = ()  # what the learner's processes must not see (the key, --out, submissions)
    walls: confinement.Confinement = field(default_factory=confinement.Confinement.detect)
    private: tuple[str, ...] = ()  # what no learner may read, never granted by its Landlock rules
    zygote: Zygote | None = None  # started already (loading the kit while the key loads), else started here
    on_result: Callable[[SubmissionResult], None] = lambda result: None
    clock: Callable[[], float] = time.monotonic
    context: Any = field(default_factory=lambda: _context())  # looked up when made (tests swap it)
    running: list[_Run] = field(default_factory=list, init=False)  # the judges at work now
    reaper: confinement.Reaper | None = field(default=None, init=False)  # adopts the learners' orphans

    @property
    def forks(self) -> bool:
        """Children are forks of this warm process (they inherit the warm key)."""
        return bool(self.context.get_start_method() == "fork")

    @property
    def grace(self) -> float:
        return max(1.0, self.limits.cell_seconds * 0.25)

    def run(self, work: Sequence[tuple[Submission, Master, Plan]]) -> list[SubmissionResult]:
        self.warm = self.warm or judge.Warm.prepare(self.key)
        owned = None
        if self.forks:
            judge.INHERITED["warm"] = self.warm  # every child inherits it
            if self.zygote is None:
                self.zygote = owned = Zygote.start()
        gc.collect()
        gc.freeze()  # forked children share the warm parent's pages instead of copying them
        results: list[SubmissionResult] = []
        pending = deque(work)
        running = self.running = []
        allowed = confinement.cores()
        self.reaper = confinement.Reaper()
        try:
            while pending or running:
                while len(running) < self.jobs:
                    slot = min(set(range(self.jobs)) - {run.slot for run in running})
                    core = confinement.core_for(slot, allowed)
                    if not pending:
                        break
                    submission, master, plan = pending.popleft()
                    run = _Run(submission, master, plan, self.clock(), slot, core)
                    self._start(run)
                    running.append(run)
                self._wait(running)
                for run in [run for run in running if run.process is None]:
                    running.remove(run)
                    result = self._result(run)
                    results.append(result)
                    self.on_result(result)
        finally:
            for run in running:
                self._kill(run)
            self.reaper.close(self._kept())
            self.reaper = None
            gc.unfreeze()
            judge.INHERITED.clear()
            if owned is not None:
                owned.close()
                self.zygote = None
        return results

    # --- children ---------------------------------------------------------------------

    def _start(self, run: _Run) -> None:
        run.scratch = tempfile.mkdtemp(prefix="shopops-grade-")  # fresh for every attempt
        run.uid = confinement.next_uid() if self.walls.drop else None
        learner_scratch = confinement.learner_folder(run.scratch, run.uid)
        rules = confinement.rules(learner_scratch, self.private) if self.walls.landlock else None
        job = Job(
            plan=run.plan,
            key=str(self.key.source),
            limits=self.limits,
            scratch=run.scratch,
            stopped=frozenset(run.stopped),
            scored=frozenset(run.results),
            learner_scratch=learner_scratch,
            uid=run.uid,
            hide=self.hide,
            walls=self.walls,
            rules=rules,
            core=run.core,
        )
        reader, writer = self.context.Pipe(duplex=False)
        channel = self.zygote.channel() if self.forks and self.zygote is not None else None
        run.process = self.context.Process(target=judge.child_main, args=(job, writer, channel), daemon=True)
        run.process.start()
        writer.close()
        if channel is not None:
            channel.close()  # the judge's own now
        run.connection, run.current, run.since = reader, None, self.clock()

    def _kill(self, run: _Run) -> None:
        if run.process is not None:
            run.process.kill()
            run.process.join()
            run.process = None
        confinement.end(run.learners, run.uid)  # every process the submission started, forks included
        run.learners.clear()
        if self.reaper is not None:  # and any that left its group and its parent
            self.reaper.sweep(self._kept())
        if run.connection is not None:
            run.connection.close()
            run.connection = None
        shutil.rmtree(run.scratch, ignore_errors=True)

    def _kept(self) -> list[int]:
        """The grader's own children in sessions of their own: the zygote."""
        return [self.zygote.process.pid] if self.zygote is not None else []

    def _deadline(self, run: _Run) -> float:
        cell = run.since + (START_SECONDS if run.current is None else self.limits.cell_seconds + self.grace)
        return min(cell, run.started + self.limits.notebook_seconds)

    def _wait(self, running: list[_Run]) -> None:
        timeout = max(0.0, min(self._deadline(run) for run in running) - self.clock())
        ready = wait([run.connection for run in running], timeout=timeout)
        for run in running:
            if run.connection in ready:
                self._read(run)
        now = self.clock()
        for run in running:
            if run.process is not None and now >= self._deadline(run):
                self._overdue(run, now)

    def _read(self, run: _Run) -> None:
        for _ in range(MESSAGES_PER_WAKE):  # a flooding child cannot keep the parent from its deadlines
            if run.connection is None or not run.connection.poll():
                return
            try:
                self._handle(run, decode(run.connection.recv_bytes(MESSAGE_BYTES)))
            except EOFError:
                self._ended(run)
                return
            except (OSError, MessageError):  # too long, or off its shape
                run.failure = "the grading process sent something it should not have"
            if run.failure:
                self._kill(run)
                return

    def _handle(self, run: _Run, message: Message) -> None:
        """Take in one message; a verdict for no cell, or for a part the check has not, raises
        (and fails the run)."""
        if isinstance(message, CellStarted):
            if not any(step.index == message.index for step in run.plan.steps):
                raise MessageError(f"a cell {message.index} the plan has not")
            run.current, run.since = message.index, self.clock()
        elif isinstance(message, Verdict) and run.current is not None:
            run.results[run.current] = [message.mark, message.message, list(message.evidence)]
        elif isinstance(message, CellStopped) and run.current is not None:
            run.stopped[run.current] = message.cause
        elif isinstance(message, Restarting):
            run.current, run.since = None, self.clock()
        elif isinstance(message, Note):
            if message.text not in run.noted and len(run.noted) < 20:
                run.noted.append(message.text[:500])
        elif isinstance(message, LearnerStarted):
            if message.group <= 1:
                raise MessageError(f"a process group {message.group}")
            run.learners.append(message.group)
        elif isinstance(message, Done):
            run.done = True
        elif isinstance(message, GraderFailed):
            _grader_fault(run, message.cause)
        else:
            raise MessageError(f"{message.KIND} out of turn")

    def _ended(self, run: _Run) -> None:
        """The child closed its end: finished, or died (then stop its cell and go again)."""
        process = run.process
        process.join(timeout=1.0)  # it may have closed the pipe and gone on running: then it is killed
        self._kill(run)
        if run.done or run.failure:
            return
        if run.current is None or run.current in run.stopped:
            run.failure = death(process.exitcode)
            return
        run.stopped[run.current] = death(process.exitcode)
        self._start(run)

    def _overdue(self, run: _Run, now: float) -> None:
        self._kill(run)
        if now >= run.started + self.limits.notebook_seconds:
            run.out_of_time = True
        elif run.current is None:
            run.failure = f"the grading process did not start within {START_SECONDS:g} s"
        else:
            run.stopped[run.current] = f"did not finish within {self.limits.cell_seconds:g} s"
            self._start(run)

    # --- scoring ----------------------------------------------------------------------

    def _result(self, run: _Run) -> SubmissionResult:
        blocked = run.plan.blocked(run.stopped)
        exercises = []
        for cell in run.master.graded:
            if cell.kind is Kind.MANUAL:
                written = next(w for w in run.plan.written if w.grade_id == cell.grade_id)
                mark, points = (Mark.BY_HAND, None) if written.answered else (Mark.NOT_ATTEMPTED, 0.0)
                message = "To be graded by hand." if written.answered else "Not answered."
                exercises.append(
                    ExerciseResult(
                        cell.grade_id,
                        cell.kind,
                        mark,
                        points,
                        cell.points,
                        message,
                        answer=written.text,
                        rubric=cell.rubric,
                    )
                )
                continue
            exercises.append(self._exercise(run, cell.index, cell.grade_id, cell.points, blocked))
        exercises = [replace(e, title=self._title(run.master, cell)) for e, cell in zip(exercises, run.master.graded)]
        status, reason = _status(exercises, run)
        stops = (
            f"cell {run.plan.step(index).grade_id} {cause}; what depends on it was skipped"
            for index, cause in sorted(run.stopped.items())
            if index not in run.results  # its verdict was in before the judge ended
        )
        notes = (*run.plan.notes, *run.noted, *stops)
        return SubmissionResult(
            submission=run.submission,
            lab=run.plan.lab,
            status=status,
            reason=reason,
            exercises=tuple(exercises),
            restored=run.plan.restored,
            notes=notes,
            title=run.master.title,
        )

    def _title(self, master: Master, cell: Any) -> str:
        """The check's own name for an exercise, or the heading above a written answer."""
        grader = (self.warm.graders if self.warm else {}).get((master.lab, cell.index))
        if grader is not None:
            return str(grader.name)
        for above in reversed(master.notebook.cells[: cell.index]):
            heading = next((line for line in str(above.source).splitlines() if line.startswith("#")), None)
            if above.cell_type == "markdown" and heading:
                return heading.lstrip("#").strip()
        return ""

    def _exercise(self, run: _Run, index: int, grade_id: str, points: float, blocked: dict[int, int]) -> ExerciseResult:
        def scored(mark: Mark, message: str, evidence: Sequence[str] = ()) -> ExerciseResult:
            return ExerciseResult(
                grade_id, Kind.AUTO, mark, points if mark is Mark.CORRECT else 0.0, points, message, tuple(evidence)
            )

        # A step an earlier stopped step blocks is scored as blocked, whatever a judge found
        # for it before the stop was known.
        if index in run.results and blocked.get(index, index) == index:
            mark, message, evidence = run.results[index]
            return scored(Mark(mark) if mark in AUTO_MARKS else Mark.ERROR, message, evidence)
        if index in blocked:
            culprit = blocked[index]
            cause = run.stopped[culprit]
            mark = Mark.TIMEOUT if cause.startswith("did not finish") else Mark.ERROR
            if culprit == index:
                return scored(mark, f"Your answer {cause} while this exercise was checked, so it scores 0.")
            return scored(
                mark, f"Not checked: cell {run.plan.step(culprit).grade_id}, which this exercise depends on, {cause}."
            )
        if run.out_of_time:
            return scored(
                Mark.TIMEOUT,
                f"Not checked: the notebook ran past its {self.limits.notebook_seconds:g} s limit "
                "before this exercise.",
            )
        if run.fault:
            return ExerciseResult(
                grade_id,
                Kind.AUTO,
                Mark.NOT_GRADED,
                None,
                points,
                "Not graded: the grader failed before it could check this; nothing was charged.",
            )
        return scored(Mark.ERROR, f"Not checked: {run.failure or 'the grading process ended early'}.")


def _grader_fault(run: _Run, cause: str) -> None:
    """The grader failed on this submission for a reason of its own (it could not confine or
    start the learner's process, a check of the kit's failed): the exercises it had not
    checked are not graded, and nothing is charged for them."""
    run.failure = f"the grader failed on this submission ({cause[:600]})"
    run.fault = cause[:600]


def _status(exercises: Sequence[ExerciseResult], run: _Run) -> tuple[Status, str]:
    """The row's status and the first problem behind it."""
    if run.fault:
        return Status.GRADER_ERROR, run.fault
    for mark, status in ((Mark.ERROR, Status.ERROR), (Mark.TIMEOUT, Status.TIMEOUT)):
        hit = next((exercise for exercise in exercises if exercise.mark is mark), None)
        if hit is not None:
            return status, f"{hit.grade_id}: {hit.message}"
    if run.out_of_time:
        return Status.TIMEOUT, "the notebook ran past its time limit"
    return Status.GRADED, ""


def invalid(submission: Submission, problem: str) -> SubmissionResult:
    """The row of a submission that could not be graded at all."""
    return SubmissionResult(submission=submission, lab=submission.lab_hint, status=Status.INVALID, reason=problem)
