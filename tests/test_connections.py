"""Connections a client cannot hold open or fill: headers bounded in size and count, and
deadlines for a request's headers and body, on a real server over real sockets."""

from __future__ import annotations

import asyncio
import dataclasses
import select
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from tests.sockets import connect, embedded

from tidings.config import AccessSettings, HTTPSettings, load_settings
from tidings.connections import WS_WRITE_HOLD, Full, SeatedWebSockets, Seats
from tidings.errors import ErrorCode, TidingsError
from tidings.server import EmbeddedServer

LIMITS = HTTPSettings(
    max_header_bytes=8 * 1024, max_headers=20, header_timeout_s=0.5, body_timeout_s=0.5
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    with embedded(tmp_path_factory, "broker", http=LIMITS) as srv:
        yield srv


def answer_of(sock: socket.socket) -> bytes:
    """Everything the server says until it closes the connection."""
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def healthy(server: EmbeddedServer) -> bool:
    return httpx.get(server.url + "/healthz", timeout=5).status_code == 200


def metric(server: EmbeddedServer, name: str) -> float:
    return server.broker.metrics.value(name)


def test_a_header_line_past_the_limit_is_refused_with_431_and_closed(
    server: EmbeddedServer,
) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ")
        try:
            for _ in range(64):  # 4 MiB of one header line, unless refused first
                sock.sendall(b"a" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused and closed while we were still sending
        said = answer_of(sock)
    assert said.startswith(b"HTTP/1.1 431") or said == b""
    assert healthy(server)


@pytest.mark.parametrize(
    "rest",
    [
        pytest.param(b"GET /healthz HTTP/1.1\r\n", id="alone"),
        pytest.param(b"POST /v1/publications HTTP/1.1\r\nContent-Length: 5\r\n", id="a body"),
    ],
)
def test_a_request_with_too_many_headers_is_refused(server: EmbeddedServer, rest: bytes) -> None:
    """Its body in the same read is left unparsed: the answer is said once."""
    with connect(server) as sock:
        line, _, length = rest.partition(b"\r\n")
        headers = b"".join(b"X-%d: 1\r\n" % i for i in range(30))
        sock.sendall(line + b"\r\nHost: 127.0.0.1\r\n" + headers + length + b"\r\nhello")
        said = answer_of(sock)
    assert said.startswith(b"HTTP/1.1 431") and said.count(b"HTTP/1.1") == 1, said


def test_headers_that_trickle_in_are_cut_off_at_their_deadline(server: EmbeddedServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < 5 and not closed:
            try:
                sock.sendall(b"X-Slow: 1\r\n")  # slowloris: a header every 0.1 s
                time.sleep(0.1)
            except (BrokenPipeError, ConnectionResetError):
                closed = True
        if not closed:
            closed = answer_of(sock) == b""
    assert closed
    assert healthy(server)


def closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> bool:
    """Whether the server closes the connection within `seconds`, while `trickle` is sent
    every 0.1 s (nothing: the client stays silent)."""
    started = time.monotonic()
    sock.settimeout(0.1)
    while time.monotonic() - started < seconds:
        try:
            if trickle:
                sock.sendall(trickle)
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            return True
    return False


@pytest.mark.parametrize(
    ("second", "trickle"),
    [
        pytest.param(
            b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n",
            b"X-Slow: 1\r\n",
            id="its head trickles",
        ),
        pytest.param(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"", id="its head stops"),
        pytest.param(
            b"POST /v1/publications HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
            b" ",
            id="its body trickles",
        ),
    ],
)
@pytest.mark.parametrize("together", [False, True], ids=["read apart", "read with the first"])
def test_a_kept_alive_connections_next_request_has_the_same_deadlines(
    server: EmbeddedServer, second: bytes, trickle: bytes, together: bool
) -> None:
    """The next request on a kept-alive connection, sent alone or in the read that completed
    the one before, is cut off at its head's or body's deadline as the first would be (0.5 s
    here; uvicorn's keep-alive would wait 5 s)."""
    first = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with connect(server) as sock:
        if together:
            sock.sendall(first + second)
        else:
            sock.sendall(first)
            read_answer = sock.recv(65536)
            assert read_answer.startswith(b"HTTP/1.1 200")
            sock.sendall(second)
        assert closed_within(sock, 3.0, trickle)
    assert healthy(server)


def test_a_silent_connection_is_closed_at_the_header_deadline(server: EmbeddedServer) -> None:
    with connect(server) as sock:
        assert answer_of(sock) == b""  # closed by the server, nothing said


def test_a_body_that_trickles_in_is_cut_off_at_its_deadline(server: EmbeddedServer) -> None:
    with connect(server) as sock:
        head = b"POST /v1/publications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        sock.sendall(head + b"Content-Length: 1000\r\n\r\n{")
        said = b""
        with pytest.raises((BrokenPipeError, ConnectionResetError)):
            for _ in range(100):
                sock.sendall(b" ")
                time.sleep(0.1)
                sock.settimeout(0.01)
                try:
                    said += sock.recv(65536)
                except TimeoutError:
                    continue
                if not said:
                    raise ConnectionResetError  # closed: recv answered b""
    assert healthy(server)


CHUNKED = (
    b"POST /v1/publications HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)
BODY = b'{"topics": ["a"], "data": 1}'


def chunked(body: bytes, size: int) -> bytes:
    """`body` in chunks of `size` bytes, without the last chunk."""
    parts = (body[i : i + size] for i in range(0, len(body), size))
    return b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts)


@pytest.mark.parametrize(
    "endless",
    [
        pytest.param(b"0\r\nX-Trailer: " + b"a" * 128 * 1024, id="a trailer line"),
        pytest.param(b"0\r\n" + b"X-T: a\r\n" * 16 * 1024, id="many trailers"),
        pytest.param(b"1;ext=" + b"a" * 128 * 1024, id="a chunk extension"),
        pytest.param(b"0" * 128 * 1024, id="a chunk size's leading zeros"),
    ],
)
def test_chunk_framing_and_trailers_past_the_header_limit_are_refused_with_431(
    server: EmbeddedServer, endless: bytes
) -> None:
    """Past the headers only the body is free: 128 KiB more than the body is refused, not
    read on until the body's deadline (one connection read 154 MiB that way)."""
    before = metric(server, "framing_refused")
    with connect(server) as sock:
        sock.sendall(CHUNKED + chunked(BODY, 8) + endless)
        said = answer_of(sock)
    assert said.startswith(b"HTTP/1.1 431"), said
    assert b"chunk framing and trailers" in said
    assert metric(server, "framing_refused") == before + 1
    assert healthy(server)


def test_a_body_of_one_byte_chunks_with_extensions_and_a_trailer_is_taken(
    server: EmbeddedServer,
) -> None:
    """A chunk's own framing is paid for by the chunk: one-byte chunks take five times their
    body in framing, and that is no reason to refuse them."""
    body = b'{"topics": ["a"], "data": "' + b"x" * 20_000 + b'"}'
    parts = (body[i : i + 1] for i in range(len(body)))
    framed = b"".join(b"1;n=v\r\n%s\r\n" % part for part in parts)
    with connect(server) as sock:
        sock.sendall(CHUNKED.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        sock.sendall(framed + b"0\r\nX-Checksum: " + b"f" * 1000 + b"\r\n\r\n")
        assert answer_of(sock).startswith(b"HTTP/1.1 201")


def test_a_trailer_is_never_taken_for_a_header(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A publish key sent as a trailer, after the body: uvicorn appended trailers to the
    request's headers, so a key no check before the body had seen was taken."""
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("keyed")}, env={})
    keyed = dataclasses.replace(settings, access=AccessSettings(publish_keys="k=*"))
    with EmbeddedServer(keyed) as srv, connect(srv) as sock:
        head = CHUNKED.replace(b"/v1/publications", b"/v1/publications/batch")
        sock.sendall(head.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        batch = b'{"publications": [' + BODY + b"]}"
        sock.sendall(chunked(batch, 8) + b"0\r\nAuthorization: Bearer k\r\n\r\n")
        said = answer_of(sock)
    assert said.startswith(b"HTTP/1.1 401"), said[:200]


# ---- a body's least rate: a body trickled in is cut off long before its deadline

RATED = HTTPSettings(body_timeout_s=60, body_min_rate=1000, body_rate_grace_s=0.5)


@pytest.fixture(scope="module")
def rated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    with embedded(tmp_path_factory, "rated", http=RATED) as srv:
        yield srv


def send_body(sock: socket.socket, body: bytes, chunk: int, pause_s: float) -> bytes:
    """`body` after a publish's head, `chunk` bytes every `pause_s`; then what the server
    says (the first of it, if it answers before the body is all sent)."""
    head = b"POST /v1/publications HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    head += b"Content-Type: application/json\r\n"
    sock.sendall(head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
    for start in range(0, len(body), chunk):
        try:
            sock.sendall(body[start : start + chunk])
        except (BrokenPipeError, ConnectionResetError):
            break
        sock.settimeout(pause_s)
        try:
            if said := sock.recv(65536):
                return said
            break  # closed
        except TimeoutError:
            continue
    sock.settimeout(10)
    try:
        return answer_of(sock)
    except ConnectionResetError:
        return b""


def test_a_body_slower_than_the_least_rate_is_answered_408_and_closed(
    rated: EmbeddedServer,
) -> None:
    body = b'{"topics": ["a"], "data": "' + b"x" * 100_000 + b'"}'
    with connect(rated) as sock:
        said = send_body(sock, body, chunk=20, pause_s=0.1)  # 200 bytes/s, for up to 500 s
    assert said.startswith(b"HTTP/1.1 408")
    assert b'"code":"request_timeout"' in said
    assert healthy(rated)


def test_a_body_that_keeps_the_least_rate_past_the_grace_is_taken(
    rated: EmbeddedServer,
) -> None:
    body = b'{"topics": ["a"], "data": "' + b"x" * 30_000 + b'"}'
    with connect(rated) as sock:
        said = send_body(sock, body, chunk=2000, pause_s=0.1)  # 20 KB/s, for 1.5 s
    assert said.startswith(b"HTTP/1.1 201")


def test_a_body_the_server_holds_behind_a_pipelined_request_is_not_counted_slow(
    rated: EmbeddedServer,
) -> None:
    """The first request (a 2 s long poll) keeps the server from reading the second's body:
    those seconds are the server's, not the client's."""
    registered = httpx.post(rated.url + "/v1/subscribers").json()
    poll = (
        f"GET /v1/subscribers/{registered['id']}/messages?wait=2 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {registered['token']}\r\n\r\n"
    ).encode()
    body = b'{"topics": ["a"], "data": "' + b"x" * 2000 + b'"}'
    publish = (
        b"POST /v1/publications HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    with connect(rated) as sock:
        sock.sendall(poll + publish + body[:10])
        time.sleep(0.2)  # the rest comes later, while the server reads nothing
        sock.sendall(body[10:])
        said = answer_of(sock)
    first, _, second = said.partition(b"HTTP/1.1 ")[2].partition(b"HTTP/1.1 ")
    assert first.startswith(b"200") and second.startswith(b"201"), said


def test_ordinary_requests_pass_the_guards(server: EmbeddedServer) -> None:
    with httpx.Client(base_url=server.url) as client:
        for _ in range(3):  # kept alive across requests
            assert (
                client.post("/v1/publications", json={"data": 1, "topics": ["a"]}).status_code
                == 201
            )


# ---- seats: connections per client address, and idle kept-alive ones yielding their place

SEATED = HTTPSettings(max_connections=8, max_connections_per_address=4, limit_loopback=True)


@pytest.fixture(scope="module")
def seated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    with embedded(tmp_path_factory, "seated", http=SEATED) as srv:
        yield srv


def connect_from(server: EmbeddedServer, address: str) -> socket.socket:
    """A connection from `address` (any of 127.0.0.0/8 is this machine's loopback)."""
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10, source_address=(address, 0))


def client_from(server: EmbeddedServer, address: str) -> httpx.Client:
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=server.url, transport=transport, timeout=10)


def status_from(server: EmbeddedServer, address: str) -> httpx.Response:
    with client_from(server, address) as client:
        return client.get("/healthz")


def served_again(server: EmbeddedServer, address: str) -> bool:
    """Whether `address` is served once the server has seen a connection of its close."""
    for _ in range(100):
        if status_from(server, address).status_code == 200:
            return True
        time.sleep(0.05)
    return False


def keep_alive_request(sock: socket.socket) -> None:
    """One request on a connection that stays open, its answer read to the end."""
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got:
        got += sock.recv(65536)
    head, body = got.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += sock.recv(65536)


def test_an_address_past_its_connections_is_answered_503_while_another_is_served(
    seated: EmbeddedServer,
) -> None:
    held = [connect_from(seated, "127.0.0.2") for _ in range(4)]
    try:
        refused = status_from(seated, "127.0.0.2")
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "unavailable"
        assert refused.headers["retry-after"] == "1"
        assert status_from(seated, "127.0.0.3").status_code == 200
        assert metric(seated, "connections_refused") >= 1
        held.pop().close()
        assert served_again(seated, "127.0.0.2")  # a closed connection frees its seat
    finally:
        for sock in held:
            sock.close()


def test_a_websocket_holds_its_seat_until_it_closes(seated: EmbeddedServer) -> None:
    with client_from(seated, "127.0.0.4") as client:
        sub = client.post("/v1/subscribers").json()
    held = [connect_from(seated, "127.0.0.4") for _ in range(3)]
    stream = connect_from(seated, "127.0.0.4")
    try:
        for sock in held:
            keep_alive_request(sock)
        stream.sendall(
            f"GET /v1/subscribers/{sub['id']}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            f"Authorization: Bearer {sub['token']}\r\n\r\n".encode()
        )
        assert stream.recv(65536).startswith(b"HTTP/1.1 101")
        assert status_from(seated, "127.0.0.4").status_code == 503
    finally:
        stream.close()
        for sock in held:
            sock.close()
    assert served_again(seated, "127.0.0.4")


def test_idle_kept_alive_connections_yield_their_place_to_a_new_client(
    seated: EmbeddedServer,
) -> None:
    idle: list[socket.socket] = []
    try:
        for i in range(SEATED.max_connections):  # the server full of idle connections
            idle.append(connect_from(seated, f"127.0.0.{5 + i // 4}"))
            keep_alive_request(idle[-1])
        before = metric(seated, "connections_reclaimed")
        assert status_from(seated, "127.0.0.7").status_code == 200
        assert metric(seated, "connections_reclaimed") > before
        assert answer_of(idle[0]) == b""  # the longest idle was closed to make room
    finally:
        for sock in idle:
            sock.close()


def test_seats_count_an_ipv6_client_by_its_slash_64_and_loopback_only_when_asked() -> None:
    seats = Seats(HTTPSettings(max_connections_per_address=1))
    assert seats.take("2001:db8::1") == ("2001:db8::/64", "2001:db8::/48", "2001:db8::/32")
    with pytest.raises(Full):
        seats.take("2001:db8::ffff")  # the same /64
    assert seats.take("::ffff:192.0.2.1") == ("192.0.2.1",)  # IPv4 through a dual-stack socket
    assert seats.take("127.0.0.1") is None and seats.take("::1") is None
    counted = Seats(HTTPSettings(max_connections_per_address=1, limit_loopback=True))
    assert counted.take("127.0.0.1") == ("127.0.0.1",)
    with pytest.raises(Full):
        counted.take("127.0.0.1")


def test_an_ipv6_clients_slash_48_holds_four_times_the_bound_whatever_its_slash_64s() -> None:
    """A client holding a /48 walks 65,536 /64s: a bound per /64 alone let 8 of them fill a
    server of 2,048 connections."""
    seats = Seats(HTTPSettings(max_connections_per_address=2))
    held = [seats.take(f"2001:db8:0:{n:x}::1") for n in range(4) for _ in range(2)]
    with pytest.raises(Full):
        seats.take("2001:db8:0:ff::1")  # a fifth /64 of the same /48
    assert seats.take("2001:db8:1::1") is not None  # another /48 of the /32
    for seat in held:
        assert seat is not None
        seats.give(seat)
    assert seats.take("2001:db8:0:ff::1") is not None


def test_a_negative_bound_per_address_is_refused() -> None:
    with pytest.raises(TidingsError) as refused:
        load_settings({"http__max_connections_per_address": -1}, env={})
    assert refused.value.code == ErrorCode.CONFIG_INVALID


# ---- a WebSocket client that sends and never reads: the broker stops reading it


def stream_of(server: EmbeddedServer, buffer_bytes: int) -> socket.socket:
    """A subscriber's WebSocket stream on a raw socket receiving into `buffer_bytes` of the
    kernel's, past its handshake."""
    sub = httpx.post(server.url + "/v1/subscribers").json()
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer_bytes)
    sock.settimeout(10)
    sock.connect((host, int(port)))
    sock.sendall(
        f"GET /v1/subscribers/{sub['id']}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        f"Authorization: Bearer {sub['token']}\r\n\r\n".encode()
    )
    said = b""
    while b"\r\n\r\n" not in said:
        said += sock.recv(1)  # byte by byte: nothing past the handshake's answer
    assert said.startswith(b"HTTP/1.1 101")
    return sock


def ping(payload: bytes) -> bytes:
    """A client's ping frame (masked with a zero key, so the payload reads as itself)."""
    return bytes([0x89, 0x80 | len(payload)]) + b"\0\0\0\0" + payload


def streams_of(server: EmbeddedServer) -> list[SeatedWebSockets]:
    state = server._server.server_state  # the served connections, as uvicorn keeps them
    return [c for c in state.connections if isinstance(c, SeatedWebSockets)]


def on_loop(server: EmbeddedServer, stream: SeatedWebSockets) -> tuple[bool, int]:
    """Whether the broker reads `stream`, and the bytes it holds unsent for it, as seen on
    the broker's own event loop."""

    async def look() -> tuple[bool, int]:
        transport = stream.transport
        return transport.is_reading(), transport.get_write_buffer_size()

    return asyncio.run_coroutine_threadsafe(look(), stream.loop).result(timeout=10)


@pytest.fixture(scope="module")
def unbounded_pings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    limits = HTTPSettings(ws_max_pings_per_s=0)
    with embedded(tmp_path_factory, "pings", http=limits) as srv:
        yield srv


def test_a_stream_that_pings_and_never_reads_is_not_read_past_a_bounded_write_buffer(
    unbounded_pings: EmbeddedServer,
) -> None:
    """uvicorn answers each ping at once: 2,000,000 pings from one client that never read
    grew the broker by 234 MB of pongs. Past WS_WRITE_HOLD unsent the broker stops reading
    the client, and it goes on once the client reads."""
    pings = memoryview(ping(b"p" * 125) * 128 * 1024)  # 17 MB of pings, as many of pongs
    before = set(streams_of(unbounded_pings))
    with stream_of(unbounded_pings, buffer_bytes=32 * 1024) as sock:
        [stream] = set(streams_of(unbounded_pings)) - before
        sock.setblocking(False)
        sent, reading = 0, True
        while reading and sent < len(pings):
            if select.select([], [sock], [], 1)[1]:
                sent += sock.send(pings[sent : sent + 65536])
            else:  # the kernel's buffers are full a second: is the broker still reading?
                reading, unsent = on_loop(unbounded_pings, stream)
        assert not reading, f"the broker read all {sent} bytes of pings"
        assert WS_WRITE_HOLD < unsent < WS_WRITE_HOLD + 512 * 1024
        rest = memoryview(pings[sent:].tobytes() + ping(b"last"))
        tail = b""
        while b"\x8a\x04last" not in tail:  # the client reads: the broker goes on
            readable, writable, _ = select.select([sock], [sock] if rest else [], [], 10)
            assert readable or writable, "the stream stalled"
            if readable:
                tail = (tail + sock.recv(1024 * 1024))[-64:]
            if writable and rest:
                rest = rest[sock.send(rest[:65536]) :]
    assert healthy(unbounded_pings)


def frames_until_closed(sock: socket.socket) -> list[tuple[int, bytes]]:
    """The server's frames (opcode, payload; each under 126 bytes) until it closes."""
    said = answer_of(sock)
    frames = []
    while said:
        length = said[1] & 0x7F
        frames.append((said[0] & 0x0F, said[2 : 2 + length]))
        said = said[2 + length :]
    return frames


def test_a_stream_pinging_past_its_bound_a_second_is_closed_1008(server: EmbeddedServer) -> None:
    """Even a client that reads its pongs costs the loop its pings' parsing and answers: one
    doing so held a bystander's pull 5 s. Pings within the bound are answered."""
    with stream_of(server, buffer_bytes=1024 * 1024) as sock:
        sock.sendall(ping(b"early") * 10)
        said = b""
        while len(said) < 10 * 7:
            said += sock.recv(65536)
        assert said == b"\x8a\x05early" * 10
        sock.sendall(ping(b"flood") * 300)
        frames = frames_until_closed(sock)
    pongs = [payload for opcode, payload in frames if opcode == 0xA]
    assert set(pongs) == {b"flood"}  # those of the read that crossed the bound went out
    opcode, payload = frames[-1]
    assert opcode == 0x8 and int.from_bytes(payload[:2], "big") == 1008
    assert b"http.ws_max_pings_per_s" in payload


# ---- between requests: the keep-alive's time, whatever is read meanwhile


@pytest.fixture(scope="module")
def brief(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    limits = dataclasses.replace(LIMITS, keep_alive_s=1)
    with embedded(tmp_path_factory, "brief", http=limits) as srv:
        yield srv


def test_blank_lines_between_requests_do_not_keep_a_connection_past_its_keep_alive(
    brief: EmbeddedServer,
) -> None:
    """uvicorn stopped its keep-alive timer at every read and started it only after an
    answer: a client sending a blank line every 0.1 s held its connection for good."""
    with connect(brief) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        assert closed_within(sock, 3.0, b"\r\n")
    assert healthy(brief)


def test_a_body_sent_after_its_early_answer_does_not_keep_the_connection_open(
    brief: EmbeddedServer,
) -> None:
    """A publication past the limit is answered 413 before its body is read; the body
    that follows, then silence, left the connection with no timer at all."""
    size = brief.settings.limits.max_publication_bytes + 1
    with connect(brief) as sock:
        sock.sendall(
            b"POST /v1/publications HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % size
        )
        assert sock.recv(65536).startswith(b"HTTP/1.1 413")
        sock.sendall(b"x" * size)
        assert closed_within(sock, 3.0)
    assert healthy(brief)


def test_a_kept_alive_connection_still_serves_its_next_request_within_the_keep_alive(
    brief: EmbeddedServer,
) -> None:
    with connect(brief) as sock:
        for _ in range(3):
            sock.sendall(b"\r\nGET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            time.sleep(0.3)
