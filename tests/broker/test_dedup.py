"""Publishers' dedup ids with real broker processes: a repeat is answered as the first and
delivered once across a kill -9 and a restart, and across two brokers on one PostgreSQL
racing with the same ids."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from tests.broker.test_operations import settings_for
from tests.conftest import PG

from tidings.broker import Broker, PublicationInput
from tidings.ports import free_port
from tidings.server import broker_process, broker_processes
from tidings.store import open_store


def subscribed(url: str, topic: str) -> tuple[str, dict[str, str]]:
    me = httpx.post(f"{url}/v1/subscribers").json()
    auth = {"Authorization": f"Bearer {me['token']}"}
    made = httpx.post(f"{url}/v1/subscribers/{me['id']}/subscriptions", json={"topics": [topic]},
                      headers=auth)  # fmt: skip
    assert made.status_code == 201
    return me["id"], auth


def publish(url: str, dedup_id: str, data: Any = "once") -> dict[str, Any]:
    body = {"data": data, "topics": ["orders"], "dedup_id": dedup_id}
    answer = httpx.post(f"{url}/v1/publications", json=body, timeout=30)
    assert answer.status_code == 201, answer.text
    result: dict[str, Any] = answer.json()
    return result


def drained(url: str, sid: str, auth: dict[str, str]) -> list[dict[str, Any]]:
    """Every message of the queue, acknowledged."""
    got: list[dict[str, Any]] = []
    while True:
        answer = httpx.get(f"{url}/v1/subscribers/{sid}/messages", params={"max": 100},
                           headers=auth).json()  # fmt: skip
        if not answer["messages"]:
            return got
        got += answer["messages"]
        receipts = [m["receipt"] for m in answer["messages"]]
        httpx.post(f"{url}/v1/subscribers/{sid}/messages/ack", json={"receipts": receipts},
                   headers=auth)  # fmt: skip


def test_a_repeat_after_a_kill_9_and_a_restart_is_answered_as_the_first(tmp_path: Path) -> None:
    port = free_port()
    with broker_process(tmp_path, port) as (proc, url):
        sid, auth = subscribed(url, "orders")
        first = publish(url, "order-17")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with broker_process(tmp_path, port) as (_, url):
        again = publish(url, "order-17", "sent again")
        assert again == {**first, "duplicate": True}
        assert [m["publication_id"] for m in drained(url, sid, auth)] == [first["id"]]


def test_two_brokers_on_one_postgresql_racing_with_the_same_ids_deliver_each_once(
    tmp_path: Path, schema: str
) -> None:
    store = ("--store", f"{PG}?schema={schema}")
    dirs, ports = [tmp_path / "a", tmp_path / "b"], [free_port(), free_port()]
    with broker_processes(dirs, ports, *store) as [(_, a), (_, b)]:
        sid, auth = subscribed(a, "orders")
        ids = [f"id-{i}" for i in range(40)]
        with ThreadPoolExecutor(8) as pool:
            on_a = pool.map(lambda d: publish(a, d), ids)
            on_b = pool.map(lambda d: publish(b, d), ids)
            pairs = list(zip(on_a, on_b, strict=True))
        for x, y in pairs:
            assert x["id"] == y["id"] and x.get("duplicate", False) != y.get("duplicate", False)
        delivered = [m["publication_id"] for m in drained(a, sid, auth)]
        assert sorted(delivered) == sorted(x["id"] for x, _ in pairs)


async def test_dedup_ids_past_their_window_go_with_housekeeping_with_no_publish_to_prune_them(
    tmp_path: Path,
) -> None:
    now = [1_000_000.0]
    settings = settings_for(tmp_path)
    broker = Broker(settings, open_store(settings.resolved_store_url), clock=lambda: now[0])
    await broker.start()
    try:
        for n in range(5):
            await broker.publish(PublicationInput("x", ("t",), dedup_id=f"id-{n}"))
        now[0] += settings.limits.dedup_window_s + 1  # and no publish with an id since
        await broker.housekeeping.expire(now[0])
        assert broker.store.sync.prune_dedup_ids(now[0]) == 0  # housekeeping took all five
    finally:
        await broker.close()
        broker.store.sync.close()
