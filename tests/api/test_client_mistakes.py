"""No 500 for a client's mistake: receipts and ids parsed strictly on every route and on the
stream, duplicate keys refused, 405 with `Allow`, and a 500 (should one happen) keeps the
keep-alive connection for the next request."""

from __future__ import annotations

import asyncio
import http.client
from typing import Any

import httpx
import orjson
import pytest
from tests.api.conftest import Sub
from tests.api.test_ws import frames, ws_url
from websockets.asyncio.client import connect

from tidings.server import EmbeddedServer

BAD_RECEIPTS = [
    "¹",
    "99999999999999999999.1.x",
    "9223372036854775808.1.abcdef012345",  # 2**63: past the store's 64-bit sequence
    "١.1.abc",  # an Arabic-Indic digit
    "nope",
    "1.1.abc\n",  # `$` also matches before a final line break
]


@pytest.mark.parametrize("receipt", BAD_RECEIPTS)
@pytest.mark.parametrize("route", ["/messages/ack", "/messages/nack"])
def test_a_malformed_receipt_is_a_422_naming_it_on_v1(sub: Sub, route: str, receipt: str) -> None:
    response = sub.post(route, {"receipts": ["1.1.abc", receipt]})
    error = response.json()["error"]
    assert (response.status_code, error["field"]) == (422, "receipts[1]")


@pytest.mark.parametrize("receipt", BAD_RECEIPTS)
def test_a_malformed_receipt_is_a_422_naming_it_on_the_thesis_api(
    http: httpx.Client, sub: Sub, receipt: str
) -> None:
    response = http.post(
        f"/api/queues/{sub.id}/ack", json={"receipts": [receipt]}, headers=sub.auth
    )
    assert (response.status_code, response.json()["error"]["field"]) == (422, "receipts[0]")


def test_a_well_formed_receipt_never_issued_is_unknown(sub: Sub) -> None:
    assert sub.post("/messages/ack", {"receipts": ["9.1.abc"]}).json()["unknown"] == ["9.1.abc"]


@pytest.mark.parametrize("ident", [2**63, -1, 1.5, True])
def test_dead_letter_ids_that_are_no_id_are_a_422(sub: Sub, ident: Any) -> None:
    response = sub.post("/dead-letters/redrive", {"ids": [ident]})
    assert (response.status_code, response.json()["error"]["field"]) == (422, "ids[0]")


@pytest.mark.parametrize("ident", [2**64, 10**30])
def test_dead_letter_ids_past_64_bits_are_refused_as_the_body_is_read(sub: Sub, ident: Any) -> None:
    # as every JSON integer past 64 bits is (MessagePack cannot carry one either)
    response = sub.post("/dead-letters/redrive", {"ids": [ident]})
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["field"]) == (400, "invalid_json", "ids")


def test_the_largest_id_is_accepted_and_redrives_nothing(sub: Sub) -> None:
    assert sub.post("/dead-letters/redrive", {"ids": [2**63 - 1]}).json() == {"redriven": 0}


async def test_a_malformed_receipt_on_the_stream_gets_an_error_frame_and_the_stream_goes_on(
    server: EmbeddedServer, http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["ws/bad"])
    async with connect(ws_url(server, sub), additional_headers=sub.auth) as ws:
        for receipt in BAD_RECEIPTS[:2]:
            await ws.send(orjson.dumps({"type": "ack", "receipts": [receipt]}).decode())
            [error] = await frames(ws, 1)
            assert error["error"]["field"] == "receipts[0]"  # type: ignore[index]
        http.post("/v1/publications", json={"topics": ["ws/bad"], "data": "still here"})
        [message] = await frames(ws, 1)
        assert message["body"]["data"] == "still here"  # type: ignore[index]
        await ws.send(orjson.dumps({"type": "ack", "receipts": [message["receipt"]]}).decode())
        await asyncio.sleep(0.2)
    assert sub.get("").json()["depth"]["ready"] == 0


def test_duplicate_keys_are_refused_naming_the_key(http: httpx.Client) -> None:
    response = http.post("/v1/publications", content=b'{"data": {"a": 1, "a": 2}}')
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["field"]) == (400, "invalid_json", "a")


def test_a_key_repeated_in_different_objects_is_no_duplicate(http: httpx.Client) -> None:
    body = b'{"data": [{"a": 1}, {"a": 2}], "topics": ["x:y"]}'
    assert http.post("/v1/publications", content=body).status_code == 201


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/v1/publications", "POST"),
        ("PATCH", "/v1/subscribers/someone", "DELETE, GET, HEAD"),
        ("POST", "/healthz", "GET, HEAD"),
    ],
)
def test_a_405_names_the_allowed_methods(
    http: httpx.Client, method: str, path: str, allow: str
) -> None:
    response = http.request(method, path)
    assert (response.status_code, response.headers["allow"]) == (405, allow)


def test_after_a_500_the_same_connection_serves_the_next_request(
    server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> int:
        raise RuntimeError("the store failed")

    monkeypatch.setattr(server.broker.store.sync, "count_subscribers", broken)
    conn = http.client.HTTPConnection("127.0.0.1", server.settings.port, timeout=10)
    conn.request("GET", "/metrics")
    failed = conn.getresponse()
    assert (failed.status, orjson.loads(failed.read())["error"]["code"]) == (500, "internal")
    socket_used = conn.sock
    conn.request("GET", "/healthz")
    ok = conn.getresponse()
    assert (ok.status, ok.read(), conn.sock) == (200, b'{"status":"ok"}', socket_used)
    conn.close()


def test_builtin_parameters_of_the_wrong_type_are_refused_at_subscribe_time(
    http: httpx.Client, sub: Sub
) -> None:
    function = {"function_type": "lang", "builtin": "detect_language", "params": {}}
    function["params"] = {"language": {"x": 1}}
    response = sub.post("/subscriptions", {"function": function})
    error = response.json()["error"]
    assert (response.status_code, error["field"]) == (422, "function.params.language")
    thesis = {
        "subscriberId": sub.id,
        "functionType": "builtin",
        "subscriptionTopic": "lang",
        "matchingFunction": "detect_language",
        "parameters": {"language": 7},
    }
    response = http.post("/api/SubscribeFunction", json=thesis, headers=sub.auth)
    assert (response.status_code, response.json()["error"]["field"]) == (
        422,
        "parameters.language",
    )
