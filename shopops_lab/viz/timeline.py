"""Deliveries per worker over time: a space-time (Lamport-style) picture of an event log.

One lane per worker. Each lease is a bar from its LEASED event (or a broker's second
copy of it, DELIVERED_TWICE) to whatever ended it (acked, nacked, expired, lost when the
worker found out it no longer owned the item, or still open), coloured by that ending. Crash and pause
periods are shaded bands, customer contacts are dots above the bars (red when the
customer already had that message), stale writes the store refused are crosses, and
an arrow joins a lease that ended without an ack to the next lease of the same item:
the redelivery. Read it left to right and the story of a crash tells itself.

`build_timeline` reads the log into plain records (what the tests inspect) and
`timeline` draws them as SVG written here, so it needs no Graphviz and is the same
on every machine. Big logs are cut to a readable window with a note saying so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shopops_lab import arguments
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import Event, EventKind, EventLog
from shopops_lab.viz import _svg
from shopops_lab.viz.dot import Diagram

__all__ = [
    "Band",
    "ContactMark",
    "LeaseSpan",
    "Link",
    "Rejection",
    "Timeline",
    "build_timeline",
    "natural_key",
    "timeline",
]

MAX_LEASES = 60
MAX_WORKERS = 12
TITLE = "deliveries per worker"

COLORS = {"acked": "#2ca02c", "nacked": "#ff7f0e", "expired": "#8c8c8c", "lost": "#8c564b", "open": "#9ecae1"}
_ENDINGS = {
    EventKind.ACKED: "acked",
    EventKind.NACKED: "nacked",
    EventKind.EXPIRED: "expired",
    EventKind.LEASE_LOST: "lost",
}
_STARTS = (EventKind.LEASED, EventKind.DELIVERED_TWICE)
_DOWN = {EventKind.WORKER_CRASHED: "crash", EventKind.WORKER_PAUSED: "pause"}


@dataclass(frozen=True, kw_only=True, slots=True)
class LeaseSpan:
    """One lease: who held which item from when to when, and how it ended."""

    item_id: str
    case_id: str | None
    worker_id: str
    token: int | None
    attempt: int | None
    start: float
    end: float
    outcome: str  # "acked", "nacked", "expired", "lost", or "open" (held at the view's end)
    dead: bool  # the ending sent the item to the dead-letter queue
    copy: bool  # a broker's second delivery of a live lease (same token, another worker)
    start_seq: int
    end_seq: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Band:
    """A period a worker was down ("crash") or frozen ("pause")."""

    worker_id: str
    kind: str
    start: float
    end: float
    open: bool  # no WORKER_RESUMED before the view's end
    start_seq: int
    end_seq: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ContactMark:
    """A message that reached a customer (or a repeat the adapter deduped)."""

    worker_id: str
    case_id: str | None
    time: float
    seq: int
    message_id: str | None
    idem_key: str | None
    duplicate: bool  # the customer already had a message for this (case, idem_key)
    deduped: bool  # a repeat the adapter absorbed: nothing reached the customer


@dataclass(frozen=True, kw_only=True, slots=True)
class Rejection:
    """A write the store refused because its fencing token was stale."""

    worker_id: str
    item_id: str | None
    case_id: str | None
    token: int | None
    time: float
    seq: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Link:
    """A redelivery: lease `source` (index into `Timeline.leases`) ended unacked and
    lease `target` picked the same item up next."""

    item_id: str
    source: int
    target: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Timeline:
    """What `timeline` draws: lanes in natural order, and the marks in view on them."""

    lanes: tuple[str, ...]
    leases: tuple[LeaseSpan, ...]
    bands: tuple[Band, ...]
    contacts: tuple[ContactMark, ...]
    rejections: tuple[Rejection, ...]
    links: tuple[Link, ...]
    start: float
    end: float
    start_seq: int
    end_seq: int
    total_leases: int  # after the cases/workers/until filters, before the size cap
    total_workers: int
    note: str


def natural_key(name: str) -> tuple:
    """Sort key that puts W2 before W10."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name) if part)


