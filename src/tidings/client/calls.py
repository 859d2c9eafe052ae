"""Each API call described once, as data: method, path, body and how to read the answer
(decoded into its wire shape, `tidings.wire`). The sync and asyncio clients only differ in
how they send a `Call[T]`, and both return its `T`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import msgspec
import orjson

from tidings.client import types as t
from tidings.wire import admin as wa
from tidings.wire import v1 as w
from tidings.wire.base import AckBody, Health, Settled

T = TypeVar("T")


def loaded(body: bytes) -> Any:
    """The answer as plain JSON values (None for no body): for calls with no shape here."""
    return orjson.loads(body) if body else None


def nothing(body: bytes) -> None:
    """For the calls that answer 204."""


def decoded(into: type[T]) -> Callable[[bytes], T]:
    """The answer decoded into its shape (a refusal names what did not fit)."""
    return lambda body: msgspec.json.decode(body, type=into)


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[bytes], T] = loaded
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    auth: bool = True
    max_answer: int | None = None  # bytes of the answer read at most (None: the client's)

    @property
    def packed(self) -> bool:
        """Sent as MessagePack: a publication with binary `data` (docs/api.md)."""
        items = self.json.get("publications", [self.json]) if isinstance(self.json, dict) else []
        return any(isinstance(i, dict) and isinstance(i.get("data"), bytes) for i in items)

    def encoded(self) -> tuple[bytes, str]:
        """The body and its content type."""
        if self.packed:
            return msgspec.msgpack.encode(self.json), "application/msgpack"
        if isinstance(self.json, msgspec.Struct):  # a request's wire shape
            return msgspec.json.encode(self.json), "application/json"
        # the caller's values (a publication's data), written by orjson as they always were
        return orjson.dumps(self.json), "application/json"


def register(ephemeral: bool = False) -> Call[t.Registration]:
    body = {"ephemeral": True} if ephemeral else None
    return Call("POST", "/v1/subscribers", decoded(w.Registered), json=body, auth=False)


def publish(body: dict[str, Any]) -> Call[t.Published]:
    """`body`: `t.publication_body(...)`."""
    return Call("POST", "/v1/publications", decoded(w.Published), json=body, auth=False)


def _publications(body: bytes) -> list[t.Published]:
    answer = msgspec.json.decode(body, type=w.BatchCounts)
    return answer.publications if isinstance(answer.publications, list) else []


def publish_batch(publications: list[dict[str, Any]]) -> Call[list[t.Published]]:
    body = {"publications": publications}
    return Call("POST", "/v1/publications/batch", _publications, json=body, auth=False)


def progress(published: t.Published) -> Call[t.Progress]:
    """Its function evaluations owed and deliveries so far, read with its progress token."""
    params = {"token": published.progress_token}
    path = f"/v1/publications/{published.id}"
    return Call("GET", path, decoded(w.Progress), params=params, auth=False)


def limits() -> Call[w.Limits]:
    """What the broker takes and sends (the largest answer a client must read)."""
    return Call("GET", "/v1/limits", decoded(w.Limits), auth=False)


def _healthy(body: bytes) -> bool:
    return msgspec.json.decode(body, type=Health).status == "ok"


def health() -> Call[bool]:
    return Call("GET", "/healthz", _healthy, auth=False)


def subscribe(
    base: str,
    topics: list[str] | None,
    predicates: list[dict[str, Any]] | None,
    function: dict[str, Any] | None,
) -> Call[t.Subscription]:
    body = t.subscription_body(topics, predicates, function)
    return Call("POST", f"{base}/subscriptions", decoded(w.SubscriptionOut), json=body)


def _subscriptions(body: bytes) -> tuple[list[t.Subscription], str | None]:
    page = msgspec.json.decode(body, type=w.Subscriptions)
    return page.subscriptions, page.next


def subscriptions(
    base: str, after: str = "", limit: int = 100
) -> Call[tuple[list[t.Subscription], str | None]]:
    """A page: (subscriptions, the id to continue after, or None at the end; None too from
    a broker before paging, whose one answer held them all)."""
    params: dict[str, Any] = {"after": after, "limit": limit}
    return Call("GET", f"{base}/subscriptions", _subscriptions, params=params)


def subscription(base: str, sid: str, suffix: str = "") -> Call[t.Subscription]:
    """Read it, or with `suffix="/resume"` resume it."""
    method = "POST" if suffix else "GET"
    return Call(method, f"{base}/subscriptions/{sid}{suffix}", decoded(w.SubscriptionOut))


def unsubscribe(base: str, sid: str) -> Call[None]:
    return Call("DELETE", f"{base}/subscriptions/{sid}", nothing)


def info(base: str) -> Call[t.SubscriberInfo]:
    return Call("GET", base, decoded(w.SubscriberInfo))


def pull(
    base: str,
    max_messages: int,
    wait: float,
    visibility: float | None,
    settler: t.Settler[t.S] | None = None,
    max_bytes: int | None = None,
) -> Call[list[t.Message[t.S]]]:
    """Messages that `ack()`/`nack()` through `settler`; `max_bytes`: the answer's bytes
    the client reads, which the broker's batch keeps within."""
    params: dict[str, Any] = {"max": max_messages, "wait": wait}
    if visibility is not None:
        params["visibility"] = visibility
    if max_bytes is not None:
        params["max_bytes"] = max_bytes

    def parse(body: bytes) -> list[t.Message[t.S]]:
        return t.settled_by(msgspec.json.decode(body, type=t.Pulled)["messages"], settler)

    return Call(
        "GET", f"{base}/messages", parse, params=params, timeout=wait + 30, max_answer=max_bytes
    )


