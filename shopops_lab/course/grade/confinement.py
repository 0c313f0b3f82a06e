"""Where the learner's processes may go, and how they end.

Each submission graded at once has a core of its own (`core_for`), which its judge and its
learner's processes keep (`pin`): they take turns, so a hand-over on one core is a local
wake-up, where one across cores costs a virtual machine's inter-processor interrupt (lab 07,
21,000 hand-overs, graded in 5.4 to 6.4 s on one core against 8.7 to 17 s let roam).

Run as root on Linux, each attempt at a submission gets a uid of its own, never used by
anything else: its processes run under it, see the key, the output folder and the
submissions as empty (a mount namespace), own only their private folder, and may start
at most a few processes. When the submission ends, one `kill(-1, SIGKILL)` sent *as that
uid* ends every process it started, even one that left its process group. Run as another
user, the processes run as that user.

Whoever runs it, on Linux 5.13 and later each learner process also walls itself in with
Landlock (`landlock.py`, `rules`): it reads only the system's folders, Python, its search
path and the kit's package, writes only its scratch folder, opens no TCP connection, and
signals no process outside its own. Run as an ordinary user, its processes are counted from
its start in a user namespace of its own (RLIMIT_NPROC counts per uid, and the grading
user's other processes count too). The grader adopts every orphan of its learners
(`Reaper`, a child subreaper), so a process that left its group and its parent (setsid, a
double fork) is still found and killed when its submission ends. Where none of this is
available (macOS, an old kernel, as an ordinary user), `grade` refuses unless told
(`Confinement.detect`, `--unconfined`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from shopops_lab.course.grade import landlock

UID_BASE = 0x70000000  # far above any account's uid
CLONE_NEWUSER = 0x10000000
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37
KIT_PACKAGE = Path(__file__).resolve().parents[2]  # shopops_lab/: what a learner reads of the kit
ANSWER_KEYS = KIT_PACKAGE / "checks" / "answer_keys"  # what it never reads (`checks.answers`)
# What a learner's process may read besides Python and the kit: the system's programs and
# libraries (/usr, /lib), its settings (/etc: ld.so.cache, localtime), /proc (libraries read
# /proc/self; another process's memory and environment stay closed to it, Landlock refuses
# tracing outside its own processes), the cores' description (os.cpu_count) and the
# random and zero devices. It writes its scratch folder and /dev/null only.
SYSTEM_READ = (
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/etc",
    "/proc",
    "/sys/devices/system/cpu",
    "/dev/urandom",
    "/dev/random",
    "/dev/zero",
)
_COUNTER = itertools.count(1)


def can_drop() -> bool:
    """Can the learner's processes run under another uid (root, on Linux)?"""
    return sys.platform == "linux" and hasattr(os, "geteuid") and os.geteuid() == 0


