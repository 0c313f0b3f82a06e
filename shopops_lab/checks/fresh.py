"""A learner's answer as a freshly started process would have it (in this process).

A crash is a process death: whatever the learner's code kept in memory (module-level
dicts, lists and sets, class attributes, closure cells, function attributes, default
arguments) is gone, and the code starts again from its source. Re-running the notebook's
cells is not possible here, so `fresh_copy` does the equivalent: it rebuilds the answer's
function (or class) and every function and class of the learner's it reaches (through the
global names its code uses, its closures, defaults and bases) bound to a new globals dict,
and deep-copies every other mutable value reached that way. The original is never run by
a check, so each copy starts from the state the values had when the check began.

What the learner's code did not reach by name (the kit, modules, builtins) is shared, as
a restarted worker would import it again. `memory(copy)` is a hashable picture of the
copy's own mutable state, so the schedule explorer can tell two processes apart.
"""

from __future__ import annotations

import copy
import dis
import functools
import sys
import weakref
from collections.abc import Hashable, Sequence
from types import BuiltinFunctionType, CellType, CodeType, FunctionType, MethodType, ModuleType
from typing import Any

_ATOMIC = (type(None), bool, int, float, complex, str, bytes, range, ModuleType, BuiltinFunctionType, CodeType)
_SKIP_CLASS_KEYS = frozenset({"__dict__", "__weakref__"})
_MEMORIES: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()
_LIMIT = 6
_SCALARS = (type(None), bool, int, float, str, bytes)  # pictured by value
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made at run time (by a class statement), not a C static type


def fresh_copy(answer: Any, learners: Any) -> Any:
    """`answer` rebuilt with fresh memory. `learners(filename)` says which code is the learner's."""
    rebuilder = _Rebuilder(learners)
    try:
        fresh = rebuilder.value(answer)
        rebuilder.drain()
    except Exception:  # noqa: BLE001 - an answer we cannot rebuild runs as it is (its memory then survives)
        return answer
    try:
        _MEMORIES[fresh] = rebuilder.mutable
    except TypeError:
        pass
    return fresh


class NotCopyable(Exception):
    """The values asked for cannot be twinned exactly (an object that cannot be copied, or
    one of the other side that is not to be shared): the explorer replays instead."""


def twins(
    values: Sequence[Any], learners: Any, *, swap: Sequence[tuple[Any, Any]] = (), foreign: tuple[type, ...] = ()
) -> list[Any]:
    """Copies of `values` (restarted copies of the answer, objects they made) taken together,
    their memory as it is NOW (what `fresh_copy` does from the state a check began with):
    what they share, their twins share; nothing is shared with the originals but what a
    restart shares too (the kit, modules). An instance of `foreign` (an object of the other
    side of the grader's wire) is never copied: where the values hold one, their twins hold
    its counterpart given in `swap` ((original, counterpart) pairs), else they are refused.
    Each twin's `memory` pictures its own copies of what the original's pictured."""
    rebuilder = _Rebuilder(learners, strict=foreign)
    for original, counterpart in swap:
        rebuilder.memo[id(original)] = counterpart
    try:
        found = [rebuilder.value(value) for value in values]
        rebuilder.drain()
        for value, twin in zip(values, found, strict=True):
            held = _MEMORIES.get(value) if _weakable(value) else None
            if held is not None:  # what the copy no longer reaches (a function's attributes as first copied) as it was
                _MEMORIES[twin] = [rebuilder.memo.get(id(item), item) for item in held]
    except (NotCopyable, TypeError) as exc:
        raise NotCopyable(f"{type(exc).__name__}: {exc}") from None
    return found


def memory(fresh: Any) -> Hashable:
    """The copy's own mutable values, as a hashable picture (None when unknown)."""
    values = _MEMORIES.get(fresh) if _weakable(fresh) else None
    return None if values is None else canonical(values)


def memory_text(fresh: Any) -> str | None:
    """`repr(memory(fresh))`, built directly (`canonical_text`): what the learner's process
    hashes for the explorer's digests."""
    values = _MEMORIES.get(fresh) if _weakable(fresh) else None
    return None if values is None else canonical_text(values)


def _weakable(value: Any) -> bool:
    try:
        weakref.ref(value)
    except TypeError:
        return False
    return True


