"""A result store that hands out fencing tokens but, on purpose, does not check them.

Lab 04 starts here: the store issues token 4 to A and token 5 to B, yet still accepts
A's late completion. The fix belongs at this boundary (the authoritative store), not
in the worker's memory of its own lease: `complete` must refuse any token that is not
the current one. The naive store logs each stale write it accepts so the checker can
name it.
"""
from __future__ import annotations

from typing import Any

from shopops_lab import arguments
from shopops_lab.clock import Clock
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import EventKind, EventLog
from shopops_lab.payloads import json_copy


class NaiveResultStore:
    """Issues a strictly increasing token per job on each claim; accepts every write."""

    def __init__(self, *, clock: Clock | None = None, log: EventLog | None = None) -> None:
        self.clock: Clock = arguments.clock(clock)
        self.log = arguments.log(log)
        self._tokens: dict[str, int] = {}
        self._results: dict[str, Any] = {}
        self._writers: dict[str, tuple[str | None, int]] = {}

    def claim(self, job_id: str, worker_id: str, *, now: float | None = None) -> int:
        """Give `worker_id` the next token for `job_id` (1, 2, 3, ...)."""
        _text("job_id", job_id)
        _text("worker_id", worker_id)
        t = self._now(now)
        token = self._tokens.get(job_id, 0) + 1
        self._tokens[job_id] = token
        self.log.append(EventKind.JOB_CLAIMED, t, item_id=job_id, case_id=job_id,
                        worker_id=worker_id, token=token, store="results")
        return token

    def current_token(self, job_id: str) -> int:
        """The newest token issued for `job_id` (0 if never claimed)."""
        return self._tokens.get(_text("job_id", job_id), 0)

    def complete(self, job_id: str, result: Any, *, token: int, worker_id: str | None = None,
                 now: float | None = None) -> None:
        """Store `result` for `job_id`. This version never refuses: that is the bug."""
        _text("job_id", job_id)
        if isinstance(token, bool) or not isinstance(token, int):
            raise BadArgumentError(field="token", problem=f"is {token!r}", fix="pass the int that claim() returned")
        if worker_id is not None:
            _text("worker_id", worker_id)
        value = json_copy(result, "result")
        t = self._now(now)
        current = self.current_token(job_id)
        if token != current:
            self.log.append(EventKind.STALE_WRITE_ACCEPTED, t, item_id=job_id, case_id=job_id,
                            worker_id=worker_id, token=token, current=current)
        self._results[job_id] = value
        self._writers[job_id] = (worker_id, token)
        self.log.append(EventKind.ACKED, t, item_id=job_id, case_id=job_id, worker_id=worker_id,
                        token=token, store="results")

    def result(self, job_id: str) -> Any:
        """The stored result for `job_id`, or None."""
        return json_copy(self._results.get(_text("job_id", job_id)), "result")

    def written_by(self, job_id: str) -> tuple[str | None, int] | None:
        """(worker, token) of the write that produced the current result."""
        return self._writers.get(_text("job_id", job_id))

    def _now(self, now: float | None) -> float:
        return arguments.time_of(now, self.clock)


def _text(field: str, value: object) -> str:
    return arguments.text(field, value, "a non-empty string such as 'job-0001' or 'W1'")
