"""The whole worker's interface: what `async def work(lease, kit)` may call, and how a judge
runs it one kit call at a time.

A worker for one case is a coroutine. Every call it makes on its `Kit` is awaited
(`ok = await kit.heartbeat()`): the call is handed to whoever drives the worker, the worker
waits there, and goes on with the answer. So a driver on a single thread can hold twenty
workers at once, each waiting inside a different kit call (the simulator), stop one between
any two calls (the explorer: a crash, a stalled lease, another worker going first), or run
one straight through in a real process (the chaos judge); all of them hand in the same
`Kit`, and the learner's code cannot tell them apart. No threads: it runs in Pyodide too.

Why a coroutine and not a plain function: a plain function can only be paused by running
the other workers *inside* its kit calls, and twenty workers nested that way finish in the
order of the stack, not of the clock. A generator (`yield from kit.heartbeat()`) pauses the
same way, but `await` is how Python code waits for I/O, so that is the shape used here.

A driver `step`s the coroutine: it sends the answer to the call the worker waits on (a
`Reply`: a value, or a `Refusal` that is raised at the `await`) and gets the next `KitCall`
back, or `Finished`. The kit itself holds nothing: every call is data, answered by the
judge's own systems (`shopops_lab.worker.backend`), so nothing the worker can reach by
introspection leads to what a check judges.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from shopops_lab.errors import (
    BadArgumentError,
    DraftError,
    IdempotencyConflictError,
    KitMisuseError,
    LeaseExpiredError,
    LeaseSettledError,
    ModelTimeoutError,
    StaleTokenError,
)
from shopops_lab.payloads import itself

__all__ = ["CALLS", "Finished", "Kit", "KitCall", "Raised", "Refusal", "Reply", "step", "steps"]

# The kit's calls, in the order a delivery usually makes them.
CALLS = ("load", "next_chunk", "heartbeat", "save", "send", "lookup", "ack")

# What a kit call may raise into the worker, by name (a judge in another process sends the name).
_REFUSALS: dict[str, type[Exception]] = {
    kind.__name__: kind
    for kind in (
        StaleTokenError,
        LeaseExpiredError,
        LeaseSettledError,
        IdempotencyConflictError,
        BadArgumentError,
        DraftError,
        ModelTimeoutError,
    )
}

_unawaited: list[tuple[KitCall, Any]] = []  # calls made and not yet awaited, with the frame that made each


@dataclass(frozen=True, slots=True)
class KitCall:
    """One call of the worker's on its kit: `name` and the arguments. Awaiting it hands it to
    the driver, and the `await` returns the driver's answer (or raises its refusal)."""

    __deepcopy__ = itself

    name: str
    args: tuple[Any, ...] = ()

    def __await__(self) -> Generator[KitCall, Any, Any]:
        if isinstance(sys.exc_info()[1], GeneratorExit):  # a dead worker's `finally`: nothing reaches the kit
            raise GeneratorExit
        for n, (made, _) in enumerate(_unawaited):
            if made is self:
                del _unawaited[n]
                break
        return (yield self)

    @property
    def words(self) -> str:
        """How the worker wrote it: `kit.send('O-1001:email:1', ...)`."""
        shown = ", ".join(repr(a) if not isinstance(a, str) or len(a) < 24 else repr(a[:20] + "...") for a in self.args)
        return f"kit.{self.name}({shown})"

    def __bool__(self) -> bool:
        raise KitMisuseError(
            problem=f"{self.words} was used as a value without `await`, so the call never happened",
            fix=f"write `await {self.words}`",
        )


@dataclass(frozen=True, slots=True)
class Refusal:
    """A kit error to raise at the worker's `await`: the error's class name and its fields."""

    kind: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, error: Exception) -> Refusal:
        return cls(type(error).__name__, dict(getattr(error, "fields", {})))

    def error(self) -> Exception:
        return _REFUSALS[self.kind](**self.fields)


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to the call a worker waits on: `value`, or `refused` (raised there)."""

    value: Any = None
    refused: Refusal | None = None


@dataclass(frozen=True, slots=True)
class Finished:
    """The worker's coroutine ended: it returned (whatever it returned; judges ask the kit)."""


@dataclass(frozen=True, slots=True)
class Raised:
    """What the worker raised at a step, by class name and message (`steps` tells it as data)."""

    kind: str
    text: str


REFUSABLE = tuple(_REFUSALS.values())  # what a judge turns into a Refusal instead of raising


