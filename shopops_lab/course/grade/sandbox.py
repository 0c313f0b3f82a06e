"""The process that grades one submission, and what makes it hard to fool.

The parent loads the kit once (`Warm.prepare`): the modules the masters import, the check
object behind every test cell, and a snapshot of the kit's state, all before any learner
code exists. Each submission then runs in a child forked from that warm parent (or, where
fork is missing, a fresh interpreter that warms itself first). The child sets its limits
(memory, file size, CPU), silences output, and runs the plan's cells in order: the master's
code and the learner's answers as they are, but every test cell as a call of the check
object taken beforehand, on the kit restored from the snapshot. So rebinding `labNN.exercise`,
patching a check module's globals or printing "correct" changes nothing, and a kit changed
*while* a check runs voids that check instead of passing it.

The child reports over a pipe, one JSON message per event (never pickle: the parent must
not run anything the learner's process sends): ["cell", i] before each cell, ["stopped", i,
cause] when a cell ran past its limit or raised SystemExit, ["result", i, mark, message,
evidence], ["tampered", names], and ["done"]. It never reports a score: the parent scores.
"""
from __future__ import annotations

import builtins
import contextlib
import json
import operator
import os
import pkgutil
import random
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib import import_module
from types import CodeType, FunctionType, ModuleType
from typing import Any

from shopops_lab.course.errors import GradingEnvironmentError
from shopops_lab.course.grade.key import Key, Kind
from shopops_lab.course.grade.rebuild import Plan, PlannedCell, Role

KIT = "shopops_lab"
MESSAGE_LIMIT = 4000   # characters of one check message kept (the learner's own exception text can be long)
EVIDENCE_LIMIT = 20    # lines of evidence kept
FUNCTION_PARTS = ("__code__", "__defaults__", "__kwdefaults__")
FILE_LIMIT = 64 * 2**20  # bytes one file written by the learner's code may reach


class CellTimeout(KeyboardInterrupt):
    """A cell ran past its limit: the grader pressing *stop*. A KeyboardInterrupt, because
    that is the one exception a check lets through (it turns every other one, even a
    BaseException, into a verdict)."""


@dataclass(frozen=True)
class Limits:
    """Per cell (so per exercise) and per notebook, in seconds; memory in MB (None: no limit)."""

    cell_seconds: float = 60.0
    notebook_seconds: float = 600.0
    memory_mb: int | None = 2048


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
        used = {value.__name__: value for module in kit.values() for value in vars(module).values()
                if isinstance(value, ModuleType) and value is not sys}
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
        if not all(all(map(operator.is_, map(operator.attrgetter(name), self.functions), saved))
                   for name, saved in zip(FUNCTION_PARTS, zip(*self.code))):
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

    @classmethod
    def prepare(cls, key: Key) -> Warm:
        """Import what the masters import, take their checks, snapshot the kit. Refuses when a
        lab's imports fail here: grading it would score the install, not the learner."""
        os.environ.setdefault("MPLBACKEND", "Agg")
        _import_kit()
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
        graders = {(lab, cell.index): cell.check.grader()
                   for lab, master in key.masters.items() for cell in master.graded
                   if cell.kind is Kind.AUTO and cell.check is not None}
        return cls(graders=graders, snapshot=KitSnapshot.take(graders.values()))


def _import_kit() -> None:
    """Import every module of the kit now, so none is first imported (and added to its
    package's globals) while a check runs: the snapshot must hold the whole kit."""
    import shopops_lab

    for module in pkgutil.walk_packages(shopops_lab.__path__, prefix=f"{KIT}."):
        if module.name.rsplit(".", 1)[-1] != "__main__":
            with contextlib.suppress(ImportError):  # an optional part without its dependency
                import_module(module.name)


# The parent's warm state, which a forked child inherits. A dict that stays the same object,
# so setting it does not count as a change of the kit's globals.
INHERITED: dict[str, Warm] = {}


@dataclass(frozen=True)
class Job:
    """One run of one submission's plan: the steps stopped before (skipped, and what they
    block), and the test steps already scored (not run again)."""

    plan: Plan
    key: str
    limits: Limits
    scratch: str
    stopped: frozenset[int] = frozenset()
    scored: frozenset[int] = frozenset()


# --- inside the child ---------------------------------------------------------------------

