"""The JSON text the SQL stores write (payloads, event info, records), with the usual case
made cheaply.

`json.dumps` with any argument of its own builds a new encoder on every call: a few
microseconds, three times in every enqueue+acquire+ack cycle. A flat dict, or a read-only
view of one (str, int, float, bool or None values: every payload and event info of the
queue's hot path, the shared details of its events included) cannot contain itself, so it
is written by one C encoder made once, with no circular check; anything else goes through
`json.dumps` as before. Both write the same text: compact, ASCII, NaN refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["dumps"]

_FLAT = frozenset({str, int, float, bool, type(None)})
_FLAT_MAPPINGS = (dict, MappingProxyType)  # a read-only view (the queue's shared event details) is written as its dict


def _plain(value: Any) -> Any:
    """A read-only mapping (the log freezes nested values) as the dict JSON wants."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _flat_writer() -> Callable[[Any, int], Iterable[str]] | None:
    """json's C encoder with `dumps`'s settings and no circular check, or None without it."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C speed-ups in this Python
        return None
    # (markers, default, string encoder, indent, key separator, item separator, sort_keys,
    # skipkeys, allow_nan): what json.dumps(ensure_ascii=True, allow_nan=False) passes.
    encoder: Callable[[Any, int], Iterable[str]] = make(
        None, _plain, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, False
    )
    return encoder


_WRITE_FLAT = _flat_writer()


def dumps(value: Any) -> str:
    """Compact JSON text, NaN refused, read-only mappings written as dicts."""
    if _WRITE_FLAT is not None and value.__class__ in _FLAT_MAPPINGS and _FLAT.issuperset(map(type, value.values())):
        return "".join(_WRITE_FLAT(value, 0))
    return json.dumps(value, separators=(",", ":"), allow_nan=False, default=_plain)
