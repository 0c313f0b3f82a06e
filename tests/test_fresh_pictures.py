"""The learner's process hashes `canonical_text(value)` for each digest the explorer draws: it
must be the very text `repr(canonical(value))` (the picture the explorer compares in one
process), so the grader merges exactly the states a check run in one process merges."""

from __future__ import annotations

import enum
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shopops_lab.checks.base import restart
from shopops_lab.checks.fresh import canonical, canonical_text, memory, memory_text
from shopops_lab.clock import FakeClock
from shopops_lab.events import EventLog


class Colour(enum.IntEnum):
    RED = 1


class Name(str):
    def __repr__(self) -> str:
        return f"Name<{str.__repr__(self)}>"


class Holder:
    def __init__(self, *items: Any) -> None:
        self.items = list(items)
        self.note = "held"


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a: Any) -> None:
        self.a = a


ATOMS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet="ab'\"\\é\n", max_size=3),
    st.binary(max_size=2),
    st.just(Colour.RED),
    st.builds(Name, st.text(alphabet="xy", max_size=2)),
    st.sampled_from([len, Holder, enum, FakeClock(), EventLog()]),
)
KEYS = st.one_of(st.text(alphabet="ab", max_size=2), st.integers(-2, 2), st.booleans(), st.tuples(st.integers(0, 1)))


def _values(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.frozensets(st.one_of(st.integers(-2, 2), st.text(alphabet="ab", max_size=1)), max_size=3),
        st.sets(st.one_of(st.integers(-2, 2), st.tuples(st.booleans())), max_size=3),
        st.dictionaries(KEYS, inner, max_size=3),
        st.lists(inner, max_size=2).map(lambda items: Holder(*items)),
        inner.map(Slotted),
    )


VALUES = st.recursive(ATOMS, _values, max_leaves=25)


@settings(max_examples=500, deadline=None)
@given(VALUES)
def test_the_text_is_the_repr_of_the_picture(value: Any) -> None:
    assert canonical_text(value) == repr(canonical(value))


def test_the_text_is_the_repr_of_the_picture_through_cycles_and_past_the_depth_limit() -> None:
    ring: list[Any] = [1]
    ring.append({"back": ring, "holder": Holder(ring)})
    deep: Any = "bottom"
    for _ in range(12):
        deep = [deep, {"k": (deep,)}]
    shared = [1, 2]
    for value in (ring, deep, [shared, shared, (shared,)], Holder(Holder(Holder(ring)))):
        assert canonical_text(value) == repr(canonical(value))


def test_a_copys_memory_text_is_the_repr_of_its_memory() -> None:
    namespace: dict[str, Any] = {}
    exec("SEEN = []\ndef answer(x):\n    SEEN.append(x)\n    return len(SEEN)\n", namespace)
    fresh = restart(namespace["answer"])
    fresh(1)
    fresh({"a": (1, 2)})
    assert memory_text(fresh) == repr(memory(fresh)) and "'dict'" in str(memory_text(fresh))
    assert memory_text(len) is None and memory(len) is None