@functools.cache
def can_hide() -> bool:
    """Can a child process make a mount namespace of its own (root, a kernel that allows it)?"""
    if not can_drop():
        return False
    pid = os.fork()
    if pid == 0:  # try it in a throwaway child
        code = 1
        with contextlib.suppress(Exception):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            code = 0 if libc.unshare(0x20000) == 0 and libc.mount(b"none", b"/", None, 0x44000, None) == 0 else 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def cores() -> tuple[int, ...]:
    """The cores this process may run on, in order; () where the OS cannot pin a process."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return ()


def core_for(slot: int, allowed: tuple[int, ...]) -> int | None:
    """The core of the `slot`-th submission graded at once (slots share cores when there are
    more of them than cores), or None where nothing can be pinned."""
    return allowed[slot % len(allowed)] if allowed else None


def pin(core: int | None) -> None:
    """Keep this process (and what it forks) on `core`; nothing where it is None or the OS
    refuses (pinning saves time, it never decides a grade)."""
    if core is not None:
        with contextlib.suppress(AttributeError, OSError, ValueError):
            os.sched_setaffinity(0, {core})


def next_uid() -> int:
    return UID_BASE + (os.getpid() % 2**16) * 2**10 + next(_COUNTER) % 2**10


def learner_folder(scratch: str, uid: int | None) -> str:
    """The learner's private working folder inside `scratch` (the judge's own, which the
    learner may cross but not read)."""
    folder = Path(scratch) / "learner"
    folder.mkdir(mode=0o700)
    if uid is not None:
        os.chown(folder, uid, uid)
        os.chmod(scratch, 0o711)
    return str(folder)


def end(groups: Iterable[int], uid: int | None) -> None:
    """Kill every process the submission started: its process groups, and, under a uid of
    its own, every process of that uid."""
    for group in groups:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)
    if uid is None or not can_drop():
        return
    pid = os.fork()
    if pid == 0:
        code = 1
        with contextlib.suppress(BaseException):
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)  # every process of this uid but this one
            code = 0
        os._exit(code)
    os.waitpid(pid, 0)


def hidden(key: Path, out: Path, submissions: Iterable[Path]) -> tuple[str, ...]:
    """What the learner's processes see empty: the kit's answer keys, the key, the gradebook
    folder and the submissions' folders; a folder that holds the kit or Python itself is
    hidden file by file."""
    if not can_hide():
        return ()
    needed = [
        Path(p).resolve()
        for p in (*sys.path, tempfile.gettempdir(), sys.prefix, sys.base_prefix, str(Path(__file__).parents[3]))
        if p
    ]

    def safe(folder: Path) -> bool:
        return not any(path == folder or folder in path.parents for path in needed)

    found: set[str] = {str(ANSWER_KEYS)}
    key = key.resolve()
    if key.is_dir() and safe(key):
        found.add(str(key))
    else:
        found.update(str(p.resolve()) for p in ([key] if key.is_file() else key.glob("*.ipynb")))
    if out.resolve().is_dir() and safe(out.resolve()):
        found.add(str(out.resolve()))
    for path in submissions:
        folder = path.resolve().parent
        found.add(str(folder) if safe(folder) else str(path.resolve()))
    return tuple(sorted(found))


# --- how learner code is confined on this host ------------------------------------------------


class Mode(StrEnum):
    """A wall around the learner's processes (grades.json's `confinement` names those used)."""

    UID_DROP = "uid drop"  # a uid of its own per attempt (root on Linux)
    MOUNTS = "mount namespace"  # the key, --out and the submissions seen empty (root on Linux)
    LANDLOCK = "Landlock"  # the process walls itself in (Linux 5.13+, any user)
    NONE = "none"


# What a learner's code can do where nothing confines it (printed by `grade --unconfined`).
UNCONFINED = (
    "read the key, every submission and every file you can read",
    "write the gradebook, the key, the kit, its virtualenv (a .pth file runs in every later Python) "
    "and every file you can write",
    "stop or kill the grader and any process of yours",
    "open network connections",
    "leave processes running after the run where the grader cannot adopt them (outside Linux)",
)


@dataclass(frozen=True)
class Confinement:
    """How this host confines learner code, decided once per run (`detect`)."""

    drop: bool = False  # a uid of its own per attempt
    hide: bool = False  # a mount namespace of its own
    landlock: int = 0  # the Landlock ABI applied (0: none)
    own_count: bool = False  # processes counted from the learner's start (a user namespace of its own)

    @classmethod
    def detect(cls) -> Confinement:
        drop = can_drop()
        return cls(drop=drop, hide=can_hide(), landlock=landlock.abi(), own_count=not drop and can_count())

    @property
    def modes(self) -> tuple[Mode, ...]:
        used = ((self.drop, Mode.UID_DROP), (self.hide, Mode.MOUNTS), (self.landlock > 0, Mode.LANDLOCK))
        return tuple(mode for on, mode in used if on) or (Mode.NONE,)

    @property
    def confined(self) -> bool:
        return self.drop or self.landlock > 0

    def describe(self) -> str:
        """e.g. `uid drop, mount namespace, Landlock ABI 7`, `Landlock ABI 7`, `none`."""
        return ", ".join(f"{mode} ABI {self.landlock}" if mode is Mode.LANDLOCK else str(mode) for mode in self.modes)

    def left_open(self) -> tuple[str, ...]:
        """What a learner's code can still do here that a full confinement stops (docs/internals.md's
        threat model lists what none stops)."""
        if not self.confined:
            return UNCONFINED
        found = list(landlock.missing(self.landlock)) if self.landlock else []
        if not self.landlock:
            found += [
                "write world-writable folders (/tmp, /dev/shm), leaving files after the run",
                "open network connections",
            ]
        if not self.drop and not self.own_count:
            found.append("start processes up to your own limit (no user namespace here counts them from its start)")
        return tuple(found)


@functools.cache
def can_count() -> bool:
    """Can a learner process of this (ordinary) user enter a user namespace of its own, where
    RLIMIT_NPROC counts its processes alone?"""
    if sys.platform != "linux" or not hasattr(os, "fork"):
        return False
    pid = os.fork()
    if pid == 0:  # try it in a throwaway child
        code = 1
        with contextlib.suppress(BaseException):
            count_from_here()
            code = 0
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def count_from_here() -> None:
    """Enter a user namespace of its own: from now on RLIMIT_NPROC counts this process and
    what it starts, not every process of the user (Linux 5.14+ counts per namespace). The
    uid and gid stay what they were. A single-threaded process only (before numpy loads)."""
    import ctypes

    uid, gid = os.getuid(), os.getgid()
    if landlock.LIBC is None or landlock.LIBC.unshare(CLONE_NEWUSER) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare(CLONE_NEWUSER): {os.strerror(errno)}")
    with contextlib.suppress(OSError):  # only what os.getuid() says inside (else 65534): nothing rests on it
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def rules(scratch: str, private: Iterable[str | Path]) -> landlock.Rules:
    """What a learner's process keeps under Landlock. Read: the system's folders, Python, and
    its search path, less an entry that holds something private (the key, --out, a
    submission, the grader's cache) and, of the kit's own folder (a checkout holds the
    masters and their history), only its package. Write: its scratch folder and /dev/null."""
    read, listed = _readable(tuple(map(str, private)), tuple(sys.path))
    return landlock.Rules(read=read, write=(str(Path(scratch).resolve()), os.devnull), listed=listed)


@functools.lru_cache(maxsize=4)
def _readable(private: tuple[str, ...], search: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`rules`' read paths and listed folders, found once per run (0.4 ms), not once per
    learner process. A read path above the answer keys is opened entry by entry, all but the
    keys (Landlock grants whole trees and takes nothing back), and the folders on the way are
    only listed."""
    closed = [Path(path).resolve() for path in private]
    read = [path for path in SYSTEM_READ if os.path.exists(path)]
    candidates = (os.path.dirname(os.__file__), sys.prefix, sys.base_prefix, sys.exec_prefix, *search, str(KIT_PACKAGE))
    for entry in candidates:
        if not entry or not os.path.exists(entry):
            continue
        path = Path(entry).resolve()
        if path == KIT_PACKAGE.parent or any(path == folder or path in folder.parents for folder in closed):
            continue
        if str(path) not in read:
            read.append(str(path))
    listed: list[str] = []
    for entry in [path for path in read if ANSWER_KEYS == Path(path) or Path(path) in ANSWER_KEYS.parents]:
        read.remove(entry)
        _around(Path(entry), read, listed)
    return tuple(read), tuple(listed)


def _around(folder: Path, read: list[str], listed: list[str]) -> None:
    """Grant everything under `folder` but the answer keys: each entry beside the way down to
    them read whole, each folder on the way listed only."""
    if folder == ANSWER_KEYS:
        return
    listed.append(str(folder))
    for entry in sorted(folder.iterdir()):
        if entry == ANSWER_KEYS or entry in ANSWER_KEYS.parents:
            _around(entry, read, listed)
        elif str(entry) not in read:
            read.append(str(entry))


# --- orphans ----------------------------------------------------------------------------------


def _children() -> list[int]:
    """This process's children (from /proc: the kernel's own list needs CONFIG_PROC_CHILDREN)."""
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                data = os.read(fd, 1024)
            finally:
                os.close(fd)
        except OSError:
            continue
        if int(data[data.rindex(b")") + 4 :].split(None, 1)[0]) == me:  # the field after the state: ppid
            found.append(int(name))
    return found


class Reaper:
    """While it is open, this process adopts every orphan below it (PR_SET_CHILD_SUBREAPER):
    a learner's process that left its group and its parent (setsid, a double fork) comes
    back as a child of the grader, and `sweep` kills it. Learner processes and theirs run in
    sessions of their own; the grader's own children (its judges) share its session, and
    those it had before it opened (the zygote, a test's helpers) are spared."""

    def __init__(self) -> None:
        import ctypes

        self.usable = sys.platform == "linux" and os.path.isdir("/proc/self")
        self.libc = ctypes.CDLL(None, use_errno=True) if self.usable else None
        self.session = os.getsid(0) if self.usable else 0
        self.spared = frozenset(_children()) if self.usable else frozenset()
        self.before = ctypes.c_int(0)
        if self.libc is not None:
            self.libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(self.before), 0, 0, 0)
            self.usable = self.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0

    def sweep(self, keep: Iterable[int] = ()) -> int:
        """Kill and reap every adopted process (each child in a session not the grader's, not
        in `keep` and not spared), again until none is left (one killed hands its own children
        to the grader as it dies); how many were killed."""
        if not self.usable:
            return 0
        kept, killed = self.spared | set(keep), 0
        while True:
            adopted = [pid for pid in _children() if pid not in kept and _session(pid) not in (self.session, None)]
            if not adopted:
                return killed
            for pid in adopted:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            for pid in adopted:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
            killed += len(adopted)

    def close(self, keep: Iterable[int] = ()) -> None:
        """A last sweep; then orphans go where they went before."""
        self.sweep(keep)
        if self.usable and self.libc is not None:
            self.libc.prctl(PR_SET_CHILD_SUBREAPER, self.before.value, 0, 0, 0)
            self.usable = False


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None
