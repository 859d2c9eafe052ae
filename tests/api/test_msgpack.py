"""Binary data without base64: published as MessagePack `bin`, delivered as `bin` to a
MessagePack pull or stream, and as base64 text (marked) to a JSON one."""

from __future__ import annotations

import base64

import httpx
import msgspec
import pytest
from tests.api.conftest import Sub
from tests.api.test_ws import ws_url
from websockets.asyncio.client import connect

from tidings.server import EmbeddedServer

BLOB = bytes(range(256)) * 4  # not UTF-8, not JSON
PACKED = {"Content-Type": "application/msgpack"}


def publish_packed(
    http: httpx.Client, body: object, path: str = "/v1/publications"
) -> httpx.Response:
    return http.post(path, content=msgspec.msgpack.encode(body), headers=PACKED)


def test_binary_data_arrives_as_bin_on_a_msgpack_pull_and_as_marked_base64_on_json(
    http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["bin"])
    published = publish_packed(http, {"data": BLOB, "topics": ["bin"], "attributes": {"k": 1}})
    assert published.status_code == 201 and published.json()["deliveries"] == 1
    packed = sub.get("/messages", encoding="msgpack", visibility=0)
    assert packed.headers["content-type"] == "application/msgpack"
    [message] = msgspec.msgpack.decode(packed.content)["messages"]
    assert message["body"]["data"] == BLOB and "data_encoding" not in message["body"]
    assert message["body"]["attributes"] == {"k": 1}
    [plain] = sub.get("/messages").json()["messages"]
    assert plain["body"]["data_encoding"] == "base64"
    assert base64.b64decode(plain["body"]["data"]) == BLOB


def test_a_msgpack_batch_publishes_binary_and_plain_data(http: httpx.Client, sub: Sub) -> None:
    sub.subscribe(topics=["bin"])
    body = {
        "publications": [
            {"data": b"\x00\x01", "topics": ["bin"]},
            {"data": "text", "topics": ["bin"]},
        ]
    }
    assert publish_packed(http, body, "/v1/publications/batch").status_code == 201
    packed = sub.get("/messages", encoding="msgpack", max=10).content
    assert [m["body"]["data"] for m in msgspec.msgpack.decode(packed)["messages"]] == [
        b"\x00\x01",
        "text",
    ]


@pytest.mark.parametrize(
    ("content", "code", "field"),
    [
        (b"\xc1", "invalid_msgpack", None),  # a byte MessagePack never uses
        (msgspec.msgpack.encode({1: "int key"}), "invalid_msgpack", None),
        (msgspec.msgpack.encode({"data": {"nested": b"\x00"}}), "invalid_field", "data"),
        (msgspec.msgpack.encode({"topics": [b"t"]}), "invalid_field", "topics[0]"),
        (msgspec.msgpack.encode({"data": msgspec.msgpack.Ext(1, b"x")}), "invalid_msgpack", None),
    ],
)
def test_msgpack_that_has_no_publication_form_is_a_client_error(
    http: httpx.Client, content: bytes, code: str, field: str | None
) -> None:
    response = http.post("/v1/publications", content=content, headers=PACKED)
    assert 400 <= response.status_code < 500
    error = response.json()["error"]
    assert error["code"] == code
    if field is not None:
        assert error["field"] == field


async def test_a_msgpack_stream_pushes_bin_and_takes_msgpack_acks(
    server: EmbeddedServer, http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["bin/ws"])
    url = ws_url(server, sub, "?encoding=msgpack&form=compact")
    async with connect(url, additional_headers=sub.auth) as ws:
        publish_packed(http, {"data": BLOB, "topics": ["bin/ws"]})
        frame = msgspec.msgpack.decode(await ws.recv())
        [message] = frame["messages"]
        assert message["body"]["data"] == BLOB and "publication_id" not in message
        await ws.send(msgspec.msgpack.encode({"type": "ack", "receipts": [message["receipt"]]}))
        await ws.send(msgspec.msgpack.encode({"type": "ack", "receipts": "not a list"}))
        error = msgspec.msgpack.decode(await ws.recv())
        assert error["type"] == "error"
    assert sub.get("/messages").json()["messages"] == []  # acknowledged, not released
