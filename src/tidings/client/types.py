"""What the client returns, and the one error it raises."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import httpx
import msgspec

from tidings.errors import CATALOGUE
from tidings.wire import admin, v1
from tidings.wire.base import ErrorAnswer, Settled


class TidingsClientError(Exception):
    """The broker refused a call (status, code, field), or could not be reached (status 0)."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None):
        super().__init__(f"{status} {code}: {message}" + (f" ({field})" if field else ""))
        self.status, self.code, self.message, self.field = status, code, message, field


# The answers are the wire shapes the broker encodes them from (`tidings.wire`), under the
# names the client has always given them.
Registration = v1.Registered
Published = v1.Published
Progress = v1.Progress  # a publication's evaluations owed and deliveries so far
AckResult = Settled
Depth = v1.Depth
SubscriberInfo = v1.SubscriberInfo
Subscription = v1.SubscriptionOut
SubscriberRecord = admin.SubscriberRecord
DeadLetter = v1.DeadLetterOut
Queued = v1.QueuedOut  # a waiting message, browsed without leasing it

S = TypeVar("S")  # what settling returns: None (sync client) or an awaitable (asyncio)
Settler = Callable[[str, list[str]], S]  # ("ack" | "nack", receipts)


class Message(msgspec.Struct, Generic[S], frozen=True):
    """A delivered message, in the full form (`tidings.wire.v1.MessageOut` with every field).
    `ack()` / `nack()` settle it through whatever delivered it (the HTTP queue or the
    stream); on the asyncio client they are awaited."""

    id: int
    receipt: str
    attempt: int
    publication_id: str
    subscription_ids: list[str]
    enqueued_at: float
    body: Any
    settler: Any = None  # a Settler[S]: set by the client, never on the wire

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
        settler: Settler[S] = self.settler
        return settler(kind, [self.receipt])


Pulled = dict[str, list[Message[Any]]]  # a pull's answer, as the client reads it


def settled_by(found: list[Message[Any]], settler: Settler[S] | None) -> list[Message[S]]:
    """The messages, each settled through `settler`."""
    return [msgspec.structs.replace(m, settler=settler) for m in found]


def messages(raw: Any, settler: Settler[S] | None = None) -> list[Message[S]]:
    """Messages from already decoded values (a stream frame's), settled through `settler`."""
    return settled_by(msgspec.convert(raw, list[Message[Any]]), settler)


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
    dedup_id: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"data": data}
    for key, value in (
        ("topics", topics),
        ("attributes", attributes),
        ("function_types", function_types),
        ("dedup_id", dedup_id),
    ):
        if value:
            body[key] = value
    return body


T = TypeVar("T")


def checked(response: httpx.Response, parse: Callable[[bytes], T]) -> T:
    """The parsed body of a success, or TidingsClientError with the broker's code."""
    return answered(response.status_code, response.content, parse)


def answered(status: int, body: bytes, parse: Callable[[bytes], T]) -> T:
    """The same from a status and a body, whatever carried them."""
    if status < 400:
        return parse(body)
    raise refused(status, body)


def refused(status: int, body: bytes | bytearray | None) -> TidingsClientError:
    try:
        err = msgspec.json.decode(bytes(body or b""), type=ErrorAnswer).error
        return TidingsClientError(status, err.code, err.message, err.field)
    except msgspec.DecodeError:
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
