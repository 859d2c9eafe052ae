"""Token buckets by key (a client's address): `rate` per second, at most `burst` at once.
Bounded: the least recently used keys are forgotten first (a forgotten key starts full)."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable


class TokenBuckets:
    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float], max_keys: int = 100_000
    ) -> None:
        self.rate, self.burst, self.clock, self.max_keys = rate, burst, clock, max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at

    def take(self, key: str) -> float:
        """Take one token for `key`: 0.0 when there was one, else the seconds until one."""
        now = self.clock()
        tokens, at = self._buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        wait = 0.0 if tokens >= 1 else (1 - tokens) / self.rate
        self._buckets[key] = (tokens - 1 if tokens >= 1 else tokens, now)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return math.ceil(wait * 1000) / 1000 if wait else 0.0
