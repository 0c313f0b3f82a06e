"""Fencing tokens: the one rule every fenced store follows, and a store that breaks it.

`TokenFence` is the rule, written once: each claim of a key gets a token above every
earlier one, and a write under an older token is refused at the store (logged as
STALE_REJECTED, raised as StaleTokenError), even when the work itself was right. The queue,
the job store, the checkpoint store and the simulator's checkpoints all fence through it.

Lab 04 starts from `NaiveResultStore`: it issues token 4 to A and token 5 to B, yet still
accepts A's late completion. The fix belongs at this boundary (the authoritative store),
not in the worker's memory of its own lease: `complete` must refuse any token that is not
the current one. The naive store logs each stale write it accepts so the checker can name
it. It stays naive on purpose.
"""

from __future__ import annotations

from typing import Any

from shopops_lab import arguments
from shopops_lab.clock import Clock, component_clock, resolve
from shopops_lab.errors import BadArgumentError, StaleTokenError
from shopops_lab.events import EventKind, EventLog, component_log
from shopops_lab.payloads import json_copy, state_copy
from shopops_lab.store import MemoryStore, Store

__all__ = ["NaiveResultStore", "TokenFence"]


class TokenFence:
    """Fencing tokens for the keys of one store (jobs, checkpoints, items).

    `claim(key)` issues the next token; `current(key)` is the newest; `check(key, token)`
    passes the newest and refuses any older one: it logs STALE_REJECTED (with the write's
    `op` and the current token) and raises StaleTokenError. Tokens live in `store`, next to
    what they guard, so the check and the write it guards share one transaction: the fence
    writes inside the transaction of the component that owns it (its callers are marked
    `@transaction`), never one of its own.

    `name` says what is fenced ("job"); `what` names one key in messages (default "job {key}",
    which reads "job job-0001"). A store that keeps each key's token on its own row (the
    queue) passes `current=` to `check` instead.
    """

    __deepcopy__ = state_copy  # the explorer copies one for each schedule it goes on from

    def __init__(
        self, name: str, *, what: str | None = None, store: Store | None = None, log: EventLog | None = None
    ) -> None:
        self.name = name
        self.what = f"{name} {{key}}" if what is None else what
        self.store: Store = store if store is not None else MemoryStore(log=log)
        self.log = log if log is not None else self.store.log
        self._kind = f"{name} token"  # its records in the store: "job token", ...

    def claim(self, key: str, *, worker_id: str | None = None) -> int:
        """The next token for `key` (1, 2, 3, ...), held by `worker_id` if given. Two claims
        at once never get the same token: the first claim of a key is one INSERT that only
        one of them wins, and a later claim reads the key's row locked until it commits."""
        held = self._locked(key, 1, worker_id)
        if held is None:
            return 1
        token: int = held["token"] + 1
        self.store.put(self._kind, key, {"token": token, "holders": {**held["holders"], str(token): worker_id}})
        return token

    def observe(self, key: str, token: int, *, worker_id: str | None = None) -> None:
        """A token issued elsewhere (a queue's lease) reached this store: if it is newer
        than any seen for `key`, it becomes the current one."""
        held = self._locked(key, token, worker_id)
        if held is not None and token > held["token"]:
            self.store.put(self._kind, key, {"token": token, "holders": {**held["holders"], str(token): worker_id}})

    def _locked(self, key: str, first: int, worker_id: str | None) -> dict[str, Any] | None:
        """None if this call made `key`'s first record (token `first`); else the record,
        read under a lock held until the transaction ends, so what it says decides the write."""
        held: dict[str, Any] | None = self.store.get(self._kind, key)
        if held is None and self.store.put_new(self._kind, key, {"token": first, "holders": {str(first): worker_id}}):
            return None
        return held if held is not None else self.store.get(self._kind, key)

    def current(self, key: str) -> int:
        """The newest token issued for `key` (0 before the first claim)."""
        held = self.store.get(self._kind, key)
        return 0 if held is None else held["token"]

    def current_token(self, key: str) -> int | None:
        """The newest token issued for `key`, or None if nobody ever claimed it: no token is
        current for a key never claimed (lab 04's rule)."""
        return self.current(key) or None

    def holder(self, key: str, token: int) -> str | None:
        """The worker that claimed `key` with `token`, if the claim named one."""
        held = self.store.get(self._kind, key)
        return None if held is None else held["holders"].get(str(token))

    def check(
        self,
        key: str,
        token: int,
        *,
        t: float,
        op: str,
        current: int | None = None,
        item_id: str | None = None,
        case_id: str | None = None,
        worker_id: str | None = None,
    ) -> None:
        """Lab 04's rule: pass only the newest token for `key`. Any other (an older one, or
        one never issued: above the newest, below 1, or any token while none was issued) is
        logged and refused with StaleTokenError; what is not a whole number at all (nan,
        True, 1.5) is refused as a bad argument. The event names `key` as its item and the
        token's holder as its worker, unless told otherwise."""
        if not arguments.is_whole(token):
            raise BadArgumentError(
                field="token", problem=f"is {token!r}, not a whole number", fix="pass the int token the claim returned"
            )
        newest = self.current(key) if current is None else current
        if token != newest or newest < 1:
            self.log.append(
                EventKind.STALE_REJECTED,
                t,
                item_id=key if item_id is None else item_id,
                case_id=case_id,
                worker_id=self.holder(key, token) if worker_id is None else worker_id,
                token=token,
                op=op,
                current=newest,
            )
            raise StaleTokenError(what=self.what.format(key=key), token=token, current=newest)

    def __repr__(self) -> str:
        return f"TokenFence({self.name!r})"


