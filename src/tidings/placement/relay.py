"""Geography on one machine, in user space: a TCP relay that holds every chunk for a delay.

This machine's kernel has no `netem` queueing discipline, so each emulated link (a client to a
region, a region to a region) is a relay on 127.0.0.1: it accepts a connection, opens one to
its target, and copies bytes both ways, each chunk written `delay` seconds after it was read,
in order. HTTP requests, responses and WebSocket frames all cross it: a one-way trip costs
`delay`, a round trip twice that.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

CHUNK = 65_536


class DelayRelay:
    """`relay = DelayRelay(target_port, 0.05); port = await relay.start()`; then `close()`."""

    def __init__(self, target_port: int, delay_s: float, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.delay_s = delay_s
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def close(self) -> None:
        """Stop accepting, close every connection, wait for their pumps to end."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=self.delay_s + 1.0)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        self._writers |= {writer, up_writer}
        try:
            await asyncio.gather(
                _pump(reader, up_writer, self.delay_s), _pump(up_reader, writer, self.delay_s)
            )
        finally:
            for w in (writer, up_writer):
                w.close()
                self._writers.discard(w)
            self._tasks.discard(task)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy reader to writer, each chunk held until `delay` after it arrived; EOF likewise."""
    loop = asyncio.get_running_loop()
    held: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        while True:
            due, chunk = await held.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not chunk:
                with contextlib.suppress(OSError):
                    writer.write_eof()
                return
            writer.write(chunk)
            await writer.drain()

    sender = asyncio.create_task(send())
    try:
        while True:
            try:
                chunk = await reader.read(CHUNK)
            except OSError:
                chunk = b""
            held.put_nowait((loop.time() + delay, chunk))
            if not chunk:
                break
        await sender
    except (OSError, ConnectionError):
        pass
    finally:
        if not sender.done():
            sender.cancel()
