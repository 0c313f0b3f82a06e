"""Scenarios as data: how much work arrives, who does it, how the gateway behaves and
what goes wrong. `SCENARIOS` is the registry the `simulate` command reads; add your own
with `SCENARIOS["mine"] = Scenario(...)`, or pass a `Scenario` to `run()` directly.

Every item is one customer case, `O-1001`, `O-1002`, ... in arrival order, and sends
one email whose idempotency key, `O-1001:email:1`, travels in its payload. Three kinds:

| kind              | priority | email step | arrives                                  |
|-------------------|----------|------------|------------------------------------------|
| `intake_build`    | NORMAL   | 1          | all at t=0 (the burst)                   |
| `approval_resume` | APPROVAL | 2          | spread over `approval_spread` seconds    |
| `bulk_outreach`   | BULK     | 3          | all at t=0                               |

`burst_day` runs under the kit's `BackpressurePolicy` unless told otherwise: pass
`policy=NoBackpressure()` to watch every worker pile onto the spiking gateway, or your own.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from shopops_lab import arguments
from shopops_lab.backpressure import BackpressurePolicy
from shopops_lab.checker import APPROVAL_KIND
from shopops_lab.errors import BadArgumentError, UnknownScenarioError
from shopops_lab.latency import LatencyModel
from shopops_lab.sim.faults import Fault, FaultKind, FaultRates
from shopops_lab.worker.queue import Priority

# The largest run the simulator takes: a million items is ten burst days (about 350 MB and
# a few minutes); past that a run exhausts a laptop's memory before it says anything.
MAX_ITEMS = 1_000_000
MAX_WORKERS = 1_000

__all__ = ["KINDS", "SCENARIOS", "Arrival", "Scenario", "get_scenario", "plan_arrivals"]

INTAKE, APPROVAL, BULK = "intake_build", APPROVAL_KIND, "bulk_outreach"
KINDS: dict[str, tuple[Priority, int]] = {  # kind -> (priority, email step in the case)
    INTAKE: (Priority.NORMAL, 1),
    APPROVAL: (Priority.APPROVAL, 2),
    BULK: (Priority.BULK, 3),
}

Arrival = tuple[float, int, str]  # (time, index in the run, kind); case id is O-{1001 + index}


@dataclass(frozen=True, kw_only=True, slots=True)
class Scenario:
    """One run's setting. Times are simulated seconds."""

    name: str
    description: str
    items: int
    workers: int
    approvals: float = 0.0  # share of items that are approval resumes
    bulk: float = 0.0  # share that is bulk outreach; the rest is intake
    approval_spread: float = 0.0  # approvals arrive uniformly over this (scaled with items)
    latency: LatencyModel = LatencyModel(p50=6.0, p99=40.0, max=120.0)
    gateway_capacity: int | None = None  # calls served at full speed (None: unlimited)
    lease_seconds: float = 30.0
    heartbeat_every: float | None = None  # None: a third of the lease
    max_attempts: int = 5
    idle_poll: float = 1.0  # an idle worker's first wait before asking again
    idle_poll_max: float = 8.0  # ... doubling after each empty poll up to this
    parse_seconds: float = 0.5  # how long a handler takes to reject a bad payload
    restart_after: float = 60.0  # a killed worker's restart delay
    pause_seconds: float | None = None  # a paused worker's freeze (None: twice the lease)
    faults: tuple[Fault, ...] = ()
    rates: FaultRates = FaultRates()
    policy: Any = None  # None: NoBackpressure
    checkpoints: bool = True  # write a checkpoint between the send and the ack
    fenced_checkpoints: bool = True  # the checkpoint store refuses stale tokens
    reconcile_unknown: bool = True  # look an unknown send up instead of retrying it
    heartbeat_before_send: bool = False  # confirm the lease right before the side effect
    approval_wait_budget: float = 300.0  # what the checker allows an approval to wait
    horizon: float = 24 * 3600.0  # the run stops here even if work is left (scaled up with items)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise BadArgumentError(field="name", problem=f"is {self.name!r}", fix="name the scenario, e.g. 'burst_day'")
        arguments.whole("items", self.items, most=MAX_ITEMS)
        arguments.whole("workers", self.workers, most=MAX_WORKERS)
        arguments.whole("max_attempts", self.max_attempts)
        shares = (self.approvals, self.bulk)
        if any(not arguments.is_number(x) or not 0 <= x <= 1 for x in shares) or sum(shares) > 1:
            raise BadArgumentError(
                field="approvals",
                problem=f"is {self.approvals!r} with bulk={self.bulk!r}",
                fix="use shares between 0 and 1 that add up to at most 1",
            )
        for name in ("lease_seconds", "idle_poll", "idle_poll_max", "parse_seconds", "approval_wait_budget", "horizon"):
            arguments.seconds(name, getattr(self, name))
        for name in ("heartbeat_every", "pause_seconds"):
            if getattr(self, name) is not None:
                arguments.seconds(name, getattr(self, name))
        if not (isinstance(self.approval_spread, (int, float)) and 0 <= self.approval_spread < math.inf):
            raise BadArgumentError(
                field="approval_spread",
                problem=f"is {self.approval_spread!r}",
                fix="pass seconds >= 0 over which approvals arrive",
            )
        if not (isinstance(self.restart_after, (int, float)) and self.restart_after > 0):
            raise BadArgumentError(
                field="restart_after",
                problem=f"is {self.restart_after!r}",
                fix="pass seconds > 0 (math.inf: killed workers stay down)",
            )
        if self.idle_poll_max < self.idle_poll:
            raise BadArgumentError(
                field="idle_poll_max",
                problem=f"is {self.idle_poll_max!r}, below idle_poll={self.idle_poll!r}",
                fix="keep idle_poll <= idle_poll_max",
            )
        if self.gateway_capacity is not None:
            arguments.whole("gateway_capacity", self.gateway_capacity)
        if not isinstance(self.faults, tuple) or not all(isinstance(f, Fault) for f in self.faults):
            raise BadArgumentError(field="faults", problem=f"is {self.faults!r}", fix="pass a tuple of Fault(...)")
        if not isinstance(self.rates, FaultRates):
            raise BadArgumentError(field="rates", problem=f"is {self.rates!r}", fix="pass FaultRates(...)")

    @property
    def heartbeat_interval(self) -> float:
        return self.lease_seconds / 3 if self.heartbeat_every is None else self.heartbeat_every

    @property
    def pause_length(self) -> float:
        return 2 * self.lease_seconds if self.pause_seconds is None else self.pause_seconds


