"""One webhook endpoint's delivery: POST a leased batch whenever fewer than `concurrency`
requests are in flight, signed; acknowledge it on a 2xx and hand it back with exponential
backoff and full jitter otherwise, up to `backoff_cap_s` (10 minutes by default), for as long
as the message's retention (the endpoint's `retention_s`, by default the queues'): a webhook
message is never dead-lettered for its attempts, only once it is older than that (reason
`retention`), as Pub/Sub's push retry policy. After `failures_to_pause` consecutive failed
requests the endpoint is paused (its state and reason recorded, for `GET .../webhook`): one
request at a time then probes it, spaced by the same backoff, and the first that succeeds
resumes it. When a request succeeds after an outage (`OUTAGE` consecutive failed requests
or more, paused or not), the messages still waiting out their backoff are made ready at
once, so everything the endpoint missed is delivered without anyone's help.

Flow control is the push stream's (`tidings.delivery.stream.PushStream`, as the WebSocket's):
at most `concurrency` batches of `batch_size` are leased at once, the rest waits in the durable
queue, and whatever is leased when the pusher stops (paused, deleted, shut down) is released
at once. Batches are leased for longer than a request may take.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tidings import __version__
from tidings.addresses import Own, deny_list
from tidings.config import WebhookSettings
from tidings.delivery.frames import messages_answer
from tidings.delivery.hosts import HostBudgets
from tidings.delivery.queue import SizedQueue
from tidings.delivery.sealing import Sealer
from tidings.delivery.signals import Revocations
from tidings.delivery.signature import HEADER, sign
from tidings.delivery.stream import PushStream
from tidings.http1 import Client
from tidings.metrics import Metrics
from tidings.store.asyncstore import AsyncStore
from tidings.store.base import AckResult, Endpoint, Message

log = logging.getLogger("tidings.webhooks")
USER_AGENT = f"Tidings-Webhooks/{__version__}"


def backoff_s(attempt: int, base_s: float, cap_s: float, rng: random.Random) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2^(attempt - 1))]."""
    return rng.uniform(0.0, min(cap_s, base_s * 2.0 ** min(max(attempt - 1, 0), 60)))


NO_ATTEMPT_LIMIT = 2**62  # a webhook's lease never dead-letters for attempts
# consecutive failed requests that make an outage: when one ends, the messages waiting out a
# backoff are made ready at once (fewer may be one bad batch, which keeps its backoff)
OUTAGE = 3


@dataclass(frozen=True, slots=True)
class PostOutcome:
    kind: Literal["ok", "status", "error"]  # a 2xx; another answer; no answer
    detail: str = ""


class WebhookBatches:
    """A queue as a push stream sees it, leasing webhook-sized batches for `visibility_s`."""

    def __init__(self, queue: SizedQueue, batch_size: int, visibility_s: float) -> None:
        self.queue, self.batch_size, self.visibility_s = queue, batch_size, visibility_s

    async def pull(
        self,
        subscriber_id: str,
        max_messages: int,
        wait_s: float,
        visibility_s: float | None = None,
        max_bytes: int | None = None,
        *,
        max_attempts: int | None = None,
        quick: bool = False,
    ) -> list[Message]:
        """A batch of at most `batch_size` messages whose bodies come to at most `max_bytes`
        (one larger message goes alone): a POST never carries a hundred large messages."""
        wanted = min(max_messages, self.batch_size)
        return await self.queue.pull(
            subscriber_id,
            wanted,
            wait_s,
            self.visibility_s,
            max_bytes,
            max_attempts=NO_ATTEMPT_LIMIT,
            quick=quick,
        )

    async def ack(self, subscriber_id: str, receipts: Sequence[str]) -> AckResult:
        return await self.queue.ack(subscriber_id, receipts)

    async def nack(
        self, subscriber_id: str, receipts: Sequence[str], delay_s: float = 0.0
    ) -> AckResult:
        return await self.queue.nack(subscriber_id, receipts, delay_s)

    async def release(self, subscriber_id: str, receipts: Sequence[str]) -> AckResult:
        return await self.queue.release(subscriber_id, receipts)

    async def reject(self, subscriber_id: str, message: Message, reason: str) -> None:
        await self.queue.reject(subscriber_id, message, reason)

    async def hasten(self, subscriber_id: str) -> int:
        return await self.queue.hasten(subscriber_id)


