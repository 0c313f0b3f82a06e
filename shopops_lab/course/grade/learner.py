"""The learner's process: the only place a submission's code runs.

Never a fork of the grader, which holds the masters and the other submissions in memory:
a fork of the zygote (`zygote.py`, a fresh interpreter that only loaded the kit), or a
fresh interpreter, started for the judge with one socket. Before any learner code it
confines itself (`confine`): as root, a mount namespace of its own in which the key, the
output folder and the submissions are empty, then another uid; as an ordinary user, a user
namespace of its own, so its processes are counted from its start; its limits (memory, file
size, CPU, processes); its output silenced; last, Landlock walls (`confinement.rules`).
It then runs the cells the judge sends, in one namespace (`Cells`). For each check the
judge asks it to fork a worker (`Worker`) from that namespace as it stands: the check's
calls run there, so nothing a check did reaches the next check. Within a check, a restart
(the explorer's, at the start of every schedule and after every simulated crash) is a copy
of the answer on fresh memory, made here by the kit's own `restart` from a copy taken
before any call ran; each copy has its own namespace, so two workers of a schedule share
nothing, as in the notebook.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import hashlib
import json
import os
import random
import signal
import socket
import sys
from collections.abc import Iterator
from types import CodeType, FunctionType
from typing import Any

from shopops_lab.course.grade import landlock, view
from shopops_lab.course.grade.confinement import KIT_PACKAGE, count_from_here, pin
from shopops_lab.course.grade.wire import (
    Attached,
    Handle,
    Peer,
    PeerGone,
    ProtocolError,
    _Method,
    exact,
    kit_class,
    kit_name,
    recv_frame,
    send_frame,
)

FILE_LIMIT = 64 * 2**20  # bytes one file written by the learner's code may reach
PROCESS_LIMIT = 64  # processes of the submission's own uid (as root), or of its user namespace


# --- confinement (before any learner code) ----------------------------------------------------


def _set_limits(config: dict[str, Any]) -> None:
    import resource

    rules = [(resource.RLIMIT_FSIZE, FILE_LIMIT), (resource.RLIMIT_CPU, int(config["cpu_seconds"]) + 5)]
    if config.get("uid") is not None or config.get("own_count"):  # counted from its start
        rules.append((resource.RLIMIT_NPROC, PROCESS_LIMIT))
    if config.get("memory_mb") is not None and os.path.exists("/proc/self/statm"):  # Linux enforces it
        with open("/proc/self/statm") as handle:
            base = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        rules.append((resource.RLIMIT_AS, base + int(config["memory_mb"]) * 2**20))
    for rule, value in rules:
        _, hard = resource.getrlimit(rule)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(rule, (value, hard))
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large file fails its write, not the process


class SetupError(Exception):
    """The learner's process could not be made ready (the grader's failure: no learner code ran)."""


@contextlib.contextmanager
def _step(what: str) -> Iterator[None]:
    try:
        yield
    except SetupError:
        raise
    except Exception as exc:  # noqa: BLE001 - named for the instructor, with the step it broke
        raise SetupError(f"the learner's process could not {what} ({type(exc).__name__}: {exc})") from None


def confine(config: dict[str, Any]) -> None:
    """Everything that must hold before the first learner cell: raises SetupError if it
    cannot (the grader's failure, never the learner's: no learner code has run)."""
    pin(config.get("core"))
    uid = config.get("uid")
    needs = view.needed(config["scratch"])
    if uid is not None and config.get("view"):
        with _step("make its view of the file system"):
            view.make(needs, config.get("hide", ()), uid)
    if sys.platform != "win32":
        with _step("set its limits"):
            _set_limits(config)
    if uid is not None:
        with _step(f"take uid {uid}"):
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            if os.getuid() != uid or os.geteuid() != uid:
                raise OSError("the uid did not change")
    closed = view.unreadable(needs)
    if closed:
        raise SetupError(
            f"the learner's process (uid {os.getuid()}) cannot read {', '.join(closed[:3])}: keep the kit and "
            "Python where other users may read them (chmod o+rx on each folder above them), or let the grader "
            "make a mount namespace of its own (root on Linux; a container needs --cap-add SYS_ADMIN)"
        )
    with _step(f"enter its scratch folder {config['scratch']}"):
        os.chdir(config["scratch"])
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1) if config.get("debug") else (0, 1, 2):
        os.dup2(devnull, fd)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    if not config.get("debug"):
        sys.stderr = sys.stdout
    sys.stdin = open(os.devnull)  # noqa: SIM115
    walls = config.get("landlock")
    if walls:
        with _step(f"wall itself in with Landlock (ABI {walls['abi']})"):
            rules = landlock.Rules(
                read=tuple(walls["read"]), write=tuple(walls["write"]), listed=tuple(walls.get("listed", ()))
            )
            _wall_in(rules, int(walls["abi"]))
    random.seed(0)


def _wall_in(rules: landlock.Rules, abi: int) -> None:
    """Landlock, last (the mounts and the uid are set, every file it needs to set up open);
    then Python's library, the kit's package and every folder it was given must open: a
    module the learner's code imports later must not fail for a reason of the grader's."""
    landlock.restrict(rules, abi)
    for path in (os.path.dirname(os.__file__), str(KIT_PACKAGE), *rules.read, *rules.write):
        if os.path.isdir(path):
            try:
                os.close(os.open(path, os.O_RDONLY | os.O_DIRECTORY))
            except OSError as exc:
                raise SetupError(f"the learner's process cannot read {path} within its Landlock walls: {exc}") from None


# --- the cells --------------------------------------------------------------------------------


def compile_cell(source: str, filename: str) -> CodeType:
    try:
        return compile(source, filename, "exec")
    except SyntaxError:
        from IPython.core.inputtransformer2 import TransformerManager  # %magic and !shell lines

        return compile(TransformerManager().transform_cell(source), filename, "exec")  # type: ignore[no-untyped-call]


def _outcome(exc: BaseException) -> dict[str, Any]:
    """How a cell ended, for the judge (which only reads it as a report about the learner)."""
    if isinstance(exc, SystemExit):
        code = exc.code if exc.code is None or isinstance(exc.code, (int, str)) else str(exc.code)
        return {"exit": exact(code)}
    text = ""
    with contextlib.suppress(Exception):
        text = exact(str(exc))[:4000]
    return {
        "type": exact(type(exc).__name__),
        "msg": text if isinstance(text, str) else "",
        "base": not isinstance(exc, Exception),
    }


class Cells:
    """The first learner process: runs cells, forks workers, reaps them."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        self.workers: list[int] = []

    def serve(self) -> None:
        while True:
            try:
                message = recv_frame(self.sock)
            except (PeerGone, ProtocolError):
                os._exit(0)
            kind = message[0]
            if kind == "exec":
                self.execute(message[1], message[2])
            elif kind == "fork":
                self.fork()
            elif kind == "reap":
                send_frame(self.sock, ["ret", self.reap()])
            else:
                os._exit(0)

    def execute(self, source: str, filename: str) -> None:
        try:
            exec(compile_cell(source, filename), self.namespace)
        except BaseException as exc:  # noqa: BLE001 - reported, the judge decides what it costs
            send_frame(self.sock, ["exc", _outcome(exc)])
            return
        send_frame(self.sock, ["ret", None])

    def fork(self) -> None:
        _, fds, _, _ = socket.recv_fds(self.sock, 1, 1)
        if len(fds) != 1:
            os._exit(70)
        pid = os.fork()
        if pid == 0:
            with contextlib.suppress(OSError):
                self.sock.close()
            Worker(socket.socket(fileno=fds[0]), self.namespace).loop()
        os.close(fds[0])
        self.workers.append(pid)
        send_frame(self.sock, ["ret", None])

    def reap(self) -> int | None:
        """The exit status of the last worker (killed first if it still runs): a negative
        signal number, or the exit code."""
        if not self.workers:
            return None
        pid = self.workers.pop()
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return None
        return os.waitstatus_to_exitcode(status)


