"""A warm, clean starting point for the learner's processes (Linux): the zygote.

A fresh learner interpreter spends most of its start importing the kit and the checks
(0.5 s of CPU, more than grading a lab 00 notebook). The zygote is one fresh interpreter,
started by the grader before it reads the key or any submission, that imports the same
modules once and then only forks: each learner process is a fork of it, confined
(`learner.confine`) before any learner code, exactly as a freshly started one. What a
learner process can find in its memory is therefore what a fresh one has: the kit, its
own configuration, and nothing of the key, the judge or another submission, because the
zygote never held them (it never reads a notebook; cells reach each learner process over
that process's own socket). Every descriptor but the learner's socket is closed in the
child first, so no learner process can reach the zygote or another judge's channel.

The zygote starts before the grader reads the key: it loads what every learner process
loads, then, on ["load", modules] from the grader, what the key's labs use (nothing else:
a learner process of lab 05 does not carry lab 07's simulator).

Each judge gets a channel of its own to the zygote (made by the parent just before it
forks the judge): ["spawn", config] with the learner's socket passed alongside (answer:
["ret", pid]), and ["wait", pid] for the exit status of a learner it spawned (answer:
["ret", exitcode]), as `Popen.wait` would give it. Where fork is missing, or the zygote
cannot start, the judge spawns a fresh interpreter per learner process as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shopops_lab.course.grade.wire import PeerGone, ProtocolError, recv_frame, send_frame

BOOT = (
    "import sys, json; c = json.loads(sys.argv[1]); sys.path[:0] = c['path']; "
    "from shopops_lab.course.grade.zygote import main; main(c)"
)
# what every learner process loads, whatever its lab: the kit's side of the protocol, loaded
# before the process gives up root (it may not read the kit's folder afterwards)
COMMON = ["shopops_lab.checks.base", "shopops_lab.checks.fresh"]
POLL_SECONDS = 0.01  # how often a learner process being waited for is looked at
START_SECONDS = 60.0  # a zygote that has not loaded the kit by then is not used
SPAWN_SECONDS = 20.0  # a zygote that has not forked a learner process by then is not used again


def interpreter(boot: str, config: dict[str, Any]) -> list[str]:
    """The command line of a fresh interpreter for a learner's process (or the zygote) that
    runs `boot` with `config`: without `site` (-S), whose .pth files cost a start 15 to
    20 ms; the grader's own search path instead, headed by the folder the kit is in (an
    editable install finds it through a .pth hook)."""
    kit = str(Path(__file__).resolve().parents[3])
    path = [kit, *(entry for entry in sys.path if entry != kit)]
    return [sys.executable, "-S", "-c", boot, json.dumps({**config, "path": path})]


def usable() -> bool:
    """Fork (and passing sockets) is what the zygote is made of: Linux and the like."""
    return hasattr(os, "fork") and hasattr(socket, "send_fds") and sys.platform != "win32"


def environment(scratch: str, debug: bool) -> dict[str, str]:
    """The whole environment of a learner process (nothing of the grader's own)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": scratch,
        "TMPDIR": scratch,
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": scratch,
        "PYTHONHASHSEED": "0",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        **({"SHOPOPS_GRADE_DEBUG": "1"} if debug else {}),
    }


# --- the grader's side ------------------------------------------------------------------------


