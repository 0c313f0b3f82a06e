"""Time, injected: every component asks a `Clock`, so tests and notebooks can freeze it.

Times are plain float seconds on the clock's own scale (a lesson can write
`lease.expires_at + 1`). Nothing in the kit reads the wall clock except `SystemClock`.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from shopops_lab import arguments
from shopops_lab.arguments import MAX_TIME
from shopops_lab.errors import BadArgumentError


@runtime_checkable
class Clock(Protocol):
    """Anything with a `now()` returning seconds as a float."""

    def now(self) -> float: ...


def resolve(clock: Clock, now: object = None, field: str = "now") -> float:
    """The time of a call: `now` when given (any time the kit can hold), else `clock`'s
    reading. A clock that returns something other than finite seconds is refused like a
    bad `now=`, so no store ever writes a time it could not compare."""
    if now is None:
        return arguments.moment("clock.now()", clock.now(), _CLOCK_FIX)
    return arguments.moment(field, now)


class SystemClock:
    """The real wall clock, for running the engine outside a lesson."""

    def now(self) -> float:
        return time.time()

    def __repr__(self) -> str:
        return "SystemClock()"


class FakeClock:
    """A clock that moves only when told, so every run of a lesson sees the same times."""

    __slots__ = ("_now",)

    def __init__(self, start: float = 0.0) -> None:
        self._now = arguments.moment("start", start, _FIX)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by `seconds` (never backwards) and return the new time."""
        seconds = arguments.finite("seconds", seconds, "pass a finite number of seconds >= 0")
        if seconds < 0:
            raise BadArgumentError(
                field="seconds",
                problem=f"is negative ({seconds})",
                fix="a FakeClock only moves forward; pass a value >= 0",
            )
        self._now = arguments.moment(
            "seconds", self._now + seconds, f"advance by less: the clock is at {self._now:g} and stops at {MAX_TIME:g}"
        )
        return self._now

    def set(self, when: float) -> float:
        """Jump to the absolute time `when`, which may not be in the past."""
        if when.__class__ is float and self._now <= when <= MAX_TIME:
            self._now = when  # the usual move, in one cheap test: the simulator's engine moves the clock every event
            return when
        when = arguments.moment("when", when, _FIX)
        if when < self._now:
            raise BadArgumentError(
                field="when",
                problem=f"is {when}, before the clock's {self._now}",
                fix="a FakeClock only moves forward; pass a time >= now()",
            )
        self._now = when
        return self._now

    def __repr__(self) -> str:
        return f"FakeClock(now={self._now:g})"


_CLOCK_FIX = "use a clock whose now() returns finite seconds, e.g. FakeClock() or SystemClock()"
_FIX = f"pass a finite number of seconds between {-MAX_TIME:g} and {MAX_TIME:g}"


def component_clock(value: object) -> Clock:
    """The `clock=` of a component: anything with a now() method, or a fresh FakeClock."""
    if value is None:
        return FakeClock()
    if not callable(getattr(value, "now", None)):
        raise BadArgumentError(
            field="clock",
            problem=f"is {arguments.shown(value)}, which has no now()",
            fix="pass FakeClock() or SystemClock() from shopops_lab",
        )
    return value  # type: ignore[return-value]
