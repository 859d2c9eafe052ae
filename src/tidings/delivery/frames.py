"""What a delivered message looks like on the wire, for pull answers and every push channel.

Bodies are embedded as the bytes stored at publishing (`msgspec.Raw`): a frame of a
hundred messages is one encoding of the envelopes, with no body decoded or encoded again.

Two forms (docs/api.md): `full` (the default) and `compact`, which leaves out what the
rest repeats: the publication id (it is the body's `id`), the message id (the receipt
begins with it), the enqueueing time, and the attempt when it is the first.

Two encodings: JSON (the default), and MessagePack for subscribers that want binary data as
binary: a body published with binary `data` (kept as base64 text, `data_encoding: base64`)
gets its bytes back as `bin`. MessagePack frames decode each body once to re-encode it: the
price of the option, paid only by who asks for it.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, Literal

import msgspec
import orjson
from msgspec import UNSET, Raw

from tidings.store.base import Message
from tidings.wire.v1 import MessageOut, Messages, MessagesFrame

# A pull's or a push's batch carries at most this many bytes of bodies (and at most its
# count): one message larger than that goes alone. A client that reads less says so
# (`max_bytes`), and its batches are bounded by half of that, the rest left to envelopes.
BATCH_BYTES = 1024 * 1024
ENVELOPE_BYTES = 64 * 1024  # one message's envelope, at most (receipt, ids, subscription ids)


def largest_message(max_publication_bytes: int) -> int:
    """The largest answer or frame carrying one message: its body is the publication as
    published, binary data as base64 (4/3 of it), plus the envelope."""
    return -(-max_publication_bytes * 4 // 3) + ENVELOPE_BYTES


def largest_answer(max_publication_bytes: int) -> int:
    """What a client must accept to read any answer or frame of this broker."""
    return max(2 * BATCH_BYTES, largest_message(max_publication_bytes)) + ENVELOPE_BYTES


def batch_bytes(client_max: int | None) -> int:
    """The bodies' bytes of one batch, at most, for a client that reads `client_max`."""
    return BATCH_BYTES if client_max is None else max(1, min(BATCH_BYTES, client_max // 2))


Form = Literal["full", "compact"]
FORMS: tuple[Form, ...] = ("full", "compact")
Encoding = Literal["json", "msgpack"]
ENCODINGS: tuple[Encoding, ...] = ("json", "msgpack")


def message_out(m: Message, form: Form, body: Any) -> MessageOut:
    """One message in its wire shape (`tidings.wire.v1.MessageOut`, the one definition)."""
    ids = list(m.subscription_ids)
    if form == "compact":
        return MessageOut(m.receipt, ids, body, m.attempt if m.attempt != 1 else UNSET)
    return MessageOut(m.receipt, ids, body, m.attempt, m.id, m.publication_id, m.enqueued_at)


_JSON = msgspec.json.Encoder()


def messages_frame(messages: Sequence[Message], form: Form = "full") -> bytes:
    """One stream frame carrying `messages`."""
    return _JSON.encode(MessagesFrame([message_out(m, form, Raw(m.raw)) for m in messages]))


def messages_answer(messages: Sequence[Message], form: Form = "full") -> bytes:
    """A pull's answer (and a webhook request's body)."""
    return _JSON.encode(Messages([message_out(m, form, Raw(m.raw)) for m in messages]))


def binary_body(raw: bytes) -> Any:
    """A stored body as a value, its base64 `data` as bytes again."""
    body = orjson.loads(raw)
    if isinstance(body, dict) and body.get("data_encoding") == "base64":
        del body["data_encoding"]
        body["data"] = base64.b64decode(body["data"])
    return body


def _packed(messages: Sequence[Message], form: Form) -> list[MessageOut]:
    return [message_out(m, form, binary_body(m.raw)) for m in messages]


def msgpack_frame(messages: Sequence[Message], form: Form = "full") -> bytes:
    """`messages_frame` in MessagePack."""
    return msgspec.msgpack.encode(MessagesFrame(_packed(messages, form)))


def msgpack_answer(messages: Sequence[Message], form: Form = "full") -> bytes:
    """`messages_answer` in MessagePack."""
    return msgspec.msgpack.encode(Messages(_packed(messages, form)))
