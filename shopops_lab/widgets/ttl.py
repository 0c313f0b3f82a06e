"""Choosing a lease TTL and a heartbeat policy, by simulation.

The trade-off lab 03 is about: a TTL long enough for the slowest model call never
expires under a healthy worker, but a dead worker's case then waits that long before
anyone retries it. Heartbeats break the tie: a short TTL, renewed every few seconds
while the call runs. The price is heartbeat traffic, and the risk is a few heartbeats
lost in a row. `evaluate_policy` measures all of it; `grade_policy` judges it.

The model, precisely (it follows `InMemoryQueue`):

- A worker acquires at t=0 and makes one model call whose latency is drawn from the
  `LatencyModel`; it acks when the call returns, at t=L.
- The lease deadline starts at t=ttl. With `heartbeat_interval=h`, the worker sends
  a heartbeat at h, 2h, 3h, ... while the call runs; each one that arrives moves the
  deadline to (its time + ttl). Each heartbeat is lost on the way (a network blip)
  with probability `miss_probability`, independently.
- A lease is gone once the clock reaches its deadline (the queue expires leases with
  deadline <= now), so a heartbeat or an ack landing exactly at the deadline is late.
- **Spurious expiry**: a healthy worker loses its lease before its ack: with no
  heartbeats, when L >= ttl; with heartbeats, when enough heartbeats in a row are
  lost that the deadline passes first.
- **Detection**: the worker dies at a uniformly random moment of its call. The queue
  notices at the deadline set by its last heartbeat that arrived, so the case waits
  (deadline - death) seconds before redelivery: at most `ttl`.
- **missed_tolerance = k** is the number of consecutive lost heartbeats the policy
  promises to survive: after k losses, heartbeat k+1 lands at (k+1)h after the last
  renewal and must beat the deadline, so a sound policy has ttl > (k + 1) * h.
"""

from __future__ import annotations

import bisect
import html
import math
import random
from dataclasses import dataclass
from typing import Any

from shopops_lab import arguments, live
from shopops_lab.errors import BadArgumentError
from shopops_lab.latency import LatencyModel
from shopops_lab.viz import _svg
from shopops_lab.widgets import _ui

__all__ = ["TtlExplorer", "TtlReport", "evaluate_policy", "grade_policy", "policy_svg"]


@dataclass(frozen=True, kw_only=True, slots=True)
class TtlReport:
    """What a TTL-and-heartbeat policy costs and risks, for one latency model."""

    latency: LatencyModel
    ttl: float
    heartbeat_interval: float | None
    missed_tolerance: int
    miss_probability: float
    runs: int
    seed: int
    spurious_expiry: float  # share of healthy calls that lost their lease
    detection_worst: float  # longest a dead worker's case can wait (= ttl)
    detection_mean: float  # average wait, over simulated deaths
    heartbeats_per_worker_per_min: float  # while a call runs
    workers: int
    heartbeats_per_min: float  # for `workers` busy workers
    absorbs_missed: int | None  # lost heartbeats in a row the ttl survives (None: no help)

    def __str__(self) -> str:
        beat = "no heartbeats" if self.heartbeat_interval is None else f"heartbeat every {self.heartbeat_interval:g} s"
        absorbs = (
            "heartbeats cannot keep this lease alive"
            if self.absorbs_missed is None
            else f"survives {self.absorbs_missed} lost heartbeat(s) in a row"
        )
        return "\n".join(
            [
                f"policy: ttl {self.ttl:g} s, {beat}, tolerance {self.missed_tolerance} "
                f"(model p50 {self.latency.p50:g} s, p99 {self.latency.p99:g} s, max {self.latency.max:g} s)",
                f"spurious expiry:  {self.spurious_expiry:.2%} of healthy calls ({self.runs} simulated, "
                f"{self.miss_probability:.1%} of heartbeats lost)",
                f"dead worker found after: {self.detection_mean:.1f} s on average, {self.detection_worst:g} s at worst",
                f"heartbeat load:   {self.heartbeats_per_worker_per_min:g}/min per worker, "
                f"{self.heartbeats_per_min:g}/min for {self.workers} workers",
                f"lost heartbeats:  {absorbs}",
            ]
        )


