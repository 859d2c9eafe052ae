"""The asyncio client, with the WebSocket push stream that reconnects."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import urlencode

import msgspec
import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from tidings.client import calls
from tidings.client import types as t
from tidings.client.batching import Batcher
from tidings.client.calls import Call
from tidings.client.retries import RETRIES, again, named
from tidings.http1 import AnswerTooLarge, Client
from tidings.wire.v1 import ErrorFrame, StreamFrame

log = logging.getLogger("tidings.client")
T = TypeVar("T")
AsyncMessage = t.Message[Awaitable[None]]
Callback = Callable[[AsyncMessage], Awaitable[None] | None]
MAX_ANSWER = 16 * 1024 * 1024  # bytes of an answer or frame read, unless the broker needs more


class AsyncClient:
    """The asyncio client over the lean HTTP/1.1 client (`tidings.http1`: kept-alive
    connections, about a tenth of httpx's CPU per call). With `linger` > 0, concurrent
    `publish()` calls are sent as batches (`tidings.client.batching`).

    A publish whose answer is lost is sent again, up to `retries` times, under a dedup id
    (`tidings.client.retries`), so it is delivered once. Answers and stream frames are read
    up to the largest the broker says it sends (`GET /v1/limits`, asked once). `headers` go
    with every call (the simulator's `Tidings-Simulation`, docs/api.md)."""

    def __init__(
        self,
        url: str = "http://127.0.0.1:8080",
        timeout: float = 30.0,
        *,
        linger: float = 0.0,
        batch_size: int = 100,
        connections: int = 200,
        retries: int = RETRIES,
        key: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.retries = retries
        self.key = key  # sent on registering and publishing, where the broker requires one
        self.headers = dict(headers or {})  # sent with every call (Tidings-Simulation: a sim's)
        self._http = Client(connections, timeout, MAX_ANSWER)
        self._batcher = Batcher(self.publish_batch, linger, batch_size) if linger > 0 else None
        self._max_answer: int | None = None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, *exc: type[BaseException] | BaseException | TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._batcher is not None:
            await self._batcher.flush()
        self._http.close()

    async def run(self, call: Call[T], token: str | None = None) -> T:
        bearer = token if call.auth else self.key
        headers = dict(self.headers)
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        body = b""
        if call.json is not None:
            body, headers["Content-Type"] = call.encoded()
        query = f"?{urlencode(call.params)}" if call.params else ""
        try:
            response = await self._http.request(
                call.method,
                f"{self.url}{call.path}{query}",
                body,
                headers,
                call.timeout,
                call.max_answer,
            )
        except AnswerTooLarge as exc:  # the broker kept the batch within it: not expected
            raise t.TidingsClientError(413, "answer_too_large", str(exc)) from None
        except (OSError, TimeoutError, ValueError) as exc:
            raise t.unreachable(self.url, exc) from None
        return t.answered(response.status, response.body, call.parse)

    async def max_answer(self) -> int:
        """The bytes of one answer or frame this client reads: the largest the broker says
        it sends, at least `MAX_ANSWER` (asked once; a broker that does not say: MAX_ANSWER)."""
        if self._max_answer is None:
            try:
                stated = (await self.run(calls.limits())).max_answer_bytes
            except t.TidingsClientError as exc:
                if t.passing(exc):
                    raise
                stated = 0
            self._max_answer = max(MAX_ANSWER, stated)
        return self._max_answer

    async def _retried(self, call: Call[T]) -> T:
        """A publish call, sent again while its answer cannot be had (its body carries a
        dedup id, so the broker publishes it once)."""
        backoff = t.Backoff()
        attempt = 0
        while True:
            try:
                return await self.run(call)
            except t.TidingsClientError as exc:
                if not again(exc, attempt, self.retries):
                    raise
            attempt += 1
            await asyncio.sleep(backoff.next())

    async def register(self, ephemeral: bool = False) -> AsyncSubscriberHandle:
        """A new subscriber; an `ephemeral` one is deleted by the broker once it has had no
        stream open and made no call for a while (docs/api.md)."""
        return AsyncSubscriberHandle(self, await self.run(calls.register(ephemeral)))

    def subscriber(self, subscriber_id: str, token: str) -> AsyncSubscriberHandle:
        return AsyncSubscriberHandle(self, t.Registration(subscriber_id, token, ""))

    async def publish(
        self,
        data: Any = None,
        *,
        topics: list[str] | None = None,
        attributes: dict[str, Any] | None = None,
        function_types: list[str] | None = None,
        dedup_id: str | None = None,
    ) -> t.Published:
        """`dedup_id`: the publication's name; a repeat within the broker's dedup window is
        answered as the first (`duplicate`) and not delivered again. Without one, the client
        gives it one when it may retry it."""
        body = t.publication_body(data, topics, attributes, function_types, dedup_id)
        if self._batcher is not None:
            return await self._batcher.add(body)
        if self.retries:
            return await self._retried(calls.publish(named(body)))
        return await self.run(calls.publish(body))

    async def publish_batch(self, publications: list[dict[str, Any]]) -> list[t.Published]:
        """Each publication's body as `publish()` takes it (`dedup_id` among its keys)."""
        if self.retries:
            return await self._retried(calls.publish_batch([named(p) for p in publications]))
        return await self.run(calls.publish_batch(publications))

    async def progress(self, published: t.Published) -> t.Progress:
        """Whether function subscriptions still owe `published` (this client's publish
        answer) an evaluation, and its deliveries so far of every kind."""
        return await self.run(calls.progress(published))

    async def health(self) -> bool:
        return await self.run(calls.health())


class Stream:
    """Messages pushed over a WebSocket; `await message.ack()` (or `stream.ack(receipts)`).

    With `reconnect` (the default) a stream that breaks, for instance when the broker
    restarts, is opened again with backoff and goes on: messages that were unacknowledged
    on the old connection come again (at least once). A refusal (a wrong token, a deleted
    subscriber) ends it with TidingsClientError."""

    def __init__(self, open_ws: Callable[[], Awaitable[ClientConnection]], reconnect: bool) -> None:
        self._open = open_ws
        self._reconnect = reconnect
        self._ws: ClientConnection | None = None
        self.reconnects = 0

    async def _start(self) -> None:
        self._ws = await self._open()

    async def _close(self) -> None:
        if self._ws is not None:
            await self._ws.close()

    def __aiter__(self) -> AsyncIterator[AsyncMessage]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[AsyncMessage]:
        while True:
            assert self._ws is not None
            try:
                async for frame in self._ws:
                    for message in _decoded(frame, self._settle):
                        yield message
                if not self._reconnect:
                    return
            except ConnectionClosed as exc:
                if not self._reconnect:
                    broke = f"the stream broke: {exc}"
                    raise t.TidingsClientError(0, "stream_closed", broke) from None
            except t.TidingsClientError as exc:  # an error frame, then the close
                if not (self._reconnect and t.passing(exc)):  # (503: served elsewhere now)
                    raise
            await self._reopen()

    async def _reopen(self) -> None:
        backoff = t.Backoff()
        while True:
            await asyncio.sleep(backoff.next())
            try:
                self._ws = await self._open()
            except t.TidingsClientError as exc:
                if not t.passing(exc):  # refused: trying again will not help
                    raise
                log.info("the stream is still unreachable: %s", exc.message)
                continue
            self.reconnects += 1
            return

    def _settle(self, kind: str, receipts: list[str]) -> Awaitable[None]:
        return self.ack(receipts) if kind == "ack" else self.nack(receipts)

    async def ack(self, receipts: list[str]) -> None:
        await self._send(StreamFrame("ack", receipts))

    async def nack(self, receipts: list[str]) -> None:
        await self._send(StreamFrame("nack", receipts))

    async def _send(self, frame: StreamFrame) -> None:
        assert self._ws is not None
        # on a connection that just broke the broker has released these messages already:
        # they come again on the new connection, so there is nothing left to settle
        with contextlib.suppress(ConnectionClosed):
            await self._ws.send(msgspec.json.encode(frame).decode())


def _decoded(frame: str | bytes, settler: t.Settler[Awaitable[None]]) -> list[AsyncMessage]:
    # a MessagePack frame never begins with "{" (a map of a few keys is 0x8N)
    if isinstance(frame, bytes) and not frame.startswith(b"{"):
        raw = msgspec.msgpack.decode(frame)
    else:
        raw = orjson.loads(frame)
    if raw.get("type") == "error":
        err = msgspec.convert(raw, ErrorFrame).error
        raise t.TidingsClientError(t.status_of(err.code), err.code, err.message, err.field)
    return t.messages(raw.get("messages", []), settler)


class AsyncSubscriberHandle:
    """A registered subscriber: its id and token, and the calls on its own resources."""

    def __init__(self, client: AsyncClient, registration: t.Registration) -> None:
        self.client, self.registration = client, registration
        self.id, self.token = registration.id, registration.token
        self.base = f"/v1/subscribers/{self.id}"

    async def _run(self, call: Call[T]) -> T:
        return await self.client.run(call, self.token)

    async def subscribe(
        self,
        *,
        topics: list[str] | None = None,
        predicates: list[dict[str, Any]] | None = None,
        function: dict[str, Any] | None = None,
    ) -> t.Subscription:
        return await self._run(calls.subscribe(self.base, topics, predicates, function))

    async def subscriptions(self, page: int = 100) -> list[t.Subscription]:
        """Every subscription, in id order, fetched `page` at a time."""
        found: list[t.Subscription] = []
        after: str | None = ""
        while after is not None:
            subs, after = await self._run(calls.subscriptions(self.base, after, page))
            found += subs
        return found

    async def subscription(self, subscription_id: str) -> t.Subscription:
        return await self._run(calls.subscription(self.base, subscription_id))

    async def unsubscribe(self, subscription_id: str) -> None:
        await self._run(calls.unsubscribe(self.base, subscription_id))

    async def resume(self, subscription_id: str) -> t.Subscription:
        return await self._run(calls.subscription(self.base, subscription_id, "/resume"))

    async def pull(
        self, max_messages: int = 10, wait: float = 0.0, visibility: float | None = None
    ) -> list[AsyncMessage]:
        settler: t.Settler[Awaitable[None]] = self._settle
        most = await self.client.max_answer()
        return await self._run(calls.pull(self.base, max_messages, wait, visibility, settler, most))

    async def _settle(self, kind: str, receipts: list[str]) -> None:
        await self._run(calls.settle(self.base, kind, receipts))

    async def ack(self, receipts: list[str]) -> t.AckResult:
        return await self._run(calls.settle(self.base, "ack", receipts))

    async def nack(self, receipts: list[str], delay: float = 0.0) -> t.AckResult:
        return await self._run(calls.settle(self.base, "nack", receipts, delay))

    async def info(self) -> t.SubscriberInfo:
        return await self._run(calls.info(self.base))

    async def depth(self) -> t.Depth:
        return await self._run(calls.depth(self.base))

    async def dead_letters(self, limit: int = 100) -> list[t.DeadLetter]:
        return await self._run(calls.dead_letters(self.base, limit))

    async def redrive(self, ids: list[int] | None = None) -> int:
        return await self._run(calls.redrive(self.base, ids))

    async def browse(self, limit: int = 100, after: int = 0) -> tuple[list[t.Queued], int | None]:
        """A page of the queue's waiting messages without leasing them (attempts untouched),
        and the `after` of the next page (None on the last)."""
        return await self._run(calls.browse(self.base, limit, after))

    async def purge(self) -> int:
        """Delete the queue's waiting messages (not the leased ones); how many went."""
        return await self._run(calls.purge(self.base))

    async def unregister(self) -> None:
        await self._run(calls.unregister(self.base))

    @asynccontextmanager
    async def stream(
        self,
        prefetch: int = 100,
        open_timeout: float = 30.0,
        reconnect: bool = True,
        encoding: str = "json",
    ) -> AsyncIterator[Stream]:
        """`encoding="msgpack"`: frames in MessagePack, binary `data` as bytes."""
        most = await self.client.max_answer()
        query = f"prefetch={prefetch}&max_bytes={most}"
        query += "&encoding=msgpack" if encoding == "msgpack" else ""
        url = self.client.url.replace("http", "ws", 1) + f"{self.base}/stream?{query}"
        headers = {"Authorization": f"Bearer {self.token}"}

        async def open_ws() -> ClientConnection:
            try:
                # No permessage-deflate: compressing small JSON frames costs more CPU than
                # it saves.
                return await connect(
                    url,
                    additional_headers=headers,
                    max_size=most,
                    compression=None,
                    open_timeout=open_timeout,
                )
            except InvalidStatus as exc:
                raise t.refused(exc.response.status_code, exc.response.body) from None
            except (OSError, TimeoutError, InvalidHandshake) as exc:
                raise t.unreachable(self.client.url, exc) from None

        stream = Stream(open_ws, reconnect)
        await stream._start()
        try:
            yield stream
        finally:
            await stream._close()

    def consume(self, callback: Callback, prefetch: int = 100) -> asyncio.Task[None]:
        """Call `callback(message)` for every message, as google-cloud-pubsub's
        `subscribe(callback)` does, until the returned task is cancelled; the stream
        reconnects as it goes. The callback (plain or async) settles each message with
        `message.ack()`; a message whose callback raised is nacked, for redelivery."""
        return asyncio.get_running_loop().create_task(self._consume(callback, prefetch))

    async def _consume(self, callback: Callback, prefetch: int) -> None:
        async with self.stream(prefetch) as stream:
            async for message in stream:
                try:
                    done = callback(message)
                    if inspect.isawaitable(done):
                        await done
                except Exception:
                    log.exception("the callback failed on message %s: nacked", message.id)
                    await message.nack()
