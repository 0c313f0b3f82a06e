"""The wire between the judge and a learner process: length-prefixed JSON frames over a
socket, and the values that may cross it. Never pickle: the judge must not run anything
the learner's process sends, so every frame is data, decoded to exact built-in types.

What crosses by value: None, bool, int, float, str (a `str` subclass arrives as a plain
str), lists, tuples, sets, frozensets and dicts of those, the kit's enums, and the kit's
records (its dataclasses, rebuilt through their own constructor on the receiving side).
Everything else crosses by handle: a number naming the object on the side that owns it
(and, the first time, the public methods its class defines). Calling a handle, reading a
public attribute of it, or calling one of those methods (one request, not a read and a
call: `_Method`) is a request to its owner, who
answers with a value or a handle, or with an exception: the kit's own (by class name and
fields), a built-in one (by name and message), or the other side's (by name, message and
where). Requests nest (judge -> learner -> kit callback -> return), never run at once.
"""

from __future__ import annotations

import abc
import builtins
import contextlib
import dataclasses
import enum
import importlib
import json
import json.scanner
import struct
import sys
from collections.abc import Callable
from types import FunctionType, MappingProxyType, ModuleType
from typing import Any, TypeVar

from shopops_lab.errors import CheckStopped
from shopops_lab.json_text import writer

HEADER = struct.Struct(">I")
FRAME_LIMIT = 32 * 2**20  # bytes one frame may hold
DEPTH_LIMIT = 40  # nesting of one value
KIT = "shopops_lab"
MUTABLE = frozenset({list, set, dict})  # containers a call may fill: copied back after it
ITER_LIMIT = 100_000  # items an iteration across the wire may yield
METHOD_LIMIT = 200  # method names a handle's first crossing may carry
# The containers sent by value, with their tags; each read through its own class's __iter__,
# never a subclass's (a learner's list subclass cannot choose what crosses).
_CONTAINERS: tuple[tuple[Any, str], ...] = ((list, "l"), (tuple, "t"), (frozenset, "f"), (set, "s"))
_PLAIN = frozenset({bool, int, float, str})  # sent as they are
_AS_THEY_ARE = frozenset({type(None), *_PLAIN})  # exactly these classes cross as JSON has them, both ways
# Exactly these classes (never a subclass), by far the most sent: encoded at once, tagged as above.
_EXACT: dict[type, str] = {**dict(_CONTAINERS), dict: "d"}
_COLLECTIONS: dict[str, Any] = {"t": tuple, "s": set, "f": frozenset}  # "l" is the list decoded
_MAPPING = object()  # `Peer.known`'s route for a MappingProxyType
_Scalar = TypeVar("_Scalar", int, bool, str)


class PeerGone(CheckStopped):
    """The other side closed its end (it died, or left): the call cannot be answered."""


class Attached(Exception):
    """An exception answering a request, with a value the answer carries all the same (the
    copy a `restartcall` made before the call in it raised)."""

    def __init__(self, inner: BaseException, attached: Any) -> None:
        super().__init__()
        self.inner, self.attached = inner, attached


class ProtocolError(CheckStopped):
    """The other side sent something off the protocol. A CheckStopped, like a timeout: no
    check may turn it into a verdict of its own; the grader stops the cell instead."""


# --- frames -----------------------------------------------------------------------------


def _unserializable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _json_reader() -> Callable[[str], Any]:
    """What `json.loads` does with a frame's text, its C scanner made once: a frame as this
    module writes it (no white space around it) is read in one call; anything else goes
    through json.loads itself, so what is refused, and why, is json's answer as before."""
    make = getattr(json.scanner, "c_make_scanner", None)
    if make is None:
        return json.loads
    scan = make(json.JSONDecoder())

    def read(text: str) -> Any:
        try:
            value, end = scan(text, 0)
        except StopIteration:
            end = -1
        return value if end == len(text) else json.loads(text)

    return read


# What `json.dumps(message, ensure_ascii=False, separators=(",", ":"))` writes, its encoder made
# once. No circular check: a frame is a tree `Peer.encode` just built.
_write_json = writer(ensure_ascii=False, allow_nan=True, default=_unserializable)
_read_json = _json_reader()


def encoded_frame(message: Any) -> bytes:
    """`message` as it goes on the wire: its length, then its JSON."""
    data = _write_json(message).encode("utf-8", "surrogatepass")
    if len(data) > FRAME_LIMIT:
        raise ProtocolError(f"a message of {len(data)} bytes is over the limit")
    return HEADER.pack(len(data)) + data


def send_frame(sock: Any, message: Any) -> None:
    sock.sendall(encoded_frame(message))


