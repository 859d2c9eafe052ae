"""A web page cannot drive a broker on loopback: bodies only with their declared type,
foreign names (DNS rebinding) answered 421, foreign origins refused for changes, /docs never
framed."""

from __future__ import annotations

import dataclasses
import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from tests.api.conftest import Sub
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin

from tidings.api.guards import HOSTS_KEPT, WebGuard
from tidings.config import HTTPSettings, load_settings
from tidings.errors import ErrorCode
from tidings.server import EmbeddedServer


@pytest.fixture
def raw(server: EmbeddedServer) -> Iterator[httpx.Client]:
    """A client that declares nothing by itself."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.mark.parametrize(
    "path", ["/v1/publications", "/v1/publications/batch", "/api/PublishTopics"]
)
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_a_body_without_its_json_type_is_refused_before_any_route(
    raw: httpx.Client, path: str, content_type: str
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    response = raw.post(path, content=b'{"data": 1, "topics": ["a"]}', headers=headers)
    assert response.status_code == 415, response.text
    assert response.json()["error"]["code"] == "unsupported_media_type"


def test_a_cross_site_text_plain_registration_is_refused(raw: httpx.Client) -> None:
    response = raw.post("/v1/subscribers", content=b"{}", headers={"Content-Type": "text/plain"})
    assert response.status_code == 415


def test_json_and_messagepack_with_parameters_are_accepted(raw: httpx.Client) -> None:
    typed = {"Content-Type": "application/json; charset=utf-8"}
    assert raw.post("/v1/publications", content=b'{"data": 1}', headers=typed).status_code == 201
    assert raw.post("/v1/subscribers").status_code == 201  # no body: nothing to declare


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "127.0.0.1.evil.example"])
def test_a_foreign_name_is_answered_421_for_reads_too(raw: httpx.Client, host: str) -> None:
    response = raw.get("/v1/admin/overview", headers={"Host": host})
    assert response.status_code == 421
    assert response.json()["error"] == {
        "code": "misdirected",
        "message": response.json()["error"]["message"],
        "field": "Host",
    }


@pytest.mark.parametrize("host", ["localhost:1234", "127.0.0.1", "[::1]:8080", "LOCALHOST"])
def test_addresses_and_localhost_are_answered(raw: httpx.Client, host: str) -> None:
    assert raw.get("/healthz", headers={"Host": host}).status_code == 200


def test_two_host_headers_are_answered_400_naming_the_header(server: EmbeddedServer) -> None:
    """RFC 9112 3.2: a proxy in front may have routed by the other one."""
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n"
            b"Connection: close\r\n\r\n"
        )
        said = b""
        while chunk := sock.recv(65536):  # until the server closes: head and body
            said += chunk
        head, _, body = said.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    assert json.loads(body)["error"]["code"] == "invalid_header"
    assert json.loads(body)["error"]["field"] == "Host"


def test_a_configured_name_is_answered(tmp_path_factory: pytest.TempPathFactory) -> None:
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("named")}, env={})
    named = dataclasses.replace(settings, http=HTTPSettings(allowed_hosts="broker.example"))
    with EmbeddedServer(named) as server:
        ok = httpx.get(server.url + "/healthz", headers={"Host": "broker.example:80"})
        other = httpx.get(server.url + "/healthz", headers={"Host": "other.example"})
    assert (ok.status_code, other.status_code) == (200, 421)


def test_a_foreign_origin_cannot_change_anything(raw: httpx.Client, server: EmbeddedServer) -> None:
    foreign = {"Origin": "https://evil.example", "Content-Type": "application/json"}
    response = raw.post("/v1/publications", content=b'{"data": 1}', headers=foreign)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden_origin"
    own = {"Origin": server.url, "Content-Type": "application/json"}  # the console's page
    assert raw.post("/v1/publications", content=b'{"data": 1}', headers=own).status_code == 201
    assert raw.get("/healthz", headers={"Origin": "https://evil.example"}).status_code == 200


def test_a_foreign_origin_cannot_open_a_stream(http: httpx.Client, server: EmbeddedServer) -> None:
    sub = Sub(http)
    url = server.url.replace("http://", "ws://") + f"/v1/subscribers/{sub.id}/stream"
    evil = Origin("https://evil.example")
    with pytest.raises(InvalidStatus), connect(url, additional_headers=sub.auth, origin=evil):
        pass
    with connect(url, additional_headers=sub.auth, origin=Origin(server.url)):
        pass


def test_the_docs_page_is_never_framed_nor_sniffed(raw: httpx.Client) -> None:
    response = raw.get("/docs")
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"


def refusal(checked: WebGuard, *headers: tuple[bytes, bytes]) -> ErrorCode | None:
    """What the guard says of a POST with these headers (None: nothing)."""
    problem = checked._problem({"type": "http", "method": "POST", "headers": list(headers)})
    return None if problem is None else problem.code


def guard() -> WebGuard:
    return WebGuard(None, load_settings({}, env={}))  # type: ignore[arg-type]


HOST = (b"host", b"127.0.0.1")


def test_the_first_of_a_repeated_header_is_the_one_the_guard_reads() -> None:
    typed = [(b"content-type", b"text/plain"), (b"content-type", b"application/json")]
    assert refusal(guard(), HOST, *typed, (b"content-length", b"2")) == (
        ErrorCode.UNSUPPORTED_MEDIA_TYPE
    )
    came_from = [(b"origin", b"https://evil.example"), (b"origin", b"http://127.0.0.1")]
    assert refusal(guard(), HOST, *came_from) == ErrorCode.FORBIDDEN_ORIGIN


def test_a_hosts_answer_is_kept_and_the_answers_kept_are_bounded() -> None:
    checked = guard()
    for _ in range(2):  # asked again, answered from what was kept
        assert refusal(checked, (b"host", b"rebound.example")) == ErrorCode.MISDIRECTED
    for n in range(HOSTS_KEPT + 10):
        assert refusal(checked, (b"host", b"10.0.%d.%d" % divmod(n, 256))) is None
    assert len(checked._hosts_seen) <= HOSTS_KEPT
    assert refusal(checked, (b"host", b"rebound.example")) == ErrorCode.MISDIRECTED
