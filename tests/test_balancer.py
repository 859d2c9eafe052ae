"""Three brokers on one PostgreSQL behind HAProxy: the RabbitMQ study's cluster, in
Tidings' terms. Killing one broker under load loses no accepted publication."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from tests.conftest import PG

from tidings.balancer import haproxy, haproxy_config, partitioned
from tidings.client import AsyncClient
from tidings.ports import free_port
from tidings.server import broker_processes, stop
from tidings.store.inbox import partition_of

PUBLICATIONS = 1_500
KILL_AFTER = 400


def require_haproxy() -> None:
    if shutil.which("haproxy") is None:
        reason = "haproxy is not installed (apt-get install haproxy)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}: required under CI")
        pytest.skip(reason)


def test_with_partitions_a_subscribers_requests_go_to_its_partitions_owner() -> None:
    config = haproxy_config(8080, ["127.0.0.1:8001", "127.0.0.1:8002"], partitions=2)
    assert "path,field(4,/),crc32,mod(2)" in config
    assert "use_backend partition%[var(txn.part)] if subscriber" in config
    for k in (0, 1):
        assert f"backend partition{k}" in config
        assert f"option httpchk GET /readyz?partition={k}" in config
    assert partitioned(f"{PG}?schema=s", 3, 1, 2).endswith("layout=log&partitions=3&own=1")


def test_the_configuration_names_every_broker_and_checks_its_health() -> None:
    config = haproxy_config(8080, ["127.0.0.1:8001", "127.0.0.1:8002"])
    assert "server broker0 127.0.0.1:8001 check" in config
    assert "server broker1 127.0.0.1:8002 check" in config
    assert "option httpchk GET /readyz" in config
    assert "bind 127.0.0.1:8080" in config


class Load:
    """One publisher and one consumer through the balancer, each retrying what failed."""

    def __init__(self, url: str, sid: str, token: str) -> None:
        self.url, self.queue = url, f"{url}/v1/subscribers/{sid}/messages"
        self.auth = {"Authorization": f"Bearer {token}"}
        self.accepted: set[int] = set()
        self.seen: list[int] = []
        self.failed_requests = 0
        self.published = threading.Event()
        self.stop = threading.Event()

    def publish(self) -> None:
        with httpx.Client(timeout=5) as http:
            for n in range(PUBLICATIONS):
                while not self.stop.is_set():
                    try:
                        answer = http.post(
                            f"{self.url}/v1/publications", json={"topics": ["ha"], "data": n}
                        )
                        if answer.status_code == 201:
                            self.accepted.add(n)
                            break
                    except httpx.TransportError:
                        pass
                    self.failed_requests += 1
                    time.sleep(0.05)
        self.published.set()

    def consume(self) -> None:
        params = {"max": 100, "wait": 1, "visibility": 3}
        with httpx.Client(timeout=5, headers=self.auth) as http:
            while not self.stop.is_set():
                try:
                    answer = http.get(self.queue, params=params)
                    messages = answer.json()["messages"] if answer.status_code == 200 else []
                    if answer.status_code != 200:
                        self.failed_requests += 1
                        time.sleep(0.05)
                    self.seen += [m["body"]["data"] for m in messages]
                    if messages:
                        http.post(
                            f"{self.queue}/ack", json={"receipts": [m["receipt"] for m in messages]}
                        )
                except (httpx.TransportError, ValueError):
                    self.failed_requests += 1
                    time.sleep(0.05)

    def missing(self) -> set[int]:
        return self.accepted - set(self.seen)


@pytest.mark.slow
@pytest.mark.parametrize("partitions", [0, 3], ids=["rows", "partitions"])
def test_killing_one_of_three_brokers_under_load_loses_no_accepted_publication(
    tmp_path: Path, schema: str, partitions: int
) -> None:
    """With partitions, the broker killed is the one owning the subscriber's queue: another
    adopts it, and the balancer sends the subscriber's requests there."""
    require_haproxy()
    ports = [free_port() for _ in range(3)]
    dirs = [tmp_path / f"broker{i}" for i in range(3)]
    stores = [
        ["--store", partitioned(f"{PG}?schema={schema}", partitions, i, 3)]
        if partitions
        else ["--store", f"{PG}?schema={schema}"]
        for i in range(3)
    ]
    with (
        broker_processes(dirs, ports, each=stores) as brokers,
        haproxy(free_port(), [f"127.0.0.1:{p}" for p in ports], partitions) as url,
    ):
        me = httpx.post(f"{url}/v1/subscribers").json()
        victim = partition_of(me["id"], partitions) if partitions else 1
        auth = {"Authorization": f"Bearer {me['token']}"}
        topic = {"topics": ["ha"]}
        httpx.post(f"{url}/v1/subscribers/{me['id']}/subscriptions", json=topic, headers=auth)
        for _, broker_url in brokers:  # every broker has read the subscription
            deadline = time.monotonic() + 30
            while (
                'tidings_subscriptions{kind="topic"} 1.0'
                not in httpx.get(f"{broker_url}/metrics").text
            ):
                assert time.monotonic() < deadline, f"{broker_url} never saw the subscription"
                time.sleep(0.1)
        load = Load(url, me["id"], me["token"])
        threads = [threading.Thread(target=load.publish), threading.Thread(target=load.consume)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        while len(load.accepted) < KILL_AFTER and threads[0].is_alive():
            time.sleep(0.01)
        routed = load.failed_requests  # none yet: every request reached its queue's owner
        brokers[victim][0].send_signal(signal.SIGKILL)
        load.published.wait(120)
        deadline = time.monotonic() + 60
        while load.missing() and time.monotonic() < deadline:
            time.sleep(0.1)
        load.stop.set()
        for thread in threads:
            thread.join(10)
    figures = {
        "accepted": len(load.accepted),
        "delivered": len(set(load.seen)),
        "duplicates": len(load.seen) - len(set(load.seen)),
        "failed_requests_retried": load.failed_requests,
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(figures))  # the figure the operations doc quotes
    assert len(load.accepted) == PUBLICATIONS
    assert load.missing() == set()
    assert routed == 0


async def test_a_stream_through_the_balancer_waits_out_its_broker_coming_back(
    tmp_path: Path,
) -> None:
    """While no broker is up, the balancer answers 503: the client keeps trying."""
    require_haproxy()
    port = free_port()
    with (
        broker_processes([tmp_path], [port]) as [(first, _)],
        haproxy(free_port(), [f"127.0.0.1:{port}"]) as url,
    ):
        async with AsyncClient(url) as client:
            me = await client.register()
            await me.subscribe(topics=["back"])
            async with me.stream() as stream:
                received = stream.__aiter__()
                waiting = asyncio.create_task(received.__anext__())  # reading all along
                await asyncio.to_thread(stop, first)
                await asyncio.sleep(2)  # the balancer has taken the broker out: 503s
                assert not waiting.done()
                with broker_processes([tmp_path], [port]):
                    await asyncio.sleep(1.5)  # two good checks bring it back
                    await client.publish("after", topics=["back"])
                    message = await asyncio.wait_for(waiting, 30)
                    await message.ack()
                    await received.aclose()
    assert message.data == "after"
    assert stream.reconnects >= 1


@pytest.mark.parametrize(
    ("store", "said"),
    [
        ("sqlite:///x.db", "must be a postgresql:// URL"),
        ("postgresql://postgres@127.0.0.1:5432/test?schema=ha&layout=log", "--partitions"),
    ],
)
def test_the_cluster_script_refuses_a_store_its_brokers_cannot_share(store: str, said: str) -> None:
    script = Path(__file__).parent.parent / "scripts" / "ha-cluster.py"
    done = subprocess.run(
        [sys.executable, str(script), "--store", store], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_cluster_script_runs_brokers_each_owning_a_partition(schema: str) -> None:
    """`ha-cluster.py --partitions 3`: three brokers, each the owner of one partition, and
    a subscriber's publications and pulls through the balancer, whichever its partition."""
    require_haproxy()
    script = Path(__file__).parent.parent / "scripts" / "ha-cluster.py"
    port = free_port()
    store = f"{PG}?schema={schema}"
    cluster = subprocess.Popen(
        [sys.executable, str(script), "--store", store, "--partitions", "3", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert cluster.stdout is not None
        first = cluster.stdout.readline()  # once every broker and the balancer answer
        assert first.startswith("balancer "), first
        url = first.split()[1]
        cluster.stdout.readline()  # (the admin token)
        brokers = [cluster.stdout.readline().split()[1] for _ in range(3)]
        assert sorted(map(owned_by, brokers)) == [[0], [1], [2]]
        with httpx.Client(base_url=url, timeout=10) as http:
            subscribers = [http.post("/v1/subscribers").json() for _ in range(6)]
            for me in subscribers:
                made = http.post(
                    f"/v1/subscribers/{me['id']}/subscriptions",
                    json={"topics": [f"t-{me['id']}"]},
                    headers={"Authorization": f"Bearer {me['token']}"},
                )
                assert made.status_code == 201
            for address in brokers:  # every broker has read the subscriptions
                seen = 'tidings_subscriptions{kind="topic"} 6.0'
                deadline = time.monotonic() + 30
                while seen not in httpx.get(f"{address}/metrics").text:
                    assert time.monotonic() < deadline, f"{address} never saw the subscriptions"
                    time.sleep(0.1)
            for me in subscribers:
                published = {"topics": [f"t-{me['id']}"], "data": me["id"]}
                assert http.post("/v1/publications", json=published).status_code == 201
            for me in subscribers:
                pulled = http.get(
                    f"/v1/subscribers/{me['id']}/messages",
                    params={"wait": 5},
                    headers={"Authorization": f"Bearer {me['token']}"},
                )
                assert pulled.status_code == 200
                assert [m["body"]["data"] for m in pulled.json()["messages"]] == [me["id"]]
    finally:
        cluster.send_signal(signal.SIGTERM)
        cluster.wait(30)


def owned_by(address: str) -> list[int]:
    """The partitions (of 3) a broker says it owns."""
    return [p for p in range(3) if httpx.get(f"{address}/readyz?partition={p}").status_code == 200]