def _exactly(sock: Any, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise PeerGone()
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _size(header: bytes | bytearray) -> int:
    (size,) = HEADER.unpack_from(header)
    if size > FRAME_LIMIT:
        raise ProtocolError(f"a message of {size} bytes is over the limit")
    return int(size)


def _parsed(data: bytes | bytearray | memoryview) -> Any:
    try:
        return _read_json(str(data, "utf-8", "surrogatepass"))
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"not JSON ({type(exc).__name__})") from None


def recv_frame(sock: Any) -> Any:
    """One frame, read exactly (header, then body): for the control sockets, where frames are few."""
    try:
        size = _size(_exactly(sock, HEADER.size))
    except OSError as exc:
        raise PeerGone() from exc
    return _parsed(_exactly(sock, size))


class Frames:
    """The frames arriving on one socket, read in chunks: a frame usually arrives with its
    header in one read, so a message costs one system call, not two (a check's calls are
    thousands of small messages). What arrived after a frame waits here for the next
    `read`, so this reader must be the socket's only one."""

    CHUNK = 1 << 16

    def __init__(self, sock: Any, before_waiting: Callable[[], None] | None = None) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.before_waiting = before_waiting  # called before a read that may wait for the other side

    def complete(self) -> bool:
        """A whole frame is here already: the next `read` will not wait."""
        return len(self.buffer) >= HEADER.size and len(self.buffer) >= HEADER.size + _size(self.buffer)

    def read(self) -> Any:
        buffer = self.buffer
        if not buffer:  # the usual case: one read brings one whole frame, parsed from what came
            chunk = self._chunk(self.CHUNK)
            if len(chunk) >= HEADER.size and len(chunk) == HEADER.size + _size(chunk):
                return _parsed(memoryview(chunk)[HEADER.size :])
            buffer += chunk
        if len(buffer) < HEADER.size:
            buffer = self._holding(HEADER.size)
        end = HEADER.size + _size(buffer)
        if len(buffer) < end:
            buffer = self._holding(end)
        if len(buffer) == end:  # the usual case: the frame alone (its text decoded without a copy)
            frame: bytes | bytearray = buffer
            self.buffer = bytearray()
            return _parsed(memoryview(frame)[HEADER.size :])
        frame = buffer[HEADER.size : end]
        del buffer[:end]
        return _parsed(frame)

    def _holding(self, size: int) -> bytearray:
        while len(self.buffer) < size:
            self.buffer += self._chunk(max(self.CHUNK, size - len(self.buffer)))
        return self.buffer

    def _chunk(self, most: int) -> bytes:
        """What the socket has (waiting for something if it has nothing yet)."""
        if self.before_waiting is not None:
            self.before_waiting()
        try:
            chunk: bytes = self.sock.recv(most)
        except OSError as exc:
            raise PeerGone() from exc
        if not chunk:
            raise PeerGone()
        return chunk


# --- the kit's classes, by name -----------------------------------------------------------


def kit_name(klass: type) -> list[str] | None:
    """[module, qualname] of a public class of the kit, else None. Asked of every value that
    crosses, so a kit class's answer is kept (the kit's classes are few and never renamed)."""
    module, qualname = getattr(klass, "__module__", ""), getattr(klass, "__qualname__", "")
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    if module != KIT and not module.startswith(KIT + "."):
        return None
    known = _KIT_NAMES.get((module, qualname))
    if known is None:
        public = not any(
            part.startswith("_") or part == "<locals>" for part in (*module.split("."), *qualname.split("."))
        )
        known = _KIT_NAMES[module, qualname] = [module, qualname] if public else []
    return known or None


_KIT_NAMES: dict[tuple[str, str], list[str]] = {}  # (module, qualname) -> kit_name's answer ([] for None)


def kit_class(name: Any) -> type:
    """The class a [module, qualname] names: only a public class of a kit module already loaded.
    A name once found is kept (a check decodes thousands of records of a few classes)."""
    if not (isinstance(name, list) and len(name) == 2 and type(name[0]) is str and type(name[1]) is str):
        raise ProtocolError("a class name that is not [module, qualname]")
    known = _KIT_CLASSES.get((name[0], name[1]))
    if known is None:
        known = _KIT_CLASSES[name[0], name[1]] = _find_kit_class(name)
    return known


_KIT_CLASSES: dict[tuple[str, str], type] = {}  # only names that were found: a refusal is asked again


