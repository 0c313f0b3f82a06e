"""Lab 09 (the capstone): the whole worker, one piece of code judged three ways.

The learner writes `async def work(lease, kit)`: one delivery of one case, start to ack
(`shopops_lab.worker.kit` documents the seven calls). The same function is then judged

* by the explorer (09.1): every schedule of two workers on one case within the bound of
  `worker_world.SETTINGS` (a crash before or after any kit call; a send whose request or
  reply is lost; a model call that outlasts the lease; a poison case with a crash), the
  shortest breaking schedule named, with the line that replays it (`replay`);
* by the simulator (09.2): a burst day of `ITEMS` cases for 20 workers with the chapter's
  faults turned up (`day`), the kit's worker replaced by the learner's, judged from the
  event log by the anomaly checker and the provider's ledger: no customer emailed twice,
  nothing lost, every dead letter a poison case with its reason, approvals within limit;
* by real processes (09.3): worker processes running the learner's code on an SQLite file
  (PostgreSQL where SHOPOPS_POSTGRES_URL is set), moved one kit call at a time and
  SIGKILLed or frozen at planned points as in lab 08 (`processes`): every order emailed
  once, a poison order dead-lettered with its reason. Where no process can be started (a
  browser's Python) this judge says so and judges nothing; the other two still run.

`exercise.check(work)` shows the three verdicts side by side (`verdicts(work)` returns them),
each with its evidence. A failure names the broken promise and the evidence, never what to
write; `exercise.hint(4, work)` (the last hint) runs the search on the learner's own worker
and tells its shortest breaking schedule.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shopops_lab.checks import answers
from shopops_lab.checks.base import Exercise, NotAttempted, NotJudged, Result, Wrong, is_stub
from shopops_lab.checks.lab07 import LIMITS
from shopops_lab.checks.worker_day import ITEMS, Day, day
from shopops_lab.checks.worker_processes import NO_PROCESSES, judged, processes, processes_available, story
from shopops_lab.checks.worker_world import SETTINGS, Setting, scenario
from shopops_lab.errors import BadArgumentError
from shopops_lab.explore import Replayed, explore, refuse
from shopops_lab.explore import replay as replay_schedule
from shopops_lab.worker.queue import Lease

# What the checks import when first used (a browser's Python may lack sqlite3): the grader
# loads these before any submission, so no judge imports them while it grades.
ON_USE = ("shopops_lab.store.sqlite",)

__all__ = [
    "DAYS",
    "ITEMS",
    "Day",
    "TheWholeWorker",
    "Verdicts",
    "at_scale",
    "counterexample",
    "day",
    "exercise",
    "explored",
    "in_processes",
    "naive_work",
    "processes",
    "processes_available",
    "replay",
    "story",
    "verdicts",
]

# The seed of the graded day (lab 07's first: its spike comes mid-morning). One day of 3,000 cases, the
# chaos turned up ten times, holds dozens of each fault; a second day doubled the grader's time (lab 09
# is graded at about a third of nbgrader's time per day), so other seeds are the notebook's to show.
DAYS = (3,)


# ------------------------------------------------------------------ the kit's naive worker
async def naive_work(lease: Lease, kit: Any) -> None:
    """The kit's first try: draft while heartbeating, email, ack. No checkpoint, and a key
    made fresh for every attempt, so a redelivery cannot be told from new work."""
    text = ""
    piece = await kit.next_chunk()
    while piece is not None:
        text += piece
        if not await kit.heartbeat():
            return
        piece = await kit.next_chunk()
    await kit.send(f"{lease.case_id}:attempt-{lease.attempt}", text)
    await kit.ack()


# ------------------------------------------------------------------ 09.1 the explorer
def replay(work: Any, setting: str, schedule: str) -> Replayed:
    """One schedule of `setting` (as the check's message names both) played with `work`:
    print it for its steps, or call .diagram() for the picture."""
    return replay_schedule(scenario(_setting(setting)), work, schedule)


def _setting(name: str) -> Setting:
    for setting in SETTINGS:
        if setting.name == name:
            return setting
    raise BadArgumentError(
        field="setting",
        problem=f"is {name!r}",
        fix=f"pass one of {', '.join(repr(s.name) for s in SETTINGS)}, as the check's message names it",
    )


def _explored(work: Any) -> str:
    if is_stub(work):
        raise NotAttempted()
    schedules = states = 0
    for setting in SETTINGS:
        found = explore(scenario(setting), work)
        refuse(found, f'lab09.replay(work, "{setting.name}", "{{schedule}}")')
        schedules, states = schedules + found.schedules, states + found.states
    return (
        f"checked all {schedules:,} schedules of two workers on one case, in four settings (a crash before or "
        "after any kit call; a send whose request or reply is lost; a model call that outlasts the lease; a "
        "poison case with a crash): every customer emailed once, nothing acknowledged before its email went out, "
        "a refused heartbeat obeyed at once, every unknown outcome looked up, and the poison case failed on "
        "every delivery, so the queue dead-letters it."
    )


# ------------------------------------------------------------------ 09.2 the simulator
def _day_part(seed: int) -> Callable[[Any], dict[str, int]]:
    """One graded day: raises `Wrong` with the day's measurements, else returns its counts
    (plain values: the grader hands a part's finding from one process to another as JSON)."""

    def part(work: Any) -> dict[str, int]:
        if is_stub(work):
            raise NotAttempted()
        found = day(work, seed=seed, whole=False)
        problems = found.problems()
        if problems:
            raise Wrong(
                f"on burst day (seed {seed}, {ITEMS:,} cases, 20 workers running your work): {problems[0]}. "
                f"See the whole day: print({found.replay_line})",
                tuple(str(found).splitlines()),
            )
        return {"done": found.done, "dead": found.dead}

    part.__name__ = f"burst day {seed}"
    return part


def _days_summary(days: list[dict[str, int]]) -> str:
    done = sum(d["done"] for d in days)
    dead = sum(d["dead"] for d in days)
    return (
        f"burst day (seed {', '.join(map(str, DAYS))}): {ITEMS:,} cases, 20 workers each running your work among "
        f"kills, pauses, dropped replies, lost acks and duplicate deliveries: {done:,} cases done "
        f"and {dead} poison cases dead-lettered with their reason, no customer emailed twice or acknowledged "
        f"without an email, nothing lost, approvals within {LIMITS.approval_p95:g} s, and the checker found nothing."
    )


# ------------------------------------------------------------------ 09.3 real processes
def _processes(work: Any) -> str:
    if not processes_available():
        raise NotJudged(NO_PROCESSES)
    if is_stub(work):
        raise NotAttempted()
    return judged(work)


# ------------------------------------------------------------------ the exercises
HINTS = (
    "List what can happen between two of your awaits: the worker dies, its lease runs out while the model "
    "writes, another worker takes the case, the provider's answer never arrives. For each, what does the next "
    "delivery find in the checkpoint, and what must it do with it?",
    "The calls: kit.load() and kit.save(dict) keep what a delivery learned; kit.heartbeat() says whether the "
    "case is still yours; kit.send(key, body) returns a SendResult whose status may be UNKNOWN; kit.lookup(key) "
    "asks the provider what went out under key. The key travels in lease.payload. A worker that raises gives "
    "the delivery back.",
    "Shape: load; if the email is confirmed, ack. If an intent is saved, look the key up before anything "
    "else. Otherwise draft, heartbeating after each chunk and returning on a no; save the intent; send; "
    "settle an unknown outcome by lookup, and raise if nothing went out; save the confirmation; ack.",
    "Pass your worker: hint(4, work) searches your own worker and tells its shortest breaking schedule, step by "
    "step (lab09.replay(...).diagram() draws it).",
)


@dataclass(frozen=True, kw_only=True)
class _Capstone(Exercise):
    """An exercise whose last hint, given the learner's worker, is that worker's own counterexample."""

    def hint(self, level: int = 1, *answer: Any) -> None:
        if level == len(self.hints) and len(answer) == 1 and callable(answer[0]):
            print(f"Hint {level} of {len(self.hints)}: {counterexample(answer[0])}")
            return
        super().hint(level)


def counterexample(work: Any) -> str:
    """`work`'s own shortest breaking schedule, in words, or what is left to look at."""
    if is_stub(work):
        return "your work is still the stub: write it first."
    for setting in SETTINGS:
        found = explore(scenario(setting), work).counterexample
        if found is not None:
            steps = "\n".join(f"  {line}" for line in found.lines)
            return (
                f"in the setting {setting.name!r}, this schedule breaks your worker ({len(found.events)} steps): "
                f"{found.problem}\n{steps}\nWhat should your worker have done differently at the step before "
                f"it broke? Draw it: lab09.replay(work, {setting.name!r}, {found.words!r}).diagram()"
            )
    return (
        "no schedule of the explorer's bound breaks your worker. Read the simulator's and the real processes' "
        "verdicts in lab09.exercise.check(work): their evidence names the case."
    )


explored = _Capstone(id="09.1", title="the whole worker, on every schedule", answer="work", run=_explored, hints=HINTS)
at_scale = _Capstone(
    id="09.2",
    title="the whole worker, on burst day",
    answer="work",
    parts=tuple(_day_part(seed) for seed in DAYS),
    summary=_days_summary,
    hints=HINTS,
)
in_processes = _Capstone(
    id="09.3", title="the whole worker, in real processes", answer="work", run=_processes, hints=HINTS
)
JUDGES = (explored, at_scale, in_processes)
_TITLES = ("the explorer", "the simulator", "real processes")


@dataclass(frozen=True, repr=False)
class Verdicts:
    """The three judges' verdicts on one worker, side by side (a notebook shows them as a
    table of three columns; as text, one after the other)."""

    results: tuple[Result, ...]

    def __repr__(self) -> str:
        return str(self)

    def __str__(self) -> str:
        blocks = []
        for title, result in zip(_TITLES, self.results, strict=True):
            blocks.append(f"--- {title} ---\n{result}")
        return "\n".join(blocks)

    def _repr_html_(self) -> str:
        cells = []
        for title, result in zip(_TITLES, self.results, strict=True):
            mark = str(result).split(" ", 1)[0]  # the verdict's mark, as the text shows it
            evidence = "".join(f"<li>{html.escape(line)}</li>" for line in result.evidence[:12])
            cells.append(
                f"<td style='vertical-align:top;width:33%'><b>{mark} {html.escape(title)}</b>: "
                f"{html.escape(result.verdict.value)}<p>{html.escape(result.message)}</p>"
                + (f"<ol style='font-family:monospace;font-size:85%'>{evidence}</ol>" if evidence else "")
                + "</td>"
            )
        return f"<table><tr>{''.join(cells)}</tr></table>"


def verdicts(*work: Any) -> Verdicts:
    """The three judges on `work`, each with its evidence."""
    return Verdicts(tuple(judge.result(*work) for judge in JUDGES))


class TheWholeWorker:
    """`lab09.exercise`: the lab's one exercise, judged three ways. `check(work)` shows the three
    verdicts side by side (each judge alone: `lab09.explored.check(work)`, `at_scale`,
    `in_processes`); `hint(n)` as every exercise's, and `hint(4, work)` tells the shortest
    schedule that breaks your own worker."""

    id = "09"
    answer = "work"
    hints = HINTS

    def check(self, *answer: Any) -> None:
        """Show the three verdicts on your worker. Never raises."""
        shown = verdicts(*answer)
        try:
            from IPython import get_ipython
            from IPython.display import display
        except ImportError:
            get_ipython = None
        if get_ipython is None or get_ipython() is None:
            print(shown)
        else:
            display(shown)

    def hint(self, level: int = 1, *answer: Any) -> None:
        explored.hint(level, *answer)

    def answered(self, *answer: Any) -> bool:
        return explored.answered(*answer)

    def solution(self, confirm: bool = False) -> None:
        explored.solution(confirm)

    def __repr__(self) -> str:
        return "<lab 09's exercise: check(work), hint(n), hint(4, work)>"


exercise = TheWholeWorker()


# ------------------------------------------------------------------ the knowledge check


# Its quizzes (the right option and every explanation) are kept with the answer keys, loaded on
# first use (`checks.answers`): importing this module loads none of them.
__getattr__ = answers.lazy("lab09", ("SHAPE_QUIZ", "KILL_QUIZ"))
