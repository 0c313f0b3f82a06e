"""A payload's copy on its fast path (a flat dict, the usual enqueue) is what the general
copy makes of it: the same document, the same verdict on flatness, the same refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shopops_lab.errors import BadArgumentError
from shopops_lab.payloads import DIGITS, _copy, flat_copy, is_flat

_VALUES = st.one_of(
    st.text(max_size=5),
    st.integers(),
    st.sampled_from([10**DIGITS - 1, -(10**DIGITS) + 1, 10**DIGITS, -(10**DIGITS)]),
    st.booleans(),
    st.none(),
    st.floats(),
    st.lists(st.integers(), max_size=2),
)
_KEYS = st.one_of(st.text(max_size=5), st.integers(), st.none())


def _general(value: object) -> tuple[object, bool] | str:
    """The slow path's answer: the copy and its flatness, or the refusal's field."""
    try:
        copied = _copy(value, "payload", ())
    except BadArgumentError as error:
        return error.field
    return copied, type(copied) is dict and is_flat(copied)


@given(st.dictionaries(_KEYS, _VALUES, max_size=4))
def test_the_fast_path_answers_what_the_general_copy_answers(payload: dict) -> None:
    try:
        got: tuple[object, bool] | str = flat_copy(payload)
    except BadArgumentError as error:
        got = error.field
    assert got == _general(payload)
    if not isinstance(got, str):
        assert got[0] is not payload


@pytest.mark.parametrize("bad", [10**DIGITS, -(10**DIGITS), 10**5000], ids=["10**DIGITS", "-10**DIGITS", "10**5000"])
def test_an_int_too_long_to_write_is_refused_on_the_fast_path(bad: int) -> None:
    with pytest.raises(BadArgumentError, match="digits"):
        flat_copy({"n": bad, "s": "x"})
