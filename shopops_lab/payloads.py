"""Payloads are small JSON documents: checked and copied once, so no caller can change
a stored message behind its store's back. What a store hands out is a copy
(`json_copy`) or cannot be changed at all (`frozen`)."""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from shopops_lab.errors import BadArgumentError

_SCALARS = (str, int, float, bool, type(None))
_FAST = frozenset({str, int, bool, type(None)})  # float is left out: it may be NaN or infinite
MAX_DEPTH = 100  # deeper than any real message; a structure that contains itself hits it at once


def is_flat(value: dict) -> bool:
    """True when every value is a string, int, bool or None: `dict(value)` is then a deep copy."""
    return _FAST.issuperset(map(type, value.values()))


def json_copy(value: Any, field: str = "payload") -> Any:
    """A deep copy of `value` made of dict/list/str/int/float/bool/None, or BadArgumentError
    naming the path of the first part that JSON cannot carry (NaN, infinity, a set, an
    object, a structure that contains itself). Read-only mappings and tuples (what `frozen`
    makes) are copied back into dicts and lists."""
    return flat_copy(value, field)[0]


def flat_copy(value: Any, field: str = "payload") -> tuple[Any, bool]:
    """`json_copy(value)`, and whether the copy is flat (see `is_flat`): one pass over the
    common case, on every enqueue, instead of two."""
    if type(value) is dict:
        # The common case, a flat dict of strings and short ints, in one Python pass over its
        # items: building sets of the keys' and values' types (C loops, but three temporary
        # containers) cost twice as much for a payload of a few fields (bench_queue.py).
        copy = dict(value)
        for key, inner in copy.items():
            if key.__class__ is not str:
                break
            kind = inner.__class__
            if kind is int:
                if not _LOWEST < inner < _BIG:
                    break
            elif kind not in _FAST:
                break
        else:
            return copy, True
    copy = _copy(value, field, ())
    return copy, type(copy) is dict and is_flat(copy)


def _copy(value: Any, field: str, inside: tuple[int, ...]) -> Any:
    if isinstance(value, _SCALARS):
        if isinstance(value, float) and not -_INF < value < _INF:
            raise _not_json(field, "a NaN" if value != value else "an infinite number")
        if isinstance(value, int) and not _LOWEST < value < _BIG:
            raise _not_json(field, f"an int of more than {DIGITS:,} digits")
        return value
    if isinstance(value, (Mapping, list, tuple)):
        if id(value) in inside:
            raise BadArgumentError(
                field=field,
                problem="contains itself (a structure that refers back to one of its parents)",
                fix="pass plain nested data, copied, not linked",
            )
        if len(inside) >= MAX_DEPTH:
            raise BadArgumentError(
                field=field,
                problem=f"is nested more than {MAX_DEPTH} levels deep",
                fix="keep payloads shallow; store big documents elsewhere and pass their id",
            )
        inside = (*inside, id(value))
        if isinstance(value, Mapping):
            copy = {}
            for key, inner in value.items():
                if not isinstance(key, str):
                    raise BadArgumentError(
                        field=f"{field} key {key!r}", problem="is not a string", fix="JSON object keys must be strings"
                    )
                copy[key] = _copy(inner, f"{field}[{key!r}]", inside)
            return copy
        return [_copy(inner, f"{field}[{i}]", inside) for i, inner in enumerate(value)]
    raise _not_json(field, f"a {type(value).__name__}")


def frozen(value: Any, field: str = "payload") -> Any:
    """`value` checked like `json_copy` and made read-only all the way down: dicts become
    read-only mappings, lists become tuples. For what many readers share (a broker's
    deliveries), where a copy per reader would not do."""
    return _freeze(json_copy(value, field))


_PLAIN_VALUES = frozenset({type(None), bool, int, float, str, bytes})


def state_copy(component: Any, memo: dict[int, Any]) -> Any:
    """`__deepcopy__` of a kit component whose state is its `__dict__` (a store, an adapter,
    an Env): the copy `copy.deepcopy` makes of it, each attribute copied through `memo`,
    without the generic path (`__reduce_ex__`, a state dict, a dispatch per string and
    number). The explorer copies a world's components for each schedule it goes on from. A
    subclass that keeps state elsewhere (slots, its own pickling) defines its own."""
    twin = object.__new__(type(component))
    memo[id(component)] = twin
    twin.__dict__.update(
        {
            name: value if type(value) in _PLAIN_VALUES else _deepcopied(value, memo)
            for name, value in component.__dict__.items()
        }
    )
    return twin


def _atom(value: Any) -> bool:
    """A value `copy.deepcopy` hands back as itself: a plain value, an enum member, a kit
    record that says so (`itself`), or a tuple of those."""
    return _single(value) or (type(value) is tuple and all(_single(item) for item in value))


def _single(value: Any) -> bool:
    kind = type(value)
    return kind in _PLAIN_VALUES or getattr(kind, "__deepcopy__", None) is itself or isinstance(value, enum.Enum)


def _deepcopied(value: Any, memo: dict[int, Any]) -> Any:
    """`copy.deepcopy(value, memo)`, made one level deep where that is the same thing: a list,
    set or dict whose every item (and key) is an `_atom` (a trace of strings, a counter by
    step). Entered in `memo` as deepcopy would, so what else holds it holds the copy."""
    kind = type(value)
    twin: Any
    if kind is list or kind is set:
        if id(value) not in memo and all(_atom(item) for item in value):
            twin = memo[id(value)] = kind(value)
            copy._keep_alive(value, memo)  # type: ignore[attr-defined]  # as deepcopy keeps what it copied
            return twin
    elif kind is dict:
        if id(value) not in memo and all(_atom(key) and _atom(item) for key, item in value.items()):
            twin = memo[id(value)] = dict(value)
            copy._keep_alive(value, memo)  # type: ignore[attr-defined]
            return twin
    return copy.deepcopy(value, memo)


def itself(record: Any, memo: dict[int, Any]) -> Any:
    """`__deepcopy__` of a record nothing can change (a frozen dataclass holding strings,
    numbers, enums, and tuples and read-only mappings of those): its copy is itself, as
    `copy` treats a str. The explorer copies a world's records by the thousand."""
    return record


def _freeze(value: Any) -> Any:
    if type(value) is dict:
        return MappingProxyType({key: _freeze(inner) for key, inner in value.items()})
    if type(value) is list:
        return tuple(_freeze(inner) for inner in value)
    return value


_INF = float("inf")
DIGITS = 4_300  # the most digits Python turns into text (sys.int_info.default_max_str_digits)
_BIG = 10**DIGITS
_LOWEST = -_BIG  # made once: the negation of a 4,300-digit int is not free


def _not_json(field: str, what: str) -> BadArgumentError:
    return BadArgumentError(
        field=field,
        problem=f"holds {what}, which is not JSON-serialisable",
        fix="keep payloads small and plain (dict, list, str, number, bool, None); "
        "store big artifacts elsewhere and put their id in the payload",
    )