def evaluate_policy(
    latency: LatencyModel,
    ttl: float,
    heartbeat_interval: float | None,
    missed_tolerance: int,
    *,
    seed: int = 0,
    runs: int = 2000,
    miss_probability: float = 0.01,
    workers: int = 20,
) -> TtlReport:
    """Simulate `runs` calls (one seeded rng) and report the policy's numbers.
    See the module docstring for the exact model."""
    if not isinstance(latency, LatencyModel):
        raise BadArgumentError(
            field="latency",
            problem=f"is a {type(latency).__name__}",
            fix="pass a LatencyModel, e.g. LatencyModel(p50=8, p99=90, max=120)",
        )
    ttl = arguments.seconds("ttl", ttl, "pass a positive number of seconds")
    h = (
        None
        if heartbeat_interval is None
        else arguments.seconds(
            "heartbeat_interval", heartbeat_interval, "pass seconds between heartbeats, or None for no heartbeats"
        )
    )
    arguments.whole("missed_tolerance", missed_tolerance, 0)
    arguments.whole("runs", runs, 1)
    arguments.whole("workers", workers, 1)
    arguments.whole("seed", seed, None, "pass a whole number, e.g. seed=0")
    p = miss_probability
    arguments.number(
        "miss_probability",
        p,
        "pass the chance that one heartbeat is lost, between 0 and 1, e.g. 0.01",
        least=0,
        below=1,
    )

    rng = random.Random(seed)
    lost_runs = detected = 0
    waits = 0.0
    for _ in range(runs):
        call = latency.sample(rng)
        renewals, lost_at = _heartbeats(call, ttl, h, p, rng)
        if lost_at is not None:
            lost_runs += 1
        death = rng.random() * call
        if lost_at is not None and lost_at <= death:
            continue  # the queue had already taken the case back: nothing left to detect
        before = bisect.bisect_left(renewals, death)  # renewals strictly before the death
        last_renewal = renewals[before - 1] if before else 0.0
        waits += last_renewal + ttl - death
        detected += 1
    per_worker = 0.0 if h is None else 60.0 / h
    return TtlReport(
        latency=latency,
        ttl=ttl,
        heartbeat_interval=h,
        missed_tolerance=missed_tolerance,
        miss_probability=float(p),
        runs=runs,
        seed=seed,
        spurious_expiry=lost_runs / runs,
        detection_worst=ttl,
        detection_mean=waits / detected if detected else 0.0,
        heartbeats_per_worker_per_min=round(per_worker, 6),
        workers=workers,
        heartbeats_per_min=round(per_worker * workers, 6),
        absorbs_missed=_absorbs(ttl, h),
    )


def grade_policy(
    report: TtlReport, *, max_spurious: float = 0.001, max_detection: float = 60.0, max_heartbeats_per_min: float = 12.0
) -> tuple[bool, list[str]]:
    """(ok, reasons): each reason names one limit the policy breaks and which way to move.
    `max_heartbeats_per_min` is per worker; `max_detection` bounds the worst-case wait."""
    if not isinstance(report, TtlReport):
        raise BadArgumentError(
            field="report", problem=f"is a {type(report).__name__}", fix="pass what evaluate_policy(...) returned"
        )
    reasons = []
    h, ttl = report.heartbeat_interval, report.ttl
    if report.spurious_expiry > max_spurious:
        if h is None:
            why = f"with no heartbeats the lease must outlast the slowest call ({report.latency.max:g} s)"
        elif h >= ttl:
            why = "the first heartbeat comes after the deadline, so heartbeats never renew the lease"
        else:
            why = "enough heartbeats are lost in a row for the deadline to pass"
        reasons.append(
            f"healthy workers lose their lease in {report.spurious_expiry:.2%} of calls "
            f"(limit {max_spurious:.2%}): {why}."
        )
    if report.detection_worst > max_detection:
        reasons.append(
            f"a dead worker's case can wait {report.detection_worst:g} s before redelivery "
            f"(limit {max_detection:g} s): the TTL bounds how fast a crash is noticed."
        )
    if report.heartbeats_per_worker_per_min > max_heartbeats_per_min:
        reasons.append(
            f"{report.heartbeats_per_worker_per_min:g} heartbeats per worker per minute "
            f"(limit {max_heartbeats_per_min:g}): that is load on the queue for no progress."
        )
    if h is not None:
        late = (report.missed_tolerance + 1) * h
        if not late < ttl:
            reasons.append(
                f"the TTL does not survive {report.missed_tolerance} lost heartbeat(s) in a row: "
                f"the next one lands {late:g} s after the last renewal, not before the "
                f"{ttl:g} s deadline (need ttl > (missed_tolerance + 1) x heartbeat_interval)."
            )
    return not reasons, reasons


