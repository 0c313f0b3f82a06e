"""The anomalies in words. Each function takes the evidence the pass collected and returns
the `Anomaly`: what broke, for whom, when, and what would have prevented it. They read
nothing else, so a message can be tested, or reworded, without replaying a log."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from shopops_lab.checker.result import Anomaly, AnomalyName
from shopops_lab.events import Event, EventKind

__all__ = [
    "anomaly",
    "approval_starved",
    "double_contact",
    "lost_item",
    "poison_retry_storm",
    "stale_write",
    "two_live_leases",
]

_VERBS = {"email": "emailed", "sms": "texted"}
_WRITES = {
    EventKind.ACKED: "acked",
    EventKind.NACKED: "nacked",
    EventKind.HEARTBEAT: "renewed the lease on",
    EventKind.CHECKPOINT_WRITTEN: "wrote a checkpoint for",
}


def anomaly(
    name: AnomalyName,
    message: str,
    evidence: Iterable[Event | None],
    *,
    case_id: str | None = None,
    item_id: str | None = None,
) -> Anomaly:
    """An `Anomaly` whose workers, tokens and times are read off its evidence (each event
    once, in log order; None entries are evidence that did not exist)."""
    unique = {e.seq: e for e in evidence if e is not None}
    events = tuple(unique[seq] for seq in sorted(unique))
    return Anomaly(
        name=name,
        message=message,
        case_id=case_id,
        item_id=item_id,
        workers=tuple(sorted({e.worker_id for e in events if e.worker_id is not None})),
        tokens=tuple(sorted({e.token for e in events if e.token is not None})),
        times=tuple(sorted({e.time for e in events})),
        evidence=events,
    )


def double_contact(case: str, key: str, sends: Sequence[tuple[Event, Event | None]]) -> Anomaly:
    """`sends`: every CONTACT_SENT for one intent of `case`, each with the lease its sender held."""
    channel = sends[0][0].info.get("channel")
    verb = _VERBS.get(channel, f"contacted by {channel}") if channel else "contacted"  # no verb has a falsy key
    parts = [
        f"{event.info.get('message_id', 'a message')} at t={_t(event.time)}{_by(event.worker_id, lease)}"
        for event, lease in sends
    ]
    message = (
        f"case {case} was {verb} {_times(len(sends))} for intent {key} — {_and(parts)}. "
        "Every send after the first reached the customer again: send with the idempotency "
        "key through an adapter that returns the first message id on a repeat."
    )
    evidence = [e for pair in sends for e in pair]
    return anomaly(AnomalyName.DOUBLE_CONTACT, message, evidence, case_id=case)


def lost_item(
    enqueued: Event, last: Event, *, item_id: str, case_id: str | None, expires_at: object, end: float
) -> Anomaly:
    """An item the finished log leaves in flight: `last` is the event that put it where it
    is (a LEASED one if it is still leased, whose lease ran until `expires_at`)."""
    if last.kind is EventKind.LEASED:
        ran_out = (
            f"; that lease ran out at t={_t(expires_at)}, but no expiry returned the item"
            if isinstance(expires_at, (int, float)) and expires_at <= end
            else ""
        )
        where = (
            f"still leased by {last.worker_id or 'a worker'}"
            f"{'' if last.token is None else f' (token {last.token})'} since t={_t(last.time)}{ran_out}"
        )
    else:
        why = {
            EventKind.EXPIRED: "after its lease expired",
            EventKind.NACKED: "after a failed attempt",
            EventKind.REPLAYED: "after a replay from the dead-letter queue",
        }.get(last.kind, "")
        where = (
            "still waiting in the queue: no worker ever leased it"
            if last is enqueued
            else f"still waiting in the queue, ready since t={_t(last.time)}{' ' + why if why else ''}"
        )
    message = (
        f"item {item_id} (case {case_id}) never finished: enqueued at t={_t(enqueued.time)}, "
        f"and when the log ends it is {where}. A finished run must leave every item acked "
        "or in the dead-letter queue."
    )
    return anomaly(AnomalyName.LOST_ITEM, message, [enqueued, last], case_id=case_id, item_id=item_id)


def two_live_leases(case: str, event: Event, held: Sequence[Event], until: Sequence[float | None]) -> Anomaly:
    """`event` leased `case` while the leases in `held` (live until `until`) still held it."""
    holders = [
        f"{lease.worker_id or 'a worker'} holds {lease.item_id} with token {lease.token}"
        f"{'' if end is None else f' until t={_t(end)}'}"
        for lease, end in zip(held, until)
    ]
    count = "two live leases" if len(held) == 1 else f"{len(held) + 1} live leases"
    message = (
        f"case {case} had {count} at t={_t(event.time)}: {_and(holders)}, and "
        f"{event.worker_id or 'another worker'} was granted {event.item_id} with token {event.token}. "
        "Only one worker may hold a case at a time: the queue must refuse a new lease until "
        "the live one is acked, nacked or expired."
    )
    return anomaly(AnomalyName.TWO_LIVE_LEASES, message, [*held, event], case_id=case, item_id=event.item_id)


def stale_write(events: Sequence[Event], *, leases: Sequence[Event], item_case: str | None) -> Anomaly:
    """`events`: one accepted write under an outdated token (the write, and the store's own
    report of it if it made one); `leases`: every claim on the item, in log order."""
    write = events[0]
    item_id, token, worker, time = write.item_id, write.token, write.worker_id, write.time
    newest = own = None
    if token is not None:
        # the writer's own claim, and the newest claim granted to someone else before the write
        before = [(lease.token, lease) for lease in leases if lease.seq < write.seq and lease.token is not None]
        own = next((lease for held, lease in reversed(before) if held == token), None)
        newest = next((lease for held, lease in reversed(before) if held > token), None)
    current = newest.token if newest is not None else write.info.get("current")
    op = write.info.get("op") if write.kind is EventKind.STALE_WRITE_ACCEPTED else None
    what = _WRITES.get(write.kind, "wrote to") if op is None else f"wrote ({op}) to"
    case = write.case_id or item_case
    subject = (
        f"item {item_id}" + (f" (case {case})" if case else "")
        if item_id is not None
        else f"case {case}"
        if case
        else "the store"
    )
    granted = (
        f"token {current} had already been granted to {newest.worker_id or 'another worker'} at t={_t(newest.time)}"
        if newest is not None
        else f"the current token was {current}"
        if current is not None
        else "nobody had claimed it, so no token was current"
        if "current" in write.info
        else "a newer token had already been granted"
    )
    held = "a stale token" if token is None else f"token {token}"
    message = (
        f"{worker or 'a worker'} {what} {subject} at t={_t(time)} with {held}, but {granted}; "
        "the store accepted it. The store must compare tokens and refuse the older one, "
        "even when the old worker's work was correct."
    )
    return anomaly(AnomalyName.STALE_WRITE_ACCEPTED, message, [own, newest, *events], case_id=case, item_id=item_id)


def poison_retry_storm(
    leases: Sequence[Event],
    *,
    item_id: str,
    case_id: str | None,
    began: Event | None,
    limit: int,
    assumed: bool,
    error: str | None,
    ended_by: Event | None,
) -> Anomaly:
    """`leases`: one round's deliveries of an item (more than `limit`), from `began` (its
    enqueue or replay) to `ended_by` (its dead-lettering, or None if it never was).
    `assumed`: nobody said what the limit was."""
    source = (
        (f"max_attempts was not given, so {limit} was assumed; pass check(log, max_attempts=queue.max_attempts)")
        if assumed
        else f"max_attempts is {limit}"
    )
    end = (
        f"before it was finally dead-lettered at t={_t(ended_by.time)}"
        if ended_by is not None
        else "without being dead-lettered"
    )
    last_error = f" Last error: {error}." if error else ""
    message = (
        f"item {item_id} (case {case_id}) was leased {len(leases)} times {end} ({source}), "
        f"first at t={_t(leases[0].time)} and last at t={_t(leases[-1].time)}.{last_error} "
        "A poison item should stop after max_attempts deliveries and wait in the "
        "dead-letter queue for a fix."
    )
    return anomaly(
        AnomalyName.POISON_RETRY_STORM, message, [began, *leases, ended_by], case_id=case_id, item_id=item_id
    )


def approval_starved(
    ready: Event,
    leased: Event | None,
    *,
    item_id: str,
    case_id: str | None,
    t: float,
    waited: float,
    held: float,
    overtakers: Sequence[Event],
    overtaken: int,
    budget: float,
) -> Anomaly:
    """An approval ready since `ready` waited `waited` seconds (plus `held` behind its own
    case) until `t`, when `leased` took it (None: the log ended), while `overtaken`
    lower-priority leases went ahead; `overtakers` are the first few of them."""
    how = {EventKind.ENQUEUED: "enqueued", EventKind.REPLAYED: "replayed"}.get(ready.kind, "back in the queue")
    end = (
        f"{leased.worker_id or 'a worker'} leased it at t={_t(t)}"
        if leased is not None
        else f"it was still waiting when the log ends at t={_t(t)}"
    )
    behind = f", not counting {_t(held)} s while its own case was held" if held > 0 else ""
    first = overtakers[0]
    overtook = (
        f"{overtaken} lower-priority {'lease was' if overtaken == 1 else 'leases were'} "
        f"granted ahead of it, the first {first.item_id} (case {first.case_id}) to "
        f"{first.worker_id or 'a worker'} at t={_t(first.time)}"
    )
    message = (
        f"approval item {item_id} (case {case_id}) waited {_t(waited)} s for a worker "
        f"(budget {_t(budget)} s{behind}): {how} at t={_t(ready.time)}, and {end}, while "
        f"{overtook}. Serve approvals first (Priority.APPROVAL) and shed bulk work under load."
    )
    return anomaly(
        AnomalyName.APPROVAL_STARVED, message, [ready, *overtakers, leased], case_id=case_id, item_id=item_id
    )


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
