"""Warnings an operator should not have to go looking for."""

from __future__ import annotations

import logging

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
