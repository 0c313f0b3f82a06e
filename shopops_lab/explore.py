"""The schedule explorer: a check searches every schedule in a small, stated scope instead
of sampling a few seeded ones, and shows the shortest schedule that breaks a promise.

A `Scenario` builds a fresh `World` for each schedule. The world offers `Move`s: harness
steps (claim, expire a lease, ack, deliver) and learner-call steps, in which the learner's
function runs whole, as ONE atomic step. Inside a learner call every kit call made through
a facade the world handed it is a fault point: the facade asks the `Run` (`enter` before
the call, `leave` after it), and the schedule may crash the worker's process there (before
the call: the request is lost; after it: the reply is lost) or make the call fail. A crash
abandons the learner call (facades refuse everything after it, so no `except` or `finally`
of the learner's has an effect) and the worker's next step runs `restart(answer)`: nothing
kept in the process's memory survives. Each worker process has its own copy of the answer.

`explore` enumerates every schedule within the scenario's `Bound` breadth first, by
stateless re-execution (a fresh world and fresh answers for every schedule, so nothing
leaks from one schedule into the next); a world may offer `clone(run)`, and the explorer
then goes on from a copy instead of replaying the prefix: the world copies its own state
and, through `run.twin(...)`, the learner's (its processes' copies of the answer and the
objects they made, copied in their process as they are now; only across the grader's
process boundary, where the wire keeps the check's objects and the learner's apart). There,
too, a crash inside a learner call needs no learner: the process's memory dies with it, so
what the crashed call left behind is the clean call's kit calls up to the crash point, and a
world whose facades record them (`Run.facade`, `Run.recorded`) has them replayed on the copy
instead of running the learner's code again; where each recorded call is nothing but one kit
call between its fault points (`recorded(..., gate=True)`), a crash after one and a crash before
the next replay the same calls, so that world is played once and counted for both. Two
schedules that reach the same state (the world's fingerprint, every process's memory, the
budget spent, the step count) are merged: steps of different workers that commute are
explored once, while the count of schedules covered stays exact. After every step the
world's invariants are asked (`broken`), and at the end of a schedule its final promise
(`finished`). The first schedule found broken is a shortest one, written in words
(`Event.words`), replayable with `replay`, and drawn as a space-time diagram
(`shopops_lab.viz.spacetime`). Played again with a `look` at the world at every moment (before
the first step, after each, and inside a learner call after each kit call that took effect), it
is walked step by step (`Counterexample.stepper`: `shopops_lab.snapshot`, `viz.stepper`); each
one found is left with `refusals`, where the face that shows the check's verdict finds it.

How a check uses it (labs 01, 04, 06 are worked examples)::

    class _World:                                  # one fresh world per schedule
        def __init__(self, run):                   # run.answer("W1"): W1's process's copy of the answer
            ...
        def moves(self):                           # [Move("W1 handle", "W1", self._handle, peer="queue"),
            ...                                    #  Move("W1 crash", "W1", crash=True, cost="crash"), ...]
        def _handle(self, run):                    # a learner call: one atomic step
            called = run.call(run.answer(run.current_actor), lease, facade)
            return "W1 handles item-0001: ..."     # the sentence for the trace
        # fingerprint(), broken(), finished(), crashed(actor)

    # inside a facade method the learner calls:  failing = run.enter("send"); ...effect...; run.leave("send")
    scenario = Scenario("name", Bound(words="2 workers, 1 expiry, a crash anywhere",
                                      budget={"crash": 1, "expiry": 1}), start=_World)
    found = explore(scenario, answer)               # found.summary: "checked all 1,234 schedules of ..."
    refuse(found, 'labNN.replay(answer, "{schedule}")')   # raises Wrong with the shortest schedule
    replay(scenario, answer, "W1 acquire · W1 handle (crash after send)")   # one schedule, seed-free
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import enum
import functools
import re
import sys
import types
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from shopops_lab import refusals
from shopops_lab.checks.base import ForeignAnswer, Wrong, attempt, learners_code, memory, restart, twins
from shopops_lab.checks.fresh import NotCopyable
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import collector_paused
from shopops_lab.payloads import itself

__all__ = [
    "Bound",
    "Called",
    "Counterexample",
    "Event",
    "Exploration",
    "Fault",
    "FaultKind",
    "Move",
    "Run",
    "Replayed",
    "Scenario",
    "Step",
    "World",
    "copied",
    "explore",
    "parse",
    "refuse",
    "replay",
]

SEPARATOR = " · "


class FaultKind(StrEnum):
    """What a schedule does to one kit call inside a learner call."""

    LOST_REQUEST = "crash before"  # the process dies before the call: it never happens
    LOST_REPLY = "crash after"  # the call takes effect, then the process dies
    FAIL = "fails"  # the call raises (the facade's own error) before it takes effect; the process lives
    TIMEOUT = "times out"  # the call takes effect, then raises (its reply is lost to a timeout); the process lives

    @property
    def budget(self) -> str:
        return "fail" if self in _RAISES else "crash"


_RAISES = (FaultKind.FAIL, FaultKind.TIMEOUT)  # the faults a facade raises as its own error (where it `can_fail`)


CRASHES = (FaultKind.LOST_REQUEST, FaultKind.LOST_REPLY)


@dataclass(frozen=True, order=True)
class Fault:
    """`kind` at the `nth` (1-based) kit call named `point` in one learner call."""

    kind: FaultKind
    point: str
    nth: int = 1

    @property
    def words(self) -> str:
        where = self.point if self.nth == 1 else f"{self.point} {self.nth}"
        return f"{where} {self.kind.value}" if self.kind in _RAISES else f"{self.kind.value} {where}"


@dataclass(frozen=True)
class Event:
    """One step of a schedule: the move's name and the fault it suffers, if any."""

    move: str
    fault: Fault | None = None

    @property
    def words(self) -> str:
        return self.move if self.fault is None else f"{self.move} ({self.fault.words})"


