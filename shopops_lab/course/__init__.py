"""The course wing: master notebooks in solutions/ become student notebooks in notebooks/,
and `grade/` (`shopops-lab grade`) grades submitted notebooks against those masters.

It knows notebooks and nbgrader, never the engine's queues. `add_arguments`/`run` back the
`shopops-lab build-notebooks` subcommand; everything else is imported from its own module
(`build`, `metadata`, `errors`, `lite`, `grade`), so the CLI still starts where nbformat is
not installed. The two load on first use: a grading run takes its address layout before
anything here loads (`grade.layout`).
"""

from __future__ import annotations

from shopops_lab._lazy import lazy_names

__all__ = ["add_arguments", "run"]

__getattr__, __dir__ = lazy_names(__name__, {"add_arguments": "command", "run": "command"})
