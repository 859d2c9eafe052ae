"""The embedded server: a real broker on 127.0.0.1 and a free port, started and stopped."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from pathlib import Path

import httpx
import pytest

from tidings.config import HTTPSettings, Settings, load_settings
from tidings.errors import TidingsError
from tidings.ports import free_port
from tidings.server import EmbeddedServer, bind


def settings_in(directory: Path) -> Settings:
    return load_settings({"data_dir": directory}, env={})


def test_an_embedded_server_answers_on_loopback_and_stops(tmp_path: Path) -> None:
    with EmbeddedServer(settings_in(tmp_path)) as server:
        assert server.url.startswith("http://127.0.0.1:")
        assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
    with pytest.raises(httpx.TransportError):
        httpx.get(server.url + "/healthz", timeout=2)


def test_an_embedded_server_binds_loopback_whatever_the_settings_say(tmp_path: Path) -> None:
    settings = dataclasses.replace(settings_in(tmp_path), host="0.0.0.0", port=free_port())
    with EmbeddedServer(settings) as server:
        assert server.settings.host == "127.0.0.1"
        assert httpx.get(server.url + "/healthz").status_code == 200


def test_two_embedded_servers_run_side_by_side(tmp_path: Path) -> None:
    with (
        EmbeddedServer(settings_in(tmp_path / "a")) as a,
        EmbeddedServer(settings_in(tmp_path / "b")) as b,
    ):
        assert a.url != b.url
        registered = httpx.post(a.url + "/v1/subscribers").json()
        unknown = httpx.get(
            f"{b.url}/v1/subscribers/{registered['id']}",
            headers={"Authorization": f"Bearer {registered['token']}"},
        )
        assert unknown.status_code == 403  # b has no such subscriber: the token opens nothing


def test_state_outlives_an_embedded_server_on_the_same_data_dir(tmp_path: Path) -> None:
    with EmbeddedServer(settings_in(tmp_path)) as server:
        me = httpx.post(server.url + "/v1/subscribers").json()
        auth = {"Authorization": f"Bearer {me['token']}"}
        base = f"/v1/subscribers/{me['id']}"
        httpx.post(server.url + base + "/subscriptions", json={"topics": ["a"]}, headers=auth)
        httpx.post(server.url + "/v1/publications", json={"data": 1, "topics": ["a"]})
    with EmbeddedServer(settings_in(tmp_path)) as again:
        pulled = httpx.get(again.url + base + "/messages", headers=auth).json()["messages"]
        assert [m["body"]["data"] for m in pulled] == [1]


def test_readiness_answers_while_the_store_does_and_503_when_it_does_not(tmp_path: Path) -> None:
    with EmbeddedServer(settings_in(tmp_path)) as server:
        assert httpx.get(server.url + "/readyz").json() == {"status": "ready"}
        server.broker.store.sync.close()  # the store's connections are gone,
        for path in tmp_path.glob("tidings.db*"):  # and so is its database
            path.unlink()
        answer = httpx.get(server.url + "/readyz")
        assert answer.status_code == 503
        assert answer.json()["error"]["code"] == "unavailable"
        assert httpx.get(server.url + "/healthz").status_code == 200  # alive all the same


def test_a_port_in_use_is_reported_in_tidings_words() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(TidingsError) as refused:
            bind("127.0.0.1", port)
    assert refused.value.field == "port"
    assert "is in use" in refused.value.message


def test_the_listening_socket_s_connections_send_small_writes_at_once() -> None:
    """asyncio sets TCP_NODELAY only on a socket whose proto says TCP; one made with proto 0
    left Nagle on, and a kept-alive client waited out its delayed ACK (40 ms) for the body
    uvicorn writes after the head: every request to an embedded server took 45 ms."""
    listening = bind("127.0.0.1", 0)
    assert listening.proto == socket.IPPROTO_TCP
    said: list[int] = []

    async def accept() -> None:
        def made(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            said.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(made, sock=listening)
        async with server:
            _, writer = await asyncio.open_connection(*listening.getsockname())
            while not said:
                await asyncio.sleep(0.01)
            writer.close()

    asyncio.run(asyncio.wait_for(accept(), 10))
    assert said == [1]


def idle_connection_survives(url: str, idle_s: float) -> bool:
    """One request on a raw socket, `idle_s` of silence, another on the same socket."""
    host, port = url.removeprefix("http://").split(":")
    request = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        conn.sendall(request)
        assert read_answer(conn).startswith(b"HTTP/1.1 200")
        time.sleep(idle_s)
        try:
            conn.sendall(request)
            return read_answer(conn).startswith(b"HTTP/1.1 200")
        except OSError:
            return False


def read_answer(conn: socket.socket) -> bytes:
    """One whole answer (head and Content-Length body), however the server split it; b""
    when the server closed the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.lower().split(b"\r\n")
    length = int(next(line.split(b":")[1] for line in lines if line.startswith(b"content-length")))
    while len(body) < length:
        body += conn.recv(4096)
    return head


def test_an_idle_kept_alive_connection_lasts_as_long_as_the_setting_says(tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    assert settings.http.keep_alive_s >= 60  # uvicorn's own 5 s dropped pausing clients
    with EmbeddedServer(settings) as default:
        assert idle_connection_survives(default.url, 1.5)
    short = dataclasses.replace(settings, http=HTTPSettings(keep_alive_s=1))
    with EmbeddedServer(short) as server:
        assert not idle_connection_survives(server.url, 1.5)
