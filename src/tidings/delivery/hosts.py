"""What all of a broker's webhooks may send one target host: a byte budget per second, shared
by every subscriber whose endpoint is on that host. Without it, 200 subscribers with
webhooks to one URL turned one 100 KiB publication into 20.5 MB at the target within a
second: the broker as an amplifier. A request waits for its bytes (one larger than the burst
waits for the whole burst), so the target gets everything, at the budget's pace."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit


class HostBudgets:
    def __init__(
        self,
        bytes_per_s: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.rate, self.burst = bytes_per_s, bytes_per_s  # a second's worth at once
        self.clock, self.sleep = clock, sleep
        self._buckets: dict[str, tuple[float, float]] = {}  # host -> (tokens, at)
        self._locks: dict[str, asyncio.Lock] = {}

    async def spend(self, url: str, size: int) -> None:
        """Wait until `size` bytes may go to `url`'s host, then spend them (0: no budget)."""
        if self.rate <= 0:
            return
        host = _host(url)
        lock = self._locks.setdefault(host, asyncio.Lock())
        async with lock:  # one request at a time takes from a host's bucket, in turn
            need = min(float(size), self.burst)
            while True:
                tokens, at = self._buckets.get(host, (self.burst, self.clock()))
                now = self.clock()
                tokens = min(self.burst, tokens + (now - at) * self.rate)
                if tokens >= need:
                    self._buckets[host] = (tokens - need, now)
                    return
                self._buckets[host] = (tokens, now)
                await self.sleep((need - tokens) / self.rate)


def _host(url: str) -> str:
    parts = urlsplit(url)
    return (
        f"{(parts.hostname or '').lower()}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    )