def build_timeline(
    log: EventLog | Iterable[Event],
    *,
    cases: Iterable[str] | None = None,
    workers: Iterable[str] | None = None,
    until: float | None = None,
    max_leases: int = MAX_LEASES,
    max_workers: int = MAX_WORKERS,
) -> Timeline:
    """Read `log` into lanes, leases, bands, contacts, rejections and redelivery links.

    `cases` / `workers` keep only those; `until` drops everything after that time. When
    more than `max_leases` leases or `max_workers` workers remain, the first ones are
    kept and `note` says what was left out.

    Three steps: scan the log once into rows, filter them by case and worker, and cut a
    window that fits the picture.
    """
    events = _events(log)
    case_set = None if cases is None else arguments.names("cases", cases, "O-1001")
    worker_set = None if workers is None else arguments.names("workers", workers, "W1")
    arguments.whole("max_leases", max_leases)
    arguments.whole("max_workers", max_workers)
    if until is not None:
        until = arguments.number("until", until, "pass a time in seconds, e.g. until=120")
        events = [e for e in events if e.time <= until]
    if not events:
        return _empty(until)
    scan = _Scan(end=until if until is not None else events[-1].time, end_seq=events[-1].seq)
    for event in events:
        scan.read(event)
    lanes, leases, totals = _filter(scan, case_set, worker_set, max_workers)
    return _window(scan, lanes, leases, max_leases, totals, busy_only=worker_set is None)


_Row = dict[str, Any]  # a lease or band being read: its fields, until it is frozen


@dataclass
class _Scan:
    """The log read once: lease and band rows (those still open end at `end`), contacts
    and rejections, in log order."""

    end: float
    end_seq: int
    leases: list[_Row] = field(default_factory=list)
    bands: list[_Row] = field(default_factory=list)
    contacts: list[ContactMark] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    _open_leases: dict[tuple[str | None, int | None, str | None], _Row] = field(default_factory=dict)
    _open_bands: dict[str | None, _Row] = field(default_factory=dict)
    _ended_last: dict[str | None, _Row] = field(default_factory=dict)
    _intents: set[tuple[str | None, str | None]] = field(default_factory=set)

    def read(self, e: Event) -> None:
        kind = e.kind
        if kind in _ENDINGS:
            self._end_lease(e)
        elif kind is EventKind.DEAD_LETTERED:
            row = self._ended_last.get(e.item_id)
            if row is not None and row["token"] == e.token:
                row["dead"] = True
        elif e.worker_id is None:
            return
        elif kind in _STARTS:
            row = {
                "item_id": e.item_id,
                "case_id": e.case_id,
                "worker_id": e.worker_id,
                "token": e.token,
                "attempt": e.attempt,
                "start": e.time,
                "end": self.end,
                "outcome": "open",
                "dead": False,
                "copy": kind is EventKind.DELIVERED_TWICE,
                "start_seq": e.seq,
                "end_seq": self.end_seq,
            }
            self.leases.append(row)
            self._open_leases[(e.item_id, e.token, e.worker_id)] = row
        elif kind in _DOWN:
            self._down(e)
        elif kind is EventKind.WORKER_RESUMED:
            band = self._open_bands.pop(e.worker_id, None)
            if band is not None:
                band.update(end=e.time, open=False, end_seq=e.seq)
        elif kind in (EventKind.CONTACT_SENT, EventKind.CONTACT_DEDUPED):
            self._contact(e)
        elif kind is EventKind.STALE_REJECTED:
            self.rejections.append(
                Rejection(
                    worker_id=e.worker_id, item_id=e.item_id, case_id=e.case_id, token=e.token, time=e.time, seq=e.seq
                )
            )

    def _end_lease(self, e: Event) -> None:
        # keyed by worker too: a duplicated delivery gives two workers the same token
        row = self._open_leases.pop((e.item_id, e.token, e.worker_id), None)
        if row is not None:
            # an expiry is noticed on the queue's next call; the lease ended at its deadline
            ended = e.info.get("expires_at", e.time) if e.kind is EventKind.EXPIRED else e.time
            row.update(end=min(float(ended), e.time), outcome=_ENDINGS[e.kind], end_seq=e.seq)
            self._ended_last[e.item_id] = row

    def _down(self, e: Event) -> None:
        if e.worker_id not in self._open_bands:
            band = {
                "worker_id": e.worker_id,
                "start": e.time,
                "end": self.end,
                "open": True,
                "kind": _DOWN[e.kind],
                "start_seq": e.seq,
                "end_seq": self.end_seq,
            }
            self.bands.append(band)
            self._open_bands[e.worker_id] = band

    def _contact(self, e: Event) -> None:
        intent = (e.case_id, e.info.get("idem_key"))
        sent = e.kind is EventKind.CONTACT_SENT
        worker = e.worker_id or ""  # the queue names the worker on every contact it logs
        self.contacts.append(
            ContactMark(
                worker_id=worker,
                case_id=e.case_id,
                time=e.time,
                seq=e.seq,
                message_id=e.info.get("message_id"),
                idem_key=intent[1],
                duplicate=sent and intent in self._intents,
                deduped=not sent,
            )
        )
        if sent:
            self._intents.add(intent)


