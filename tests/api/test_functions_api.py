"""The function library served as URL functions (/api/Detect*, /api/AnalyzeImage) by a real
server: the URL-function protocol in, `{"match": bool}` out, and clear 4xx for bad bodies."""

from __future__ import annotations

import base64
import dataclasses
import resource
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from tests.functions.images import PRINTED_PAGE, WITH_FACE, WITHOUT_FACES, bomb_png, encoded

from tidings.config import FunctionSettings, load_settings
from tidings.server import EmbeddedServer

ENGLISH = "The weather in Munich is sunny and warm today, and everyone is happy."
SPANISH = "El tiempo en Madrid es soleado y cálido hoy."


def ask(http: httpx.Client, route: str, data: Any, **params: Any) -> bool:
    body = {"publication": {"id": "p", "data": data}, "params": params}
    response = http.post(f"/api/{route}", json=body)
    assert response.status_code == 200, response.text
    return response.json()["match"]  # type: ignore[no-any-return]


def test_languages_are_told_apart(http: httpx.Client) -> None:
    assert ask(http, "DetectLanguages", ENGLISH, language="en")
    assert not ask(http, "DetectLanguages", SPANISH, language="en")
    assert ask(http, "DetectLanguages", {"text": SPANISH}, language="es")


def test_key_phrases_and_sentiment_answer_on_text(http: httpx.Client) -> None:
    assert ask(http, "DetectKeyPhrases", ENGLISH, any_of=["Munich"])
    assert not ask(http, "DetectKeyPhrases", ENGLISH, any_of=["Waikato"])
    assert ask(http, "DetectSentiments", ENGLISH, label="positive")
    assert not ask(http, "DetectSentiments", ENGLISH, label="negative")


@pytest.mark.slow
def test_images_are_looked_at(http: httpx.Client) -> None:
    face, cup = {"image": encoded(WITH_FACE)}, {"image": encoded(WITHOUT_FACES[0])}
    assert ask(http, "DetectFaces", face)
    assert not ask(http, "DetectFaces", cup, min_faces=1)
    assert ask(http, "AnalyzeImage", face, has=["faces"])
    assert ask(http, "DetectPrintedText", {"image": encoded(PRINTED_PAGE, "PNG")})
    assert not ask(http, "DetectPrintedText", cup)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"params": {"language": "en"}}, "publication"),
        ({"publication": "text", "params": {"language": "en"}}, "publication"),
        ({"publication": {"data": "x"}, "params": []}, "params"),
        ({"publication": {"data": "x"}, "params": {}}, "params.language"),
        ({"publication": {"data": "x"}, "params": {"language": "en", "x": 1}}, "params.x"),
        ({"publication": {"data": "x"}, "params": {"language": {"x": 1}}}, "params.language"),
    ],
)
def test_bad_bodies_get_a_4xx_naming_the_field(
    http: httpx.Client, body: dict[str, Any], field: str
) -> None:
    response = http.post("/api/DetectLanguages", json=body)
    assert 400 <= response.status_code < 500
    error = response.json()["error"]
    assert error["field"] == field and error["code"]


