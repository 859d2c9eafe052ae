"""What a subscriber receives for a leased message, on every channel (a pull, the stream,
a webhook), and encoding messages one by one so that one that cannot be encoded never fails
the others: it is dead-lettered alone, with the reason."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from tidings.store.base import Message

if TYPE_CHECKING:
    from tidings.broker import Broker

ENCODE_ERRORS = (orjson.JSONEncodeError, TypeError, ValueError)


def message_json(m: Message) -> dict[str, Any]:
    return {
        "id": m.id,
        "receipt": m.receipt,
        "attempt": m.attempt,
        "publication_id": m.publication_id,
        "subscription_ids": list(m.subscription_ids),
        "enqueued_at": m.enqueued_at,
        "body": m.body,
    }


async def servable(
    broker: Broker,
    subscriber_id: str,
    messages: Sequence[Message],
    shape: Callable[[Message], dict[str, Any]],
) -> dict[str, orjson.Fragment]:
    """Each message as encoded JSON, by receipt; one that does not encode is dead-lettered
    instead."""
    out = {}
    for m in messages:
        try:
            out[m.receipt] = orjson.Fragment(orjson.dumps(shape(m)))
        except ENCODE_ERRORS as exc:
            await broker.reject(subscriber_id, m, f"unservable: {exc}")
    return out
