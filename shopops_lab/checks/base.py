"""The learner-facing check: run the learner's code in scenarios, say correct /
incorrect / not attempted, and name what went wrong without giving the answer.

`Exercise.check()` only prints (for ungraded cells). `Exercise.grade()` raises an
`AssertionError` carrying the same friendly message unless the answer is correct, and
returns nothing, which is what nbgrader needs from an autograded test cell.

What a check promises: it never raises, whatever the learner's code does (an error, a
`sys.exit()`, a `BaseException` of its own), except `KeyboardInterrupt`, which is the
learner pressing *stop* and is let through so the kernel stops as asked, and the grader's
own stop (`CheckStopped`: a timeout, the learner's process gone). "Not attempted"
means the exercise's stub itself raised `NotImplementedError`; the same error raised from
deeper code is the learner's code failing, and is reported as such. A cell that shows the
learner's answer at work asks `Exercise.answered()` first, which prints one friendly line
instead of a traceback while the stub is untouched.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import sysconfig
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import FunctionType, TracebackType
from typing import Any

from shopops_lab.errors import CheckStopped


class Verdict(StrEnum):
    CORRECT = "correct"
    INCORRECT = "incorrect"
    NOT_ATTEMPTED = "not attempted"
    NOT_JUDGED = "not judged"  # the check could not run as planned here: never a pass, never a fail


Call = tuple[str, tuple[Any, ...], Mapping[str, Any]]  # a method of the learner's object: name, args, kwargs
Read = tuple[str | Callable[..., Any], tuple[Any, ...]]  # a read in turn: a method's name or a kit function, args
_MARKS = {Verdict.CORRECT: "✅", Verdict.INCORRECT: "❌", Verdict.NOT_ATTEMPTED: "⏳", Verdict.NOT_JUDGED: "❔"}
# Frames in the kit, the standard library or installed packages are not the learner's code.
_NOT_THE_LEARNERS = tuple(
    {
        Path(__file__).resolve().parent.parent,
        *(Path(sysconfig.get_paths()[key]).resolve() for key in ("stdlib", "purelib", "platlib")),
    }
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Result:
    """What a check found: a verdict, one friendly sentence, and the evidence behind it."""

    exercise: str
    verdict: Verdict
    message: str
    evidence: tuple[str, ...] = ()
    counterexample: Any = field(default=None, compare=False, repr=False)  # an explored check's shortest break

    @property
    def correct(self) -> bool:
        return self.verdict is Verdict.CORRECT

    def __str__(self) -> str:
        lines = [f"{_MARKS[self.verdict]} {self.exercise}: {self.verdict.value}. {_sentence(self.message)}"]
        lines.extend(f"   {line}" for line in self.evidence)
        return "\n".join(lines)


def _sentence(text: str) -> str:
    """`text` with a capital after the verdict's full stop, unless it starts with a name from
    code (`send_followup`, `item-0002`, a backquote), which keeps its spelling."""
    first = text.split(" ", 1)[0]
    return text[:1].upper() + text[1:] if first.isalpha() and first.islower() else text


class NotAttempted(Exception):
    """The exercise's stub itself raised NotImplementedError: nothing is written yet."""


class NotJudged(Exception):
    """The check could not judge the answer here (no processes in this notebook, or a planned
    step of a run did not happen): the message says why and what to do; it never passes."""


class Wrong(Exception):
    """A scenario found a problem; the message is shown to the learner as is. An explored
    check attaches the shortest breaking schedule (`counterexample`: its words, its steps,
    its `.diagram()`), which the last level of a hint shows."""

    def __init__(self, message: str, evidence: tuple[str, ...] | list[str] = (), *, counterexample: Any = None) -> None:
        super().__init__(message)
        self.evidence = tuple(evidence)
        self.counterexample = counterexample