class _Discard:
    """stdout/stderr of the child: the learner's prints go nowhere (the score never reads them)."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _address_space() -> int | None:
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def _set_limits(limits: Limits) -> None:
    """Memory (address space beyond what the warm kit already maps), file size and CPU time."""
    try:
        import resource
    except ImportError:  # Windows: the parent's deadlines still apply
        return
    rules: list[tuple[int, int]] = [(resource.RLIMIT_FSIZE, FILE_LIMIT),
                                    (resource.RLIMIT_CPU, int(limits.notebook_seconds) + 5)]
    base = _address_space()
    if limits.memory_mb is not None and base is not None:
        rules.append((resource.RLIMIT_AS, base + limits.memory_mb * 2**20))
    for rule, value in rules:
        soft, hard = resource.getrlimit(rule)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(rule, (value, hard))
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large file fails its write, not the process


def _silence() -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.dup2(devnull, fd)
    sys.stdout = sys.stderr = _Discard()  # type: ignore[assignment]
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process


def _on_alarm(signum: int, frame: Any) -> None:
    raise CellTimeout()


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise CellTimeout in this thread after `seconds`. The learner may swallow it; then
    the parent's deadline (a little later) ends the process instead."""
    if not hasattr(signal, "setitimer"):
        yield
        return
    signal.signal(signal.SIGALRM, _on_alarm)  # set again each time: a cell may have replaced it
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _compile(step: PlannedCell) -> CodeType:
    try:
        return compile(step.source, f"<cell {step.grade_id}>", "exec")
    except SyntaxError:
        from IPython.core.inputtransformer2 import TransformerManager  # %magic and !shell lines

        return compile(TransformerManager().transform_cell(step.source), f"<cell {step.grade_id}>", "exec")


def _stop_cause(exc: BaseException, limits: Limits) -> str:
    if isinstance(exc, CellTimeout):
        return f"did not finish within {limits.cell_seconds:g} s"
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    return f"raised {type(exc).__name__}"


def _truncate(text: Any) -> str:
    text = str(text)
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + " [...]"


@dataclass
class _Runner:
    """Runs one job's steps in the child, reporting through `send`."""

    job: Job
    warm: Warm
    send: Callable[[list[Any]], None]
    namespace: dict[str, Any] = field(default_factory=lambda: {"__name__": "__main__", "__builtins__": builtins})

    def run(self) -> None:
        stopped = set(self.job.stopped)
        blocked = self.job.plan.blocked(stopped)
        for step in self.job.plan.steps:
            if step.index in blocked or step.index in self.job.scored:
                continue
            self.send(["cell", step.index])
            try:
                with _time_limit(self.job.limits.cell_seconds):
                    if step.role is Role.TEST and (self.job.plan.lab, step.index) in self.warm.graders:
                        self._check(step)
                    else:
                        self._execute(step)
            except Exception:
                pass  # a cell's own error: later cells run, as in nbgrader
            except BaseException as exc:  # ran past its limit, or SystemExit: stop it and what depends on it
                self.send(["stopped", step.index, _stop_cause(exc, self.job.limits)])
                stopped.add(step.index)
                blocked = self.job.plan.blocked(stopped)
        self.send(["done"])

    def _execute(self, step: PlannedCell) -> None:
        code = _compile(step)
        if step.role is Role.TEST:  # a test cell the kit's checks do not back: nbgrader's rule, and
            self._restore()         # nbgrader's strength (it runs in the learner's namespace)
            try:
                exec(code, self.namespace)
            except Exception as exc:
                self.send(["result", step.index, "incorrect", _truncate(f"{type(exc).__name__}: {exc}"), []])
                return
            self.send(["result", step.index, "correct", "", []])
            return
        exec(code, self.namespace)

    def _restore(self) -> None:
        changed = self.warm.snapshot.restore()
        if changed:
            self.send(["tampered", changed[:EVIDENCE_LIMIT]])

    def _check(self, step: PlannedCell) -> None:
        grader = self.warm.graders[(self.job.plan.lab, step.index)]
        answers = [self.namespace.get(name) for name in step.graded.check.answers]  # type: ignore[union-attr]
        self._restore()
        result = grader.result(*answers)
        during = self.warm.snapshot.restore()
        if during:
            message = (f"Not graded: while being checked, your code changed the kit's own code or data "
                       f"({', '.join(during[:5])}). Answers are graded on the kit as installed.")
            self.send(["result", step.index, "error", message, []])
            return
        evidence = [_truncate(line) for line in list(result.evidence)[:EVIDENCE_LIMIT]]
        self.send(["result", step.index, str(result.verdict.value), _truncate(result.message), evidence])


def _sender(connection: Any) -> Callable[[list[Any]], None]:
    def send(message: list[Any]) -> None:
        connection.send_bytes(json.dumps(message).encode())

    return send


def child_main(job: Job, connection: Any) -> None:
    """Entry point of the child process: never returns, always exits with os._exit."""
    status = 0
    send = _sender(connection)
    try:
        warm = INHERITED.get("warm")
        if warm is None:  # not forked: warm up here, still before any learner code
            warm = Warm.prepare(Key.load(job.key))
        os.chdir(job.scratch)
        random.seed(0)
        _set_limits(job.limits)
        _silence()
    except BaseException as exc:  # before any learner code: the grader's own failure
        with contextlib.suppress(Exception):
            send(["failed", f"{type(exc).__name__}: {exc}"])
        os._exit(70)  # EX_SOFTWARE
    try:
        _Runner(job, warm, send).run()
    except BaseException:
        status = 70
    finally:
        with contextlib.suppress(Exception):
            connection.close()
        os._exit(status)
