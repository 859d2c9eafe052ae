"""A real HTTP endpoint on loopback for URL-function tests: it answers from a script of
behaviours keyed by the path's first segment, and counts the calls it got (by whole path)
and the ones it holds at once."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

# path -> (status, body); "/slow" never answers in time, "/flaky" fails once then matches,
# "/hold" answers once `release` is set, "/trickle" sends its answer a byte at a time, endlessly
BIG = b'{"match": true, "pad": "' + b"x" * 100_000 + b'"}'
ANSWERS = {
    "/big": (200, BIG),
    "/yes": (200, b'{"match": true}'),
    "/no": (200, b'{"match": false}'),
    "/broken": (500, b"oops"),
    "/nonsense": (200, b'{"match": "maybe"}'),
}


class Endpoint:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.bodies: list[object] = []
        self.port = 0
        self.release = asyncio.Event()
        self.holding = 0  # "/hold" calls held now, and at most at once
        self.most_holding = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                await self.answer(head, reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def hold(self) -> None:
        self.holding += 1
        self.most_holding = max(self.most_holding, self.holding)
        try:
            await self.release.wait()
        finally:
            self.holding -= 1

    async def answer(
        self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        lines = head.decode().split("\r\n")
        path = lines[0].split()[1]
        length = next(int(x.split(":")[1]) for x in lines if x.lower().startswith("content-length"))
        self.bodies.append(json.loads(await reader.readexactly(length)))
        self.calls[path] += 1
        first = "/" + path.split("?")[0].split("/")[1]
        if first == "/trickle":
            await _trickle(writer)
        if first == "/slow":
            await asyncio.sleep(5)
        if first == "/hold":
            await self.hold()
        status, body = ANSWERS.get(first, (200, b'{"match": true}'))
        if path == "/flaky" and self.calls[path] == 1:
            status, body = 503, b"busy"
        writer.write(
            f"HTTP/1.1 {status} X\r\ncontent-length: {len(body)}\r\n"
            "content-type: application/json\r\n\r\n".encode()
            + body
        )
        await writer.drain()


async def _trickle(writer: asyncio.StreamWriter) -> None:
    """A chunked answer that never ends: one byte every 50 ms until the caller hangs up."""
    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\n{\r\n")
    while True:
        await asyncio.sleep(0.05)
        writer.write(b"1\r\n \r\n")
        await writer.drain()


@asynccontextmanager
async def endpoint() -> AsyncIterator[Endpoint]:
    ep = Endpoint()
    server = await asyncio.start_server(ep.handle, "127.0.0.1", 0)
    ep.port = server.sockets[0].getsockname()[1]
    async with server:
        yield ep
        server.close()