class _Rebuilder:
    """`strict`: twins are being taken (see `twins`): a value that cannot be copied, or an
    instance of one of these classes not swapped, is refused instead of shared."""

    def __init__(self, learners: Any, *, strict: tuple[type, ...] | None = None) -> None:
        self.learners = learners
        self.strict = strict
        self.memo: dict[int, Any] = {}  # shared with copy.deepcopy
        self.globals: dict[int, dict[str, Any]] = {}
        self.pending: list[tuple[dict[str, Any], dict[str, Any], str]] = []
        self.mutable: list[Any] = []

    def value(self, value: Any) -> Any:
        if id(value) in self.memo:
            return self.memo[id(value)]
        if self.strict is not None and isinstance(value, self.strict):
            raise NotCopyable(f"a {type(value).__name__} of the other side, with no counterpart")
        if isinstance(value, FunctionType):
            return self.function(value) if self.learners(value.__code__.co_filename) else value
        if isinstance(value, MethodType):
            return MethodType(self.value(value.__func__), self.value(value.__self__))
        if isinstance(value, type):
            return self.cls(value) if self._own(value) else value
        if isinstance(value, _ATOMIC) or callable(value) and not hasattr(value, "__dict__"):
            return value
        if isinstance(value, (staticmethod, classmethod)):
            return type(value)(self.value(value.__func__))
        if isinstance(value, property):
            return property(self.value(value.fget), self.value(value.fset), self.value(value.fdel), value.__doc__)
        self._prebuild(value, 0)
        try:
            fresh = copy.deepcopy(value, self.memo)
        except Exception as exc:  # noqa: BLE001 - a value that cannot be copied stays shared (a twin is refused)
            if self.strict is not None:
                raise NotCopyable(f"{type(value).__name__} cannot be copied ({type(exc).__name__})") from None
            return value
        self.mutable.append(fresh)
        return fresh

    def _prebuild(self, value: Any, depth: int) -> None:
        """Rebuild the learner's functions and classes held inside `value` first, so the
        deep copy (which copies neither) finds their fresh versions in the shared memo."""
        if depth > _LIMIT or isinstance(value, _ATOMIC):
            return
        if self.strict is not None and isinstance(value, self.strict) and id(value) not in self.memo:
            raise NotCopyable(f"a {type(value).__name__} of the other side, with no counterpart")
        if isinstance(value, (FunctionType, type)):
            self.value(value)
            return
        if isinstance(value, dict):
            inner = [*value.keys(), *value.values()]
        elif isinstance(value, (list, tuple, set, frozenset)):
            inner = list(value)
        else:
            inner = list(getattr(value, "__dict__", {}).values())
        for item in inner:
            self._prebuild(item, depth + 1)

    def _own(self, cls: type) -> bool:
        """A class the learner wrote: one of its functions is theirs, or its module is. A class
        written in C (`itertools.cycle`, `io.StringIO`, imported by name) never is: it is
        importable, so a restarted process has the same one."""
        if not cls.__flags__ & _HEAPTYPE or cls.__module__ in sys.builtin_module_names:
            return False
        if any(
            isinstance(f, FunctionType)
            and f.__code__.co_filename != "<string>"  # a dataclass's own methods
            and self.learners(f.__code__.co_filename)
            for f in vars(cls).values()
        ):
            return True
        if cls.__module__ == "builtins":
            return False
        file = getattr(sys.modules.get(cls.__module__), "__file__", None)
        return file is None or self.learners(file)

    def function(self, fn: FunctionType) -> FunctionType:
        fresh_globals = self._globals(fn.__globals__)
        closure = None
        if fn.__closure__ is not None:
            closure = tuple(CellType() for _ in fn.__closure__)
        fresh = FunctionType(fn.__code__, fresh_globals, fn.__name__, None, closure)
        self.memo[id(fn)] = fresh
        for old, new in zip(fn.__closure__ or (), closure or ()):
            try:
                new.cell_contents = self.value(old.cell_contents)
            except ValueError:  # an empty cell stays empty
                pass
        fresh.__defaults__ = self.value(fn.__defaults__)
        fresh.__kwdefaults__ = self.value(fn.__kwdefaults__)
        fresh.__dict__.update(self.value(dict(fn.__dict__)))
        fresh.__qualname__, fresh.__module__, fresh.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
        for name in _names(fn.__code__):
            if name in fn.__globals__:
                self.pending.append((fresh_globals, fn.__globals__, name))
        return fresh

    def cls(self, cls: type) -> type:
        members = {k: v for k, v in vars(cls).items() if k not in _SKIP_CLASS_KEYS}
        slots = members.get("__slots__", ())
        slots = (slots,) if isinstance(slots, str) else tuple(slots)
        for name in slots:
            members.pop(name, None)
        bases = tuple(self.value(base) for base in cls.__bases__)
        fresh = type(cls)(
            cls.__name__,
            bases,
            {k: members.pop(k) for k in ("__slots__", "__module__", "__qualname__") if k in members},
        )
        self.memo[id(cls)] = fresh
        for name, member in members.items():
            setattr(fresh, name, self.value(member))
        return fresh

    def _globals(self, original: dict[str, Any]) -> dict[str, Any]:
        if id(original) not in self.globals:
            self.globals[id(original)] = dict(original)
        return self.globals[id(original)]

    def drain(self) -> None:
        while self.pending:
            fresh_globals, original, name = self.pending.pop()
            value = original[name]
            if fresh_globals.get(name) is value:
                fresh_globals[name] = self.value(value)


