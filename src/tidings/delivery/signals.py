"""Wake-ups for long-polls and streams: something was enqueued for a subscriber, or the
subscriber was deleted and its streams must close."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator


class Signals:
    """Each waiter is a future of its own, woken by `notify` or by its timer: not an
    `asyncio.Event` awaited through `asyncio.wait_for`, which made a task, a timer and a
    waiter for every wait, and a push stream waits once a frame."""

    def __init__(self) -> None:
        self._waiting: dict[str, list[asyncio.Future[None]]] = {}

    def notify(self, subscriber_ids: Iterable[str]) -> None:
        for sid in subscriber_ids:
            for waiter in self._waiting.pop(sid, ()):
                _wake(waiter)

    async def wait(self, subscriber_id: str, timeout: float) -> None:
        """Return when notified for this subscriber, or after `timeout` seconds."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiting.setdefault(subscriber_id, []).append(waiter)
        timer = loop.call_later(timeout, _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            waiters = self._waiting.get(subscriber_id)
            if waiters is not None and waiter in waiters:  # not notified: its time ran out
                waiters.remove(waiter)
                if not waiters:
                    del self._waiting[subscriber_id]

    def waiting(self) -> int:
        """Waiters not yet woken (their subscribers' lists are dropped with the last)."""
        return sum(map(len, self._waiting.values()))


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


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
