"""No request costs the broker more than linear work: the worst bodies each route family
can be sent are refused with a 4xx while /healthz keeps answering, on a real `tidings serve`
process (a liveness check with generous bounds, not a benchmark)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import msgspec
import pytest
from websockets.sync.client import connect

from tidings.config import Limits, load_settings
from tidings.server import EmbeddedServer, broker_process

PUBLICATION_LIMIT = 256 * 1024


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with broker_process(tmp_path_factory.mktemp("broker")) as (_, base):
        yield base


@pytest.fixture(scope="module")
def subscriber(url: str) -> tuple[str, dict[str, str]]:
    raw = httpx.post(f"{url}/v1/subscribers").json()
    return raw["id"], {"Authorization": f"Bearer {raw['token']}"}


def duplicate_keys(size: int) -> bytes:
    """One object of as many repeated keys as fit in `size` bytes: the quadratic case."""
    pair = b'"k":0,'
    return b"{" + pair * ((size - 2) // len(pair) - 1) + b'"k":0}'


def while_healthy(url: str, attack: Callable[[], httpx.Response]) -> httpx.Response:
    """Run `attack` while /healthz is asked every 0.1 s; every ask must be answered."""
    answered: list[float] = []
    failed: list[BaseException] = []
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=5) as client:
            while not done.is_set():
                started = time.monotonic()
                try:
                    client.get(f"{url}/healthz").raise_for_status()
                except httpx.HTTPError as exc:
                    failed.append(exc)
                answered.append(time.monotonic() - started)
                time.sleep(0.1)

    prober = threading.Thread(target=probe)
    prober.start()
    while not answered and prober.is_alive():  # the prober is asking before the attack
        time.sleep(0.01)
    try:
        response = attack()
    finally:
        done.set()
        prober.join()
    assert failed == [] and answered, (failed, answered)
    return response


def post(url: str, path: str, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    headers = {"Content-Type": "application/json", **(headers or {})}
    return httpx.post(f"{url}{path}", content=body, headers=headers, timeout=60)


def test_a_publication_of_duplicate_keys_is_refused_while_the_broker_answers(url: str) -> None:
    answer = while_healthy(
        url, lambda: post(url, "/v1/publications", duplicate_keys(PUBLICATION_LIMIT))
    )
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_json"


def test_a_batch_of_duplicate_keys_is_refused_while_the_broker_answers(url: str) -> None:
    body = duplicate_keys(16 * PUBLICATION_LIMIT - 1)  # the batch route's limit: 4 MiB
    answer = while_healthy(url, lambda: post(url, "/v1/publications/batch", body))
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "k"


def test_a_subscriber_s_call_of_duplicate_keys_is_refused_while_the_broker_answers(
    url: str, subscriber: tuple[str, dict[str, str]]
) -> None:
    sid, auth = subscriber
    path = f"/v1/subscribers/{sid}/subscriptions"
    answer = while_healthy(url, lambda: post(url, path, duplicate_keys(64 * 1024 - 1), auth))
    assert answer.status_code == 400


def test_a_thesis_call_of_duplicate_keys_is_refused_while_the_broker_answers(url: str) -> None:
    body = duplicate_keys(PUBLICATION_LIMIT)
    answer = while_healthy(url, lambda: post(url, "/api/PublishContent", body))
    assert answer.status_code == 400


def test_a_stream_frame_of_duplicate_keys_is_refused_while_the_broker_answers(
    url: str, subscriber: tuple[str, dict[str, str]]
) -> None:
    sid, auth = subscriber
    ws_url = url.replace("http://", "ws://") + f"/v1/subscribers/{sid}/stream"

    def attack() -> httpx.Response:
        with connect(ws_url, additional_headers=auth, max_size=2**24) as ws:
            ws.send(duplicate_keys(512 * 1024).decode())
            said = json.loads(ws.recv(timeout=60))
        return httpx.Response(200, json=said)

    said = while_healthy(url, attack).json()
    assert said.get("type") == "error" or "error" in said


@pytest.mark.parametrize(("levels", "status"), [(300, 422), (1100, 400)])
def test_deep_messagepack_is_refused_as_deep_json_is(url: str, levels: int, status: int) -> None:
    # written by hand: the encoders refuse to write what the decoders must refuse to read
    packed_body = b"\x81\xa4data" + b"\x91" * levels + b"\x01"  # {"data": [[...1...]]}
    json_body = b'{"data": ' + b"[" * levels + b"1" + b"]" * levels + b"}"
    packed = post(url, "/v1/publications", packed_body, {"Content-Type": "application/msgpack"})
    as_json = post(url, "/v1/publications", json_body)
    assert (packed.status_code, as_json.status_code) == (status, status)  # never a 500
    assert packed.json()["error"]["field"] == as_json.json()["error"]["field"]


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (float("nan"), "NaN"),
        (float("inf"), "infinities"),
        (msgspec.msgpack.Ext(5, b"x"), "extension"),
        (msgspec.msgpack.Ext(-1, b"\x00\x00\x00\x00"), "extension"),  # the timestamp
    ],
)
def test_messagepack_values_json_cannot_say_are_refused(url: str, value: object, why: str) -> None:
    packed = msgspec.msgpack.encode({"data": {"v": value}})
    answer = post(url, "/v1/publications", packed, {"Content-Type": "application/msgpack"})
    assert answer.status_code in (400, 422) and why in answer.json()["error"]["message"]


def test_a_nearly_full_disk_stops_publishing_but_not_draining(tmp_path: Path) -> None:
    settings = load_settings({"data_dir": tmp_path}, env={})
    with EmbeddedServer(settings) as server:  # room: a subscriber gets a message queued
        raw = httpx.post(f"{server.url}/v1/subscribers").json()
        auth = {"Authorization": f"Bearer {raw['token']}"}
        mine = f"/v1/subscribers/{raw['id']}"
        httpx.post(f"{server.url}{mine}/subscriptions", json={"topics": ["a"]}, headers=auth)
        assert (
            httpx.post(f"{server.url}/v1/publications", json={"topics": ["a"]}).status_code == 201
        )
    full = Limits(min_free_disk_bytes=shutil.disk_usage(tmp_path).free + 10**15)
    with EmbeddedServer(dataclasses.replace(settings, limits=full)) as server:
        refused = httpx.post(f"{server.url}/v1/publications", json={"topics": ["a"]})
        thesis = httpx.post(f"{server.url}/api/PublishTopics", json={"topics": ["a"], "message": 1})
        pulled = httpx.get(f"{server.url}{mine}/messages", headers=auth)
    assert (refused.status_code, refused.json()["error"]["code"]) == (507, "insufficient_storage")
    assert thesis.status_code == 507
    assert len(pulled.json()["messages"]) == 1  # what was accepted is still delivered


def every_wildcard_filter(levels: int) -> list[str]:
    """Each combination of `*` and `a` over `levels` levels, and over fewer then `#`: every
    one matches `a/.../a/x`, and a topic's walk reaches every node of their trie."""
    ending = ["/".join(c) for c in itertools.product("*a", repeat=levels)]
    rest = ["/".join((*c, "#")) for n in range(levels) for c in itertools.product("*a", repeat=n)]
    return ending + rest


