"""The judge's side of one submission: the learner's process it starts (`Learner`), and the
answers it hands the checks (`RemoteAnswer`, a `ForeignAnswer`), whose calls cross to that
process. The judge runs the checks, the kit's world and the verdict; it never runs a line
of the learner's code, and reads what the learner's process sends as data only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FunctionType, MethodType, ModuleType
from typing import Any

from shopops_lab.checks.base import Call, ForeignAnswer, NotAttempted, Read
from shopops_lab.course.grade import zygote
from shopops_lab.course.grade.wire import (
    KIT,
    Handle,
    Peer,
    PeerGone,
    ProtocolError,
    exact,
    kit_class,
    recv_frame,
    send_frame,
)
from shopops_lab.errors import CheckStopped, ShopOpsError
from shopops_lab.explore import HAUNTING_LIMIT

BOOT = (
    "import sys, json; c = json.loads(sys.argv[1]); sys.path[:0] = c['path']; "
    "from shopops_lab.course.grade.learner import main; main(sys.argv[1])"
)
CONTROL_SECONDS = 30.0  # a learner process that does not answer a fork or reap by then is stuck


class LearnerRaised(Exception):
    """The learner's code raised an exception (in its own process); named as the learner's
    class, with its message and where it was raised."""


class LearnerRaisedBase(BaseException):
    """The same, for a BaseException the learner raised (a check lets it end the check)."""


class LearnerNotStarted(Exception):
    """The learner's process did not get ready (it could not confine itself, or never
    answered): the grader's failure, before any learner code ran. The message is why."""


class LearnerDied(PeerGone):
    """The learner's process ended (a crash, `os._exit`, the memory limit): a KeyboardInterrupt,
    so the check stops and the grader scores the cell as stopped."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


_RAISED: dict[tuple[str, bool], type] = {}


def learner_error(name: str, base: bool) -> type:
    key = (name if name.isidentifier() and len(name) <= 80 else "Exception", base)
    if key not in _RAISED:
        _RAISED[key] = type(key[0], (LearnerRaisedBase if base else LearnerRaised,), {"__module__": "learner"})
    return _RAISED[key]


def death(exitcode: int | None) -> str:
    """What a learner process that ended with `exitcode` did, in the words a stopped cell shows."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (out of memory?)" if name == "SIGKILL" else " (CPU time limit)" if name == "SIGXCPU" else ""
        return f"ended the grading process with {name}{hint}"
    return f"ended the grading process (exit code {exitcode})"


