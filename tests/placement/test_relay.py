"""The delaying relay: bytes arrive whole, in order, and never before their delay."""

from __future__ import annotations

import asyncio
import time

from tidings.placement.relay import DelayRelay


async def echo_server() -> tuple[asyncio.Server, int]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    return server, int(server.sockets[0].getsockname()[1])


async def test_a_round_trip_through_the_relay_takes_at_least_twice_its_delay() -> None:
    server, port = await echo_server()
    relay = DelayRelay(port, 0.05)
    await relay.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
    started = time.monotonic()
    writer.write(b"ping")
    await writer.drain()
    assert await reader.readexactly(4) == b"ping"
    assert time.monotonic() - started >= 0.1
    writer.close()
    await relay.close()
    server.close()


async def test_many_chunks_arrive_whole_and_in_order() -> None:
    server, port = await echo_server()
    relay = DelayRelay(port, 0.01)
    await relay.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
    sent = b"".join(i.to_bytes(4, "big") for i in range(20_000))
    for at in range(0, len(sent), 3_000):
        writer.write(sent[at : at + 3_000])
    await writer.drain()
    writer.write_eof()
    assert await reader.read() == sent
    writer.close()
    await relay.close()
    server.close()