@dataclass(frozen=True, slots=True)
class Kit:
    """What `async def work(lease, kit)` is handed: the seven calls of a delivery, each awaited.

    * `await kit.load()`: the case's checkpoint as the last `save` left it (a dict), or None;
    * `await kit.next_chunk()`: the model's next piece of the draft (a str), None once the draft
      is complete; the model is slow, so this is where a worker spends its time;
    * `await kit.heartbeat()`: True, the lease is extended; False, the case is no longer yours;
    * `await kit.save(checkpoint)`: store a dict of plain values as the case's checkpoint,
      fenced by the lease's token (StaleTokenError once another worker took the case over);
    * `await kit.send(key, body)`: email the case's customer under idempotency key `key`; a
      `SendResult` whose status is OK (with the message id), FAILED (nothing went out) or
      UNKNOWN (no answer came back: it may or may not have gone out);
    * `await kit.lookup(key)`: what the provider delivered under `key`: OK with the message id,
      or FAILED (nothing);
    * `await kit.ack()`: the case is done (LeaseExpiredError, StaleTokenError or
      LeaseSettledError when the lease is no longer yours).

    A worker that raises gives the delivery back: the queue hands it out again, and dead-letters
    it after its last allowed attempt, with the error as the reason.
    """

    __deepcopy__ = itself

    def load(self) -> KitCall:
        return _made(KitCall("load"))

    def next_chunk(self) -> KitCall:
        return _made(KitCall("next_chunk"))

    def heartbeat(self) -> KitCall:
        return _made(KitCall("heartbeat"))

    def save(self, checkpoint: Any) -> KitCall:
        return _made(KitCall("save", (checkpoint,)))

    def send(self, key: Any, body: Any = "") -> KitCall:
        return _made(KitCall("send", (key, body)))

    def lookup(self, key: Any) -> KitCall:
        return _made(KitCall("lookup", (key,)))

    def ack(self) -> KitCall:
        return _made(KitCall("ack"))

    def __repr__(self) -> str:
        return "<kit: load, next_chunk, heartbeat, save, send, lookup, ack (each awaited)>"


def _made(call: KitCall) -> KitCall:
    """Note `call` as made and not yet awaited, with where the worker made it (its frame's
    function and line, read only if it is never awaited)."""
    frame = sys._getframe(2)
    _unawaited.append((call, (frame.f_code.co_name, frame.f_lineno)))
    return call


def step(coroutine: Any, reply: Reply) -> KitCall | Finished:
    """Run the worker on from the call it waits on (`reply` answers it; the first step's reply
    starts it) to its next kit call, which is returned; `Finished` once it ends. What the
    worker raises comes out of here as it was raised."""
    if not inspect.iscoroutine(coroutine):
        raise not_a_coroutine(coroutine)
    _unawaited.clear()
    try:
        if reply.refused is not None:
            call = coroutine.throw(reply.refused.error())
        else:
            call = coroutine.send(reply.value)
    except StopIteration:
        _awaited_all(coroutine)
        return Finished()
    _awaited_all(coroutine)
    if type(call) is not KitCall:
        coroutine.close()
        raise KitMisuseError(
            problem=f"your worker awaited {_a(call)}, which is not a call of its kit (the judges run a worker "
            "one kit call at a time, on their own clock)",
            fix="await only the kit's calls; to wait for the model, await kit.next_chunk()",
        )
    return call


def steps(coroutine: Any, replies: list[Reply]) -> list[KitCall | Finished | Raised]:
    """`step` with each of `replies` in turn (what a delivery was told before, told again): what
    each step gave back, as data; what the worker raised ends the list, as a `Raised`."""
    found: list[KitCall | Finished | Raised] = []
    for reply in replies:
        try:
            found.append(step(coroutine, reply))
        except Exception as error:  # noqa: BLE001 - the worker's, told as data
            found.append(Raised(type(error).__name__, str(error)))
            break
    return found


def not_a_coroutine(returned: Any) -> KitMisuseError:
    """The refusal of a `work` whose call returned `returned`, not a coroutine."""
    return KitMisuseError(
        problem=f"work(lease, kit) returned {_a(returned)} instead of a coroutine, so no kit call of it can be driven",
        fix="define it as `async def work(lease, kit):` and `await` every kit call",
    )


def _awaited_all(coroutine: Any) -> None:
    if _unawaited:
        call, (function, line) = _unawaited[0]
        _unawaited.clear()
        coroutine.close()
        raise KitMisuseError(
            problem=f"{call.words} (in {function}, line {line}) was never awaited, so it never happened",
            fix=f"write `await {call.words}`",
        )


def _a(value: Any) -> str:
    kind = type(value).__name__
    return "None" if value is None else f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"