# The instructions that read or write a module-level name (a class body's plain names
# fall back to the module's too). `co_names` would also hold every attribute name.
_GLOBAL_OPS = frozenset(
    {
        "LOAD_GLOBAL",
        "STORE_GLOBAL",
        "DELETE_GLOBAL",
        "LOAD_NAME",
        "STORE_NAME",
        "DELETE_NAME",
        "LOAD_FROM_DICT_OR_GLOBALS",
    }
)


@functools.cache
def _names(code: CodeType) -> frozenset[str]:
    """The global names `code` and the code nested in it use: only those are rebuilt for a
    copy, so an attribute that shares a global's name (`env.claim` beside a `claim`
    function) costs nothing. Kept per code object: a check restarts the same code often."""
    names = {str(op.argval) for op in dis.get_instructions(code) if op.opname in _GLOBAL_OPS}
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _names(const)
    return frozenset(names)


def canonical(value: Any, depth: int = 0, seen: frozenset[int] = frozenset()) -> Hashable:
    """A hashable, order-free picture of `value`'s contents (sets and dicts sorted, objects
    by their attributes, event logs and clocks by type only), for telling states apart."""
    if isinstance(value, _SCALARS):
        return (type(value).__name__, value)
    if depth > _LIMIT or id(value) in seen:
        return ("...", type(value).__name__)
    seen = seen | {id(value)}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(canonical(v, depth + 1, seen) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted((canonical(v, depth + 1, seen) for v in value), key=repr)))
    if isinstance(value, dict):
        return (
            "dict",
            tuple(
                sorted(
                    ((canonical(k, depth + 1, seen), canonical(v, depth + 1, seen)) for k, v in value.items()), key=repr
                )
            ),
        )
    if isinstance(value, (FunctionType, type, ModuleType)) or type(value).__name__ in ("EventLog", "FakeClock"):
        return (type(value).__name__, getattr(value, "__qualname__", ""))
    return (type(value).__qualname__, canonical(_fields(value), depth + 1, seen))


def _fields(value: Any) -> dict[str, Any]:
    fields = getattr(value, "__dict__", None)
    if fields is None:
        slots = [s for c in type(value).__mro__ for s in getattr(c, "__slots__", ()) if isinstance(s, str)]
        fields = {s: getattr(value, s) for s in slots if hasattr(value, s)}
    return dict(fields)


_TEXT_ATOMS = {kind: repr(kind.__name__) for kind in _SCALARS}


def canonical_text(value: Any) -> str:
    """`repr(canonical(value))`, built as text directly: the same string (a test holds them
    equal), without the nested tuples and the `repr` of each item that sorting them takes.
    The learner's process hashes it for every digest the explorer draws."""
    return _text(value, 0, set())


def _text(value: Any, depth: int, seen: set[int]) -> str:
    atom = _TEXT_ATOMS.get(type(value))
    if atom is not None:
        return f"({atom}, {value!r})"
    if isinstance(value, _SCALARS):  # a subclass: named by its base's test
        return repr(canonical(value))
    if depth > _LIMIT or id(value) in seen:
        return f"('...', {type(value).__name__!r})"
    seen.add(id(value))
    try:
        if isinstance(value, (list, tuple)):
            items = [_text(v, depth + 1, seen) for v in value]
            return f"({type(value).__name__!r}, {_tuple(items)})"
        if isinstance(value, (set, frozenset)):
            return f"('set', {_tuple(sorted(_text(v, depth + 1, seen) for v in value))})"
        if isinstance(value, dict):
            pairs = [f"({_text(k, depth + 1, seen)}, {_text(v, depth + 1, seen)})" for k, v in value.items()]
            return f"('dict', {_tuple(sorted(pairs))})"
        if isinstance(value, (FunctionType, type, ModuleType)) or type(value).__name__ in ("EventLog", "FakeClock"):
            return repr((type(value).__name__, getattr(value, "__qualname__", "")))
        return f"({type(value).__qualname__!r}, {_text(_fields(value), depth + 1, seen)})"
    finally:
        seen.discard(id(value))


def _tuple(items: list[str]) -> str:
    """The repr of a tuple whose items' reprs are `items`."""
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