def plan_arrivals(scenario: Scenario, items: int, rng: random.Random) -> list[Arrival]:
    """Every item's arrival time and kind, in arrival order, drawn from `rng`."""
    approvals, bulk = scenario.approvals, scenario.bulk
    spread = scenario.approval_spread * items / scenario.items
    mixed = approvals > 0 or bulk > 0
    draw, uniform = rng.random, rng.uniform
    arrivals: list[Arrival] = []
    for index in range(items):
        u = draw() if mixed else 1.0
        if u < approvals:
            arrivals.append((uniform(0.0, spread) if spread else 0.0, index, APPROVAL))
        elif u < approvals + bulk:
            arrivals.append((0.0, index, BULK))
        else:
            arrivals.append((0.0, index, INTAKE))
    arrivals.sort()
    return arrivals


def get_scenario(scenario: str | Scenario) -> Scenario:
    """The scenario itself, or the registered one of that name."""
    if isinstance(scenario, Scenario):
        return scenario
    found = SCENARIOS.get(scenario) if isinstance(scenario, str) else None
    if found is None:
        raise UnknownScenarioError(name=scenario, known=", ".join(sorted(SCENARIOS)))
    return found


SCENARIOS: dict[str, Scenario] = {
    "burst_day": Scenario(
        name="burst_day",
        description=(
            "10,000 order exceptions at once for 20 workers: intake, bulk outreach and a "
            "trickle of approval resumes, while workers crash, stall and lose acks, "
            "the gateway spikes, and a few poison payloads arrive"
        ),
        items=10_000,
        workers=20,
        approvals=0.05,
        bulk=0.40,
        approval_spread=3600.0,
        gateway_capacity=10,
        faults=(Fault(FaultKind.GATEWAY_SPIKE, at=900.0, duration=900.0, factor=4.0),),
        rates=FaultRates(
            kill_worker=0.002, pause_worker=0.001, lose_ack=0.002, drop_reply=0.002, deliver_twice=0.001, poison=0.0005
        ),
        policy=BackpressurePolicy(p95_budget=40.0, p95_hard=60.0, max_in_flight=10),
        horizon=6 * 3600.0,  # about twice what a sound policy needs: a starving one runs out of day
    ),
    "forced_expiry": Scenario(
        name="forced_expiry",
        description=(
            "W1 emails case O-1001 and dies before its ack; the lease expires and W2 "
            "handles the case again. The idempotency key keeps it to one email"
        ),
        items=3,
        workers=2,
        faults=(Fault(FaultKind.KILL_WORKER, item="O-1001", duration=120.0),),
    ),
    "poison": Scenario(
        name="poison",
        description=(
            "case O-1003 carries a payload with a bad schema: it fails on every "
            "delivery and lands in the dead-letter queue after max_attempts"
        ),
        items=6,
        workers=2,
        faults=(Fault(FaultKind.POISON, item="O-1003"),),
    ),
    "stale_worker": Scenario(
        name="stale_worker",
        description=(
            "W1 freezes for 90 s just before emailing O-1001, past its 30 s lease; W2 "
            "takes the case with a newer token. W1 wakes up stale: its send is deduped "
            "and its checkpoint refused by fencing"
        ),
        items=3,
        workers=2,
        faults=(Fault(FaultKind.PAUSE_WORKER, item="O-1001", duration=90.0),),
    ),
}