@dataclass(frozen=True, slots=True)
class Outlet:
    """What webhooks need of the layers around them: the queues, the endpoints' records,
    the subscribers' deletions, metrics and the clock; never the broker itself."""

    queue: SizedQueue
    store: AsyncStore
    revocations: Revocations
    metrics: Metrics
    clock: Callable[[], float]
    settings: WebhookSettings
    visibility_timeout_s: float  # the queues' own: a webhook's lease is never shorter
    retention_s: float  # the queues' own: an endpoint's retention is never longer
    hosts: HostBudgets = field(default_factory=lambda: HostBudgets(0))  # shared by all
    own: Own | None = None  # the broker's own endpoint: never a webhook's target
    sealer: Sealer | None = None  # seals secrets at rest; None: kept as they are (tests)

    def retention_of(self, endpoint: Endpoint) -> float:
        """How long the endpoint's messages are retried from their enqueueing."""
        if endpoint.retention_s is None:
            return self.retention_s
        return min(endpoint.retention_s, self.retention_s)


class Pusher:
    def __init__(
        self,
        outlet: Outlet,
        endpoint: Endpoint,
        rng: random.Random,
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.outlet, self.endpoint, self.rng = outlet, endpoint, rng
        self.settings = settings = outlet.settings
        self.changed = changed  # told before each state write (a concurrent read is stale)
        self.sid = endpoint.subscriber_id
        self.failures = endpoint.failures  # consecutive, across restarts
        self.paused = endpoint.state == "paused"  # probing, one request at a time
        self.retention_s = outlet.retention_of(endpoint)
        self._recording = asyncio.Lock()  # state writes land in the order they were made
        self._gate = asyncio.Semaphore(settings.concurrency)  # requests in flight
        self._http = Client(
            settings.concurrency,
            settings.timeout_s,
            deny=deny_list(
                settings.deny_networks, settings.deny_default_networks, settings.allow_networks
            ),
            own=outlet.own,
        )
        # leased for longer than a request may take, so no batch comes back while in flight
        visibility_s = max(outlet.visibility_timeout_s, 3 * settings.timeout_s)
        batches = WebhookBatches(outlet.queue, settings.batch_size, visibility_s)
        prefetch = settings.concurrency * settings.batch_size
        self.stream = PushStream.sized_by(batches, self.sid, prefetch, None)

    async def run(self) -> None:
        """Until the subscriber is deleted (here or on another broker) or the pusher is
        cancelled; whatever is still leased is then released at once."""
        with self.outlet.revocations.watch(self.sid) as deleted:
            feeding = asyncio.create_task(self._feed())
            gone = asyncio.create_task(deleted.wait())
            try:
                await asyncio.wait({feeding, gone}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                await _cancel(feeding, gone)
                self._http.close()
                await self.stream.close()  # what is still leased, released at once
            failed = None if feeding.cancelled() else feeding.exception()
            if failed is not None:
                raise failed

    async def _feed(self) -> None:
        async with asyncio.TaskGroup() as posts:
            while True:
                await self._gate.acquire()
                batch = await self._next_batch()
                if self.paused:  # a probe: alone, and the next one after a backoff
                    await self._deliver(batch)
                else:
                    posts.create_task(self._deliver(batch))
                if self.failures:  # a failing endpoint is not hammered
                    await asyncio.sleep(self._backoff(self.failures))

    async def _next_batch(self) -> list[Message]:
        try:
            return await self.stream.next_batch()
        except BaseException:
            self._gate.release()
            raise

    async def _deliver(self, batch: list[Message]) -> None:
        try:
            attempt = max(m.attempt for m in batch)
            outcome = await self._post(batch, attempt)
            await self._settle(batch, outcome, attempt)
        finally:
            self._gate.release()

    async def _post(self, batch: list[Message], attempt: int) -> PostOutcome:
        body = messages_answer(batch)  # a pull's answer: {"messages": [...]}, bodies as stored
        await self.outlet.hosts.spend(self.endpoint.url, len(body))  # the host's budget
        try:
            answer = await self._http.post(self.endpoint.url, body, self._headers(body, attempt))
        except Exception as exc:  # the endpoint's fault (refused, timed out, garbled): a failure
            said = f": {exc}" if str(exc) else ""
            return PostOutcome("error", f"{type(exc).__name__}{said}"[:300])
        if 200 <= answer.status < 300:
            return PostOutcome("ok")
        return PostOutcome("status", f"HTTP {answer.status}")

    def _headers(self, body: bytes, attempt: int) -> dict[str, str]:
        return {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            HEADER: sign(self.endpoint.secret, body, int(self.outlet.clock())),
            "Tidings-Subscriber": self.sid,
            "Tidings-Delivery-Attempt": str(attempt),
        }

    async def _settle(self, batch: list[Message], outcome: PostOutcome, attempt: int) -> None:
        self.outlet.metrics.inc("webhook_requests", outcome=outcome.kind)
        receipts = [m.receipt for m in batch]
        if outcome.kind == "ok":
            await self.outlet.queue.ack(self.sid, receipts)
            self.stream.release(receipts)
            await self._succeeded()
            return
        await self._retry_or_expire(batch, attempt)
        self.stream.release(receipts)
        await self._failed(outcome.detail)

    async def _retry_or_expire(self, batch: list[Message], attempt: int) -> None:
        """Hand the batch back after a backoff, but dead-letter (reason `retention`) each
        message older than the endpoint's retention: it has been retried long enough."""
        oldest = self.outlet.clock() - self.retention_s
        expired = [m for m in batch if m.enqueued_at <= oldest]
        for message in expired:
            await self.outlet.queue.reject(self.sid, message, "retention")
        retried = [m.receipt for m in batch if m.enqueued_at > oldest]
        if retried:
            await self.outlet.queue.nack(self.sid, retried, delay_s=self._backoff(attempt))

    async def _succeeded(self) -> None:
        if not self.failures and not self.paused:
            return
        resumed, outage = self.paused, self.failures >= OUTAGE
        self.failures, self.paused = 0, False
        await self._record("active", None)
        if not outage:  # a batch failing alone (one bad message?) keeps its backoff
            return
        # the endpoint answers again: what it missed need not wait out its backoff
        hastened = await self.outlet.queue.hasten(self.sid)
        if resumed:
            log.warning(
                "webhook of subscriber %s answers again: resumed, %d messages ready at once",
                self.sid,
                hastened,
            )

    async def _failed(self, detail: str) -> None:
        self.failures += 1
        if self.failures < self.settings.failures_to_pause and not self.paused:
            await self._record("active", detail)
            return
        if not self.paused:  # counted once, though several requests fail together
            self.outlet.metrics.inc("webhook_pauses")
        self.paused = True
        reason = (
            f"{self.failures} consecutive failed requests; the last: {detail}; "
            f"probed one request at a time, at most every {self.settings.backoff_cap_s:g} s"
        )
        if self.failures == self.settings.failures_to_pause:
            log.warning("webhook of subscriber %s paused: %s", self.sid, reason)
        await self._record("paused", reason)

    async def _record(self, state: Literal["active", "paused"], reason: str | None) -> None:
        failures, now = self.failures, self.outlet.clock()
        self.changed()
        async with self._recording:
            await self.outlet.store.set_endpoint_state(self.sid, state, reason, failures, now)

    def _backoff(self, attempt: int) -> float:
        s = self.settings
        return backoff_s(attempt, s.backoff_base_s, s.backoff_cap_s, self.rng)


async def _cancel(*tasks: asyncio.Task[Any]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
