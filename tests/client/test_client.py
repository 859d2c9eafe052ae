"""The typed clients against a real server."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tidings.client import AsyncClient, Client, Depth, Message, TidingsClientError
from tidings.client.asyncio import AsyncMessage
from tidings.config import load_settings
from tidings.ports import free_port
from tidings.server import EmbeddedServer, broker_process


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


def test_both_clients_list_every_subscription_following_the_pages(url: str) -> None:
    with Client(url) as client:
        me = client.register()
        made = sorted(me.subscribe(topics=[f"p/{n}"]).id for n in range(5))
        listed = [s.id for s in me.subscriptions(page=2)]  # three pages

    async def listed_async() -> list[str]:
        async with AsyncClient(url) as client:
            mine = client.subscriber(me.id, me.token)
            return [s.id for s in await mine.subscriptions(page=2)]

    assert listed == made and asyncio.run(listed_async()) == made


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


async def test_both_clients_read_their_own_publications_progress(url: str) -> None:
    with Client(url) as sync:
        me = sync.register()
        me.subscribe(topics=["progress/#"])
        published = sync.publish(1, topics=["progress/a"])
        assert (sync.progress(published).deliveries, published.progress_token != "") == (1, True)
    async with AsyncClient(url) as client:
        batch = await client.publish_batch([{"topics": ["progress/b"]}, {"topics": ["none"]}])
        assert [(await client.progress(p)).deliveries for p in batch] == [1, 0]


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


def test_a_pulled_message_acks_and_nacks_itself(url: str) -> None:
    with Client(url) as client:
        me = client.register()
        me.subscribe(topics=["self"])
        client.publish("once", topics=["self"])
        [first] = me.pull(wait=1)
        first.nack()
        [again] = me.pull(wait=1)
        again.ack()
        assert (again.publication_id, again.attempt) == (first.publication_id, 2)
        assert me.depth().ready == me.depth().leased == 0


async def test_a_streamed_message_acks_itself_over_the_stream(url: str) -> None:
    async with AsyncClient(url) as client:
        me = await client.register()
        await me.subscribe(topics=["streamed"])
        await client.publish("hi", topics=["streamed"])
        async with me.stream() as stream:
            async for message in stream:
                await message.ack()
                break
        for _ in range(50):  # the ack frame is read by the broker after we moved on
            if (await me.depth()).leased == 0:
                break
            await asyncio.sleep(0.05)
        assert await me.depth() == Depth(0, 0, 0)


def test_the_sync_callback_consumer_calls_back_until_cancelled(url: str) -> None:
    got: list[object] = []
    with Client(url) as client:
        me = client.register()
        me.subscribe(topics=["cb"])
        for n in range(3):
            client.publish(n, topics=["cb"])

        def on_message(message: Message[None]) -> None:
            got.append(message.data)
            message.ack()

        consumer = me.consume(on_message)
        for _ in range(100):
            if len(got) == 3:
                break
            time.sleep(0.05)
        consumer.cancel()
        consumer.result(timeout=5)
        assert me.depth() == Depth(0, 0, 0)
    assert sorted(got) == [0, 1, 2]  # type: ignore[type-var]


async def test_a_failing_callback_nacks_its_message_for_redelivery(url: str) -> None:
    attempts: list[int] = []
    async with AsyncClient(url) as client:
        me = await client.register()
        await me.subscribe(topics=["fails-once"])
        await client.publish("x", topics=["fails-once"])

        async def on_message(message: AsyncMessage) -> None:
            attempts.append(message.attempt)
            if message.attempt == 1:
                raise RuntimeError("a bug in the subscriber")
            await message.ack()

        task = me.consume(on_message)
        for _ in range(100):
            if len(attempts) == 2:
                break
            await asyncio.sleep(0.05)
        task.cancel()
    assert attempts == [1, 2]


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[Restartable]:
    broker = Restartable(tmp_path)
    yield broker
    broker.stop()


class Restartable:
    """`tidings serve` in its own process on a fixed port and data directory, restartable."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir, self.port = data_dir, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._running: contextlib.ExitStack | None = None
        self.start()

    def start(self) -> None:
        self._running = contextlib.ExitStack()
        self._running.enter_context(broker_process(self.data_dir, self.port))

    def stop(self) -> None:
        if self._running is not None:
            self._running.close()
            self._running = None


async def test_the_stream_reconnects_after_the_broker_restarts(restartable: Restartable) -> None:
    async with AsyncClient(restartable.url) as client:
        me = await client.register()
        await me.subscribe(topics=["restart"])
        async with me.stream() as stream:
            received = stream.__aiter__()
            await client.publish("before", topics=["restart"])
            first = await asyncio.wait_for(received.__anext__(), 10)
            await first.ack()
            await asyncio.to_thread(restartable.stop)
            await asyncio.to_thread(restartable.start)
            await client.publish("after", topics=["restart"])
            second = await asyncio.wait_for(received.__anext__(), 20)
            await second.ack()
            await received.aclose()
        assert (first.data, second.data) == ("before", "after")
        assert stream.reconnects >= 1


