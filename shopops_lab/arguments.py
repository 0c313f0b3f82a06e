"""The checks every public call makes on its arguments, written once, so each refusal
reads the same way: a `BadArgumentError` naming the field, what it was, and the fix.

A call checks everything it was given before it changes anything, so a refused call
leaves no trace: not in a store, not in the event log, not on the clock."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

from shopops_lab.errors import BadArgumentError

E = TypeVar("E", bound=Enum)

if TYPE_CHECKING:
    pass

# The latest (and, negated, earliest) time the kit accepts, in seconds: about 31,700 years
# of clock. Far enough for any lesson or wall clock, and near enough that a float still
# resolves a tenth of a millisecond there, so `t + 30` is a lease of 30 s, not of 0 s
# (at t=1e20, t + 30 == t).
MAX_TIME = 1e12

_FLOAT_MAX = sys.float_info.max
TIME_FIX = "pass a finite number of seconds, or leave it out to use the clock"


def text(field: str, value: object, fix: str) -> str:
    """A non-blank string every store can keep; `fix` completes "pass ..." (e.g. "the case
    id, e.g. 'O-1001'")."""
    if value.__class__ is str and value.isascii() and "\x00" not in value and not value.isspace() and value:
        return value  # the usual id, passed in one cheap test: every send checks four (bench_sim.py)
    if value is None:
        raise BadArgumentError(field=field, problem="is missing", fix=f"pass {fix}")
    if not isinstance(value, str) or not value.strip():
        raise BadArgumentError(field=field, problem=f"is {shown(value)}, not a non-empty string", fix=f"pass {fix}")
    if not storable(value):
        raise BadArgumentError(
            field=field,
            problem=f"is {shown(value)}, which holds a NUL character or half of a "
            "UTF-16 surrogate pair (no database column keeps either)",
            fix=f"pass {fix}",
        )
    return value


def storable(value: str) -> bool:
    """True if every store keeps `value` as text: no NUL (PostgreSQL refuses it) and no lone
    surrogate (it has no UTF-8 form). Plain ASCII, the usual id, is checked in C at once."""
    if value.isascii():
        return "\x00" not in value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in value


def shown(value: object) -> str:
    """`repr(value)` for a message, or a description where Python will not print it (an int
    of more than 4,300 digits, or a container holding one)."""
    try:
        return repr(value)
    except ValueError:
        return f"{a(type(value).__name__)} too large to print"


def seconds(field: str, value: object, fix: str = "pass a positive, finite number of seconds") -> float:
    """A positive, finite number of seconds, at most MAX_TIME (bools refused: True is not a duration)."""
    return number(field, value, fix, above=0, most=MAX_TIME)


def whole(field: str, value: object, least: int | None = 1, fix: str | None = None, *, most: int | None = None) -> int:
    """A whole number no smaller than `least` (None: any) and no larger than `most`, if
    given; bools refused."""
    if not is_whole(value) or (least is not None and value < least) or (most is not None and value > most):
        raise BadArgumentError(
            field=field, problem=f"is {shown(value)}", fix=fix or f"pass a whole number{_limits(least, most)}"
        )
    return value


def _limits(least: int | None, most: int | None) -> str:
    if most is None:
        return "" if least is None else f" >= {least}"
    return f" <= {most:,}" if least is None else f" from {least:,} to {most:,}"


def number(
    field: str,
    value: object,
    fix: str,
    *,
    least: float = -math.inf,
    most: float = math.inf,
    above: float | None = None,
    below: float | None = None,
) -> float:
    """A number (bools and NaN refused) with least <= value <= most, and above < value <
    below where those are given: `above=0, below=math.inf` is "positive and finite"."""
    if (
        not is_number(value)
        or not least <= value <= most
        or (above is not None and not value > above)
        or (below is not None and not value < below)
    ):
        raise BadArgumentError(field=field, problem=f"is {shown(value)}", fix=fix)
    return float(value)


def is_number(value: object) -> TypeGuard[float]:
    """An int or float (numpy's float too), but not a bool: True is no duration. (A TypeGuard,
    not a TypeIs: False does not mean "no int", since True is one.)"""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_whole(value: object) -> TypeGuard[int]:
    """An int, but not a bool: True is no token."""
    return isinstance(value, int) and not isinstance(value, bool)


def flag(field: str, value: object, fix: str) -> bool:
    """True or False, and nothing that merely looks like one (1, "yes", None)."""
    if not isinstance(value, bool):
        raise BadArgumentError(field=field, problem=f"is {shown(value)}", fix=fix)
    return value


def choice(field: str, value: object, options: Iterable[object], fix: str) -> Any:
    """`value` if it is one of `options`."""
    if value not in tuple(options):
        raise BadArgumentError(field=field, problem=f"is {shown(value)}", fix=fix)
    return value


def names(field: str, values: object, example: str) -> frozenset[str]:
    """A non-empty collection of non-empty strings (a lone string refused: it is no list
    of names); `example` is one such name, for the fix."""
    if isinstance(values, str):
        raise BadArgumentError(
            field=field, problem=f"is the string {shown(values)}", fix=f"pass a list, e.g. {field}=[{shown(values)}]"
        )
    try:
        # any value at all: frozenset refusing a non-iterable one (TypeError) is the check
        names = frozenset(values)  # type: ignore[call-overload]
    except TypeError:
        raise BadArgumentError(
            field=field,
            problem=f"is {shown(values)}",
            fix=f"pass a non-empty list of names, e.g. {field}=[{example!r}]",
        ) from None
    if not names or not all(isinstance(v, str) and v for v in names):
        raise BadArgumentError(
            field=field,
            problem=f"is {sorted(map(repr, names))}",
            fix=f"pass a non-empty list of names, e.g. {field}=[{example!r}]",
        )
    return names


def strings(field: str, value: object, fix: str = "pass a tuple of non-empty strings") -> tuple[str, ...]:
    """A list or tuple of non-empty strings, kept in order (it may be empty)."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise BadArgumentError(field=field, problem=f"is {shown(value)}", fix=fix)
    return tuple(value)


def mapping(field: str, value: object, kind: type, fix: str | None = None) -> Mapping[str, Any]:
    """A read-only copy of a dict from non-empty strings to `kind` values."""
    if not (type(value) is dict or type(value) is MappingProxyType or isinstance(value, Mapping)) or not all(
        isinstance(k, str) and k and isinstance(v, kind) for k, v in value.items()
    ):
        raise BadArgumentError(
            field=field,
            problem=f"is {shown(value)}",
            fix=fix or f"pass a dict of non-empty strings to {kind.__name__} values",
        )
    return MappingProxyType(dict(value))


def member(field: str, value: object, kind: type[E], fix: str) -> E:
    """A member of the enum `kind`, given as itself or its value; `fix` follows the list of
    values ("pass one of ready, leased, ..., {fix}")."""
    try:
        return kind(value)
    except (ValueError, TypeError):
        names = ", ".join(str(m.value) for m in kind)
        raise BadArgumentError(field=field, problem=f"is {shown(value)}", fix=f"pass one of {names}{fix}") from None


def moment(field: str, value: object, fix: str = TIME_FIX) -> float:
    """A point in time: a finite number of seconds within +-MAX_TIME (bools refused)."""
    if value.__class__ is float and -MAX_TIME <= value <= MAX_TIME:
        return value  # the usual reading, in one cheap test: every send reads the clock here (bench_sim.py)
    if not is_number(value) or not -MAX_TIME <= value <= MAX_TIME:
        problem = f"is {shown(value)}"
        if is_number(value) and value == value:
            problem += f", outside the +-{MAX_TIME:g} s the kit can time exactly"
        raise BadArgumentError(field=field, problem=problem, fix=fix)
    return float(value)


def instance(field: str, value: Any, kind: type, fix: str) -> Any:
    """`value` if it is a `kind`, else BadArgumentError naming what it is instead."""
    if not isinstance(value, kind):
        raise BadArgumentError(field=field, problem=f"is {a(type(value).__name__)}, not {a(kind.__name__)}", fix=fix)
    return value


def a(noun: str) -> str:
    """`noun` with its indefinite article: "a list", "an int", "an EventLog"."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def finite(field: str, value: object, fix: str) -> float:
    """Any finite number (bools refused)."""
    return number(field, value, fix, least=-_FLOAT_MAX, most=_FLOAT_MAX)


def callable_(field: str, value: object, fix: str) -> Any:
    """A function (or any callable)."""
    if not callable(value):
        raise BadArgumentError(field=field, problem=f"is {shown(value)}, not a function", fix=fix)
    return value