class ForeignAnswer(ABC):
    """An answer that lives in another process (the grader's learner child), seen from the
    judge. Calling it (or, for a class, making an object from it) crosses to that process;
    a subclass raises `NotAttempted` itself when the stub answered. The checks treat it like
    the learner's own function or class, through `call_answer`, `is_stub` and `restart`.
    The grader's `RemoteAnswer` is the one implementation."""

    kind: str = "function"  # or "class"
    __name__: str = "answer"

    @abstractmethod
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the answer (or make an object of it) in its process."""

    @abstractmethod
    def each(self, calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[tuple[Any, BaseException | None]]:
        """The answer called on each (args, kwargs) in turn, in one message to its process:
        (value, None) per call, in order, up to the first that raised, whose (None, what it
        raised) is the last."""

    @abstractmethod
    def is_stub(self) -> bool:
        """Is it still the exercise's stub? Asked of the answer's process."""

    @abstractmethod
    def restart(self) -> ForeignAnswer:
        """The answer as a freshly started process has it (its memory as before any call)."""

    @abstractmethod
    def memory(self) -> Hashable:
        """What this copy keeps in memory, drawn in its own process by the kit's `fresh.memory`
        (a digest the judge only compares), or a value equal to nothing when it cannot be seen."""

    @abstractmethod
    def picture(self, value: Any) -> Hashable:
        """An object of the answer's process (a store made from the learner's class), drawn
        there by the kit's `fresh.canonical`: to tell two states apart, never to judge."""

    @abstractmethod
    def twins(self, values: Sequence[Any], swap: Sequence[tuple[Any, Any]]) -> list[Any]:
        """Copies of `values` (copies of the answer, objects they made) taken together in the
        answer's process, their memory as it is now (`fresh.twins`); a check's object they
        hold is swapped for its counterpart in `swap`. Raises `NotCopyable` when that cannot
        be done (one they hold has no counterpart, or a value cannot be copied)."""

    @abstractmethod
    def in_turn(self, value: Any, calls: Sequence[Read]) -> list[Any]:
        """`value.name(*args)` for each (name, args), in order, where `value` (an object the
        answer made) lives: one message for all of them; the first to raise ends the rest."""

    @abstractmethod
    def around(
        self, value: Any, call: Call, reads: Sequence[Read]
    ) -> tuple[list[Any], tuple[Any, Exception | None], list[Any]]:
        """`reads` in turn, the learner's `call` of `value` attempted, `reads` again: one message."""

    @abstractmethod
    def applied(self, function: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """`function(answer, *args)`, a kit function, run in the answer's process on this copy:
        one message, its value back by value (see `applied`)."""

    @abstractmethod
    def watch(self, functions: tuple[Callable[..., Any], ...]) -> None:
        """From now on, note which of the kit's `functions` run in the answer's process."""

    @abstractmethod
    def watched(self) -> frozenset[str]:
        """Stop noting: the qualified names of the watched kit functions that ran."""


def restart(answer: Any) -> Any:
    """The answer as a freshly started worker process would have it: nothing the learner's
    code kept in memory (module-level dicts, lists and sets, class attributes, closure
    cells, function attributes, default arguments) survives: the answer and the learner's
    functions and classes it reaches are rebuilt on fresh copies of those values, as they
    were when the check began (see `checks.fresh`). A check calls this before every
    schedule and after every simulated crash, so state kept outside the store is lost, as
    it would be when the process dies."""
    if isinstance(answer, ForeignAnswer):
        return answer.restart()
    from shopops_lab.checks.fresh import fresh_copy

    return fresh_copy(answer, _learners)


def memory(answer: Any) -> Any:
    """A hashable picture of what a restarted answer keeps in its process's memory, so
    two processes in different states are told apart; None when it cannot be seen (an
    answer in another process may say so through its own `memory()`)."""
    if isinstance(answer, ForeignAnswer):
        return answer.memory()
    from shopops_lab.checks.fresh import memory as seen

    found = seen(answer)
    return object() if found is None else found


def picture(answer: Any, value: Any) -> Hashable:
    """A hashable picture of `value`, an object the learner's code made (a store of the
    learner's class), drawn where it lives: to tell two states of a world apart."""
    if isinstance(answer, ForeignAnswer):
        return answer.picture(value)
    from shopops_lab.checks.fresh import canonical

    return canonical(value)


def twins(answer: Any, values: Sequence[Any], swap: Sequence[tuple[Any, Any]] = ()) -> list[Any]:
    """Copies of `values`, the answer's copies and what they made, as they are now: how the
    explorer goes on from a copy of a schedule's state instead of replaying its steps.
    Across the grader's process boundary only: there the learner's objects and the check's
    are apart, and the wire names each object of the check's that the learner's code holds
    (each must have its counterpart in the copied world, in `swap`). In one process a
    learner's copy could hold any of the check's objects unseen, so the explorer replays
    (`NotCopyable`)."""
    from shopops_lab.checks.fresh import NotCopyable

    if isinstance(answer, ForeignAnswer):
        return answer.twins(values, swap)
    raise NotCopyable("in one process, schedules are replayed")


def in_turn(answer: Any, value: Any, *calls: Read) -> list[Any]:
    """What `value.name(*args)` returns for each (name, args), asked in order of `value`, an
    object the learner's code made (a store of the learner's class): a check's several
    reads of one state cost one message when the answer runs in another process. A kit
    function in place of a name (`NaiveResultStore.result`) is applied to `value` as the kit
    wrote it, whatever the learner's class overrides. The first call that raises ends the
    rest, as it would in a row of plain calls."""
    if isinstance(answer, ForeignAnswer):
        return answer.in_turn(value, calls)
    return [name(value, *args) if callable(name) else getattr(value, name)(*args) for name, args in calls]


def around(
    answer: Any, value: Any, call: Call, *reads: Read
) -> tuple[list[Any], tuple[Any, Exception | None], list[Any]]:
    """What `reads` of `value` (as `in_turn` reads) give just before and just after the
    learner's method `value.name(*args, **kwargs)`, and that call's outcome as `attempt`
    gives it: how a check sees what one call changed, in one message when the answer runs
    in another process (a check asks this around every write). A container argument the
    method fills comes back filled, as in one process."""
    if isinstance(answer, ForeignAnswer):
        return answer.around(value, call, reads)
    name, args, kwargs = call
    before = in_turn(answer, value, *reads)
    outcome = attempt(getattr(value, name), *args, **kwargs)
    return before, outcome, in_turn(answer, value, *reads)


def applied(answer: Any, function: Callable[..., Any], *args: Any) -> Any:
    """`function(answer, *args)`: a function of the kit's, run where the answer runs. A check
    whose work is the learner's code called thousands of times in a row (lab 09's burst day)
    has it played there, in one message, and then checks what comes back against its own world:
    the judge runs no learner code, and the answer's process is trusted with nothing."""
    if isinstance(answer, ForeignAnswer):
        return answer.applied(function, args)
    return function(answer, *args)


@contextlib.contextmanager
def watching(answer: Any, *functions: Callable[..., Any]) -> Iterator[set[str]]:
    """Note which of the kit's `functions` run inside the learner's calls made in the block,
    in the process where the answer runs: how a check recognises an answer that hands the
    exercise to the kit's own implementation. The set it yields is filled (with their
    qualified names) when the block ends; a block that raised asks nothing more (its error,
    or the answer's process gone, is the outcome)."""
    ran: set[str] = set()
    if isinstance(answer, ForeignAnswer):
        answer.watch(functions)
        yield ran
        ran.update(answer.watched())
        return
    codes = {function.__code__: function.__qualname__ for function in functions}

    def note(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in codes:
            ran.add(codes[frame.f_code])

    before = sys.getprofile()
    sys.setprofile(note)
    try:
        yield ran
    finally:
        sys.setprofile(before)


def call_answer(answer: Any, *args: Any, **kwargs: Any) -> Any:
    """Call the learner's function. Its stub's own NotImplementedError becomes
    `NotAttempted`; one raised deeper down is the learner's code failing, and propagates."""
    if isinstance(answer, ForeignAnswer):
        return answer(*args, **kwargs)
    try:
        return answer(*args, **kwargs)
    except NotImplementedError as exc:
        if _raised_by(exc.__traceback__, answer):
            raise NotAttempted() from None
        raise


def call_each(answer: Any, calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[Any]:
    """`call_answer` on each (args, kwargs) in turn, for a grid of inputs that do not depend
    on earlier results: an answer in another process gets them all in one message, not one
    round trip per call. The first call that raised raises here, as it would have alone."""
    if not isinstance(answer, ForeignAnswer):
        return [call_answer(answer, *args, **kwargs) for args, kwargs in calls]
    values = []
    for value, raised in answer.each(calls):
        if raised is not None:
            raise raised
        values.append(value)
    return values


def attempt(answer: Any, *args: Any, **kwargs: Any) -> tuple[Any, Exception | None]:
    """Call the learner's function and hand back (what it returned, None) or (None, what
    it raised), so a check judges an error like any other outcome. The stub's own
    NotImplementedError still ends the check as `NotAttempted`."""
    try:
        return call_answer(answer, *args, **kwargs), None
    except NotAttempted:
        raise
    except Exception as exc:  # noqa: BLE001 - the learner's code failing is evidence, not a crash of the check
        return None, exc


def attempt_each(
    answer: Any,
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
) -> tuple[list[Any], Exception | None]:
    """`attempt` on each (args, kwargs) in turn, for a grid of inputs that do not depend on
    earlier results (one message to an answer in another process): what the calls returned,
    in order, up to the first that raised, and what that one raised (None if none did)."""
    values: list[Any] = []
    if not isinstance(answer, ForeignAnswer):
        for args, kwargs in calls:
            value, err = attempt(answer, *args, **kwargs)
            if err is not None:
                return values, err
            values.append(value)
        return values, None
    for value, raised in answer.each(calls):
        if raised is not None:
            if isinstance(raised, NotAttempted) or not isinstance(raised, Exception):
                raise raised
            return values, raised
        values.append(value)
    return values, None


def is_stub(answer: Any) -> bool:
    """True while `answer` is still the exercise's stub: a function (or, for a class, one
    of its own methods) whose body does nothing but raise NotImplementedError."""
    if isinstance(answer, ForeignAnswer):
        return answer.is_stub()
    return any(code.co_names == ("NotImplementedError",) for code in _codes(answer))


def describe(value: Any) -> str:
    """A value for a message, without the memory address a default repr would show."""
    if value is None:
        return "None"
    if isinstance(value, (str, int, float, bool, set, frozenset, list, tuple, dict)):
        text = repr(value)
        text = text if len(text) <= 60 else text[:57] + "..."
        return f"the {type(value).__name__} {text}"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    name = getattr(value, "__name__", None)
    if isinstance(name, str):
        return f"the {type(value).__name__} {name}"
    kind = type(value).__name__
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind} object"


def plain(value: Any) -> Any:
    """`value` as the plain data it holds: a `str` subclass becomes the `str` it holds (whatever
    its `__eq__` claims), a set, list or tuple of them a plain one of plain strings. How a check
    reads an answer that is a label, and how the grader's wire hands one over."""
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, (set, frozenset)):
        return {plain(item) for item in value}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def named(answer: Any, default: str) -> str:
    """What to call the answer in a line the learner can run again (a replay): the name the
    checked function or class goes by, when it is a plain identifier; else `default`."""
    name = getattr(answer, "__name__", None)
    return name if type(name) is str and name.isidentifier() and name != "<lambda>" else default


def error_text(exc: BaseException) -> str:
    """'KeyError: 'order_id'', or just the type when the error carries no message."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(frozen=True, kw_only=True)
class Exercise:
    """One exercise: its scenarios (`run` raises `Wrong` or `NotAttempted`, returns a
    message on success), the name of what the learner writes (`answer`: a function, or a
    class when `wants_class`), and its hints, from a nudge to the shape of the answer.

    A check made of independent parts (lab 07's burst days, lab 05's settings) says so with
    `parts` instead of `run`: each part is played on a fresh restart of the answer (nothing
    an earlier part left in its memory reaches it) and returns what `summary` needs, or
    raises as `run` would; the verdict is the first part's, in order, that did not pass,
    else `summary` of them all. So the parts can be judged anywhere, in any order, by
    several processes (the grader's idle slots), to the verdict of one run in order."""

    id: str
    title: str
    answer: str
    run: Callable[[Any], str] | None = None
    hints: tuple[str, ...] = field(default=())
    wants_class: bool = False
    parts: tuple[Callable[[Any], Any], ...] = ()
    summary: Callable[[list[Any]], str] | None = None

    def __post_init__(self) -> None:
        if (self.run is None) == (not self.parts) or bool(self.parts) != (self.summary is not None):
            raise ValueError(f"exercise {self.id}: give it `run`, or `parts` and their `summary`")

    @property
    def name(self) -> str:
        return f"Exercise {self.id} ({self.title})"

    def result(self, *answer: Any) -> Result:
        """Judge `answer`. Never raises, except KeyboardInterrupt (the learner's *stop*) and
        CheckStopped (the grader's)."""
        failed, message = self._attempted(answer, self._whole)
        return failed or Result(exercise=self.name, verdict=Verdict.CORRECT, message=message)

    def part_result(self, number: int, *answer: Any) -> tuple[Result | None, Any]:
        """Judge `answer` on part `number` alone: (the Result that ends the check, None) if
        it did not pass, else (None, what the part found, for `summarised`)."""
        return self._attempted(answer, lambda one: self.parts[number](restart(one)))

    def summarised(self, found: list[Any]) -> Result:
        """The verdict of a check whose every part passed, from what each found, in order."""
        assert self.summary is not None
        return Result(exercise=self.name, verdict=Verdict.CORRECT, message=self.summary(found))

    def _whole(self, answer: Any) -> str:
        if self.run is not None:
            return self.run(answer)
        assert self.summary is not None
        return self.summary([part(restart(answer)) for part in self.parts])

    def _attempted(self, answer: tuple[Any, ...], work: Callable[[Any], Any]) -> tuple[Result | None, Any]:
        """(None, what `work` returned), or (the Result its failure is, None)."""
        misfit = self._misfit(answer)
        if misfit is not None:
            return Result(exercise=self.name, verdict=Verdict.INCORRECT, message=misfit), None
        try:
            return None, work(answer[0])
        except NotAttempted:
            return Result(
                exercise=self.name,
                verdict=Verdict.NOT_ATTEMPTED,
                message="Write your answer where the cell says `# YOUR CODE HERE` (delete the line below it "
                "that raises NotImplementedError), run that cell, then run this one again.",
            ), None
        except Wrong as wrong:
            return Result(
                exercise=self.name,
                verdict=Verdict.INCORRECT,
                message=str(wrong),
                evidence=wrong.evidence,
                counterexample=wrong.counterexample,
            ), None
        except NotJudged as why:
            return Result(exercise=self.name, verdict=Verdict.NOT_JUDGED, message=str(why)), None
        except (KeyboardInterrupt, CheckStopped):
            raise
        except SystemExit as exc:
            code = "" if exc.code is None else repr(exc.code)
            return Result(
                exercise=self.name,
                verdict=Verdict.INCORRECT,
                message=f"your code called sys.exit({code}){_where(exc)}, which would end the whole worker "
                "process. Return, or raise an error, instead.",
            ), None
        except BaseException as exc:  # noqa: BLE001 - the learner's code crashed: show that, not a traceback
            return Result(
                exercise=self.name,
                verdict=Verdict.INCORRECT,
                message=f"your code raised {error_text(exc)}{_where(exc)}",
            ), None

    def check(self, *answer: Any) -> None:
        """Show how the answer does. Never raises: safe in any cell. In a notebook the verdict
        is announced and comes with help buttons; a pass is recorded (`widgets.help.present`)."""
        from shopops_lab.widgets.help import present

        present(self, self.result(*answer))

    def grade(self, *answer: Any) -> None:
        """For graded test cells: raise AssertionError with the friendly message unless correct."""
        result = self.result(*answer)
        if not result.correct:
            raise AssertionError(str(result))

    def answered(self, *answer: Any) -> bool:
        """For cells that show the learner's answer at work: True once it is written;
        otherwise print one friendly line (no traceback) and return False."""
        misfit = self._misfit(answer)
        if misfit is not None:
            print(f"{_MARKS[Verdict.INCORRECT]} {misfit}")
            return False
        if is_stub(answer[0]):
            print(
                f"{_MARKS[Verdict.NOT_ATTEMPTED]} This cell shows your {self.answer} at work: write it in "
                f"{self.name} above, run that cell, then run this one again."
            )
            return False
        return True

    def solution(self, confirm: bool = False) -> None:
        """Show the model answer (the kit's own copy: the student notebook holds none), only
        when asked twice: `solution()` says how, `solution(confirm=True)` shows it and leaves
        a mark in the cell's output that the grader reports to the instructor and to you."""
        from shopops_lab.checks import answers
        from shopops_lab.errors import AnswersUnavailableError

        try:
            answer = answers.load("model_answers").MODEL_ANSWERS.get(self.id)
        except AnswersUnavailableError:
            print(
                f"Model answers are turned off here: your instructor built this course without them, or this "
                f"process cannot read them (a grader's). Use hint(1) to hint({max(len(self.hints), 1)}) for "
                f"{self.name}: the last one runs the check on your own answer."
            )
            return
        if answer is None:
            print(f"{self.name} has no model answer to show: its hints (hint(1) onwards) are the help it offers.")
            return
        if confirm is not True:
            print(
                f"This shows the model answer to {self.name}. Try hint(1) to hint({max(len(self.hints), 1)}) "
                "first: writing it yourself is the exercise. To see it, call solution(confirm=True); your "
                "notebook then records that you did, and your grader's feedback says so."
            )
            return
        _reveal(self.id, self.name, answer)

    def hint(self, level: int = 1, answer: Any = None) -> None:
        """Print hint `level`: 1 is a nudge, each level says more, and the last is the
        counterexample for your own answer as it is now: the check runs on it and shows the
        shortest schedule that breaks it, in words and as a diagram, then the shape of a fix
        in prose. `answer` is your function (or class); left out, the one the notebook holds
        under the exercise's name is used. Anything but a number gets a friendly line, not a
        traceback. The notebook records which hint you asked for (see `record`)."""
        if not self.hints:
            print("No hints for this one: re-read the cell above the exercise.")
            return
        if isinstance(level, str) and level.strip().isdigit():
            level = int(level)
        if isinstance(level, bool) or not isinstance(level, int):
            print(
                f"hint() takes a number: hint(1) is a nudge, up to hint({len(self.hints)}), the counterexample "
                f"for your own answer. It got {describe(level)}."
            )
            return
        last = len(self.hints)
        level = max(1, min(level, last))
        more = f" (hint({level + 1}) says more)" if level < last else ""
        if level < last:
            text = f"Hint {level} of {last}{more}: {self.hints[level - 1]}"
            record(self.id, "hint", level, text)
            return
        mine = answer if answer is not None else _in_notebook(self.answer)
        head, picture = self._counterexample(mine)
        text = f"Hint {last} of {last}, your counterexample: {head}\nThe shape of a fix: {self.hints[-1]}"
        record(self.id, "hint", last, text, picture)

    def _counterexample(self, answer: Any) -> tuple[str, Any]:
        """What the check finds on `answer` now, in words (with the steps of the shortest
        breaking schedule), and its diagram where it has one."""
        if answer is None:
            return (
                f"there is no {self.answer} in this notebook yet. Write it and run its cell; then this hint runs "
                f"the check on it and shows where it breaks (or pass it: hint({len(self.hints)}, {self.answer})).",
                None,
            )
        found = self.result(answer)
        if found.verdict is Verdict.NOT_ATTEMPTED:
            return f"your {self.answer} is still the stub: write a first try, then ask again.", None
        if found.verdict is Verdict.CORRECT:
            return f"none: the check passes your {self.answer} ({found.message})", None
        if found.verdict is Verdict.NOT_JUDGED:
            return f"none here: {found.message}", None
        steps = "".join(f"\n   {line}" for line in found.evidence)
        example = found.counterexample
        picture = example.diagram(f"your counterexample ({self.id})") if example is not None else None
        return f"{found.message}{steps}", picture

    def _misfit(self, answer: tuple[Any, ...]) -> str | None:
        """The one message, the same in every lab, for anything that is not the learner's
        function (or class): what was passed, and what to pass instead."""
        kind = "class" if self.wants_class else "function"
        if len(answer) == 1:
            value = answer[0]
            if isinstance(value, ForeignAnswer):
                fits = value.kind == kind
            else:
                fits = isinstance(value, type) if self.wants_class else callable(value) and not isinstance(value, type)
            if fits:
                return None
            got = describe(value)
        else:
            got = "nothing" if not answer else f"{len(answer)} things"
        made = " or making an object from it" if self.wants_class else ""
        return (
            f"this check needs your {kind} {self.answer} itself, and it got {got}. Pass it by name, without "
            f"calling it{made}: check({self.answer}), not check({self.answer}(...))."
        )


def _codes(answer: Any) -> list[Any]:
    """The code objects that are the learner's own answer (a class: its own methods)."""
    if isinstance(answer, type):
        return [f.__code__ for f in vars(answer).values() if isinstance(f, FunctionType)]
    function = getattr(answer, "__func__", answer)  # a bound method: the function under it
    code = getattr(function, "__code__", None)
    if code is None:  # a callable object: its __call__
        code = getattr(getattr(type(answer), "__call__", None), "__code__", None)  # noqa: B004 - its code
    return [code] if code is not None else []


def _raised_by(tb: TracebackType | None, answer: Any) -> bool:
    """Was the exception raised in the answer's own code (the last frame of `tb`)?"""
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code in _codes(answer)


def _where(exc: BaseException) -> str:
    """' (in handle, line 4)': the learner's last frame, so they find the line. A kit error
    that came through the learner's code in its own process (behind the grader's boundary)
    brings that process's answer with it (`learner_where`)."""
    tb, found = exc.__traceback__, None
    while tb is not None:
        if _learners(tb.tb_frame.f_code.co_filename):
            found = tb
        tb = tb.tb_next
    if found is None or found.tb_frame.f_code.co_name == "<module>":
        where = getattr(exc, "learner_where", "")
        return where if type(where) is str else ""
    return f" (in {found.tb_frame.f_code.co_name}, line {found.tb_lineno})"


def learners_code(filename: str) -> bool:
    """Is code from `filename` the learner's (a notebook cell), not the kit's, Python's or a library's?"""
    return _learners(filename)


@functools.lru_cache(maxsize=512)
def _learners(filename: str) -> bool:
    if filename.startswith("<"):  # exec'd code is the learner's; "<frozen ...>" is Python's
        return not filename.startswith("<frozen")
    try:
        path = Path(filename).resolve()
    except (OSError, ValueError):
        return True
    return not any(path.is_relative_to(root) for root in _NOT_THE_LEARNERS)


REVEALED = "revealed"  # the key, under output metadata `shopops_lab`, that marks a shown model answer
HINTED = "hinted"  # the key, under output metadata `shopops_lab`, that marks a hint shown: [exercise id, level]
RECORD_TYPE = "application/vnd.shopops-lab.record+json"  # the same record, as the output's own data


def record(exercise_id: str, kind: str, level: int, text: str, picture: Any = None) -> None:
    """Show `text` (a hint, or a model answer) as one output that records it in the saved
    notebook: its metadata carries `{"shopops_lab": {"hinted": [id, level]}}` (or `"revealed":
    id`) and its data a `RECORD_TYPE` copy, which is where Jupyter keeps them when the notebook
    is saved, and where the grader reads them. `picture` (a counterexample's diagram) follows
    it. Plain text where no IPython runs (a script, a test)."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        get_ipython = None
    if get_ipython is None or get_ipython() is None:
        print(text)
        return
    mark: dict[str, Any] = {REVEALED: exercise_id} if kind == "solution" else {HINTED: [exercise_id, level]}
    bundle: dict[str, Any] = {"text/plain": text, RECORD_TYPE: {"exercise": exercise_id, "kind": kind, "level": level}}
    if kind == "solution":
        heading, answer = text.split("\n\n", 1)
        fence = "~~~~" if "```" in answer else "```"
        bundle["text/markdown"] = f"{heading}\n\n{fence}python\n{answer}\n{fence}"
    display(bundle, raw=True, metadata={"shopops_lab": mark})  # type: ignore[no-untyped-call]
    if picture is not None:
        display(picture)  # type: ignore[no-untyped-call]


def _in_notebook(name: str) -> Any:
    """What the notebook's namespace holds under `name` (None outside a notebook, or unbound)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return None if shell is None else shell.user_ns.get(name)


def _reveal(exercise_id: str, name: str, answer: str) -> None:
    """The model answer as one output that carries the mark (`{"shopops_lab": {"revealed": id}}`
    in its metadata) where Jupyter keeps it; plain text where no IPython runs."""
    record(
        exercise_id,
        "solution",
        0,
        f"Model answer to {name}, shown at your request (your notebook records this):\n\n{answer}",
    )
