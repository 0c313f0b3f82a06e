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
from dataclasses import dataclass
from typing import Any

from shopops_lab import arguments
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import Event, EventKind, EventLog
from shopops_lab.viz import _svg
from shopops_lab.viz.dot import Diagram

__all__ = ["Band", "ContactMark", "LeaseSpan", "Link", "Rejection", "Timeline", "build_timeline",
           "natural_key", "timeline"]

MAX_LEASES = 60
MAX_WORKERS = 12
TITLE = "deliveries per worker"

COLORS = {"acked": "#2ca02c", "nacked": "#ff7f0e", "expired": "#8c8c8c", "lost": "#8c564b",
          "open": "#9ecae1"}
_ENDINGS = {EventKind.ACKED: "acked", EventKind.NACKED: "nacked", EventKind.EXPIRED: "expired",
            EventKind.LEASE_LOST: "lost"}
_STARTS = (EventKind.LEASED, EventKind.DELIVERED_TWICE)


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
    outcome: str          # "acked", "nacked", "expired", "lost", or "open" (held at the view's end)
    dead: bool            # the ending sent the item to the dead-letter queue
    copy: bool            # a broker's second delivery of a live lease (same token, another worker)
    start_seq: int
    end_seq: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Band:
    """A period a worker was down ("crash") or frozen ("pause")."""

    worker_id: str
    kind: str
    start: float
    end: float
    open: bool            # no WORKER_RESUMED before the view's end
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
    duplicate: bool       # the customer already had a message for this (case, idem_key)
    deduped: bool         # a repeat the adapter absorbed: nothing reached the customer


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
    total_leases: int     # after the cases/workers/until filters, before the size cap
    total_workers: int
    note: str


