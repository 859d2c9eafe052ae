"""The WebSocket push stream: deliveries, acknowledgements, the prefetch bound."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx
import orjson
import pytest
from tests.api.conftest import Sub
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tidings.client import AsyncClient
from tidings.errors import ErrorCode, TidingsError
from tidings.server import EmbeddedServer


def ws_url(server: EmbeddedServer, sub: Sub, query: str = "") -> str:
    return server.url.replace("http", "ws") + f"{sub.base}/stream{query}"


async def frames(ws: object, n: int) -> list[dict[str, object]]:
    """The next `n` messages (or error frames), unpacking batch frames."""
    out: list[dict[str, object]] = []
    while len(out) < n:
        frame = orjson.loads(await asyncio.wait_for(ws.recv(), 10))  # type: ignore[attr-defined]
        out += frame["messages"] if frame["type"] == "messages" else [frame]
    return out


async def test_a_stream_pushes_messages_and_takes_acks(
    server: EmbeddedServer, http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["push"])
    async with connect(ws_url(server, sub), additional_headers=sub.auth) as ws:
        http.post("/v1/publications", json={"topics": ["push"], "data": "hello"})
        [frame] = await frames(ws, 1)
        assert frame["body"]["data"] == "hello"  # type: ignore[index]
        await ws.send(orjson.dumps({"type": "ack", "receipts": [frame["receipt"]]}).decode())
        await asyncio.sleep(0.2)
    assert sub.get("").json()["depth"] == {"ready": 0, "leased": 0, "dead": 0}


def moved_once(server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The queues' first lease answers as a broker whose partition moved away does."""
    queues = server.broker.queues
    real_pull, refused = queues.pull, [False]

    async def pull(*args: Any, **kwargs: Any) -> Any:
        if not refused[0]:
            refused[0] = True
            raise TidingsError(ErrorCode.UNAVAILABLE, detail="held elsewhere", retry_s=1)
        return await real_pull(*args, **kwargs)

    monkeypatch.setattr(queues, "pull", pull)


