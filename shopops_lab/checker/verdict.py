"""`check(log)`: validate the arguments, run the pass, and turn what it found into a verdict."""

from __future__ import annotations

import math

from shopops_lab import arguments
from shopops_lab.checker import messages
from shopops_lab.checker.replay import Pass, storm
from shopops_lab.checker.result import Anomaly, CheckResult
from shopops_lab.checker.starvation import DEFAULT_APPROVAL_WAIT_BUDGET
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import EventLog, collector_paused
from shopops_lab.states import ItemState

__all__ = ["check"]


def check(
    log: EventLog, *, max_attempts: int | None = None, approval_wait_budget: float | None = None, final: bool = True
) -> CheckResult:
    """Judge `log` and name every anomaly with its evidence.

    `max_attempts` is the queue's limit (else each item's ENQUEUED `max_attempts`, else 5);
    `approval_wait_budget` is how many seconds an approval may wait while lower-priority
    work is leased ahead of it (default 300). Pass `final=False` for a log that is still
    growing: items in flight are then not counted as lost.
    """
    if not isinstance(log, EventLog):
        raise BadArgumentError(
            field="log",
            problem=f"is a {type(log).__name__}",
            fix="pass an EventLog, e.g. queue.log, or EventLog.from_dicts(rows) for a saved log",
        )
    if max_attempts is not None:
        arguments.whole(
            "max_attempts",
            max_attempts,
            1,
            "pass the queue's limit, a whole number >= 1 (queue.max_attempts), or leave it out",
        )
    if approval_wait_budget is not None:
        arguments.number(
            "approval_wait_budget",
            approval_wait_budget,
            "pass a positive number of seconds, e.g. 300, or leave it out",
            above=0,
            below=math.inf,
        )
    arguments.flag("final", final, "pass True for a finished run or False for a log that is still growing")
    if not len(log):
        return CheckResult(
            valid=None, summary="the log is empty: nothing has happened yet, so there is nothing to judge"
        )
    budget = DEFAULT_APPROVAL_WAIT_BUDGET if approval_wait_budget is None else float(approval_wait_budget)
    budget = DEFAULT_APPROVAL_WAIT_BUDGET if approval_wait_budget is None else float(approval_wait_budget)
    with collector_paused():
        rows = list(log.rows())  # one read (a database log catches up once): the pass and the count agree
        judge = Pass(max_attempts, budget)
        judge.run(rows)
        anomalies = _judge_the_end(judge, final)
    return _verdict(judge, anomalies, len(rows))


def _judge_the_end(judge: Pass, final: bool) -> list[Anomaly]:
    """What only the whole log shows, added to what the pass found on the way; every
    anomaly, in report order."""
    found = judge.found
    judge.waits.finish(judge.end)
    for item in judge.items.values():
        if (anomaly := storm(item, judge.max_attempts, None)) is not None:
            found.append(anomaly)
    for item in judge.in_flight() if final else ():
        enqueued, last = item.enqueued, item.last
        # in flight: enqueued, and in a state, which the pass only ever sets with the event that set it
        assert enqueued is not None and last is not None
        expires_at = next(
            (until for held, until in judge.leases_on(item.case_id) if held is last), last.info.get("expires_at")
        )
        found.append(
            messages.lost_item(
                enqueued, last, item_id=item.id, case_id=item.case_id, expires_at=expires_at, end=judge.end
            )
        )
    for (case, key), sends in judge.contacts.items():
        if len(sends) > 1:
            found.append(messages.double_contact(case, key, sends))
    for events in judge.stale.values():
        owner = judge.known(events[0])  # None for a write that names no item, or one never leased
        found.append(
            messages.stale_write(
                events, leases=() if owner is None else owner.leases, item_case=None if owner is None else owner.case_id
            )
        )
    return sorted(found, key=lambda a: (a.name.value, a.evidence[0].seq if a.evidence else -1, a.message))


def _verdict(judge: Pass, anomalies: list[Anomaly], count: int) -> CheckResult:
    events = f"{count} {'event' if count == 1 else 'events'}"
    if anomalies:
        names = ", ".join(sorted({a.name.value for a in anomalies}))
        noun = "anomaly" if len(anomalies) == 1 else "anomalies"
        return CheckResult(
            valid=False,
            anomalies=tuple(anomalies),
            event_count=count,
            summary=f"{len(anomalies)} {noun} ({names}) in {events}",
        )
    states = judge.states()
    done, dead = states.count(ItemState.DONE), states.count(ItemState.DEAD)
    pending = [item.id for item in judge.in_flight()]
    if pending:  # only possible when not final: a final log would have reported them lost
        shown = ", ".join(pending[:5]) + (f" and {len(pending) - 5} more" if len(pending) > 5 else "")
        return CheckResult(
            valid=None,
            event_count=count,
            summary=(
                f"no anomalies so far in {events}, but the log is not final and {len(pending)} "
                f"{'item is' if len(pending) == 1 else 'items are'} still in flight ({shown}), "
                "so lost items cannot be judged yet"
            ),
        )
    items = len(states)
    return CheckResult(
        valid=True,
        event_count=count,
        summary=(
            f"no anomalies in {events}: {items} {'item' if items == 1 else 'items'} "
            f"({done} acked, {dead} dead-lettered), no intent sent twice, one lease per case at a time"
        ),
    )