def _filter(
    scan: _Scan, case_set: frozenset[str] | None, worker_set: frozenset[str] | None, max_workers: int
) -> tuple[list[str], list[_Row], tuple[int, int]]:
    """Keep the chosen cases (in place) and workers: the lanes to draw (at most
    `max_workers`), the leases on them, and (leases, workers) before the lane cap."""
    if case_set is not None:
        scan.leases = [r for r in scan.leases if r["case_id"] in case_set]
        scan.contacts = [c for c in scan.contacts if c.case_id in case_set]
        scan.rejections = [r for r in scan.rejections if r.case_id in case_set]
    if worker_set is not None:
        lanes = sorted(worker_set, key=natural_key)
        leases = [r for r in scan.leases if r["worker_id"] in worker_set]
    else:
        busy = (
            {r["worker_id"] for r in scan.leases}
            | {c.worker_id for c in scan.contacts}
            | {r.worker_id for r in scan.rejections}
            | ({b["worker_id"] for b in scan.bands} if case_set is None else set())
        )
        lanes, leases = sorted(busy, key=natural_key), scan.leases
    totals = (len(leases), len(lanes))
    shown = set(lanes[:max_workers])
    return lanes[:max_workers], [r for r in leases if r["worker_id"] in shown], totals


def _window(
    scan: _Scan, lanes: list[str], leases: list[_Row], max_leases: int, totals: tuple[int, int], *, busy_only: bool
) -> Timeline:
    """Freeze what is in view: with more than `max_leases` leases, the log up to the moment
    the first lease left out began. `busy_only` drops lanes left with nothing to show."""
    end, end_seq = scan.end, scan.end_seq
    if len(leases) > max_leases:
        cut = leases[max_leases]
        end, end_seq = cut["start"], cut["start_seq"] - 1
        leases = leases[:max_leases]
        for row in leases:
            if row["end_seq"] > end_seq:
                row.update(end=end, end_seq=end_seq, outcome="open", dead=False)
    shown = set(lanes)

    def in_view(worker: str, seq: int) -> bool:
        return worker in shown and seq <= end_seq

    spans = tuple(LeaseSpan(**r) for r in leases)
    bands = tuple(
        Band(
            **{
                **b,
                "end": min(b["end"], end),
                "end_seq": min(b["end_seq"], end_seq),
                "open": b["open"] or b["end_seq"] > end_seq,
            }
        )
        for b in scan.bands
        if in_view(b["worker_id"], b["start_seq"])
    )
    contacts = tuple(c for c in scan.contacts if in_view(c.worker_id, c.seq))
    rejections = tuple(r for r in scan.rejections if in_view(r.worker_id, r.seq))
    marks: tuple[LeaseSpan | Band | ContactMark | Rejection, ...] = (*spans, *bands, *contacts, *rejections)
    if busy_only:  # after a cut, keep only the lanes with something to show
        busy = {m.worker_id for m in marks}
        lanes = [w for w in lanes if w in busy]
    total_leases, total_workers = totals
    return Timeline(
        lanes=tuple(lanes),
        leases=spans,
        bands=bands,
        contacts=contacts,
        rejections=rejections,
        links=_links(spans),
        start=min((_start(m) for m in marks), default=0.0),
        end=end,
        start_seq=min((_start_seq(m) for m in marks), default=0),
        end_seq=end_seq,
        total_leases=total_leases,
        total_workers=total_workers,
        note=_note(len(spans), total_leases, len(lanes), total_workers),
    )