# --- a worker: the check's calls --------------------------------------------------------------


class Worker(Peer):
    """A fork of the cells' process, serving one check's calls (the judge may read anything)."""

    def __init__(self, sock: socket.socket, namespace: dict[str, Any]) -> None:
        super().__init__(sock, public_only=False)
        self.namespace = namespace
        self.origin: dict[int, tuple[int, BaseException]] = {}  # id(exception) -> the judge's number
        self.pristine: dict[str, Any] = {}  # name -> a copy of the answer no call has run
        self.watching: dict[Any, str] = {}  # code of a kit function -> its qualified name
        self.ran: set[str] = set()

    def loop(self) -> None:
        """Answer the judge's requests until it says bye (or goes). A request that arrives
        while this side waits on a call of its own (the judge asks for `str()` of an object
        the learner handed the kit) is answered by `serve` inside `request`."""
        while True:
            try:
                message = self.frames.read()
                if not (type(message) is list and message and type(message[0]) is str):
                    break
                if message[0] == "bye":
                    break
                super().serve(message)
            except (PeerGone, ProtocolError) as exc:
                if os.environ.get("SHOPOPS_GRADE_DEBUG"):
                    import traceback

                    traceback.print_exception(exc)
                break
        with contextlib.suppress(OSError):
            self.flush()
        os._exit(0)

    def answer(self, message: list[Any], given: dict[str, Any]) -> Any:
        kind = message[0]
        if kind == "lookup":
            return self.lookup(message[1])
        if kind == "bases":
            return [kit_name(base) for base in self.target(message[1]).__mro__ if kit_name(base) is not None]
        if kind == "stub":
            from shopops_lab.checks.base import is_stub

            return bool(is_stub(self.target(message[1])))
        if kind == "each" and len(message) == 3 and type(message[2]) is list:
            return self.each(self.target(message[1]), message[2])
        return self.kit_question(message, given)

    def each(self, target: Any, calls: list[Any]) -> list[list[Any]]:
        """`target` called on each [args, kwargs] in turn, each call a step of its own (kit
        calls inside it cross as usual): ["ret", value] per call, up to the first that raised,
        whose ["exc", exception] is the last (the check stops there, as after one call). A
        BaseException (the judge's planned crash, or the learner's own) ends the batch, as it
        would end a single call. Arguments are not copied back."""
        outcomes: list[list[Any]] = []
        for call in calls:
            if not (type(call) is list and len(call) == 2):
                raise ProtocolError("a call of no known shape in a batch")
            outcomes.append(self._outcome(target, call[0], call[1], {}))
            if outcomes[-1][0] == "exc":
                break
        return outcomes

    def _outcome(self, target: Any, args: Any, kwargs: Any, given: dict[str, Any]) -> list[Any]:
        """["ret", value] or ["exc", exception] of one call: a BaseException ends the request."""
        try:
            return ["ret", self._invoke(target, args, kwargs, given)]
        except Exception as exc:  # noqa: BLE001 - the judge gets it, as that call's exception
            described = self.describe(exc)
            if "judge" in described:  # the judge's own, come back: by class and fields (it is not kept)
                described = Peer.describe(self, exc)
            return ["exc", described]

    def around(self, target: Any, name: str, reads: list[Any], args: Any, kwargs: Any, given: dict[str, Any]) -> Any:
        """`reads` in turn, then `target.name(*args, **kwargs)` as one step (its outcome, as in
        `each`; a container argument it fills goes back), then `reads` again."""
        before = self.in_turn(target, reads)
        outcome = self._outcome(self.attribute(target, name), args, kwargs, given)
        return [before, outcome, self.in_turn(target, reads)]

    def twins(self, targets: list[Any], pairs: list[Any]) -> list[Any] | None:
        """Copies of `targets` taken together, as they are now (`fresh.twins`), or None when
        they cannot be: a handle of the judge's they hold becomes its counterpart in `pairs`,
        and one with none refuses them."""
        from shopops_lab.checks.base import _learners
        from shopops_lab.checks.fresh import NotCopyable, twins

        if not all(type(pair) is list and len(pair) == 2 for pair in pairs):
            raise ProtocolError("counterparts of no known shape")
        swap = [(self.decode(original), self.decode(counterpart)) for original, counterpart in pairs]
        try:
            return twins(targets, _learners, swap=swap, foreign=(Handle, _Method))
        except NotCopyable:
            return None

    def in_turn(self, target: Any, calls: list[Any]) -> list[Any]:
        """`target.name(*args)` for each [name, args] in order (a check's reads of one state,
        in one message); the first that raises is the answer, as in a row of plain calls."""
        found = []
        for call in calls:
            if not (type(call) is list and len(call) == 2 and type(call[1]) is list):
                raise ProtocolError("a call in turn of no known shape")
            if type(call[0]) is str:
                found.append(self._invoke(self.attribute(target, call[0]), call[1], {}, {}))
            else:  # {"kit": [module, qualname]}: the kit's own function of `target` (its class may override it)
                named = call[0].get("kit") if type(call[0]) is dict else None
                function = _kit_function(*named) if type(named) is list and len(named) == 2 else None
                if function is None:
                    raise ProtocolError("a kit function this process does not have")
                found.append(self._invoke(functools.partial(function, target), call[1], {}, {}))
        return found

    def kit_question(self, message: list[Any], given: dict[str, Any]) -> Any:
        """The explorer's questions, answered by the kit's own code in this process."""
        from shopops_lab.checks.base import restart

        kind = message[0]
        if kind == "restart" and len(message) == 2 and message[1] in self.pristine:
            return restart(self.pristine[message[1]])
        if kind == "restartcall" and len(message) == 4 and message[1] in self.pristine:
            copy = restart(self.pristine[message[1]])  # a restart and its first call: one request
            try:
                return [copy, self._invoke(copy, message[2], message[3], given)]
            except BaseException as exc:  # noqa: BLE001 - answered as the call's exception, with the copy
                raise Attached(exc, copy) from None
        if kind == "digests" and len(message) == 2 and type(message[1]) is list:
            return [self.digest(asked) for asked in message[1]]
        if kind == "twins" and len(message) == 3 and type(message[1]) is list and type(message[2]) is list:
            return self.twins([self.target(number) for number in message[1]], message[2])
        if kind == "calls" and len(message) == 3 and type(message[2]) is list:
            return self.in_turn(self.target(message[1]), message[2])
        if kind == "around" and len(message) == 6 and type(message[2]) is str and type(message[3]) is list:
            return self.around(self.target(message[1]), message[2], message[3], message[4], message[5], given)
        if kind == "watch" and len(message) == 2 and type(message[1]) is list:
            self.watching, self.ran = dict(_kit_codes(message[1])), set()
            return None
        if kind == "watched":
            self.watching, ran = {}, sorted(self.ran)
            return ran
        return super().answer(message, given)

    def digest(self, asked: Any) -> str | None:
        """["memory", n]: what copy n keeps in memory; ["picture", n]: object n; a hash of the
        kit's own picture of it, or None where it cannot be seen."""
        from shopops_lab.checks.fresh import canonical_text, memory_text

        if not (type(asked) is list and len(asked) == 2 and asked[0] in ("memory", "picture")):
            raise ProtocolError("a digest of no known kind")
        target = self.target(asked[1])
        drawn = memory_text(target) if asked[0] == "memory" else canonical_text(target)
        return None if drawn is None else hashlib.sha256(drawn.encode("utf-8", "replace")).hexdigest()

    def lookup(self, name: str) -> dict[str, Any]:
        from shopops_lab.checks.base import restart

        if name not in self.namespace:
            return {"kind": "missing"}
        value = self.namespace.get(name)
        kind = "class" if isinstance(value, type) else "function" if callable(value) else "value"
        if kind != "value" and name not in self.pristine:
            self.pristine[name] = restart(value)  # before any call: what every restart copies
        return {"kind": kind, "value": value}

    def invoke(self, target: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        from shopops_lab.checks.base import call_answer

        if not self.watching:
            return call_answer(target, *args, **kwargs)
        watching, ran = self.watching, self.ran

        def note(frame: Any, event: str, arg: Any) -> None:
            if event == "call" and frame.f_code in watching:
                ran.add(watching[frame.f_code])

        before = sys.getprofile()
        sys.setprofile(note)
        try:
            return call_answer(target, *args, **kwargs)
        finally:
            sys.setprofile(before)

    def describe(self, exc: BaseException) -> dict[str, Any]:
        from shopops_lab.checks.base import NotAttempted, _where

        if id(exc) in self.origin and self.origin[id(exc)][1] is exc:  # the judge's own, come back
            described = {"judge": self.origin[id(exc)][0]}
            with contextlib.suppress(Exception):
                described["where"] = exact(_where(exc))  # the line of the learner's it came through
            return described
        if isinstance(exc, NotAttempted):
            return {"notattempted": True}
        if isinstance(exc, SystemExit):
            return _outcome(exc)
        described = super().describe(exc)
        with contextlib.suppress(Exception):
            described["where"] = exact(_where(exc))
        return described

    def rebuild(self, described: dict[str, Any]) -> BaseException:
        """The judge's exception, raised into the learner's code as the kit's own class (or the
        built-in one), so `except StaleTokenError:` works as it would in one process."""
        exc: BaseException | None = None
        if "kit" in described:
            with contextlib.suppress(Exception):
                klass = kit_class(described["kit"][0])
                exc = klass(**{k: self.decode(v) for k, v in described["kit"][1].items()})
        if exc is None and "builtin" in described:
            builtin = getattr(builtins, described["builtin"], None)
            if isinstance(builtin, type) and issubclass(builtin, BaseException):
                with contextlib.suppress(Exception):
                    exc = builtin(described["msg"])
        if exc is None:
            parent = BaseException if described.get("base") else Exception
            name = described["type"] if str(described["type"]).isidentifier() else "JudgeError"
            exc = type(name, (parent,), {})(described["msg"])
        self.origin[id(exc)] = (described["n"], exc)
        return exc


def _kit_codes(names: list[Any]) -> list[tuple[Any, str]]:
    """The code of each kit function named [module, owner, name] (a kit module already loaded)."""
    found = []
    for entry in names:
        if not (type(entry) is list and len(entry) == 3 and all(type(part) is str for part in entry)):
            raise ProtocolError("a kit function that is not [module, owner, name]")
        module, owner, name = entry
        qualname = f"{owner}.{name}" if owner else name
        function = _kit_function(module, qualname)
        if function is not None:
            found.append((function.__code__, qualname))
    return found


def _kit_function(module: Any, qualname: Any) -> FunctionType | None:
    """The kit's function `module`.`qualname` (a method of one of its classes), in a kit
    module already loaded; None where there is none."""
    found: Any = None
    if type(module) is str and (module == "shopops_lab" or module.startswith("shopops_lab.")):
        found = sys.modules.get(module)
        for part in str(qualname).split("."):
            found = getattr(found, part, None)
    return found if isinstance(found, FunctionType) and found.__module__ == module else None


def preload(imports: Any) -> None:
    """Load what the learner's code uses before it runs: its lab's imports and checks
    (`Master.learner_imports`). Only those: a lab 05 notebook does not pay for lab 07's
    simulator. Anything else a learner's cell imports loads when it does, as anywhere."""
    from importlib import import_module

    os.environ.setdefault("MPLBACKEND", "Agg")
    for module in imports:
        with contextlib.suppress(Exception):
            import_module(module)


def serve(config: dict[str, Any]) -> None:
    """Load, confine, serve the cells on the socket `config["fd"]`; never returns."""
    sock = socket.socket(fileno=config["fd"])
    try:
        if config.get("own_count"):  # first: a process with threads (numpy starts some) cannot
            with _step("count its processes in a user namespace of its own"):
                count_from_here()
        preload(config.get("imports", ()))
        confine(config)
    except BaseException as exc:  # noqa: BLE001 - before any learner code: the grader's own failure
        with contextlib.suppress(Exception):
            send_frame(sock, ["failed", str(exc) if isinstance(exc, SetupError) else f"{type(exc).__name__}: {exc}"])
        os._exit(70)
    send_frame(sock, ["ready"])
    Cells(sock).serve()


def main(raw: str) -> None:
    """Entry point of a fresh interpreter (where there is no zygote to fork it)."""
    serve(json.loads(raw))
