"""AMQP 0-9-1 frames and the few methods the load tool uses, encoded and decoded by hand.

A frame is `type:octet channel:short size:long payload frame-end(0xCE)`; a method frame's
payload starts with `class-id:short method-id:short`. Strings are `shortstr` (octet length)
or `longstr` (long length); bits of consecutive bit fields share one octet, low bit first.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_END = 0xCE
METHOD, HEADER, BODY, HEARTBEAT = 1, 2, 3, 8
HEAD = struct.Struct(">BHI")
DELIVERY_MODE_FLAG = 0x1000  # basic properties: bit 12 of the property flags
PERSISTENT = 2

# (class-id, method-id)
START, START_OK, TUNE, TUNE_OK = (10, 10), (10, 11), (10, 30), (10, 31)
OPEN, OPEN_OK, CLOSE, CLOSE_OK = (10, 40), (10, 41), (10, 50), (10, 51)
CHANNEL_OPEN, CHANNEL_OPEN_OK = (20, 10), (20, 11)
CHANNEL_CLOSE, CHANNEL_CLOSE_OK = (20, 40), (20, 41)
EXCHANGE_DECLARE, EXCHANGE_DECLARE_OK = (40, 10), (40, 11)
QUEUE_DECLARE, QUEUE_DECLARE_OK = (50, 10), (50, 11)
QUEUE_BIND, QUEUE_BIND_OK = (50, 20), (50, 21)
QUEUE_DELETE, QUEUE_DELETE_OK = (50, 40), (50, 41)
BASIC_QOS, BASIC_QOS_OK = (60, 10), (60, 11)
BASIC_CONSUME, BASIC_CONSUME_OK = (60, 20), (60, 21)
BASIC_PUBLISH, BASIC_DELIVER = (60, 40), (60, 60)
BASIC_ACK, BASIC_NACK = (60, 80), (60, 120)
CONFIRM_SELECT, CONFIRM_SELECT_OK = (85, 10), (85, 11)


class FrameError(Exception):
    """Bytes that are not AMQP frames."""


class Frame(NamedTuple):
    kind: int
    channel: int
    payload: bytes


def shortstr(text: str) -> bytes:
    raw = text.encode()
    if len(raw) > 255:
        raise ValueError(f"a shortstr holds at most 255 bytes: {text[:40]!r}...")
    return bytes([len(raw)]) + raw


def longstr(raw: bytes) -> bytes:
    return struct.pack(">I", len(raw)) + raw


def table(fields: dict[str, str]) -> bytes:
    """A field table of text values (type 'S', a longstr each)."""
    body = b"".join(shortstr(k) + b"S" + longstr(v.encode()) for k, v in fields.items())
    return longstr(body)


def bits(*flags: bool) -> bytes:
    return bytes([sum(1 << i for i, flag in enumerate(flags) if flag)])


def start_ok(product: str, user: str, password: str) -> bytes:
    """connection.start-ok's arguments: client properties, PLAIN and its response, locale."""
    response = b"\0" + user.encode() + b"\0" + password.encode()
    return table({"product": product}) + shortstr("PLAIN") + longstr(response) + shortstr("en_US")


def frame(kind: int, channel: int, payload: bytes) -> bytes:
    return HEAD.pack(kind, channel, len(payload)) + payload + b"\xce"


def method(channel: int, ids: tuple[int, int], arguments: bytes = b"") -> bytes:
    return frame(METHOD, channel, struct.pack(">HH", *ids) + arguments)


def content_header(channel: int, body_size: int, persistent: bool) -> bytes:
    """A basic content header: class 60, weight 0, the body's size, delivery-mode if set."""
    flags = DELIVERY_MODE_FLAG if persistent else 0
    properties = struct.pack(">HB", flags, PERSISTENT) if persistent else struct.pack(">H", flags)
    return frame(HEADER, channel, struct.pack(">HHQ", 60, 0, body_size) + properties)


def publish_prefix(channel: int, exchange: str, routing_key: str) -> bytes:
    """basic.publish (not mandatory, not immediate): the same bytes for every message."""
    arguments = b"\x00\x00" + shortstr(exchange) + shortstr(routing_key) + bits(False, False)
    return method(channel, BASIC_PUBLISH, arguments)


def body_frames(channel: int, body: bytes, frame_max: int) -> bytes:
    room = frame_max - 8  # a frame's own header and end
    if len(body) <= room:
        return HEAD.pack(BODY, channel, len(body)) + body + b"\xce"
    return b"".join(frame(BODY, channel, body[i : i + room]) for i in range(0, len(body), room))


class FrameReader:
    """Frames out of a byte stream fed in pieces as they arrive."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        buffer = self._buffer
        buffer += data
        frames, position, have = [], 0, len(buffer)
        while have - position >= 7:
            kind, channel, size = HEAD.unpack_from(buffer, position)
            end = position + 7 + size
            if end >= have:
                break
            if buffer[end] != FRAME_END:
                raise FrameError(f"frame end {buffer[end]:#x}, not 0xce, after {size} bytes")
            frames.append(Frame(kind, channel, bytes(buffer[position + 7 : end])))
            position = end + 1
        del buffer[:position]
        return frames


def method_ids(payload: bytes) -> tuple[int, int]:
    ids: tuple[int, int] = struct.unpack_from(">HH", payload)
    return ids


def read_shortstr(payload: bytes, at: int) -> tuple[str, int]:
    size = payload[at]
    return payload[at + 1 : at + 1 + size].decode(), at + 1 + size


def deliver_tag(payload: bytes) -> int:
    """basic.deliver's delivery-tag: after the ids and the consumer-tag (a shortstr)."""
    at = 4 + 1 + payload[4]
    tag: int = struct.unpack_from(">Q", payload, at)[0]
    return tag


def ack_of(payload: bytes) -> tuple[int, bool]:
    """basic.ack or basic.nack: the delivery-tag and whether it covers every tag up to it."""
    tag, flags = struct.unpack_from(">QB", payload, 4)
    return tag, bool(flags & 1)


def body_size(payload: bytes) -> int:
    """A content header's body size (after class-id and weight)."""
    size: int = struct.unpack_from(">Q", payload, 4)[0]
    return size


def tune_of(payload: bytes) -> tuple[int, int, int]:
    """connection.tune: channel-max, frame-max, heartbeat."""
    tune: tuple[int, int, int] = struct.unpack_from(">HIH", payload, 4)
    return tune


def close_reason(payload: bytes) -> str:
    """connection.close or channel.close: reply code and text, and the method that failed."""
    (code,) = struct.unpack_from(">H", payload, 4)
    text, at = read_shortstr(payload, 6)
    class_id, method_id = struct.unpack_from(">HH", payload, at)
    return f"{code} {text} (method {class_id}.{method_id})"


def declare_ok_count(payload: bytes) -> int:
    """queue.declare-ok: the messages the queue holds."""
    _, at = read_shortstr(payload, 4)
    count: int = struct.unpack_from(">I", payload, at)[0]
    return count
