"""What a run amounts to: counts a learner can check at a glance, metrics read back from
the event log, the checker's verdict, and the seed with a one-line replay, so any
surprising run can be brought back exactly."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

from shopops_lab.backpressure import describe_policy
from shopops_lab.events import EventKind, EventLog
from shopops_lab.metrics import QueueMetrics, Summary, queue_metrics
from shopops_lab.states import ItemState
from shopops_lab.worker.queue import Priority

if TYPE_CHECKING:
    from shopops_lab.sim.engine import Simulation

__all__ = ["Report", "build_report", "log_metrics"]


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
    valid: bool | None
    anomalies: tuple[Any, ...]
    checker_summary: str
    replay: str
    python_replay: str
    log: EventLog = field(repr=False, compare=False)
    check: Any = field(default=None, repr=False, compare=False)      # the checker's CheckResult
    queue: QueueMetrics | None = field(default=None, repr=False, compare=False)

    def as_dict(self, *, events: bool = False) -> dict[str, Any]:
        """A JSON-ready dict; `events=True` adds the whole event log (`EventLog.from_dicts`
        reads it back, so the checker can judge it again)."""
        row: dict[str, Any] = {
            "scenario": self.scenario, "seed": self.seed, "adapter": self.adapter, "policy": self.policy,
            "items": self.items, "done": self.done, "dead_lettered": self.dead_lettered, "lost": self.lost,
            "contacts": self.contacts, "double_contacts": self.double_contacts,
            "redeliveries": self.redeliveries, "sim_time": self.sim_time, "final": self.final,
            "event_count": len(self.log), "metrics": dict(self.metrics), "valid": self.valid,
            "checker": self.checker_summary, "anomalies": [_anomaly_dict(a) for a in self.anomalies],
            "replay": self.replay, "python_replay": self.python_replay,
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
        counts: dict[str, int] = {}
        for anomaly in self.anomalies:
            name = str(getattr(anomaly, "name", "anomaly"))
            counts[name] = counts.get(name, 0) + 1
        lines.extend(f"    {name} x{n}" for name, n in sorted(counts.items()))
        lines.append(f"  replay: {self.replay}")
        lines.append(f"  python: {self.python_replay}")
        return "\n".join(lines)


def build_report(sim: Simulation) -> Report:
    counts = sim.queue.counts()
    done, dead = counts[ItemState.DONE], counts[ItemState.DEAD]
    final = sim.done
    check = _judge(sim, final)
    queue = queue_metrics(sim.log)
    metrics = log_metrics(sim.log, queue)
    return Report(
        scenario=sim.scenario.name, seed=sim.seed, adapter=sim.adapter_name,
        policy=describe_policy(sim.policy), items=sim.items, done=done, dead_lettered=dead,
        lost=sim.items - done - dead, contacts=len(sim.adapter.ledger),
        double_contacts=len(sim.adapter.ledger.duplicates()), redeliveries=metrics["redeliveries"],
        sim_time=round(sim.now, 3), final=final, metrics=MappingProxyType(metrics),
        valid=None if check is None else check.valid,
        anomalies=() if check is None else tuple(check.anomalies),
        checker_summary="checker not available" if check is None else check.summary,
        replay=_cli_replay(sim), python_replay=_python_replay(sim), log=sim.log, check=check,
        queue=queue)


def _judge(sim: Simulation, final: bool) -> Any:
    """The checker's verdict on the log, or None if the checker is not installed."""
    try:
        from shopops_lab.checker import check
    except ModuleNotFoundError as missing:
        if missing.name != "shopops_lab.checker":
            raise
        return None
    return check(sim.log, max_attempts=sim.scenario.max_attempts,
                 approval_wait_budget=sim.scenario.approval_wait_budget, final=final)


# --------------------------------------------------------------------------- metrics

_TALLIED = (EventKind.THROTTLED, EventKind.WORKER_CRASHED, EventKind.WORKER_PAUSED, EventKind.ACK_LOST,
            EventKind.EFFECT_UNKNOWN, EventKind.DELIVERED_TWICE, EventKind.LEASE_LOST,
            EventKind.CONTACT_DEDUPED)


def log_metrics(log: EventLog, queue: QueueMetrics) -> dict[str, Any]:
    """The run's vital signs, read from the log alone: the queue's health (from
    `shopops_lab.metrics`) plus what only a simulation has: how long approvals took from
    arrival to done, how the gateway behaved, and how often each fault struck."""
    enqueued: dict[str, float] = {}   # approval item -> when it arrived
    approval_waits: list[float] = []
    gateway: list[float] = []
    timeouts = redeliveries = 0
    tally = dict.fromkeys(_TALLIED, 0)
    for time, kind, item_id, _case, _worker, _token, attempt, info in log.rows():
        if kind is EventKind.GATEWAY_CALL:
            gateway.append(info["seconds"])
            timeouts += bool(info.get("timed_out"))
        elif kind is EventKind.LEASED:
            redeliveries += attempt is not None and attempt > 1
        elif kind is EventKind.ENQUEUED:
            if info.get("priority") == Priority.APPROVAL:
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
    return {f"{name}_count": summary.count, f"{name}_p50": _round(summary.p50),
            f"{name}_p95": _round(summary.p95), f"{name}_max": _round(summary.max)}


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}".removesuffix(".0")


def _approvals(m: Mapping[str, Any]) -> str:
    count = m["approval_wait_count"]
    if not count:
        return "none done"
    return f"{count} done, p95 {_num(m['approval_wait_p95'])} s from arrival to done"


# --------------------------------------------------------------------------- replay lines

def _cli_replay(sim: Simulation) -> str:
    from shopops_lab.sim.scenarios import SCENARIOS

    sc = sim.scenario
    parts = ["shopops-lab simulate", sc.name, f"--seed {sim.seed}"]
    if sim.items != sc.items:
        parts.append(f"--items {sim.items}")
    if sim.worker_count != sc.workers:
        parts.append(f"--workers {sim.worker_count}")
    parts.append(f"--adapter {sim.adapter_name}")
    line = " ".join(parts)
    extra = [what for what, custom in (("scenario", SCENARIOS.get(sc.name) != sc),
                                       ("policy", sim.custom_policy), ("faults", sim.custom_faults)) if custom]
    if extra:
        line += f"  # the {' and '.join(extra)} came from Python: use the python line"
    return line


def _python_replay(sim: Simulation) -> str:
    from shopops_lab.sim.scenarios import SCENARIOS

    sc = sim.scenario
    target = repr(sc.name) if SCENARIOS.get(sc.name) == sc else "scenario"
    args = [target, f"seed={sim.seed}"]
    if sim.items != sc.items:
        args.append(f"items={sim.items}")
    if sim.worker_count != sc.workers:
        args.append(f"workers={sim.worker_count}")
    if sim.adapter_name != "idempotent":
        args.append(f"adapter={sim.adapter_name!r}")
    if sim.custom_policy:
        args.append(f"policy={describe_policy(sim.policy)}")
    if sim.custom_faults:
        args.append(f"faults=[{', '.join(repr(f) for f in sim.faults)}]")
    line = f"from shopops_lab.sim import run; run({', '.join(args)})"
    if target == "scenario":
        line += f"  # scenario: your Scenario(name={sc.name!r}, ...)"
    return line


def _anomaly_dict(anomaly: Any) -> dict[str, Any]:
    as_dict = getattr(anomaly, "as_dict", None)
    if callable(as_dict):
        return as_dict()
    return {"name": str(getattr(anomaly, "name", "anomaly")), "message": str(getattr(anomaly, "message", anomaly))}
