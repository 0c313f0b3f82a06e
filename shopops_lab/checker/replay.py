"""The single pass over a log: replay what the queue and the stores knew at each moment
(item states, each case's line of ready items, live leases, newest tokens, who sent what
under which lease) and hand each piece of evidence to whoever judges it.

Anomalies visible at one event (two live leases, a retry storm ended by a dead-letter)
are noted there; `verdict` judges the rest from what the pass kept. The words are in
`messages`, the approval clocks in `starvation`.
"""

from __future__ import annotations

from collections import deque
from typing import ClassVar

from shopops_lab.checker import messages
from shopops_lab.checker.result import Anomaly
from shopops_lab.checker.starvation import ApprovalWaits, is_approval
from shopops_lab.events import Event, EventKind, EventRow
from shopops_lab.states import ItemState

__all__ = ["DEFAULT_MAX_ATTEMPTS", "Pass", "storm"]

DEFAULT_MAX_ATTEMPTS = 5  # the queue's own default, assumed when nobody says


class _Item:
    """What the log has said so far about one item."""

    __slots__ = (
        "id",
        "case_id",
        "enqueued",
        "approval",
        "limit",
        "state",
        "last",
        "max_token",
        "leases",
        "began",
        "since",
        "error",
    )

    def __init__(self, item_id: str, case_id: str | None) -> None:
        self.id, self.case_id = item_id, case_id
        self.enqueued: Event | None = None
        self.approval = False
        self.limit: int | None = None  # the ENQUEUED event's own max_attempts, if valid
        self.state: ItemState | None = None
        self.last: Event | None = None
        self.max_token = 0  # the highest token granted so far
        self.leases: list[Event] = []  # every LEASED event, in log order
        self.began: Event | None = None  # the enqueue or replay that began the current round
        self.since = 0  # leases[since:] are the current round's
        self.error: str | None = None


