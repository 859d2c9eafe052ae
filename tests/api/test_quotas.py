"""Quotas through the API on a real server: registrations per client address, open streams
per subscriber and in all."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from tidings.config import Limits, load_settings
from tidings.server import EmbeddedServer


def started(tmp: pytest.TempPathFactory, limits: Limits) -> EmbeddedServer:
    settings = load_settings({"data_dir": tmp.mktemp("quotas")}, env={})
    return EmbeddedServer(dataclasses.replace(settings, limits=limits))


@pytest.fixture
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    limits = Limits(registrations_per_minute=3, rate_limit_loopback=True)
    with started(tmp_path_factory, limits) as srv:
        yield srv


@pytest.fixture
def streams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    with started(tmp_path_factory, Limits(max_streams=2, max_streams_per_subscriber=1)) as srv:
        yield srv


def test_registrations_from_one_address_are_rate_limited_with_retry_after(
    limited: EmbeddedServer,
) -> None:
    made = [httpx.post(f"{limited.url}/v1/subscribers") for _ in range(3)]
    refused = httpx.post(f"{limited.url}/v1/subscribers")
    thesis = httpx.post(f"{limited.url}/api/RegisterSubscriber")  # the same bucket
    assert [r.status_code for r in made] == [201, 201, 201]
    assert (refused.status_code, refused.json()["error"]["code"]) == (429, "rate_limited")
    assert int(refused.headers["retry-after"]) >= 1
    assert thesis.status_code == 429


def test_loopback_clients_are_not_rate_limited_unless_asked(streams: EmbeddedServer) -> None:
    codes = {httpx.post(f"{streams.url}/v1/subscribers").status_code for _ in range(70)}
    assert codes == {201}


@contextlib.contextmanager
def opened(server: EmbeddedServer) -> Iterator[ClientConnection]:
    """A subscriber's stream, once it delivers: counted by the broker by then."""
    raw = httpx.post(f"{server.url}/v1/subscribers").json()
    auth = {"Authorization": f"Bearer {raw['token']}"}
    base = f"/v1/subscribers/{raw['id']}"
    httpx.post(f"{server.url}{base}/subscriptions", json={"topics": [raw["id"]]}, headers=auth)
    url = server.url.replace("http://", "ws://") + f"{base}/stream"
    with connect(url, additional_headers=auth) as ws:
        httpx.post(f"{server.url}/v1/publications", json={"topics": [raw["id"]]})
        assert json.loads(ws.recv(timeout=10))["type"] == "messages"
        yield ws


def refusal(ws: ClientConnection) -> str:
    said = json.loads(ws.recv(timeout=10))
    assert said["type"] == "error"
    return str(said["error"]["code"])


def test_a_subscriber_s_second_stream_is_refused_and_its_first_kept(
    streams: EmbeddedServer,
) -> None:
    raw = httpx.post(f"{streams.url}/v1/subscribers").json()
    url = streams.url.replace("http://", "ws://") + f"/v1/subscribers/{raw['id']}/stream"
    auth = {"Authorization": f"Bearer {raw['token']}"}
    with (
        connect(url, additional_headers=auth) as first,
        connect(url, additional_headers=auth) as second,
    ):
        assert refusal(second) == "limit_exceeded"
        first.ping().wait(timeout=10)  # the first is still open


def test_streams_past_the_broker_s_limit_are_refused(streams: EmbeddedServer) -> None:
    with opened(streams) as one, opened(streams) as two:
        raw = httpx.post(f"{streams.url}/v1/subscribers").json()
        url = streams.url.replace("http://", "ws://") + f"/v1/subscribers/{raw['id']}/stream"
        with connect(url, additional_headers={"Authorization": f"Bearer {raw['token']}"}) as three:
            assert refusal(three) == "limit_exceeded"
        one.ping().wait(timeout=10)
        two.ping().wait(timeout=10)


