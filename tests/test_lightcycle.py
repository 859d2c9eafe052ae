"""A publish route's request runs on a lighter cycle than uvicorn's: the answer's head and
body leave in one write, an answer without a length goes chunked, `Connection: close` and
HTTP/1.0 close after the answer, the body is handed over as it comes and a client gone is
said; and over a real server, publishes kept alive, pipelined, sent as HTTP/1.0 or by a
client that leaves are answered as any request is."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.sockets import Recording, connect, embedded

from tidings.lightcycle import LightCycle
from tidings.server import LIGHT_PATHS, EmbeddedServer


class Flow:
    write_paused = False

    def __init__(self) -> None:
        self.resumed = 0

    def resume_reading(self) -> None:
        self.resumed += 1

    async def drain(self) -> None:
        pass


SCOPE = {"type": "http", "method": "POST", "http_version": "1.1", "path": "/v1/publications"}
LOG = logging.getLogger("tidings.tests.lightcycle")


def start(headers: list[tuple[bytes, bytes]]) -> Any:
    return {"type": "http.response.start", "status": 201, "headers": headers}


LENGTH_2 = [(b"content-type", b"application/json"), (b"content-length", b"2")]


def cycle(
    transport: Recording,
    keep_alive: bool = True,
    expect_100: bool = False,
    answered: list[int] | None = None,
    access_log: bool = False,
) -> LightCycle:
    done = answered if answered is not None else []
    return LightCycle(
        dict(SCOPE, client=("127.0.0.1", 5000), query_string=b""),
        transport,  # type: ignore[arg-type]
        Flow(),  # type: ignore[arg-type]
        [(b"server", b"tidings")],
        keep_alive,
        expect_100,
        lambda: done.append(1),
        (LOG, LOG, access_log),
    )


async def test_the_head_waits_for_the_body_and_both_leave_in_one_write() -> None:
    transport, answered = Recording(), list[int]()
    light = cycle(transport, answered=answered)
    await light.send(start(LENGTH_2))
    assert transport.calls == []
    await light.send({"type": "http.response.body", "body": b"{}"})
    assert transport.calls == [
        (
            "write",
            b"HTTP/1.1 201 Created\r\nserver: tidings\r\ncontent-type: application/json\r\n"
            b"content-length: 2\r\n\r\n{}",
        )
    ]
    assert light.response_complete and answered == [1]


async def test_an_answer_in_parts_sends_its_head_with_the_first() -> None:
    transport = Recording()
    light = cycle(transport)
    await light.send(start(LENGTH_2))
    await light.send({"type": "http.response.body", "body": b"{", "more_body": True})
    await light.send({"type": "http.response.body", "body": b"}"})
    assert [data[-1:] for _, data in transport.calls] == [b"{", b"}"]
    assert transport.calls[0][1].startswith(b"HTTP/1.1 201 Created\r\n")


async def test_an_answer_without_a_length_goes_chunked() -> None:
    transport = Recording()
    light = cycle(transport)
    await light.send(start([]))
    await light.send({"type": "http.response.body", "body": b"ab", "more_body": True})
    await light.send({"type": "http.response.body", "body": b""})
    written = b"".join(data for _, data in transport.calls)
    assert b"transfer-encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n" in written


@pytest.mark.parametrize(
    ("keep_alive", "headers"),
    [
        pytest.param(True, [*LENGTH_2, (b"Connection", b"Keep-Alive, Close")], id="asked"),
        pytest.param(False, LENGTH_2, id="an HTTP/1.0 request"),
    ],
)
async def test_an_answer_that_ends_the_connection_says_so_and_closes_it(
    keep_alive: bool, headers: list[tuple[bytes, bytes]]
) -> None:
    transport = Recording()
    light = cycle(transport, keep_alive=keep_alive)
    await light.send(start(headers))
    await light.send({"type": "http.response.body", "body": b"{}"})
    assert transport.calls[-1] == ("close", None)
    assert transport.calls[0][1].lower().count(b"connection:") == 1


@pytest.mark.parametrize(
    ("body", "problem"), [(b"{}!", "longer"), (b"{", "shorter")], ids=["longer", "shorter"]
)
async def test_a_body_that_is_not_the_length_said_is_the_applications_error(
    body: bytes, problem: str
) -> None:
    light = cycle(Recording())
    await light.send(start(LENGTH_2))
    with pytest.raises(RuntimeError, match=problem):
        await light.send({"type": "http.response.body", "body": body})


@pytest.mark.parametrize(
    "header",
    [
        pytest.param((b"x-bad name", b"v"), id="a space in a name"),
        pytest.param((b"x-ok", b"v\r\nset-cookie: a=b"), id="a line break in a value"),
        pytest.param((b"x-ok", b"v\x00"), id="a NUL in a value"),
    ],
)
async def test_an_answer_with_a_header_uvicorn_refuses_is_refused_too(
    header: tuple[bytes, bytes],
) -> None:
    transport = Recording()
    with pytest.raises(RuntimeError, match="Invalid HTTP header"):
        await cycle(transport).send(start([*LENGTH_2, header]))
    assert transport.calls == []


async def test_a_body_is_handed_over_as_it_comes_and_a_client_gone_is_said() -> None:
    light = cycle(Recording())
    reading = asyncio.ensure_future(light.receive())
    await asyncio.sleep(0)
    assert not reading.done()  # nothing came yet
    light.body += b"{"
    light.message_event.set()
    assert await reading == {"type": "http.request", "body": b"{", "more_body": True}
    light.body += b"}"
    light.more_body = False
    light.message_event.set()
    assert await light.receive() == {"type": "http.request", "body": b"}", "more_body": False}
    light.disconnected = True
    light.message_event.set()
    assert await light.receive() == {"type": "http.disconnect"}


async def test_two_readers_are_both_woken_as_by_an_event() -> None:
    light = cycle(Recording())
    readers = [asyncio.ensure_future(light.receive()) for _ in range(2)]
    await asyncio.sleep(0)
    light.disconnected = True
    light.message_event.set()
    assert await asyncio.gather(*readers) == [{"type": "http.disconnect"}] * 2


async def test_reading_resumes_when_the_application_reads() -> None:
    light = cycle(Recording())
    light.more_body = False
    light.message_event.set()
    await light.receive()
    assert light.flow.resumed == 1  # type: ignore[attr-defined]


async def test_a_client_expecting_100_continue_hears_it_when_the_body_is_first_read() -> None:
    transport = Recording()
    light = cycle(transport, expect_100=True)
    assert transport.calls == []
    light.message_event.set()
    await light.receive()
    light.message_event.set()
    await light.receive()
    assert transport.calls == [("write", b"HTTP/1.1 100 Continue\r\n\r\n")]


async def test_an_application_that_fails_before_answering_gets_uvicorns_500(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def failing(scope: Any, receive: Any, send: Any) -> None:
        raise ValueError("a bug")

    transport, answered = Recording(), list[int]()
    with caplog.at_level(logging.INFO, logger=LOG.name):
        await cycle(transport, answered=answered, access_log=True).run_asgi(failing)
    said = transport.calls[0][1]
    assert said.startswith(b"HTTP/1.1 500 Internal Server Error\r\nserver: tidings\r\n")
    assert said.endswith(b"connection: close\r\n\r\nInternal Server Error")
    assert transport.calls[-1] == ("close", None)
    assert answered == [1]  # counted as an answer, as uvicorn counts it
    assert "Exception in ASGI application" in caplog.text
    assert '"POST /v1/publications HTTP/1.1" 500' in caplog.text


async def test_an_application_that_returns_something_closes_the_connection() -> None:
    async def returning(scope: Any, receive: Any, send: Any) -> Any:
        await send(start(LENGTH_2))
        await send({"type": "http.response.body", "body": b"{}"})
        return 1

    transport = Recording()
    await cycle(transport).run_asgi(returning)
    assert transport.calls[-1] == ("close", None)


async def test_an_application_that_returns_without_answering_gets_a_500() -> None:
    async def silent(scope: Any, receive: Any, send: Any) -> None:
        return None

    transport = Recording()
    await cycle(transport).run_asgi(silent)
    assert transport.calls[0][1].startswith(b"HTTP/1.1 500 ")


async def test_an_application_that_fails_while_answering_closes_the_connection() -> None:
    async def halfway(scope: Any, receive: Any, send: Any) -> None:
        await send(start(LENGTH_2))
        raise ValueError("a bug")

    transport = Recording()
    await cycle(transport).run_asgi(halfway)
    assert transport.calls == [("close", None)]


async def test_the_access_log_says_the_request_as_uvicorns_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    light = cycle(Recording(), access_log=True)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        await light.send(start(LENGTH_2))
    assert '127.0.0.1:5000 - "POST /v1/publications HTTP/1.1" 201' in caplog.text


# ---- over a real server


def test_the_publish_routes_are_the_light_ones() -> None:
    assert {b"/v1/publications", b"/v1/publications/batch"} == LIGHT_PATHS


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    with embedded(tmp_path_factory, "light") as srv:
        yield srv


def answers(sock: socket.socket, count: int) -> list[bytes]:
    """The next `count` answers' status lines and bodies (each body a JSON object)."""
    got = b""
    while got.count(b"HTTP/1.1 ") < count or not got.endswith(b"}"):
        chunk = sock.recv(65536)
        assert chunk, got
        got += chunk
    return [b"HTTP/1.1 " + a for a in got.split(b"HTTP/1.1 ")[1:]]


