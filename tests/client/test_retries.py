"""A publish whose answer is lost after the broker committed it (a dropped connection, a
timeout) is retried by the product clients under their own dedup id, and delivered once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from tests.client.proxy import LosingProxy

from tidings.client import AsyncClient, Client, TidingsClientError
from tidings.config import load_settings
from tidings.server import EmbeddedServer


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("retries")}, env={})
    with EmbeddedServer(settings) as srv:
        yield srv


def proxied(server: EmbeddedServer, delay_s: float = 0.0) -> LosingProxy:
    return LosingProxy(server.settings.port, drop=1, delay_s=delay_s)


def queue(server: EmbeddedServer) -> tuple[str, str, str]:
    topic = f"retries/{uuid.uuid4().hex[:8]}"
    with Client(server.url) as client:
        me = client.register()
        me.subscribe(topics=[topic])
    return topic, me.id, me.token


def delivered(server: EmbeddedServer, sid: str, token: str) -> list[str]:
    with Client(server.url) as client:
        return [m.publication_id for m in client.subscriber(sid, token).pull(100, wait=0.5)]


def test_the_sync_client_retries_a_publish_whose_connection_dropped(
    server: EmbeddedServer,
) -> None:
    topic, sid, token = queue(server)
    proxy = proxied(server)
    with Client(proxy.url) as client:
        published = client.publish("once", topics=[topic])
    proxy.close()
    assert proxy.lost == 1 and published.duplicate
    assert delivered(server, sid, token) == [published.id]


def test_the_sync_client_retries_a_publish_that_timed_out(server: EmbeddedServer) -> None:
    topic, sid, token = queue(server)
    proxy = proxied(server, delay_s=1.5)
    with Client(proxy.url, timeout=0.5) as client:
        published = client.publish("once", topics=[topic])
    proxy.close()
    assert proxy.lost == 1 and published.duplicate
    assert delivered(server, sid, token) == [published.id]


def test_the_async_client_retries_a_publish_and_a_batch_whose_answers_were_lost(
    server: EmbeddedServer,
) -> None:
    topic, sid, token = queue(server)

    async def publish() -> list[str]:
        proxy = proxied(server)
        async with AsyncClient(proxy.url) as client:
            one = await client.publish("once", topics=[topic])
        proxy.close()
        batch_proxy = proxied(server, delay_s=1.5)
        async with AsyncClient(batch_proxy.url, timeout=0.5) as client:
            many = await client.publish_batch([{"data": i, "topics": [topic]} for i in range(3)])
        batch_proxy.close()
        assert one.duplicate and all(p.duplicate for p in many)
        return [one.id, *(p.id for p in many)]

    ids = asyncio.run(publish())
    assert delivered(server, sid, token) == ids


def test_without_retries_a_lost_answer_is_the_callers_to_handle(server: EmbeddedServer) -> None:
    topic, sid, token = queue(server)
    proxy = proxied(server)
    with Client(proxy.url, retries=0) as client, pytest.raises(TidingsClientError) as lost:
        client.publish("once", topics=[topic])
    proxy.close()
    assert lost.value.code == "unreachable"
    assert len(delivered(server, sid, token)) == 1  # committed all the same