class JudgePeer(Peer):
    """The judge's end of a worker's socket: only public attributes of what it hands over
    cross; the kit's frozen records cross by value; its own timer never crosses."""

    handed = (KIT,)  # the packages whose objects may cross by handle

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock, public_only=True)
        self.death: BaseException | None = None
        self.haunted = 0  # requests the current call made after its process died
        self.pending: list[Digest] = []  # digests asked for, not yet drawn

    # A BaseException of the check's own raised into a learner call (the explorer's planned
    # crash) is the learner's process dying there: every later request of that call is
    # refused with it, and it ends the call here, whatever the learner's code did with it.
    def request(self, message: list[Any], mutable: dict[str, Any] | None = None) -> Any:
        if self.pending and message[0] != "digests":  # drawn before the learner's code may run again
            self.draw_ahead()
        if self.depth:
            return super().request(message, mutable)
        self.death, self.haunted = None, 0
        try:
            value = super().request(message, mutable)
        except (KeyboardInterrupt, CheckStopped):
            raise
        except BaseException:
            if self.death is None:
                raise
            died, self.death = self.death, None
            died.haunted = self.haunted  # `explore.Run.call` reads it
            raise died from None
        if self.death is not None:
            died, self.death = self.death, None
            died.haunted = self.haunted
            raise died
        return value

    def draw(self) -> None:
        """Every pending digest, in one request (a digest compared before anything else is asked)."""
        pending, self.pending = self.pending, []
        _fill(pending, self.request(_digests(pending)))

    def draw_ahead(self) -> None:
        """Every pending digest, asked in the same write as the request about to go, which the
        learner's process serves after drawing them (so they are of the memory as it was):
        the explorer compares a step's digests after playing the next step, and its round
        trip is saved. A reply of no use (an exception, the request given up) leaves each
        digest unknown, equal to no other: a state not merged, searched again."""
        pending, self.pending = self.pending, []

        def taken(reply: list[Any] | None) -> None:
            if reply is not None and reply[0] == "ret" and len(reply) == 3:
                _fill(pending, self.decode(reply[1]))
            else:
                _fill(pending, [None] * len(pending))

        self.send_ahead(_digests(pending), taken)

    def serve(self, message: list[Any]) -> None:
        if self.death is not None:  # the call's process is dead: its code caught the crash and goes on
            self.haunted += 1
            described = self.describe(self.death)
            if self.haunted > HAUNTING_LIMIT:  # a loop that catches everything: stop its code where it runs
                described["halt"] = True
            self.reply(["exc", described, []])
            return
        super().serve(message)

    def describe(self, exc: BaseException) -> dict[str, Any]:
        if not isinstance(exc, Exception):
            self.death = exc
        return super().describe(exc)

    def sends_record(self, value: Any, base: type) -> bool:
        return type(value) is base and bool(base.__dataclass_params__.frozen)

    def export(self, value: Any) -> dict[str, Any]:
        """Only the kit's own objects (and their bound methods) are handed over by handle: a
        module, a file, a database connection or a function of another library never is,
        whatever public attribute leads to it."""
        self.check_handed(value)
        return super().export(value)

    def fixed(self, value: Any) -> dict[str, Any]:
        """The attributes a kit class promises never change for an object's life (`_FIXED`,
        as `WorkerEnv.workflow`): read here once and sent with the object's handle, so the
        learner's code reads them without a round trip. One that cannot be handed over is
        left to be asked, and refused, as before."""
        found: dict[str, Any] = {}
        for name in getattr(type(value), "_FIXED", ()):
            with contextlib.suppress(Exception):  # a private name, or a value that may not cross
                found[name] = self.encode(self.attribute(value, name))
        return found

    def check_handed(self, value: Any) -> None:
        owner = value.__self__ if isinstance(value, MethodType) else value
        if isinstance(owner, contextlib._GeneratorContextManager):  # `with shop.transaction():` of a kit method
            owner = owner.func
        module = owner.__module__ if isinstance(owner, FunctionType) else type(owner).__module__
        if isinstance(owner, ModuleType) or not _within(module, self.handed):
            raise TypeError(f"a {type(value).__name__} of {module} is not handed across")

    def keeps(self, exc: BaseException) -> bool:
        return isinstance(exc, (KeyboardInterrupt, CheckStopped))

    def stand_in(self, name: str, message: str) -> BaseException:
        error: BaseException = learner_error(name, False)(message[:4000])
        return error

    def rebuild(self, described: dict[str, Any]) -> BaseException:
        if "judge" in described:  # the judge's own exception, come back unchanged: the same object
            number = described["judge"]
            if type(number) is not int or number not in self.thrown:
                raise ProtocolError("an exception the judge never raised")
            thrown = self.thrown[number]
            if type(described.get("where")) is str:  # `checks.base._where`: the line it came through
                thrown.learner_where = described["where"][:200]  # type: ignore[attr-defined]
            return thrown
        if described.get("notattempted") is True:
            return NotAttempted()
        if "exit" in described:
            code = described["exit"]
            if code is not None and type(code) not in (int, str):
                raise ProtocolError("an exit code that is not a number or text")
            return SystemExit(code)
        name, message = described.get("type"), described.get("msg")
        where, base = described.get("where", ""), described.get("base")
        if not (type(name) is str and type(message) is str and type(where) is str and type(base) is bool):
            raise ProtocolError("an exception of no known shape")
        if "kit" in described and not base:
            with contextlib.suppress(ProtocolError, Exception):
                klass = kit_class(described["kit"][0])
                if issubclass(klass, ShopOpsError) and type(described["kit"][1]) is dict:
                    kit_error = klass(**{str(k): self.decode(v) for k, v in described["kit"][1].items()})
                    kit_error.learner_where = where[:200]  # type: ignore[attr-defined]  # `checks.base._where`
                    return kit_error
        error: BaseException = learner_error(name, base)(f"{message[:4000]}{where[:200]}")
        return error