def publish(body: bytes, path: bytes = b"/v1/publications", version: bytes = b"1.1") -> bytes:
    return (
        b"POST %s HTTP/%s\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (path, version, len(body), body)
    )


BODY = b'{"topics": ["light"], "data": 1}'


def test_publishes_kept_alive_and_pipelined_with_other_requests_are_answered_in_order(
    server: EmbeddedServer,
) -> None:
    health = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    batch = b'{"publications": [' + BODY + b", " + BODY + b"]}"
    with connect(server) as sock:
        sock.sendall(publish(BODY) + health + publish(batch, b"/v1/publications/batch"))
        said = answers(sock, 3)
        sock.sendall(publish(b'{"topics": "light"}'))  # not a list: refused, kept alive
        refused = answers(sock, 1)
    assert [a[9:12] for a in said] == [b"201", b"200", b"201"]
    assert b'"id":' in said[0] and b'"status":"ok"' in said[1] and said[2].count(b'"id":') == 2
    assert refused[0].startswith(b"HTTP/1.1 422 ") and b'"field":"topics"' in refused[0]


def test_a_publish_as_http_1_0_is_answered_and_the_connection_closed(
    server: EmbeddedServer,
) -> None:
    with connect(server) as sock:
        sock.sendall(publish(BODY, version=b"1.0"))
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
    assert got.startswith(b"HTTP/1.1 201 ") and b"connection: close\r\n" in got


