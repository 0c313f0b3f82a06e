"""Landlock: a process walls itself in, as any user (Linux 5.13 and later).

A learner's process, before any learner code, lists what it may read and what it may write,
and the kernel refuses the rest to it and to every process it starts, for good: no file
outside those paths, no TCP (ABI 4), no signal or abstract Unix socket outside its own
processes (ABI 6). Three system calls and a `prctl` through `ctypes`, rather than a binding
from the package index: the kit stays pure Python with no dependency for learners, the
grader already speaks to the kernel this way (`view.py`), and the bindings there (`landlock`
1.0.0.dev5, `landlockpy`, `py-landlock`) are young, cover fewer ABIs than the kernel here
offers, and would cost an import in every learner process.

A kernel offers an ABI version; each adds rights. What this kernel cannot refuse is left
out, and `missing` names it, so the grader can say what a learner could still do.
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat
import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # one number on every architecture
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

# Rights on files (the first are also rights on a folder's files); the ABI each came in.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights a rule on a file may grant
FS_RIGHTS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}  # ABI -> every right
READ = EXECUTE | READ_FILE | READ_DIR
TCP_BIND, TCP_CONNECT = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

# What each ABI adds that a learner could otherwise do (for a kernel that lacks it).
# (ABI 2 adds moving files between folders, which ABI 1 refuses outright: a loss, not a hole.)
ADDED = (
    (3, "truncate a file it may not write, by its path"),
    (4, "open TCP connections and listen on TCP ports"),
    (5, "use device ioctls"),
    (6, "signal processes and reach abstract Unix sockets outside its own"),
)


class LandlockError(OSError):
    """The kernel refused a Landlock call (the grader's failure: no learner code has run)."""


@dataclass(frozen=True)
class Rules:
    """What a process keeps: `read` (read and run, folders or files), `write` (everything
    beneath: create, write, remove) and `listed` (folders it may list, and pass through,
    reading only what `read` grants beneath them); every other path, TCP and, where the ABI
    scopes them, signals and abstract sockets outside its own processes are refused."""

    read: tuple[str, ...]
    write: tuple[str, ...]
    listed: tuple[str, ...] = ()


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


# Made once, at import: the zygote imports this module, so a learner process forked from it
# finds the handle ready (made in the learner, it cost 0.3 ms of its start).
LIBC = _libc() if sys.platform == "linux" else None


@functools.cache
def abi() -> int:
    """The Landlock ABI this kernel offers; 0 where there is none (not Linux, too old, or
    Landlock not among its security modules)."""
    if LIBC is None:
        return 0
    try:
        found = int(LIBC.syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0), CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(found, 0)


def missing(version: int) -> tuple[str, ...]:
    """What a learner could still do under ABI `version` (empty from ABI 6 on)."""
    return tuple(what for added, what in ADDED if version < added)


def fs_rights(version: int) -> int:
    return FS_RIGHTS[max(v for v in FS_RIGHTS if v <= version)]


def _call(libc: ctypes.CDLL, what: str, *args: object) -> int:
    found = int(libc.syscall(*args))
    if found < 0:
        errno = ctypes.get_errno()
        raise LandlockError(errno, f"Landlock {what}: {os.strerror(errno)}")
    return found


def restrict(rules: Rules, version: int) -> None:
    """Wall this process (and every process it starts) in: `rules`, under ABI `version`
    (at most the kernel's). A path that does not exist is skipped. Raises LandlockError.
    The structures go to the kernel as bytes objects (a pointer to their data): no ctypes
    type is made per call."""
    libc = LIBC
    if libc is None:
        raise LandlockError(0, "Landlock is Linux's")
    handled = fs_rights(version)
    attr = struct.pack("=QQQ", handled, TCP_BIND | TCP_CONNECT, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)[
        : 8 if version < 4 else 16 if version < 6 else 24
    ]
    ruleset = _call(libc, "create_ruleset", ctypes.c_long(SYS_CREATE_RULESET), attr, ctypes.c_size_t(len(attr)), 0)
    try:
        for paths, rights in ((rules.read, READ), (rules.write, handled), (rules.listed, READ_DIR)):
            _add(libc, ruleset, paths, rights & handled)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise LandlockError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        _call(libc, "restrict_self", ctypes.c_long(SYS_RESTRICT_SELF), ruleset, 0)
    finally:
        os.close(ruleset)


def _add(libc: ctypes.CDLL, ruleset: int, paths: Iterable[str], rights: int) -> None:
    for path in paths:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            allowed = rights if stat.S_ISDIR(os.fstat(fd).st_mode) else rights & FILE_RIGHTS
            rule = struct.pack("=Qi", allowed, fd)
            _call(libc, f"add_rule {path}", ctypes.c_long(SYS_ADD_RULE), ruleset, RULE_PATH_BENEATH, rule, 0)
        finally:
            os.close(fd)
