"""Wake-ups for long-polls and streams: something was enqueued for a subscriber, or the
subscriber was deleted and its streams must close."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator


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


class Revocations:
    """The open streams of each subscriber, told when it is deleted (here or on another
    broker sharing the store) so that none stays open and silent."""

    def __init__(self) -> None:
        self._streams: dict[str, set[asyncio.Event]] = {}

    @contextlib.contextmanager
    def watch(self, subscriber_id: str) -> Iterator[asyncio.Event]:
        """An event set when `subscriber_id` is deleted, for as long as the block runs."""
        event = asyncio.Event()
        streams = self._streams.setdefault(subscriber_id, set())
        streams.add(event)
        try:
            yield event
        finally:
            streams.discard(event)
            if not streams:
                self._streams.pop(subscriber_id, None)

    def streaming(self) -> set[str]:
        """The subscribers with a stream open here."""
        return set(self._streams)

    def open_streams(self, subscriber_id: str | None = None) -> int:
        """Streams open here: of one subscriber, or in all."""
        if subscriber_id is not None:
            return len(self._streams.get(subscriber_id, ()))
        return sum(map(len, self._streams.values()))

    def revoke(self, subscriber_id: str) -> None:
        for event in self._streams.get(subscriber_id, ()):
            event.set()
