"""A lean AMQP 0-9-1 client over asyncio streams, for the load tool: one channel per
connection, synchronous methods one at a time, publishes pipelined in one write with their
publisher confirms awaited per window, and deliveries handed on as they are parsed with one
`basic.ack multiple` per read from the socket.

aio-pika's per-message futures and callbacks held RabbitMQ to ~2,000 msg/s on this machine
class; this client leaves the broker as the bottleneck.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from tidings.sim.perf.targets import amqp_wire as w

READ_CHUNK = 256 * 1024
CHANNEL = 1
OnDelivery = Callable[[bytes, int], None]  # body, receive time (time.time_ns)


class AmqpError(Exception):
    """The broker closed the channel or the connection (its reply code and text)."""


@dataclass
class Window:
    """Publishes sent in one write, waiting for their confirms."""

    first: int
    last: int
    done: asyncio.Future[None]


@dataclass
class Confirms:
    """Publisher confirms: delivery tags count from 1 per channel; the broker acks (or nacks)
    a tag, or with `multiple` every tag up to it."""

    next_tag: int = 1
    acked_upto: int = 0
    singles: set[int] = field(default_factory=set)
    nacked: list[tuple[int, int]] = field(default_factory=list)  # tag ranges, both ends in
    windows: deque[Window] = field(default_factory=deque)

    def reserve(self, count: int) -> Window:
        window = Window(self.next_tag, self.next_tag + count - 1, _future())
        self.next_tag += count
        self.windows.append(window)
        return window

    def settle(self, tag: int, multiple: bool, nack: bool) -> None:
        if nack:
            self.nacked.append((self.acked_upto + 1 if multiple else tag, tag))
        if multiple:
            self.acked_upto = max(self.acked_upto, tag)
        else:
            self.singles.add(tag)
        while self.acked_upto + 1 in self.singles:
            self.acked_upto += 1
            self.singles.discard(self.acked_upto)
        self._release()

    def _release(self) -> None:
        while self.windows and self.windows[0].last <= self.acked_upto:
            window = self.windows.popleft()
            failed = [lo for lo, hi in self.nacked if lo <= window.last and hi >= window.first]
            self.nacked = [(lo, hi) for lo, hi in self.nacked if hi > window.last]
            if failed:
                window.done.set_exception(AmqpError(f"the broker nacked tag {failed[0]}"))
            else:
                window.done.set_result(None)

    def fail(self, error: Exception) -> None:
        while self.windows:
            done = self.windows.popleft().done
            if not done.done():
                done.set_exception(error)


def _future() -> asyncio.Future[None]:
    return asyncio.get_running_loop().create_future()


@dataclass
class BasicDeliver:
    """The content of a basic.deliver as its frames arrive."""

    tag: int = 0
    size: int = 0
    pieces: list[bytes] = field(default_factory=list)
    have: int = 0


class AmqpConnection:
    """One connection, channel 1 open on it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.frames = w.FrameReader()
        self.frame_max = 131_072
        self.confirms: Confirms | None = None
        self.on_delivery: OnDelivery | None = None
        self.error: Exception | None = None
        self._ready: deque[w.Frame] = deque()
        self._replies: asyncio.Queue[bytes | Exception] = asyncio.Queue()
        self._delivery: BasicDeliver | None = None
        self._reading: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, url: str) -> AmqpConnection:
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(
            parts.hostname or "127.0.0.1", parts.port or 5672, limit=READ_CHUNK
        )
        connection = cls(reader, writer)
        user, password = unquote(parts.username or "guest"), unquote(parts.password or "guest")
        vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
        await connection._handshake(user, password, vhost)
        return connection

    async def _handshake(self, user: str, password: str, vhost: str) -> None:
        self.writer.write(w.PROTOCOL_HEADER)
        await self._expect(w.START)
        self._send(w.START_OK, w.start_ok("tidings perf", user, password), 0)
        channel_max, frame_max, _ = w.tune_of(await self._expect(w.TUNE))
        self.frame_max = frame_max or self.frame_max
        self._send(w.TUNE_OK, struct.pack(">HIH", channel_max, self.frame_max, 0), 0)
        self._send(w.OPEN, w.shortstr(vhost) + w.shortstr("") + w.bits(False), 0)
        await self._expect(w.OPEN_OK)
        self._send(w.CHANNEL_OPEN, w.shortstr(""))
        await self._expect(w.CHANNEL_OPEN_OK)
        self._reading = asyncio.create_task(self._read())

    async def _expect(self, ids: tuple[int, int]) -> bytes:
        """Before the reader task runs: the next frame, which must be method `ids`."""
        while not self._ready:
            data = await self.reader.read(READ_CHUNK)
            if not data:
                raise ConnectionResetError("the broker closed the connection in the handshake")
            self._ready.extend(self.frames.feed(data))
        frame = self._ready.popleft()
        got = w.method_ids(frame.payload)
        if got in (w.CLOSE, w.CHANNEL_CLOSE):
            raise AmqpError(w.close_reason(frame.payload))
        if got != ids:
            raise AmqpError(f"expected method {ids}, got {got}")
        return frame.payload

    def _send(self, ids: tuple[int, int], arguments: bytes = b"", channel: int = CHANNEL) -> None:
        self.writer.write(w.method(channel, ids, arguments))

    async def call(self, ids: tuple[int, int], arguments: bytes, reply: tuple[int, int]) -> bytes:
        """A synchronous method and its answer (one at a time on the channel)."""
        self._raise()
        self._send(ids, arguments)
        answer = await self._replies.get()
        if isinstance(answer, Exception):
            raise answer
        if w.method_ids(answer) != reply:
            raise AmqpError(f"expected method {reply}, got {w.method_ids(answer)}")
        return answer

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error

    async def _read(self) -> None:
        try:
            while True:
                data = await self.reader.read(READ_CHUNK)
                if not data:
                    raise ConnectionResetError("the broker closed the connection")
                last_tag = self._dispatch(self.frames.feed(data), time.time_ns())
                if last_tag:  # one ack for every delivery this read carried
                    self._send(w.BASIC_ACK, struct.pack(">QB", last_tag, 1))
        except (OSError, AmqpError, w.FrameError) as exc:
            self._fail(exc)

    def _dispatch(self, frames: list[w.Frame], at_ns: int) -> int:
        """Handle the frames of one read; the last delivery tag completed among them."""
        last_tag = 0
        for frame in frames:
            if frame.kind == w.METHOD:
                self._on_method(frame.payload)
            elif frame.kind == w.HEADER and self._delivery is not None:
                self._delivery.size = w.body_size(frame.payload)
                last_tag = self._complete(at_ns) or last_tag
            elif frame.kind == w.BODY and self._delivery is not None:
                self._delivery.pieces.append(frame.payload)
                self._delivery.have += len(frame.payload)
                last_tag = self._complete(at_ns) or last_tag
        return last_tag

    def _complete(self, at_ns: int) -> int:
        """Hand on the delivery under way if all its body is here; its tag, else 0."""
        delivery = self._delivery
        assert delivery is not None
        if delivery.have < delivery.size:
            return 0
        self._delivery = None
        if self.on_delivery is not None:
            self.on_delivery(b"".join(delivery.pieces), at_ns)
        return delivery.tag

    def _on_method(self, payload: bytes) -> None:
        ids = w.method_ids(payload)
        if ids == w.BASIC_DELIVER:
            self._delivery = BasicDeliver(tag=w.deliver_tag(payload))
        elif ids in (w.BASIC_ACK, w.BASIC_NACK) and self.confirms is not None:
            tag, multiple = w.ack_of(payload)
            self.confirms.settle(tag, multiple, ids == w.BASIC_NACK)
        elif ids in (w.CLOSE, w.CHANNEL_CLOSE):
            self._send(w.CLOSE_OK if ids == w.CLOSE else w.CHANNEL_CLOSE_OK, b"", 0)
            raise AmqpError(w.close_reason(payload))
        else:
            self._replies.put_nowait(payload)

    def _fail(self, error: Exception) -> None:
        self.error = error
        self._replies.put_nowait(error)
        if self.confirms is not None:
            self.confirms.fail(error)

    async def select_confirms(self) -> None:
        await self.call(w.CONFIRM_SELECT, w.bits(False), w.CONFIRM_SELECT_OK)
        self.confirms = Confirms()

    async def publish(self, prefix: bytes, header: bytes, bodies: list[bytes]) -> None:
        """Every body in one write; with confirms selected, return once all are confirmed."""
        self._raise()
        channel, frame_max = CHANNEL, self.frame_max
        frames = [prefix + header + w.body_frames(channel, body, frame_max) for body in bodies]
        window = self.confirms.reserve(len(bodies)) if self.confirms is not None else None
        self.writer.write(b"".join(frames))
        await self.writer.drain()
        if window is not None:
            await window.done

    async def close(self) -> None:
        if self.error is None:
            arguments = struct.pack(">H", 200) + w.shortstr("bye") + struct.pack(">HH", 0, 0)
            self._send(w.CLOSE, arguments, 0)
            with contextlib.suppress(TimeoutError, AmqpError, OSError):
                await asyncio.wait_for(self._replies.get(), 5)  # close-ok
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()