def test_a_body_that_is_not_json_is_refused(http: httpx.Client) -> None:
    response = http.post("/api/DetectFaces", content=b"{not json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


def test_a_decompression_bomb_is_refused_without_the_broker_growing(http: httpx.Client) -> None:
    # 13000x13000 pixels in 0.5 MB: decoded, 169 MB (RGB: 507 MB) in whoever decodes it
    body = {"publication": {"id": "p", "data": {"image": base64.b64encode(bomb_png()).decode()}}}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB; the broker is in here
    response = http.post("/api/DetectFaces", json=body)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["code"] == "input_too_large" and "13000x13000" in error["message"]
    assert grown_mib < 60


def test_a_text_past_the_cap_is_refused(http: httpx.Client) -> None:
    body = {"publication": {"data": "word " * 40_000}, "params": {"language": "en"}}
    response = http.post("/api/DetectLanguages", json=body)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "input_too_large"


DETECT_BODY = {"publication": {"data": ENGLISH}, "params": {"language": "en"}}


@contextmanager
def detect_limited(tmp_path: Path, **overrides: object) -> Iterator[httpx.Client]:
    """A client of a broker allowing one Detect call a 100 seconds, 2 at once, per address
    (so that however slowly the first call starts the library's workers, no token comes
    back during the test)."""
    settings = load_settings({"data_dir": tmp_path, **overrides}, env={})
    functions = FunctionSettings(detect_rate_per_s=0.01, detect_burst=2)
    with (
        EmbeddedServer(dataclasses.replace(settings, functions=functions)) as srv,
        httpx.Client(base_url=srv.url, timeout=30) as client,
    ):
        yield client


def detect_calls(tmp_path: Path, n: int, loopback_limited: bool) -> list[httpx.Response]:
    """`n` calls in a row (`detect_limited`); and its /healthz, last."""
    with detect_limited(tmp_path, limits__rate_limit_loopback=loopback_limited) as client:
        answers = [client.post("/api/DetectLanguages", json=DETECT_BODY) for _ in range(n)]
        return [*answers, client.get("/healthz")]


def test_calls_past_an_addresss_rate_are_refused_with_retry_after(tmp_path: Path) -> None:
    *answers, health = detect_calls(tmp_path, 3, loopback_limited=True)
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[2].json()["error"]["code"] == "rate_limited"
    assert 1 <= int(answers[2].headers["Retry-After"]) <= 100  # the next token's time
    assert health.status_code == 200  # only the Detect routes are limited


def test_this_machine_s_clients_are_not_rate_limited_unless_told(tmp_path: Path) -> None:
    """The broker's own URL functions and the simulator call the library from loopback: as
    for registrations, they are limited only with `limits.rate_limit_loopback`."""
    *answers, _ = detect_calls(tmp_path, 4, loopback_limited=False)
    assert [a.status_code for a in answers] == [200] * 4


def test_the_64s_of_one_ipv6_48_share_its_rate(tmp_path: Path) -> None:
    """Callers named by a trusted proxy: this machine reaches the server from loopback alone.
    Each /64 may make 2 calls at once; their /48, 8."""
    with detect_limited(tmp_path, http__trusted_proxies="127.0.0.1") as client:

        def call(address: str) -> int:
            named = {"X-Forwarded-For": address}
            return client.post("/api/DetectLanguages", json=DETECT_BODY, headers=named).status_code

        walked = [call(f"2001:db8:1:{n:x}::1") for n in range(5) for _ in range(2)]
        elsewhere = call("2001:db8:2::1")
    assert walked == [200] * 8 + [429] * 2
    assert elsewhere == 200


def post_from(address: str, url: str, body: bytes) -> httpx.Response:
    """A library call from another address of this machine (127.0.0.0/8 is all loopback)."""
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(base_url=url, timeout=60, transport=transport) as client:
        headers = {"Content-Type": "application/json"}
        return client.post("/api/DetectLanguages", content=body, headers=headers)


def test_slow_uploads_hold_their_senders_reads_not_anyone_elses(tmp_path: Path) -> None:
    """As many bodies sent slowly from one client as there are turns to work on calls: they
    hold that client's one read (the rest wait unread), and another client's call is
    answered meanwhile; the slow ones are answered once their bodies are in."""
    overrides = {"data_dir": tmp_path, "limits__rate_limit_loopback": True}
    settings = load_settings(overrides, env={})
    functions = FunctionSettings(detect_reads_per_client=1)  # detect_concurrency: 4
    body = orjson.dumps(DETECT_BODY)
    with EmbeddedServer(dataclasses.replace(settings, functions=functions)) as srv:
        assert post_from("127.0.0.3", srv.url, body).status_code == 200  # the workers are up
        head = (
            f"POST /api/DetectLanguages HTTP/1.1\r\nHost: 127.0.0.1:{srv.settings.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        slow = [socket.create_connection(("127.0.0.1", srv.settings.port), 60) for _ in range(4)]
        try:
            for s in slow:
                s.sendall(head + body[:10])  # the bodies not all there
            time.sleep(0.5)
            assert post_from("127.0.0.2", srv.url, body).status_code == 200  # another client
            for s in slow:
                s.sendall(body[10:])
            for s in slow:
                assert b"200 OK" in s.recv(4096).split(b"\r\n")[0]
        finally:
            for s in slow:
                s.close()


def test_bodies_being_read_from_all_clients_are_bounded_too(tmp_path: Path) -> None:
    """One slow upload holds the only read of all: another client's call waits its turn
    (its body unread) until that body is in."""
    overrides = {"data_dir": tmp_path, "limits__rate_limit_loopback": True}
    settings = load_settings(overrides, env={})
    functions = FunctionSettings(detect_reads=1)
    body = orjson.dumps(DETECT_BODY)
    with (
        EmbeddedServer(dataclasses.replace(settings, functions=functions)) as srv,
        socket.create_connection(("127.0.0.1", srv.settings.port), 60) as slow,
        ThreadPoolExecutor(1) as pool,
    ):
        assert post_from("127.0.0.3", srv.url, body).status_code == 200  # the workers are up
        head = (
            f"POST /api/DetectLanguages HTTP/1.1\r\nHost: 127.0.0.1:{srv.settings.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        slow.sendall(head + body[:10])
        time.sleep(0.5)
        other = pool.submit(post_from, "127.0.0.2", srv.url, body)
        time.sleep(1.0)
        assert not other.done()  # the only read is held
        slow.sendall(body[10:])
        assert b"200 OK" in slow.recv(4096).split(b"\r\n")[0]
        assert other.result(timeout=60).status_code == 200
