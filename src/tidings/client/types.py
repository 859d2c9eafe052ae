"""What the client returns, and the one error it raises."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
import orjson

from tidings.errors import CATALOGUE


class TidingsClientError(Exception):
    """The broker refused a call (status, code, field), or could not be reached (status 0)."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None):
        super().__init__(f"{status} {code}: {message}" + (f" ({field})" if field else ""))
        self.status, self.code, self.message, self.field = status, code, message, field


@dataclass(frozen=True, slots=True)
class Registration:
    id: str
    token: str
    queue_url: str


S = TypeVar("S")  # what settling returns: None (sync client) or an awaitable (asyncio)
Settler = Callable[[str, list[str]], S]  # ("ack" | "nack", receipts)


@dataclass(frozen=True, slots=True)
class Message(Generic[S]):
    """A delivered message. `ack()` / `nack()` settle it through whatever delivered it (the
    HTTP queue or the stream); on the asyncio client they are awaited."""

    id: int
    receipt: str
    attempt: int
    publication_id: str
    subscription_ids: list[str]
    enqueued_at: float
    body: Any
    settler: Settler[S] | None = field(default=None, repr=False, compare=False)

    @property
    def data(self) -> Any:
        return self.body.get("data") if isinstance(self.body, dict) else None

    def ack(self) -> S:
        return self._settle("ack")

    def nack(self) -> S:
        """Hand it back now, for redelivery."""
        return self._settle("nack")

    def _settle(self, kind: str) -> S:
        if self.settler is None:
            raise RuntimeError("this message did not come through a client: use its receipt")
        return self.settler(kind, [self.receipt])


@dataclass(frozen=True, slots=True)
class Published:
    id: str
    published_at: float
    deliveries: int


@dataclass(frozen=True, slots=True)
class AckResult:
    acked: list[str]
    unknown: list[str]


@dataclass(frozen=True, slots=True)
class Depth:
    ready: int
    leased: int
    dead: int


@dataclass(frozen=True, slots=True)
class SubscriberInfo:
    id: str
    created_at: float
    queue_url: str
    depth: Depth


@dataclass(frozen=True, slots=True)
class Subscription:
    id: str
    subscriber_id: str
    kind: str  # topic | content | function
    created_at: float
    status: str  # active | suspended
    status_reason: str | None = None
    topics: list[str] | None = None
    predicates: list[dict[str, Any]] | None = None
    function: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class SubscriberRecord:
    """A subscriber as the admin sees it."""

    id: str
    created_at: float
    last_seen: float
    ephemeral: bool
    depth: Depth


@dataclass(frozen=True, slots=True)
class DeadLetter:
    id: int
    publication_id: str
    attempt: int
    reason: str
    dead_at: float
    body: Any


def message(raw: dict[str, Any], settler: Settler[S] | None = None) -> Message[S]:
    fields = ("id", "receipt", "attempt", "publication_id", "subscription_ids", "enqueued_at")
    return Message(**{k: raw[k] for k in fields}, body=raw["body"], settler=settler)


def subscriber_record(raw: dict[str, Any]) -> SubscriberRecord:
    keys = ("id", "created_at", "last_seen", "ephemeral")
    return SubscriberRecord(**{k: raw[k] for k in keys}, depth=Depth(**raw["depth"]))


def subscriber_info(raw: dict[str, Any]) -> SubscriberInfo:
    return SubscriberInfo(raw["id"], raw["created_at"], raw["queue_url"], Depth(**raw["depth"]))


def subscription(raw: dict[str, Any]) -> Subscription:
    known = Subscription.__dataclass_fields__
    return Subscription(**{k: v for k, v in raw.items() if k in known})


def dead_letter(raw: dict[str, Any]) -> DeadLetter:
    keys = ("id", "publication_id", "attempt", "reason", "dead_at", "body")
    return DeadLetter(**{k: raw[k] for k in keys})


def subscription_body(
    topics: list[str] | None,
    predicates: list[dict[str, Any]] | None,
    function: dict[str, Any] | None,
) -> dict[str, Any]:
    given = {
        k: v
        for k, v in (("topics", topics), ("predicates", predicates), ("function", function))
        if v is not None
    }
    if len(given) != 1:
        raise ValueError("give exactly one of topics, predicates, function")
    return given


def publication_body(
    data: Any,
    topics: list[str] | None,
    attributes: dict[str, Any] | None,
    function_types: list[str] | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"data": data}
    for key, value in (
        ("topics", topics),
        ("attributes", attributes),
        ("function_types", function_types),
    ):
        if value:
            body[key] = value
    return body


def checked(response: httpx.Response) -> Any:
    """The decoded body of a success, or TidingsClientError with the broker's code."""
    return answered(response.status_code, response.content)


def answered(status: int, body: bytes) -> Any:
    """The same from a status and a body, whatever carried them."""
    if status < 400:
        return orjson.loads(body) if body else None
    raise refused(status, body)


def refused(status: int, body: bytes | bytearray | None) -> TidingsClientError:
    try:
        err = orjson.loads(bytes(body or b""))["error"]
        return TidingsClientError(status, err["code"], err["message"], err.get("field"))
    except (orjson.JSONDecodeError, KeyError, TypeError):
        text = bytes(body or b"").decode(errors="replace")[:200]
        return TidingsClientError(status, "http_error", text or f"HTTP {status}")


def status_of(code: str) -> int:
    """The HTTP status the catalogue gives a code (for errors sent over the stream)."""
    known = {c.value: status for c, (status, _) in CATALOGUE.items()}
    return known.get(code, 400)


PASSING = (502, 503, 504)  # a balancer with no broker behind it yet, a broker not ready


def passing(exc: TidingsClientError) -> bool:
    """Worth trying again later: the broker could not be reached, or a proxy or the broker
    said it cannot answer now. Anything else is a refusal that trying again will not mend."""
    return exc.status == 0 or exc.status in PASSING


def unreachable(url: str, exc: Exception) -> TidingsClientError:
    return TidingsClientError(0, "unreachable", f"cannot reach the broker at {url}: {exc}")


class Backoff:
    """Delays between reconnection attempts: doubling from `first_s` up to `most_s`, each
    drawn between half and all of that (jitter, so clients of a restarted broker do not
    come back in step); `reset()` after a success."""

    def __init__(self, first_s: float = 0.1, most_s: float = 5.0) -> None:
        self.first_s, self.most_s = first_s, most_s
        self.attempts = 0

    def next(self) -> float:
        ceiling = min(self.most_s, self.first_s * 2**self.attempts)
        self.attempts += 1
        return random.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.attempts = 0
