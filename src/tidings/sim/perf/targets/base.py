"""The interface every broker adapter implements, and the error for an unreachable peer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol
from urllib.parse import urlsplit

from tidings.errors import ErrorCode, TidingsError
from tidings.sim.perf.traffic import Workload

# consumer index, body, receive time (time.time_ns)
Deliver = Callable[[int, bytes | str, int], None]


class Target(Protocol):
    """A broker under load. `filters` says whether it can route by content itself; `closed`
    counts the consumer streams the broker closed (the consumer opened them again)."""

    name: str
    url: str
    filters: bool
    closed: int

    def __init__(self, url: str | None, workload: Workload) -> None: ...

    async def open(self) -> None:
        """Connect the producers' side; raise `unreachable` when the broker is not there."""

    async def prepare(self, consumer: int, topic: int, wanted: range) -> None:
        """Make the broker keep one consumer's messages on `topic` from now on, without
        consuming them (a durable queue, a subscriber). Targets that filter by content
        subscribe with `wanted` (x in the range); others ignore it."""

    async def subscribe(self, consumer: int, topic: int, wanted: range, deliver: Deliver) -> None:
        """Start one consumer on `topic` (prepared first if it was not); return once the
        broker routes to it."""

    async def publish_batch(
        self, producer: int, topic: int, bodies: list[bytes], xs: list[int]
    ) -> None:
        """Send these messages (one request, or pipelined in one write); with `confirm`,
        return once the broker has every one of them."""

    async def close(self) -> None:
        """Stop the consumers, delete what the run created, disconnect."""


async def probe(name: str, url: str, default_port: int) -> None:
    """Open and close a TCP connection to the URL's host and port, or raise `unreachable`."""
    parts = urlsplit(url)
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(parts.hostname or "127.0.0.1", parts.port or default_port), 3
        )
    except (OSError, TimeoutError) as exc:
        raise unreachable(name, url, exc) from None
    writer.close()
    await writer.wait_closed()


async def stop_tasks(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel a target's consumer tasks and wait until they are gone."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def unreachable(name: str, url: str, exc: BaseException) -> TidingsError:
    detail = f"cannot reach {name} at {url}: {exc or type(exc).__name__}"
    return TidingsError(ErrorCode.UNAVAILABLE, field="--url", detail=detail)


def refuse(option: str, name: str, why: str) -> TidingsError:
    return TidingsError(ErrorCode.INVALID_FIELD, field=option, detail=f"{name}: {why}")