def _find_kit_class(name: list[str]) -> type:
    module = _kit_module(name[0])
    found: Any = module
    if module is not None:
        for part in name[1].split("."):
            found = None if part.startswith("_") else vars(found).get(part)
            if not (isinstance(found, type) or found is None):
                found = None
            if found is None:
                break
    if not isinstance(found, type) or kit_name(found) != name:
        raise ProtocolError(f"{name[0]}.{name[1]} is not a class of the kit")
    return found


def _kit_module(name: str) -> ModuleType | None:
    """The kit's public module `name`, imported now if this process has not loaded it yet (the
    grader loads only what the key's labs use; a learner may still hand over any kit class)."""
    parts = name.split(".")
    if parts[0] != KIT or not all(part.isidentifier() and not part.startswith("_") for part in parts):
        return None
    if name not in sys.modules:
        try:
            importlib.import_module(name)
        except ImportError:  # not a module of the kit (or an optional part without its dependency)
            return None
    return sys.modules.get(name)


def kit_base(klass: type, kind: type) -> type | None:
    """The first public kit class in `klass`'s MRO that is a `kind` (a learner's subclass of a kit
    record or error crosses as the kit's class)."""
    for base in klass.__mro__:
        if issubclass(base, kind) and kit_name(base) is not None:
            return base
    return None


def _is_record(klass: type) -> bool:
    return dataclasses.is_dataclass(klass) and kit_name(klass) is not None


@dataclasses.dataclass(frozen=True)
class _Layout:
    """How a record of one class crosses: as the kit record class `base` (its first in the
    MRO), by the fields its constructor takes."""

    base: type
    name: list[str]
    fields: tuple[str, ...]
    names: frozenset[str]  # the fields, as a set (a record's decoding asks if it has others)


_LAYOUTS: dict[type, _Layout | None] = {}  # the kit's classes only: a learner's class is looked at each time


def _layout(klass: type) -> _Layout | None:
    if klass in _LAYOUTS:
        return _LAYOUTS[klass]
    base = next((b for b in klass.__mro__ if _is_record(b)), None)
    found = None
    if base is not None:
        name = kit_name(base)
        assert name is not None
        names = tuple(field.name for field in dataclasses.fields(base) if field.init)
        found = _Layout(base, name, names, frozenset(names))
    if kit_name(klass) is not None:
        _LAYOUTS[klass] = found
    return found


def exact(value: Any) -> Any:
    """A scalar as its exact built-in type (what a subclass holds, not what its methods say)."""
    if isinstance(value, bool):
        return bool(int.__int__(value))
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    return value


# --- one side of the wire -------------------------------------------------------------------


class Handle:
    """An object of the other side, seen from this one: calls and public attributes cross."""

    __slots__ = ("_peer", "_id", "_methods", "_fixed", "__weakref__")
    _peer: Peer

    def __init__(
        self, peer: Peer, number: int, methods: frozenset[str] = frozenset(), fixed: dict[str, Any] | None = None
    ) -> None:
        object.__setattr__(self, "_peer", peer)
        object.__setattr__(self, "_id", number)
        object.__setattr__(self, "_methods", methods)
        object.__setattr__(self, "_fixed", fixed or {})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._fixed:  # said with the handle: its class promises it never changes
            return self._fixed[name]
        if name in self._methods:  # `handle.method(...)`: one request when called
            return _Method(self, name)
        return self._peer.request(["get", self._id, name])

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} objects handed across cannot be changed here ({name})")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._peer.call(self._id, args, kwargs)

    def __iter__(self) -> Any:
        return iter(self._peer.request(["op", self._id, "iter", None]))

    def __len__(self) -> int:
        return self._peer.scalar(["op", self._id, "len", None], int)

    def __bool__(self) -> bool:
        return self._peer.scalar(["op", self._id, "bool", None], bool)

    def __str__(self) -> str:
        return self._peer.scalar(["op", self._id, "str", None], str)

    def __repr__(self) -> str:
        return self._peer.scalar(["op", self._id, "repr", None], str)

    def __getitem__(self, key: Any) -> Any:
        return self._peer.request(["op", self._id, "getitem", self._peer.encode(key)])

    def __contains__(self, key: Any) -> bool:
        return self._peer.scalar(["op", self._id, "contains", self._peer.encode(key)], bool)

    def __enter__(self) -> Any:  # `with shop.transaction():` on an object of the other side
        return self._peer.request(["op", self._id, "enter", None])

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        said = None if exc is None else [exact(type(exc).__name__), _text(exc)]
        return self._peer.scalar(["op", self._id, "exit", said], bool)

    def __eq__(self, other: Any) -> bool:  # the same object of the other side, nothing else
        return isinstance(other, Handle) and other._peer is self._peer and other._id == self._id

    def __deepcopy__(self, memo: Any) -> Any:  # a copy would need the other side's object copied
        raise TypeError("an object of the other side cannot be copied here")

    def __hash__(self) -> int:
        return hash((id(self._peer), self._id))