def test_a_path_said_another_way_reaches_the_same_route_through_uvicorns_cycle(
    server: EmbeddedServer,
) -> None:
    with connect(server) as sock:
        sock.sendall(publish(BODY, path=b"/v1/%70ublications"))
        assert answers(sock, 1)[0].startswith(b"HTTP/1.1 201 ")


def test_a_fragment_after_the_query_is_not_read_as_part_of_it(server: EmbeddedServer) -> None:
    batch = b'{"publications": [' + BODY + b"]}"
    with connect(server) as sock:
        sock.sendall(publish(batch, path=b"/v1/publications/batch?answer=count#x"))
        said = answers(sock, 1)[0]
    assert said.startswith(b"HTTP/1.1 201 ") and b'"published":1' in said


def test_a_publisher_that_leaves_mid_body_publishes_nothing(server: EmbeddedServer) -> None:
    me = httpx.post(server.url + "/v1/subscribers").json()
    auth = {"Authorization": f"Bearer {me['token']}"}
    base = f"{server.url}/v1/subscribers/{me['id']}"
    httpx.post(base + "/subscriptions", json={"topics": ["leaving"]}, headers=auth)
    with connect(server) as sock:
        sock.sendall(publish(b'{"topics": ["leaving"], "data": "gone"}')[:-5])
    httpx.post(server.url + "/v1/publications", json={"topics": ["leaving"], "data": "kept"})
    pulled = httpx.get(base + "/messages", params={"max": 10}, headers=auth).json()["messages"]
    assert [m["body"]["data"] for m in pulled] == ["kept"]
