"""Pipelined sends confirmed in order: a window of sends completes once the broker has
answered every send up to its last. MQTT's PUBACKs, JetStream's publish acks and Redis's
PUBLISH replies come in the order of the sends (one connection, one stream or queue)."""

from __future__ import annotations

import asyncio
from collections import deque


class OrderedAcks:
    def __init__(self) -> None:
        self.sent = 0
        self.acked = 0
        self._error: Exception | None = None
        self._windows: deque[tuple[int, asyncio.Future[None]]] = deque()

    def reserve(self, count: int) -> asyncio.Future[None]:
        """`count` more sends; the future is done once all of them are answered."""
        self.sent += count
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._windows.append((self.sent, done))
        return done

    def on_acks(self, count: int, error: Exception | None = None) -> None:
        """`count` more answers; with `error`, one of them refused its send: its window fails."""
        self.acked += count
        self._error = self._error or error
        while self._windows and self._windows[0][0] <= self.acked:
            done = self._windows.popleft()[1]
            if self._error is None:
                done.set_result(None)
            else:
                done.set_exception(self._error)
                self._error = None

    def fail(self, error: Exception) -> None:
        """The connection is gone: every window waiting fails."""
        while self._windows:
            done = self._windows.popleft()[1]
            if not done.done():
                done.set_exception(error)
