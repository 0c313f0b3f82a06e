"""The judge: the process that grades one submission, without running any of its code.

The parent loads the kit once (`Warm.prepare`): the modules the masters import, the check
object behind every test cell, and a snapshot of the kit's state. Each submission then
gets a judge forked from that warm parent (or, where fork is missing, a fresh interpreter
that warms itself first). The judge starts the learner's process (`remote.Learner`: forked by the
zygote, or a fresh interpreter, confined before any learner code, see `learner.py`) and
walks the plan (the cells that can reach a verdict, `Plan.needed`): the master's code
cells and the learner's answers run *there*; every test cell backed by a
kit check runs *here*, as a call of the check object taken beforehand, with the learner's
answers as `RemoteAnswer`s whose calls cross to a worker forked in the learner's process.
So nothing the learner's code does to its own memory (rebinding checks, patching the kit,
flipping enum values, walking the heap or the stack, rewriting pipes) reaches a verdict.
The judge keeps the time (its own timer, which learner code cannot swallow): a cell past
its limit, or a learner process that dies or speaks off the protocol, stops that cell,
and a fresh learner process replays the cells that ran.

The judge reports to the parent over a pipe, one typed message per event (`messages.py`:
the cell it starts, each verdict, a cell stopped, each learner process it starts, a note
for the instructor, its own failure, done). It never reports a score: the parent scores.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import gc
import math
import operator
import os
import random
import resource
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib import import_module
from types import CodeType, FunctionType, ModuleType
from typing import Any

from shopops_lab.checks.base import NotAttempted
from shopops_lab.course.errors import GradingEnvironmentError
from shopops_lab.course.grade import confinement, landlock
from shopops_lab.course.grade.key import Key, Kind
from shopops_lab.course.grade.learner import compile_cell
from shopops_lab.course.grade.messages import (
    CellStarted,
    CellStopped,
    Done,
    GraderFailed,
    LearnerStarted,
    Message,
    Note,
    Restarting,
    Verdict,
    encode,
)
from shopops_lab.course.grade.rebuild import Plan, PlannedCell, Role
from shopops_lab.course.grade.remote import (
    CheckRun,
    Learner,
    LearnerDied,
    LearnerNotStarted,
    LearnerRaised,
    LearnerRaisedBase,
)
from shopops_lab.course.grade.wire import Handle, PeerGone, ProtocolError
from shopops_lab.course.grade.zygote import COMMON
from shopops_lab.errors import CheckStopped, ShopOpsError

KIT = "shopops_lab"
MESSAGE_LIMIT = 4000  # characters of one check message kept (the learner's own exception text can be long)
EVIDENCE_LIMIT = 20  # lines of evidence kept
FUNCTION_PARTS = ("__code__", "__defaults__", "__kwdefaults__")
FILE_LIMIT = 64 * 2**20  # bytes one file written by the learner's code may reach


class CellTimeout(CheckStopped):
    """A cell ran past its limit: the grader pressing *stop*. A CheckStopped, the one kind of
    exception besides the learner's own *stop* that a check lets through (it turns every
    other one, even a BaseException, into a verdict)."""


@dataclass(frozen=True)
class Limits:
    """Per cell (so per exercise) and per notebook, in seconds; memory in MB (None: no limit)."""

    cell_seconds: float = 60.0
    notebook_seconds: float = 600.0
    memory_mb: int | None = 2048

    def __post_init__(self) -> None:
        from shopops_lab.errors import BadArgumentError

        for name, value, most in (
            ("--timeout", self.cell_seconds, 7 * 24 * 3600.0),
            ("--notebook-timeout", self.notebook_seconds, 7 * 24 * 3600.0),
            ("--memory", 1 if self.memory_mb is None else self.memory_mb, 2**20),
        ):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 < value <= most):
                raise BadArgumentError(
                    field=name, problem=f"is {value!r}", fix=f"pass a number above 0 and at most {most:g}"
                )


def _is_kit(module_name: str | None) -> bool:
    return module_name in (KIT, "builtins") or (module_name or "").startswith(KIT + ".")


@dataclass(frozen=True, slots=True)
class _Saved:
    """One namespace as it was: compared by identity, at C speed (`==` could run learner code)."""

    namespace: dict[str, Any] | Any  # a module's dict, or a class's mappingproxy
    saved: dict[str, Any]
    keys: tuple[str, ...]
    values: tuple[Any, ...]

    @classmethod
    def of(cls, namespace: Any) -> _Saved:
        saved = dict(namespace)
        return cls(namespace, saved, tuple(saved), tuple(saved.values()))

    def changed(self) -> bool:
        return len(self.namespace) != len(self.keys) or not all(
            map(operator.is_, map(self.namespace.get, self.keys), self.values)
        )

    def changed_keys(self) -> list[str]:
        current, saved = self.namespace, self.saved
        return sorted(
            key for key in set(current) | set(saved) if current.get(key, saved) is not saved.get(key, current)
        )


@dataclass(frozen=True)
class KitSnapshot:
    """The kit's mutable surface, as it was before any learner code ran: the globals of every
    `shopops_lab` module, of builtins and of every module the kit uses; the attributes of the
    kit's classes and the code of its functions; the fields of the check objects; and the
    kit's `sys.modules` entries. `restore()` puts it all back and names what it fixed in the
    kit itself (other modules may legitimately cache things in their globals, such as
    `tempfile.tempdir`: those are put back without a word)."""

    modules: tuple[tuple[str, _Saved], ...]
    classes: tuple[tuple[type, _Saved], ...]
    functions: tuple[FunctionType, ...]
    code: tuple[tuple[CodeType, Any, Any], ...]
    objects: tuple[_Saved, ...]
    entries: tuple[tuple[str, ModuleType], ...]

    @classmethod
    def take(cls, graders: Iterable[Any]) -> KitSnapshot:
        kit = {
            name: module
            for name, module in list(sys.modules.items())
            if isinstance(module, ModuleType) and _is_kit(name)
        }
        used = {
            value.__name__: value
            for module in kit.values()
            for value in vars(module).values()
            if isinstance(value, ModuleType) and value is not sys
        }
        modules = {**used, **kit, "builtins": builtins}
        values = [value for module in kit.values() for value in vars(module).values()]
        classes = {id(value): value for value in values if isinstance(value, type) and _is_kit(value.__module__)}
        functions = {
            id(value): value for value in values if isinstance(value, FunctionType) and _is_kit(value.__module__)
        }
        for klass in classes.values():  # methods are functions too
            functions.update((id(value), value) for value in vars(klass).values() if isinstance(value, FunctionType))
        return cls(
            modules=tuple((name, _Saved.of(vars(module))) for name, module in sorted(modules.items())),
            classes=tuple((klass, _Saved.of(vars(klass))) for klass in classes.values()),
            functions=tuple(functions.values()),
            code=tuple((f.__code__, f.__defaults__, f.__kwdefaults__) for f in functions.values()),
            objects=tuple(_Saved.of(vars(grader)) for grader in graders),
            entries=tuple(sorted(kit.items())),
        )

    def restore(self) -> list[str]:
        """Undo every change since the snapshot; return the kit's changed names (dotted)."""
        changed: list[str] = []
        for name, module in self.entries:
            if sys.modules.get(name) is not module:
                sys.modules[name] = module
                changed.append(f"sys.modules[{name!r}]")
        for name, saved in self.modules:
            if saved.changed():
                namespace = saved.namespace
                keys = saved.changed_keys()
                imported = {
                    key: namespace[key]
                    for key in keys
                    if key not in saved.saved and _submodule(namespace[key], name, key)
                }
                if _is_kit(name):
                    changed.extend(f"{name}.{key}" for key in keys if key not in imported)
                namespace.clear()
                namespace.update(saved.saved, **imported)
        for klass, saved in self.classes:
            for key in saved.changed_keys() if saved.changed() else ():
                if key == "__slotnames__":  # copyreg's cache, written by copy.deepcopy (a check's restart)
                    continue
                with contextlib.suppress(AttributeError, TypeError):
                    if key in saved.saved:
                        setattr(klass, key, saved.saved[key])
                    else:
                        delattr(klass, key)
                    changed.append(f"{klass.__module__}.{klass.__qualname__}.{key}")
        if not all(
            all(map(operator.is_, map(operator.attrgetter(name), self.functions), saved))
            for name, saved in zip(FUNCTION_PARTS, zip(*self.code))
        ):
            for function, (code, defaults, kwdefaults) in zip(self.functions, self.code):
                if (function.__code__, function.__defaults__, function.__kwdefaults__) != (code, defaults, kwdefaults):
                    function.__code__, function.__defaults__, function.__kwdefaults__ = code, defaults, kwdefaults
                    changed.append(f"{function.__module__}.{function.__qualname__}")
        for saved in self.objects:
            if saved.changed():
                changed.extend(f"check {saved.saved.get('id', '?')}.{key}" for key in saved.changed_keys())
                saved.namespace.clear()
                saved.namespace.update(saved.saved)
        return changed


