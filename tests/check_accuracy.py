"""Shared by the check-accuracy suites (tests/test_check_accuracy_labNN.py).

Each exercise has a specification: right answers written differently from the master,
which its check must accept, and the plausible wrong answers a learner writes, which it
must refuse with a message that names the evidence (`evidence`: phrases the message must
contain) without giving the answer away (`secrets` of the exercise, and `hidden` phrases
of the one case, must not appear). When a new mistake is seen, it joins the list.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from shopops_lab.checks.base import Exercise, Verdict

MIN_RIGHT, MIN_WRONG = 2, 6


@dataclass(frozen=True)
class Refused:
    """A wrong answer, what its message must show, and what it must not."""

    answer: Any
    evidence: tuple[str, ...]
    hidden: tuple[str, ...] = ()


def refused(answer: Any, *evidence: str, hidden: tuple[str, ...] = ()) -> Refused:
    return Refused(answer, evidence, hidden)


@dataclass(frozen=True)
class Spec:
    """The specification of one exercise's check."""

    exercise: Exercise
    right: tuple[Any, ...]
    wrong: tuple[Refused, ...]
    secrets: tuple[str, ...] = ()
    replay: Callable[[Any, str, str], Any] | None = None  # (answer, schedule, message) -> the lab's replay


_SHORTEST = re.compile(
    r"^(?P<problem>.*) The shortest schedule that shows it \((?P<n>\d+) steps?\): "
    r"(?P<schedule>.*?)\. Replay it: ",
    re.S,
)


def _name(answer: Any) -> str:
    return getattr(answer, "__name__", None) or type(answer).__name__


def accuracy_tests(*specs: Spec):
    """The three tests every suite runs, parametrized over its specifications."""
    right = [
        pytest.param(spec, answer, id=f"{spec.exercise.id}-{_name(answer)}") for spec in specs for answer in spec.right
    ]
    wrong = [
        pytest.param(spec, case, id=f"{spec.exercise.id}-{_name(case.answer)}") for spec in specs for case in spec.wrong
    ]

    @pytest.mark.parametrize(("spec", "answer"), right)
    def test_a_right_answer_written_differently_is_accepted(spec: Spec, answer: Any) -> None:
        result = spec.exercise.result(answer)
        assert result.verdict is Verdict.CORRECT, str(result)

    @pytest.mark.parametrize(("spec", "case"), wrong)
    def test_a_plausible_wrong_answer_is_refused_with_its_evidence(spec: Spec, case: Refused) -> None:
        result = spec.exercise.result(case.answer)
        text = str(result)
        assert result.verdict is Verdict.INCORRECT, text
        for phrase in case.evidence:  # a phrase that opens the verdict's sentence starts with a capital there
            opening = phrase[:1].upper() + phrase[1:]
            assert phrase in text or opening in text, f"the evidence {phrase!r} is missing from:\n{text}"
        for phrase in (*spec.secrets, *case.hidden):
            assert phrase not in text, f"the message gives away {phrase!r}:\n{text}"
        assert " at 0x" not in text, "a memory address in the message"

    @pytest.mark.parametrize("spec", specs, ids=[spec.exercise.id for spec in specs])
    def test_the_specification_has_enough_right_and_wrong_answers(spec: Spec) -> None:
        assert len(spec.right) >= MIN_RIGHT and len(spec.wrong) >= MIN_WRONG, spec.exercise.id
        last = spec.wrong[-1].answer  # the graded cell refuses what the check refuses, with the same words
        with pytest.raises(AssertionError) as graded:
            spec.exercise.grade(last)
        assert str(graded.value) == str(spec.exercise.result(last))

    return (
        test_a_right_answer_written_differently_is_accepted,
        test_a_plausible_wrong_answer_is_refused_with_its_evidence,
        test_the_specification_has_enough_right_and_wrong_answers,
    )


def replay_tests(*specs: Spec):
    """For an explored check (a Spec with `replay`): the test that every schedule a refusal
    shows replays, seed-free, to the same problem in the same number of steps."""
    explored = [
        pytest.param(spec, case, id=f"{spec.exercise.id}-{_name(case.answer)}")
        for spec in specs
        if spec.replay is not None
        for case in spec.wrong
    ]

    @pytest.mark.parametrize(("spec", "case"), explored)
    def test_the_schedule_a_refusal_shows_replays_to_the_same_problem(spec: Spec, case: Refused) -> None:
        """An explored check's refusal names a schedule; replayed seed-free, that schedule
        breaks the same promise in the same number of steps."""
        message = spec.exercise.result(case.answer).message
        found = _SHORTEST.match(message)
        if found is None:  # refused before any schedule ran (not the learner's class, ...)
            return
        replayed = spec.replay(case.answer, found["schedule"], message)
        assert replayed.problem == found["problem"] and len(replayed.steps) == int(found["n"])

    return test_the_schedule_a_refusal_shows_replays_to_the_same_problem


def reachable(*roots: Any, limit: int = 20_000) -> list[Any]:
    """Every object a learner's code reaches from `roots` (what a check hands it) by
    introspection: `vars()`, `__closure__` cells, `__self__`/`__func__` of bound methods,
    and `gc.get_referents`, transitively. The walk stops at modules, their namespaces and
    Python's own classes (anything there is reachable by `import` alone, and is no handle
    on one check's record)."""
    import gc
    import sys
    from types import ModuleType

    namespaces = {id(vars(module)) for module in list(sys.modules.values()) if isinstance(module, ModuleType)}
    seen: dict[int, Any] = {}
    todo = list(roots)
    while todo and len(seen) < limit:
        value = todo.pop()
        if id(value) in seen or id(value) in namespaces or isinstance(value, ModuleType):
            continue
        if isinstance(value, type) and not value.__module__.startswith("shopops_lab"):
            continue
        seen[id(value)] = value
        found = list(gc.get_referents(value))
        found += [cell.cell_contents for cell in getattr(value, "__closure__", None) or () if _filled(cell)]
        for name in ("__self__", "__func__", "__dict__"):
            try:
                found.append(object.__getattribute__(value, name))
            except (AttributeError, TypeError):
                pass
        todo.extend(found)
    return list(seen.values())


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True
