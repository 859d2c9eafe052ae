"""The promise: a `kill -9` at any moment loses no accepted publication and no
unacknowledged delivery, and an acknowledged delivery does not come back."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from tests.conftest import PG

from tidings.ports import free_port
from tidings.server import broker_process, broker_processes


class Load:
    """Publishes and consumes until the broker dies, recording what the broker confirmed."""

    def __init__(self, url: str, reader: dict[str, str]) -> None:
        self.url, self.reader = url, reader
        self.accepted: list[str] = []
        self.acked: set[str] = set()  # acknowledgements the broker confirmed
        self.tried: set[str] = set()  # acknowledgements sent, confirmed or not
        self.threads = [
            threading.Thread(target=self.publish),
            threading.Thread(target=self.consume),
        ]

    def publish(self) -> None:
        with httpx.Client(base_url=self.url, timeout=5) as http:
            for i in range(100_000):
                try:
                    r = http.post(
                        "/v1/publications", json={"topics": ["k"], "attributes": {"n": i}}
                    )
                except httpx.TransportError:
                    return
                if r.status_code == 201:
                    self.accepted.append(r.json()["id"])

    def consume(self) -> None:
        auth = {"Authorization": f"Bearer {self.reader['token']}"}
        base = f"/v1/subscribers/{self.reader['id']}/messages"
        with httpx.Client(base_url=self.url, timeout=5, headers=auth) as http:
            while True:
                try:
                    params = {"max": 20, "wait": 1, "visibility": 1}
                    messages = http.get(base, params=params).json()["messages"]
                    by_receipt = {m["receipt"]: m["publication_id"] for m in messages}
                    if not messages:
                        continue
                    self.tried.update(by_receipt.values())
                    done = http.post(f"{base}/ack", json={"receipts": list(by_receipt)}).json()
                except (httpx.TransportError, ValueError):
                    return
                self.acked.update(by_receipt[r] for r in done["acked"])


def queued(url: str, who: dict[str, str]) -> list[str]:
    auth = {"Authorization": f"Bearer {who['token']}"}
    out: list[str] = []
    with httpx.Client(base_url=url, headers=auth, timeout=10) as http:
        while batch := http.get(
            f"/v1/subscribers/{who['id']}/messages", params={"max": 100, "visibility": 600}
        ).json()["messages"]:
            out += [m["publication_id"] for m in batch]
    return out


@pytest.fixture
def layout_args(request: pytest.FixtureRequest) -> Callable[[str, Path], list[str]]:
    """The broker's arguments for a store of a layout: rows (the default), log (SQLite's),
    pglog (the log on PostgreSQL, in the test's `schema`, dropped afterwards), pgparts (the
    log on PostgreSQL cut into partitions)."""

    def args(layout: str, data_dir: Path) -> list[str]:
        if layout == "rows":
            return []
        if layout == "pglog":
            return ["--store", f"{PG}?schema={request.getfixturevalue('schema')}&layout=log"]
        if layout == "pgparts":  # one broker owning every partition of three
            schema = request.getfixturevalue("schema")
            return ["--store", f"{PG}?schema={schema}&layout=log&partitions=3"]
        return ["--store", f"sqlite:///{data_dir}/tidings.db?layout={layout}"]

    return args


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seed", "layout"),
    [(1, "rows"), (2, "rows"), (1, "log"), (2, "log"), (1, "pglog"), (1, "pgparts")],
)
def test_kill_9_under_load_loses_no_accepted_publication(
    tmp_path: Path, seed: int, layout: str, layout_args: Callable[[str, Path], list[str]]
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    store = layout_args(layout, tmp_path)
    with (
        broker_process(tmp_path, port, *store) as (proc, _),
        httpx.Client(base_url=url) as http,
    ):
        subs = [http.post("/v1/subscribers").json() for _ in range(3)]
        for s in subs:
            http.post(
                f"/v1/subscribers/{s['id']}/subscriptions",
                json={"topics": ["k"]},
                headers={"Authorization": f"Bearer {s['token']}"},
            )
        load = Load(url, subs[0])
        for t in load.threads:
            t.start()
        deadline = time.monotonic() + 60
        while len(load.accepted) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)  # kill under load, however slow the machine is today
        time.sleep(random.Random(seed).uniform(0.0, 0.5))
        os.kill(proc.pid, signal.SIGKILL)
        for t in load.threads:
            t.join(30)
    assert len(load.accepted) > 50, "the load did not get going before the kill"
    time.sleep(1.1)  # the reader's last leases (visibility 1 s) run out
    with broker_process(tmp_path, port, *store):
        reader_left = queued(url, subs[0])
        for other in subs[1:]:
            assert set(load.accepted) <= set(queued(url, other))
    # only the one acknowledgement in flight at the kill may or may not have been committed
    assert len(load.tried - load.acked) <= 20
    assert set(load.accepted) <= load.tried | set(reader_left)
    assert not load.acked & set(reader_left), "an acknowledged delivery came back"


async def _fan_out_until_killed(
    url: str, subs: list[dict[str, str]], accepted: list[str]
) -> dict[str, set[str]]:
    """Publish in batches to every subscriber while each streams and acknowledges; returns
    what each received before the broker died."""
    import asyncio

    from tidings.client import AsyncClient, TidingsClientError

    received: dict[str, set[str]] = {s["id"]: set() for s in subs}

    async def stream(client: AsyncClient, who: dict[str, str]) -> None:
        me = client.subscriber(who["id"], who["token"])
        with contextlib.suppress(TidingsClientError, OSError):
            async with me.stream(prefetch=200, reconnect=False) as pushed:
                async for message in pushed:
                    received[who["id"]].add(message.publication_id)
                    await message.ack()

    async def publish(client: AsyncClient) -> None:
        with contextlib.suppress(TidingsClientError, OSError):
            for i in range(100_000):
                batch = [{"topics": ["f"], "data": {"n": i * 20 + j}} for j in range(20)]
                accepted.extend(p.id for p in await client.publish_batch(batch))

    async with AsyncClient(url) as client:
        tasks = [asyncio.create_task(stream(client, s)) for s in subs]
        await publish(client)
        await asyncio.wait(tasks, timeout=10)
    return received


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["rows", "log", "pglog", "pgparts"])
def test_kill_9_under_fan_out_loses_no_delivery_and_no_body(
    tmp_path: Path, layout: str, layout_args: Callable[[str, Path], list[str]]
) -> None:
    """Twenty subscribers streaming one body stored once: after a kill -9 and a restart,
    every accepted publication was received or is still queued, with its body, for each."""
    import asyncio

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    accepted: list[str] = []
    # streams lease for the default visibility: 1 s here, so what a stream had leased but
    # not yet received at the kill is ready again when the broker is back. With 200 in
    # flight to each of 20 streams read by one client process, a lease often runs out
    # before its ack on a loaded machine (measured with a busy core beside: 10-17% of the
    # deliveries came again, up to a third attempt, before and after issue #30's commits
    # on the loop's thread): no attempt limit, so that a dead letter here means a lost body
    short = {"TIDINGS_QUEUES__VISIBILITY_TIMEOUT_S": "1", "TIDINGS_QUEUES__MAX_ATTEMPTS": "1000"}
    store = layout_args(layout, tmp_path)
    with (
        broker_processes([tmp_path], [port], *store, env=short) as [(proc, _)],
        httpx.Client(base_url=url) as http,
    ):
        subs = [http.post("/v1/subscribers").json() for _ in range(20)]
        for s in subs:
            auth = {"Authorization": f"Bearer {s['token']}"}
            http.post(
                f"/v1/subscribers/{s['id']}/subscriptions", json={"topics": ["f"]}, headers=auth
            )

        def kill_under_load() -> None:
            deadline = time.monotonic() + 60
            while len(accepted) < 2_000 and time.monotonic() < deadline:
                time.sleep(0.05)
            os.kill(proc.pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_under_load)
        killer.start()
        received = asyncio.run(_fan_out_until_killed(url, subs, accepted))
        killer.join()
    assert len(accepted) >= 2_000, "the load did not get going before the kill"
    time.sleep(1.1)  # the streams' last leases run out
    with broker_process(tmp_path, port, *store, env=short):
        for who in subs:
            left = queued_bodies(url, who)
            assert all(body is not None for body in left.values()), "a body went missing"
            assert set(accepted) <= received[who["id"]] | set(left)


def queued_bodies(url: str, who: dict[str, str]) -> dict[str, object]:
    auth = {"Authorization": f"Bearer {who['token']}"}
    out: dict[str, object] = {}
    with httpx.Client(base_url=url, headers=auth, timeout=10) as http:
        while batch := http.get(
            f"/v1/subscribers/{who['id']}/messages", params={"max": 100, "visibility": 600}
        ).json()["messages"]:
            out.update((m["publication_id"], m["body"].get("data")) for m in batch)
        dead = http.get(f"/v1/subscribers/{who['id']}/dead-letters").json()["dead_letters"]
    assert dead == [], f"dead-lettered after the restart: {dead[:3]}"
    return out