@dataclass(frozen=True)
class Move:
    """A step a world offers now. `act(run)` performs it and returns the sentence that
    narrates it. `peer` is whom it talks to (a lane of the diagram); `cost` the budget it
    spends ("expiry", "crash"); `crash=True` makes it the actor's process dying: right away,
    or, with an `act`, once the act is done (a call that took effect, its reply lost with the
    process)."""

    name: str
    actor: str
    act: Callable[[Run], str] | None = None
    peer: str | None = None
    cost: str | None = None
    crash: bool = False


class World(Protocol):
    """One fresh world of a scenario, for one schedule."""

    def moves(self) -> Sequence[Move]: ...  # enabled now, in a stable order, names unique
    def fingerprint(self) -> Hashable: ...  # everything the future depends on, but the processes' memory
    # Optional: `alike`, actors whose names the learner's code cannot see, and
    # `actor_print(actor)`, the fingerprint's part that names one; see `_state`.
    def broken(self) -> str | None: ...  # an invariant broken now, said decisive fact first
    def finished(self) -> str | None: ...  # asked when no move is left: nothing lost?
    def crashed(self, actor: str) -> str | None: ...  # the actor's process died; what follows, in words


@dataclass(frozen=True)
class Bound:
    """The scope searched: `words` for the learner ("2 workers, 1 expiry, a crash
    anywhere"), `budget` per kind ("crash", "fail", or a move's `cost`), `faults` the
    kinds injected at kit calls."""

    words: str
    budget: Mapping[str, int] = field(default_factory=dict)
    faults: tuple[FaultKind, ...] = CRASHES
    max_steps: int = 60


@dataclass(frozen=True)
class Scenario:
    """A name, the bound, and `start(run)`, which builds a fresh world (using
    `run.answer(actor)` for each process's copy of the learner's code)."""

    name: str
    bound: Bound
    start: Callable[[Run], World]


class _Crash(BaseException):
    """The process died inside a learner call. A BaseException, so `except Exception`
    in the learner's code lets it through; even a bare `except` cannot undo it (the
    run stays dead and every later kit call is refused)."""


@dataclass(frozen=True)
class Called:
    """What a learner call did: returned `value`, or raised `error`."""

    value: Any = None
    error: Exception | None = None


@dataclass(frozen=True)
class Step:
    """One step as it happened, for the words and the diagram."""

    event: Event
    actor: str
    peer: str | None
    said: str
    crashed: bool
    problem: str | None = None


@dataclass(frozen=True)
class _KitCall:
    """A call the learner made on a facade of its step: `path` names the facade, then the
    attributes to the callable; its values are data alone (`_data`)."""

    path: tuple[str, ...]
    args: list[Any]
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class _Handed:
    """A facade of the step, passed back by the learner (a handler it was handed)."""

    name: str


