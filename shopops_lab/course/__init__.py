"""The course wing: master notebooks in solutions/ become student notebooks in notebooks/,
and `grade/` (`shopops-lab grade`) grades submitted notebooks against those masters.

It knows notebooks and nbgrader, never the engine's queues. `add_arguments`/`run` back the
`shopops-lab build-notebooks` subcommand; everything else is imported from its own module
(`build`, `metadata`, `errors`, `lite`, `grade`), so the CLI still starts where nbformat is
not installed. The two load on first use: a grading run takes its address layout before
anything here loads (`grade.layout`).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["add_arguments", "run"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(import_module("shopops_lab.course.command"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