def _start(mark: LeaseSpan | Band | ContactMark | Rejection) -> float:
    return mark.start if isinstance(mark, (LeaseSpan, Band)) else mark.time


def _start_seq(mark: LeaseSpan | Band | ContactMark | Rejection) -> int:
    return mark.start_seq if isinstance(mark, (LeaseSpan, Band)) else mark.seq


def _note(leases: int, total_leases: int, lanes: int, total_workers: int) -> str:
    notes = []
    if leases < total_leases:
        notes.append(f"{leases} of {total_leases:,} leases")
    if total_workers > lanes:
        notes.append(f"{lanes} of {total_workers:,} workers")
    if not notes:
        return ""
    return f"showing {' and '.join(notes)}; pass cases=[...], workers=[...] or until=... to zoom"


def timeline(
    log: EventLog | Iterable[Event],
    *,
    cases: Iterable[str] | None = None,
    workers: Iterable[str] | None = None,
    until: float | None = None,
    axis: str = "time",
    max_leases: int = MAX_LEASES,
    max_workers: int = MAX_WORKERS,
) -> Diagram:
    """Draw deliveries per worker. axis="time" spaces events by the clock; axis="seq"
    spaces them by their order in the log (useful when the clock never moved)."""
    arguments.choice("axis", axis, ("time", "seq"), "pass 'time' or 'seq'")
    data = build_timeline(
        log, cases=cases, workers=workers, until=until, max_leases=max_leases, max_workers=max_workers
    )
    return Diagram(title=TITLE, svg=draw(data, axis=axis), engine="builtin", note=data.note)


# ---------------------------------------------------------------------------- drawing
_LEFT, _RIGHT, _LANE, _WIDTH = 70.0, 30.0, 40.0, 860.0
_PLOT_WIDTH = _WIDTH - _LEFT - _RIGHT
_LINK, _STALE = "#7b3294", "#8b0000"  # redelivery arrows; refused stale writes


def draw(data: Timeline, *, axis: str = "time") -> str:
    """The SVG of a `Timeline`: lanes and axis, then one layer each for bands, leases,
    redelivery links, contacts and rejections, then the legend."""
    top = 44.0 if data.note else 28.0
    height = top + _LANE * max(1, len(data.lanes)) + 70
    body: list[str] = [
        _svg.text(
            _LEFT,
            18,
            f"{TITLE}: {_count(len(data.leases), 'lease')} on {_count(len(data.lanes), 'worker')}",
            size=13,
            anchor="start",
            weight="bold",
        )
    ]
    if data.note:
        body.append(_svg.text(_LEFT, 36, data.note, size=12, anchor="start", fill="#b35900", cls="note"))
    if not data.lanes:
        body.append(_svg.text(_WIDTH / 2, top + 24, "no leases to show yet", size=13, fill="#666"))
        return _svg.document(_WIDTH, height, body, label=TITLE, desc="no leases to show yet")
    frame = _Frame.of(data, top, by_seq=axis == "seq")
    bars = [frame.bar(span) for span in data.leases]
    body += [
        *_lanes(frame),
        *_bands(frame, data.bands),
        *_leases(data.leases, bars),
        *_links_drawn(data, bars),
        *_contacts(frame, data.contacts),
        *_rejections(frame, data.rejections),
        *_legend(frame.bottom + 54),
    ]
    return _svg.document(_WIDTH, height, body, label=TITLE, desc=describe(data))


def describe(data: Timeline) -> str:
    """The timeline in words, for its text alternative: per worker, its leases in order with
    how each ended, its crashes and pauses, its sends and its refused writes."""
    if not data.lanes:
        return "no leases to show yet"
    lanes = []
    for worker in data.lanes:
        said = [f"{_span(span)}" for span in data.leases if span.worker_id == worker]
        said += [
            f"{band.kind} from t={band.start:g}" + ("" if band.open else f" to t={band.end:g}")
            for band in data.bands
            if band.worker_id == worker
        ]
        said += [
            f"{'a repeat send absorbed' if mark.deduped else 'a second message' if mark.duplicate else 'a send'}"
            f" to {mark.case_id} at t={mark.time:g}"
            for mark in data.contacts
            if mark.worker_id == worker
        ]
        said += [
            f"a write refused at t={refused.time:g} (stale token {refused.token})"
            for refused in data.rejections
            if refused.worker_id == worker
        ]
        lanes.append(f"{worker}: {', '.join(said)}")
    redelivered = f"; {_count(len(data.links), 'redelivery arrow')}" if data.links else ""
    return (
        f"{_count(len(data.leases), 'lease')} on {_count(len(data.lanes), 'worker')}{redelivered}. "
        + ". ".join(lanes)
        + "."
        + (f" ({data.note})" if data.note else "")
    )


