"""MQTT 3.1.1 control packets the load tool uses, encoded and decoded by hand.

A packet is a fixed header (`type << 4 | flags`, then the remaining length as a variable
byte integer: 7 bits a byte, low first, high bit = more), a variable header and a payload.
Strings are UTF-8 with a two-byte length.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

CONNECT, CONNACK, PUBLISH, PUBACK = 1, 2, 3, 4
SUBSCRIBE, SUBACK, DISCONNECT = 8, 9, 14
MAX_REMAINING = 268_435_455  # four bytes of variable length


class PacketError(Exception):
    """Bytes that are not MQTT packets."""


class Packet(NamedTuple):
    kind: int
    flags: int
    body: bytes


def remaining_length(size: int) -> bytes:
    if not 0 <= size <= MAX_REMAINING:
        raise ValueError(f"remaining length {size} out of range")
    out = bytearray()
    while True:
        size, digit = divmod(size, 128)
        out.append(digit | (0x80 if size else 0))
        if not size:
            return bytes(out)


def string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def packet(kind: int, flags: int, body: bytes) -> bytes:
    return bytes([kind << 4 | flags]) + remaining_length(len(body)) + body


def connect(client_id: str, clean_session: bool, keep_alive_s: int = 0) -> bytes:
    flags = 0x02 if clean_session else 0x00
    variable = string("MQTT") + bytes([4, flags]) + struct.pack(">H", keep_alive_s)
    return packet(CONNECT, 0, variable + string(client_id))


def publish_qos0(topic: str, payload: bytes) -> bytes:
    return packet(PUBLISH, 0, string(topic) + payload)


def publish_qos1(topic: bytes, packet_id: int, payload: bytes) -> bytes:
    """`topic` already encoded with `string` (the same for every message of a topic)."""
    body_size = len(topic) + 2 + len(payload)
    return (
        bytes([PUBLISH << 4 | 0x02])
        + remaining_length(body_size)
        + topic
        + _id(packet_id)
        + payload
    )


def puback(packet_id: int) -> bytes:
    return b"\x40\x02" + _id(packet_id)


def subscribe(packet_id: int, topic: str, qos: int) -> bytes:
    return packet(SUBSCRIBE, 0x02, _id(packet_id) + string(topic) + bytes([qos]))


def disconnect() -> bytes:
    return b"\xe0\x00"


def _id(packet_id: int) -> bytes:
    return struct.pack(">H", packet_id)


class PublishPacket(NamedTuple):
    """An incoming MQTT PUBLISH, decoded."""

    topic: str
    packet_id: int  # 0 at QoS 0
    payload: bytes


def publish_of(incoming: Packet) -> PublishPacket:
    (size,) = struct.unpack_from(">H", incoming.body)
    topic = incoming.body[2 : 2 + size].decode()
    at, qos = 2 + size, (incoming.flags >> 1) & 0x03
    if not qos:
        return PublishPacket(topic, 0, incoming.body[at:])
    (packet_id,) = struct.unpack_from(">H", incoming.body, at)
    return PublishPacket(topic, packet_id, incoming.body[at + 2 :])


def connack_code(incoming: Packet) -> int:
    """0 = accepted; else the refusal's return code."""
    return incoming.body[1]


class PacketReader:
    """Packets out of a byte stream fed in pieces as they arrive."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Packet]:
        buffer = self._buffer
        buffer += data
        packets, position, have = [], 0, len(buffer)
        while have - position >= 2:
            size, start = _read_length(buffer, position + 1, have)
            if start < 0 or start + size > have:
                break
            first = buffer[position]
            packets.append(Packet(first >> 4, first & 0x0F, bytes(buffer[start : start + size])))
            position = start + size
        del buffer[:position]
        return packets


def _read_length(buffer: bytearray, at: int, have: int) -> tuple[int, int]:
    """The remaining length starting at `at`, and where the body starts (-1: not all here)."""
    size, shift = 0, 0
    for index in range(at, min(at + 4, have)):
        digit = buffer[index]
        size |= (digit & 0x7F) << shift
        if not digit & 0x80:
            return size, index + 1
        shift += 7
    if have - at >= 4:
        raise PacketError("a remaining length longer than four bytes")
    return 0, -1
