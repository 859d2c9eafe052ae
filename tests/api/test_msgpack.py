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


NOT_UTF8 = b"\xa2\xff\xfe"  # a MessagePack str whose two bytes are not UTF-8


def packed_map(*pairs: tuple[str, object]) -> bytes:
    """A map written pair by pair, so that a key may come twice (msgspec would keep one)."""
    return bytes([0x80 | len(pairs)]) + b"".join(
        msgspec.msgpack.encode(k) + msgspec.msgpack.encode(v) for k, v in pairs
    )


@pytest.mark.parametrize("path", ["/v1/publications", "/v1/publications/batch"])
@pytest.mark.parametrize(
    "content",
    [
        b"\x81\xa4data" + NOT_UTF8,  # a value
        b"\x81" + NOT_UTF8 + b"\x01",  # a key
        b"\x81\xacpublications\x91\x81\xa6topics\x91" + NOT_UTF8,  # deep in a batch
    ],
)
def test_a_msgpack_string_that_is_not_utf8_is_refused_as_in_json(
    http: httpx.Client, path: str, content: bytes
) -> None:
    response = http.post(path, content=content, headers=PACKED)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_utf8"


@pytest.mark.parametrize(
    ("path", "content", "field"),
    [
        ("/v1/publications", packed_map(("data", 1), ("data", 2)), "data"),
        ("/v1/publications", packed_map(("topics", ["a"]), ("topics", ["b"])), "topics"),
        ("/v1/publications", packed_map(("data", {"x": [{"k": 1}]}), ("dedup_id", "k")), None),
        (
            "/v1/publications/batch",
            b"\x81\xacpublications\x92\x80" + packed_map(("attributes", {}), ("attributes", {})),
            "attributes",
        ),
        (
            "/v1/publications",
            b"\x81\xa4data\x92" + packed_map(("k", 1)) + packed_map(("q", b"\x00"), ("q", 2)),
            "q",
        ),
        (  # one-byte items are passed over in runs, each within its own array
            "/v1/publications",
            b"\x81\xa4data\x93\x92\x01\x02\x03" + packed_map(("q", 1), ("q", 2)),
            "q",
        ),
    ],
)
def test_a_msgpack_key_written_twice_is_refused_as_in_json(
    http: httpx.Client, path: str, content: bytes, field: str | None
) -> None:
    response = http.post(path, content=content, headers=PACKED)
    if field is None:  # the same key in different maps is no duplicate
        assert response.status_code == 201
        return
    assert response.status_code == 400
    assert response.json()["error"] | {"message": ""} == {
        "code": "invalid_msgpack",
        "message": "",
        "field": field,
    }
    assert "duplicate key" in response.json()["error"]["message"]


async def test_a_msgpack_frame_that_is_not_utf8_gets_an_error_frame_and_the_stream_goes_on(
    server: EmbeddedServer, http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["utf8/ws"])
    async with connect(ws_url(server, sub, "?encoding=msgpack"), additional_headers=sub.auth) as ws:
        for frame in (
            b"\x82\xa4type\xa3ack\xa8receipts\x91" + NOT_UTF8,
            b"\x82\xa4type\xa3ack" + NOT_UTF8 + b"\x90",
            packed_map(("type", "ack"), ("receipts", []), ("receipts", [])),
        ):
            await ws.send(frame)
            error = msgspec.msgpack.decode(await ws.recv())
            assert error["type"] == "error"
            assert error["error"]["code"] in ("invalid_utf8", "invalid_msgpack")
        publish_packed(http, {"data": b"\x01", "topics": ["utf8/ws"]})
        [message] = msgspec.msgpack.decode(await ws.recv())["messages"]
        assert message["body"]["data"] == b"\x01"


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
