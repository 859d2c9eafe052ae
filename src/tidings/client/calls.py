"""Each API call described once, as data: method, path, body and how to read the answer.
The sync and asyncio clients only differ in how they send a `Call`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import orjson

from tidings.client import types as t


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    path: str
    parse: Callable[[Any], Any] = lambda raw: raw
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    auth: bool = True

    @property
    def packed(self) -> bool:
        """Sent as MessagePack: a publication with binary `data` (docs/api.md)."""
        items = self.json.get("publications", [self.json]) if isinstance(self.json, dict) else []
        return any(isinstance(i, dict) and isinstance(i.get("data"), bytes) for i in items)

    def encoded(self) -> tuple[bytes, str]:
        """The body and its content type."""
        if self.packed:
            return msgspec.msgpack.encode(self.json), "application/msgpack"
        return orjson.dumps(self.json), "application/json"


def register(ephemeral: bool = False) -> Call:
    return Call(
        "POST",
        "/v1/subscribers",
        lambda r: t.Registration(r["id"], r["token"], r["queue_url"]),
        json={"ephemeral": True} if ephemeral else None,
        auth=False,
    )


def publish(
    data: Any,
    topics: list[str] | None,
    attributes: dict[str, Any] | None,
    function_types: list[str] | None,
) -> Call:
    body = t.publication_body(data, topics, attributes, function_types)
    return Call("POST", "/v1/publications", lambda r: t.Published(**r), json=body, auth=False)


def publish_batch(publications: list[dict[str, Any]]) -> Call:
    return Call(
        "POST",
        "/v1/publications/batch",
        lambda r: [t.Published(**p) for p in r["publications"]],
        json={"publications": publications},
        auth=False,
    )


def health() -> Call:
    return Call("GET", "/healthz", lambda r: r["status"] == "ok", auth=False)


def subscribe(
    base: str,
    topics: list[str] | None,
    predicates: list[dict[str, Any]] | None,
    function: dict[str, Any] | None,
) -> Call:
    body = t.subscription_body(topics, predicates, function)
    return Call("POST", f"{base}/subscriptions", t.subscription, json=body)


def subscriptions(base: str) -> Call:
    return Call(
        "GET", f"{base}/subscriptions", lambda r: [t.subscription(s) for s in r["subscriptions"]]
    )


def subscription(base: str, sid: str, method: str = "GET", suffix: str = "") -> Call:
    parse = t.subscription if method != "DELETE" else (lambda r: r)
    return Call(method, f"{base}/subscriptions/{sid}{suffix}", parse)


def info(base: str) -> Call:
    return Call("GET", base, t.subscriber_info)


def pull(
    base: str,
    max_messages: int,
    wait: float,
    visibility: float | None,
    settler: t.Settler[Any] | None = None,
) -> Call:
    """Messages that `ack()`/`nack()` through `settler`."""
    params: dict[str, Any] = {"max": max_messages, "wait": wait}
    if visibility is not None:
        params["visibility"] = visibility
    return Call(
        "GET",
        f"{base}/messages",
        lambda r: [t.message(m, settler) for m in r["messages"]],
        params=params,
        timeout=wait + 30,
    )


def settle(base: str, kind: str, receipts: list[str], delay: float = 0.0) -> Call:
    body: dict[str, Any] = {"receipts": receipts}
    if kind == "nack":
        body["delay"] = delay
    return Call("POST", f"{base}/messages/{kind}", lambda r: t.AckResult(**r), json=body)


def depth(base: str) -> Call:
    return Call("GET", base, lambda r: t.Depth(**r["depth"]))


def dead_letters(base: str, limit: int) -> Call:
    return Call(
        "GET",
        f"{base}/dead-letters",
        lambda r: [t.dead_letter(d) for d in r["dead_letters"]],
        params={"limit": limit},
    )


def redrive(base: str, ids: list[int] | None) -> Call:
    return Call(
        "POST",
        f"{base}/dead-letters/redrive",
        lambda r: int(r["redriven"]),
        json={} if ids is None else {"ids": ids},
    )


def unregister(base: str) -> Call:
    return Call("DELETE", base)


def admin_overview() -> Call:
    return Call("GET", "/v1/admin/overview", lambda r: r)


def admin_subscribers(after: str, limit: int) -> Call:
    """A page: (records, the id to continue after, or None at the end)."""
    return Call(
        "GET",
        "/v1/admin/subscribers",
        lambda r: ([t.subscriber_record(s) for s in r["subscribers"]], r["next"]),
        params={"after": after, "limit": limit},
    )


def admin_delete(subscriber_id: str) -> Call:
    return Call("DELETE", f"/v1/admin/subscribers/{subscriber_id}", lambda r: None)