def settle(base: str, kind: str, receipts: list[str], delay: float = 0.0) -> Call[t.AckResult]:
    body = w.NackBody(receipts, delay) if kind == "nack" else AckBody(receipts)
    return Call("POST", f"{base}/messages/{kind}", decoded(Settled), json=body)


def _depth(body: bytes) -> t.Depth:
    return msgspec.json.decode(body, type=w.SubscriberInfo).depth


def depth(base: str) -> Call[t.Depth]:
    return Call("GET", base, _depth)


def _dead_letters(body: bytes) -> list[t.DeadLetter]:
    return msgspec.json.decode(body, type=w.DeadLetters).dead_letters


def dead_letters(base: str, limit: int) -> Call[list[t.DeadLetter]]:
    return Call("GET", f"{base}/dead-letters", _dead_letters, params={"limit": limit})


def _redriven(body: bytes) -> int:
    return msgspec.json.decode(body, type=w.Redriven).redriven


def redrive(base: str, ids: list[int] | None) -> Call[int]:
    body = {} if ids is None else {"ids": ids}
    return Call("POST", f"{base}/dead-letters/redrive", _redriven, json=body)


def _queued(body: bytes) -> tuple[list[t.Queued], int | None]:
    page = msgspec.json.decode(body, type=w.Queued)
    return page.messages, page.next


def browse(base: str, limit: int, after: int) -> Call[tuple[list[t.Queued], int | None]]:
    """A page of the waiting messages, leasing none, and the `after` of the next (or None)."""
    return Call("GET", f"{base}/queue/messages", _queued, params={"limit": limit, "after": after})


def _purged(body: bytes) -> int:
    return msgspec.json.decode(body, type=w.Purged).purged


def purge(base: str) -> Call[int]:
    return Call("DELETE", f"{base}/queue/messages", _purged)


def unregister(base: str) -> Call[None]:
    return Call("DELETE", base, nothing)


def admin_overview() -> Call[dict[str, Any]]:
    """The overview as plain values (`tidings.wire.admin.Overview`'s fields)."""
    return Call("GET", "/v1/admin/overview", decoded(dict[str, Any]))


def _page(body: bytes) -> tuple[list[t.SubscriberRecord], str | None]:
    page = msgspec.json.decode(body, type=wa.SubscribersPage)
    return page.subscribers, page.next


def admin_subscribers(after: str, limit: int) -> Call[tuple[list[t.SubscriberRecord], str | None]]:
    """A page: (records, the id to continue after, or None at the end)."""
    params: dict[str, Any] = {"after": after, "limit": limit}
    return Call("GET", "/v1/admin/subscribers", _page, params=params)


def admin_delete(subscriber_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/admin/subscribers/{subscriber_id}", nothing)