def _count(n: int, thing: str) -> str:
    """'1 lease', '2 leases'."""
    return f"{n} {thing}{'' if n == 1 else 's'}"


def _span(span: LeaseSpan) -> str:
    ended = "open" if span.outcome == "open" else f"{span.outcome} at t={span.end:g}"
    return f"{span.item_id} ({span.case_id}) from t={span.start:g}, {ended}" + (
        ", to the dead-letter queue" if span.dead else ""
    )


@dataclass(frozen=True)
class _Frame:
    """Where things go: lanes from `top` down, and the x of a time (or, `by_seq`, of an
    event's number in the log) between the first and last tick."""

    lanes: tuple[str, ...]
    top: float
    by_seq: bool
    ticks: list[float]
    lo: float
    hi: float

    @classmethod
    def of(cls, data: Timeline, top: float, *, by_seq: bool) -> _Frame:
        lo, hi = (data.start_seq, data.end_seq + 1) if by_seq else (data.start, data.end)
        ticks, lo, hi = _ticks(lo, hi, whole=by_seq)
        return cls(data.lanes, top, by_seq, ticks, lo, hi)

    @property
    def bottom(self) -> float:
        return self.top + _LANE * len(self.lanes)

    def at(self, value: float) -> float:
        return _LEFT + (value - self.lo) / (self.hi - self.lo) * _PLOT_WIDTH

    def x(self, time: float, seq: int) -> float:
        return self.at(seq if self.by_seq else time)

    def y(self, worker: str) -> float:
        """The middle of `worker`'s lane."""
        return self.top + _LANE * self.lanes.index(worker) + _LANE / 2

    def bar(self, span: LeaseSpan) -> tuple[float, float, float]:
        """Where a lease's bar starts and ends, and its lane's middle."""
        x1 = self.x(span.start, span.start_seq)
        return x1, max(self.x(span.end, span.end_seq), x1 + 3), self.y(span.worker_id)


def _lanes(frame: _Frame) -> list[str]:
    """Striped lanes with their workers' names, the time axis and its ticks."""
    body = []
    for i, worker in enumerate(frame.lanes):
        y = frame.y(worker)
        if i % 2 == 0:
            body.append(_svg.rect(_LEFT, y - _LANE / 2, _PLOT_WIDTH, _LANE, fill="#f5f5f5"))
        body.append(_svg.text(_LEFT - 8, y + 4, worker, size=12, anchor="end", weight="bold", cls="lane"))
    bottom = frame.bottom
    for t in frame.ticks:
        x = frame.at(t)
        body.append(_svg.line(x, frame.top, x, bottom + 5, stroke="#dddddd", stroke_width=1))
        body.append(_svg.text(x, bottom + 18, f"{t:g}", size=11, fill="#444"))
    body.append(_svg.line(_LEFT, bottom, _WIDTH - _RIGHT, bottom, stroke="#444", stroke_width=1))
    caption = "event number in the log" if frame.by_seq else "time (s)"
    body.append(_svg.text(_WIDTH - _RIGHT, bottom + 34, caption, size=11, anchor="end", fill="#444"))
    return body


def _bands(frame: _Frame, bands: tuple[Band, ...]) -> list[str]:
    """A shaded, dashed box over each period a worker was down or frozen."""
    body = []
    for band in bands:
        x1, x2 = frame.x(band.start, band.start_seq), frame.x(band.end, band.end_seq)
        y = frame.y(band.worker_id) - _LANE / 2
        color = "#d62728" if band.kind == "crash" else "#e6a800"
        word = "crashed" if band.kind == "crash" else "paused"
        until_text = "end of view" if band.open else f"t={band.end:g}"
        body.append(
            _svg.group(
                f"band {band.kind}",
                _svg.rect(
                    x1,
                    y + 1,
                    max(x2 - x1, 2),
                    _LANE - 2,
                    fill=color,
                    fill_opacity=0.16,
                    stroke=color,
                    stroke_opacity=0.5,
                    stroke_dasharray="3,2",
                ),
                _svg.text(x1 + 3, y + _LANE - 5, word, size=9, anchor="start", fill=color),
                tip=f"{band.worker_id} {word} at t={band.start:g} until {until_text}",
            )
        )
    return body


