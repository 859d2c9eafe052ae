"""Encoding dead letters one by one, so that one that cannot be encoded never fails the
answer for the others: it is listed without its body. (Leased messages: `servable`, in
`tidings.delivery.wire`, shared with the webhooks.)"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from tidings.delivery.wire import ENCODE_ERRORS, servable
from tidings.store.base import DeadLetter

__all__ = ["listable", "servable"]


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
