"""What the coordinating process and the subscriber processes share: start, stop, counts."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from typing import Any

from tidings.client import TidingsClientError
from tidings.errors import ErrorCode, TidingsError

SPAWN = multiprocessing.get_context("spawn")
POLL_S = 0.05
RECENT = 2048  # deliveries whose latency the live progress reads


class Control:
    """Process-shared flags and counters (they work the same within one process)."""

    def __init__(self) -> None:
        self.stop_flag: Any = SPAWN.Event()
        self.start_value: Any = SPAWN.Value("d", 0.0)
        self.delivered_value: Any = SPAWN.Value("q", 0)
        self.last_value: Any = SPAWN.Value("d", 0.0)
        self.recent: Any = SPAWN.Array("d", RECENT)  # latencies, a ring written in turn

    @property
    def start(self) -> float:
        return float(self.start_value.value)

    def begin(self, at: float) -> None:
        self.start_value.value = at

    def delivered(self, n: int, at: float, latency_s: float = 0.0) -> None:
        with self.delivered_value.get_lock():
            self.recent[self.delivered_value.value % RECENT] = latency_s  # slots 0, 1, ...
            self.delivered_value.value += n
        self.last_value.value = at

    def recent_latencies(self) -> list[float]:
        """The latencies of the last deliveries (up to `RECENT`), for the live progress."""
        count = min(self.delivered_count, RECENT)
        with self.delivered_value.get_lock():
            return list(self.recent[:count])

    @property
    def delivered_count(self) -> int:
        return int(self.delivered_value.value)

    @property
    def last_delivery(self) -> float:
        return float(self.last_value.value)

    def stop(self) -> None:
        self.stop_flag.set()

    @property
    def stopped(self) -> bool:
        return bool(self.stop_flag.is_set())

    async def started(self) -> float:
        while not self.start and not self.stopped:
            await asyncio.sleep(POLL_S)
        return self.start

    async def wait_stop(self) -> None:
        while not self.stopped:
            await asyncio.sleep(POLL_S)

    async def sleep_until(self, at: float) -> bool:
        """Sleep until epoch time `at`; False if stopped first."""
        while not self.stopped:
            left = at - time.time()
            if left <= 0:
                return True
            await asyncio.sleep(min(left, POLL_S * 4))
        return False


def unreachable(url: str, exc: TidingsClientError, how: str) -> TidingsError:
    """One line naming the broker and how it was tried."""
    return TidingsError(ErrorCode.UNAVAILABLE, detail=f"{exc.message} (tried {how})")


async def check_broker(client: Any, url: str) -> None:
    try:
        await client.health()
    except TidingsClientError as exc:
        raise unreachable(url, exc, f"GET {url}/healthz") from None
