"""The typed clients against a real server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tidings.client import AsyncClient, Client, TidingsClientError
from tidings.config import load_settings
from tidings.server import EmbeddedServer


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("client")}, env={})
    with EmbeddedServer(settings) as server:
        yield server.url


def test_the_sync_client_covers_a_subscribers_life(url: str) -> None:
    with Client(url) as client:
        me = client.register()
        made = me.subscribe(predicates=[{"key": "t", "op": ">=", "value": 20}])
        assert client.publish("warm", attributes={"t": 21}).deliveries == 1
        [message] = me.pull(wait=1)
        assert message.data == "warm" and message.subscription_ids == [made.id]
        assert me.ack([message.receipt]).acked == [message.receipt]
        assert me.depth().ready == 0 and me.subscriptions() == [made]
        assert (made.kind, made.status) == ("content", "active")
        me.unsubscribe(made.id)
        me.unregister()
        assert client.health()


def test_a_refusal_carries_the_brokers_code_and_field(url: str) -> None:
    with Client(url) as client, pytest.raises(TidingsClientError) as caught:
        client.publish(topics=["bad/#"])
    assert (caught.value.status, caught.value.code, caught.value.field) == (
        422,
        "invalid_topic",
        "topics[0]",
    )


def test_a_handle_rebuilt_from_id_and_token_sees_the_same_subscriber(url: str) -> None:
    with Client(url) as client:
        first = client.register()
        again = client.subscriber(first.id, first.token)
        assert again.info().id == first.id and again.info().depth.ready == 0


def test_a_wrong_token_is_refused_with_the_brokers_code(url: str) -> None:
    with Client(url) as client, pytest.raises(TidingsClientError) as caught:
        me = client.register()
        client.subscriber(me.id, "not-the-token").depth()
    assert (caught.value.status, caught.value.code) == (403, "forbidden")


def test_an_unreachable_broker_is_one_clear_error() -> None:
    with Client("http://127.0.0.1:1") as client, pytest.raises(TidingsClientError) as caught:
        client.health()
    assert caught.value.code == "unreachable" and "127.0.0.1:1" in caught.value.message


def test_dead_letters_are_listed_and_redriven_through_the_client(url: str) -> None:
    with Client(url) as client:
        me = client.register()
        me.subscribe(topics=["d"])
        client.publish_batch([{"topics": ["d"]}])
        for _ in range(5):
            me.nack([m.receipt for m in me.pull()])
        assert me.pull() == [] and [d.reason for d in me.dead_letters()] == ["max_attempts"]
        assert me.redrive() == 1 and len(me.pull()) == 1


async def test_the_async_client_streams_and_acknowledges(url: str) -> None:
    async with AsyncClient(url) as client:
        me = await client.register()
        made = await me.subscribe(topics=["s/#"])
        assert await me.subscription(made.id) == await me.resume(made.id) == made
        assert (await me.info()).id == me.id
        async with me.stream(prefetch=5) as stream:
            await client.publish({"n": 1}, topics=["s/1"])
            async for message in stream:
                assert message.data == {"n": 1}
                await stream.ack([message.receipt])
                break
        # an acknowledged message is gone; an unacknowledged one would come back as ready
        depth = await me.depth()
        for _ in range(50):
            if depth.leased == 0:
                break
            await asyncio.sleep(0.1)
            depth = await me.depth()
        assert (depth.ready, depth.leased) == (0, 0)


async def test_a_stream_refused_or_unreachable_is_a_client_error(url: str) -> None:
    async with AsyncClient(url) as client:
        me = await client.register()
        with pytest.raises(TidingsClientError) as refused:
            async with client.subscriber(me.id, "not-the-token").stream() as stream:
                [m async for m in stream]
    async with AsyncClient("http://127.0.0.1:1") as nowhere:
        with pytest.raises(TidingsClientError) as unreachable:
            async with nowhere.subscriber(me.id, me.token).stream():
                pass
    assert (refused.value.status, refused.value.code) == (403, "forbidden")
    assert unreachable.value.code == "unreachable"