async def test_a_stream_whose_queue_is_served_elsewhere_now_is_told_and_closed_to_retry(
    server: EmbeddedServer, sub: Sub, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved_once(server, monkeypatch)
    async with connect(ws_url(server, sub), additional_headers=sub.auth) as ws:
        error = orjson.loads(await ws.recv())
        assert error["error"]["code"] == "unavailable"
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013  # try again later


async def test_the_async_clients_stream_follows_its_queue_to_where_it_is_served(
    server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved_once(server, monkeypatch)
    async with AsyncClient(server.url) as client:
        me = await client.register()
        await me.subscribe(topics=["moved"])
        await client.publish("here", topics=["moved"])
        async with me.stream() as stream:
            received = stream.__aiter__()
            message = await asyncio.wait_for(received.__anext__(), 20)
            await message.ack()
            await received.aclose()
        assert message.data == "here" and stream.reconnects == 1


async def test_no_more_than_prefetch_messages_are_unacknowledged(
    server: EmbeddedServer, http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["pf"])
    http.post("/v1/publications/batch", json={"publications": [{"topics": ["pf"]}] * 5})
    async with connect(ws_url(server, sub, "?prefetch=2"), additional_headers=sub.auth) as ws:
        first = await frames(ws, 2)
        assert sub.get("").json()["depth"]["ready"] == 3
        await ws.send(orjson.dumps({"type": "ack", "receipts": [first[0]["receipt"]]}).decode())
        assert len(await frames(ws, 1)) == 1
    # what was in flight when the socket closed is released at once
    await asyncio.sleep(0.3)
    assert sub.get("").json()["depth"]["ready"] == 4


async def test_a_stream_with_a_wrong_token_is_closed_with_an_error(
    server: EmbeddedServer, sub: Sub
) -> None:
    async with connect(ws_url(server, sub, "?token=wrong")) as ws:
        [frame] = await frames(ws, 1)
        assert frame["error"]["code"] == "forbidden"  # type: ignore[index]
        await asyncio.sleep(0.1)
    assert ws.close_code == 4403


async def test_a_malformed_frame_gets_an_error_frame_and_the_stream_goes_on(
    server: EmbeddedServer, http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["mf"])
    async with connect(ws_url(server, sub), additional_headers=sub.auth) as ws:
        await ws.send("not json")
        [error] = await frames(ws, 1)
        assert error["type"] == "error"
        http.post("/v1/publications", json={"topics": ["mf"]})
        assert (await frames(ws, 1))[0]["publication_id"]


async def test_a_message_nacked_over_the_stream_comes_back_with_its_next_attempt(
    server: EmbeddedServer, http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["again"])
    async with connect(ws_url(server, sub), additional_headers=sub.auth) as ws:
        http.post("/v1/publications", json={"topics": ["again"], "data": 7})
        [first] = await frames(ws, 1)
        await ws.send(orjson.dumps({"type": "nack", "receipts": [first["receipt"]]}).decode())
        [second] = await frames(ws, 1)
    assert (first["attempt"], second["attempt"]) == (1, 2)
    assert second["publication_id"] == first["publication_id"]
    assert second["receipt"] != first["receipt"]


async def test_a_slow_commit_never_stops_the_stream_from_reading(
    server: EmbeddedServer, http: httpx.Client, sub: Sub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While an ack's commit takes its time, the next frame is read and answered at once,
    and a stream closed meanwhile releases nothing that was acknowledged."""
    broker = server.broker
    real_ack = broker.ack

    async def slow_ack(subscriber_id: str, receipts: Sequence[str]) -> Any:
        await asyncio.sleep(1.5)  # a commit stuck behind a slow disk
        return await real_ack(subscriber_id, receipts)

    monkeypatch.setattr(broker, "ack", slow_ack)
    sub.subscribe(topics=["slow"])
    async with connect(ws_url(server, sub), additional_headers=sub.auth) as ws:
        http.post("/v1/publications", json={"topics": ["slow"], "data": "one"})
        [frame] = await frames(ws, 1)
        await ws.send(orjson.dumps({"type": "ack", "receipts": [frame["receipt"]]}).decode())
        await ws.send("not a frame")
        started = asyncio.get_running_loop().time()
        [error] = await frames(ws, 1)
        answered_in = asyncio.get_running_loop().time() - started
    assert error["type"] == "error" and answered_in < 1.0  # not after the ack's 1.5 s
    # closed with the ack still committing: the stream waits for it before it releases what
    # is in flight, so the message is gone, not back in the queue
    for _ in range(100):
        depth = sub.get("").json()["depth"]
        if depth["leased"] == 0:
            break
        await asyncio.sleep(0.05)
    assert depth == {"ready": 0, "leased": 0, "dead": 0}


async def test_a_stream_in_the_compact_form_leaves_out_the_repeated_ids(
    server: EmbeddedServer, http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["compact"])
    async with connect(ws_url(server, sub, "?form=compact"), additional_headers=sub.auth) as ws:
        http.post("/v1/publications", json={"topics": ["compact"], "data": 1})
        [message] = await frames(ws, 1)
    assert sorted(message) == ["body", "receipt", "subscription_ids"]
    assert message["body"]["data"] == 1  # type: ignore[index]


async def test_an_unknown_form_is_refused_with_an_error_frame(
    server: EmbeddedServer, sub: Sub
) -> None:
    async with connect(ws_url(server, sub, "?form=tiny"), additional_headers=sub.auth) as ws:
        [error] = await frames(ws, 1)
        assert error["error"]["field"] == "form"  # type: ignore[index]
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4400


async def test_a_stream_commits_at_most_a_thousand_receipts_at_once_however_fast_it_acks(
    server: EmbeddedServer, sub: Sub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ack frames of receipts the stream never handed out, sent back to back, wait for
    the commits before them past 1,000 receipts (the prefetch here is 10): 64 commits of
    36,000 receipts each at once held /healthz 0.7 s."""
    queues = server.broker.queues
    real_ack = queues.ack
    committing, most, acked = [0], [0], [0]

    async def counted_ack(subscriber_id: str, receipts: Sequence[str]) -> Any:
        committing[0] += len(receipts)
        most[0] = max(most[0], committing[0])
        try:
            await asyncio.sleep(0.05)  # a commit takes its time: the next frames come meanwhile
            return await real_ack(subscriber_id, receipts)
        finally:
            committing[0] -= len(receipts)
            acked[0] += len(receipts)

    monkeypatch.setattr(queues, "ack", counted_ack)
    frames_sent = 12
    async with connect(ws_url(server, sub, "?prefetch=10"), additional_headers=sub.auth) as ws:
        for frame in range(frames_sent):
            receipts = [f"{frame + 1}.{i}.ab" for i in range(600)]
            await ws.send(orjson.dumps({"type": "ack", "receipts": receipts}).decode())
        for _ in range(200):  # every frame read and committed
            if acked[0] == frames_sent * 600:
                break
            await asyncio.sleep(0.05)
    assert acked[0] == frames_sent * 600
    assert most[0] <= 1_000