class Run:
    """One schedule being played: the processes' copies of the answer, and the gate
    the facades ask at every kit call."""

    def __init__(self, answer: Any, *, parent: Run | None = None) -> None:
        self._answer = answer
        self._copies: dict[str, Any] = {}
        self._parent = parent  # the run this one is a copy of, until its copies are twinned
        self._fault: Fault | None = None
        self._seen: dict[str, int] = {}
        self.points: list[tuple[str, bool]] = []  # the kit calls of the current learner call, in order
        # For each of `points`: the index in `script` of the recorded call that is nothing but
        # that kit call (`recorded(..., gate=True)`), else None.
        self.marks: list[int | None] = []
        self._gate = False  # the recorded call being made is nothing but one kit call
        self._dead = False
        self._in_call = False
        self.current_actor = ""  # whose step is being played
        self.fired = False  # did the step's fault happen?
        self.replaying = False  # a schedule asked for by name (`replay`), not one the search found
        self._haunting = 0  # kit calls the current learner call made after its process died
        # Across the process boundary: the current learner call's kit calls on the facades a
        # world handed it (`facade`, `recorded`), while each can be replayed; None otherwise.
        self._records = isinstance(answer, ForeignAnswer)
        self._facades: dict[str, Any] = {}
        self._inside = False  # in a recorded call: what it calls in turn is the kit's
        self.script: list[_KitCall] | None = None
        self._stand_in: tuple[_KitCall, ...] | None = None
        self.looked: Callable[[str], None] | None = None  # a walk's eye inside a learner call (`replay`'s look)

    def answer(self, actor: str) -> Any:
        """`actor`'s process's copy of the learner's code (fresh at its start and after a crash)."""
        if actor not in self._copies:
            self._copies[actor] = restart(self._answer)
        return self._copies[actor]

    def fresh(self) -> Any:
        """A fresh copy of the answer for a run the world needs before its schedule starts (an
        earlier job, say): no process of the schedule, and no fault point."""
        return restart(self._answer)

    def twin(self, *held: Any, swap: Mapping[Any, Any] | None = None) -> list[Any]:
        """In a world's `clone(run)`: this run's copies of the answer become twins of the
        copied run's (their memory as it is now), taken together with `held`, the objects
        of the learner's the world keeps (a store made from the learner's class); returns
        the twins of `held`. `swap`: the world's own objects the learner's may hold (a clock
        handed to the store), each to its counterpart in the copy. Raises `NotCopyable`
        where that cannot be done (then the explorer replays)."""
        parent, self._parent = self._parent, None
        if parent is None:
            raise NotCopyable("this run's copies are taken already")
        actors = sorted(parent._copies)
        if not actors and not held:
            return []
        found = twins(self._answer, [*(parent._copies[a] for a in actors), *held], list((swap or {}).items()))
        self._copies = dict(zip(actors, found))
        return found[len(actors) :]

    def rebuilt(self) -> None:
        """In a world's `clone(run)`, instead of `twin`: this run's copies of the answer start
        fresh, and the world brings each to the copied run's state itself, by playing to it
        again what its process was told since it started (a coroutine that waits inside a
        call cannot be copied, but it can be brought back to where it waits)."""
        if self._parent is None:
            raise NotCopyable("this run's copies are taken already")
        self._parent = None

    def facade(self, **handed: Any) -> None:
        """A world hands the learner call about to run these facades, by name, and each
        records every call of the learner's that changes the world or may crash (`recorded`):
        a copy of this step that crashes then replays them instead of the learner's code."""
        self._facades = handed
        self.script = [] if self._records else None
        self.marks = [None] * len(self.marks)  # what was recorded before is not in this script

    def recorded(
        self, path: tuple[str, ...], args: tuple[Any, ...], kwargs: Mapping[str, Any], *, gate: bool = False
    ) -> contextlib.AbstractContextManager[None]:
        """Around a facade's method: the learner called `<facade>.<attribute>...(*args,
        **kwargs)`, `path` naming the facade, then the attributes. What the method itself
        calls (the kit's queue calling the handler it was given) is not the learner's, and
        is not recorded again. Where a value is not plain data (an object of the learner's,
        or of the check's other than a facade), the call cannot be replayed without the
        learner, and this step's crashes are played by running the learner again. (A plain
        context object, not a generator: a search records thousands of kit calls.) `gate`: the
        method is nothing but one kit call between its two fault points (`enter` first,
        `leave` last, nothing with an effect before or after), so a crash after it and a crash
        before the next such call leave the same world (`_children` plays that world once)."""
        if self.script is None or not self._in_call or self._inside:
            return _NOT_RECORDED
        handed = {id(facade): _Handed(name) for name, facade in self._facades.items()}
        try:  # a facade passed back goes by its name
            self.script.append(
                _KitCall(
                    path,
                    [_data(handed.get(id(value), value)) for value in args],
                    {key: _data(handed.get(id(value), value)) for key, value in kwargs.items()},
                )
            )
        except _NotData:
            self.script = None
        self._gate = gate
        return _Inside(self)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Called:
        """Run a learner call as one step. Raises `_Crash` out of the move's act if the
        schedule crashed the process inside it (whatever the learner's code did then)."""
        self._in_call, self._haunting = True, 0
        try:
            if self._stand_in is not None:  # a crashed copy of a recorded call: its kit calls, no learner
                self._replay(self._stand_in)
                value, error = None, None
            else:
                value, error = attempt(fn, *args, **kwargs)
        except _Crash as crash:  # across the grader's boundary the judge counted the dead call's requests
            value, error = None, None
            self._haunting = max(self._haunting, getattr(crash, "haunted", 0))
        finally:
            self._in_call = False
            if self._haunting > HAUNTING_LIMIT:
                _exorcise()
        if self._haunting > HAUNTING_LIMIT:
            fault = self._fault.words if self._fault is not None else "a crash"
            raise Wrong(
                f"your code kept running after its process died: in the step {self.current_actor} was playing, "
                f"the schedule crashed the process ({fault}), and your code went on calling the kit "
                f"({self._haunting} more calls, each refused) instead of stopping. Something caught the crash: an "
                "`except BaseException:` or a bare `except:`, perhaps around a retry loop. A real crash runs "
                "nothing more; catching BaseException hides a crash. Catch Exception, or the errors you expect."
            )
        if self._dead:
            raise _Crash()
        return Called(value, error)

    def _replay(self, script: Sequence[_KitCall]) -> None:
        """The clean call's kit calls on this step's facades, in order, until the crash point
        raises `_Crash`. A kit call's error is the learner's to react to, and its reaction is
        in what the script calls next (or in the script ending there)."""
        for call in script:
            target = self._facades[call.path[0]]
            for name in call.path[1:]:
                target = getattr(target, name)
            args = [self._facades[a.name] if type(a) is _Handed else a for a in _data(call.args)]
            kwargs = {k: self._facades[v.name] if type(v) is _Handed else v for k, v in _data(call.kwargs).items()}
            with contextlib.suppress(Exception):
                target(*args, **kwargs)

    def enter(self, point: str, *, can_fail: bool = False) -> bool:
        """A facade is about to make kit call `point`. Raises (the process dies, the call
        never happens) for a lost request; True when the schedule makes this call fail
        (only where `can_fail`: the facade then raises its own error)."""
        if self._dead:
            self._haunted()
            raise _Crash()
        if not self._in_call:
            return False
        self.points.append((point, can_fail))
        if self._gate and self.script is not None and self._inside:
            self.marks.append(len(self.script) - 1)
            self._gate = False  # a second fault point in the same call is no gate's
        else:
            if self._inside and self.marks and self.script is not None and self.marks[-1] == len(self.script) - 1:
                self.marks[-1] = None  # the call had more than one: neither is a gate
            self.marks.append(None)
        self._seen[point] = self._seen.get(point, 0) + 1
        fault = self._fault
        if fault is None or (fault.point, fault.nth) != (point, self._seen[point]):
            return False
        if fault.kind is FaultKind.TIMEOUT:  # it takes effect first: `leave` says so
            return False
        self.fired = True
        if fault.kind is FaultKind.LOST_REQUEST:
            self._dead = True
            raise _Crash()
        return fault.kind is FaultKind.FAIL

    def leave(self, point: str) -> bool:
        """The kit call `point` took effect: for a lost reply, the process dies now. True when
        the schedule makes the call time out now that it took effect (the facade then raises
        its own error: the caller cannot tell this from a call that never happened)."""
        if self.looked is not None and self._in_call:
            nth = self._seen.get(point, 1)
            self.looked(point if nth == 1 else f"{point} {nth}")
        fault = self._fault
        if not (self._in_call and fault is not None and (fault.point, fault.nth) == (point, self._seen.get(point))):
            return False
        if fault.kind is FaultKind.LOST_REPLY:
            self._dead = True
            raise _Crash()
        if fault.kind is FaultKind.TIMEOUT:
            self.fired = True
            return True
        return False

    def _haunted(self) -> None:
        """The learner's code called the kit after its process died (it caught the crash): each
        such call is refused; past `HAUNTING_LIMIT` of them (a retry loop that catches
        everything), every line of the learner's code raises the crash again, so the call ends
        and the check says what happened (`call`)."""
        if not self._in_call:
            return
        self._haunting += 1
        if self._haunting == HAUNTING_LIMIT + 1:
            haunt(sys._getframe(2))

    @property
    def fault(self) -> Fault | None:
        """The fault the schedule puts in the step being played (None for a clean step)."""
        return self._fault

    def _begin(self, actor: str, fault: Fault | None) -> None:
        self.current_actor = actor
        self._fault, self._seen, self.points, self._dead, self.fired = fault, {}, [], False, False
        self.marks, self._gate = [], False
        self._facades, self.script = {}, None

    def _died(self, actor: str) -> None:
        self._copies.pop(actor, None)  # its next step starts a fresh process
        self._dead = False

    def _memory(self) -> tuple[tuple[str, Any], ...]:
        return tuple((actor, memory(copy)) for actor, copy in sorted(self._copies.items()))


