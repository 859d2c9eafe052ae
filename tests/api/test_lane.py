"""The publish lane answers `POST /v1/publications` and `POST /v1/publications/batch`
exactly as the routed handlers do, and hands every other request to the application."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.broker.test_operations import settings_for, started

from tidings.api.app import create_app
from tidings.api.lane import PublishLane
from tidings.broker import Broker

CASES = [
    ({"data": {"t": 1}, "topics": ["a/b"]}, None),
    (None, b'{"data": 1, "data": 2}'),  # a duplicate key
    (None, b"{not json"),
    (None, b"\xff\xfe"),  # not UTF-8
    (None, b""),
    ({"topics": "not-a-list"}, None),
    ({"topics": ["a/+"]}, None),  # a wildcard is not a topic one publishes to
    ({"data": "x" * 300_000}, None),  # past the publication size limit
    ({"attributes": {"nested": {"no": 1}}}, None),
    ([1, 2], None),
]


BATCHES = [
    ("", {"publications": [{"data": 1, "topics": ["a"]}, {"data": {"t": [2]}}]}, None),
    ("?answer=count", {"publications": [{"data": 1, "topics": ["a"]}]}, None),
    ("?answer=nothing", {"publications": [{"data": 1}]}, None),  # not an answer kind
    ("", {"publications": []}, None),
    ("", {"publications": [{"data": 1}, {"topics": ["a/#"]}]}, None),  # the second's topic
    ("", {"publications": [{"data": 1}] * 1001}, None),  # past the batch bound
    ("", {"publications": {"data": 1}}, None),
    ("", None, b'{"publications": [{"data": 1, "data": 2}]}'),  # a duplicate key
    ("", None, b"{not json"),
    ("", None, b""),
]


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    b = await started(settings_for(tmp_path))
    yield b
    await b.close()
    b.store.sync.close()


def client(app: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")  # type: ignore[arg-type]


def comparable(response: httpx.Response) -> tuple[int, object]:
    body = response.json()
    if response.status_code == 201 and "published" not in body:  # ids and times differ
        body = sorted(body)  # from call to call; a batch's counts do not
    return response.status_code, body


@pytest.mark.parametrize(("json", "content"), CASES)
async def test_the_lane_answers_as_the_routed_handler(
    broker: Broker, json: object, content: bytes | None
) -> None:
    routed = create_app(broker)
    async with client(routed) as plain, client(PublishLane(routed, broker)) as lane:
        kwargs = {"content": content} if content is not None else {"json": json}
        expected = await plain.post("/v1/publications", **kwargs)  # type: ignore[arg-type]
        got = await lane.post("/v1/publications", **kwargs)  # type: ignore[arg-type]
    assert comparable(got) == comparable(expected)
    assert got.headers["content-type"] == "application/json"


@pytest.mark.parametrize(("query", "json", "content"), BATCHES)
async def test_the_lane_answers_batches_as_the_routed_handler(
    broker: Broker, query: str, json: object, content: bytes | None
) -> None:
    routed = create_app(broker)
    path = "/v1/publications/batch" + query
    async with client(routed) as plain, client(PublishLane(routed, broker)) as lane:
        kwargs = {"content": content} if content is not None else {"json": json}
        expected = await plain.post(path, **kwargs)  # type: ignore[arg-type]
        got = await lane.post(path, **kwargs)  # type: ignore[arg-type]
    assert comparable(got) == comparable(expected)
    assert got.headers["content-type"] == "application/json"


async def test_a_batch_through_the_lane_is_delivered_and_counted(broker: Broker) -> None:
    me, _ = await broker.register()
    await broker.subscribe(me.id, "topic", topics=("lane",))
    async with client(PublishLane(create_app(broker), broker)) as lane:
        body = {"publications": [{"topics": ["lane"], "data": n} for n in range(3)]}
        answer = await lane.post("/v1/publications/batch?answer=count", json=body)
        assert answer.status_code == 201
        assert answer.json() == {"published": 3, "deliveries": 3}
    labels = {"route": "/v1/publications/batch", "method": "POST", "status": "201"}
    assert broker.metrics.value("http_requests", **labels) == 1
    pulled = await broker.pull(me.id, 10, wait_s=0)
    assert [m.body["data"] for m in pulled] == [0, 1, 2]  # type: ignore[index]


async def test_a_published_message_through_the_lane_is_delivered_and_counted(
    broker: Broker,
) -> None:
    me, _ = await broker.register()
    await broker.subscribe(me.id, "topic", topics=("lane",))
    routed = create_app(broker)
    async with client(PublishLane(routed, broker)) as lane:
        answer = await lane.post("/v1/publications", json={"topics": ["lane"], "data": 7})
        assert (answer.status_code, answer.json()["deliveries"]) == (201, 1)
        labels = {"route": "/v1/publications", "method": "POST", "status": "201"}
        assert broker.metrics.value("http_requests", **labels) == 1
        [message] = await broker.pull(me.id, 10, wait_s=0)
        assert message.body["data"] == 7  # type: ignore[index]


async def test_other_requests_go_on_to_the_application(broker: Broker) -> None:
    async with client(PublishLane(create_app(broker), broker)) as lane:
        assert (await lane.get("/healthz")).json() == {"status": "ok"}
        wrong_method = await lane.get("/v1/publications")
        assert wrong_method.status_code == 405
        assert (await lane.put("/v1/publications/batch")).status_code == 405


async def test_the_lane_takes_msgpack_as_the_routed_handler_does(broker: Broker) -> None:
    import msgspec

    routed = create_app(broker)
    headers = {"Content-Type": "application/msgpack"}
    for body in ({"data": b"\x00\xff", "topics": ["a"]}, {1: 2}, {"data": {"x": b"\x00"}}):
        content = msgspec.msgpack.encode(body)
        async with client(routed) as plain, client(PublishLane(routed, broker)) as lane:
            expected = await plain.post("/v1/publications", content=content, headers=headers)
            got = await lane.post("/v1/publications", content=content, headers=headers)
        assert comparable(got) == comparable(expected)


async def test_the_lane_and_the_routes_run_one_endpoint_each(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tidings.api.v1.publications import Publish, PublishBatch

    calls: list[str] = []
    for endpoint in (Publish, PublishBatch):
        answered = endpoint.answer

        async def counted(self: Any, *args: Any, answered: Any = answered) -> int:
            calls.append(type(self).__name__)
            return int(await answered(self, *args))

        monkeypatch.setattr(endpoint, "answer", counted)
    routed = create_app(broker)
    batch = {"publications": [{"data": 3}]}
    async with client(routed) as plain, client(PublishLane(routed, broker)) as lane:
        assert (await plain.post("/v1/publications", json={"data": 1})).status_code == 201
        assert (await lane.post("/v1/publications", json={"data": 2})).status_code == 201
        assert (await plain.post("/v1/publications/batch", json=batch)).status_code == 201
        assert (await lane.post("/v1/publications/batch", json=batch)).status_code == 201
    assert calls == ["Publish", "Publish", "PublishBatch", "PublishBatch"]


async def test_the_lane_answers_publishes_without_the_application(broker: Broker) -> None:
    """Whatever the application behind it would answer (here: nothing but 404)."""

    async def nowhere(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async with client(PublishLane(nowhere, broker)) as lane:
        one = await lane.post("/v1/publications", json={"data": 1})
        batch = await lane.post("/v1/publications/batch", json={"publications": [{"data": 2}]})
        other = await lane.get("/healthz")
    assert (one.status_code, batch.status_code, other.status_code) == (201, 201, 404)
