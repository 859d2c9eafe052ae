"""Deliveries into the subscribers' queues through `Store.enqueue`.

Idempotent by (publication, subscriber): the dedup key is the publication id, as the
broker's own, so a micro-batch run again after a restart, a replay, or a publication the
broker already delivered adds nothing twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from tidings.store.base import NewMessage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class Enqueuer(Protocol):
    def enqueue(self, messages: Sequence[NewMessage], fresh: bool = False) -> int: ...


def messages_of(rows: Iterable[Any], now: float, bodies: dict[str, Any]) -> list[NewMessage]:
    """Delivery rows (publication_id, subscriber_id, subscription_ids, line) as messages.
    The deliveries of one publication share one body, the publication's logged line as it
    is (encoded JSON, as the broker queues it); a row without a line is a publication whose
    body an earlier row brought."""
    out = []
    for row in rows:
        pid = row["publication_id"]
        body = bodies.get(pid)
        if body is None:
            line = row["line"]
            body = bodies[pid] = line.encode() if isinstance(line, str) else bytes(line)
        out.append(
            NewMessage(row["subscriber_id"], pid, pid, tuple(row["subscription_ids"]), body, now)
        )
    return out


class QueueSink:
    """Writes a deliveries frame into the store in chunks of one transaction each."""

    def __init__(
        self, store: Enqueuer, clock: Callable[[], float] = time.time, chunk: int = 5000
    ) -> None:
        self.store = store
        self.clock = clock
        self.chunk = chunk
        self._bodies: dict[str, Any] = {}

    def write(self, deliveries: DataFrame) -> int:
        """Enqueue every row; returns how many messages were new."""
        return self.write_rows(deliveries.toLocalIterator(prefetchPartitions=True))

    def write_rows(self, rows: Iterable[Any]) -> int:
        added, pending = 0, []
        self._bodies = {}  # per write: a publication's body arrives with its first row
        for row in rows:
            pending.append(row)
            if len(pending) >= self.chunk:
                added += self.enqueue(pending)
                pending = []
        return added + (self.enqueue(pending) if pending else 0)

    def enqueue(self, rows: list[Any]) -> int:
        return self.store.enqueue(messages_of(rows, self.clock(), self._bodies))
