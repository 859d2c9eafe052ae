"""Encoding leased messages and dead letters one by one, so that one that cannot be encoded
never fails the answer for the others: a message is dead-lettered alone with the reason, a
dead letter is listed without its body."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from tidings.broker import Broker
from tidings.store.base import DeadLetter, Message

ENCODE_ERRORS = (orjson.JSONEncodeError, TypeError, ValueError)


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


def listable(
    letters: Sequence[DeadLetter], shape: Callable[[DeadLetter], dict[str, Any]]
) -> list[orjson.Fragment]:
    """Each dead letter as encoded JSON; one whose body does not encode has `"body": null`."""
    out = []
    for d in letters:
        item = shape(d)
        try:
            out.append(orjson.Fragment(orjson.dumps(item)))
        except ENCODE_ERRORS:
            out.append(orjson.Fragment(orjson.dumps({**item, "body": None})))
    return out
