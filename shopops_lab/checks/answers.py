"""What the checks judge against, kept apart: each quiz's right option, a knowledge check's key
and the model answers `solution(confirm=True)` reveals live in `checks/answer_keys/`, loaded
here on first use, never when a lab's checks are imported. A graded learner's process imports
its lab's checks (and this loader), but the keys' folder is closed to it (covered as root,
left out of its Landlock rules), so an answer cell can answer but cannot ask a quiz or a
check for the key. In a notebook they load as any module does. A student wheel or site built
without the model answers (`--no-reveals`) has no `model_answers` there, and `solution()`
says so.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any

from shopops_lab.errors import AnswersUnavailableError

FOLDER = Path(__file__).resolve().parent / "answer_keys"


def load(name: str) -> ModuleType:
    """`shopops_lab.checks.answer_keys.<name>`, or AnswersUnavailableError where the keys'
    folder cannot be read (a graded learner's process) or the module was left out."""
    try:
        return import_module(f"shopops_lab.checks.answer_keys.{name}")
    except (ImportError, OSError) as exc:
        raise AnswersUnavailableError(
            what=f"the key {name}",
            why=f"the kit's answer keys cannot be read in this process ({type(exc).__name__})",
        ) from None


def lazy(lab: str, names: Collection[str]) -> Callable[[str], Any]:
    """A check module's `__getattr__`: each of `names` (its quizzes) from `answers.<lab>` on
    first use; any other name is missing, as usual (so `getattr(module, x, None)` stays quiet)."""
    known = frozenset(names)

    def attribute(name: str) -> Any:
        if name not in known:
            raise AttributeError(f"module 'shopops_lab.checks.{lab}' has no attribute {name!r}")
        return getattr(load(lab), name)

    return attribute