def policy_svg(latency: LatencyModel, ttl: float, heartbeat_interval: float | None) -> str:
    """A small picture: the model call's p50/p99/max against the lease, with heartbeats."""
    h = heartbeat_interval
    span = max(latency.max, ttl) * 1.08
    left, width = 92.0, 560.0

    def x(t: float) -> float:
        return left + t / span * (width - left - 16)

    body = [
        _svg.text(left - 8, 34, "model call", size=11, anchor="end"),
        _svg.text(left - 8, 74, "lease", size=11, anchor="end"),
    ]
    for upto, shade, label in (
        (latency.max, "#c6dbef", "max"),
        (latency.p99, "#6baed6", "p99"),
        (latency.p50, "#2171b5", "p50"),
    ):
        body.append(_svg.rect(x(0), 22, x(upto) - x(0), 16, fill=shade))
        body.append(_svg.text(x(upto), 16, f"{label} {upto:g}s", size=10, fill="#08306b"))
    covered = ttl if h is None or h >= ttl else latency.max + ttl  # how far the lease reaches
    lost = "#d62728" if covered <= latency.max else "#2ca02c"
    body.append(_svg.rect(x(0), 64, x(min(covered, span)) - x(0), 14, fill=lost, fill_opacity=0.35, stroke=lost))
    if h is None or h >= ttl:
        body.append(_svg.text(x(min(ttl, span)), 96, f"deadline t={ttl:g}s", size=10, fill="#333"))
    if h is not None:
        k = 1
        while k * h < latency.max and k <= 400:
            body.append(_svg.line(x(k * h), 60, x(k * h), 82, stroke="#333", stroke_width=1))
            k += 1
        body.append(
            _svg.text(
                x(0),
                112,
                f"| heartbeat every {h:g}s renews the lease to now + {ttl:g}s",
                size=10,
                anchor="start",
                fill="#333",
            )
        )
    elif ttl <= latency.max:
        body.append(
            _svg.text(
                x(0),
                112,
                "no heartbeats: calls longer than the TTL lose their lease",
                size=10,
                anchor="start",
                fill="#a01010",
            )
        )
    return _svg.document(width, 122, body, label="lease policy")


