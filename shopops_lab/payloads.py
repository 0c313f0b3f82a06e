"""Payloads are small JSON documents: checked and copied once, so no caller can change
a queued message behind the queue's back."""
from __future__ import annotations

from typing import Any

from shopops_lab.errors import BadArgumentError

_SCALARS = (str, int, float, bool, type(None))
_FAST = frozenset({str, int, bool, type(None)})  # float is left out: it may be NaN
_KEY = frozenset({str})


def is_flat(value: dict) -> bool:
    """True when every value is a string, int, bool or None: `dict(value)` is then a deep copy."""
    return _FAST.issuperset(map(type, value.values()))


def json_copy(value: Any, field: str = "payload") -> Any:
    """A deep copy of `value` made of dict/list/str/int/float/bool/None, or BadArgumentError
    naming the path of the first part that JSON cannot carry."""
    if type(value) is dict:
        # The common case, on every enqueue and acquire: a flat dict of strings and numbers,
        # checked with C-level loops over the types of its keys and values.
        copy = dict(value)
        if _FAST.issuperset(map(type, copy.values())) and _KEY.issuperset(map(type, copy)):
            return copy
    if isinstance(value, _SCALARS):
        if isinstance(value, float) and value != value:
            raise _not_json(field, "NaN")
        return value
    if isinstance(value, dict):
        copy = {}
        for key, inner in value.items():
            if not isinstance(key, str):
                raise BadArgumentError(field=f"{field} key {key!r}", problem="is not a string",
                                       fix="JSON object keys must be strings")
            copy[key] = json_copy(inner, f"{field}[{key!r}]")
        return copy
    if isinstance(value, (list, tuple)):
        return [json_copy(inner, f"{field}[{i}]") for i, inner in enumerate(value)]
    raise _not_json(field, type(value).__name__)


def _not_json(field: str, what: str) -> BadArgumentError:
    return BadArgumentError(field=field, problem=f"holds a {what}, which is not JSON-serialisable",
                            fix="keep payloads small and plain (dict, list, str, number, bool, None); "
                                "store big artifacts elsewhere and put their id in the payload")