def _submodule(value: Any, package: str, key: str) -> bool:
    """`package.key` is a submodule imported since: Python set it as an attribute, not the learner."""
    return (
        isinstance(value, ModuleType)
        and value.__name__ == f"{package}.{key}"
        and sys.modules.get(value.__name__) is value
    )


@dataclass(frozen=True)
class Warm:
    """What every child inherits: the check object behind each test cell, and the snapshot."""

    graders: dict[tuple[str, int], Any]  # (lab, cell index) -> the kit's check object
    snapshot: KitSnapshot
    imports: dict[str, tuple[str, ...]] = field(default_factory=dict)  # lab -> what its learners load

    @classmethod
    def prepare(cls, key: Key) -> Warm:
        """Import what the masters import, take their checks (with the modules each check
        module says it imports on use, `ON_USE`), snapshot the kit. Only the key's labs: the
        rest of the kit is never loaded here (half the grader's start-up). Refuses when a
        lab's imports fail here: grading it would score the install, not the learner."""
        os.environ.setdefault("MPLBACKEND", "Agg")
        for lab, master in sorted(key.masters.items()):
            for module in sorted(master.imports()):
                try:
                    import_module(module)
                except Exception as exc:
                    from shopops_lab.doctor import kit_install_command

                    raise GradingEnvironmentError(
                        lab=lab,
                        module=module,
                        error=f"{type(exc).__name__}: {exc}",
                        fix=f"install the kit with its dependencies: {kit_install_command()}",
                    ) from exc
        graders = {
            (lab, cell.index): cell.check.grader()
            for lab, master in key.masters.items()
            for cell in master.graded
            if cell.kind is Kind.AUTO and cell.check is not None
        }
        checks = {module for master in key.masters.values() for module in master.check_modules()}
        for module in sorted(checks):
            for used in getattr(sys.modules.get(module), "ON_USE", ()):
                with contextlib.suppress(ImportError):  # optional here, as where the check runs
                    import_module(used)
        imports = {lab: master.learner_imports() for lab, master in key.masters.items()}
        return cls(graders=graders, snapshot=KitSnapshot.take(graders.values()), imports=imports)


