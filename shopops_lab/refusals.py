"""The counterexamples checks refused with, handed from the schedule explorer to whatever
shows the verdict.

A verdict travels as words (`checks.base.Result`: a message and its evidence lines), which is
all the grader needs. The explorer's shortest breaking schedule is more than words: it can be
played again and walked step by step (`explore.Counterexample.stepper`). So the explorer
leaves each one it finds here, and the face that shows a verdict takes the one whose lines
are the verdict's evidence. Only the last few are kept: a check looks right after it ran.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

__all__ = ["matching", "offer"]

_KEPT = 8
_found: deque[Any] = deque(maxlen=_KEPT)


def offer(counterexample: Any) -> None:
    """Keep `counterexample` (anything with `lines`, the steps a verdict's evidence shows)."""
    _found.append(counterexample)


def matching(evidence: Sequence[str]) -> Any | None:
    """The newest counterexample kept whose lines are `evidence`, or None."""
    wanted = tuple(evidence)
    if not wanted:
        return None
    for found in reversed(_found):
        if tuple(found.lines) == wanted:
            return found
    return None