@dataclass
class Zygote:
    """The grader's handle on its zygote: `channel()` for each judge, `close()` at the end."""

    process: Any
    control: socket.socket
    broken: bool = False

    @classmethod
    def start(cls) -> Zygote | None:
        """A zygote loading the kit in the background (None where it cannot be used)."""
        if not usable():
            return None
        ours, theirs = socket.socketpair()
        try:
            process = subprocess.Popen(
                interpreter(BOOT, {"fd": theirs.fileno()}),
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                cwd="/",
                env=environment("/nonexistent", False),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            ours.close()
            return None
        finally:
            theirs.close()
        return cls(process, ours)

    def load(self, modules: Iterable[str]) -> None:
        """Have the zygote load the key's labs' modules too (`Master.learner_imports`), while
        the grader goes on: the key is read after the zygote started, and only what its labs
        use is loaded, in every learner process before its first cell."""
        if self.broken:
            return
        try:
            send_frame(self.control, ["load", sorted(modules)])
        except OSError:
            self.broken = True

    def channel(self) -> socket.socket | None:
        """A new channel to the zygote for one judge (None once the zygote failed to answer:
        gone, or stopped; the judges then start fresh interpreters)."""
        if self.broken:
            return None
        ours, theirs = socket.socketpair()
        try:
            self.control.settimeout(START_SECONDS)
            send_frame(self.control, ["channel"])
            socket.send_fds(self.control, [b"C"], [theirs.fileno()])
            if recv_frame(self.control) != ["ret", None]:
                raise ProtocolError("a channel's reply of no known shape")
        except (OSError, PeerGone, ProtocolError):
            self.broken = True
            ours.close()
            return None
        finally:
            theirs.close()
        return ours

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.control.close()
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait()


@dataclass
class Spawned:
    """A learner process forked by the zygote, seen from its judge (Popen's `pid`, `wait`, `kill`)."""

    pid: int
    channel: socket.socket
    code: int | None = None
    owner: int = field(default_factory=os.getpid)  # only the judge's own process asks on its channel

    def wait(self) -> int | None:
        if self.code is None and os.getpid() == self.owner:
            try:
                send_frame(self.channel, ["wait", self.pid])
                reply = recv_frame(self.channel)
            except (OSError, PeerGone, ProtocolError):
                return None
            if not (isinstance(reply, list) and len(reply) == 2 and type(reply[1]) is int):
                return None
            self.code = reply[1]
        return self.code

    def kill(self) -> None:
        if self.code is None:
            os.kill(self.pid, 9)


def spawn(channel: socket.socket, config: dict[str, Any], learner_fd: int) -> Spawned:
    """Ask the zygote for a learner process serving on `learner_fd` (the judge's side). A
    zygote that does not answer in time (stopped by a learner of the grader's own user) is
    an OSError: the judge starts a fresh interpreter instead."""
    channel.settimeout(SPAWN_SECONDS)
    try:
        send_frame(channel, ["spawn", config])
        socket.send_fds(channel, [b"S"], [learner_fd])
        reply = recv_frame(channel)
    finally:
        channel.settimeout(None)
    if not (isinstance(reply, list) and len(reply) == 2 and reply[0] == "ret" and type(reply[1]) is int):
        raise RuntimeError(f"the zygote did not start the learner's process ({str(reply)[:300]})")
    return Spawned(reply[1], channel)


# --- the zygote's side ------------------------------------------------------------------------


@dataclass
class _Server:
    control: socket.socket
    selector: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    owned: dict[int, set[int]] = field(default_factory=dict)  # channel fd -> learner pids it spawned
    waiting: dict[int, tuple[socket.socket, int]] = field(default_factory=dict)  # pid -> who waits
    orphans: set[int] = field(default_factory=set)  # pids whose judge is gone: reaped when they end
    ends: dict[int, int] = field(default_factory=dict)  # pid waited for -> a pidfd readable once it ended

    def serve(self) -> None:
        self.selector.register(self.control, selectors.EVENT_READ)
        while True:
            busy = self.orphans or not self.ends.keys() >= self.waiting.keys()
            for key, _ in self.selector.select(POLL_SECONDS if busy else None):
                if key.fileobj is self.control:
                    self._control()
                elif isinstance(key.fileobj, socket.socket):
                    self._request(key.fileobj)
                # else a pidfd: a learner waited for has ended, and is reaped below
            self._reap()

    def _control(self) -> None:
        try:
            message = recv_frame(self.control)
            if type(message) is list and len(message) == 2 and message[0] == "load" and type(message[1]) is list:
                _load([module for module in message[1] if type(module) is str])
                return
            _, fds, _, _ = socket.recv_fds(self.control, 1, 1)
        except (OSError, PeerGone, ProtocolError):
            os._exit(0)  # the grader is gone: so is the zygote (its learners die with their judges)
        if message != ["channel"] or len(fds) != 1:
            os._exit(0)
        channel = socket.socket(fileno=fds[0])
        self.owned[channel.fileno()] = set()
        self.selector.register(channel, selectors.EVENT_READ)
        send_frame(self.control, ["ret", None])

    def _request(self, channel: socket.socket) -> None:
        try:
            message = recv_frame(channel)
            if type(message) is list and message[:1] == ["spawn"] and len(message) == 2:
                _, fds, _, _ = socket.recv_fds(channel, 1, 1)
                if len(fds) != 1 or type(message[1]) is not dict:
                    raise ProtocolError("a spawn without its socket")
                pid = _fork_learner(message[1], fds[0])
                os.close(fds[0])
                self.owned[channel.fileno()].add(pid)
                send_frame(channel, ["ret", pid])
            elif type(message) is list and message[:1] == ["wait"] and message[1:] and type(message[1]) is int:
                if message[1] not in self.owned[channel.fileno()]:
                    raise ProtocolError("a wait for a process this judge did not start")
                self.waiting[message[1]] = (channel, message[1])
                self._watch(message[1])
            else:
                raise ProtocolError("a request of no known shape")
        except (OSError, PeerGone, ProtocolError):
            self._drop(channel)

    def _drop(self, channel: socket.socket) -> None:
        self.orphans |= self.owned.pop(channel.fileno(), set())
        self.waiting = {pid: wait for pid, wait in self.waiting.items() if wait[0] is not channel}
        self.selector.unregister(channel)
        channel.close()

    def _watch(self, pid: int) -> None:
        """A judge waits for `pid` (its learner, killed as the judge ends): its end wakes the
        zygote at once (Linux's pidfd), not at the next look every POLL_SECONDS, which held
        each submission's end back by about 6 ms. Without pidfds, the looks go on."""
        opened = getattr(os, "pidfd_open", None)
        if opened is None or pid in self.ends:
            return
        try:
            self.ends[pid] = opened(pid)
        except OSError:  # no pidfds here, or none left: looked at every POLL_SECONDS
            return
        self.selector.register(self.ends[pid], selectors.EVENT_READ)

    def _reap(self) -> None:
        for pid in [*self.waiting, *self.orphans]:
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 0
            if not done:
                continue
            self.orphans.discard(pid)
            end = self.ends.pop(pid, None)
            if end is not None:
                self.selector.unregister(end)
                os.close(end)
            waiter = self.waiting.pop(pid, None)
            if waiter is not None:
                channel = waiter[0]
                self.owned[channel.fileno()].discard(pid)
                try:
                    send_frame(channel, ["ret", os.waitstatus_to_exitcode(status)])
                except OSError:
                    self._drop(channel)


def _fork_learner(config: dict[str, Any], fd: int) -> int:
    """Fork a learner process serving on `fd`: in the child, nothing of the zygote is kept
    but its loaded modules, and it never returns here."""
    pid = os.fork()
    if pid:
        return pid
    code = 70
    try:
        os.setsid()  # a process group of its own, as a fresh start_new_session one
        if fd != 3:
            os.dup2(fd, 3)
            fd = 3
        os.closerange(4, 1 << 20)  # the zygote's control and every judge's channel
        import tempfile

        os.environ.clear()
        os.environ.update(environment(config["scratch"], bool(config.get("debug"))))
        tempfile.tempdir = None  # the learner's process enters its scratch folder as it confines itself
        from shopops_lab.course.grade.learner import serve

        serve({**config, "fd": fd})
        code = 0
    finally:
        os._exit(code)


def main(config: dict[str, Any]) -> None:
    """Entry point of the zygote's interpreter: load what every learner process loads, then
    serve (the key's labs' own modules follow in a ["load", ...] once the grader has read it)."""
    control = socket.socket(fileno=config["fd"])
    _load(COMMON)
    _Server(control).serve()


def _load(modules: list[str]) -> None:
    import gc

    with contextlib.suppress(Exception):
        from shopops_lab.course.grade.learner import preload

        preload(modules)
    gc.collect()
    gc.freeze()  # the children share these pages instead of copying them