class _Inside:
    """The body of a recorded kit call: what it calls in turn is the kit's own."""

    __slots__ = ("_run",)

    def __init__(self, run: Run) -> None:
        self._run = run

    def __enter__(self) -> None:
        self._run._inside = True

    def __exit__(self, *exc: object) -> None:
        self._run._inside = self._run._gate = False


_NOT_RECORDED = contextlib.nullcontext()

HAUNTING_LIMIT = 20  # kit calls a dead process's code may make (each refused) before the check ends it


def _haunting(frame: Any, event: str, arg: Any) -> Any:
    """A line tracer for the learner's frames of a call whose process died: each line raises
    the crash again, so no `except` can keep the code going (a handler's first line raises).
    Once the outermost of them returns, tracing stops: the next call runs as usual."""
    if not learners_code(frame.f_code.co_filename):
        return _haunting
    if event == "line":
        raise _Crash()
    if event == "return" and (frame.f_back is None or not learners_code(frame.f_back.f_code.co_filename)):
        _exorcise()
    return _haunting


def haunt(frame: types.FrameType | None = None) -> None:
    """From `frame` (the caller's, if None) up: trace the learner's frames line by line
    (`_haunting`), and any they call. The grader's learner process does this when the judge
    says the call's process died and its code keeps calling (`wire.Peer.exception`)."""
    frame = sys._getframe(1) if frame is None else frame
    sys.settrace(_haunting)
    while frame is not None:
        if learners_code(frame.f_code.co_filename):
            frame.f_trace, frame.f_trace_lines = _haunting, True
        frame = frame.f_back


def _exorcise() -> None:
    """Stop tracing: the dead call is over."""
    sys.settrace(None)
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_trace is _haunting:
            frame.f_trace = None
        frame = frame.f_back


@dataclass(frozen=True)
class Counterexample:
    """The shortest schedule found broken, what broke, and each step as it happened."""

    events: tuple[Event, ...]
    problem: str
    steps: tuple[Step, ...]
    again: Callable[..., Replayed] | None = field(default=None, compare=False, repr=False)  # `replay`, bound

    @property
    def words(self) -> str:
        return SEPARATOR.join(event.words for event in self.events)

    def stepper(self, title: str = "the shortest breaking schedule, step by step") -> Any:
        """The schedule played again and walked: every worker, the store and the effects at
        each step (`shopops_lab.viz.stepper`; display it for the ◀ ▶ viewer, print it for text)."""
        if self.again is None:
            raise BadArgumentError(field="counterexample", problem="has no schedule to play", fix="explore first")
        from shopops_lab.snapshot import walked

        return walked(self.again, title)

    @property
    def lines(self) -> tuple[str, ...]:
        return tuple(f"{n}. {step.said}" for n, step in enumerate(self.steps, 1))

    def diagram(self, title: str = "the shortest breaking schedule") -> Any:
        from shopops_lab.viz.spacetime import spacetime

        return spacetime(self.steps, title=title, problem=self.problem)