def test_a_wildcard_filter_deeper_than_the_limit_is_refused_naming_it(
    url: str, subscriber: tuple[str, dict[str, str]]
) -> None:
    sid, auth = subscriber
    path = f"/v1/subscribers/{sid}/subscriptions"
    deep = "/".join(["*", "a"] * 7)  # 14 levels: 2^14 such filters froze the broker 8 s
    refused = httpx.post(f"{url}{path}", json={"topics": ["ok", deep]}, headers=auth)
    exact = httpx.post(f"{url}{path}", json={"topics": ["/".join("a" * 14)]}, headers=auth)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "limit_exceeded"
    assert refused.json()["error"]["field"] == "topics[1]"
    assert "max_pattern_segments" in refused.json()["error"]["message"]
    assert exact.status_code == 201  # an exact name is one dict look-up, however deep


def test_the_most_wildcard_filters_a_topic_can_match_leave_the_broker_answering(
    url: str,
) -> None:
    raw = httpx.post(f"{url}/v1/subscribers").json()
    auth = {"Authorization": f"Bearer {raw['token']}"}
    path, filters = f"{url}/v1/subscribers/{raw['id']}/subscriptions", every_wildcard_filter(8)
    for start in range(0, len(filters), 256):
        taken = httpx.post(path, json={"topics": filters[start : start + 256]}, headers=auth)
        assert taken.status_code == 201, taken.text
    prefix = "/".join("a" * 7)
    batch = {  # as many distinct topics as a batch holds: no answer comes from a cache
        "publications": [{"topics": [f"{prefix}/p{p}t{t}" for t in range(64)]} for p in range(1000)]
    }
    body = json.dumps(batch).encode()
    answer = while_healthy(url, lambda: post(url, "/v1/publications/batch?answer=count", body))
    assert answer.status_code == 201, answer.text
    assert answer.json() == {"published": 1000, "deliveries": 1000}