class NaiveResultStore:
    """Issues a strictly increasing token per job on each claim; accepts every write."""

    def __init__(self, *, clock: Clock | None = None, log: EventLog | None = None) -> None:
        self.clock: Clock = component_clock(clock)
        self.log = component_log(log)
        self._tokens: dict[str, int] = {}
        self._results: dict[str, Any] = {}
        self._writers: dict[str, tuple[str | None, int]] = {}

    def claim(self, job_id: str, worker_id: str, *, now: float | None = None) -> int:
        """Give `worker_id` the next token for `job_id` (1, 2, 3, ...)."""
        _text("job_id", job_id)
        _text("worker_id", worker_id)
        t = resolve(self.clock, now)
        token = self._tokens.get(job_id, 0) + 1  # the first claim gets token 1
        self._tokens[job_id] = token
        self.log.append(
            EventKind.JOB_CLAIMED, t, item_id=job_id, case_id=job_id, worker_id=worker_id, token=token, store="results"
        )
        return token

    def current_token(self, job_id: str) -> int | None:
        """The newest token issued for `job_id`, or None if nobody ever claimed it: before
        the first claim no token is current, so no write can carry it (TokenFence's rule)."""
        return self._tokens.get(_text("job_id", job_id))

    def complete(
        self, job_id: str, result: Any, *, token: int, worker_id: str | None = None, now: float | None = None
    ) -> None:
        """Store `result` for `job_id`. This version never refuses: that is the bug."""
        _text("job_id", job_id)
        arguments.whole("token", token, None, "pass the int that claim() returned")
        if worker_id is not None:
            _text("worker_id", worker_id)
        value = json_copy(result, "result")
        t = resolve(self.clock, now)
        current = self.current_token(job_id)
        if token != current:
            self.log.append(
                EventKind.STALE_WRITE_ACCEPTED,
                t,
                item_id=job_id,
                case_id=job_id,
                worker_id=worker_id,
                token=token,
                current=current,
            )
        self._results[job_id] = value
        self._writers[job_id] = (worker_id, token)
        self.log.append(
            EventKind.ACKED, t, item_id=job_id, case_id=job_id, worker_id=worker_id, token=token, store="results"
        )

    def result(self, job_id: str) -> Any:
        """The stored result for `job_id`, or None."""
        return json_copy(self._results.get(_text("job_id", job_id)), "result")

    def written_by(self, job_id: str) -> tuple[str | None, int] | None:
        """(worker, token) of the write that produced the current result."""
        return self._writers.get(_text("job_id", job_id))


def _text(field: str, value: object) -> str:
    return arguments.text(field, value, "a non-empty string such as 'job-0001' or 'W1'")