# The parent's warm state, which a forked child inherits. A dict that stays the same object,
# so setting it does not count as a change of the kit's globals.
INHERITED: dict[str, Warm] = {}


@dataclass(frozen=True)
class Job:
    """One run of one submission's plan: the steps stopped before (skipped, and what they
    block) and the test steps already scored (not run again)."""

    plan: Plan
    key: str
    limits: Limits
    scratch: str
    stopped: frozenset[int] = frozenset()
    scored: frozenset[int] = frozenset()
    learner_scratch: str = ""
    uid: int | None = None  # the learner's uid (as root), else None: the grader's own
    hide: tuple[str, ...] = ()  # paths the learner's process sees empty (as root)
    walls: confinement.Confinement = confinement.Confinement()  # how this host confines learner code
    rules: landlock.Rules | None = None  # what the learner's process keeps under Landlock (None: no Landlock)
    core: int | None = None  # the core its judge and learner processes keep (`confinement.pin`)


# --- the judge: runs the checks, never the learner's code -------------------------------------


class _Discard:
    """stdout/stderr of the judge: nothing it prints is read."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _silence() -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.dup2(devnull, fd)
    sys.stdout = sys.stderr = _Discard()
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process


def _undumpable() -> None:
    """No process of the same user may read or trace the judge's memory (Linux)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0


