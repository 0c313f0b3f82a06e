"""The file system a learner's process sees, as root: what it needs, readable; what it must not
see, empty.

A learner's process gives up root for a uid of its own before any learner code runs, and
from then on it reads files as a stranger would. The kit, the virtualenv and Python itself
may lie in a folder a stranger cannot enter (a course kept under `/root`, a clone in a
`mktemp -d` folder, pyenv's Python under a mode-700 home): imported on first use, a module
there would then fail, and a check would fail with it. So, in the process's own mount
namespace and still as root, every folder on the way to what the process needs that a
stranger cannot cross (a *wall*) is covered by an empty folder of its own, in which only
the paths needed are put back, each a bind mount of the real one (`open_tree` and
`move_mount`, Linux 5.2 and later). The learner sees the kit, the runtime and its scratch
folder as they are, and nothing else behind the wall. What it must not see (the key, the
gradebook folder, the submissions) is then covered, as before. Nothing here changes a
file or a permission on disk: the view ends with the process.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CLONE_NEWNS, MS_REC, MS_PRIVATE, MS_BIND = 0x20000, 0x4000, 0x40000, 0x1000
SYS_OPEN_TREE, SYS_MOVE_MOUNT = 428, 429  # the same number on every architecture (new syscalls share one table)
OPEN_TREE_CLONE, AT_RECURSIVE, O_CLOEXEC, MOVE_MOUNT_F_EMPTY_PATH = 1, 0x8000, 0o2000000, 0x4
AT_FDCWD = -100


class ViewError(OSError):
    """The learner's view of the file system could not be made (the grader's failure)."""


def needed(scratch: str) -> list[str]:
    """What a learner's process must read after it gives up root: Python's own library, the
    search path (the kit's folder heads it, the virtualenv's packages follow) and its
    scratch folder. Paths that do not exist are left out; each is resolved (a symlink's
    target is what is opened)."""
    found: list[str] = []
    for entry in (os.path.dirname(os.__file__), sys.prefix, sys.base_prefix, *sys.path, scratch):
        if entry and os.path.exists(entry):
            path = os.path.realpath(entry)
            if path not in found:
                found.append(path)
    return found


def crossable(folder: str, uid: int) -> bool:
    """Can a process of `uid` (gid `uid`, no other groups) pass through `folder`?"""
    info = os.stat(folder)
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid == uid:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def walls(paths: Iterable[str], uid: int) -> list[str]:
    """The outermost folders above `paths` that `uid` cannot pass through, in order."""
    found: set[str] = set()
    for path in paths:
        for folder in reversed(Path(path).parents):  # from the root down
            if not crossable(str(folder), uid):
                found.add(str(folder))
                break
    return sorted(found)


def unreadable(paths: Iterable[str]) -> list[str]:
    """Those of `paths` this process cannot read (run after the uid changed)."""
    return [path for path in paths if not os.access(path, os.R_OK | (os.X_OK if os.path.isdir(path) else 0))]


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _mount(libc: Any, source: str, target: str, kind: str | None, flags: int, data: str | None) -> None:
    if (
        libc.mount(
            source.encode(), target.encode(), kind.encode() if kind else None, flags, data.encode() if data else None
        )
        != 0
    ):
        raise ViewError(ctypes.get_errno(), f"mount {target}")


def _clone(libc: Any, path: str) -> int:
    """A detached copy of the mount tree at `path`, held by a file descriptor."""
    fd = int(libc.syscall(SYS_OPEN_TREE, AT_FDCWD, path.encode(), OPEN_TREE_CLONE | AT_RECURSIVE | O_CLOEXEC))
    if fd < 0:
        raise ViewError(ctypes.get_errno(), f"open_tree {path} (Linux 5.2 or later is needed)")
    return fd


def _attach(libc: Any, fd: int, target: str) -> None:
    if libc.syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, target.encode(), MOVE_MOUNT_F_EMPTY_PATH) != 0:
        raise ViewError(ctypes.get_errno(), f"move_mount {target}")


def _open_walls(libc: Any, paths: list[str], uid: int) -> None:
    """Cover each wall on the way to `paths` with an empty folder anyone may cross, and put
    back in it the paths needed behind it. A wall behind a wall is met on the next round."""
    for _ in range(16):  # each round opens the outermost walls left; paths are never that deep in walls
        found = walls(paths, uid)
        if not found:
            return
        for wall in found:
            behind = [path for path in paths if Path(wall) in Path(path).parents]
            behind = [path for path in behind if not any(Path(other) in Path(path).parents for other in behind)]
            clones = [(path, os.path.isdir(path), _clone(libc, path)) for path in behind]
            try:
                _mount(libc, "tmpfs", wall, "tmpfs", 0, "size=64k,mode=0755")
                for path, folder, fd in clones:
                    relative = Path(path).relative_to(wall)
                    for depth in range(1, len(relative.parts)):
                        (Path(wall) / Path(*relative.parts[:depth])).mkdir(mode=0o755, exist_ok=True)
                    if folder:
                        Path(path).mkdir(mode=0o755, exist_ok=True)
                    else:
                        Path(path).touch(mode=0o644, exist_ok=True)
                    _attach(libc, fd, path)
            finally:
                for _, _, fd in clones:
                    os.close(fd)
    raise ViewError("walls nested too deep on the way to the kit")


def _cover(libc: Any, paths: Iterable[str]) -> None:
    """Each path empty: a folder becomes an empty folder nobody may read, a file /dev/null."""
    for path in paths:
        if os.path.isdir(path):
            _mount(libc, "tmpfs", path, "tmpfs", 0, "size=4k,mode=000")
        elif os.path.exists(path):
            _mount(libc, "/dev/null", path, None, MS_BIND, None)


def make(needs: list[str], hide: Iterable[str], uid: int) -> None:
    """This process's own mount namespace: `needs` readable by `uid` whatever walls stand
    above them, then each of `hide` empty. Linux, as root only."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNS) != 0:
        raise ViewError(ctypes.get_errno(), "unshare")
    _mount(libc, "none", "/", None, MS_REC | MS_PRIVATE, None)
    _open_walls(libc, needs, uid)
    _cover(libc, hide)
