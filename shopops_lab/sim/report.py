"""What a run amounts to: counts a learner can check at a glance, metrics read back from
the event log, the checker's verdict, and the seed with a one-line replay, so any
surprising run can be brought back exactly."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from shopops_lab.backpressure import describe_policy
from shopops_lab.checker import Anomaly, CheckResult, check, is_approval
from shopops_lab.events import EventKind, EventLog
from shopops_lab.metrics import QueueMetrics, Summary, queue_metrics
from shopops_lab.sim.config import RunConfig
from shopops_lab.sim.world import World
from shopops_lab.states import ItemState

__all__ = ["Report", "build_report", "judge", "log_metrics"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Report:
    """One run, judged. `lost` counts items neither done nor dead-lettered when the report
    was made; `double_contacts` counts (case, intent) pairs the customer received more than
    once; `redeliveries` counts deliveries after an item's first. `valid` and `anomalies`
    are the checker's verdict (`check` keeps its whole `CheckResult`; `valid` is None while
    the run is not final). `metrics` is JSON-ready; `queue` is the full `QueueMetrics`;
    `log` is the event log everything here was read from."""

    scenario: str
    seed: int
    adapter: str
    policy: str
    items: int
    done: int
    dead_lettered: int
    lost: int
    contacts: int
    double_contacts: int
    redeliveries: int
    sim_time: float
    final: bool
    metrics: Mapping[str, Any]
    check: CheckResult = field(repr=False)
    replay: str
    python_replay: str
    log: EventLog = field(repr=False, compare=False)
    queue: QueueMetrics | None = field(default=None, repr=False, compare=False)

    @property
    def valid(self) -> bool | None:
        """The checker's verdict: True, False, or None while the run is not final."""
        return self.check.valid

    @property
    def anomalies(self) -> tuple[Anomaly, ...]:
        return self.check.anomalies

    @property
    def checker_summary(self) -> str:
        return self.check.summary

    def as_dict(self, *, events: bool = False) -> dict[str, Any]:
        """A JSON-ready dict; `events=True` adds the whole event log (`EventLog.from_dicts`
        reads it back, so the checker can judge it again)."""
        row: dict[str, Any] = {
            "scenario": self.scenario,
            "seed": self.seed,
            "adapter": self.adapter,
            "policy": self.policy,
            "items": self.items,
            "done": self.done,
            "dead_lettered": self.dead_lettered,
            "lost": self.lost,
            "contacts": self.contacts,
            "double_contacts": self.double_contacts,
            "redeliveries": self.redeliveries,
            "sim_time": self.sim_time,
            "final": self.final,
            "event_count": len(self.log),
            "metrics": dict(self.metrics),
            "valid": self.valid,
            "checker": self.checker_summary,
            "anomalies": [a.as_dict() for a in self.anomalies],
            "replay": self.replay,
            "python_replay": self.python_replay,
        }
        if events:
            row["events"] = self.log.to_dicts()
        return row

    def __str__(self) -> str:
        m = self.metrics
        verdict = {True: "valid", False: "INVALID", None: "unknown"}[self.valid]
        lines = [
            f"{self.scenario}  seed={self.seed}  adapter={self.adapter}  policy={self.policy}",
            f"  {self.items} items: {self.done} done, {self.dead_lettered} dead-lettered, {self.lost} lost",
            f"  {self.contacts} customer contacts, {self.double_contacts} double contacts, "
            f"{self.redeliveries} redeliveries",
            f"  approvals: {_approvals(m)}; gateway: p95 {_num(m['gateway_p95'])} s, "
            f"{m['gateway_timeouts']} timeouts; {m['throttled']} throttles",
            f"  simulated {_num(self.sim_time)} s in {len(self.log)} events",
            f"  checker: {verdict}: {self.checker_summary}",
        ]
        lines.extend(f"    {name} x{len(self.check.of(name))}" for name in self.check.names())
        lines.append(f"  replay: {self.replay}")
        lines.append(f"  python: {self.python_replay}")
        return "\n".join(lines)


def judge(config: RunConfig, world: World, final: bool) -> CheckResult:
    """The checker's verdict on `world` as it stands, with the scenario's limits: the part of a
    report a check reads (lab 07's), without the vital signs it does not."""
    sc = config.scenario
    return check(world.log, max_attempts=sc.max_attempts, approval_wait_budget=sc.approval_wait_budget, final=final)


