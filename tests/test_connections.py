"""Connections a client cannot hold open or fill: headers bounded in size and count, and
deadlines for a request's headers and body, on a real server over real sockets."""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tidings.config import HTTPSettings, load_settings
from tidings.server import EmbeddedServer

LIMITS = HTTPSettings(
    max_header_bytes=8 * 1024, max_headers=20, header_timeout_s=0.5, body_timeout_s=0.5
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("broker")}, env={})
    with EmbeddedServer(dataclasses.replace(settings, http=LIMITS)) as srv:
        yield srv


def connect(server: EmbeddedServer) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def answer_of(sock: socket.socket) -> bytes:
    """Everything the server says until it closes the connection."""
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def healthy(server: EmbeddedServer) -> bool:
    return httpx.get(server.url + "/healthz", timeout=5).status_code == 200


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


def test_a_request_with_too_many_headers_is_refused(server: EmbeddedServer) -> None:
    with connect(server) as sock:
        headers = b"".join(b"X-%d: 1\r\n" % i for i in range(30))
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")
        assert answer_of(sock).startswith(b"HTTP/1.1 431")


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


def test_ordinary_requests_pass_the_guards(server: EmbeddedServer) -> None:
    with httpx.Client(base_url=server.url) as client:
        for _ in range(3):  # kept alive across requests
            assert (
                client.post("/v1/publications", json={"data": 1, "topics": ["a"]}).status_code
                == 201
            )
