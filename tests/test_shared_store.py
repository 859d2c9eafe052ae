"""Several brokers on one PostgreSQL store share subscriptions and queues."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from tests.conftest import PG
from websockets.asyncio.client import connect

from tidings.config import load_settings
from tidings.ports import free_port
from tidings.server import EmbeddedServer, broker_processes
from tidings.store import open_store


@pytest.fixture
def two_brokers(tmp_path: Path, schema: str) -> Iterator[tuple[str, str]]:
    settings = load_settings({"store_url": f"{PG}?schema={schema}"}, env={})
    a = EmbeddedServer(dataclasses.replace(settings, data_dir=tmp_path / "a"))
    b = EmbeddedServer(dataclasses.replace(settings, data_dir=tmp_path / "b"))
    with a, b:
        yield a.url, b.url


def registered(url: str) -> tuple[str, dict[str, str]]:
    me = httpx.post(f"{url}/v1/subscribers").json()
    return me["id"], {"Authorization": f"Bearer {me['token']}"}


def test_stores_opened_at_once_on_a_fresh_schema_all_come_up(schema: str) -> None:
    start = threading.Barrier(6)
    failures: list[BaseException] = []

    def open_one() -> None:
        start.wait()
        try:
            open_store(f"{PG}?schema={schema}").close()
        except BaseException as exc:  # collected: the assertion below names it
            failures.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_two_broker_processes_started_at_once_on_a_fresh_database_both_serve(
    tmp_path: Path, schema: str
) -> None:
    store = ("--store", f"{PG}?schema={schema}")
    dirs, ports = [tmp_path / "a", tmp_path / "b"], [free_port(), free_port()]
    with broker_processes(dirs, ports, *store) as [(_, a), (_, b)]:
        sid, auth = registered(a)
        assert httpx.get(f"{b}/v1/subscribers/{sid}", headers=auth).status_code == 200


def test_a_subscriber_deleted_on_one_broker_is_refused_by_the_other_within_a_second(
    two_brokers: tuple[str, str],
) -> None:
    a, b = two_brokers
    sid, auth = registered(a)
    on_b = f"{b}/v1/subscribers/{sid}"
    assert httpx.get(f"{on_b}/messages", headers=auth).status_code == 200  # b caches the token
    assert httpx.delete(f"{a}/v1/subscribers/{sid}", headers=auth).status_code == 204
    deadline = time.monotonic() + 1.0
    while httpx.get(f"{on_b}/messages", headers=auth).status_code != 403:
        assert time.monotonic() < deadline, "broker b still accepts the deleted subscriber"
    assert (
        httpx.post(f"{on_b}/subscriptions", json={"topics": ["x"]}, headers=auth).status_code == 403
    )


def test_publications_on_the_other_broker_stop_reaching_a_deleted_subscriber(
    two_brokers: tuple[str, str],
) -> None:
    a, b = two_brokers
    sid, auth = registered(a)
    httpx.post(f"{a}/v1/subscribers/{sid}/subscriptions", json={"topics": ["g"]}, headers=auth)
    deadline = time.monotonic() + 10
    while httpx.post(f"{b}/v1/publications", json={"topics": ["g"]}).json()["deliveries"] == 0:
        assert time.monotonic() < deadline, "broker b never saw the subscription"
    httpx.delete(f"{a}/v1/subscribers/{sid}", headers=auth)
    deadline = time.monotonic() + 10
    while httpx.post(f"{b}/v1/publications", json={"topics": ["g"]}).json()["deliveries"]:
        assert time.monotonic() < deadline, "broker b still delivers to the deleted subscriber"
        time.sleep(0.05)


async def test_a_stream_on_the_other_broker_is_closed_when_its_subscriber_is_deleted(
    two_brokers: tuple[str, str],
) -> None:
    a, b = two_brokers
    sid, auth = await asyncio.to_thread(registered, a)
    subscription = {"topics": ["live"]}
    await asyncio.to_thread(
        httpx.post, f"{a}/v1/subscribers/{sid}/subscriptions", json=subscription, headers=auth
    )
    stream = f"{b.replace('http', 'ws')}/v1/subscribers/{sid}/stream"
    async with connect(stream, additional_headers=auth) as ws:
        # a delivery on the stream: it is authenticated and live (b may need a second to
        # see the subscription, so publish until one arrives)
        first = None
        for _ in range(50):
            await asyncio.to_thread(httpx.post, f"{b}/v1/publications", json=subscription)
            with contextlib.suppress(TimeoutError):
                first = orjson.loads(await asyncio.wait_for(ws.recv(), 0.2))
                break
        assert first is not None and first["type"] == "messages"
        deleted = await asyncio.to_thread(httpx.delete, f"{a}/v1/subscribers/{sid}", headers=auth)
        assert deleted.status_code == 204
        frame = first
        while frame["type"] == "messages":  # deliveries already under way may come first
            frame = orjson.loads(await asyncio.wait_for(ws.recv(), 5))
        await asyncio.wait_for(ws.wait_closed(), 5)
    assert frame["error"]["code"] == "subscriber_not_found"
    assert ws.close_code == 4404