def _leases(leases: tuple[LeaseSpan, ...], bars: list[tuple[float, float, float]]) -> list[str]:
    """A bar per lease, coloured by how it ended, labelled where it is wide enough."""
    body = []
    for span, (x1, x2, y) in zip(leases, bars):
        how = "still held" if span.outcome == "open" else f"{span.outcome} at t={span.end:g}"
        dead = ", then dead-lettered" if span.dead else ""
        got = "got a duplicate delivery of" if span.copy else "leased"
        tip = (
            f"{span.worker_id} {got} {span.case_id} ({span.item_id}, token {span.token}, "
            f"attempt {span.attempt}) at t={span.start:g}; {how}{dead}"
        )
        parts = [
            _svg.rect(
                x1,
                y - 7,
                x2 - x1,
                14,
                rx=3,
                fill=COLORS[span.outcome],
                stroke="#333",
                stroke_width=0.6,
                stroke_dasharray="4,2" if span.outcome == "open" else None,
            )
        ]
        label = f"{span.case_id} #{span.attempt}" + (" (copy)" if span.copy else "")
        if x2 - x1 >= 6.5 * len(label) + 6:
            parts.append(
                _svg.text(
                    (x1 + x2) / 2, y + 4, label, size=10, fill="#111" if span.outcome in ("open", "expired") else "#fff"
                )
            )
        if span.dead:
            parts.append(_svg.text(x2 + 3, y + 4, "DLQ", size=9, anchor="start", fill="#8b0000", weight="bold"))
        cls = span.outcome + (" dead" if span.dead else "") + (" copy" if span.copy else "")
        body.append(_svg.group(f"lease {cls}", *parts, tip=tip))
    return body


def _links_drawn(data: Timeline, bars: list[tuple[float, float, float]]) -> list[str]:
    """A dashed arrow from a lease that ended unacked to the item's next lease."""
    body = []
    for link in data.links:
        _, x1, y1 = bars[link.source]  # from the end of the lease that was lost...
        x2, _, y2 = bars[link.target]  # ...to the start of the next one
        if y2 == y1:  # same worker again: arc over the lane
            y2, cx, cy = y2 - 7, (x1 + x2) / 2, y1 - 22
        else:  # another worker: bend sideways between lanes
            y2 = y2 - 7 if y2 > y1 else y2 + 7
            cx, cy = (x1 + x2) / 2 + 14, (y1 + y2) / 2
        src, dst = data.leases[link.source], data.leases[link.target]
        body.append(
            _svg.group(
                "link",
                _svg.path(
                    "M",
                    x1,
                    y1,
                    "Q",
                    cx,
                    cy,
                    x2,
                    y2,
                    fill="none",
                    stroke=_LINK,
                    stroke_width=1.4,
                    stroke_dasharray="5,3",
                ),
                _svg.arrowhead(cx, cy, x2, y2, color=_LINK, length=8, width=6),
                tip=(
                    f"redelivery of {src.item_id}: {src.worker_id} (token {src.token}) {src.outcome}, "
                    f"{dst.worker_id} got token {dst.token}"
                ),
            )
        )
    return body


def _contacts(frame: _Frame, contacts: tuple[ContactMark, ...]) -> list[str]:
    """A dot above the bars per message: blue sent, red duplicate, hollow deduped."""
    body = []
    for c in contacts:
        x, y = frame.x(c.time, c.seq), frame.y(c.worker_id) - 13
        if c.deduped:
            what, cls, dot = (
                "deduped repeat (nothing sent)",
                "deduped",
                _svg.circle(x, y, 4, fill="white", stroke="#1f77b4", stroke_width=1.5),
            )
        elif c.duplicate:
            what, cls, dot = (
                "DUPLICATE contact",
                "duplicate",
                _svg.circle(x, y, 5.5, fill="#d62728", stroke="#7f0000", stroke_width=1),
            )
        else:
            what, cls, dot = "contact sent", "sent", _svg.circle(x, y, 4.5, fill="#1f77b4")
        tip = f"{what}: {c.case_id} {c.idem_key or ''} {c.message_id or ''} by {c.worker_id} at t={c.time:g}"
        body.append(_svg.group(f"contact {cls}", dot, tip=" ".join(tip.split())))
    return body