@dataclass(frozen=True)
class Exploration:
    """What a search covered (every schedule within the bound, as `schedules`, through
    `states` distinct states) and the shortest counterexample, if any."""

    scenario: str
    bound: Bound
    schedules: int
    states: int
    counterexample: Counterexample | None

    @property
    def summary(self) -> str:
        return f"checked all {self.schedules:,} schedules of {self.bound.words}"


@dataclass
class _Played:
    steps: list[Step]
    world: World
    run: Run
    spent: dict[str, int]
    moves: list[Move]
    problem: str | None = None
    points: list[tuple[str, bool]] = field(default_factory=list)
    marks: list[int | None] = field(default_factory=list)  # its last call's (`Run.marks`)
    script: tuple[_KitCall, ...] | None = None  # its last call's
    moments: list[Any] = field(default_factory=list)  # what `look` saw, when walked


def _budget_left(bound: Bound, spent: Mapping[str, int], kind: str | None) -> bool:
    return kind is None or spent.get(kind, 0) < bound.budget.get(kind, 0)


def _enabled(world: World, bound: Bound, spent: Mapping[str, int]) -> list[Move]:
    return [m for m in world.moves() if _budget_left(bound, spent, m.cost)]


def _play(
    scenario: Scenario,
    answer: Any,
    events: Sequence[Event],
    *,
    go_on: _Played | None = None,
    stand_in: tuple[_KitCall, ...] | None = None,
    replaying: bool = False,
    look: Look | None = None,
) -> _Played:
    """Play `events` on a fresh world (or on after `go_on`, a schedule already played,
    which is used up); stop at the first broken invariant. `stand_in`: the recorded kit
    calls that play the (one, crashing) event's learner call instead of the learner.
    `look`: asked before the first step, inside learner calls and after every step (`Look`)."""
    if go_on is None:
        run = Run(answer)
        run.replaying = replaying
        world = scenario.start(run)
        played = _Played(steps=[], world=world, run=run, spent={}, moves=_enabled(world, scenario.bound, {}))
    else:
        played, world = go_on, go_on.world
    if look is not None:
        played.moments.append(look(world, played.run, number=0, step=None, inside=None, problem=None))
    for event in events:
        move = next((m for m in played.moves if m.name == event.move), None)
        if move is None:
            raise BadArgumentError(
                field="schedule",
                problem=f"has the step {event.move!r}, which cannot happen "
                f"there (possible: {', '.join(m.name for m in played.moves) or 'none'})",
                fix="copy the schedule from the check's message",
            )
        played.run._stand_in = stand_in
        number = len(played.steps) + 1
        if look is not None:
            played.run.looked = functools.partial(_inside, played, look, number)
        try:
            _step(played, move, event)
        finally:
            played.run._stand_in = None
            played.run.looked = None
        played.problem = world.broken()
        played.moves = _enabled(world, scenario.bound, played.spent)
        if played.problem is None and not played.moves:
            played.problem = world.finished()
        if played.problem is not None:
            played.steps[-1] = dataclasses.replace(played.steps[-1], problem=played.problem)
        if look is not None:
            played.moments.append(
                look(world, played.run, number=number, step=played.steps[-1], inside=None, problem=played.problem)
            )
        if played.problem is not None:
            break
    return played


class Look(Protocol):
    """What a walk asks of the world at each moment (`shopops_lab.snapshot.take`): after step
    `number` (`step`; 0 and None before the first), or inside its learner call right after
    the kit call `inside` took effect. What it returns is kept, in order, as the moments."""

    def __call__(
        self, world: Any, run: Run, *, number: int, step: Step | None, inside: str | None, problem: str | None
    ) -> Any: ...


def _inside(played: _Played, look: Look, number: int, point: str) -> None:
    played.moments.append(look(played.world, played.run, number=number, step=None, inside=point, problem=None))


def _step(played: _Played, move: Move, event: Event) -> None:
    run, world, spent = played.run, played.world, played.spent
    if move.cost is not None:
        spent[move.cost] = spent.get(move.cost, 0) + 1
    if event.fault is not None:
        spent[event.fault.kind.budget] = spent.get(event.fault.kind.budget, 0) + 1
    run._begin(move.actor, event.fault)
    crashed = move.crash
    said = f"{move.actor}'s process dies" if move.crash else ""
    if move.crash and move.act is not None:
        said = f"{move.act(run)}; then {said}"
    elif not move.crash:
        try:
            said = move.act(run) if move.act is not None else move.name
        except _Crash:
            crashed = True
            said = f"{move.name}: {move.actor}'s process dies ({event.fault.words if event.fault else 'crash'})"
    played.points, played.marks = list(run.points), list(run.marks)
    played.script = tuple(run.script) if run.script is not None and not crashed else None
    if event.fault is not None and not run.fired:
        if not run.replaying:  # the search planned this fault from the same step played before
            raise Wrong(
                f"your code did not do the same thing twice from the same start: the check played the step "
                f"{move.name!r} once more, to try {event.fault.words!r}, and this time your code made no such call "
                f"(the first time it did). It decided from something that is not in what the check hands it and "
                "that a crash does not wipe: a value kept in a module (`sys.modules`), a file, an environment "
                "variable, the clock or a random number. A restarted worker knows only what the store says: "
                "decide from that."
            )
        raise BadArgumentError(
            field="schedule",
            problem=f"asks for {event.words!r}, but that step made no such kit call",
            fix="copy the schedule from the check's message",
        )
    if crashed:
        then = world.crashed(move.actor)
        said = f"{said}; {then}" if then else said
        run._died(move.actor)
    played.steps.append(Step(event=event, actor=move.actor, peer=move.peer, said=said, crashed=crashed))


