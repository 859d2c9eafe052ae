"""What a delivered message looks like on the wire, for pull answers and every push channel.

Bodies are embedded as the bytes stored at publishing (`orjson.Fragment`): a frame of a
hundred messages is one encoding of the envelopes, with no body decoded or encoded again.

Two forms (docs/api.md): `full` (the default) and `compact`, which leaves out what the
rest repeats: the publication id (it is the body's `id`), the message id (the receipt
begins with it), the enqueueing time, and the attempt when it is the first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import orjson

from tidings.store.base import Message

Form = Literal["full", "compact"]
FORMS: tuple[Form, ...] = ("full", "compact")


def message_json(m: Message) -> dict[str, Any]:
    return {
        "id": m.id,
        "receipt": m.receipt,
        "attempt": m.attempt,
        "publication_id": m.publication_id,
        "subscription_ids": list(m.subscription_ids),
        "enqueued_at": m.enqueued_at,
        "body": orjson.Fragment(m.raw),
    }


def compact_json(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {
        "receipt": m.receipt,
        "subscription_ids": list(m.subscription_ids),
        "body": orjson.Fragment(m.raw),
    }
    if m.attempt != 1:
        out["attempt"] = m.attempt
    return out


SHAPES = {"full": message_json, "compact": compact_json}


def messages_frame(messages: Sequence[Message], form: Form = "full") -> bytes:
    """One stream frame (or webhook request body) carrying `messages`."""
    shape = SHAPES[form]
    return orjson.dumps({"type": "messages", "messages": [shape(m) for m in messages]})


def messages_answer(messages: Sequence[Message], form: Form = "full") -> bytes:
    """A pull's answer."""
    shape = SHAPES[form]
    return orjson.dumps({"messages": [shape(m) for m in messages]})