def natural_key(name: str) -> tuple:
    """Sort key that puts W2 before W10."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", name) if part)


def build_timeline(log: EventLog | Iterable[Event], *, cases: Iterable[str] | None = None,
                   workers: Iterable[str] | None = None, until: float | None = None,
                   max_leases: int = MAX_LEASES, max_workers: int = MAX_WORKERS) -> Timeline:
    """Read `log` into lanes, leases, bands, contacts, rejections and redelivery links.

    `cases` / `workers` keep only those; `until` drops everything after that time. When
    more than `max_leases` leases or `max_workers` workers remain, the first ones are
    kept and `note` says what was left out.
    """
    events = _events(log)
    case_set = _names("cases", cases)
    worker_set = _names("workers", workers)
    arguments.whole("max_leases", max_leases)
    arguments.whole("max_workers", max_workers)
    if until is not None:
        if isinstance(until, bool) or not isinstance(until, (int, float)) or until != until:
            raise BadArgumentError(field="until", problem=f"is {until!r}",
                                   fix="pass a time in seconds, e.g. until=120")
        events = [e for e in events if e.time <= until]
    if not events:
        return _empty(until)
    end = float(until) if until is not None else events[-1].time
    end_seq = events[-1].seq

    leases: list[dict[str, Any]] = []
    open_leases: dict[tuple[str | None, int | None, str | None], dict[str, Any]] = {}
    bands: list[dict[str, Any]] = []
    open_bands: dict[str, dict[str, Any]] = {}
    contacts: list[ContactMark] = []
    rejections: list[Rejection] = []
    seen_intents: set[tuple[str | None, str | None]] = set()
    ended_last: dict[str | None, dict[str, Any]] = {}
    for e in events:
        kind = e.kind
        if kind in _STARTS and e.worker_id is not None:
            row = {"item_id": e.item_id, "case_id": e.case_id, "worker_id": e.worker_id, "token": e.token,
                   "attempt": e.attempt, "start": e.time, "end": end, "outcome": "open", "dead": False,
                   "copy": kind is EventKind.DELIVERED_TWICE, "start_seq": e.seq, "end_seq": end_seq}
            leases.append(row)
            open_leases[(e.item_id, e.token, e.worker_id)] = row
        elif kind in _ENDINGS:
            # keyed by worker too: a duplicated delivery gives two workers the same token
            row = open_leases.pop((e.item_id, e.token, e.worker_id), None)
            if row is not None:
                # an expiry is noticed on the queue's next call; the lease ended at its deadline
                ended = e.info.get("expires_at", e.time) if kind is EventKind.EXPIRED else e.time
                row.update(end=min(float(ended), e.time), outcome=_ENDINGS[kind], end_seq=e.seq)
                ended_last[e.item_id] = row
        elif kind is EventKind.DEAD_LETTERED:
            row = ended_last.get(e.item_id)
            if row is not None and row["token"] == e.token:
                row["dead"] = True
        elif kind in (EventKind.WORKER_CRASHED, EventKind.WORKER_PAUSED) and e.worker_id is not None:
            if e.worker_id not in open_bands:
                band = {"worker_id": e.worker_id, "start": e.time, "end": end, "open": True,
                        "kind": "crash" if kind is EventKind.WORKER_CRASHED else "pause",
                        "start_seq": e.seq, "end_seq": end_seq}
                bands.append(band)
                open_bands[e.worker_id] = band
        elif kind is EventKind.WORKER_RESUMED and e.worker_id is not None:
            band = open_bands.pop(e.worker_id, None)
            if band is not None:
                band.update(end=e.time, open=False, end_seq=e.seq)
        elif kind in (EventKind.CONTACT_SENT, EventKind.CONTACT_DEDUPED) and e.worker_id is not None:
            intent = (e.case_id, e.info.get("idem_key"))
            sent = kind is EventKind.CONTACT_SENT
            contacts.append(ContactMark(worker_id=e.worker_id, case_id=e.case_id, time=e.time, seq=e.seq,
                                        message_id=e.info.get("message_id"), idem_key=intent[1],
                                        duplicate=sent and intent in seen_intents, deduped=not sent))
            if sent:
                seen_intents.add(intent)
        elif kind is EventKind.STALE_REJECTED and e.worker_id is not None:
            rejections.append(Rejection(worker_id=e.worker_id, item_id=e.item_id, case_id=e.case_id,
                                        token=e.token, time=e.time, seq=e.seq))

    if case_set is not None:
        leases = [r for r in leases if r["case_id"] in case_set]
        contacts = [c for c in contacts if c.case_id in case_set]
        rejections = [r for r in rejections if r.case_id in case_set]
    lanes = sorted({r["worker_id"] for r in leases} | {c.worker_id for c in contacts}
                   | {r.worker_id for r in rejections}
                   | ({b["worker_id"] for b in bands} if case_set is None else set()), key=natural_key)
    if worker_set is not None:
        lanes = sorted(worker_set, key=natural_key)
        leases = [r for r in leases if r["worker_id"] in worker_set]
    total_workers, total_leases = len(lanes), len(leases)
    lanes = lanes[:max_workers]
    shown = set(lanes)
    leases = [r for r in leases if r["worker_id"] in shown]

    if len(leases) > max_leases:
        # a window: the log up to the moment the first lease left out began
        cut = leases[max_leases]
        end, end_seq = cut["start"], cut["start_seq"] - 1
        leases = leases[:max_leases]
        for row in leases:
            if row["end_seq"] > end_seq:
                row.update(end=end, end_seq=end_seq, outcome="open", dead=False)

    def in_view(worker: str, seq: int) -> bool:
        return worker in shown and seq <= end_seq

    spans = tuple(LeaseSpan(**r) for r in leases)
    kept_bands = tuple(Band(**{**b, "end": min(b["end"], end), "end_seq": min(b["end_seq"], end_seq),
                               "open": b["open"] or b["end_seq"] > end_seq})
                       for b in bands if in_view(b["worker_id"], b["start_seq"]))
    kept_contacts = tuple(c for c in contacts if in_view(c.worker_id, c.seq))
    kept_rejections = tuple(r for r in rejections if in_view(r.worker_id, r.seq))
    if worker_set is None:  # after a cut, keep only the lanes with something to show
        busy = ({s.worker_id for s in spans} | {b.worker_id for b in kept_bands}
                | {c.worker_id for c in kept_contacts} | {r.worker_id for r in kept_rejections})
        lanes = [w for w in lanes if w in busy]
    notes = []
    if len(spans) < total_leases:
        notes.append(f"{len(spans)} of {total_leases:,} leases")
    if total_workers > len(lanes):
        notes.append(f"{len(lanes)} of {total_workers:,} workers")
    note = ""
    if notes:
        note = f"showing {' and '.join(notes)}; pass cases=[...], workers=[...] or until=... to zoom"
    links = _links(spans)
    times = ([s.start for s in spans] + [b.start for b in kept_bands] + [c.time for c in kept_contacts]
             + [r.time for r in kept_rejections])
    seqs = ([s.start_seq for s in spans] + [b.start_seq for b in kept_bands] + [c.seq for c in kept_contacts]
            + [r.seq for r in kept_rejections])
    return Timeline(lanes=tuple(lanes), leases=spans, bands=kept_bands, contacts=kept_contacts,
                    rejections=kept_rejections, links=links, start=min(times, default=0.0),
                    end=end, start_seq=min(seqs, default=0), end_seq=end_seq,
                    total_leases=total_leases, total_workers=total_workers, note=note)


def timeline(log: EventLog | Iterable[Event], *, cases: Iterable[str] | None = None,
             workers: Iterable[str] | None = None, until: float | None = None,
             axis: str = "time", max_leases: int = MAX_LEASES,
             max_workers: int = MAX_WORKERS) -> Diagram:
    """Draw deliveries per worker. axis="time" spaces events by the clock; axis="seq"
    spaces them by their order in the log (useful when the clock never moved)."""
    if axis not in ("time", "seq"):
        raise BadArgumentError(field="axis", problem=f"is {axis!r}", fix="pass 'time' or 'seq'")
    data = build_timeline(log, cases=cases, workers=workers, until=until,
                          max_leases=max_leases, max_workers=max_workers)
    return Diagram(title=TITLE, svg=draw(data, axis=axis), engine="builtin", note=data.note)


# ---------------------------------------------------------------------------- drawing
_LEFT, _RIGHT, _LANE, _WIDTH = 70.0, 30.0, 40.0, 860.0


def draw(data: Timeline, *, axis: str = "time") -> str:
    """The SVG of a `Timeline`."""
    top = 44.0 if data.note else 28.0
    height = top + _LANE * max(1, len(data.lanes)) + 70
    body: list[str] = [_svg.text(_LEFT, 18, f"{TITLE}: {len(data.leases)} leases on "
                                 f"{len(data.lanes)} workers", size=13, anchor="start", weight="bold")]
    if data.note:
        body.append(_svg.text(_LEFT, 36, data.note, size=12, anchor="start", fill="#b35900", cls="note"))
    if not data.lanes:
        body.append(_svg.text(_WIDTH / 2, top + 24, "no leases to show yet", size=13, fill="#666"))
        return _svg.document(_WIDTH, height, body, label=TITLE)

    by_seq = axis == "seq"
    lo, hi = (data.start_seq, data.end_seq + 1) if by_seq else (data.start, data.end)
    ticks, lo, hi = _ticks(lo, hi, whole=by_seq)
    span = hi - lo
    plot_w = _WIDTH - _LEFT - _RIGHT

    def x_of(value: float) -> float:
        return _LEFT + (value - lo) / span * plot_w

    lane_y = {w: top + _LANE * i + _LANE / 2 for i, w in enumerate(data.lanes)}
    bottom = top + _LANE * len(data.lanes)

    for i, worker in enumerate(data.lanes):
        y = lane_y[worker]
        if i % 2 == 0:
            body.append(f'<rect x="{_svg.num(_LEFT)}" y="{_svg.num(y - _LANE / 2)}" width="{_svg.num(plot_w)}" '
                        f'height="{_svg.num(_LANE)}" fill="#f5f5f5"/>')
        body.append(_svg.text(_LEFT - 8, y + 4, worker, size=12, anchor="end", weight="bold", cls="lane"))
    for t in ticks:
        x = x_of(t)
        body.append(f'<line x1="{_svg.num(x)}" y1="{_svg.num(top)}" x2="{_svg.num(x)}" y2="{_svg.num(bottom + 5)}" '
                    f'stroke="#dddddd" stroke-width="1"/>')
        body.append(_svg.text(x, bottom + 18, f"{t:g}", size=11, fill="#444"))
    body.append(f'<line x1="{_svg.num(_LEFT)}" y1="{_svg.num(bottom)}" x2="{_svg.num(_WIDTH - _RIGHT)}" '
                f'y2="{_svg.num(bottom)}" stroke="#444" stroke-width="1"/>')
    caption = "event number in the log" if by_seq else "time (s)"
    body.append(_svg.text(_WIDTH - _RIGHT, bottom + 34, caption, size=11, anchor="end", fill="#444"))

    for band in data.bands:
        x1, x2 = x_of(band.start_seq if by_seq else band.start), x_of(band.end_seq if by_seq else band.end)
        y = lane_y[band.worker_id] - _LANE / 2
        color = "#d62728" if band.kind == "crash" else "#e6a800"
        word = "crashed" if band.kind == "crash" else "paused"
        until_text = "end of view" if band.open else f"t={band.end:g}"
        body.append(f'<g class="band {band.kind}"><title>{_svg.esc(band.worker_id)} {word} at t={band.start:g} '
                    f'until {until_text}</title>'
                    f'<rect x="{_svg.num(x1)}" y="{_svg.num(y + 1)}" width="{_svg.num(max(x2 - x1, 2))}" '
                    f'height="{_svg.num(_LANE - 2)}" fill="{color}" fill-opacity="0.16" '
                    f'stroke="{color}" stroke-opacity="0.5" stroke-dasharray="3,2"/>'
                    + _svg.text(x1 + 3, y + _LANE - 5, word, size=9, anchor="start", fill=color) + "</g>")

    bars: list[tuple[float, float, float]] = []
    for span_ in data.leases:
        x1 = x_of(span_.start_seq if by_seq else span_.start)
        x2 = max(x_of(span_.end_seq if by_seq else span_.end), x1 + 3)
        y = lane_y[span_.worker_id]
        bars.append((x1, x2, y))
        color = COLORS[span_.outcome]
        dash = ' stroke-dasharray="4,2"' if span_.outcome == "open" else ""
        how = "still held" if span_.outcome == "open" else f"{span_.outcome} at t={span_.end:g}"
        dead = ", then dead-lettered" if span_.dead else ""
        got = "got a duplicate delivery of" if span_.copy else "leased"
        tip = (f"{span_.worker_id} {got} {span_.case_id} ({span_.item_id}, token {span_.token}, "
               f"attempt {span_.attempt}) at t={span_.start:g}; {how}{dead}")
        cls = span_.outcome + (" dead" if span_.dead else "") + (" copy" if span_.copy else "")
        parts = [f'<g class="lease {cls}"><title>{_svg.esc(tip)}</title>',
                 f'<rect x="{_svg.num(x1)}" y="{_svg.num(y - 7)}" width="{_svg.num(x2 - x1)}" height="14" rx="3" '
                 f'fill="{color}" stroke="#333" stroke-width="0.6"{dash}/>']
        label = f"{span_.case_id} #{span_.attempt}" + (" (copy)" if span_.copy else "")
        if x2 - x1 >= 6.5 * len(label) + 6:
            parts.append(_svg.text((x1 + x2) / 2, y + 4, label, size=10,
                                   fill="#111" if span_.outcome in ("open", "expired") else "#fff"))
        if span_.dead:
            parts.append(_svg.text(x2 + 3, y + 4, "DLQ", size=9, anchor="start", fill="#8b0000", weight="bold"))
        parts.append("</g>")
        body.append("".join(parts))

    for link in data.links:
        _, x1, y1 = bars[link.source]      # from the end of the lease that was lost...
        x2, _, y2 = bars[link.target]      # ...to the start of the next one
        if y2 == y1:                       # same worker again: arc over the lane
            y2, cx, cy = y2 - 7, (x1 + x2) / 2, y1 - 22
        else:                              # another worker: bend sideways between lanes
            y2 = y2 - 7 if y2 > y1 else y2 + 7
            cx, cy = (x1 + x2) / 2 + 14, (y1 + y2) / 2
        src, dst = data.leases[link.source], data.leases[link.target]
        tip = (f"redelivery of {src.item_id}: {src.worker_id} (token {src.token}) {src.outcome}, "
               f"{dst.worker_id} got token {dst.token}")
        body.append(f'<g class="link"><title>{_svg.esc(tip)}</title>'
                    f'<path d="M {_svg.num(x1)} {_svg.num(y1)} Q {_svg.num(cx)} {_svg.num(cy)} '
                    f'{_svg.num(x2)} {_svg.num(y2)}" fill="none" stroke="#7b3294" stroke-width="1.4" '
                    f'stroke-dasharray="5,3"/>'
                    + _svg.arrowhead(cx, cy, x2, y2, color="#7b3294", length=8, width=6) + "</g>")

    for c in data.contacts:
        x, y = x_of(c.seq if by_seq else c.time), lane_y[c.worker_id] - 13
        what = "deduped repeat (nothing sent)" if c.deduped else (
            "DUPLICATE contact" if c.duplicate else "contact sent")
        tip = f"{what}: {c.case_id} {c.idem_key or ''} {c.message_id or ''} by {c.worker_id} at t={c.time:g}"
        cls = "deduped" if c.deduped else ("duplicate" if c.duplicate else "sent")
        if c.deduped:
            dot = (f'<circle cx="{_svg.num(x)}" cy="{_svg.num(y)}" r="4" fill="white" '
                   f'stroke="#1f77b4" stroke-width="1.5"/>')
        elif c.duplicate:
            dot = (f'<circle cx="{_svg.num(x)}" cy="{_svg.num(y)}" r="5.5" fill="#d62728" '
                   f'stroke="#7f0000" stroke-width="1"/>')
        else:
            dot = f'<circle cx="{_svg.num(x)}" cy="{_svg.num(y)}" r="4.5" fill="#1f77b4"/>'
        body.append(f'<g class="contact {cls}"><title>{_svg.esc(" ".join(tip.split()))}</title>{dot}</g>')

    for r in data.rejections:
        x, y = x_of(r.seq if by_seq else r.time), lane_y[r.worker_id] + 13
        tip = f"stale write refused: {r.worker_id} still had token {r.token} for {r.item_id} at t={r.time:g}"
        body.append(f'<g class="rejection"><title>{_svg.esc(tip)}</title>'
                    f'<path d="M {_svg.num(x - 4)} {_svg.num(y - 4)} L {_svg.num(x + 4)} {_svg.num(y + 4)} '
                    f'M {_svg.num(x - 4)} {_svg.num(y + 4)} L {_svg.num(x + 4)} {_svg.num(y - 4)}" '
                    f'stroke="#8b0000" stroke-width="2"/></g>')

    body.extend(_legend(bottom + 54))
    return _svg.document(_WIDTH, height, body, label=TITLE)


def _legend(y: float) -> list[str]:
    items: list[str] = []
    x = _LEFT
    for outcome in ("acked", "nacked", "expired", "lost", "open"):
        dash = ' stroke-dasharray="4,2"' if outcome == "open" else ""
        items.append(f'<rect x="{_svg.num(x)}" y="{_svg.num(y - 9)}" width="18" height="10" rx="2" '
                     f'fill="{COLORS[outcome]}" stroke="#333" stroke-width="0.6"{dash}/>')
        items.append(_svg.text(x + 22, y, "held" if outcome == "open" else outcome, size=10, anchor="start"))
        x += 72
    for fill, stroke, label in (("#1f77b4", "none", "contact"), ("#d62728", "#7f0000", "duplicate"),
                                ("white", "#1f77b4", "deduped")):
        items.append(f'<circle cx="{_svg.num(x + 5)}" cy="{_svg.num(y - 4)}" r="4.5" fill="{fill}" '
                     f'stroke="{stroke}" stroke-width="1.5"/>')
        items.append(_svg.text(x + 14, y, label, size=10, anchor="start"))
        x += 76
    items.append(f'<path d="M {_svg.num(x)} {_svg.num(y - 4)} L {_svg.num(x + 18)} {_svg.num(y - 4)}" '
                 f'stroke="#7b3294" stroke-width="1.4" stroke-dasharray="5,3"/>')
    items.append(_svg.text(x + 22, y, "redelivery", size=10, anchor="start"))
    x += 86
    items.append(f'<path d="M {_svg.num(x)} {_svg.num(y - 8)} L {_svg.num(x + 8)} {_svg.num(y)} '
                 f'M {_svg.num(x)} {_svg.num(y)} L {_svg.num(x + 8)} {_svg.num(y - 8)}" '
                 f'stroke="#8b0000" stroke-width="2"/>')
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
    raise BadArgumentError(field="log", problem=f"is a {type(log).__name__}",
                           fix="pass an EventLog, e.g. timeline(queue.log)")


def _names(field: str, values: Iterable[str] | None) -> frozenset[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        raise BadArgumentError(field=field, problem=f"is the string {values!r}",
                               fix=f"pass a list, e.g. {field}=[{values!r}]")
    names = frozenset(values)
    if not names or not all(isinstance(v, str) and v for v in names):
        raise BadArgumentError(field=field, problem=f"is {sorted(map(repr, names))}",
                               fix=f"pass a non-empty list of names, e.g. {field}=['O-1001']")
    return names


def _empty(until: float | None) -> Timeline:
    end = 0.0 if until is None else float(until)
    return Timeline(lanes=(), leases=(), bands=(), contacts=(), rejections=(), links=(), start=0.0,
                    end=end, start_seq=0, end_seq=0, total_leases=0, total_workers=0, note="")