def _rejections(frame: _Frame, rejections: tuple[Rejection, ...]) -> list[str]:
    """A cross below the bars per stale write the store refused."""
    return [
        _svg.group(
            "rejection",
            _svg.cross(frame.x(r.time, r.seq), frame.y(r.worker_id) + 13, 4, stroke=_STALE, stroke_width=2),
            tip=f"stale write refused: {r.worker_id} still had token {r.token} for {r.item_id} at t={r.time:g}",
        )
        for r in rejections
    ]


def _legend(y: float) -> list[str]:
    items: list[str] = []
    x = _LEFT
    for outcome in ("acked", "nacked", "expired", "lost", "open"):
        items.append(
            _svg.rect(
                x,
                y - 9,
                18,
                10,
                rx=2,
                fill=COLORS[outcome],
                stroke="#333",
                stroke_width=0.6,
                stroke_dasharray="4,2" if outcome == "open" else None,
            )
        )
        items.append(_svg.text(x + 22, y, "held" if outcome == "open" else outcome, size=10, anchor="start"))
        x += 72
    for fill, stroke, label in (
        ("#1f77b4", "none", "contact"),
        ("#d62728", "#7f0000", "duplicate"),
        ("white", "#1f77b4", "deduped"),
    ):
        items.append(_svg.circle(x + 5, y - 4, 4.5, fill=fill, stroke=stroke, stroke_width=1.5))
        items.append(_svg.text(x + 14, y, label, size=10, anchor="start"))
        x += 76
    items.append(_svg.path("M", x, y - 4, "L", x + 18, y - 4, stroke=_LINK, stroke_width=1.4, stroke_dasharray="5,3"))
    items.append(_svg.text(x + 22, y, "redelivery", size=10, anchor="start"))
    x += 86
    items.append(_svg.cross(x + 4, y - 4, 4, stroke=_STALE, stroke_width=2))
    items.append(_svg.text(x + 12, y, "stale write refused", size=10, anchor="start"))
    return ['<g class="legend">', *items, "</g>"]


def _ticks(lo: float, hi: float, *, whole: bool) -> tuple[list[float], float, float]:
    """Round tick values (1, 2 or 5 times a power of ten) covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / 8
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if whole:
        step = max(1, round(step))
    first = math.floor(lo / step) * step
    count = int(math.ceil((hi - first) / step - 1e-9))
    ticks = [round(first + i * step, 10) for i in range(count + 1)]
    return ticks, first, ticks[-1]


def _links(spans: tuple[LeaseSpan, ...]) -> tuple[Link, ...]:
    last: dict[str, int] = {}
    links = []
    for index, span in enumerate(spans):
        if span.copy:
            continue  # a duplicate delivery is not a redelivery: the lease was still live
        before = last.get(span.item_id)
        if before is not None and spans[before].outcome in ("expired", "nacked"):
            links.append(Link(item_id=span.item_id, source=before, target=index))
        last[span.item_id] = index
    return tuple(links)


def _events(log: Any) -> list[Event]:
    if isinstance(log, EventLog):
        return log.events
    if isinstance(getattr(log, "log", None), EventLog):  # a queue, a simulation...
        return log.log.events
    if isinstance(log, (list, tuple)) and all(isinstance(e, Event) for e in log):
        return list(log)
    raise BadArgumentError(
        field="log", problem=f"is a {type(log).__name__}", fix="pass an EventLog, e.g. timeline(queue.log)"
    )


def _empty(until: float | None) -> Timeline:
    end = 0.0 if until is None else until
    return Timeline(
        lanes=(),
        leases=(),
        bands=(),
        contacts=(),
        rejections=(),
        links=(),
        start=0.0,
        end=end,
        start_seq=0,
        end_seq=0,
        total_leases=0,
        total_workers=0,
        note="",
    )
