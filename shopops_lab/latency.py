"""How long a model call takes: a log-normal fitted to a median and a 99th percentile,
cut off at a hard timeout. Heavy tails are the point: a TTL sized for the median
expires under the tail, which is why lab 03 exists."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from statistics import NormalDist

from shopops_lab import arguments
from shopops_lab.errors import BadArgumentError

_Z99 = NormalDist().inv_cdf(0.99)


@dataclass(frozen=True, kw_only=True, slots=True)
class LatencyModel:
    """Model-call latency in seconds: median `p50`, 99th percentile `p99`, never above `max`."""

    p50: float = 8.0
    p99: float = 90.0
    max: float = 120.0

    def __post_init__(self) -> None:
        for field in ("p50", "p99", "max"):
            arguments.number(field, getattr(self, field), "pass a positive number of seconds", above=0, below=math.inf)
        if not self.p50 < self.p99 <= self.max:
            raise BadArgumentError(
                field="p99",
                problem=f"is {self.p99:g} with p50={self.p50:g} and max={self.max:g}",
                fix="keep p50 < p99 <= max",
            )

    @property
    def sigma(self) -> float:
        return math.log(self.p99 / self.p50) / _Z99

    def sample(self, rng: random.Random) -> float:
        """One call's latency, drawn from `rng` (the run's only source of randomness)."""
        if not isinstance(rng, random.Random):
            arguments.instance("rng", rng, random.Random, "pass the run's random.Random, e.g. random.Random(7)")
        return min(self.max, rng.lognormvariate(math.log(self.p50), self.sigma))

    def quantile(self, q: float) -> float:
        """The latency below which a fraction `q` of calls finish (capped at `max`)."""
        arguments.number("q", q, "pass a fraction between 0 and 1, e.g. 0.95", above=0, below=1)
        return min(self.max, self.p50 * math.exp(self.sigma * NormalDist().inv_cdf(q)))

    def exceed_probability(self, seconds: float) -> float:
        """The chance that one call takes longer than `seconds`."""
        arguments.number("seconds", seconds, "pass a number of seconds, e.g. 60")
        if seconds >= self.max:
            return 0.0
        if seconds <= 0:
            return 1.0
        return 1.0 - NormalDist(math.log(self.p50), self.sigma).cdf(math.log(seconds))

    def scaled(self, factor: float) -> LatencyModel:
        """The same shape, `factor` times slower (a saturated gateway); the cap stays."""
        fix = "pass how many times slower, a positive number, e.g. 3"
        if not arguments.finite("factor", factor, fix) > 0:
            raise BadArgumentError(field="factor", problem=f"is {factor!r}", fix=fix)
        p50 = min(self.p50 * factor, self.max * 0.5)
        return LatencyModel(p50=p50, p99=max(min(self.p99 * factor, self.max), p50 * 1.01), max=self.max)