def test_the_sync_iterator_waits_out_a_broker_restart(restartable: Restartable) -> None:
    with Client(restartable.url) as client:
        me = client.register()
        me.subscribe(topics=["restart"])
        client.publish("before", topics=["restart"])
        messages = me.messages(wait=1)
        first = next(messages)
        first.ack()
        restartable.stop()

        def come_back_and_publish() -> None:  # while the iterator is retrying
            time.sleep(1.0)
            restartable.start()
            with Client(restartable.url) as publisher:
                publisher.publish("after-restart", topics=["restart"])

        back = threading.Thread(target=come_back_and_publish)
        back.start()
        seen = next(messages)
        back.join()
        seen.ack()
        assert seen.data == "after-restart"


async def test_a_reconnecting_stream_still_ends_on_a_refusal(url: str) -> None:
    async with AsyncClient(url) as client:
        me = await client.register()
        stranger = client.subscriber(me.id, "not-the-token")
        with pytest.raises(TidingsClientError) as refused:
            async with stranger.stream() as stream:
                async for _ in stream:
                    pass
    assert refused.value.code == "forbidden"


def requests_to(url: str, route: str) -> float:
    """How many POSTs the broker answered on `route`, from its own metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{url}/metrics").text
    families = text_string_to_metric_families(text)
    [family] = [f for f in families if f.name == "tidings_http_requests"]
    return sum(
        s.value
        for s in family.samples
        if s.labels.get("route") == route and s.labels.get("method") == "POST"
    )


async def test_with_linger_concurrent_publishes_travel_as_few_batches(url: str) -> None:
    singles = requests_to(url, "/v1/publications")
    batches = requests_to(url, "/v1/publications/batch")
    async with AsyncClient(url, linger=0.05, batch_size=100) as client:
        me = await client.register()
        await me.subscribe(topics=["lingered"])
        answers = await asyncio.gather(
            *(client.publish(n, topics=["lingered"]) for n in range(250))
        )
        got = await me.pull(max_messages=100, wait=1)
    assert len({a.id for a in answers}) == 250 and all(a.deliveries == 1 for a in answers)
    assert requests_to(url, "/v1/publications") == singles  # none went one by one
    assert requests_to(url, "/v1/publications/batch") - batches <= 4  # 100, 100, 50 (+ linger)
    assert got and got[0].data == 0  # FIFO: the batch kept the callers' order


async def test_a_refused_batch_fails_every_publish_in_it(url: str) -> None:
    async with AsyncClient(url, linger=0.05) as client:
        results = await asyncio.gather(
            client.publish("fine", topics=["ok"]),
            client.publish("bad", topics=["not/#/allowed"]),
            return_exceptions=True,
        )
    assert all(isinstance(r, TidingsClientError) and r.status == 422 for r in results)


async def test_binary_data_published_by_the_client_streams_back_as_bytes(url: str) -> None:
    blob = bytes(range(256))
    async with AsyncClient(url) as client:
        me = await client.register()
        await me.subscribe(topics=["bin/client"])
        async with me.stream(encoding="msgpack") as stream:
            await client.publish(blob, topics=["bin/client"])
            async for message in stream:
                assert message.data == blob
                await message.ack()
                break


def test_the_sync_client_publishes_binary_data_that_a_json_pull_sees_as_base64(url: str) -> None:
    with Client(url) as client:
        me = client.register()
        me.subscribe(topics=["bin/sync"])
        client.publish_batch([{"data": b"\x00\xff", "topics": ["bin/sync"]}])
        [message] = me.pull(10)
        assert message.body["data_encoding"] == "base64"  # type: ignore[index]
        assert base64.b64decode(message.body["data"]) == b"\x00\xff"  # type: ignore[index]
        message.ack()


def test_an_answer_longer_than_the_async_client_reads_is_answer_too_large(url: str) -> None:
    from tidings.client.calls import Call, loaded

    async def read() -> None:
        async with AsyncClient(url) as client:
            await client.run(Call("GET", "/openapi.json", loaded, auth=False, max_answer=1024))

    with pytest.raises(TidingsClientError) as refused:
        asyncio.run(read())
    assert (refused.value.status, refused.value.code) == (413, "answer_too_large")


def test_a_plain_http_client_verifies_no_certificates_and_an_https_one_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Loading the certificate store took 50 ms of every CLI call's start; a plain-HTTP
    broker has no certificate to check."""
    import httpx._transports.default as transports

    asked: list[object] = []
    make = transports.create_ssl_context

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        asked.append(verify)
        return make(verify=verify, cert=cert, trust_env=trust_env)

    monkeypatch.setattr(transports, "create_ssl_context", create_ssl_context)
    Client("http://127.0.0.1:1").close()
    Client("https://broker.example:8443").close()
    assert asked == [False, True]
