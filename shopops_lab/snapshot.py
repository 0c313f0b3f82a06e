"""What a world of the schedule explorer looks like at one moment, for the step-through viewer.

The explorer plays a schedule again and asks `take` after each step, and inside a learner
call after each kit call that took effect (`shopops_lab.explore.replay(..., look=take)`).
Every lab's world is its own class, so `take` reads what the kit knows how to show from the
objects a world holds: its `FakeClock` (the time), a queue (its items: state, attempts,
token, holder, lease end), channel adapters (every message that reached a customer), the
records the check keeps (its dicts, lists and sets of plain data), and, per worker, what the
world keeps about it under the worker's name (its lease and token, its state) and whether
its process just died or is inside your code. Reading never changes the world and never
raises: a value it cannot show is named by its type.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from shopops_lab.clock import FakeClock
from shopops_lab.effects import ChannelAdapter, Contact, ContactLedger
from shopops_lab.viz.stepper import Moment, Stepper, Table
from shopops_lab.worker.queue import InMemoryQueue, Lease

__all__ = ["take", "walked"]

WORKER = re.compile(r"^[A-Z]\d{0,2}$")  # W1, W7, C2, R: the explorer's actors that run code
_SKIP = frozenset({"run", "problem", "workers", "facade", "processed", "apply", "handling", "foreign", "made"})
_WIDTH = 90  # a value's text is cut here
RECORDS = "the check's records"


def take(world: Any, run: Any, *, number: int, step: Any, inside: str | None, problem: str | None) -> Moment:
    """The moment after step `number` (`step`, the explorer's record of it; 0 and None before
    the first), or inside its learner call right after the kit call `inside` took effect."""
    try:
        return _moment(world, run, number, step, inside, problem)
    except Exception as exc:  # noqa: BLE001 - a picture must not end the check that shows it
        words = step.said if step is not None else "the world as the schedule starts"
        return Moment(step=number, words=f"{words} (its state could not be read: {type(exc).__name__})")


def walked(again: Callable[..., Any], title: str) -> Stepper:
    """The schedule `again` plays (an explorer's `replay` waiting for its `look`), walked. A
    record of the check's that never changes (the set-up: which email each item carries) is
    shown before the first step only, so each step shows what moves."""
    moments = list(again(look=take).moments)
    rows = [{row for table in m.tables if table.title == RECORDS for row in table.rows} for m in moments]
    fixed = set.intersection(*rows) if len(rows) > 1 else set()
    for n, moment in enumerate(moments[1:], 1):
        tables = tuple(
            dataclasses.replace(t, rows=tuple(r for r in t.rows if r not in fixed)) if t.title == RECORDS else t
            for t in moment.tables
        )
        moments[n] = dataclasses.replace(moment, tables=tuple(t for t in tables if t.rows or t.title != RECORDS))
    return Stepper(title=title, moments=tuple(moments), steps=max((m.step for m in moments), default=0))


def _moment(world: Any, run: Any, number: int, step: Any, inside: str | None, problem: str | None) -> Moment:
    state = _attributes(world)
    actor = getattr(run, "current_actor", "")
    if step is None and inside is None:
        words = "the world as the schedule starts"
    elif inside is not None:
        words = f"inside {actor}'s call, {inside} took effect"
    else:
        words = step.said
    clocks = [v for v in state.values() if isinstance(v, FakeClock)]
    now = clocks[0].now() if clocks else state.get("now")
    clock = f"t={now:g}" if isinstance(now, (int, float)) and not isinstance(now, bool) else ""
    tables = [_queue(q) for q in state.values() if isinstance(q, InMemoryQueue)]
    effects = [line for value in state.values() for line in _contacts(value)]
    names = _workers(state, run, step)
    keyed = {k for k, v in state.items() if isinstance(v, Mapping) and v and set(v) <= set(names)}
    workers = tuple((name, _worker(name, state, keyed, run, step, inside, actor)) for name in names)
    records = [
        (key, _text(value))
        for key, value in sorted(state.items())
        if key not in keyed and key not in _SKIP and isinstance(value, (dict, list, set, frozenset)) and value
    ]
    if records:
        tables.append(Table(title=RECORDS, columns=("record", "value"), rows=tuple(records)))
    return Moment(
        step=number,
        words=words,
        clock=clock,
        workers=workers,
        tables=tuple(tables),
        effects=tuple(effects),
        problem=problem,
        inside=inside is not None,
    )


def _attributes(world: Any) -> dict[str, Any]:
    """The world's attributes (a leading _ dropped), read without calling anything; a kit
    object it holds (a recovery `Env`) has its own read too, as `env.effects`."""
    found: dict[str, Any] = {}
    for key, value in _public(world):
        found.setdefault(key, value)
        if key not in _SKIP and _kit_object(value):
            for inner, held in _public(value):
                found.setdefault(f"{key}.{inner}", held)
    return dict(sorted(found.items()))


def _public(value: Any) -> list[tuple[str, Any]]:
    pairs = getattr(value, "__dict__", {}).items()
    return [(k.lstrip("_"), v) for k, v in pairs if not k.startswith("__") and not callable(v)]


def _kit_object(value: Any) -> bool:
    """An object with state of its own to read, one level down: the kit's (a recovery `Env`) or
    the learner's (a store of the learner's class), but not one `take` shows itself."""
    shown = (FakeClock, InMemoryQueue, ChannelAdapter, ContactLedger, Lease, type)
    return (
        type(value).__module__ != "builtins"
        and isinstance(getattr(value, "__dict__", None), dict)
        and not isinstance(value, shown)
        and not dataclasses.is_dataclass(value)
    )


def _workers(state: Mapping[str, Any], run: Any, step: Any) -> list[str]:
    names = {name for name in getattr(run, "_copies", {}) if WORKER.match(name)}
    for value in state.values():
        if isinstance(value, Mapping):
            names.update(k for k in value if isinstance(k, str) and WORKER.match(k))
        elif isinstance(value, tuple) and value and all(isinstance(v, str) and WORKER.match(v) for v in value):
            names.update(value)
    if step is not None and WORKER.match(step.actor):
        names.add(step.actor)
    return sorted(names, key=lambda n: (n[0], int(n[1:] or 0)))


def _worker(
    name: str,
    state: Mapping[str, Any],
    keyed: set[str],
    run: Any,
    step: Any,
    inside: str | None,
    actor: str,
) -> str:
    if step is not None and inside is None and step.crashed and step.actor == name:
        return "crashed: its process died; nothing it kept in memory survives, and it starts afresh"
    parts = []
    if inside is not None and name == actor:
        parts.append("inside its call (your code is running)")
    for key in sorted(keyed, key=lambda k: (k != "state", k)):
        if name in state[key]:
            value = state[key][name]
            parts.append(_text(value) if key == "state" else f"{key}: {_text(value)}")
    if not parts:
        parts.append("running" if name in getattr(run, "_copies", {}) else "not started")
    return "; ".join(parts)


def _queue(queue: InMemoryQueue) -> Table:
    rows = tuple(
        (
            item.id,
            item.case_id,
            item.state.value,
            str(item.attempts),
            str(item.token),
            item.worker_id or "",
            "" if item.lease_expires_at is None else f"t={item.lease_expires_at:g}",
        )
        for item in queue.items()
    )
    return Table(
        title="the queue's items",
        columns=("item", "case", "state", "attempts", "token", "held by", "lease until"),
        rows=rows,
    )


def _contacts(value: Any) -> list[str]:
    ledger = value.ledger if isinstance(value, ChannelAdapter) else value
    if not isinstance(ledger, ContactLedger):
        return []
    return [_contact(contact) for contact in ledger.contacts()]


def _contact(c: Contact) -> str:
    by = f" by {c.worker_id}" if c.worker_id else ""
    return f"{c.message_id}: {c.channel} to {c.to} (case {c.case_id}, key {c.idem_key}){by} at t={c.time:g}"


def _text(value: Any) -> str:
    """A short, stable text for a value: no memory addresses, sets sorted, long text cut."""
    text = _plain(value, 0)
    return text if len(text) <= _WIDTH else text[: _WIDTH - 1] + "…"


def _plain(value: Any, depth: int) -> str:
    if isinstance(value, Lease):
        return f"lease on {value.item_id} ({value.case_id}), token {value.token}, until t={value.expires_at:g}"
    if isinstance(value, Contact):
        return value.message_id
    if isinstance(value, enum.Enum):
        return str(value.value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value if isinstance(value, str) else repr(value)
    if depth > 2:
        return "…"
    if isinstance(value, Mapping):
        pairs = _sorted(value.items())
        return "{" + ", ".join(f"{_plain(k, depth + 1)}: {_plain(v, depth + 1)}" for k, v in pairs) + "}"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(_plain(v, depth + 1) for v in value)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_plain(v, depth + 1) for v in value) + "]"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [f for f in dataclasses.fields(value) if f.repr][:3]
        inner = ", ".join(f"{f.name}={_plain(getattr(value, f.name), depth + 1)}" for f in fields)
        return f"{type(value).__name__}({inner})"
    return f"a {type(value).__name__}"


def _sorted(pairs: Iterable[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    items = list(pairs)
    try:
        return sorted(items, key=lambda kv: kv[0])
    except TypeError:
        return items