def _on_alarm(signum: int, frame: Any) -> None:
    raise CellTimeout()


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise CellTimeout in the judge after `seconds`: the judge, not the learner, keeps the
    time, so no learner code can swallow it. Where setitimer is missing, the parent's
    deadline (a little later) ends the process instead."""
    if not hasattr(signal, "setitimer"):
        yield
        return
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _stop_cause(outcome: dict[str, Any]) -> str:
    if "exit" in outcome:
        return f"called sys.exit({outcome['exit']!r})"
    return f"raised {str(outcome.get('type'))[:80]}"


def truncate(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + " [...]"


class _Stopped(Exception):
    """A step stopped: it ran past its limit, exited, or its learner process died."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


@dataclass
class _Runner:
    """Runs one job's steps: the learner's cells in the learner's process, the checks here."""

    job: Job
    warm: Warm
    send: Callable[[Message], None]
    learner: Learner

    def run(self) -> None:
        stopped = set(self.job.stopped)
        blocked = self.job.plan.blocked(stopped)
        needed = self.job.plan.needed()  # a demonstration no verdict reads is not run
        for step in self.job.plan.steps:
            if step.index in blocked or step.index in self.job.scored or step.index not in needed:
                continue
            self.send(CellStarted(step.index))
            try:
                self._step(step)
                _collect_if_large()
            except _Stopped as stop:
                self.send(CellStopped(step.index, stop.cause))
                stopped.add(step.index)
                blocked = self.job.plan.blocked(stopped)
                self.send(Restarting())  # the parent's start-up deadline, not the cell's, covers the replay
                self.learner.restart()  # its state is unknown: a fresh one, with the cells that ran
        self.send(Done())

    def _step(self, step: PlannedCell) -> None:
        graded = step.role is Role.TEST and (self.job.plan.lab, step.index) in self.warm.graders
        try:
            with _time_limit(self.job.limits.cell_seconds):
                if graded:
                    self._check(step)
                elif step.role is Role.TEST:
                    self._judge_cell(step)
                else:
                    self._execute(step)
        except CellTimeout:
            raise _Stopped(f"did not finish within {self.job.limits.cell_seconds:g} s") from None
        except LearnerDied as died:
            raise _Stopped(died.cause) from None
        except ProtocolError:
            raise _Stopped("sent something it should not have") from None
        except (LearnerRaised, LearnerRaisedBase, ShopOpsError) as exc:  # outside any check
            if isinstance(exc, ShopOpsError) and not hasattr(exc, "learner_where"):
                raise  # the kit's own, raised here: the grader's failure
            raise _Stopped(f"raised {type(exc).__name__} when the grader asked for its answer") from None

    def _execute(self, step: PlannedCell) -> None:
        """A cell's own error, even sys.exit(), ends that cell only, as in Jupyter: what it
        bound before stays, and later cells run (a sys.exit is noted for the instructor)."""
        outcome = self.learner.run(step.source, f"<cell {step.grade_id}>")
        if outcome is not None and "exit" in outcome:
            self.send(
                Note(
                    f"cell {step.grade_id} {_stop_cause(outcome)}, which ends only that cell, as in "
                    "Jupyter; the cells after it were run"
                )
            )

    def _judge_cell(self, step: PlannedCell) -> None:
        """A test cell the kit's checks do not back (an instructor's own asserts) runs here, in
        the judge, as nbgrader's rule says (it passes unless it raises): the names it reads
        from the learner's namespace are looked up in a worker forked for it (values by value,
        the learner's functions and objects by handle, their calls crossing), the master's
        imports are the judge's own modules. So the learner's process can make the cell's
        calls return anything, but cannot decide the verdict."""
        namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        _master_imports(self.job.plan.steps, step.index, namespace)
        with self._worker() as run:
            for name in sorted(step.reads - set(namespace) - set(vars(builtins))):
                found, value = run.lookup(name)
                if found:
                    namespace[name] = value
            self.warm.snapshot.restore()
            mark, text = "correct", ""
            try:
                exec(compile_cell(step.source, f"<cell {step.grade_id}>"), namespace)
            except (KeyboardInterrupt, CheckStopped):
                raise
            except NotAttempted:  # the learner's stub, still raising NotImplementedError
                mark, text = "not attempted", NOT_ATTEMPTED
            except SystemExit as exc:
                mark, text = "incorrect", f"raised SystemExit({exc.code!r})"
            except BaseException as exc:  # noqa: BLE001 - the cell's own verdict: it raised
                mark, text = "incorrect", f"{type(exc).__name__}: {exc}"
            if mark == "incorrect" and _stubbed(namespace, step.reads):
                mark, text = "not attempted", NOT_ATTEMPTED  # a kit check the cell called said so, or a helper did
        self.send(Verdict(step.index, mark, truncate(text), ()))

    @contextlib.contextmanager
    def _worker(self) -> Iterator[CheckRun]:
        """A worker forked from the learner's cells for one check; the worker (or the cells'
        process) dying in it is the learner's. The kit is restored once per check, just before
        it runs (after the answers are looked up), not again after it: whatever the check's
        calls changed is undone before the next check, and the verdict is reported by code
        that the learner's requests reach no more than the check's own (each restore walks
        the whole kit, about a tenth of an untouched submission's judge)."""
        run = CheckRun(self.learner)
        try:
            yield run
        except PeerGone as gone:
            raise LearnerDied(run.died(gone)) from None
        finally:
            run.close()

    def _check(self, step: PlannedCell) -> None:
        grader = self.warm.graders[(self.job.plan.lab, step.index)]
        with self._worker() as run:
            answers = [run.answer(name) for name in step.graded.check.answers]  # type: ignore[union-attr]
            self.warm.snapshot.restore()
            result = grader.result(*answers)
        self.send(Verdict(step.index, *_reported(result)))


