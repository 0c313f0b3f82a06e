"""How long a store keeps trying when its database is away for a moment: a server restarting,
a file another process holds locked, a disk that failed one read.

One rule for every wait: capped exponential backoff (0.05 s, 0.1 s, 0.2 s, ... at most 2 s
between tries) until `seconds` have passed since the first failure; then the last error is
the caller's. No jitter: the waits are the same on every run (a class's eight workers
reconnecting together cost the server eight connections, not a storm). The clock and the
sleep are injected, so a test moves time itself and never waits on the wall clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["Patience"]


@dataclass(frozen=True, slots=True)
class Patience:
    """The waits between tries, and how long to keep trying (`seconds`)."""

    seconds: float = 60.0
    first: float = 0.05
    cap: float = 2.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    def tries(self) -> Iterator[float]:
        """Sleeps before each further try and yields how long it slept; ends when the next
        wait would pass `seconds` (then give up: raise what failed)."""
        start, delay = self.clock(), self.first
        while self.clock() - start + delay <= self.seconds:
            self.sleep(delay)
            yield delay
            delay = min(delay * 2, self.cap)
