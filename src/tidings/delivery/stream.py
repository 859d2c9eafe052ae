"""Push delivery's flow control, for every channel that pushes (WebSocket, webhooks).

A push stream leases a subscriber's messages in batches while fewer than `prefetch` are
unacknowledged, so a slow subscriber holds the broker to a bounded amount of work and
memory (the rest waits in its durable queue). Acknowledgements are committed beside the
reader, never in its way: a channel that stops reading while a commit runs stops answering
its keep-alive pings and is dropped, and its messages would be delivered twice. At close,
the acknowledgements already read are committed first, then whatever is still
unacknowledged is released for redelivery at once (not after its visibility timeout).

Unacknowledged messages are bounded by bytes too (`inflight_bytes`, the WebSocket stream's:
`queues.stream_inflight_bytes`; one larger message goes alone): a client that stops reading
held `prefetch` messages of any size each in the broker's memory (1.7 MiB a stream for
messages of 10 KB; up to 10,000 of 256 KiB with the prefetch a client may ask for).

A batch is bounded by bytes as well as by count (`frames.batch_bytes`: never more than the
channel's client reads; one larger message goes alone), and the count asked for follows
the size of the messages lately leased, so large messages are not read from the store by
the hundred only to be left there.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Literal

from tidings.delivery.frames import batch_bytes
from tidings.delivery.queue import Queue, SizedQueue
from tidings.errors import TidingsError
from tidings.store.base import Message

SETTLING = 64  # acknowledgement commits of one stream running at once, at most
SETTLING_RECEIPTS = 1_000  # and the receipts they hold (or the stream's prefetch, if more)
SETTLE_WAIT_S = 10.0  # at close, for the acknowledgements already read
BATCH = 500  # messages leased at once, at most
POLL_S = 5.0  # a lease waits this long for messages before asking again


class PushStream:
    def __init__(
        self, queue: Queue, subscriber_id: str, prefetch: int, inflight_bytes: int | None = None
    ) -> None:
        self.queue = queue
        self.subscriber_id = subscriber_id
        self.prefetch = prefetch
        self.inflight_bytes = inflight_bytes  # None: by count alone
        self.sized: SizedQueue | None = None
        self.max_bytes = batch_bytes(None)
        self._typical = 0  # bytes of the largest body lately leased
        self.inflight: dict[str, int] = {}  # receipts handed out, not yet settled -> bytes
        self._held = 0  # their bytes
        self._room = asyncio.Event()
        self._settling: set[asyncio.Task[None]] = set()
        self._committing = 0  # receipts in those commits

    @classmethod
    def sized_by(
        cls,
        queue: SizedQueue,
        subscriber_id: str,
        prefetch: int,
        client_max: int | None,
        inflight_bytes: int | None = None,
    ) -> PushStream:
        """A stream whose batches' bodies come to at most `frames.batch_bytes(client_max)`
        (a webhook's batches are its pusher's: a plain `Queue` leases by count)."""
        stream = cls(queue, subscriber_id, prefetch, inflight_bytes)
        stream.sized, stream.max_bytes = queue, batch_bytes(client_max)
        return stream

    def free(self) -> int:
        """Messages that may be leased now: none once `inflight_bytes` are held."""
        if self.inflight_bytes is not None and self.inflight and self._held >= self.inflight_bytes:
            return 0
        return self.prefetch - len(self.inflight)

    def _bytes_room(self) -> int:
        if self.inflight_bytes is None:
            return self.max_bytes
        return max(1, min(self.max_bytes, self.inflight_bytes - self._held))

    async def next_batch(self) -> list[Message]:
        """The next messages to push, once there is room for them (never an empty list)."""
        while True:
            if self.free() <= 0:
                self._room.clear()
                await self._room.wait()
                continue
            batch = await self._lease()
            if batch:
                self._typical = max(len(m.raw) for m in batch)
                for m in batch:
                    self.inflight[m.receipt] = len(m.raw)
                    self._held += len(m.raw)
                return batch

    async def _lease(self) -> list[Message]:
        if self.sized is None:
            return await self.queue.pull(self.subscriber_id, min(self.free(), BATCH), POLL_S)
        return await self.sized.pull(
            self.subscriber_id, self._count(), POLL_S, max_bytes=self._bytes_room(), quick=True
        )

    def _count(self) -> int:
        room = self._bytes_room()
        fits = room // self._typical + 1 if self._typical else BATCH
        return max(1, min(self.free(), BATCH, fits))

    async def settle(self, kind: Literal["ack", "nack"], receipts: list[str]) -> None:
        """Start committing an ack or nack and return; waits only while `SETTLING` commits
        of this stream are already running, or they and this one would hold more than
        `max(prefetch, SETTLING_RECEIPTS)` receipts (a larger one goes alone). A client
        settling what it was handed never waits: it holds at most `prefetch`. One acking
        thousands of receipts it does not hold a frame waits for its commits, as an HTTP
        client waits for its answer: 64 commits of 36,000 receipts at once from one stream
        held /healthz 0.7 s (issue #28)."""
        most = max(self.prefetch, SETTLING_RECEIPTS)
        while self._settling and (
            len(self._settling) >= SETTLING or self._committing + len(receipts) > most
        ):
            await asyncio.wait(self._settling, return_when=asyncio.FIRST_COMPLETED)
        task = asyncio.create_task(self._settle(kind, receipts))
        self._settling.add(task)
        self._committing += len(receipts)
        task.add_done_callback(lambda done: self._settled(done, len(receipts)))

    def _settled(self, task: asyncio.Task[None], receipts: int) -> None:
        self._settling.discard(task)
        self._committing -= receipts

    async def _settle(self, kind: Literal["ack", "nack"], receipts: list[str]) -> None:
        if kind == "ack":
            await self.queue.ack(self.subscriber_id, receipts)
        else:
            await self.queue.nack(self.subscriber_id, receipts)
        self.release(receipts)

    def release(self, receipts: Sequence[str]) -> None:
        """These are no longer in flight (settled, or handed back): room for more."""
        for receipt in receipts:
            self._held -= self.inflight.pop(receipt, 0)
        self._room.set()

    async def close(self) -> None:
        """Commit the acknowledgements already read, then release the unacknowledged (unless
        the queue is refused here now: another broker took it, and what was leased here is
        ready there again)."""
        if self._settling:
            await asyncio.wait(set(self._settling), timeout=SETTLE_WAIT_S)
        if self.inflight:
            with contextlib.suppress(TidingsError):
                await self.queue.release(self.subscriber_id, list(self.inflight))
            self.inflight.clear()
            self._held = 0
