"""JSON text written with json's C encoder made once.

`json.dumps` with any argument of its own builds a new encoder on every call: a few
microseconds, paid on hot paths by the SQL stores (three times in every enqueue+acquire+ack
cycle) and by the grader's wire (every message). `writer` makes the encoder once, with the
settings asked for and no circular check, for values that cannot contain themselves.

`dumps` is the text the SQL stores write (payloads, event info, records): compact, ASCII, NaN
refused, read-only mappings written as dicts. A flat dict, or a read-only view of one (str,
int, float, bool or None values: every payload and event info of the queue's hot path, the
shared details of its events included) takes such a writer; anything else goes through
`json.dumps` with its circular check, as before. Both write the same text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["dumps", "writer"]


def writer(*, ensure_ascii: bool, allow_nan: bool, default: Callable[[Any], Any]) -> Callable[[Any], str]:
    """`json.dumps(value, ensure_ascii=..., allow_nan=..., default=..., separators=(",", ":"),
    check_circular=False)`, its encoder made once (json's C one where this Python has it)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C speed-ups in this Python: the same text, from json's own encoder
        return json.JSONEncoder(
            ensure_ascii=ensure_ascii,
            allow_nan=allow_nan,
            default=default,
            separators=(",", ":"),
            check_circular=False,
        ).encode
    # (markers, default, string encoder, indent, key separator, item separator, sort_keys,
    # skipkeys, allow_nan): what json.dumps passes for these settings.
    strings = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    encoder = make(None, default, strings, None, ":", ",", False, False, allow_nan)
    return lambda value: "".join(encoder(value, 0))


_FLAT = frozenset({str, int, float, bool, type(None)})
_FLAT_MAPPINGS = (dict, MappingProxyType)  # a read-only view (the queue's shared event details) is written as its dict


def _plain(value: Any) -> Any:
    """A read-only mapping (the log freezes nested values) as the dict JSON wants."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


_write_flat = writer(ensure_ascii=True, allow_nan=False, default=_plain)


def dumps(value: Any) -> str:
    """Compact JSON text, NaN refused, read-only mappings written as dicts. A flat read-only
    view is handed over as its copy: the encoder would call back into Python (`_plain`) for it."""
    kind = value.__class__
    if kind in _FLAT_MAPPINGS and _FLAT.issuperset(map(type, value.values())):
        return _write_flat(value if kind is dict else value.copy())
    return json.dumps(value, separators=(",", ":"), allow_nan=False, default=_plain)
