"""One supervisor at a time on a chaos database: a fresh run and a `--resume` alike.

The database's ("chaos", "owner") record names the process driving its run: host, pid, the
process's start time (so a reused pid is not mistaken for it) and a nonce of the call. A run
takes the record in one transaction: it reads it locked (SELECT ... FOR UPDATE on PostgreSQL;
SQLite's BEGIN IMMEDIATE already shuts out every other writer), refuses if the holder is a
live process, and writes itself in; of two resumes started together, the second reads the
first's committed claim and is refused. A run lets the record go when it ends, however it
ends; a supervisor that could not (SIGKILLed, or its database went away) holds it only as
long as its process lives, so the next `--resume` takes it over. A claim is made once per
call, with one nonce: a try whose COMMIT was lost on its way finds its own nonce and is done.
"""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path
from typing import Any

from shopops_lab.errors import BadArgumentError
from shopops_lab.store import Store

__all__ = ["OWNER", "claim", "claimant", "is_mine", "release"]

OWNER = ("chaos", "owner")
_calls = itertools.count(1)
_running: set[str] = set()  # this process's runs still going (a failed one may not have let go)


def claimant() -> dict[str, Any]:
    """This process, as a claim names it, with a new nonce (`run`)."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": _started(os.getpid()),
        "run": f"{os.getpid()}-{next(_calls)}",
    }


def claim(store: Store, me: dict[str, Any] | None = None) -> str:
    """Make this process (`me`, from `claimant()`) the run's only supervisor, in the caller's
    transaction, and return the claim's nonce (for `release`); refused if a live process
    holds it. Safe to run again with the same `me`: a claim already made is found and kept."""
    me = me or claimant()
    held = store.get(*OWNER)
    if held is not None and held.get("run") == me["run"]:
        return _running_now(me)  # this very claim, kept by an earlier try
    if held is None and store.put_new(*OWNER, me):
        return _running_now(me)
    held = held if held is not None else store.get(*OWNER)
    if _alive(held):
        where = f" on {held['host']}" if held["host"] != me["host"] else ""
        raise BadArgumentError(
            field="db",
            problem=f"is being run by another chaos supervisor (process {held['pid']}{where})",
            fix="wait for that run to finish, or stop it (its workers stop with it); then finish the run with --resume",
        )
    store.put(*OWNER, me)
    return _running_now(me)


def is_mine(store: Store, me: dict[str, Any]) -> bool:
    """Does the claim `me` already hold the run (an earlier try of it was kept)?"""
    held = store.get(*OWNER)
    return held is not None and held.get("run") == me["run"]


def release(store: Store, run: str) -> None:
    """Let the run's record go, if `run` still holds it. Best effort: a database that is down
    cannot be written, and then the claim ends with this process instead."""
    _running.discard(run)
    try:
        with store.atomic:
            held = store.get(*OWNER)
            if held is not None and held.get("run") == run:
                store.put(*OWNER, {**held, "pid": None})
    except Exception:  # noqa: BLE001, S110 - the database failed: the holder's death frees the claim
        pass


def _running_now(me: dict[str, Any]) -> str:
    _running.add(me["run"])
    return me["run"]


def _alive(held: dict[str, Any]) -> bool:
    """Is the process that holds the claim still running? One on another host cannot be
    looked at, so it counts as running."""
    if held.get("pid") is None:
        return False
    if held["host"] != socket.gethostname():
        return True
    if held["pid"] == os.getpid():
        return held["run"] in _running
    return _started(held["pid"]) == held["started"]


def _started(pid: int) -> str | None:
    """When process `pid` started (its /proc start time), "running" where there is no /proc,
    or None if there is no such process (a zombie counts as none)."""
    if not Path("/proc/self/stat").exists():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "running"
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]