class TtlExplorer(_ui.LiveWidget):
    """Sliders over `evaluate_policy`: move them and watch the numbers and the verdict."""

    def __init__(
        self,
        latency: LatencyModel | None = None,
        *,
        ttl: float = 60,
        heartbeat_interval: float | None = 20,
        missed_tolerance: int = 1,
        runs: int = 2000,
        seed: int = 0,
    ) -> None:
        self.latency = latency if latency is not None else LatencyModel(p50=8, p99=90, max=120)
        self.report = evaluate_policy(self.latency, ttl, heartbeat_interval, missed_tolerance, runs=runs, seed=seed)
        self.runs, self.seed = runs, seed

    def update(
        self,
        *,
        p50: float,
        p99: float,
        max_latency: float,
        ttl: float,
        heartbeat_interval: float | None,
        missed_tolerance: int,
    ) -> TtlReport:
        """Re-evaluate with new settings (what the sliders call)."""
        latency = LatencyModel(p50=p50, p99=p99, max=max_latency)
        report = evaluate_policy(latency, ttl, heartbeat_interval, missed_tolerance, runs=self.runs, seed=self.seed)
        self.latency, self.report = latency, report
        return report

    def html(self) -> str:
        """The current report, verdict and picture, as HTML."""
        ok, reasons = grade_policy(self.report)
        verdict = (
            "<p><b>✅ This policy meets the default limits.</b></p>"
            if ok
            else "<p><b>❌ Not yet:</b></p><ul>" + "".join(f"<li>{html.escape(r)}</li>" for r in reasons) + "</ul>"
        )
        return (
            policy_svg(self.latency, self.report.ttl, self.report.heartbeat_interval)
            + f"<pre>{html.escape(str(self.report))}</pre>"
            + live.region(verdict)
        )

    def build(self, w: Any) -> Any:
        r = self.report
        sliders = {
            "p50": w.FloatSlider(value=r.latency.p50, min=0.5, max=60, step=0.5, description="p50 (s)"),
            "p99": w.FloatSlider(value=r.latency.p99, min=1, max=300, step=1, description="p99 (s)"),
            "max_latency": w.FloatSlider(value=r.latency.max, min=5, max=600, step=5, description="max (s)"),
            "ttl": w.FloatSlider(value=r.ttl, min=5, max=600, step=5, description="TTL (s)"),
            "heartbeat_interval": w.FloatSlider(
                value=r.heartbeat_interval or 0, min=0, max=120, step=1, description="heartbeat (s)"
            ),
            "missed_tolerance": w.IntSlider(value=r.missed_tolerance, min=0, max=5, description="tolerance"),
        }
        out = w.HTML(self.html())

        def changed(_: Any) -> None:
            values = {name: s.value for name, s in sliders.items()}
            values["heartbeat_interval"] = values["heartbeat_interval"] or None  # 0 means no heartbeats
            try:
                self.update(**values)
            except BadArgumentError as exc:
                out.value = live.region(f"<p>⚠️ {html.escape(str(exc))}</p>")
                return
            out.value = self.html()

        for s in sliders.values():
            s.observe(changed, names="value")
        note = w.HTML("<small>heartbeat 0 = no heartbeats</small>")
        return w.VBox([*sliders.values(), note, out])

    def static_html(self, note: str = _ui.NO_WIDGETS) -> str:
        return f"<p><em>{html.escape(note)}</em></p>" + self.html()

    def label(self) -> str:
        return (
            f"TtlExplorer: ttl={self.report.ttl:g} s, heartbeat={self.report.heartbeat_interval}, "
            f"tolerance={self.report.missed_tolerance}"
        )

    def __repr__(self) -> str:
        return f"TtlExplorer(ttl={self.report.ttl:g}, heartbeat_interval={self.report.heartbeat_interval})"


# ---------------------------------------------------------------------------- internals
def _heartbeats(
    call: float, ttl: float, h: float | None, p: float, rng: random.Random
) -> tuple[list[float], float | None]:
    """(times of heartbeats that renewed the lease, when the lease was lost or None)."""
    renewals: list[float] = []
    deadline = ttl
    if h is not None:
        k = 1
        while (t := k * h) < call:
            if t >= deadline:
                return renewals, deadline
            if not (p and rng.random() < p):
                renewals.append(t)
                deadline = t + ttl
            k += 1
    return renewals, (deadline if call >= deadline else None)


def _absorbs(ttl: float, h: float | None) -> int | None:
    """The largest k with (k + 1) * h < ttl, or None when heartbeats cannot help."""
    if h is None or not h < ttl:
        return None
    k = max(math.ceil(ttl / h) - 2, 0)
    while (k + 2) * h < ttl:
        k += 1
    while k > 0 and not (k + 1) * h < ttl:
        k -= 1
    return k