@dataclass
class Learner:
    """The learner's first process (it runs the cells) and how to start it again. `config`
    is what it needs to confine itself; `announce` tells the grader a process group to kill."""

    config: dict[str, Any]
    announce: Callable[[int], None]
    zygote: socket.socket | None = None  # a channel to the zygote, else each start is a fresh interpreter
    process: Any = None
    control: Any = None
    history: list[tuple[str, str]] = field(default_factory=list)

    def start(self) -> None:
        debug = bool(os.environ.get("SHOPOPS_GRADE_DEBUG"))  # the learner's stderr shown, for the kit's developers
        config = {**self.config, "debug": debug}
        self.process = None
        if self.zygote is not None and not debug:  # forked from the zygote: no interpreter start
            ours, theirs = socket.socketpair()
            try:
                self.process = zygote.spawn(self.zygote, {**config, "fd": theirs.fileno()}, theirs.fileno())
            except (OSError, PeerGone, ProtocolError, RuntimeError):
                self.zygote = None  # gone or stuck: fresh interpreters from now on, on a socket of their own
                ours.close()
            finally:
                theirs.close()
        if self.process is None:
            ours, theirs = socket.socketpair()
            try:
                self.process = self._popen({**config, "fd": theirs.fileno()}, theirs.fileno())
            finally:
                theirs.close()
        self.control = ours
        self.announce(self.process.pid)
        try:
            ready = recv_frame(ours)
        except (PeerGone, ProtocolError):
            ready = None
        if ready != ["ready"]:
            failed = isinstance(ready, list) and len(ready) == 2 and ready[0] == "failed"
            raise LearnerNotStarted(str(ready[1])[:600] if failed else "the learner's process did not start (no reply)")
        for source, name in list(self.history):
            with contextlib.suppress(LearnerDied, ProtocolError):
                self._exec(source, name)

    def _popen(self, config: dict[str, Any], fd: int) -> subprocess.Popen[bytes]:
        """A fresh interpreter for the learner's process."""
        scratch, debug = self.config["scratch"], bool(config["debug"])
        return subprocess.Popen(
            zygote.interpreter(BOOT, config),
            pass_fds=(fd,),
            start_new_session=True,
            cwd=scratch,
            env=zygote.environment(scratch, debug),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=None if debug else subprocess.DEVNULL,
        )

    def stop(self) -> None:
        if self.process is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                self.process.kill()
            self.process.wait()
        if self.control is not None:
            self.control.close()
        self.process = self.control = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def run(self, source: str, name: str) -> dict[str, Any] | None:
        """Run a cell in the learner's namespace: None when it ran, else how it ended
        ({"exit": code} for SystemExit, {"type", "msg", "base"} for an exception)."""
        outcome = self._exec(source, name)
        self.history.append((source, name))  # a cell's own error still leaves what it bound
        return outcome

    def _exec(self, source: str, name: str) -> dict[str, Any] | None:
        try:
            send_frame(self.control, ["exec", source, name])
            reply = recv_frame(self.control)
        except PeerGone:
            raise LearnerDied(death(self.process.wait())) from None
        if reply == ["ret", None]:
            return None
        if isinstance(reply, list) and len(reply) == 2 and reply[0] == "exc" and isinstance(reply[1], dict):
            return reply[1]
        raise ProtocolError("a cell's outcome of no known shape")

    @contextlib.contextmanager
    def _locked(self) -> Any:
        """The control socket to itself: the check may fork worker processes of its own (lab 08),
        and each asks for its partner here. A lock file opened afresh, so forks do not share it."""
        with open(os.path.join(self.config["lock"], "control.lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def fork(self) -> JudgePeer:
        """A worker forked from the cells' process as it stands now."""
        ours, theirs = socket.socketpair()
        try:
            self.control.settimeout(CONTROL_SECONDS)
            with self._locked():
                send_frame(self.control, ["fork"])
                socket.send_fds(self.control, [b"F"], [theirs.fileno()])
                reply = recv_frame(self.control)
        except (PeerGone, OSError):
            raise LearnerDied(death(self.process.wait())) from None
        finally:
            theirs.close()
            if self.control is not None:
                self.control.settimeout(None)
        if reply != ["ret", None]:
            raise ProtocolError("a fork's reply of no known shape")
        return JudgePeer(ours)

    def reap(self) -> int | None:
        """The last worker's exit status (the cells' process kills it first if it still runs)."""
        try:
            self.control.settimeout(CONTROL_SECONDS)
            with self._locked():
                send_frame(self.control, ["reap"])
                reply = recv_frame(self.control)
        except (PeerGone, OSError):
            return None
        finally:
            if self.control is not None:
                self.control.settimeout(None)
        code = reply[1] if isinstance(reply, list) and len(reply) == 2 and reply[0] == "ret" else None
        return code if type(code) is int else None


def _within(module: Any, packages: Sequence[str]) -> bool:
    """Is `module` (a module's name) one of `packages` or inside one?"""
    for package in packages:
        if module == package or str(module).startswith(package + "."):
            return True
    return False


def _asked(peer: Peer, reads: Sequence[Read]) -> list[Any]:
    return [[_named(name), [peer.encode(a) for a in args]] for name, args in reads]


def _named(name: Any) -> Any:
    """A call in turn: a method's name, or a kit function (the kit's own method, applied to
    the object whatever its class overrides) by its module and qualified name."""
    if isinstance(name, FunctionType):
        return {"kit": [name.__module__, name.__qualname__]}
    return exact(name)


def _digests(pending: list[Digest]) -> list[Any]:
    """The request that draws `pending` in the learner's process."""
    return ["digests", [[digest.kind, digest.number] for digest in pending]]


def _fill(pending: list[Digest], drawn: Any) -> None:
    if not (type(drawn) is list and len(drawn) == len(pending) and all(d is None or type(d) is str for d in drawn)):
        raise ProtocolError("digests of no known shape")
    for digest, found in zip(pending, drawn):
        digest.value = object() if found is None else (digest.kind, found)


class Digest:
    """A copy's memory, or an object's picture, drawn in the learner's process when first
    compared or hashed, together with every other digest asked for since (the explorer makes
    a state's key of several: the world's picture of a store, each process's memory), and
    always before the learner's code runs again. Equal to a digest of the same drawing."""

    __slots__ = ("_peer", "kind", "number", "value")

    def __init__(self, peer: JudgePeer, kind: str, number: int) -> None:
        self._peer, self.kind, self.number = peer, kind, number
        self.value: Any = None
        peer.pending.append(self)

    def _drawn(self) -> Any:
        if self.value is None:
            self._peer.draw()
        return self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Digest) and self._drawn() == other._drawn()

    def __hash__(self) -> int:
        return hash(self._drawn())

    def __repr__(self) -> str:
        return f"Digest({self.kind}, {self._drawn()!r})"


@dataclass
class CheckRun:
    """One check's view of the learner: a worker process forked for the check (the answer's
    restarts within it are copies made there, see `RemoteAnswer.restart`)."""

    learner: Learner
    peer: JudgePeer | None = None  # the worker forked for this check; None once closed
    generation: int = 0
    pid: int = 0

    def __post_init__(self) -> None:
        self.peer = self.learner.fork()
        self.pid = os.getpid()

    def channel(self) -> JudgePeer:
        """The check's worker; a check going on after its worker was closed meets LearnerDied."""
        if self.peer is None:
            raise LearnerDied("the check's learner process is closed")
        return self.peer

    def own(self) -> None:
        """In a process the check forked (lab 08's real workers), a worker of its own: calls
        never share a socket between processes."""
        if os.getpid() != self.pid:
            self.peer = self.learner.fork()
            self.pid = os.getpid()
            self.generation += 1

    def answer(self, name: str) -> Any:
        """What the learner's namespace holds under `name`: a RemoteAnswer for a function or
        class, else the value itself (so a check can say what it got instead; None if unbound)."""
        found = self._lookup(name)
        if found["kind"] in ("value", "missing") or not isinstance(found.get("value"), Handle):
            return found.get("value")
        return RemoteAnswer(self, name, found["kind"], found["value"], self.generation)

    def lookup(self, name: str) -> tuple[bool, Any]:
        """(bound?, what the learner's namespace holds under `name`: a value, or a handle)."""
        found = self._lookup(name)
        return found["kind"] != "missing", found.get("value")

    def _lookup(self, name: str) -> dict[str, Any]:
        found = self.channel().request(["lookup", name])
        if not (isinstance(found, dict) and found.get("kind") in ("function", "class", "value", "missing")):
            raise ProtocolError("a lookup of no known shape")
        return found

    def died(self, gone: BaseException | None = None) -> str:
        """Why the worker is gone, once a call found it gone: its exit status, asked (once) of
        the cells' process, else why that process is gone."""
        if self.peer is None:
            return gone.cause if isinstance(gone, LearnerDied) else death(None)
        with contextlib.suppress(OSError):
            self.peer.sock.close()
        self.peer = None
        return death(self.learner.reap()) if self.learner.control is not None else death(None)

    def close(self) -> None:
        if self.peer is not None:
            with contextlib.suppress(OSError):
                self.peer.sock.close()
            self.peer = None
            self.learner.reap()


class RemoteAnswer(ForeignAnswer):
    """The learner's function or class, living in a worker process; calls cross to it."""

    def __init__(self, run: CheckRun, name: str, kind: str, handle: Handle | None, generation: int) -> None:
        self.kind = kind
        self.__name__ = name
        self._run, self._handle, self._generation = run, handle, generation

    def _current(self) -> Handle:
        self._run.own()
        if self._generation != self._run.generation:  # restarted since: the same name in the new worker
            fresh = self._run.answer(self.__name__)
            if not isinstance(fresh, RemoteAnswer):
                raise LearnerDied("the answer is gone after a restart")
            self._handle, self._generation = fresh._handle, fresh._generation
        if self._handle is None:  # a restart not made yet: made now
            found = self._run.channel().request(["restart", self.__name__])
            if not isinstance(found, Handle):
                raise ProtocolError("a restart of no known shape")
            self._handle = found
        return self._handle

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._run.own()
        if self._handle is None and self._generation == self._run.generation:
            return self._made_and_called(args, kwargs)
        return self._current()(*args, **kwargs)

    def _made_and_called(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A restart's first call, in the same request as the restart: the copy comes back with
        what the call returned, or attached to what it raised."""
        peer = self._run.channel()
        peer.attached = None
        try:
            made = peer.call_with(["restartcall", self.__name__], args, kwargs)
        except BaseException:
            found, peer.attached = peer.attached, None
            if isinstance(found, Handle) and found._peer is peer:
                self._handle = found
            raise
        if not (isinstance(made, list) and len(made) == 2 and isinstance(made[0], Handle)):
            raise ProtocolError("a restart and call of no known shape")
        self._handle = made[0]
        return made[1]

    def each(self, calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[tuple[Any, BaseException | None]]:
        """The answer called on each (args, kwargs) in turn, in ONE message: (value, None) per
        call, in order, up to the first that raised, whose (None, exception) is the last. For
        calls whose arguments do not depend on earlier results (a grid of inputs): each call
        is still a step of its own in the learner's process, only the round trips are saved."""
        handle = self._current()
        peer = handle._peer
        batch = [
            [[peer.encode(a) for a in args], {str(k): peer.encode(v) for k, v in kwargs.items()}]
            for args, kwargs in calls
        ]
        outcomes = peer.request(["each", handle._id, batch])
        if not (isinstance(outcomes, list) and 0 < len(outcomes) <= len(calls)):
            raise ProtocolError("a batch's outcomes of no known shape")
        found: list[tuple[Any, BaseException | None]] = []
        for outcome in outcomes:
            if not (isinstance(outcome, list) and len(outcome) == 2 and outcome[0] in ("ret", "exc")):
                raise ProtocolError("a call's outcome of no known shape")
            if found and found[-1][1] is not None:
                raise ProtocolError("a batch that went on past its first exception")
            found.append((outcome[1], None) if outcome[0] == "ret" else (None, peer.exception(outcome[1])))
        if len(found) < len(calls) and found[-1][1] is None:
            raise ProtocolError("a batch that stopped without an exception")
        return found

    def is_stub(self) -> bool:
        handle = self._current()
        return handle._peer.scalar(["stub", handle._id], bool)

    def restart(self) -> RemoteAnswer:
        """A copy of the answer as the cells left it, on fresh memory, made in the worker by the
        kit's own `restart` (each copy its own namespace: two workers of a schedule share
        nothing), so a schedule costs no process start. The copy is made when first used:
        when that use is a call, copy and call are one request."""
        if self._handle is None:
            self._run.own()
        else:
            self._current()
        return RemoteAnswer(self._run, self.__name__, self.kind, None, self._run.generation)

    def memory(self) -> Any:
        handle = self._current()
        return Digest(self._run.channel(), "memory", handle._id)

    def picture(self, value: Any) -> Any:
        handle = self._current()
        if not (isinstance(value, Handle) and value._peer is handle._peer):
            return object()
        return Digest(self._run.channel(), "picture", value._id)

    def twins(self, values: Sequence[Any], swap: Sequence[tuple[Any, Any]]) -> list[Any]:
        from shopops_lab.checks.fresh import NotCopyable

        peer = self._run.channel()
        asked: list[int] = []
        for value in values:
            if isinstance(value, RemoteAnswer):
                if value._generation != self._run.generation:
                    raise NotCopyable("the learner's process was started again since")
                if value._handle is None:
                    continue  # a restart not made yet: its twin is one too
                value = value._handle
            if not (isinstance(value, Handle) and value._peer is peer):
                raise NotCopyable(f"{type(value).__name__} is not an object of the learner's process")
            asked.append(value._id)
        pairs = [[peer.encode(original), peer.encode(counterpart)] for original, counterpart in swap]
        made = peer.request(["twins", asked, pairs]) if asked else []
        if made is None:
            raise NotCopyable("the learner's process could not copy them")
        if not (isinstance(made, list) and len(made) == len(asked) and all(isinstance(h, Handle) for h in made)):
            raise ProtocolError("twins of no known shape")
        handles = iter(made)  # in the order asked; a copy not made yet is twinned by another not made yet
        twins: list[Any] = []
        for value in values:
            if isinstance(value, RemoteAnswer):
                handle = None if value._handle is None else next(handles)
                twins.append(RemoteAnswer(self._run, value.__name__, value.kind, handle, value._generation))
            else:
                twins.append(next(handles))
        return twins

    def in_turn(self, value: Any, calls: Sequence[Read]) -> list[Any]:
        peer = self._owner(value)
        found = peer.request(["calls", value._id, _asked(peer, calls)])
        if not (isinstance(found, list) and len(found) == len(calls)):
            raise ProtocolError("answers in turn of no known shape")
        return found

    def applied(self, function: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        handle = self._current()
        (found,) = self.in_turn(handle, [(function, args)])
        return found

    def around(
        self, value: Any, call: Call, reads: Sequence[Read]
    ) -> tuple[list[Any], tuple[Any, Exception | None], list[Any]]:
        peer = self._owner(value)
        name, args, kwargs = call
        found = peer.call_with(["around", value._id, exact(name), _asked(peer, reads)], args, dict(kwargs))
        if not (
            isinstance(found, list)
            and len(found) == 3
            and all(isinstance(read, list) and len(read) == len(reads) for read in (found[0], found[2]))
            and isinstance(found[1], list)
            and len(found[1]) == 2
            and found[1][0] in ("ret", "exc")
        ):
            raise ProtocolError("a call's reads around it of no known shape")
        before, (how, what), after = found
        if how == "ret":
            return before, (what, None), after
        error = peer.exception(what)
        if isinstance(error, NotAttempted) or not isinstance(error, Exception):
            raise error  # the stub, as `attempt` lets it through (or the learner's BaseException)
        return before, (None, error), after

    def _owner(self, value: Any) -> Peer:
        """The channel to `value`'s process: an object the answer made, in the current copy's."""
        peer = self._current()._peer
        if not (isinstance(value, Handle) and value._peer is peer):
            raise ProtocolError("a read in turn of an object that is not of the answer's process")
        return peer

    def watch(self, functions: tuple[Callable[..., Any], ...]) -> None:
        names = []
        for function in functions:
            owner, _, name = function.__qualname__.rpartition(".")
            names.append([function.__module__, owner, name])
        handle = self._current()
        handle._peer.request(["watch", names])

    def watched(self) -> frozenset[str]:
        handle = self._current()
        ran = handle._peer.request(["watched"])
        if not (isinstance(ran, list) and all(type(name) is str for name in ran)):
            raise ProtocolError("watched kit functions of no known shape")
        return frozenset(ran)

    @property
    def __bases__(self) -> tuple[type, ...]:
        """The kit's classes the learner's class derives from, so `issubclass(answer, KitClass)`
        works on the judge's side (Python walks `__bases__` of what is not a class)."""
        handle = self._current()
        names = handle._peer.request(["bases", handle._id])
        found = []
        for name in names if isinstance(names, list) else ():
            with contextlib.suppress(ProtocolError):
                found.append(kit_class(name))
        return tuple(found)

    def __repr__(self) -> str:
        return f"<the learner's {self.kind} {self.__name__}>"
