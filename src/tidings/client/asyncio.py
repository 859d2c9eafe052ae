"""The asyncio client, with the WebSocket push stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

import httpx
import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosedError, InvalidHandshake, InvalidStatus

from tidings.client import calls
from tidings.client import types as t
from tidings.client.calls import Call


class AsyncClient:
    def __init__(self, url: str = "http://127.0.0.1:8080", timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout, limits=limits)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, *exc: type[BaseException] | BaseException | TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def run(self, call: Call, token: str | None = None) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token and call.auth else {}
        try:
            response = await self._http.request(
                call.method,
                call.path,
                headers=headers,
                json=call.json,
                params=call.params or None,
                timeout=call.timeout or httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.TransportError as exc:
            raise t.unreachable(self.url, exc) from None
        return call.parse(t.checked(response))

    async def register(self) -> AsyncSubscriberHandle:
        return AsyncSubscriberHandle(self, await self.run(calls.register()))

    def subscriber(self, subscriber_id: str, token: str) -> AsyncSubscriberHandle:
        return AsyncSubscriberHandle(self, t.Registration(subscriber_id, token, ""))

    async def publish(
        self,
        data: Any = None,
        *,
        topics: list[str] | None = None,
        attributes: dict[str, Any] | None = None,
        function_types: list[str] | None = None,
    ) -> t.Published:
        return await self.run(calls.publish(data, topics, attributes, function_types))  # type: ignore[no-any-return]

    async def publish_batch(self, publications: list[dict[str, Any]]) -> list[t.Published]:
        return await self.run(calls.publish_batch(publications))  # type: ignore[no-any-return]

    async def health(self) -> bool:
        return bool(await self.run(calls.health()))


class Stream:
    """Messages pushed over one WebSocket; acknowledge with `ack`."""

    def __init__(self, ws: ClientConnection) -> None:
        self._ws = ws

    def __aiter__(self) -> AsyncIterator[t.Message]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[t.Message]:
        try:
            async for frame in self._ws:
                for message in _decoded(frame):
                    yield message
        except ConnectionClosedError as exc:
            raise t.TidingsClientError(0, "stream_closed", f"the stream broke: {exc}") from None

    async def ack(self, receipts: list[str]) -> None:
        await self._ws.send(orjson.dumps({"type": "ack", "receipts": receipts}).decode())

    async def nack(self, receipts: list[str]) -> None:
        await self._ws.send(orjson.dumps({"type": "nack", "receipts": receipts}).decode())


def _decoded(frame: str | bytes) -> list[t.Message]:
    raw = orjson.loads(frame)
    if raw.get("type") == "error":
        err = raw["error"]
        status = t.status_of(err["code"])
        raise t.TidingsClientError(status, err["code"], err["message"], err.get("field"))
    return [t.message(m) for m in raw.get("messages", ())]


class AsyncSubscriberHandle:
    """A registered subscriber: its id and token, and the calls on its own resources."""

    def __init__(self, client: AsyncClient, registration: t.Registration) -> None:
        self.client, self.registration = client, registration
        self.id, self.token = registration.id, registration.token
        self.base = f"/v1/subscribers/{self.id}"

    async def _run(self, call: Call) -> Any:
        return await self.client.run(call, self.token)

    async def subscribe(
        self,
        *,
        topics: list[str] | None = None,
        predicates: list[dict[str, Any]] | None = None,
        function: dict[str, Any] | None = None,
    ) -> t.Subscription:
        return await self._run(calls.subscribe(self.base, topics, predicates, function))  # type: ignore[no-any-return]

    async def subscriptions(self) -> list[t.Subscription]:
        return await self._run(calls.subscriptions(self.base))  # type: ignore[no-any-return]

    async def subscription(self, subscription_id: str) -> t.Subscription:
        return await self._run(calls.subscription(self.base, subscription_id))  # type: ignore[no-any-return]

    async def unsubscribe(self, subscription_id: str) -> None:
        await self._run(calls.subscription(self.base, subscription_id, "DELETE"))

    async def resume(self, subscription_id: str) -> t.Subscription:
        return await self._run(calls.subscription(self.base, subscription_id, "POST", "/resume"))  # type: ignore[no-any-return]

    async def pull(
        self, max_messages: int = 10, wait: float = 0.0, visibility: float | None = None
    ) -> list[t.Message]:
        return await self._run(calls.pull(self.base, max_messages, wait, visibility))  # type: ignore[no-any-return]

    async def ack(self, receipts: list[str]) -> t.AckResult:
        return await self._run(calls.settle(self.base, "ack", receipts))  # type: ignore[no-any-return]

    async def nack(self, receipts: list[str], delay: float = 0.0) -> t.AckResult:
        return await self._run(calls.settle(self.base, "nack", receipts, delay))  # type: ignore[no-any-return]

    async def info(self) -> t.SubscriberInfo:
        return await self._run(calls.info(self.base))  # type: ignore[no-any-return]

    async def depth(self) -> t.Depth:
        return await self._run(calls.depth(self.base))  # type: ignore[no-any-return]

    async def dead_letters(self, limit: int = 100) -> list[t.DeadLetter]:
        return await self._run(calls.dead_letters(self.base, limit))  # type: ignore[no-any-return]

    async def redrive(self, ids: list[int] | None = None) -> int:
        return await self._run(calls.redrive(self.base, ids))  # type: ignore[no-any-return]

    async def unregister(self) -> None:
        await self._run(calls.unregister(self.base))

    @asynccontextmanager
    async def stream(
        self, prefetch: int = 100, open_timeout: float = 30.0
    ) -> AsyncIterator[Stream]:
        url = self.client.url.replace("http", "ws", 1) + f"{self.base}/stream?prefetch={prefetch}"
        headers = {"Authorization": f"Bearer {self.token}"}
        try:
            # No permessage-deflate: compressing small JSON frames costs more CPU than it saves.
            ws = await connect(
                url,
                additional_headers=headers,
                max_size=2**24,
                compression=None,
                open_timeout=open_timeout,
            )
        except InvalidStatus as exc:
            raise t.refused(exc.response.status_code, exc.response.body) from None
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            raise t.unreachable(self.client.url, exc) from None
        async with ws:
            yield Stream(ws)
