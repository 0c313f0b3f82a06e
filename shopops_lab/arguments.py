"""The checks every public call makes on its arguments, written once, so each refusal
reads the same way: a `BadArgumentError` naming the field, what it was, and the fix.

A call checks everything it was given before it changes anything, so a refused call
leaves no trace: not in a store, not in the event log, not on the clock."""
from __future__ import annotations

import sys
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from shopops_lab.errors import BadArgumentError

E = TypeVar("E", bound=Enum)

if TYPE_CHECKING:
    from shopops_lab.clock import Clock
    from shopops_lab.events import EventLog

# The latest (and, negated, earliest) time the kit accepts, in seconds: about 31,700 years
# of clock. Far enough for any lesson or wall clock, and near enough that a float still
# resolves a tenth of a millisecond there, so `t + 30` is a lease of 30 s, not of 0 s
# (at t=1e20, t + 30 == t).
MAX_TIME = 1e12

_FLOAT_MAX = sys.float_info.max
TIME_FIX = "pass a finite number of seconds, or leave it out to use the clock"
_CLOCK_FIX = "use a clock whose now() returns finite seconds, e.g. FakeClock() or SystemClock()"


def text(field: str, value: object, fix: str) -> str:
    """A non-blank string; `fix` completes "pass ..." (e.g. "the case id, e.g. 'O-1001'")."""
    if value is None:
        raise BadArgumentError(field=field, problem="is missing", fix=f"pass {fix}")
    if not isinstance(value, str) or not value.strip():
        raise BadArgumentError(field=field, problem=f"is {value!r}, not a non-empty string", fix=f"pass {fix}")
    return value


def seconds(field: str, value: object, fix: str = "pass a positive, finite number of seconds") -> float:
    """A positive, finite number of seconds, at most MAX_TIME (bools refused: True is not a duration)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_TIME:
        raise BadArgumentError(field=field, problem=f"is {value!r}", fix=fix)
    return float(value)


def whole(field: str, value: object, least: int = 1, fix: str | None = None, *, most: int | None = None) -> int:
    """A whole number no smaller than `least` (and no larger than `most`, if given; bools refused)."""
    if (isinstance(value, bool) or not isinstance(value, int) or value < least
            or (most is not None and value > most)):
        limits = f">= {least}" if most is None else f"from {least:,} to {most:,}"
        raise BadArgumentError(field=field, problem=f"is {value!r}", fix=fix or f"pass a whole number {limits}")
    return value


def member(field: str, value: object, kind: type[E], fix: str) -> E:
    """A member of the enum `kind`, given as itself or its value; `fix` follows the list of
    values ("pass one of ready, leased, ..., {fix}")."""
    try:
        return kind(value)
    except (ValueError, TypeError):
        names = ", ".join(str(m.value) for m in kind)  # type: ignore[attr-defined]
        raise BadArgumentError(field=field, problem=f"is {value!r}", fix=f"pass one of {names}{fix}") from None


def moment(field: str, value: object, fix: str = TIME_FIX) -> float:
    """A point in time: a finite number of seconds within +-MAX_TIME (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -MAX_TIME <= value <= MAX_TIME:
        problem = f"is {value!r}"
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            problem += f", outside the +-{MAX_TIME:g} s the kit can time exactly"
        raise BadArgumentError(field=field, problem=problem, fix=fix)
    return float(value)


def time_of(now: object, clock: Clock, field: str = "now") -> float:
    """The time of a call: `now` when given, else the clock's reading; a clock that
    returns something other than finite seconds is refused like a bad `now=`."""
    if now is None:
        return moment("clock.now()", clock.now(), _CLOCK_FIX)
    return moment(field, now)


def clock(value: object) -> Clock:
    """The `clock=` of a component: anything with a now() method, or a fresh FakeClock."""
    from shopops_lab.clock import FakeClock

    if value is None:
        return FakeClock()
    if not callable(getattr(value, "now", None)):
        raise BadArgumentError(field="clock", problem=f"is {value!r}, which has no now()",
                               fix="pass FakeClock() or SystemClock() from shopops_lab")
    return value  # type: ignore[return-value]


def log(value: object) -> EventLog:
    """The `log=` of a component: an EventLog to share, or a fresh one."""
    from shopops_lab.events import EventLog

    if value is None:
        return EventLog()
    return instance("log", value, EventLog, "pass an EventLog (e.g. queue.log, to share one log), or leave it out")


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
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -_FLOAT_MAX <= value <= _FLOAT_MAX:
        raise BadArgumentError(field=field, problem=f"is {value!r}", fix=fix)
    return float(value)


def callable_(field: str, value: object, fix: str) -> Any:
    """A function (or any callable)."""
    if not callable(value):
        raise BadArgumentError(field=field, problem=f"is {value!r}, not a function", fix=fix)
    return value