class _Method:
    """`handle.name` where the owner said `name` is a method of the object's class: calling it
    is one request (`callattr`: the owner looks the attribute up and calls it); any other use
    reads the attribute first, as a plain `get` would have. A name the owner lied about gives
    the owner's side nothing it could not have sent by value or by handle."""

    __slots__ = ("_owner", "_name", "_value")
    _value: Any  # the attribute, once read

    def __init__(self, owner: Handle, name: str) -> None:
        self._owner, self._name = owner, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._owner._peer.call(self._owner._id, args, kwargs, self._name)

    def _resolved(self) -> Any:
        try:
            return self._value
        except AttributeError:
            self._value = self._owner._peer.request(["get", self._owner._id, self._name])
            return self._value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._resolved(), name)

    def __bool__(self) -> bool:
        return bool(self._resolved())

    def __eq__(self, other: Any) -> bool:
        return bool(self._resolved() == (other._resolved() if isinstance(other, _Method) else other))

    def __hash__(self) -> int:
        return hash(self._resolved())

    def __str__(self) -> str:
        return str(self._resolved())

    def __repr__(self) -> str:
        return repr(self._resolved())


_METHODS: dict[type, list[str]] = {}


def _public_methods(klass: type) -> list[str]:
    """The public plain functions `klass` and its bases define (what `obj.name(...)` calls)."""
    found = _METHODS.get(klass)
    if found is None:
        names: set[str] = set()
        for base in klass.__mro__:
            with contextlib.suppress(TypeError):
                names.update(
                    name
                    for name, value in vars(base).items()
                    if type(name) is str and not name.startswith("_") and type(value) is FunctionType
                )
        found = _METHODS[klass] = sorted(names)[:METHOD_LIMIT]
    return found


