"""Encoding leased messages and dead letters one by one, so that one that cannot be encoded
never fails the answer for the others: a message is dead-lettered alone with the reason, a
dead letter or a browsed message is listed without its body.

Each is encoded from its wire shape by orjson (through `msgspec.to_builtins`), not msgspec:
what cannot be served here is what the push channels (`tidings.delivery.frames`, orjson)
cannot serve either, nested past orjson's depth, say."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec
import orjson

from tidings.broker import Broker
from tidings.store.base import Message

ENCODE_ERRORS = (orjson.JSONEncodeError, TypeError, ValueError)
R = TypeVar("R")  # a record read from the store
S = TypeVar("S", bound=msgspec.Struct)  # its wire shape, which has a `body`


def encoded(shape: Any) -> msgspec.Raw:
    return msgspec.Raw(orjson.dumps(msgspec.to_builtins(shape)))


async def servable(
    broker: Broker, subscriber_id: str, messages: Sequence[Message], shape: Callable[[Message], Any]
) -> dict[str, msgspec.Raw]:
    """Each message as encoded JSON, by receipt; one that does not encode is dead-lettered
    instead."""
    out = {}
    for m in messages:
        try:
            out[m.receipt] = encoded(shape(m))
        except ENCODE_ERRORS as exc:
            await broker.reject(subscriber_id, m, f"unservable: {exc}")
    return out


def listable(records: Sequence[R], shape: Callable[[R], S]) -> list[msgspec.Raw]:
    """Each record (a dead letter, a waiting message) as encoded JSON; one whose body does not
    encode has `"body": null`."""
    out = []
    for d in records:
        item = shape(d)
        try:
            out.append(encoded(item))
        except ENCODE_ERRORS:
            out.append(encoded(msgspec.structs.replace(item, body=None)))
    return out