NOT_ATTEMPTED = "Not attempted: the answer is still the stub."
COLLECT_ABOVE_MB = 1024


def _collect_if_large() -> None:
    """The judge runs with the cyclic collector off: it runs only the kit's checks, for one
    submission, then exits, and a check's worlds (a burst day, an explorer's copies) are
    garbage only in reference cycles, which the collector would walk again and again while
    they are alive (10 to 15% of a judge's time on labs 05 and 07) to free what the exit frees
    anyway. A right submission's judge peaks under 100 MB without it on every lab; should one
    pass COLLECT_ABOVE_MB, it collects after each cell from then on."""
    unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, kilobytes on Linux
    if resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit > COLLECT_ABOVE_MB * 2**20:
        gc.collect()


def _stubbed(namespace: dict[str, Any], reads: Iterable[str]) -> bool:
    """Does a test cell that failed read a learner's function that is still its stub? Then it
    failed because nothing was written (nbgrader's rule, the kit's words): "not attempted",
    however the instructor's cell reached the stub (a kit check inside more code, a helper)."""
    for name in sorted(reads):
        value = namespace.get(name)
        if isinstance(value, Handle):
            try:
                if value._peer.scalar(["stub", value._id], bool):
                    return True
            except (ProtocolError, IndexError):  # an answer that is no bool: not a stub's
                continue
    return False


