"""The course wing: master notebooks in solutions/ become student notebooks in notebooks/,
and `grade/` (`shopops-lab grade`) grades submitted notebooks against those masters.

It knows notebooks and nbgrader, never the engine's queues. `add_arguments`/`run` back the
`shopops-lab build-notebooks` subcommand; the rest is imported on first use, so the CLI
still starts where nbformat is not installed.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from shopops_lab.course.command import add_arguments, run

_LAZY = {
    "build_student": "build",
    "build_notebooks": "build",
    "execute_notebook": "build",
    "BuildReport": "build",
    "NotebookResult": "build",
    "NotebookState": "build",
    "validate_notebook": "metadata",
    "Problem": "metadata",
    "NotebookInvalidError": "errors",
    "NotebookExecutionError": "errors",
}

__all__ = ["add_arguments", "run", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f"shopops_lab.course.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'shopops_lab.course' has no attribute {name!r}")