def test_thousands_of_contains_needles_against_a_long_value_leave_the_broker_answering(
    url: str,
) -> None:
    with httpx.Client(timeout=30) as client:
        for s in range(1000):  # 32,000 distinct needles on one key took 24 s a publication
            if s % 200 == 0:  # 200 x 253 characters: within a subscriber's budget of them
                path, auth = registered(client, url)
            needles = [f"n{s:04d}x{p:02d}" for p in range(31)] + ["found" if s == 7 else "nope"]
            predicates = [{"key": "body", "op": "contains", "value": n} for n in needles]
            taken = client.post(path, json={"predicates": predicates}, headers=auth)
            assert taken.status_code == 201, taken.text
    value = "y" * 125_000 + "".join(f"n0007x{p:02d}" for p in range(31)) + "found"
    body = json.dumps({"attributes": {"body": value + "y" * (250_000 - len(value))}}).encode()
    answer = while_healthy(url, lambda: post(url, "/v1/publications", body))
    assert answer.status_code == 201, answer.text
    assert answer.json()["deliveries"] == 1  # subscription 7: all its needles are there


def registered(client: httpx.Client, url: str = "") -> tuple[str, dict[str, str]]:
    """A new subscriber's subscriptions path and its credentials."""
    raw = client.post(f"{url}/v1/subscribers").json()
    return f"{url}/v1/subscribers/{raw['id']}/subscriptions", {
        "Authorization": f"Bearer {raw['token']}"
    }


def contains(*values: str) -> dict[str, list[dict[str, str]]]:
    return {"predicates": [{"key": "body", "op": "contains", "value": v} for v in values]}


def test_contains_values_past_a_subscriber_s_budget_are_refused_naming_the_field(
    url: str,
) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        path, auth = registered(client)
        for n in range(2):  # 2 x 32 x 1,024: the budget of 65,536 characters exactly
            values = [f"{n}{p:02d}".ljust(1024, "z") for p in range(32)]
            assert client.post(path, json=contains(*values), headers=auth).status_code == 201
        past = {"predicates": [{"key": "n", "op": ">", "value": 1}, *contains("y")["predicates"]]}
        refused = client.post(path, json=past, headers=auth)
        topical = client.post(path, json={"topics": ["a"]}, headers=auth)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["field"]) == ("limit_exceeded", "predicates[1].value")
    assert "max_contains_chars_per_subscriber" in error["message"]
    assert "65536" in error["message"]
    assert topical.status_code == 201  # no contains: the budget is not this subscription's


def test_a_subscriber_within_its_budget_is_served_and_unsubscribing_frees_it(url: str) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        path, auth = registered(client)
        needle = "needle".ljust(1024, "q")
        made = [
            client.post(
                path, json=contains(*[f"{p:02d}{needle}"[:1024] for p in range(32)]), headers=auth
            ).json()["id"]
            for _ in range(2)
        ]
        assert client.post(path, json=contains("q"), headers=auth).status_code == 422
        client.delete(f"{path}/{made[0]}", headers=auth).raise_for_status()
        again = client.post(path, json=contains("bodyneedle"), headers=auth)
        assert again.status_code == 201, again.text
        value = "x" * 1000 + "bodyneedle" + "x" * 1000
        published = client.post("/v1/publications", json={"attributes": {"body": value}})
        pulled = client.get(f"{path.removesuffix('/subscriptions')}/messages", headers=auth)
    assert published.status_code == 201 and published.json()["deliveries"] == 1
    assert [m["subscription_ids"] for m in pulled.json()["messages"]] == [[again.json()["id"]]]