class Peer(abc.ABC):
    """One side of a connection: its exported objects by number, the other side's handles,
    and the request loop that serves nested requests while it waits for its answer.
    `public_only`: the other side may read only public attributes (the judge's rule).
    Abstract: each side says how the other side's exceptions are raised on it (`rebuild`)."""

    def __init__(self, sock: Any, *, public_only: bool) -> None:
        self.sock = sock
        self.frames = Frames(sock, before_waiting=self.flush)  # the socket's only reader
        self.held: list[bytes] = []  # frames sent but not yet written (`send`)
        self.ahead: list[Callable[[list[Any] | None], None]] = []  # takers of replies to requests sent ahead
        self.public_only = public_only
        self.exports: dict[int, Any] = {}
        self.numbers: dict[int, int] = {}  # id(object) -> its number
        self.handles: dict[int, Handle] = {}
        self.thrown: dict[int, BaseException] = {}  # exceptions this side raised into the other, by number
        self.attached: Any = None  # what the other side attached to the exception it answered with last
        self.depth = 0
        # How a value of each kit class (and MappingProxyType) was encoded the first time: the
        # same every time (decided by its class alone), so later ones skip `encode`'s questions.
        self.known: dict[type, Any] = {}

    # values ---------------------------------------------------------------------------
    def export(self, value: Any) -> dict[str, Any]:
        number = self.numbers.get(id(value))
        if number is None or self.exports.get(number) is not value:
            number = len(self.exports) + 1
            self.exports[number] = value
            self.numbers[id(value)] = number
            methods = [] if isinstance(value, type) else _public_methods(type(value))
            fixed = self.fixed(value)
            if fixed:  # said once, as the methods are: the other side keeps its handle by number
                return {"h": [number, _type_name(value), methods, fixed]}
            if methods:
                return {"h": [number, _type_name(value), methods]}
        return {"h": [number, _type_name(value)]}

    def fixed(self, value: Any) -> dict[str, Any]:
        """Attributes of `value` sent with its handle, read once (none on this side)."""
        return {}

    def encode(self, value: Any, depth: int = 0) -> Any:
        if depth > DEPTH_LIMIT:
            raise ValueError("a value nested too deep to send")
        kind = type(value)
        if kind in _AS_THEY_ARE:
            return value
        tag = _EXACT.get(kind)
        if tag is not None:
            if tag == "d":
                return {"d": self._pairs(value.items(), depth + 1)}
            return {tag: self._items(value, depth + 1)}
        known = self.known.get(kind)
        if known is not None:
            if known is _MAPPING:
                return {"d": self._pairs(value.items(), depth + 1)}
            if type(known) is _Layout:
                return {"r": [known.name, self._fields(value, known, depth + 1)]}
            return {"e": [known, self.encode(exact(value.value), depth + 1)]}
        if isinstance(value, _Method):
            value = value._resolved()
        if isinstance(value, Handle) and value._peer is self:
            return {"y": value._id}  # back to its owner
        if isinstance(value, enum.Enum) and kit_name(type(value)) is not None:
            if kind is type(value):
                self.known[kind] = kit_name(kind)
            return {"e": [kit_name(type(value)), self.encode(exact(value.value), depth + 1)]}
        if isinstance(value, (bool, int, float, str)):
            return exact(value)
        if isinstance(value, tuple) and hasattr(type(value), "_fields"):
            base = next((b for b in type(value).__mro__ if hasattr(b, "_fields") and kit_name(b)), None)
            if base is not None:  # one of the kit's named tuples (a lease): rebuilt as one
                return {"n": [kit_name(base), [self.encode(item, depth + 1) for item in tuple.__iter__(value)]]}
        for kind, tag in _CONTAINERS:
            if isinstance(value, kind) and not dataclasses.is_dataclass(value):
                return {tag: [self.encode(item, depth + 1) for item in kind.__iter__(value)]}
        if isinstance(value, (dict, MappingProxyType)):
            if type(value) is MappingProxyType:
                self.known[MappingProxyType] = _MAPPING
            items = dict.items(value) if isinstance(value, dict) else value.items()
            return {"d": [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in items]}
        record = self._record(value, depth)
        return record if record is not None else self.export(value)

    # `encode`'s loops, asking nothing of a plain item (what `encode` would hand back as it is);
    # `depth` is the items' own: past the limit, `encode` refuses the first.
    def _items(self, values: Any, depth: int) -> list[Any]:
        if depth > DEPTH_LIMIT:
            return [self.encode(item, depth) for item in values]
        plain, encode = _AS_THEY_ARE, self.encode
        return [item if type(item) in plain else encode(item, depth) for item in values]

    def _pairs(self, items: Any, depth: int) -> list[Any]:
        if depth > DEPTH_LIMIT:
            return [[self.encode(k, depth), self.encode(v, depth)] for k, v in items]
        plain, encode = _AS_THEY_ARE, self.encode
        return [
            [k if type(k) in plain else encode(k, depth), v if type(v) in plain else encode(v, depth)] for k, v in items
        ]

    def _fields(self, value: Any, layout: _Layout, depth: int) -> dict[str, Any]:
        if depth > DEPTH_LIMIT:
            return {name: self.encode(object.__getattribute__(value, name), depth) for name in layout.fields}
        plain, encode, read = _AS_THEY_ARE, self.encode, object.__getattribute__
        fields = {}
        for name in layout.fields:
            item = read(value, name)
            fields[name] = item if type(item) in plain else encode(item, depth)
        return fields

    def _record(self, value: Any, depth: int) -> dict[str, Any] | None:
        if isinstance(value, type) or not dataclasses.is_dataclass(value):
            return None
        layout = _layout(type(value))
        if layout is None or not self.sends_record(value, layout.base):
            return None
        fields = self._fields(value, layout, depth + 1)
        if kit_name(type(value)) is not None:  # a kit class: its values cross the same way (`sends_record`)
            self.known[type(value)] = layout
        return {"r": [layout.name, fields]}

    def sends_record(self, value: Any, base: type) -> bool:
        """Is `value`, of the kit record class `base` or a subclass, sent by value? Decided by
        its class alone (`encode` keeps the answer for each kit class)."""
        return True

    def decode(self, value: Any, depth: int = 0) -> Any:
        if depth > DEPTH_LIMIT:
            raise ProtocolError("a value nested too deep")
        if type(value) in _AS_THEY_ARE:
            return value
        if type(value) is not dict or len(value) != 1:
            raise ProtocolError("a value of no known shape")
        ((tag, body),) = value.items()
        try:
            return self._decode(tag, body, depth)
        except ProtocolError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            raise ProtocolError(f"a value that does not decode ({type(exc).__name__})") from None

    def _decode(self, tag: str, body: Any, depth: int) -> Any:
        # A plain item (None, bool, int, float, str) is what `decode` would hand back: taken as
        # it is, unless past the depth limit, where `decode` refuses it.
        plain, decode, inner = _AS_THEY_ARE, self.decode, depth + 1
        if tag == "l" or tag in _COLLECTIONS:
            if type(body) is not list:
                raise ProtocolError("a collection that is not a list")
            if inner > DEPTH_LIMIT:
                items = [decode(item, inner) for item in body]
            else:
                items = [item if type(item) in plain else decode(item, inner) for item in body]
            return items if tag == "l" else _COLLECTIONS[tag](items)
        if tag == "d":
            if inner > DEPTH_LIMIT:
                return {decode(k, inner): decode(v, inner) for k, v in body}
            return {
                (k if type(k) in plain else decode(k, inner)): (v if type(v) in plain else decode(v, inner))
                for k, v in body
            }
        if tag == "r":
            klass = kit_class(body[0])
            layout = _layout(klass)
            if layout is None or layout.base is not klass or type(body[1]) is not dict:
                raise ProtocolError("a record that is not one of the kit's")
            if not layout.names.issuperset(body[1]):
                raise ProtocolError("a record with fields its class does not have")
            if inner > DEPTH_LIMIT:
                return klass(**{name: decode(v, inner) for name, v in body[1].items()})
            return klass(**{name: v if type(v) in plain else decode(v, inner) for name, v in body[1].items()})
        if tag == "y":
            if type(body) is not int or body not in self.exports:
                raise ProtocolError("a handle this side never gave out")
            return self.exports[body]
        if tag == "h":
            number, name, *extra = body
            if type(number) is not int or len(extra) > 2:
                raise ProtocolError("a handle that is not a number")
            said = extra[0] if extra else []
            if not (type(said) is list and len(said) <= METHOD_LIMIT and all(type(m) is str for m in said)):
                raise ProtocolError("a handle's methods that are not a list of names")
            fixed = extra[1] if len(extra) == 2 else {}
            if not (type(fixed) is dict and len(fixed) <= METHOD_LIMIT and all(_public(k) for k in fixed)):
                raise ProtocolError("a handle's fixed attributes that are not public names")
            if number in self.handles:  # said once: a second saying changes nothing
                return self.handles[number]
            values = {str(k): self.decode(v, depth + 1) for k, v in fixed.items()}
            return self.handle(number, name, frozenset(said), values)
        if tag == "e":
            klass = kit_class(body[0])
            if not issubclass(klass, enum.Enum):
                raise ProtocolError("an enum that is not one of the kit's")
            return klass(self.decode(body[1], depth + 1))
        if tag == "n":
            klass = kit_class(body[0])
            if not (issubclass(klass, tuple) and hasattr(klass, "_fields")) or type(body[1]) is not list:
                raise ProtocolError("a named tuple that is not one of the kit's")
            return klass(*[self.decode(v, depth + 1) for v in body[1]])
        raise ProtocolError(f"a value tagged {tag!r}")

    def handle(
        self, number: int, name: Any, methods: frozenset[str] = frozenset(), fixed: dict[str, Any] | None = None
    ) -> Handle:
        found = self.handles.get(number)
        if found is None:
            found = self.handles[number] = _handle_class(name)(self, number, methods, fixed)
        return found

    # requests -------------------------------------------------------------------------
    def call(self, number: int, args: tuple[Any, ...], kwargs: dict[str, Any], method: str | None = None) -> Any:
        """Call the other side's object (or its attribute `method`, in the same request). A
        list, set or dict argument crosses by value and comes back as the call left it (copied
        into the caller's own), so a callee that fills the caller's container works as it
        would in one process."""
        return self.call_with(["call", number] if method is None else ["callattr", number, method], args, kwargs)

    def call_with(self, head: list[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A request `head` + [args, kwargs], the container arguments copied back (see `call`)."""
        mutable = _containers(args, kwargs)
        plain, encode = _AS_THEY_ARE, self.encode
        arguments = [
            [a if type(a) in plain else encode(a) for a in args],
            {str(k): v if type(v) in plain else encode(v) for k, v in kwargs.items()},
        ]
        return self.request([*head, *arguments], mutable)

    def scalar(self, message: list[Any], kind: type[_Scalar]) -> _Scalar:
        value = self.request(message)
        if type(value) is not kind:
            raise ProtocolError(f"{message[2]} answered with something other than {kind.__name__}")
        found: _Scalar = value
        return found

    # the wire: one write per turn -------------------------------------------------------
    def send(self, message: list[Any], *, hold: bool = False) -> None:
        """Send a frame, with every frame held before it, in one write. `hold`: keep it back
        until this side sends again or waits to read (`Frames.before_waiting`): a reply
        written while the next request is already here would only wake the other side to
        wait again, each wake-up a hand-over of the core the two share."""
        self.held.append(encoded_frame(message))
        if not hold:
            self.flush()

    def flush(self) -> None:
        if self.held:
            data = b"".join(self.held)
            self.held.clear()
            self.sock.sendall(data)

    def send_ahead(self, message: list[Any], taker: Callable[[list[Any] | None], None]) -> None:
        """A request whose answer nothing waits for now: it goes in the same write as the next
        request, is answered first (the other side serves in order), and `taker` gets its
        reply frame as it came, or None if the request it went with was given up."""
        self.send(message, hold=True)
        self.ahead.append(taker)

    def request(self, message: list[Any], mutable: dict[str, Any] | None = None) -> Any:
        self.depth += 1
        try:
            self.send(message)
            while True:
                reply = self.frames.read()
                if type(reply) is not list or not reply or type(reply[0]) is not str:
                    raise ProtocolError("a message that is not [kind, ...]")
                if self.ahead:  # the answer to a request sent ahead of this one comes first
                    self.ahead.pop(0)(reply)
                    continue
                if reply[0] in ("ret", "exc") and len(reply) in (2, 3, 4):
                    changed = reply[2] if len(reply) >= 3 else []
                    if changed or type(changed) is not list:
                        self._copy_back(mutable or {}, changed)
                    if reply[0] == "ret":
                        value = reply[1]
                        return value if type(value) in _AS_THEY_ARE else self.decode(value)
                    self.attached = self.decode(reply[3]) if len(reply) == 4 else None
                    raise self.exception(reply[1])
                self.serve(reply)
        finally:
            self.depth -= 1
            if not self.depth:
                self.thrown.clear()
                given_up, self.ahead = self.ahead, []
                for taker in given_up:
                    taker(None)

    def _copy_back(self, mutable: dict[str, Any], changed: Any) -> None:
        if type(changed) is not list:
            raise ProtocolError("changed arguments that are not a list")
        for pair in changed:
            if not (type(pair) is list and len(pair) == 2 and pair[0] in mutable):
                raise ProtocolError("a changed argument the call was not given")
            original, now = mutable[pair[0]], self.decode(pair[1])
            if type(now) is not type(original):
                raise ProtocolError("a changed argument of another type")
            if isinstance(original, list):
                original[:] = now
            else:
                original.clear()
                original.update(now)

    def serve(self, message: list[Any]) -> None:
        """Answer one request of the other side."""
        given: dict[str, Any] = {}
        try:
            value = self.answer(message, given)
            reply = ["ret", value if type(value) in _AS_THEY_ARE else self.encode(value), self._changed(given)]
        except (PeerGone, ProtocolError):
            raise
        except BaseException as exc:  # noqa: BLE001 - the other side gets it, as its exception
            attached = None
            if isinstance(exc, Attached):
                attached, exc = exc.attached, exc.inner
            if isinstance(exc, (PeerGone, ProtocolError)) or self.keeps(exc):
                raise exc from None
            try:
                changed = self._changed(given)
            except (TypeError, ValueError, RecursionError):
                changed = []
            answered = ["exc", self.describe(exc), changed]
            self.reply(answered if attached is None else [*answered, self.encode(attached)])
            return
        self.reply(reply)

    def reply(self, frame: list[Any]) -> None:
        """Answer the request just served: held back while the next one is already here (`send`)."""
        self.send(frame, hold=self.frames.complete())

    def _changed(self, given: dict[str, Any]) -> list[Any]:
        return [[key, self.encode(value)] for key, value in given.items()] if given else []

    def keeps(self, exc: BaseException) -> bool:
        """An exception this side does not send across (its own timer, say)."""
        return False

    def answer(self, message: list[Any], given: dict[str, Any]) -> Any:
        kind = message[0]
        if kind == "op" and len(message) == 4:
            return self.op(self.target(message[1]), message[2], message[3])
        if kind == "get" and len(message) == 3 and type(message[2]) is str:
            return self.attribute(self.target(message[1]), message[2])
        if kind == "call" and len(message) == 4:
            return self._invoke(self.target(message[1]), message[2], message[3], given)
        if kind == "callattr" and len(message) == 5 and type(message[2]) is str:
            method = self.attribute(self.target(message[1]), message[2])
            self.check_handed(method)  # what a `get` would not have handed over is not called either
            return self._invoke(method, message[3], message[4], given)
        raise ProtocolError(f"a request of kind {kind!r}")

    def attribute(self, target: Any, name: str) -> Any:
        if self.public_only and name.startswith("_"):
            raise AttributeError(f"{name}: only public attributes cross")
        return getattr(target, name)

    def check_handed(self, value: Any) -> None:
        """Raise if `value` may not be handed to the other side (the judge's rule); this
        side hands over anything."""
        return None

    def _invoke(self, target: Any, args: Any, kwargs: Any, given: dict[str, Any]) -> Any:
        if type(args) is not list or type(kwargs) is not dict:
            raise ProtocolError("a call's arguments of no known shape")
        plain, decode = _AS_THEY_ARE, self.decode
        args = [a if type(a) in plain else decode(a) for a in args]
        kwargs = {str(k): v if type(v) in plain else decode(v) for k, v in kwargs.items()}
        given.update(_containers(args, kwargs))
        return self.invoke(target, args, kwargs)

    def invoke(self, target: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        return target(*args, **kwargs)

    def target(self, number: Any) -> Any:
        if type(number) is not int or number not in self.exports:
            raise ProtocolError("a handle this side never gave out")
        return self.exports[number]

    def op(self, target: Any, name: Any, argument: Any) -> Any:
        if name == "iter":
            items = []
            for item in target:
                items.append(item)
                if len(items) > ITER_LIMIT:
                    raise ValueError(f"more than {ITER_LIMIT} items")
            return items
        if name == "len":
            return exact(len(target))
        if name == "bool":
            return bool(target)
        if name in ("str", "repr"):
            return exact((str if name == "str" else repr)(target))
        if name == "getitem":
            return target[self.decode(argument)]
        if name == "contains":
            return bool(self.decode(argument) in target)
        if name == "enter":
            return target.__enter__()
        if name == "exit":
            if argument is None:
                return bool(target.__exit__(None, None, None))
            if not (type(argument) is list and len(argument) == 2 and all(type(a) is str for a in argument)):
                raise ProtocolError("an exit of no known shape")
            raised = self.stand_in(argument[0], argument[1])
            return bool(target.__exit__(type(raised), raised, None))
        raise ProtocolError(f"an operation {name!r}")

    # exceptions ---------------------------------------------------------------------------
    def describe(self, exc: BaseException) -> dict[str, Any]:
        """An exception as it crosses: the kit's by class and fields, a built-in one by name."""
        number = len(self.thrown) + 1
        self.thrown[number] = exc
        base = kit_base(type(exc), _kit_error())
        text = _text(exc)
        described: dict[str, Any] = {
            "n": number,
            "type": _type_name(exc),
            "msg": text,
            "base": not isinstance(exc, Exception),
        }
        if base is not None:
            fields = getattr(exc, "fields", {})
            try:
                described["kit"] = [kit_name(base), {str(k): self.encode(v) for k, v in dict(fields).items()}]
            except (TypeError, ValueError, RecursionError):
                pass
        elif type(exc) is getattr(builtins, type(exc).__name__, None):
            described["builtin"] = type(exc).__name__
        return described

    def exception(self, described: Any) -> BaseException:
        """The other side's exception, as this side raises it."""
        if type(described) is not dict:
            raise ProtocolError("an exception of no known shape")
        if described.get("halt") is True:  # the judge: this call's process died, and its code goes on calling
            from shopops_lab.explore import haunt

            haunt()
        return self.rebuild(described)

    @abc.abstractmethod
    def rebuild(self, described: dict[str, Any]) -> BaseException:
        """The other side's exception (as `describe` sent it), as this side raises it."""

    def stand_in(self, name: str, message: str) -> BaseException:
        """The other side's exception leaving a `with` block of this side's object."""
        return RuntimeError(f"{name}: {message}")


def _containers(args: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The list, set and dict arguments of a call, by position ("0") or name ("=name"): what
    crosses back after it (`Peer.call`)."""
    found: dict[str, Any] = {}
    for n, a in enumerate(args):
        if type(a) in MUTABLE:
            found[str(n)] = a
    for k, v in kwargs.items():
        if type(v) in MUTABLE:
            found[f"={k}"] = v
    return found


def _text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a learner's __str__ that fails
        text = ""
    shown: str = exact(text) if isinstance(text, str) else ""
    return shown[:4000]


def _public(name: Any) -> bool:
    return type(name) is str and name.isidentifier() and not name.startswith("_")


def _type_name(value: Any) -> str:
    name = getattr(type(value), "__name__", "object")
    return exact(name) if isinstance(name, str) else "object"


def _kit_error() -> type:
    from shopops_lab.errors import ShopOpsError

    return ShopOpsError


_HANDLE_CLASSES: dict[str, type] = {}


def _handle_class(name: Any) -> type:
    """A Handle class named as the object's own class, so a message can say what it is."""
    name = name if isinstance(name, str) and name.isidentifier() and len(name) <= 80 else "object"
    found = _HANDLE_CLASSES.get(name)
    if found is None:
        found = _HANDLE_CLASSES[name] = type(name, (Handle,), {"__slots__": ()})
    return found