def _reported(result: Any) -> tuple[str, str, tuple[str, ...]]:
    """(mark, message, evidence) of a check's Result, as the parent takes them (bounded)."""
    evidence = tuple(truncate(line) for line in list(result.evidence)[:EVIDENCE_LIMIT])
    return str(result.verdict.value), truncate(result.message), evidence


def _master_imports(steps: Iterable[PlannedCell], before: int, namespace: dict[str, Any]) -> None:
    """Run, here, the top-level imports of the master's own cells before `before`, of modules
    the judge has loaded already (the kit, what the masters import): never a learner's file."""
    for step in steps:
        if step.index >= before or step.role is not Role.CODE:
            continue
        try:
            tree = ast.parse(step.source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)) and all(
                (name.split(".")[0] in sys.modules) for name in _imported(node)
            ):
                with contextlib.suppress(Exception):
                    exec(compile(ast.Module([node], []), "<master imports>", "exec"), namespace)


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""] if node.level == 0 else [""]
    return [alias.name for alias in node.names]


def _sender(connection: Any) -> Callable[[Message], None]:
    def send(message: Message) -> None:
        connection.send_bytes(encode(message))

    return send


def _learner_config(job: Job, warm: Warm) -> dict[str, Any]:
    return {
        "scratch": job.learner_scratch or job.scratch,
        "lock": job.scratch,
        "uid": job.uid,
        "hide": list(job.hide),
        "view": job.uid is not None and job.walls.hide,  # a mount namespace of its own
        "own_count": job.walls.own_count,  # a user namespace of its own, where processes are counted
        "landlock": None
        if job.rules is None
        else {
            "abi": job.walls.landlock,
            "read": list(job.rules.read),
            "write": list(job.rules.write),
            "listed": list(job.rules.listed),
        },
        "memory_mb": job.limits.memory_mb,
        "cpu_seconds": job.limits.notebook_seconds,
        "imports": [*COMMON, *warm.imports.get(job.plan.lab, ())],
        "core": job.core,
    }


def child_main(job: Job, connection: Any, zygote: Any = None) -> None:
    """Entry point of the judge's process: never returns, always exits with os._exit.
    `zygote`: this judge's channel to the zygote (forked), else None (a fresh interpreter
    per learner process)."""
    status = 0
    send = _sender(connection)
    learner: Learner | None = None
    try:
        _undumpable()
        confinement.pin(job.core)
        warm = INHERITED.get("warm")
        if warm is None:  # not forked: warm up here
            warm = Warm.prepare(Key.load(job.key))
        os.chdir(job.scratch)
        random.seed(0)
        _silence()
        learner = Learner(_learner_config(job, warm), announce=lambda pid: send(LearnerStarted(pid)), zygote=zygote)
        learner.start()
    except BaseException as exc:  # before any learner code: the grader's own failure
        with contextlib.suppress(Exception):
            send(GraderFailed(str(exc) if isinstance(exc, LearnerNotStarted) else f"{type(exc).__name__}: {exc}"))
        if learner is not None:
            learner.stop()
        os._exit(70)  # EX_SOFTWARE
    gc.disable()  # see _collect_if_large
    try:
        _Runner(job, warm, send, learner).run()
    except BaseException as exc:  # the judge runs no learner code: what escapes it is the grader's own failure
        with contextlib.suppress(Exception):
            send(GraderFailed(str(exc) if isinstance(exc, LearnerNotStarted) else f"{type(exc).__name__}: {exc}"))
        status = 70
    finally:
        learner.stop()
        with contextlib.suppress(Exception):
            connection.close()
        os._exit(status)
