"""The shared argument checks: each refusal names the field, what it was and the caller's
own fix; each accepted value comes back in the type the caller works with."""

from __future__ import annotations

import math

import pytest

from shopops_lab import arguments
from shopops_lab.clock import FakeClock, resolve
from shopops_lab.errors import BadArgumentError

FIX = "pass the caller's own fix"


def refused(call, *args, **kwargs) -> BadArgumentError:
    with pytest.raises(BadArgumentError) as caught:
        call(*args, **kwargs)
    return caught.value


@pytest.mark.parametrize(
    ("bounds", "good", "bad"),
    [
        ({}, [-1e300, 0, 7, math.inf, -math.inf], [math.nan, True, "3", None]),
        ({"above": 0, "below": math.inf}, [1e-9, 3, 1e300], [0, -1, math.inf, math.nan, False]),
        ({"least": 0, "below": 1}, [0, 0.5, 0.999], [1, -0.001, math.nan]),
        ({"above": 0, "most": 100}, [0.1, 100], [0, 100.5]),
        ({"least": 0, "most": 1}, [0, 1], [-1e-12, 1.0000001]),
    ],
)
def test_number_holds_its_bounds_and_refuses_bools_and_nan(bounds, good, bad):
    for value in good:
        assert arguments.number("x", value, FIX, **bounds) == float(value)
        assert type(arguments.number("x", value, FIX, **bounds)) is float
    for value in bad:
        err = refused(arguments.number, "x", value, FIX, **bounds)
        assert (err.field, err.problem, err.fix) == ("x", f"is {value!r}", FIX)


def test_whole_can_leave_either_bound_open_and_says_which_it_wants():
    assert arguments.whole("seed", -5, None) == -5
    assert refused(arguments.whole, "seed", 2.0, None).fix == "pass a whole number"
    assert refused(arguments.whole, "n", 0).fix == "pass a whole number >= 1"
    assert refused(arguments.whole, "n", 11, 1, most=10).fix == "pass a whole number from 1 to 10"
    assert refused(arguments.whole, "n", 11, None, most=10).fix == "pass a whole number <= 10"
    assert refused(arguments.whole, "n", True, None, FIX).fix == FIX


def test_choice_flag_names_strings_and_mapping():
    assert arguments.choice("axis", "seq", ("time", "seq"), FIX) == "seq"
    assert refused(arguments.choice, "axis", ["seq"], ("time", "seq"), FIX).problem == "is ['seq']"
    assert arguments.flag("final", False, FIX) is False
    for value in (0, 1, "yes", None):
        assert refused(arguments.flag, "final", value, FIX).problem == f"is {value!r}"
    assert arguments.names("workers", ("W2", "W1", "W2"), "W1") == frozenset({"W1", "W2"})
    assert refused(arguments.names, "workers", "W1", "W1").fix == "pass a list, e.g. workers=['W1']"
    for bad in ([], ["W1", ""], [3], 3):
        err = refused(arguments.names, "workers", bad, "W1")
        assert err.fix == "pass a non-empty list of names, e.g. workers=['W1']"
    assert arguments.strings("completed", ["fetch", "summarize"]) == ("fetch", "summarize")
    assert arguments.strings("completed", ()) == ()
    assert refused(arguments.strings, "completed", "fetch").fix == "pass a tuple of non-empty strings"
    assert refused(arguments.strings, "completed", ["fetch", ""]).problem == "is ['fetch', '']"
    budgets = arguments.mapping("budgets", {"emails": 1}, int)
    assert budgets == {"emails": 1}
    with pytest.raises(TypeError):
        budgets["emails"] = 2  # read-only
    assert refused(arguments.mapping, "budgets", {"": 1}, int).fix == "pass a dict of non-empty strings to int values"
    assert refused(arguments.mapping, "budgets", [("a", 1)], int, FIX).fix == FIX


class BrokenClock:
    def now(self):
        return math.nan


def test_resolve_reads_the_clock_only_when_no_time_is_given_and_checks_both():
    clock = FakeClock(12)
    assert resolve(clock) == 12.0 and resolve(clock, 3) == 3.0
    assert refused(resolve, clock, "soon").field == "now"
    assert refused(resolve, clock, math.inf, "until").field == "until"
    err = refused(resolve, BrokenClock())
    assert err.field == "clock.now()" and "FakeClock()" in err.fix