def build_report(config: RunConfig, world: World, final: bool) -> Report:
    """Judge and summarise `world` as it stands; `final`: nothing is left to happen."""
    counts = world.queue.counts()
    done, dead = counts[ItemState.DONE], counts[ItemState.DEAD]
    sc = config.scenario
    verdict = judge(config, world, final)
    queue = queue_metrics(world.log)
    metrics = log_metrics(world.log, queue)
    ledger = world.adapter.ledger
    return Report(
        scenario=sc.name,
        seed=config.seed,
        adapter=config.adapter,
        policy=describe_policy(config.policy),
        items=config.items,
        done=done,
        dead_lettered=dead,
        lost=config.items - done - dead,
        contacts=len(ledger),
        double_contacts=len(ledger.duplicates()),
        redeliveries=metrics["redeliveries"],
        sim_time=round(world.now, 3),
        final=final,
        metrics=MappingProxyType(metrics),
        check=verdict,
        replay=config.cli_replay(),
        python_replay=config.python_replay(),
        log=world.log,
        queue=queue,
    )


# --------------------------------------------------------------------------- metrics

_TALLIED = (
    EventKind.THROTTLED,
    EventKind.WORKER_CRASHED,
    EventKind.WORKER_PAUSED,
    EventKind.ACK_LOST,
    EventKind.EFFECT_UNKNOWN,
    EventKind.DELIVERED_TWICE,
    EventKind.LEASE_LOST,
    EventKind.CONTACT_DEDUPED,
)


def log_metrics(log: EventLog, queue: QueueMetrics) -> dict[str, Any]:
    """The run's vital signs, read from the log alone: the queue's health (from
    `shopops_lab.metrics`) plus what only a simulation has: how long approvals took from
    arrival to done, how the gateway behaved, and how often each fault struck."""
    enqueued: dict[str, float] = {}  # approval item -> when it arrived
    approval_waits: list[float] = []
    gateway: list[float] = []
    timeouts = redeliveries = 0
    tally = dict.fromkeys(_TALLIED, 0)
    for row in log.rows():
        time, kind, item_id, attempt, info = row.time, row.kind, row.item_id, row.attempt, row.info
        if kind is EventKind.GATEWAY_CALL:
            gateway.append(info["seconds"])
            timeouts += bool(info.get("timed_out"))
        elif kind is EventKind.LEASED:
            redeliveries += attempt is not None and attempt > 1
        elif kind is EventKind.ENQUEUED:
            if is_approval(info) and item_id is not None:
                enqueued[item_id] = time
        elif kind is EventKind.ACKED:
            if item_id in enqueued:
                approval_waits.append(time - enqueued[item_id])
        elif kind in tally:
            tally[kind] += 1
    return {
        "throughput_per_hour": None if queue.throughput is None else _round(queue.throughput * 3600),
        "leases": queue.leases,
        "redeliveries": redeliveries,
        "redelivery_rate": _round(queue.redelivery_rate),
        **_flat("time_in_queue", queue.time_in_queue),
        "attempts": {str(n): count for n, count in queue.attempts.items()},
        "expirations": queue.expirations,
        "stale_rejections": queue.stale_rejections,
        **_flat("dlq_age", queue.dlq_age),
        **_flat("approval_wait", Summary.of(approval_waits)),
        **_flat("gateway", Summary.of(gateway)),
        "gateway_timeouts": timeouts,
        "crashes": tally[EventKind.WORKER_CRASHED],
        "pauses": tally[EventKind.WORKER_PAUSED],
        "acks_lost": tally[EventKind.ACK_LOST],
        "unknown_outcomes": tally[EventKind.EFFECT_UNKNOWN],
        "duplicate_deliveries": tally[EventKind.DELIVERED_TWICE],
        "leases_lost": tally[EventKind.LEASE_LOST],
        "sends_deduped": tally[EventKind.CONTACT_DEDUPED],
        "throttled": tally[EventKind.THROTTLED],
    }


def _flat(name: str, summary: Summary) -> dict[str, Any]:
    return {
        f"{name}_count": summary.count,
        f"{name}_p50": _round(summary.p50),
        f"{name}_p95": _round(summary.p95),
        f"{name}_max": _round(summary.max),
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}".removesuffix(".0")


def _approvals(m: Mapping[str, Any]) -> str:
    count = m["approval_wait_count"]
    if not count:
        return "none done"
    return f"{count} done, p95 {_num(m['approval_wait_p95'])} s from arrival to done"
