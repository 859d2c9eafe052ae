"""Wake-ups for long-polls and streams when something is enqueued for a subscriber."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


class Signals:
    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}

    def notify(self, subscriber_ids: Iterable[str]) -> None:
        for sid in subscriber_ids:
            event = self._events.pop(sid, None)
            if event is not None:
                event.set()

    async def wait(self, subscriber_id: str, timeout: float) -> None:
        """Return when notified for this subscriber, or after `timeout` seconds."""
        event = self._events.setdefault(subscriber_id, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)