class Pass:
    """One walk over the events, in `seq` order. What only the whole log shows (lost items,
    double contacts, stale writes) is judged afterwards, from what the pass kept."""

    # The kinds the pass reads, each with its handler's name: names, not bound methods kept on
    # the instance, so a finished pass is no reference cycle and its events are freed at once
    # instead of waiting for the cyclic collector (bench_checks.py).
    HANDLED: ClassVar[dict[EventKind, str]] = {
        EventKind.ENQUEUED: "_enqueued",
        EventKind.LEASED: "_leased",
        EventKind.HEARTBEAT: "_heartbeat",
        EventKind.ACKED: "_acked",
        EventKind.NACKED: "_nacked",
        EventKind.EXPIRED: "_expired",
        EventKind.DEAD_LETTERED: "_dead_lettered",
        EventKind.REPLAYED: "_replayed",
        EventKind.CONTACT_SENT: "_contact_sent",
        EventKind.CHECKPOINT_WRITTEN: "_checkpoint",
        EventKind.STALE_WRITE_ACCEPTED: "_stale_write_accepted",
        EventKind.DELIVERED_TWICE: "_delivered_twice",
        EventKind.JOB_CLAIMED: "_claimed",
    }

    def __init__(self, max_attempts: int | None, budget: float) -> None:
        self.max_attempts = max_attempts
        self.items: dict[str, _Item] = {}
        self.lines: dict[str, deque[_Item]] = {}  # case -> ready items, next first
        self.live: dict[str, list[list]] = {}  # case -> [[LEASED, expires_at], ...]
        self.lease_by: dict[tuple[str, str], Event] = {}  # (case, worker) -> latest LEASED
        self.contacts: dict[tuple[str, str], list[tuple[Event, Event | None]]] = {}
        self.stale: dict[tuple, list[Event]] = {}  # (item, token, worker, time) -> evidence
        self.found: list[Anomaly] = []
        self.waits = ApprovalWaits(budget, self.found)
        self.end = 0.0

    def run(self, rows: list[EventRow]) -> None:
        """Hand each event of a kind the pass reads to its handler, as an `Event` built for it
        alone: a day's rows hold thousands of other kinds, never turned into Events here."""
        handler = {kind: getattr(self, name) for kind, name in self.HANDLED.items()}.get
        event = Event.from_row
        for seq, row in enumerate(rows):
            act = handler(row.kind)
            if act is not None:
                act(event(seq, row))
        self.end = rows[-1].time

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
        item.approval = is_approval(info)
        limit = info.get("max_attempts")
        item.limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1 else None
        if event.case_id is not None:
            item.case_id = event.case_id
        item.enqueued = item.began = event
        item.since = len(item.leases)
        self._move(item, ItemState.READY, event)
        self._refresh(item.case_id, event.time)

    def _leased(self, event: Event) -> None:
        item = self._item(event)
        if item is None:
            return
        self._granted(item, event)
        self._move(item, ItemState.LEASED, event)
        case = item.case_id
        if case is None:
            return
        self._check_overlap(case, event)
        self._refresh(case, event.time)
        if not item.approval and item.enqueued is not None:
            self.waits.overtakers.append(event)

    def _claimed(self, event: Event) -> None:
        """A store's claim (the job store, lab 04's result store): it grants a token that
        fences later writes, but it is not a queue lease, so it never overlaps one."""
        item = self._item(event)
        if item is not None:
            self._granted(item, event)

    def _granted(self, item: _Item, event: Event) -> None:
        """A lease or a claim: its token is the newest, and what its worker sends next is sent under it."""
        if event.token is not None and event.token > item.max_token:
            item.max_token = event.token
        item.leases.append(event)
        if item.case_id is not None and event.worker_id is not None:
            self.lease_by[(item.case_id, event.worker_id)] = event

    def known(self, event: Event) -> _Item | None:
        """The item `event` names, if the log has enqueued, leased or claimed it before."""
        return None if event.item_id is None else self.items.get(event.item_id)

    def leases_on(self, case: str | None) -> list[list]:
        """The leases still live on `case` (none for an item without a case), each `[LEASED, expires_at]`."""
        return [] if case is None else self.live.get(case, [])

    def _heartbeat(self, event: Event) -> None:
        item = self.known(event)
        if item is None:
            return
        self._fence(item, event)
        expires_at = event.info.get("expires_at")
        if isinstance(expires_at, (int, float)):
            for lease in self.leases_on(item.case_id):
                if lease[0].item_id == item.id and lease[0].token == event.token:
                    lease[1] = expires_at

    def _acked(self, event: Event) -> None:
        item = self._item(event)
        if item is not None:
            self._fence(item, event)
            self._settle(item, event, ItemState.DONE)

    def _nacked(self, event: Event) -> None:
        item = self._item(event)
        if item is not None:
            self._fence(item, event)
            error = event.info.get("error")
            if error is not None:
                item.error = error
            self._settle(item, event, ItemState.READY)

    def _expired(self, event: Event) -> None:
        item = self._item(event)
        if item is not None:
            self._settle(item, event, ItemState.READY)

    def _dead_lettered(self, event: Event) -> None:
        item = self._item(event)
        if item is not None:
            self._settle(item, event, ItemState.DEAD)
            self._judge_storm(item, ended_by=event)
            item.began, item.since = None, len(item.leases)

    def _replayed(self, event: Event) -> None:
        item = self._item(event)
        if item is None:
            return
        self._judge_storm(item, ended_by=None)
        item.began, item.since = event, len(item.leases)
        self._move(item, ItemState.READY, event)
        self._refresh(item.case_id, event.time)

    def _settle(self, item: _Item, event: Event, state: ItemState) -> None:
        """A lease ended (ack, nack, expiry, dead-letter): free the case, move the item."""
        case = item.case_id
        if case is not None and (live := self.live.get(case)):
            token = event.token
            live[:] = [
                lease
                for lease in live
                if lease[0].item_id != item.id or (token is not None and lease[0].token != token)
            ]
            if not live:
                del self.live[case]
        self._move(item, state, event)
        self._refresh(case, event.time)

    def _move(self, item: _Item, state: ItemState, event: Event) -> None:
        """Record the item's new state, keeping its case's line of ready items the way the
        queue keeps it: new and replayed items join at the back, a failed or expired
        attempt goes back to the front."""
        before = item.state
        item.state, item.last = state, event
        if before is ItemState.READY:
            if state is not ItemState.READY:
                self._leave_line(item, state, event)
        elif state is ItemState.READY and item.case_id is not None:
            line = self.lines.get(item.case_id)
            if line is None:
                line = self.lines[item.case_id] = deque()
            if before is ItemState.LEASED:
                line.appendleft(item)
            else:
                line.append(item)
            if item.approval:
                self.waits.start(item.id, item.case_id, event)

    def _leave_line(self, item: _Item, state: ItemState, event: Event) -> None:
        case = item.case_id
        if case is not None and (line := self.lines.get(case)):
            if line[0] is item:
                line.popleft()
            elif item in line:
                line.remove(item)
            if not line:
                del self.lines[case]
        if item.approval:
            self.waits.stop(item.id, event if state is ItemState.LEASED else None)

    def _refresh(self, case: str | None, t: float) -> None:
        """Tell the approval clocks of `case` (if any wait on it) who could be served now."""
        if case is not None and case in self.waits.by_case:
            line = self.lines.get(case)
            head = line[0].id if line and case not in self.live else None
            self.waits.refresh(case, t, head)

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
            self.found.append(
                messages.two_live_leases(case, event, [held for held, _ in live], [until for _, until in live])
            )
        live.append(lease)

    # ------------------------------------------------------------------ writes and contacts
    def _checkpoint(self, event: Event) -> None:
        item = self.known(event)
        if item is not None:
            self._fence(item, event)

    def _fence(self, item: _Item, event: Event) -> None:
        """A write made under a token (ack, nack, heartbeat, checkpoint) that was accepted
        although a newer token had been granted for the item: the store did not fence."""
        token = event.token
        if token is not None and token < item.max_token:
            self._stale_write_accepted(event)

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

    # ------------------------------------------------------------------ what the verdict reads
    def states(self) -> list[ItemState]:
        """The state of every enqueued item (stores' records without a queue are not items).
        An enqueued item always has one: its ENQUEUED event moved it to READY."""
        return [
            state for item in self.items.values() if item.enqueued is not None and (state := item.state) is not None
        ]

    def in_flight(self) -> list[_Item]:
        """Enqueued items neither done nor dead-lettered."""
        return [
            item
            for item in self.items.values()
            if item.enqueued is not None and item.state in (ItemState.READY, ItemState.LEASED)
        ]

    def _judge_storm(self, item: _Item, *, ended_by: Event | None) -> None:
        found = storm(item, self.max_attempts, ended_by)
        if found is not None:
            self.found.append(found)


def storm(item: _Item, max_attempts: int | None, ended_by: Event | None) -> Anomaly | None:
    """More deliveries in the item's current round than the limit allows: a poison item not
    dead-lettered in time. `ended_by`: the dead-lettering that ends the round, if any."""
    if item.enqueued is None:
        return None  # a store's record (claimed, never queued): its claims are not redeliveries
    leases = item.leases[item.since :]
    limit = max_attempts or item.limit or DEFAULT_MAX_ATTEMPTS
    if len(leases) <= limit:
        return None
    return messages.poison_retry_storm(
        leases,
        item_id=item.id,
        case_id=item.case_id,
        began=item.began,
        limit=limit,
        assumed=max_attempts is None and item.limit is None,
        error=item.error,
        ended_by=ended_by,
    )