_ATOMS = (str, int, float, bool, type(None))


def _immutable(value: Any) -> bool:
    """Data that nothing can change: atoms, enums, tuples and read-only views of them, and
    the kit's frozen records (a Checkpoint, a Receipt) made of them."""
    kind = type(value)
    if kind in _ATOMS or isinstance(value, enum.Enum):
        return True
    if kind in (tuple, frozenset):
        return all(_immutable(item) for item in value)
    if kind is types.MappingProxyType:
        return all(_immutable(key) and _immutable(item) for key, item in value.items())
    if _kit_tuple(kind):  # a NamedTuple of the kit's (a Lease)
        return all(_immutable(item) for item in value)
    if getattr(kind, "__deepcopy__", None) is itself and _record(kind):  # a kit record that says so (a Checkpoint)
        return True
    if _record(kind):
        return all(_immutable(getattr(value, f.name)) for f in dataclasses.fields(value))
    return (
        kind.__module__.startswith("shopops_lab.")
        and all(  # a token of the kit's with no state (a QueueId)
            getattr(klass, "__slots__", None) == () for klass in kind.__mro__[:-1]
        )
    )


class _NotData(Exception):
    """A value with something of either process in it: only the learner can pass it again."""


def _data(value: Any) -> Any:
    """`value` as data alone, to be passed again in another world's call: itself where
    nothing can change it (`_immutable`), else a copy of what can (a list, a dict, a kit
    record or NamedTuple holding one). Raises `_NotData` where an object of the learner's,
    or of the check's, is in it."""
    if _immutable(value):
        return value
    kind = type(value)
    if kind in (list, tuple):
        return kind(_data(item) for item in value)
    if _kit_tuple(kind):
        return kind(*(_data(item) for item in value))
    if kind is dict:
        if not all(_immutable(key) for key in value):
            raise _NotData("a key that can change")
        return {key: _data(item) for key, item in value.items()}
    if _record(kind):
        return dataclasses.replace(
            value, **{f.name: _data(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
        )
    raise _NotData(kind.__name__)


def _kit_tuple(kind: type) -> bool:
    return issubclass(kind, tuple) and hasattr(kind, "_fields") and kind.__module__.startswith("shopops_lab.")


def _record(kind: type) -> bool:
    """One of the kit's frozen records (a Checkpoint, a Delivery)."""
    params = getattr(kind, "__dataclass_params__", None)
    return params is not None and params.frozen and kind.__module__.startswith("shopops_lab.")


def copied(value: Any) -> Any:
    """A deep copy of a world's own state for its `clone`, or `NotCopyable` (the explorer then
    replays): what the learner's code handed the world (a value it returned) may not copy."""
    try:
        return copy.deepcopy(value)
    except Exception as exc:  # noqa: BLE001 - whatever stops a copy, the schedule is replayed instead
        raise NotCopyable(f"{type(value).__name__}: {type(exc).__name__}") from None


def _fork(played: _Played | None, bound: Bound) -> _Played | None:
    """A copy of a schedule played so far, to go on from instead of replaying it: for a
    world that offers `clone(run)` (an independent copy of itself, on `run`, whose copies of
    the answer are twins of the played run's: see `Run.twin`); else, or where the copies
    cannot be twinned, None."""
    clone = getattr(played.world, "clone", None) if played is not None else None
    if played is None or not callable(clone):
        return None
    run = Run(played.run._answer, parent=played.run)
    try:
        world: World = clone(run)
        if run._parent is not None:  # the world holds nothing of the learner's: the copies alone
            run.twin()
    except NotCopyable:
        return None
    return _Played(
        steps=list(played.steps),
        world=world,
        run=run,
        spent=dict(played.spent),
        moves=_enabled(world, bound, played.spent),  # the copy's own moves act on the copy
    )


def _children(
    scenario: Scenario,
    answer: Any,
    events: tuple[Event, ...],
    move: Move,
    spent: Mapping[str, int],
    live: _Played | None,
    *,
    last: bool = False,
) -> tuple[list[tuple[tuple[Event, ...], _Played]], _Played | None]:
    """The schedules `events` + `move` (and its faulty variants), played: each goes on from a
    copy of the node's world `live` when it can be copied (`_fork`); otherwise the first goes on from
    `live` itself (used up: None is handed back) and the rest replay from a fresh world. The
    node's `last` move, when no fault is left in the budget (so it has no variants), goes on
    from `live` itself: nothing needs the node's world after it."""
    first = events + (Event(move.name),)
    faults_left = any(_budget_left(scenario.bound, spent, kind.budget) for kind in scenario.bound.faults)
    base = None if last and not faults_left else _fork(live, scenario.bound)
    if base is None:
        base, live = live, None
    played = _play(scenario, answer, first[-1:], go_on=base) if base else _play(scenario, answer, first)
    children = [(first, played)]
    gates = _gates(played.points)
    after: tuple[int, _Played] | None = None  # the last child crashed after a gate, and that gate
    for event in _variants(scenario.bound, spent, move.name, played.points):
        schedule = events + (event,)
        fault = event.fault
        at = gates[fault.point, fault.nth] if fault is not None else -1
        if (
            after is not None
            and fault is not None
            and fault.kind is FaultKind.LOST_REQUEST
            and after[0] == at - 1
            and _adjacent(played.marks, at - 1)
        ):  # the same kit calls replayed, nothing between them: the world the crash after the gate left
            children.append((schedule, after[1]))
            after = None
            continue
        after = None
        fork = _fork(live, scenario.bound)
        if fork is None:
            children.append((schedule, _play(scenario, answer, schedule)))
            continue
        crashes = fault is not None and fault.kind in CRASHES
        stand_in = played.script if crashes else None
        child = _play(scenario, answer, (event,), go_on=fork, stand_in=stand_in)
        children.append((schedule, child))
        if stand_in is not None and fault is not None and fault.kind is FaultKind.LOST_REPLY:
            after = (at, child)
    return children, live


def _gates(points: list[tuple[str, bool]]) -> dict[tuple[str, int], int]:
    """(kit call, its nth) -> its place among a learner call's `points`, as `_variants` names them."""
    seen: dict[str, int] = {}
    places = {}
    for place, (point, _) in enumerate(points):
        seen[point] = seen.get(point, 0) + 1
        places[point, seen[point]] = place
    return places


def _adjacent(marks: list[int | None], at: int) -> bool:
    """Are the kit calls at `at` and `at + 1` gates (`Run.recorded`) recorded one right after
    the other? Then a crash after the first (its reply lost) and one before the second (its
    request lost) replay the same recorded calls, whole, and nothing else: one world."""
    if at + 1 >= len(marks):
        return False
    first, second = marks[at], marks[at + 1]
    return first is not None and second is not None and second == first + 1


def _state(played: _Played) -> Callable[[], tuple[Hashable, ...]]:
    """What a schedule's future depends on: the world's fingerprint and every process's
    memory, taken now (right after its step) and compared when the key is called: across
    the grader's process boundary a memory is a digest drawn in the learner's process, and
    the search compares a level's keys together, so each step's digests are asked in the
    same message as the learner's next step (`JudgePeer.draw_ahead`). Actors a world calls
    `alike` (processes running copies of the same answer, handed the same facades, which
    their code cannot tell apart) count as a multiset of (the world's part of each, its
    memory): two states that differ only by which of them is which are one state, and
    their futures mirror each other (`RecoveryWorld`: W1 runs first or W2 does)."""
    world, memories = played.world, played.run._memory()
    fingerprint = world.fingerprint()
    alike = getattr(world, "alike", ())
    if not alike:
        return lambda: (fingerprint, memories)
    parts = [(world.actor_print(actor), actor) for actor in alike]  # type: ignore[attr-defined]
    others = tuple((actor, seen) for actor, seen in memories if actor not in alike)

    def key() -> tuple[Hashable, ...]:
        known = dict(memories)
        mirrored = Counter((part, known.get(actor)) for part, actor in parts)
        return fingerprint, frozenset(mirrored.items()), others

    return key


def _variants(bound: Bound, spent: Mapping[str, int], move: str, points: list[tuple[str, bool]]) -> list[Event]:
    """The faulty versions of a learner call that made the kit calls `points`."""
    events: list[Event] = []
    seen: dict[str, int] = {}
    for point, can_fail in points:
        seen[point] = seen.get(point, 0) + 1
        for kind in bound.faults:
            if (kind not in _RAISES or can_fail) and _budget_left(bound, spent, kind.budget):
                events.append(Event(move, Fault(kind, point, seen[point])))
    return events


def explore(scenario: Scenario, answer: Any) -> Exploration:
    """Search every schedule of `scenario` within its bound, breadth first; stop at the
    first (so shortest) one that breaks a promise. The cyclic garbage collector is paused
    meanwhile (`collector_paused`): a search makes thousands of short-lived worlds and
    fresh copies of the answer, and each full collection would walk every object the
    kernel holds (about a fifth of lab 05's search); what it leaves is collected after."""
    with collector_paused():
        return _search(scenario, answer)


def _probe_crashes(scenario: Scenario, answer: Any) -> None:
    """Before the search: the first step that calls the kit, crashed before the first of each
    kind of kit call it makes, with the learner's own code running (the grader plays most crashed calls from the
    kit calls they recorded, which never lets the code see its crash): code that catches the
    crash and keeps calling the kit is told so (`Run.call`), the same way in both places."""
    if FaultKind.LOST_REQUEST not in scenario.bound.faults or scenario.bound.budget.get("crash", 0) < 1:
        return
    for move in _play(scenario, answer, ()).moves:
        first = _play(scenario, answer, (Event(move.name),))
        if first.points:
            for point in dict.fromkeys(point for point, _ in first.points):  # each kind of kit call, first time
                _play(scenario, answer, (Event(move.name, Fault(FaultKind.LOST_REQUEST, point)),))
            return


def _search(scenario: Scenario, answer: Any) -> Exploration:
    _probe_crashes(scenario, answer)
    root = _play(scenario, answer, ())
    frontier: list[list] = [[(), root.moves, {}, 1, root]]  # schedule, moves, budget spent, paths, its world
    states, schedules = 1, 0
    for depth in range(scenario.bound.max_steps + 1):
        if not frontier:
            return Exploration(scenario.name, scenario.bound, schedules, states, None)
        level = []  # (its state, schedule, child, paths), in the order played
        for events, moves, spent, paths, live in frontier:
            if not moves:
                schedules += paths
                continue
            for move in moves:
                children, live = _children(scenario, answer, events, move, spent, live, last=move is moves[-1])
                shared: tuple[_Played, Callable[[], tuple[Hashable, ...]]] | None = None
                for schedule, child in children:
                    if child.problem is not None:
                        found = Counterexample(
                            schedule,
                            child.problem,
                            tuple(child.steps),
                            again=functools.partial(replay, scenario, answer, schedule),
                        )
                        refusals.offer(found)
                        return Exploration(scenario.name, scenario.bound, schedules, states, found)
                    if shared is None or shared[0] is not child:  # a world two crashes left is one state
                        shared = (child, _state(child))
                    level.append((shared[1], schedule, child, paths))
        merged: dict[Hashable, list] = {}
        for state, schedule, child, paths in level:
            key = (depth, *state(), tuple(sorted(child.spent.items())))
            if key in merged:
                merged[key][3] += paths
            else:
                merged[key] = [schedule, child.moves, dict(child.spent), paths, child]
        states += len(merged)
        frontier = list(merged.values())
    raise BadArgumentError(
        field="scenario",
        problem=f"{scenario.name} has schedules longer than {scenario.bound.max_steps} steps",
        fix="give every worker a finite program",
    )


_FAULT = re.compile(
    r"^(?P<move>.+?) \((?:(?P<crash>crash before|crash after) (?P<p1>\S+)(?: (?P<n1>\d+))?"
    r"|(?P<p2>\S+)(?: (?P<n2>\d+))? (?P<raises>fails|times out))\)$"
)


def parse(words: str) -> tuple[Event, ...]:
    """The events of a schedule written as `Event.words` joined by ' · ' (or '·')."""
    if not isinstance(words, str) or not words.strip():
        raise BadArgumentError(
            field="schedule",
            problem=f"is {words!r}",
            fix='pass the schedule from the check\'s message, e.g. "W7 claim · W7 write"',
        )
    events = []
    for part in (p.strip() for p in words.split("·")):
        found = _FAULT.match(part)
        if found is None:
            events.append(Event(part))
        elif found["crash"]:
            events.append(Event(found["move"], Fault(FaultKind(found["crash"]), found["p1"], int(found["n1"] or 1))))
        else:
            events.append(Event(found["move"], Fault(FaultKind(found["raises"]), found["p2"], int(found["n2"] or 1))))
    return tuple(events)


@dataclass(frozen=True)
class Replayed:
    """A schedule played step by step: what each step did, and what broke (or None)."""

    events: tuple[Event, ...]
    steps: tuple[Step, ...]
    problem: str | None
    complete: bool
    moments: tuple[Any, ...] = ()  # what `look` saw, when played with one
    again: Callable[..., Replayed] | None = field(default=None, compare=False, repr=False)  # `replay`, bound

    def __str__(self) -> str:
        lines = [f"{n}. {step.said}" for n, step in enumerate(self.steps, 1)]
        if self.problem:
            lines.append(f"broken: {self.problem}")
        elif not self.complete:
            lines.append("nothing broken so far (the schedule stops before the end).")
        else:
            lines.append("nothing broken.")
        return "\n".join(lines)

    def diagram(self, title: str = "the schedule replayed") -> Any:
        from shopops_lab.viz.spacetime import spacetime

        return spacetime(self.steps, title=title, problem=self.problem)

    def stepper(self, title: str = "the schedule replayed, step by step") -> Any:
        """The schedule played again and walked (see `Counterexample.stepper`)."""
        if self.again is None:
            raise BadArgumentError(field="replayed", problem="has no schedule to play", fix="use replay(...)")
        from shopops_lab.snapshot import walked

        return walked(self.again, title)

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        """As a cell's last expression: the step-through viewer, and these lines as its text."""
        return {"text/plain": str(self), "text/html": self.stepper().html()}


def replay(scenario: Scenario, answer: Any, words: str | Sequence[Event], *, look: Look | None = None) -> Replayed:
    """Play one schedule (as written in a check's message) with `answer`, seed-free; `look`
    at the world at every moment (`Look`) to walk it."""
    events = parse(words) if isinstance(words, str) else tuple(words)
    played = _play(scenario, answer, events, replaying=True, look=look)
    return Replayed(
        events,
        tuple(played.steps),
        played.problem,
        complete=not played.moves,
        moments=tuple(played.moments),
        again=functools.partial(replay, scenario, answer, events),
    )


def refuse(exploration: Exploration, replay_line: str) -> None:
    """Raise `Wrong` for a counterexample: what broke first, then the shortest schedule
    in words and the line that replays it; the steps as evidence."""
    found = exploration.counterexample
    if found is None:
        return
    n = len(found.events)
    raise Wrong(
        f"{found.problem} The shortest schedule that shows it ({n} step{'s' if n != 1 else ''}): "
        f"{found.words}. Replay it: {replay_line.format(schedule=found.words)} (print it for the steps; "
        ".diagram() draws them).",
        found.lines,
        counterexample=found,
    )
