"""Warnings an operator should not have to go looking for."""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from tidings.errors import ErrorCode, TidingsError

log = logging.getLogger("tidings.broker")
DEAD_LETTER_BURST = 10  # dead letters since the last look worth a warning


class DeadLetterAlarm:
    """A warning when dead letters grew by a burst since the last look (a poison message, a
    subscriber that never acknowledges); the first look only counts."""

    def __init__(self, burst: int = DEAD_LETTER_BURST) -> None:
        self.burst = burst
        self._seen: int | None = None

    def look(self, dead: int) -> bool:
        """Look at the count of dead letters; True when it warned."""
        grew = self._seen is not None and dead - self._seen >= self.burst
        if grew:
            log.warning(
                "%d messages were dead-lettered in the last minute (%d in all); "
                "GET /v1/admin/overview or a subscriber's dead-letters say whose",
                dead - (self._seen or 0),
                dead,
            )
        self._seen = dead
        return grew


class DiskAlarm:
    """Publishing stops while the data directory's disk has less than `min_free` bytes free
    (as RabbitMQ's disk alarm): a full disk would fail every commit, acknowledgements
    included. Looked at most every `every_s`; subscribers keep draining meanwhile."""

    def __init__(self, directory: Path, min_free: int, every_s: float = 0.5) -> None:
        self.directory, self.min_free, self.every_s = directory, min_free, every_s
        self._looked, self._free = -every_s, min_free

    def check(self) -> None:
        now = time.monotonic()
        if now - self._looked >= self.every_s:
            self._looked, was = now, self._free
            self._free = _free_bytes(self.directory)
            if self._free < self.min_free <= was:
                log.warning(
                    "disk alarm: %d bytes free under %s: publishing refused",
                    self._free,
                    self.directory,
                )
        if self._free < self.min_free:
            raise TidingsError(ErrorCode.INSUFFICIENT_STORAGE, free=self._free)


def _free_bytes(directory: Path) -> int:
    path = directory
    while not path.exists() and path != path.parent:  # not made yet: its nearest parent
        path = path.parent
    return shutil.disk_usage(path).free
