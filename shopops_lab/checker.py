"""The referee: reads an event log and names every promise the run broke, with the events
that prove it.

It trusts nothing but the log, so it judges a live queue's log and one rebuilt from JSON
(`EventLog.from_dicts`) the same way. One pass in `seq` order rebuilds what the queue and
the adapters knew at each moment: lease intervals per case, the newest token per item,
contacts grouped by intent, how long each approval has been waiting. A verdict is
`True` (nothing wrong), `False` (at least one anomaly) or `None` (cannot tell yet: the log
is empty, or not final while items are still in flight).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Callable, Iterable

from shopops_lab.errors import BadArgumentError
from shopops_lab.events import Event, EventKind, EventLog, collector_paused
from shopops_lab.states import ItemState

__all__ = ["DEFAULT_APPROVAL_WAIT_BUDGET", "DEFAULT_MAX_ATTEMPTS", "Anomaly", "AnomalyName",
           "CheckResult", "check"]

DEFAULT_MAX_ATTEMPTS = 5               # the queue's own default, assumed when nobody says
DEFAULT_APPROVAL_WAIT_BUDGET = 300.0   # seconds an approval may wait while bulk work goes ahead
_SHOWN_EVIDENCE = 12                   # evidence lines printed per anomaly (all are kept)
_SHOWN_OVERTAKERS = 3                  # overtaking leases kept as evidence per starved approval
_APPROVAL_KIND = "approval_resume"
_READY, _LEASED, _DONE, _DEAD = ItemState.READY, ItemState.LEASED, ItemState.DONE, ItemState.DEAD


class AnomalyName(StrEnum):
    """Everything the checker can find. Each one is a promise the run broke."""

    APPROVAL_STARVED = "approval_starved"          # an approval waited past its budget while bulk work went ahead
    DOUBLE_CONTACT = "double_contact"              # a customer heard the same thing twice
    LOST_ITEM = "lost_item"                        # a finished run left an item neither done nor dead-lettered
    POISON_RETRY_STORM = "poison_retry_storm"      # an item was delivered past max_attempts instead of dead-lettered
    STALE_WRITE_ACCEPTED = "stale_write_accepted"  # a store took a write under a token that was no longer current
    TWO_LIVE_LEASES = "two_live_leases"            # two leases on one case were live at the same moment


@dataclass(frozen=True, kw_only=True, slots=True)
class Anomaly:
    """One broken promise: what went wrong in words, who and what was involved, and the
    events that prove it (in log order)."""

    name: AnomalyName
    message: str
    case_id: str | None = None
    item_id: str | None = None
    workers: tuple[str, ...] = ()
    tokens: tuple[int, ...] = ()
    times: tuple[float, ...] = ()
    evidence: tuple[Event, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready dict (evidence as event dicts)."""
        return {"name": self.name.value, "message": self.message, "case_id": self.case_id,
                "item_id": self.item_id, "workers": list(self.workers), "tokens": list(self.tokens),
                "times": list(self.times), "evidence": [e.as_dict() for e in self.evidence]}

    def __str__(self) -> str:
        lines = [f"{self.name.value}: {self.message}"]
        shown = self.evidence[:_SHOWN_EVIDENCE]
        lines.extend(f"  {event}" for event in shown)
        if len(self.evidence) > len(shown):
            lines.append(f"  ... and {len(self.evidence) - len(shown)} more events (see .evidence)")
        return "\n".join(lines)


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckResult:
    """The verdict on one log. `valid` is True, False, or None for "cannot tell yet";
    `summary` says in one line what was checked or why the answer is unknown."""

    valid: bool | None
    anomalies: tuple[Anomaly, ...] = ()
    summary: str = ""
    event_count: int = 0

    def names(self) -> list[AnomalyName]:
        """The distinct anomaly names found, sorted."""
        return sorted({anomaly.name for anomaly in self.anomalies})

    def of(self, name: AnomalyName | str) -> tuple[Anomaly, ...]:
        """The anomalies called `name`, in report order."""
        try:
            wanted = AnomalyName(name)
        except ValueError:
            known = ", ".join(n.value for n in AnomalyName)
            raise BadArgumentError(field="name", problem=f"is {name!r}, not an anomaly the checker knows",
                                   fix=f"use one of: {known}") from None
        return tuple(a for a in self.anomalies if a.name is wanted)

    def as_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready dict."""
        return {"valid": self.valid, "summary": self.summary, "event_count": self.event_count,
                "anomalies": [a.as_dict() for a in self.anomalies]}

    def __str__(self) -> str:
        if self.valid is None:
            return f"unknown: {self.summary}"
        if self.valid:
            return f"valid: {self.summary}"
        blocks = [f"invalid: {self.summary}"]
        blocks.extend(str(anomaly) for anomaly in self.anomalies)
        return "\n\n".join(blocks)


def check(log: EventLog, *, max_attempts: int | None = None,
          approval_wait_budget: float | None = None, final: bool = True) -> CheckResult:
    """Judge `log` and name every anomaly with its evidence.

    `max_attempts` is the queue's limit (else each item's ENQUEUED `max_attempts`, else 5);
    `approval_wait_budget` is how many seconds an approval may wait while lower-priority
    work is leased ahead of it (default 300). Pass `final=False` for a log that is still
    growing: items in flight are then not counted as lost.
    """
    if not isinstance(log, EventLog):
        raise BadArgumentError(field="log", problem=f"is a {type(log).__name__}",
                               fix="pass an EventLog, e.g. queue.log, or EventLog.from_dicts(rows) for a saved log")
    if max_attempts is not None and (isinstance(max_attempts, bool) or not isinstance(max_attempts, int)
                                     or max_attempts < 1):
        raise BadArgumentError(field="max_attempts", problem=f"is {max_attempts!r}",
                               fix="pass the queue's limit, a whole number >= 1 (queue.max_attempts), or leave it out")
    if approval_wait_budget is not None and (
            isinstance(approval_wait_budget, bool) or not isinstance(approval_wait_budget, (int, float))
            or not 0 < approval_wait_budget < math.inf):
        raise BadArgumentError(field="approval_wait_budget", problem=f"is {approval_wait_budget!r}",
                               fix="pass a positive number of seconds, e.g. 300, or leave it out")
    if not isinstance(final, bool):
        raise BadArgumentError(field="final", problem=f"is {final!r}",
                               fix="pass True for a finished run or False for a log that is still growing")
    if not len(log):
        return CheckResult(valid=None,
                           summary="the log is empty: nothing has happened yet, so there is nothing to judge")
    budget = DEFAULT_APPROVAL_WAIT_BUDGET if approval_wait_budget is None else float(approval_wait_budget)
    with collector_paused():
        events = log.events
        judge = _Pass(max_attempts, budget)
        judge.run(events)
        anomalies = judge.finish(final)
    return _verdict(judge, anomalies, len(events))


# --------------------------------------------------------------------------- the pass

class _Item:
    """What the log has said so far about one item."""

    __slots__ = ("id", "case_id", "enqueued", "approval", "limit", "state", "last",
                 "max_token", "leases", "began", "since", "error")

    def __init__(self, item_id: str, case_id: str | None) -> None:
        self.id, self.case_id = item_id, case_id
        self.enqueued: Event | None = None
        self.approval, self.limit = False, None
        self.state: ItemState | None = None
        self.last: Event | None = None
        self.max_token = 0                               # the highest token granted so far
        self.leases: list[Event] = []                    # every LEASED event, in log order
        self.began: Event | None = None                  # the enqueue or replay that began the current round
        self.since = 0                                   # leases[since:] are the current round's
        self.error: str | None = None


class _Wait:
    """One wait of an approval item, from becoming ready to being leased. Its clock runs
    only while the item could have been served: its case free and the item first in the
    case's line. Time spent behind its own case is the case's order, not starvation."""

    __slots__ = ("item", "ready", "waited", "held", "since", "held_since", "mark", "overtaken", "first")

    def __init__(self, item: _Item, ready: Event) -> None:
        self.item, self.ready = item, ready
        self.waited = self.held = 0.0
        self.since: float | None = None                  # when the clock last started; None while held
        self.held_since: float | None = ready.time
        self.mark = 0                                     # lower-priority leases seen when the clock started
        self.overtaken = 0
        self.first: list[Event] = []


class _Pass:
    """One walk over the events. Handlers keep what the queue knew (item states, each
    case's line of ready items, live leases, newest tokens); anomalies visible at one
    event are noted there, the rest are judged at the end."""

    def __init__(self, max_attempts: int | None, budget: float) -> None:
        self.max_attempts, self.budget = max_attempts, budget
        self.items: dict[str, _Item] = {}
        self.lines: dict[str, deque[_Item]] = {}                        # case -> ready items, next first
        self.live: dict[str, list[list]] = {}                           # case -> [[LEASED, expires_at], ...]
        self.lease_by: dict[tuple[str, str], Event] = {}                 # (case, worker) -> latest LEASED
        self.contacts: dict[tuple[str, str], list[tuple[Event, Event | None]]] = {}
        self.waits: dict[str, _Wait] = {}
        self.waits_by_case: dict[str, list[_Wait]] = {}
        self.plain: list[Event] = []                     # LEASED events of non-approval items
        self.stale: dict[tuple, list[Event]] = {}        # (item, token, worker, time) -> evidence
        self.found: list[Anomaly] = []
        self.end = 0.0
        self.handlers: dict[EventKind, Callable[[Event], None]] = {
            EventKind.ENQUEUED: self._enqueued, EventKind.LEASED: self._leased,
            EventKind.HEARTBEAT: self._heartbeat, EventKind.ACKED: self._acked,
            EventKind.NACKED: self._nacked, EventKind.EXPIRED: self._expired,
            EventKind.DEAD_LETTERED: self._dead_lettered, EventKind.REPLAYED: self._replayed,
            EventKind.CONTACT_SENT: self._contact_sent, EventKind.CHECKPOINT_WRITTEN: self._checkpoint,
            EventKind.STALE_WRITE_ACCEPTED: self._stale_write_accepted,
            EventKind.DELIVERED_TWICE: self._delivered_twice, EventKind.JOB_CLAIMED: self._claimed,
        }

    def run(self, events: list[Event]) -> None:
        handler = self.handlers.get
        for event in events:
            act = handler(event.kind)
            if act is not None:
                act(event)
        self.end = events[-1].time

    # ------------------------------------------------------------------ queue events
    def _item(self, event: Event) -> _Item | None:
        item_id = event.item_id
        if item_id is None:
            return None
        item = self.items.get(item_id)
        if item is None:
            item = self.items[item_id] = _Item(item_id, event.case_id)
        return item

    def _enqueued(self, event: Event) -> None:
        item = self._item(event)
        if item is None:
            return
        info = event.info
        priority = info.get("priority", 1)
        item.approval = (priority == 0 and not isinstance(priority, bool)) or info.get("kind") == _APPROVAL_KIND
        limit = info.get("max_attempts")
        item.limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1 else None
        if event.case_id is not None:
            item.case_id = event.case_id
        item.enqueued = item.began = event
        item.since = len(item.leases)
        self._move(item, _READY, event)
        if item.case_id in self.waits_by_case:
            self._refresh(item.case_id, event.time)

    def _leased(self, event: Event) -> None:
        item = self._item(event)
        if item is None:
            return
        token, case = event.token, item.case_id
        if token is not None and token > item.max_token:
            item.max_token = token
        item.leases.append(event)
        self._move(item, _LEASED, event)
        if case is None:
            return
        self._check_overlap(case, event)
        if case in self.waits_by_case:
            self._refresh(case, event.time)
        if event.worker_id is not None:
            self.lease_by[(case, event.worker_id)] = event
        if not item.approval and item.enqueued is not None:
            self.plain.append(event)

    def _claimed(self, event: Event) -> None:
        """A store's claim (the job store, lab 04's result store): it grants a token that
        fences later writes, but it is not a queue lease, so it never overlaps one."""
        item = self._item(event)
        if item is None:
            return
        if event.token is not None and event.token > item.max_token:
            item.max_token = event.token
        item.leases.append(event)
        if item.case_id is not None and event.worker_id is not None:
            self.lease_by[(item.case_id, event.worker_id)] = event

    def _heartbeat(self, event: Event) -> None:
        item = self.items.get(event.item_id)
        if item is None:
            return
        self._fence(item, event)
        expires_at = event.info.get("expires_at")
        if isinstance(expires_at, (int, float)):
            for lease in self.live.get(item.case_id, ()):
                if lease[0].item_id == item.id and lease[0].token == event.token:
                    lease[1] = expires_at

    def _acked(self, event: Event) -> None:
        item = self._item(event)
        if item is not None:
            self._fence(item, event)
            self._settle(item, event, _DONE)

    def _nacked(self, event: Event) -> None:
        item = self._item(event)
        if item is not None:
            self._fence(item, event)
            error = event.info.get("error")
            if error is not None:
                item.error = error
            self._settle(item, event, _READY)

    def _expired(self, event: Event) -> None:
        item = self._item(event)
        if item is not None:
            self._settle(item, event, _READY)

    def _dead_lettered(self, event: Event) -> None:
        item = self._item(event)
        if item is not None:
            self._settle(item, event, _DEAD)
            self._judge_storm(item, ended_by=event)
            item.began, item.since = None, len(item.leases)

    def _replayed(self, event: Event) -> None:
        item = self._item(event)
        if item is None:
            return
        self._judge_storm(item, ended_by=None)
        item.began, item.since = event, len(item.leases)
        self._move(item, _READY, event)
        if item.case_id in self.waits_by_case:
            self._refresh(item.case_id, event.time)

    def _settle(self, item: _Item, event: Event, state: ItemState) -> None:
        """A lease ended (ack, nack, expiry, dead-letter): free the case, move the item."""
        case = item.case_id
        live = self.live.get(case)
        if live:
            token = event.token
            live[:] = [lease for lease in live
                       if lease[0].item_id != item.id or (token is not None and lease[0].token != token)]
            if not live:
                del self.live[case]
        self._move(item, state, event)
        if case in self.waits_by_case:
            self._refresh(case, event.time)

    def _move(self, item: _Item, state: ItemState, event: Event) -> None:
        """Record the item's new state, keeping its case's line of ready items the way the
        queue keeps it: new and replayed items join at the back, a failed or expired
        attempt goes back to the front."""
        before = item.state
        item.state, item.last = state, event
        if before is _READY:
            if state is not _READY:
                self._leave_line(item, state, event)
        elif state is _READY and item.case_id is not None:
            line = self.lines.get(item.case_id)
            if line is None:
                line = self.lines[item.case_id] = deque()
            if before is _LEASED:
                line.appendleft(item)
            else:
                line.append(item)
            if item.approval:
                wait = self.waits[item.id] = _Wait(item, event)
                self.waits_by_case.setdefault(item.case_id, []).append(wait)

    def _leave_line(self, item: _Item, state: ItemState, event: Event) -> None:
        line = self.lines.get(item.case_id)
        if line:
            if line[0] is item:
                line.popleft()
            elif item in line:
                line.remove(item)
            if not line:
                del self.lines[item.case_id]
        if item.approval:
            wait = self.waits.pop(item.id, None)
            if wait is not None:
                self._drop_wait(wait)
                if state is _LEASED:
                    self._judge_wait(wait, event.time, event)

    # ------------------------------------------------------------------ leases per case
    def _check_overlap(self, case: str, event: Event) -> None:
        """A new lease on `case`: every lease still live on it (not ended by an event and
        not past its deadline) is a second holder."""
        expires_at = event.info.get("expires_at")
        lease = [event, expires_at if isinstance(expires_at, (int, float)) else None]
        live = self.live.get(case)
        if not live:
            self.live[case] = [lease]
            return
        t = event.time
        live[:] = [held for held in live if held[1] is None or held[1] > t]
        if live:
            self._two_live_leases(case, event, [held for held, _ in live], [until for _, until in live])
        live.append(lease)

    # ------------------------------------------------------------------ approval waits
    def _refresh(self, case: str, t: float) -> None:
        """Start or stop the clocks of the approvals waiting on `case`."""
        waits = self.waits_by_case.get(case)
        if not waits:
            return
        line = self.lines.get(case)
        head = line[0] if line and case not in self.live else None
        for wait in waits:
            if wait.item is head:
                if wait.since is None:
                    wait.held += t - wait.held_since
                    wait.since, wait.held_since, wait.mark = t, None, len(self.plain)
            elif wait.since is not None:
                self._tally(wait, t)
                wait.since, wait.held_since = None, t

    def _tally(self, wait: _Wait, t: float) -> None:
        """Close the running stretch of `wait` at `t`: add its time and its overtakers."""
        wait.waited += t - wait.since
        count = len(self.plain) - wait.mark
        wait.overtaken += count
        room = _SHOWN_OVERTAKERS - len(wait.first)
        if room > 0 and count > 0:
            wait.first.extend(self.plain[wait.mark:wait.mark + min(room, count)])
        wait.mark = len(self.plain)

    def _drop_wait(self, wait: _Wait) -> None:
        case = wait.item.case_id
        waits = self.waits_by_case[case]
        waits.remove(wait)
        if not waits:
            del self.waits_by_case[case]

    def _judge_wait(self, wait: _Wait, t: float, leased: Event | None) -> None:
        if wait.since is not None:
            self._tally(wait, t)
        else:
            wait.held += t - wait.held_since
        if wait.waited > self.budget and wait.overtaken:
            self._approval_starved(wait, t, leased)

    # ------------------------------------------------------------------ writes and contacts
    def _checkpoint(self, event: Event) -> None:
        item = self.items.get(event.item_id)
        if item is not None:
            self._fence(item, event)

    def _fence(self, item: _Item, event: Event) -> None:
        """A write made under a token (ack, nack, heartbeat, checkpoint) that was accepted
        although a newer token had been granted for the item: the store did not fence."""
        token = event.token
        if token is not None and token < item.max_token:
            self.stale.setdefault((item.id, token, event.worker_id, event.time), []).append(event)

    def _stale_write_accepted(self, event: Event) -> None:
        key = (event.item_id, event.token, event.worker_id, event.time)
        self.stale.setdefault(key, []).append(event)

    def _delivered_twice(self, event: Event) -> None:
        """A broker's copy of a live lease went to a second worker: not a second lease (same
        token), but what that worker sends next was sent under it."""
        if event.case_id is not None and event.worker_id is not None:
            self.lease_by[(event.case_id, event.worker_id)] = event

    def _contact_sent(self, event: Event) -> None:
        key = event.info.get("idem_key")
        if event.case_id is None or key is None:
            return  # without a case and a key there is no intent to compare
        lease = self.lease_by.get((event.case_id, event.worker_id)) if event.worker_id is not None else None
        self.contacts.setdefault((event.case_id, key), []).append((event, lease))

    # ------------------------------------------------------------------ the end of the log
    def finish(self, final: bool) -> list[Anomaly]:
        for wait in self.waits.values():
            self._judge_wait(wait, self.end, None)
        for item in self.items.values():
            self._judge_storm(item, ended_by=None)
            if final and item.enqueued is not None and item.state in (_READY, _LEASED):
                self._lost_item(item)
        for (case, key), sends in self.contacts.items():
            if len(sends) > 1:
                self._double_contact(case, key, sends)
        for key, events in self.stale.items():
            self._stale_write(key, events)
        return sorted(self.found, key=lambda a: (a.name.value, a.evidence[0].seq if a.evidence else -1,
                                                 a.message))

    def in_flight(self) -> list[str]:
        return [item.id for item in self.items.values()
                if item.enqueued is not None and item.state in (_READY, _LEASED)]

    # ------------------------------------------------------------------ the anomalies, in words
    def _add(self, name: AnomalyName, message: str, evidence: Iterable[Event | None], *,
             case_id: str | None = None, item_id: str | None = None) -> None:
        unique = {e.seq: e for e in evidence if e is not None}
        events = tuple(unique[seq] for seq in sorted(unique))
        self.found.append(Anomaly(
            name=name, message=message, case_id=case_id, item_id=item_id,
            workers=tuple(sorted({e.worker_id for e in events if e.worker_id is not None})),
            tokens=tuple(sorted({e.token for e in events if e.token is not None})),
            times=tuple(sorted({e.time for e in events})), evidence=events))

    def _double_contact(self, case: str, key: str, sends: list[tuple[Event, Event | None]]) -> None:
        channel = sends[0][0].info.get("channel")
        verb = _VERBS.get(channel, f"contacted by {channel}" if channel else "contacted")
        parts = [f"{event.info.get('message_id', 'a message')} at t={_t(event.time)}{_by(event.worker_id, lease)}"
                 for event, lease in sends]
        message = (f"case {case} was {verb} {_times(len(sends))} for intent {key} — {_and(parts)}. "
                   "Every send after the first reached the customer again: send with the idempotency "
                   "key through an adapter that returns the first message id on a repeat.")
        evidence = [e for pair in sends for e in pair]
        self._add(AnomalyName.DOUBLE_CONTACT, message, evidence, case_id=case)

    def _lost_item(self, item: _Item) -> None:
        last, enqueued = item.last, item.enqueued
        if item.state is _LEASED:
            leases = [until for held, until in self.live.get(item.case_id, ()) if held is last]
            expires_at = leases[0] if leases else last.info.get("expires_at")
            ran_out = (f"; that lease ran out at t={_t(expires_at)}, but no expiry returned the item"
                       if isinstance(expires_at, (int, float)) and expires_at <= self.end else "")
            where = (f"still leased by {last.worker_id or 'a worker'}"
                     f"{'' if last.token is None else f' (token {last.token})'} since t={_t(last.time)}{ran_out}")
        else:
            why = {EventKind.EXPIRED: "after its lease expired", EventKind.NACKED: "after a failed attempt",
                   EventKind.REPLAYED: "after a replay from the dead-letter queue"}.get(last.kind, "")
            where = ("still waiting in the queue: no worker ever leased it" if last is enqueued else
                     f"still waiting in the queue, ready since t={_t(last.time)}{' ' + why if why else ''}")
        message = (f"item {item.id} (case {item.case_id}) never finished: enqueued at t={_t(enqueued.time)}, "
                   f"and when the log ends it is {where}. A finished run must leave every item acked "
                   "or in the dead-letter queue.")
        self._add(AnomalyName.LOST_ITEM, message, [enqueued, last], case_id=item.case_id, item_id=item.id)

    def _two_live_leases(self, case: str, event: Event, held: list[Event], until: list[float | None]) -> None:
        holders = [f"{lease.worker_id or 'a worker'} holds {lease.item_id} with token {lease.token}"
                   f"{'' if end is None else f' until t={_t(end)}'}" for lease, end in zip(held, until)]
        count = "two live leases" if len(held) == 1 else f"{len(held) + 1} live leases"
        message = (f"case {case} had {count} at t={_t(event.time)}: {_and(holders)}, and "
                   f"{event.worker_id or 'another worker'} was granted {event.item_id} with token {event.token}. "
                   "Only one worker may hold a case at a time: the queue must refuse a new lease until "
                   "the live one is acked, nacked or expired.")
        self._add(AnomalyName.TWO_LIVE_LEASES, message, [*held, event], case_id=case, item_id=event.item_id)

    def _stale_write(self, key: tuple, events: list[Event]) -> None:
        item_id, token, worker, time = key
        item = self.items.get(item_id) if item_id is not None else None
        write = events[0]
        newest = own = None
        if item is not None and token is not None:
            # the writer's own claim, and the newest claim granted to someone else before the write
            before = [lease for lease in item.leases if lease.seq < write.seq and lease.token is not None]
            own = next((lease for lease in reversed(before) if lease.token == token), None)
            newest = next((lease for lease in reversed(before) if lease.token > token), None)
        current = newest.token if newest is not None else write.info.get("current")
        op = write.info.get("op") if write.kind is EventKind.STALE_WRITE_ACCEPTED else None
        what = _WRITES.get(write.kind, "wrote to") if op is None else f"wrote ({op}) to"
        case = write.case_id or (item.case_id if item is not None else None)
        subject = (f"item {item_id}" + (f" (case {case})" if case else "") if item_id is not None
                   else f"case {case}" if case else "the store")
        granted = (f"token {current} had already been granted to {newest.worker_id or 'another worker'} "
                   f"at t={_t(newest.time)}" if newest is not None
                   else f"the current token was {current}" if current is not None
                   else "a newer token had already been granted")
        held = "a stale token" if token is None else f"token {token}"
        message = (f"{worker or 'a worker'} {what} {subject} at t={_t(time)} with {held}, but {granted}; "
                   "the store accepted it. The store must compare tokens and refuse the older one, "
                   "even when the old worker's work was correct.")
        self._add(AnomalyName.STALE_WRITE_ACCEPTED, message, [own, newest, *events],
                  case_id=case, item_id=item_id)

    def _judge_storm(self, item: _Item, *, ended_by: Event | None) -> None:
        if item.enqueued is None:
            return  # a store's record (claimed, never queued): its claims are not redeliveries
        leases = item.leases[item.since:]
        limit = self.max_attempts or item.limit or DEFAULT_MAX_ATTEMPTS
        if len(leases) <= limit:
            return
        assumed = self.max_attempts is None and item.limit is None
        source = (f"max_attempts was not given, so {DEFAULT_MAX_ATTEMPTS} was assumed; "
                  "pass check(log, max_attempts=queue.max_attempts)") if assumed else f"max_attempts is {limit}"
        end = (f"before it was finally dead-lettered at t={_t(ended_by.time)}" if ended_by is not None
               else "without being dead-lettered")
        error = f" Last error: {item.error}." if item.error else ""
        message = (f"item {item.id} (case {item.case_id}) was leased {len(leases)} times {end} ({source}), "
                   f"first at t={_t(leases[0].time)} and last at t={_t(leases[-1].time)}.{error} "
                   "A poison item should stop after max_attempts deliveries and wait in the "
                   "dead-letter queue for a fix.")
        self._add(AnomalyName.POISON_RETRY_STORM, message, [item.began, *leases, ended_by],
                  case_id=item.case_id, item_id=item.id)

    def _approval_starved(self, wait: _Wait, t: float, leased: Event | None) -> None:
        item, ready = wait.item, wait.ready
        how = {EventKind.ENQUEUED: "enqueued", EventKind.REPLAYED: "replayed"}.get(ready.kind, "back in the queue")
        end = (f"{leased.worker_id or 'a worker'} leased it at t={_t(t)}" if leased is not None
               else f"it was still waiting when the log ends at t={_t(t)}")
        held = (f", not counting {_t(wait.held)} s while its own case was held" if wait.held > 0 else "")
        first = wait.first[0]
        overtook = (f"{wait.overtaken} lower-priority {'lease was' if wait.overtaken == 1 else 'leases were'} "
                    f"granted ahead of it, the first {first.item_id} (case {first.case_id}) to "
                    f"{first.worker_id or 'a worker'} at t={_t(first.time)}")
        message = (f"approval item {item.id} (case {item.case_id}) waited {_t(wait.waited)} s for a worker "
                   f"(budget {_t(self.budget)} s{held}): {how} at t={_t(ready.time)}, and {end}, while "
                   f"{overtook}. Serve approvals first (Priority.APPROVAL) and shed bulk work under load.")
        self._add(AnomalyName.APPROVAL_STARVED, message, [ready, *wait.first, leased],
                  case_id=item.case_id, item_id=item.id)


def _verdict(judge: _Pass, anomalies: list[Anomaly], count: int) -> CheckResult:
    events = f"{count} {'event' if count == 1 else 'events'}"
    if anomalies:
        names = ", ".join(sorted({a.name.value for a in anomalies}))
        noun = "anomaly" if len(anomalies) == 1 else "anomalies"
        return CheckResult(valid=False, anomalies=tuple(anomalies), event_count=count,
                           summary=f"{len(anomalies)} {noun} ({names}) in {events}")
    states = [item.state for item in judge.items.values() if item.enqueued is not None]
    done, dead = states.count(_DONE), states.count(_DEAD)
    pending = judge.in_flight()
    if pending:  # only possible when not final: a final log would have reported them lost
        shown = ", ".join(pending[:5]) + (f" and {len(pending) - 5} more" if len(pending) > 5 else "")
        return CheckResult(valid=None, event_count=count, summary=(
            f"no anomalies so far in {events}, but the log is not final and {len(pending)} "
            f"{'item is' if len(pending) == 1 else 'items are'} still in flight ({shown}), "
            "so lost items cannot be judged yet"))
    items = len(states)
    return CheckResult(valid=True, event_count=count, summary=(
        f"no anomalies in {events}: {items} {'item' if items == 1 else 'items'} "
        f"({done} acked, {dead} dead-lettered), no intent sent twice, one lease per case at a time"))


_VERBS = {"email": "emailed", "sms": "texted"}
_WRITES = {EventKind.ACKED: "acked", EventKind.NACKED: "nacked", EventKind.HEARTBEAT: "renewed the lease on",
           EventKind.CHECKPOINT_WRITTEN: "wrote a checkpoint for"}


def _t(x: float) -> str:
    """Seconds for people: 12, 12.5, 1234567 (no exponent, at most 3 decimals)."""
    text = f"{x:.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _by(worker: str | None, lease: Event | None) -> str:
    if worker is None:
        return ""
    return f" by {worker}" + (f" (token {lease.token})" if lease is not None and lease.token is not None else "")
