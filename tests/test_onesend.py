"""An HTTP answer's head goes with its body in one send: held until the body, or sent alone
at the loop's next turn or before a close; and over a real server, answers without a body,
`100 Continue` and pipelined requests come as before."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest
from tests.sockets import Recording, connect, embedded

from tidings.onesend import OneSend
from tidings.server import EmbeddedServer


def one_send(transport: Recording) -> OneSend:
    return OneSend(transport)  # type: ignore[arg-type]


async def test_a_head_and_its_body_go_in_one_send() -> None:
    transport = Recording()
    answer = one_send(transport)
    answer.write(b"HTTP/1.1 201 Created\r\n\r\n")
    answer.write(b"{}")
    answer.write(b"more")
    await asyncio.sleep(0)  # (the turn's flush finds nothing held)
    assert transport.calls == [
        ("writelines", [b"HTTP/1.1 201 Created\r\n\r\n", b"{}"]),
        ("write", b"more"),
    ]


async def test_a_head_without_a_body_in_its_turn_is_sent_alone_at_the_next() -> None:
    transport = Recording()
    answer = one_send(transport)
    answer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")  # (a HEAD's answer)
    assert transport.calls == []
    await asyncio.sleep(0)
    assert transport.calls == [("write", b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")]
    answer.write(b"ok")
    assert transport.calls[-1] == ("write", b"ok")


async def test_an_interim_answer_goes_at_once_and_the_final_head_waits_for_its_body() -> None:
    transport = Recording()
    answer = one_send(transport)
    answer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert transport.calls == [("write", b"HTTP/1.1 100 Continue\r\n\r\n")]
    answer.write(b"HTTP/1.1 201 Created\r\n\r\n")
    answer.write(b"{}")
    assert transport.calls[1:] == [("writelines", [b"HTTP/1.1 201 Created\r\n\r\n", b"{}"])]


async def test_what_is_held_is_sent_before_a_close_and_dropped_once_the_connection_is_gone() -> (
    None
):
    transport = Recording()
    answer = one_send(transport)
    answer.write(b"head")
    answer.close()
    assert transport.calls == [("write", b"head"), ("close", None)]
    gone = Recording()
    gone.closing = True
    late = one_send(gone)
    late.write(b"head")
    late.flush()
    assert gone.calls == []


async def test_the_rest_is_asked_of_the_transport() -> None:
    transport = Recording()
    answer = one_send(transport)
    assert answer.get_extra_info("peername") == "extra peername"
    assert not answer.is_closing()


# ---- over a real server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    with embedded(tmp_path_factory, "onesend") as srv:
        yield srv


def read_until(sock: socket.socket, ending: bytes, got: bytes = b"") -> bytes:
    while not got.endswith(ending):
        chunk = sock.recv(65536)
        assert chunk, f"closed before {ending!r}: {got!r}"
        got += chunk
    return got


def test_pipelined_requests_with_a_head_request_among_them_are_answered_in_order(
    server: EmbeddedServer,
) -> None:
    with connect(server) as sock:
        request = b"%s /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        sock.sendall(request % b"GET" + request % b"HEAD" + request % b"GET")
        got = b""
        while got.count(b"HTTP/1.1 ") < 3 or not got.endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk
            got += chunk
    answers = got.split(b"HTTP/1.1 ")[1:]
    assert [a[:3] for a in answers] == [b"200", b"200", b"200"]
    assert answers[0].endswith(b"}") and answers[1].endswith(b"\r\n\r\n")


def test_a_publish_expecting_100_continue_hears_it_then_its_answer(
    server: EmbeddedServer,
) -> None:
    body = b'{"data": 1, "topics": ["a"]}'
    with connect(server) as sock:
        sock.sendall(
            b"POST /v1/publications HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        )
        assert read_until(sock, b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        answer = read_until(sock, b"}")
    assert answer.startswith(b"HTTP/1.1 201 ")