def wait_until(check: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "not within the time given"
        time.sleep(0.1)


@contextlib.contextmanager
def bounded(tmp: pytest.TempPathFactory, policy: str) -> Iterator[tuple[str, dict[str, str], str]]:
    limits = Limits(max_queue_messages=3, queue_overflow=policy)
    with started(tmp, limits) as server:
        raw = httpx.post(f"{server.url}/v1/subscribers").json()
        auth = {"Authorization": f"Bearer {raw['token']}"}
        mine = f"{server.url}/v1/subscribers/{raw['id']}"
        httpx.post(f"{mine}/subscriptions", json={"topics": ["q"]}, headers=auth)
        yield server.url, auth, mine


def publish(url: str, count: int) -> None:
    for n in range(count):
        assert (
            httpx.post(f"{url}/v1/publications", json={"data": n, "topics": ["q"]}).status_code
            == 201
        )


def depth(mine: str, auth: dict[str, str]) -> dict[str, int]:
    return httpx.get(mine, headers=auth).json()["depth"]  # type: ignore[no-any-return]


def test_a_full_queue_dead_letters_its_oldest(tmp_path_factory: pytest.TempPathFactory) -> None:
    with bounded(tmp_path_factory, "dead-letter-oldest") as (url, auth, mine):
        publish(url, 5)
        wait_until(lambda: depth(mine, auth)["dead"] == 2)
        pulled = httpx.get(f"{mine}/messages", params={"max": 10}, headers=auth).json()["messages"]
        dead = httpx.get(f"{mine}/dead-letters", headers=auth).json()["dead_letters"]
    assert [m["body"]["data"] for m in pulled] == [2, 3, 4]
    assert {d["reason"] for d in dead} == {"overflow"}


def refused(url: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith('tidings_queue_overflow_total{policy="refuse-new"}'):
            return float(line.split()[-1])
    return 0.0


def test_a_full_queue_refuses_new_deliveries_until_it_drains(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with bounded(tmp_path_factory, "refuse-new") as (url, auth, mine):
        publish(url, 4)  # the 4th arrives before the broker has looked: a bounded overshoot
        sent = 4

        def refuses() -> bool:
            nonlocal sent
            publish(url, 1)
            sent += 1
            return refused(url) > 0

        wait_until(refuses)
        got = httpx.get(f"{mine}/messages", params={"max": 100}, headers=auth).json()["messages"]
        assert 4 <= len(got) < sent  # the refused ones are not there
        receipts = [m["receipt"] for m in got]
        httpx.post(f"{mine}/messages/ack", json={"receipts": receipts}, headers=auth)

        def delivered_again() -> bool:
            httpx.post(f"{url}/v1/publications", json={"data": "after", "topics": ["q"]})
            again = httpx.get(f"{mine}/messages", params={"max": 100}, headers=auth).json()
            return any(m["body"]["data"] == "after" for m in again["messages"])

        wait_until(delivered_again)


# a subscription whose stored body is ~1.2 KB: two fit in 3,000 bytes, three do not
BIG = {"predicates": [{"key": "k", "op": "=", "value": "x" * 1000}]}


def registered(client: httpx.Client) -> tuple[str, dict[str, str]]:
    """A new subscriber's subscriptions path and its credentials."""
    raw = client.post("/v1/subscribers").json()
    return f"/v1/subscribers/{raw['id']}/subscriptions", {"Authorization": f"Bearer {raw['token']}"}


def test_subscriptions_past_a_subscriber_s_bytes_are_refused_until_it_unsubscribes(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    limits = Limits(max_subscription_bytes_per_subscriber=3000)
    with started(tmp_path_factory, limits) as server, httpx.Client(base_url=server.url) as client:
        path, auth = registered(client)
        made = [client.post(path, json=BIG, headers=auth) for _ in range(2)]
        refused = client.post(path, json=BIG, headers=auth)
        small = client.post(path, json={"topics": ["a"]}, headers=auth)  # bytes, not a count
        other_path, other_auth = registered(client)
        other = client.post(other_path, json=BIG, headers=other_auth)  # a budget of its own
        client.delete(f"{path}/{made[0].json()['id']}", headers=auth).raise_for_status()
        freed = client.post(path, json=BIG, headers=auth)
    assert [m.status_code for m in made] == [201, 201]
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["field"]) == ("limit_exceeded", "subscriptions")
    assert "max_subscription_bytes_per_subscriber" in error["message"]
    assert "3000" in error["message"]
    assert (small.status_code, other.status_code, freed.status_code) == (201, 201, 201)


def test_subscriptions_past_the_broker_s_bytes_are_refused_also_after_a_restart(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("bytes")}, env={})
    settings = dataclasses.replace(settings, limits=Limits(max_subscription_bytes=3000))
    with EmbeddedServer(settings) as server, httpx.Client(base_url=server.url) as client:
        first = registered(client)
        taken = [client.post(first[0], json=BIG, headers=first[1])]
        path, auth = registered(client)  # each subscriber within its own budget
        taken.append(client.post(path, json=BIG, headers=auth))
        refused = client.post(path, json=BIG, headers=auth)
    with EmbeddedServer(settings) as server, httpx.Client(base_url=server.url) as client:
        still = client.post(path, json=BIG, headers=auth)  # counted again from what is stored
        gone = taken[0].json()["id"]
        client.delete(f"{first[0]}/{gone}", headers=first[1]).raise_for_status()
        freed = client.post(path, json=BIG, headers=auth)
    assert [t.status_code for t in taken] == [201, 201]
    for answer in (refused, still):
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert (error["code"], error["field"]) == ("limit_exceeded", "subscriptions")
        assert "max_subscription_bytes)" in error["message"] and "3000" in error["message"]
    assert freed.status_code == 201, freed.text


@pytest.mark.parametrize(("trusted", "answers"), [("", [201, 201, 429]), ("127.0.0.1", [201] * 3)])
def test_x_forwarded_for_names_the_client_only_from_a_trusted_proxy(
    tmp_path_factory: pytest.TempPathFactory, trusted: str, answers: list[int]
) -> None:
    limits = Limits(registrations_per_minute=2, rate_limit_loopback=True)
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("proxy")}, env={})
    http = dataclasses.replace(settings.http, trusted_proxies=trusted)
    with EmbeddedServer(dataclasses.replace(settings, limits=limits, http=http)) as srv:
        got = [
            httpx.post(f"{srv.url}/v1/subscribers", headers={"X-Forwarded-For": f"192.0.2.{n}"})
            for n in range(3)
        ]
    assert [r.status_code for r in got] == answers


def test_the_64s_of_one_ipv6_48_share_its_registrations(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Clients named by a trusted proxy (X-Forwarded-For): this machine reaches the server
    from ::1 and 127.0.0.1 alone, and an address of another /64 needs a real interface."""
    limits = Limits(registrations_per_minute=1)
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("v6")}, env={})
    http = dataclasses.replace(settings.http, trusted_proxies="127.0.0.1")
    with EmbeddedServer(dataclasses.replace(settings, limits=limits, http=http)) as srv:

        def register(address: str) -> httpx.Response:
            return httpx.post(f"{srv.url}/v1/subscribers", headers={"X-Forwarded-For": address})

        walked = [register(f"2001:db8:1:{n:x}::1") for n in range(5)]  # five /64s, one /48
        again = register("2001:db8:1:ff::1")
        elsewhere = register("2001:db8:2::1")  # another /48
    assert [r.status_code for r in walked] == [201] * 4 + [429]
    refused = walked[4].json()["error"]
    assert refused["code"] == "rate_limited" and "/48" in refused["message"]
    assert int(walked[4].headers["Retry-After"]) >= 1
    assert (again.status_code, elsewhere.status_code) == (429, 201)
