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
user, the processes run as that user: they are killed by process group, and the file
system is shared (the README's threat model says what that leaves open).
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
from pathlib import Path

UID_BASE = 0x70000000  # far above any account's uid
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
    """What the learner's processes see empty: the key, the gradebook folder and the
    submissions' folders; a folder that holds the kit or Python itself is hidden file by file."""
    if not can_hide():
        return ()
    needed = [
        Path(p).resolve()
        for p in (*sys.path, tempfile.gettempdir(), sys.prefix, sys.base_prefix, str(Path(__file__).parents[3]))
        if p
    ]

    def safe(folder: Path) -> bool:
        return not any(path == folder or folder in path.parents for path in needed)

    found: set[str] = set()
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