def test_contains_values_past_the_broker_s_budget_are_refused_naming_it(tmp_path: Path) -> None:
    settings = load_settings({"data_dir": tmp_path}, env={})
    tight = Limits(max_contains_chars=4096)
    with (
        EmbeddedServer(dataclasses.replace(settings, limits=tight)) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        taken = []
        for _ in range(2):  # two subscribers, each within its own budget
            path, auth = registered(client)
            taken.append(client.post(path, json=contains("a" * 1024, "b" * 1024), headers=auth))
        refused = client.post(path, json=contains("c"), headers=auth)
        client.delete(f"{path}/{taken[1].json()['id']}", headers=auth).raise_for_status()
        freed = client.post(path, json=contains("c"), headers=auth)
    assert [t.status_code for t in taken] == [201, 201]
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == "predicates[0].value"
    assert "max_contains_chars" in refused.json()["error"]["message"]
    assert freed.status_code == 201


def test_thousands_of_not_equal_prefix_and_suffix_predicates_deliver_exactly(url: str) -> None:
    value = "p" * 1000 + "tail"  # each subscription below: 32 predicates on `k`, 6,400 in all
    wanted = set()
    with httpx.Client(timeout=30) as client:
        path, auth = registered(client, url)
        for s in range(200):
            if s < 100:  # `!=` 1,000-character values, the last one the value unless s % 10 == 3
                unequal = [f"{s:03d}{p:02d}".ljust(1000, "p") for p in range(31)]
                unequal.append(f"{s:03d}".ljust(1000, "p") if s % 10 == 3 else value)
                predicates = [{"key": "k", "op": "!=", "value": v} for v in unequal]
            else:  # 30 prefixes, one of 1,000 characters (off by one unless s % 25 == 0), a suffix
                lengths = range(s - 100, s - 70)
                predicates = [{"key": "k", "op": "prefix", "value": "p" * n} for n in lengths]
                last = "p" * 999 + ("p" if s % 25 == 0 else "q")
                predicates += [{"key": "k", "op": "prefix", "value": last},
                               {"key": "k", "op": "suffix", "value": "tail"}]  # fmt: skip
            taken = client.post(path, json={"predicates": predicates}, headers=auth)
            assert taken.status_code == 201, taken.text
            if s % (10 if s < 100 else 25) == (3 if s < 100 else 0):
                wanted.add(taken.json()["id"])
    publications = [{"attributes": {"k": value}, "data": "first"}, {"attributes": {"k": 5}}, {}]
    publications += [{"attributes": {"k": value + f"x{n}"}} for n in range(200)]
    body = json.dumps({"publications": publications}).encode()
    answer = while_healthy(url, lambda: post(url, "/v1/publications/batch?answer=count", body))
    pulled = httpx.get(f"{path.removesuffix('/subscriptions')}/messages", headers=auth).json()
    assert answer.status_code == 201, answer.text
    # the value + "x..." ones match every `!=` subscription; a number, a missing key: none
    assert answer.json() == {"published": 203, "deliveries": 201}
    first = [m for m in pulled["messages"] if m["body"].get("data") == "first"]
    assert [set(m["subscription_ids"]) for m in first] == [wanted] and len(wanted) == 14


def answered_while_read(url: str, path: str, body: bytes, content_type: str) -> tuple[int, bytes]:
    """How many /healthz asks (one after another, from another client) were answered after
    `body` was all sent to `path` and before its answer came; and the answer's status line."""
    events: list[str] = []  # "sent", "healthz" and "answered", in the order they happened
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=60) as client:
            while not done.is_set():
                client.get(f"{url}/healthz").raise_for_status()
                events.append("healthz")

    host, port = url.removeprefix("http://").split(":")
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\n"
    head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    prober = threading.Thread(target=probe)
    prober.start()
    try:
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            sock.sendall(head.encode() + body)
            events.append("sent")
            status = sock.makefile("rb").readline()
            events.append("answered")
    finally:
        done.set()
        prober.join()
    sent, answered = events.index("sent"), events.index("answered")
    return events[sent:answered].count("healthz"), status


def test_a_batch_of_the_most_tiny_containers_leaves_the_broker_answering_as_it_is_read(
    url: str,
) -> None:
    """The worst body for its bytes (two-byte MessagePack arrays, as many as a body may
    hold) is read beside the event loop: 1.9 M of them held /healthz 5.5 s when read on it."""
    batch = {"publications": [{"topics": ["tiny"], "data": [[0]] * 26_000}] * 10}
    body = msgspec.msgpack.encode(batch)
    answered, status = answered_while_read(
        url, "/v1/publications/batch", body, "application/msgpack"
    )
    assert status.startswith(b"HTTP/1.1 201")
    assert answered >= 10


@pytest.mark.parametrize("form", ["json", "msgpack"])
def test_a_body_of_more_arrays_than_a_body_may_hold_is_refused_naming_the_limit(
    url: str, form: str
) -> None:
    batch = {"publications": [{"topics": ["tiny"], "data": [[]] * 26_300}] * 10}
    encode, content_type = (
        (msgspec.json.encode, "application/json")
        if form == "json"
        else (msgspec.msgpack.encode, "application/msgpack")
    )
    answer = httpx.post(
        f"{url}/v1/publications/batch",
        content=encode(batch),
        headers={"Content-Type": content_type},
        timeout=60,
    )
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "limit_exceeded" and error["field"] == "$"
    assert "262,144" in error["message"]
