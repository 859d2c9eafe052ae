"""A real HTTP endpoint on loopback for URL-function tests: it answers from a script of
behaviours keyed by path, and counts the calls it got."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

# path -> (status, body); "/slow" never answers in time, "/flaky" fails once then matches
ANSWERS = {
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

    async def answer(
        self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        lines = head.decode().split("\r\n")
        path = lines[0].split()[1]
        length = next(int(x.split(":")[1]) for x in lines if x.lower().startswith("content-length"))
        self.bodies.append(json.loads(await reader.readexactly(length)))
        self.calls[path] += 1
        if path == "/slow":
            await asyncio.sleep(5)
        status, body = ANSWERS.get(path, (200, b'{"match": true}'))
        if path == "/flaky" and self.calls[path] == 1:
            status, body = 503, b"busy"
        writer.write(
            f"HTTP/1.1 {status} X\r\ncontent-length: {len(body)}\r\n"
            "content-type: application/json\r\n\r\n".encode()
            + body
        )
        await writer.drain()


@asynccontextmanager
async def endpoint() -> AsyncIterator[Endpoint]:
    ep = Endpoint()
    server = await asyncio.start_server(ep.handle, "127.0.0.1", 0)
    ep.port = server.sockets[0].getsockname()[1]
    async with server:
        yield ep
        server.close()
