"""The checks every public call makes on its arguments, written once, so each refusal
reads the same way: a `BadArgumentError` naming the field, what it was, and the fix."""
from __future__ import annotations

import math

from shopops_lab.errors import BadArgumentError


def text(field: str, value: object, fix: str) -> str:
    """A non-blank string; `fix` completes "pass ..." (e.g. "the case id, e.g. 'O-1001'")."""
    if value is None:
        raise BadArgumentError(field=field, problem="is missing", fix=f"pass {fix}")
    if not isinstance(value, str) or not value.strip():
        raise BadArgumentError(field=field, problem=f"is {value!r}, not a non-empty string", fix=f"pass {fix}")
    return value


def seconds(field: str, value: object, fix: str = "pass a positive, finite number of seconds") -> float:
    """A positive, finite number of seconds (bools refused: True is not a duration)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise BadArgumentError(field=field, problem=f"is {value!r}", fix=fix)
    return float(value)


def whole(field: str, value: object, least: int = 1, fix: str | None = None) -> int:
    """A whole number no smaller than `least` (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise BadArgumentError(field=field, problem=f"is {value!r}", fix=fix or f"pass a whole number >= {least}")
    return value
