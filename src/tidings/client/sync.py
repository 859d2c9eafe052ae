"""The synchronous client."""

from __future__ import annotations

from types import TracebackType
from typing import Any

import httpx

from tidings.client import calls
from tidings.client import types as t
from tidings.client.calls import Call


class Client:
    def __init__(self, url: str = "http://127.0.0.1:8080", timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def run(self, call: Call, token: str | None = None) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token and call.auth else {}
        try:
            response = self._http.request(
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

    def register(self) -> SubscriberHandle:
        return SubscriberHandle(self, self.run(calls.register()))

    def subscriber(self, subscriber_id: str, token: str) -> SubscriberHandle:
        """A handle on an existing subscriber."""
        return SubscriberHandle(self, t.Registration(subscriber_id, token, ""))

    def publish(
        self,
        data: Any = None,
        *,
        topics: list[str] | None = None,
        attributes: dict[str, Any] | None = None,
        function_types: list[str] | None = None,
    ) -> t.Published:
        return self.run(calls.publish(data, topics, attributes, function_types))  # type: ignore[no-any-return]

    def publish_batch(self, publications: list[dict[str, Any]]) -> list[t.Published]:
        return self.run(calls.publish_batch(publications))  # type: ignore[no-any-return]

    def health(self) -> bool:
        return bool(self.run(calls.health()))


class SubscriberHandle:
    """A registered subscriber: its id and token, and the calls on its own resources."""

    def __init__(self, client: Client, registration: t.Registration) -> None:
        self.client, self.registration = client, registration
        self.id, self.token = registration.id, registration.token
        self.base = f"/v1/subscribers/{self.id}"

    def _run(self, call: Call) -> Any:
        return self.client.run(call, self.token)

    def subscribe(
        self,
        *,
        topics: list[str] | None = None,
        predicates: list[dict[str, Any]] | None = None,
        function: dict[str, Any] | None = None,
    ) -> t.Subscription:
        return self._run(calls.subscribe(self.base, topics, predicates, function))  # type: ignore[no-any-return]

    def subscriptions(self) -> list[t.Subscription]:
        return self._run(calls.subscriptions(self.base))  # type: ignore[no-any-return]

    def subscription(self, subscription_id: str) -> t.Subscription:
        return self._run(calls.subscription(self.base, subscription_id))  # type: ignore[no-any-return]

    def unsubscribe(self, subscription_id: str) -> None:
        self._run(calls.subscription(self.base, subscription_id, "DELETE"))

    def resume(self, subscription_id: str) -> t.Subscription:
        return self._run(calls.subscription(self.base, subscription_id, "POST", "/resume"))  # type: ignore[no-any-return]

    def pull(
        self, max_messages: int = 10, wait: float = 0.0, visibility: float | None = None
    ) -> list[t.Message]:
        return self._run(calls.pull(self.base, max_messages, wait, visibility))  # type: ignore[no-any-return]

    def ack(self, receipts: list[str]) -> t.AckResult:
        return self._run(calls.settle(self.base, "ack", receipts))  # type: ignore[no-any-return]

    def nack(self, receipts: list[str], delay: float = 0.0) -> t.AckResult:
        return self._run(calls.settle(self.base, "nack", receipts, delay))  # type: ignore[no-any-return]

    def info(self) -> t.SubscriberInfo:
        return self._run(calls.info(self.base))  # type: ignore[no-any-return]

    def depth(self) -> t.Depth:
        return self._run(calls.depth(self.base))  # type: ignore[no-any-return]

    def dead_letters(self, limit: int = 100) -> list[t.DeadLetter]:
        return self._run(calls.dead_letters(self.base, limit))  # type: ignore[no-any-return]

    def redrive(self, ids: list[int] | None = None) -> int:
        return self._run(calls.redrive(self.base, ids))  # type: ignore[no-any-return]

    def unregister(self) -> None:
        self._run(calls.unregister(self.base))
