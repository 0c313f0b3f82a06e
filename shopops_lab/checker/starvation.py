"""Approval starvation: how long each approval waited while it could have been served, and
which lower-priority leases went ahead of it meanwhile.

The pass over the log says when an approval joins its case's line, when the line or the
case changes, and when the approval leaves; this module keeps the clocks. An approval's
clock runs only while it is first in its case's line and the case is free: time spent
behind its own case is that case's order, not starvation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shopops_lab.checker.messages import approval_starved
from shopops_lab.checker.result import Anomaly
from shopops_lab.events import Event
from shopops_lab.worker.queue import Priority

__all__ = ["APPROVAL_KIND", "DEFAULT_APPROVAL_WAIT_BUDGET", "ApprovalWaits", "is_approval"]

DEFAULT_APPROVAL_WAIT_BUDGET = 300.0  # seconds an approval may wait while bulk work goes ahead
APPROVAL_KIND = "approval_resume"  # the job kind that resumes a case a person approved
_SHOWN_OVERTAKERS = 3  # overtaking leases kept as evidence per starved approval


def is_approval(info: Mapping[str, Any]) -> bool:
    """Whether an ENQUEUED event's `info` is an approval: queued at `Priority.APPROVAL`, or
    an approval resume whatever priority it was given (a wrong priority is exactly what
    starves one). The one definition the checker and the simulator's report share."""
    priority = info.get("priority", Priority.NORMAL)
    return (priority == Priority.APPROVAL and not isinstance(priority, bool)) or info.get("kind") == APPROVAL_KIND


class _Wait:
    """One wait of an approval item, from becoming ready to being leased."""

    __slots__ = ("item_id", "case_id", "ready", "waited", "held", "running", "since", "mark", "overtaken", "first")

    def __init__(self, item_id: str, case_id: str, ready: Event) -> None:
        self.item_id, self.case_id, self.ready = item_id, case_id, ready
        self.waited = self.held = 0.0
        self.running = False  # the clock runs (first in line, the case free), else the wait is held
        self.since = ready.time  # when the clock last started, or when the wait was last held
        self.mark = 0  # overtakers seen when the clock started
        self.overtaken = 0
        self.first: list[Event] = []


class ApprovalWaits:
    """The open waits, by item and by case. Starved approvals are added to `found`.

    `overtakers` is every lease of a non-approval item in log order; the pass appends to
    it directly (it is the hot path), and each wait remembers how far along it was."""

    def __init__(self, budget: float, found: list[Anomaly]) -> None:
        self.budget, self.found = budget, found
        self.open: dict[str, _Wait] = {}  # item -> its wait
        self.by_case: dict[str, list[_Wait]] = {}  # case -> the waits on it
        self.overtakers: list[Event] = []

    def start(self, item_id: str, case_id: str, ready: Event) -> None:
        """The approval `item_id` joined its case's line (`ready`: the event that put it there)."""
        wait = self.open[item_id] = _Wait(item_id, case_id, ready)
        self.by_case.setdefault(case_id, []).append(wait)

    def stop(self, item_id: str, leased: Event | None) -> None:
        """The approval left its line: `leased` took it (judge the wait), or None (it was
        settled some other way, so the wait just ends)."""
        wait = self.open.pop(item_id, None)
        if wait is None:
            return
        waits = self.by_case[wait.case_id]
        waits.remove(wait)
        if not waits:
            del self.by_case[wait.case_id]
        if leased is not None:
            self._judge(wait, leased.time, leased)

    def refresh(self, case: str, t: float, head: str | None) -> None:
        """Start or stop the clocks of the approvals waiting on `case`; `head` is the item
        that could be served now (first in line, the case free), if any."""
        for wait in self.by_case.get(case, ()):
            if wait.item_id == head:
                if not wait.running:
                    wait.held += t - wait.since
                    wait.running, wait.since, wait.mark = True, t, len(self.overtakers)
            elif wait.running:
                self._tally(wait, t)
                wait.running, wait.since = False, t

    def finish(self, end: float) -> None:
        """The log ended at `end`: judge the approvals still waiting."""
        for wait in self.open.values():
            self._judge(wait, end, None)

    def _tally(self, wait: _Wait, t: float) -> None:
        """Close the running stretch of `wait` at `t`: add its time and its overtakers."""
        wait.waited += t - wait.since
        count = len(self.overtakers) - wait.mark
        wait.overtaken += count
        room = _SHOWN_OVERTAKERS - len(wait.first)
        if room > 0 and count > 0:
            wait.first.extend(self.overtakers[wait.mark : wait.mark + min(room, count)])
        wait.mark = len(self.overtakers)

    def _judge(self, wait: _Wait, t: float, leased: Event | None) -> None:
        if wait.running:
            self._tally(wait, t)
        else:
            wait.held += t - wait.since
        if wait.waited > self.budget and wait.overtaken:
            self.found.append(
                approval_starved(
                    wait.ready,
                    leased,
                    item_id=wait.item_id,
                    case_id=wait.case_id,
                    t=t,
                    waited=wait.waited,
                    held=wait.held,
                    overtakers=wait.first,
                    overtaken=wait.overtaken,
                    budget=self.budget,
                )
            )
