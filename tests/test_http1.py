"""The lean HTTP/1.1 client against a real server on loopback that answers as scripted:
kept-alive or closing, whole or chunked, slow, or closing an idle connection."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tidings.addresses import Own, networks
from tidings.http1 import AnswerTooLarge, Client, Denied

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
CLOSING = b"HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: 4\r\n\r\nbusy"
UNSIZED = b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"match": true}'
HUGE = b"HTTP/1.1 200 OK\r\nContent-Length: 3000000\r\n\r\n" + b"x" * 3_000_000
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
ENDLESS = {
    "/endless-header": b"HTTP/1.1 200 OK\r\nX-Big: ",
    "/endless-trailer": CHUNKED_HEAD + b"2\r\nok\r\n0\r\nX-Trailer: ",
    "/endless-extension": CHUNKED_HEAD + b"2;e=",
}


@dataclass
class Server:
    """Answers each request with `answers[path]`; `/slow` never answers; `/trickle` answers
    without end; `/once` answers and then closes the connection without saying so."""

    answers: dict[str, bytes]
    port: int = 0
    connections: int = 0
    open_now: int = 0
    most_open: int = 0
    bodies: list[bytes] = field(default_factory=list)
    endless_sent: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                if not await self.answer(head, reader, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open_now -= 1
            writer.close()

    async def answer(
        self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split()[1]
        length = next(int(x.split(":")[1]) for x in lines if x.lower().startswith("content-len"))
        self.bodies.append(await reader.readexactly(length))
        if path == "/slow":
            await asyncio.sleep(10)
        if path in ENDLESS:  # a header line, a trailer or chunk extensions without end
            writer.write(ENDLESS[path])
            while True:
                writer.write(b"a" * 65536)
                self.endless_sent += 65536
                await writer.drain()
        if path == "/trickle":  # a chunked answer that never ends, a byte every 50 ms
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            while True:
                writer.write(b"1\r\nx\r\n")
                await writer.drain()
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.01 if path == "/busy" else 0)
        writer.write(self.answers.get(path, OK))
        await writer.drain()
        return path not in ("/close", "/once", "/unsized")


@asynccontextmanager
async def serving(context: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    answers = {"/chunked": CHUNKED, "/close": CLOSING, "/unsized": UNSIZED, "/huge": HUGE}
    server = Server(answers)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=context)
    server.port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield server


async def test_requests_to_one_origin_reuse_one_kept_alive_connection() -> None:
    async with serving() as server:
        client = Client(per_origin=4, timeout_s=2)
        answers = [await client.post(f"http://127.0.0.1:{server.port}/", b"x") for _ in range(5)]
        client.close()
    assert [(a.status, a.body) for a in answers] == [(200, b"ok")] * 5
    assert server.connections == 1
    assert server.bodies == [b"x"] * 5


async def test_no_more_connections_are_opened_to_an_origin_than_its_bound() -> None:
    async with serving() as server:
        client = Client(per_origin=3, timeout_s=5)
        url = f"http://127.0.0.1:{server.port}/busy"
        answers = await asyncio.gather(*(client.post(url, b"{}") for _ in range(30)))
        client.close()
    assert all(a.status == 200 for a in answers)
    assert server.most_open == server.connections == 3


async def test_a_chunked_answer_is_read_whole() -> None:
    async with serving() as server:
        client = Client(per_origin=1, timeout_s=2)
        answer = await client.post(f"http://127.0.0.1:{server.port}/chunked", b"")
        again = await client.post(f"http://127.0.0.1:{server.port}/", b"")
        client.close()
    assert answer.body == b"abcde"
    assert again.body == b"ok"
    assert server.connections == 1


async def test_an_answer_that_closes_the_connection_is_returned_and_the_next_opens_anew() -> None:
    async with serving() as server:
        client = Client(per_origin=1, timeout_s=2)
        closing = await client.post(f"http://127.0.0.1:{server.port}/close", b"")
        after = await client.post(f"http://127.0.0.1:{server.port}/", b"")
        client.close()
    assert (closing.status, closing.body) == (503, b"busy")
    assert after.status == 200
    assert server.connections == 2


async def test_a_kept_alive_connection_the_server_dropped_is_replaced_and_the_request_resent() -> (
    None
):
    async with serving() as server:
        client = Client(per_origin=1, timeout_s=2)
        await client.post(f"http://127.0.0.1:{server.port}/once", b"first")
        await asyncio.sleep(0.05)  # the server has closed it; the client still holds it
        answer = await client.post(f"http://127.0.0.1:{server.port}/", b"second")
        client.close()
    assert answer.status == 200
    assert server.bodies[-1] == b"second"


async def test_an_answer_that_does_not_come_in_time_is_a_timeout_and_frees_its_slot() -> None:
    async with serving() as server:
        # the next request must be answered within the same bound: room for a loaded machine
        client = Client(per_origin=1, timeout_s=2.0)
        with pytest.raises(TimeoutError):
            await client.post(f"http://127.0.0.1:{server.port}/slow", b"")
        answer = await client.post(f"http://127.0.0.1:{server.port}/", b"")
        client.close()
    assert answer.status == 200


async def test_an_answer_that_trickles_without_end_is_cut_at_the_timeout() -> None:
    async with serving() as server:
        client = Client(per_origin=1, timeout_s=1.0, max_answer=10_000_000)
        call = asyncio.ensure_future(client.post(f"http://127.0.0.1:{server.port}/trickle", b""))
        done, _ = await asyncio.wait({call}, timeout=30)  # the answer itself never ends
        call.cancel()
        assert call in done and isinstance(call.exception(), TimeoutError)
        answer = await client.post(f"http://127.0.0.1:{server.port}/", b"")
        client.close()
    assert answer.status == 200


async def test_an_answer_longer_than_the_client_reads_is_refused_and_its_connection_dropped() -> (
    None
):
    async with serving() as server:
        client = Client(per_origin=1, timeout_s=5, max_answer=100_000)
        with pytest.raises(AnswerTooLarge):
            await client.post(f"http://127.0.0.1:{server.port}/huge", b"")
        answer = await client.post(f"http://127.0.0.1:{server.port}/", b"")
        client.close()
    assert answer.status == 200
    assert server.connections == 2  # the huge answer's connection was not reused


@pytest.mark.parametrize("path", sorted(ENDLESS))
async def test_an_answer_framed_without_end_is_refused_after_a_bounded_read(path: str) -> None:
    async with serving() as server:
        client = Client(per_origin=1, timeout_s=10, max_answer=100_000)
        with pytest.raises(AnswerTooLarge):
            await client.post(f"http://127.0.0.1:{server.port}{path}", b"")
        client.close()
    # read until the timeout, an endless header took 110 MB of the broker a connection; a
    # client that stops reading leaves the writer what the two sockets' buffers hold
    assert server.endless_sent < _socket_buffers() + 1024 * 1024


def _socket_buffers() -> int:
    """The most a loopback writer's send buffer and its reader's receive buffer hold (the
    kernel grows them up to these: 4 MiB and 32 MiB on some machines)."""
    tcp = Path("/proc/sys/net/ipv4")
    return sum(int((tcp / name).read_text().split()[2]) for name in ("tcp_rmem", "tcp_wmem"))


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_a_host_in_a_denied_network_is_refused_before_connecting(host: str) -> None:
    async with serving() as server:
        client = Client(per_origin=1, timeout_s=2, deny=networks("127.0.0.0/8, ::1/128"))
        with pytest.raises(Denied):
            await client.post(f"http://{host}:{server.port}/", b"")
        allowed = Client(per_origin=1, timeout_s=2, deny=networks("169.254.0.0/16"))
        answer = await allowed.post(f"http://{host}:{server.port}/", b"")
        client.close()
        allowed.close()
    assert answer.status == 200
    assert server.connections == 1  # the denied request never connected


async def test_a_closed_port_is_a_connection_error() -> None:
    async with serving() as server:
        port = server.port
    client = Client(per_origin=1, timeout_s=2)
    with pytest.raises(OSError):
        await client.post(f"http://127.0.0.1:{port}/", b"")


@pytest.mark.parametrize("url", ["ftp://example/x", "/relative", "http:///nohost"])
async def test_a_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        await Client(per_origin=1, timeout_s=1).post(url, b"")


async def test_https_verifies_the_server_certificate(tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    new_certificate = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    names = ["-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)]
    subprocess.run([*new_certificate, *names], check=True, capture_output=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    async with serving(context) as server:
        client = Client(per_origin=1, timeout_s=2)
        with pytest.raises(ssl.SSLCertVerificationError):
            await client.post(f"https://localhost:{server.port}/", b"")
        client.close()


async def test_an_answer_without_a_length_ends_with_the_connection() -> None:
    """As Python's own http.server answers: HTTP/1.0, no Content-Length, then close."""
    async with serving() as server:
        client = Client(per_origin=1, timeout_s=2)
        answer = await client.post(f"http://127.0.0.1:{server.port}/unsized", b"{}")
        again = await client.post(f"http://127.0.0.1:{server.port}/", b"")
        client.close()
    assert (answer.status, answer.body) == (200, b'{"match": true}')
    assert again.status == 200 and server.connections == 2


async def test_an_ipv6_origin_is_named_in_brackets() -> None:
    heads: list[bytes] = []

    async def keep(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(OK)
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(keep, "::1", 0)
    port = listener.sockets[0].getsockname()[1]
    async with listener:
        client = Client(per_origin=1, timeout_s=2)
        answer = await client.post(f"http://[::1]:{port}/", b"")
        client.close()
    assert answer.status == 200
    assert f"Host: [::1]:{port}".encode() in heads[0]


async def test_the_broker_s_own_endpoint_is_refused_at_connect_by_any_name() -> None:
    async with serving() as server:
        client = Client(per_origin=1, timeout_s=2, own=Own("127.0.0.1", server.port))
        for host in ("localhost", "127.0.0.1"):
            with pytest.raises(Denied):
                await client.post(f"http://{host}:{server.port}/api/RegisterSubscriber", b"")
        client.close()
    assert server.connections == 0
