"""Large publications arrive, at the default publication limit and at raised ones (2 MB,
8 MB), by every way a subscriber receives: the sync and async clients' pulls, the WebSocket
stream returning to a backlog, a webhook to a real receiver, and `tidings subscribe`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest
from tests.delivery.receiver import Receiver, wait_for

from tidings.client import AsyncClient, Client
from tidings.config import load_settings
from tidings.delivery.frames import BATCH_BYTES
from tidings.server import EmbeddedServer

# limit (None: the default, 256 KiB) -> how many publications of nearly that size
SIZES = {"default": (None, 80), "2MB": (2_000_000, 12), "8MB": (8_000_000, 3)}


@dataclass(frozen=True)
class Broker:
    url: str
    limit: int
    count: int


@pytest.fixture(scope="module", params=list(SIZES))
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Broker]:
    limit, count = SIZES[request.param]
    overrides: dict[str, object] = {
        "data_dir": tmp_path_factory.mktemp("large"),
        "event_log": False,
        # a webhook's host is held to 1 MiB/s by default: 80 large bodies would take 20 s
        "webhooks__host_bytes_per_s": 0,
        "webhooks__allow_networks": "127.0.0.0/8",  # the webhook's receiver is on loopback
    }
    if limit is not None:
        overrides["limits__max_publication_bytes"] = limit
    settings = load_settings(overrides, env={})
    with EmbeddedServer(settings) as server:
        yield Broker(server.url, settings.limits.max_publication_bytes, count)


def backlog(broker: Broker, topic: str) -> list[str]:
    """`count` publications on `topic`, each as large as the limit allows; their data."""
    size = broker.limit - 200  # the rest of the body: {"data": ..., "topics": [...], ...}
    sent = [f"{i:04d}" + "x" * (size - 4) for i in range(broker.count)]
    with Client(broker.url) as client:
        for data in sent:
            client.publish(data, topics=[topic])
    return sent


def subscribed(broker: Broker) -> tuple[str, str, str]:
    topic = f"large/{uuid.uuid4().hex[:8]}"
    with Client(broker.url) as client:
        me = client.register()
        me.subscribe(topics=[topic])
    return topic, me.id, me.token


def test_the_sync_client_pulls_every_large_message(broker: Broker) -> None:
    topic, sid, token = subscribed(broker)
    sent = backlog(broker, topic)
    got: list[str] = []
    with Client(broker.url) as client:
        for message in client.subscriber(sid, token).messages(max_messages=100, wait=1):
            got.append(message.data)
            message.ack()
            if len(got) == len(sent):
                break
    assert got == sent


def test_the_async_client_pulls_every_large_message(broker: Broker) -> None:
    topic, sid, token = subscribed(broker)
    sent = backlog(broker, topic)

    async def pull_all() -> list[str]:
        got: list[str] = []
        async with AsyncClient(broker.url) as client:
            me = client.subscriber(sid, token)
            while len(got) < len(sent):
                batch = await me.pull(100, wait=1)
                got += [m.data for m in batch]
                await me.ack([m.receipt for m in batch])
        return got

    assert asyncio.run(pull_all()) == sent


def test_a_stream_returning_to_a_large_backlog_gets_it_all_without_reconnecting(
    broker: Broker,
) -> None:
    topic, sid, token = subscribed(broker)
    sent = backlog(broker, topic)

    async def stream_all() -> tuple[list[str], int]:
        got: list[str] = []
        async with (
            AsyncClient(broker.url) as client,
            client.subscriber(sid, token).stream() as stream,
        ):
            async for message in stream:
                got.append(message.data)
                await message.ack()
                if len(got) == len(sent):
                    return got, stream.reconnects
        return got, -1

    got, reconnects = asyncio.run(asyncio.wait_for(stream_all(), 120))
    assert got == sent and reconnects == 0


def test_a_webhook_receives_every_large_message(broker: Broker) -> None:
    topic, sid, token = subscribed(broker)
    receiver = Receiver()
    try:
        auth = {"Authorization": f"Bearer {token}"}
        url = f"{broker.url}/v1/subscribers/{sid}/webhook"
        sent = backlog(broker, topic)  # waiting before the webhook: whole batches at once
        hook = httpx.put(url, json={"url": receiver.url()}, headers=auth)
        assert hook.status_code in (200, 201), hook.text
        wait_for(lambda: len(receiver.delivered()) >= len(sent), "every message", 120)
        assert sorted(m["body"]["data"] for m in receiver.delivered()) == sent
        # bounded by bytes, as pulls and streams are: never a hundred large bodies a POST
        for request in receiver.taken():
            bodies = [len(orjson.dumps(m["body"])) for m in request.messages()]
            assert len(bodies) == 1 or sum(bodies) <= BATCH_BYTES
    finally:
        receiver.close()


def test_tidings_subscribe_prints_every_large_message(broker: Broker, tmp_path: Path) -> None:
    topic, sid, token = subscribed(broker)
    sent = backlog(broker, topic)
    command = [sys.executable, "-m", "tidings.cli.main", "subscribe", "--id", sid, "--token",
               token, "--count", str(len(sent)), "--url", broker.url]  # fmt: skip
    done = subprocess.run(command, capture_output=True, timeout=120, check=True)
    lines = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert [line["body"]["data"] for line in lines] == sent


def test_a_pull_that_cannot_hold_the_next_message_says_so_and_leaves_it_ready(
    broker: Broker,
) -> None:
    topic, sid, token = subscribed(broker)
    [first, *_] = backlog(broker, topic)
    auth = {"Authorization": f"Bearer {token}"}
    url = f"{broker.url}/v1/subscribers/{sid}/messages"
    refused = httpx.get(url, params={"max_bytes": 65536}, headers=auth)
    assert refused.status_code == 413
    assert refused.json()["error"]["code"] == "answer_too_large"
    assert refused.json()["error"]["field"] == "max_bytes"
    [again] = httpx.get(url, params={"max": 1}, headers=auth).json()["messages"]
    assert again["body"]["data"] == first and again["attempt"] == 2


def test_a_batch_stays_within_what_the_client_reads(broker: Broker) -> None:
    topic, sid, token = subscribed(broker)
    backlog(broker, topic)
    auth = {"Authorization": f"Bearer {token}"}
    most = 2 * broker.limit + 65536
    answer = httpx.get(f"{broker.url}/v1/subscribers/{sid}/messages",
                       params={"max": 100, "max_bytes": most}, headers=auth)  # fmt: skip
    assert answer.status_code == 200 and len(answer.content) <= most
    assert 1 <= len(answer.json()["messages"]) < broker.count
