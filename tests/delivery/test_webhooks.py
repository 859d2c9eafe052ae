"""Webhooks end to end: a real broker (the app, its store and pushers) POSTing to a real HTTP
receiver that checks every signature with the verifier printed in docs/api.md."""

from __future__ import annotations

import dataclasses
import random
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.api.conftest import Sub
from tests.delivery.receiver import Receiver, documented_verifier, wait_for

from tidings.config import QueueSettings, WebhookSettings, load_settings
from tidings.delivery.pusher import backoff_s
from tidings.delivery.signature import sign, verify
from tidings.server import EmbeddedServer

FAST = {"batch_size": 10, "timeout_s": 2.0, "concurrency": 2, "backoff_base_s": 0.05}
FAST |= {"backoff_cap_s": 0.2}
FAST |= {"allow_networks": "127.0.0.0/8"}  # the receivers listen on loopback, denied by default


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def server(tmp: Path, max_attempts: int = 3, **webhooks: Any) -> EmbeddedServer:
    settings = load_settings({"data_dir": tmp, "event_log": False}, env={})
    return EmbeddedServer(
        dataclasses.replace(
            settings,
            queues=QueueSettings(max_attempts=max_attempts),
            webhooks=WebhookSettings(**(FAST | webhooks)),
        )
    )


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedServer]:
    with server(tmp_path, failures_to_pause=100) as running:
        yield running


class Hooked(Sub):
    """A subscriber to topic `t` whose webhook points at the receiver."""

    def __init__(self, http: httpx.Client, receiver: Receiver, path: str = "/hook") -> None:
        super().__init__(http)
        self.subscribe(topics=["t"])
        self.hook = self.put(receiver.url(path))
        receiver.secret = self.hook["secret"]

    def put(self, url: str, **more: Any) -> dict[str, Any]:
        body = {"url": url, **more}
        answer = self.http.put(f"{self.base}/webhook", json=body, headers=self.auth)
        assert answer.status_code == 200, answer.text
        return answer.json()  # type: ignore[no-any-return]

    def webhook(self) -> dict[str, Any]:
        return self.get("/webhook").json()  # type: ignore[no-any-return]

    def depth(self) -> dict[str, int]:
        return self.get("").json()["depth"]  # type: ignore[no-any-return]


def publish(http: httpx.Client, n: int) -> list[str]:
    batch = [{"topics": ["t"], "data": {"n": i}} for i in range(n)]
    answer = http.post("/v1/publications/batch", json={"publications": batch})
    return [p["id"] for p in answer.json()["publications"]]


def drained(sub: Hooked) -> bool:
    return sub.depth() == {"ready": 0, "leased": 0, "dead": 0}


def test_published_messages_arrive_signed_in_batches_and_are_acknowledged(
    broker: EmbeddedServer, receiver: Receiver
) -> None:
    with httpx.Client(base_url=broker.url) as http:
        sub = Hooked(http, receiver)
        ids = publish(http, 25)
        wait_for(lambda: len(receiver.delivered()) >= 25, "25 deliveries")
        wait_for(lambda: drained(sub), "the queue acknowledged empty")
    delivered = receiver.delivered()
    assert sorted(m["publication_id"] for m in delivered[:25]) == sorted(ids)
    requests = receiver.taken()
    assert all(r.verified for r in requests)
    assert all(len(r.messages()) <= 10 for r in requests) and len(requests) >= 3
    first = requests[0]
    assert first.headers["content-type"] == "application/json"
    assert first.headers["tidings-subscriber"] == sub.id
    assert first.headers["tidings-delivery-attempt"] == "1"
    assert first.headers["user-agent"].startswith("Tidings-Webhooks/")
    keys = {"id", "receipt", "attempt", "publication_id", "subscription_ids", "enqueued_at", "body"}
    assert all(set(m) == keys for m in delivered)  # as a pull's messages
    for r in requests:  # each batch in queue order
        numbers = [m["body"]["data"]["n"] for m in r.messages()]
        assert numbers == sorted(numbers)
    assert broker.broker.metrics.value("webhook_requests_total", outcome="ok") >= 3


def test_a_failing_message_is_retried_past_max_attempts_until_its_retention(
    tmp_path: Path, receiver: Receiver
) -> None:
    """`max_attempts` (2 here) dead-letters nothing pushed: the endpoint's retention does."""
    receiver.status = 500
    with (
        server(tmp_path, max_attempts=2, failures_to_pause=100) as broker,
        httpx.Client(base_url=broker.url) as http,
    ):
        sub = Hooked(http, receiver)
        hook = sub.put(receiver.url(), retention_s=2.5)
        [pub] = publish(http, 1)
        letters = wait_for(lambda: sub.get("/dead-letters").json()["dead_letters"], "a letter")
        depth = sub.depth()
        state = sub.webhook()
    tries = [r for r in receiver.all() if r.messages()[0]["publication_id"] == pub]
    attempts = [int(r.headers["tidings-delivery-attempt"]) for r in tries]
    assert attempts == list(range(1, len(tries) + 1)) and len(tries) > 2
    assert all(r.verified and r.status == 500 for r in tries)
    [letter] = letters
    assert (letter["publication_id"], letter["reason"]) == (pub, "retention")
    assert letter["dead_at"] - letter["enqueued_at"] >= 2.5
    assert depth == {"ready": 0, "leased": 0, "dead": 1}
    assert hook["retention_s"] == 2.5 and state["retention_s"] == 2.5
    assert (state["state"], state["reason"]) == ("active", "HTTP 500")


def test_repeated_failures_pause_the_endpoint_which_is_probed_and_resumes_by_itself(
    tmp_path: Path, receiver: Receiver
) -> None:
    receiver.status = 503
    with (
        server(tmp_path, max_attempts=2, failures_to_pause=3) as running,
        httpx.Client(base_url=running.url) as http,
    ):
        sub = Hooked(http, receiver)
        ids = publish(http, 5)
        paused = wait_for(lambda: sub.webhook()["state"] == "paused" and sub.webhook(), "pause")
        summary = sub.get("").json()["webhook"]
        failed = len(receiver.all())
        more = publish(http, 2)  # queued while paused
        wait_for(lambda: len(receiver.all()) >= failed + 3, "probes while paused")
        receiver.status = 200
        wait_for(lambda: len(receiver.delivered()) >= 7, "the backlog")
        wait_for(lambda: drained(sub), "the queue acknowledged empty")
        resumed = sub.webhook()
        pauses = running.broker.metrics.value("webhook_pauses_total")
        letters = sub.get("/dead-letters").json()["dead_letters"]
    assert paused["failures"] >= 3 and paused["reason"] == (
        f"{paused['failures']} consecutive failed requests; the last: HTTP 503; "
        "probed one request at a time, at most every 0.2 s"
    )
    assert (summary["url"], summary["state"]) == (receiver.url(), "paused")
    assert "consecutive failed requests; the last: HTTP 503" in summary["reason"]
    assert (resumed["state"], resumed["failures"], resumed["reason"]) == ("active", 0, None)
    got = sorted(m["publication_id"] for m in receiver.delivered())
    assert got == sorted(ids + more) and pauses == 1 and letters == []


def test_resume_makes_a_paused_endpoint_active_and_its_backlog_ready_at_once(
    tmp_path: Path, receiver: Receiver
) -> None:
    """The failed batch was handed back for U(0, 600 s): resuming does not wait for it."""
    receiver.status = 503
    slow = {"failures_to_pause": 1, "backoff_base_s": 600.0, "backoff_cap_s": 600.0}
    with (
        server(tmp_path, **slow) as running,
        httpx.Client(base_url=running.url) as http,
    ):
        sub = Hooked(http, receiver)
        ids = publish(http, 3)
        wait_for(lambda: sub.webhook()["state"] == "paused", "pause")
        time.sleep(0.5)  # the failed batch handed back, with its backoff
        receiver.status = 200
        resumed = sub.post("/webhook/resume")
        wait_for(lambda: len(receiver.delivered()) >= 3, "the backlog", timeout_s=5)
    assert resumed.status_code == 200
    assert (resumed.json()["state"], resumed.json()["failures"]) == ("active", 0)
    assert sorted(m["publication_id"] for m in receiver.delivered()) == sorted(ids)


@pytest.mark.parametrize("down", ["answering 503", "refusing connections"])
def test_a_receiver_down_for_a_while_gets_every_message_once_back(
    tmp_path: Path, receiver: Receiver, down: str
) -> None:
    """An outage of about three seconds with publications before, during and after it (the
    intervals scaled down by settings): every message is delivered, none dead-lettered,
    though each was attempted more often than `max_attempts`, and the pause was visible."""
    hooks = {"failures_to_pause": 5, "backoff_base_s": 0.05, "backoff_cap_s": 0.4}
    with (
        server(tmp_path, max_attempts=2, **hooks) as running,
        httpx.Client(base_url=running.url) as http,
    ):
        sub = Hooked(http, receiver)
        ids = publish(http, 10)
        wait_for(lambda: len(receiver.delivered()) >= 10, "the first ten")
        port = int(receiver.url().rsplit(":", 1)[1].split("/")[0])
        if down == "answering 503":
            receiver.status = 503
        else:
            receiver.close()
        states = set()
        until = time.monotonic() + 3
        while time.monotonic() < until:
            ids += publish(http, 2)
            states.add(sub.webhook()["state"])
            time.sleep(0.1)
        back = receiver
        if down == "answering 503":
            receiver.status = 200
        else:
            back = Receiver(secret=receiver.secret, port=port)
        try:
            ids += publish(http, 10)

            def everyone() -> list[dict[str, Any]]:
                return receiver.delivered() + (back.delivered() if back is not receiver else [])

            wait_for(lambda: {m["publication_id"] for m in everyone()} >= set(ids), "all", 60)
            wait_for(lambda: drained(sub), "the queue acknowledged empty")
            letters = sub.get("/dead-letters").json()["dead_letters"]
            final = sub.webhook()
        finally:
            back.close()
    delivered = everyone()
    assert sorted({m["publication_id"] for m in delivered}) == sorted(ids) and letters == []
    assert "paused" in states and (final["state"], final["failures"]) == ("active", 0)
    assert max(m["attempt"] for m in delivered) > 2  # past max_attempts, still delivered


def test_a_tampered_body_an_old_time_or_another_secret_fail_verification(
    broker: EmbeddedServer, receiver: Receiver
) -> None:
    with httpx.Client(base_url=broker.url) as http:
        Hooked(http, receiver)
        publish(http, 1)
        [request] = wait_for(receiver.taken, "a request")
    documented = documented_verifier()
    header, body, secret = request.headers["tidings-signature"], request.body, receiver.secret
    assert documented(secret, body, header) and verify(secret, body, header, time.time())
    tampered = body.replace(b'"n":0', b'"n":1')
    assert tampered != body and not documented(secret, tampered, header)
    assert not documented("whsec_another", body, header)
    old = sign(secret, body, int(time.time()) - 301)
    assert not documented(secret, body, old) and not verify(secret, body, old, time.time())
    for garbled in ("", "t=x,v1=00", header.replace("v1=", "v0="), f"{header},t=1"):
        assert not verify(secret, body, garbled, time.time())


def test_deleting_the_subscriber_or_its_webhook_stops_its_pusher(
    broker: EmbeddedServer, receiver: Receiver
) -> None:
    pushing = broker.broker.revocations.streaming  # a pusher watches its subscriber
    with httpx.Client(base_url=broker.url) as http:
        first, second = Hooked(http, receiver, "/a"), Hooked(http, receiver, "/b")
        wait_for(lambda: {first.id, second.id} <= pushing(), "both pushers")
        assert http.delete(first.base, headers=first.auth).status_code == 204
        wait_for(lambda: first.id not in pushing(), "the first pusher to stop")
        assert http.delete(f"{second.base}/webhook", headers=second.auth).status_code == 204
        wait_for(lambda: second.id not in pushing(), "the second pusher to stop")
        publish(http, 1)
        assert second.pull()  # the queue stays, for pulls


def test_a_new_url_moves_delivery_and_keeps_the_secret(
    broker: EmbeddedServer, receiver: Receiver
) -> None:
    with httpx.Client(base_url=broker.url) as http:
        sub = Hooked(http, receiver, "/old")
        moved = sub.put(receiver.url("/new"))
        [pub] = publish(http, 1)
        wait_for(lambda: receiver.delivered("/new"), "a delivery to the new URL")
    assert moved["secret"] == sub.hook["secret"] and moved["url"].endswith("/new")
    assert [m["publication_id"] for m in receiver.delivered()] == [pub]


def test_the_store_holds_the_secret_sealed_and_its_subscriber_sees_it_clear(
    broker: EmbeddedServer, receiver: Receiver
) -> None:
    with httpx.Client(base_url=broker.url) as http:
        sub = Hooked(http, receiver)
        [pub] = publish(http, 1)
        [request] = wait_for(receiver.taken, "a delivery", timeout_s=30)
        shown = sub.webhook()
    stored = broker.broker.store.sync.get_endpoint(sub.id)
    assert stored is not None and stored.secret.startswith("sealed:")
    assert sub.hook["secret"] not in stored.secret
    assert shown["secret"] == sub.hook["secret"] and shown["secret"].startswith("whsec_")
    assert request.verified and request.messages()[0]["publication_id"] == pub
    assert (broker.settings.data_dir / "secrets.key").exists()


def test_an_endpoint_stored_through_another_broker_is_pushed_to(
    broker: EmbeddedServer, receiver: Receiver
) -> None:
    """Brokers sharing a store read the endpoints again every few seconds."""
    from tidings.store.base import Endpoint

    with httpx.Client(base_url=broker.url) as http:
        sub = Sub(http)
        sub.subscribe(topics=["t"])
        receiver.secret = "whsec_elsewhere"
        endpoint = Endpoint(sub.id, receiver.url(), receiver.secret, updated_at=time.time())
        assert broker.broker.store.sync.set_endpoint(sub.id, endpoint)  # as another broker would
        [pub] = publish(http, 1)
        [request] = wait_for(receiver.taken, "a delivery", timeout_s=30)
    assert request.verified and request.messages()[0]["publication_id"] == pub


def test_several_batches_are_in_flight_at_once(broker: EmbeddedServer, receiver: Receiver) -> None:
    """Each request is held until a second one arrives: with one request at a time, the
    first would wait in vain (and be answered 500)."""
    receiver.hold = threading.Barrier(2, timeout=20)
    with httpx.Client(base_url=broker.url) as http:
        sub = Hooked(http, receiver)
        publish(http, 20)  # two batches of 10
        wait_for(lambda: drained(sub), "the queue acknowledged empty")
    requests = receiver.all()
    assert [r.status for r in requests] == [200, 200]
    assert sorted(len(r.messages()) for r in requests) == [10, 10]


def test_a_refused_connection_and_a_silent_endpoint_are_failures(tmp_path: Path) -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    refusing = socket.create_server(("127.0.0.1", 0))
    closed_port = refusing.getsockname()[1]
    refusing.close()
    with (
        silent,
        server(tmp_path, max_attempts=10, failures_to_pause=100, timeout_s=0.3) as running,
        httpx.Client(base_url=running.url) as http,
    ):
        hooks = {}
        for name, port in (("refused", closed_port), ("silent", silent.getsockname()[1])):
            sub = Sub(http)
            sub.subscribe(topics=["t"])
            url = f"http://127.0.0.1:{port}/hook"
            assert http.put(f"{sub.base}/webhook", json={"url": url}, headers=sub.auth).is_success
            hooks[name] = sub
        publish(http, 1)
        reasons = {
            name: wait_for(lambda s=s: s.get("/webhook").json()["reason"], f"{name} to fail")
            for name, s in hooks.items()
        }
        errors = running.broker.metrics.value("webhook_requests_total", outcome="error")
    assert reasons["refused"].startswith("ConnectionRefusedError")
    assert reasons["silent"].startswith("TimeoutError")
    assert errors >= 2


class EndlessHeader:
    """An endpoint that answers every request with a header line that never ends, counting
    the bytes each connection took until the broker closed it (what the kernel's socket
    buffers absorbed included: a few MB on loopback)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sent: list[int] = []  # by connection
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn: socket.socket) -> None:
        self.sent.append(0)
        mine = len(self.sent) - 1
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Endless: ")
                while True:
                    self.sent[mine] += conn.send(b"a" * 65536)
            except OSError:
                return


def test_an_endpoint_answering_a_header_without_end_fails_after_a_bounded_read(
    tmp_path: Path,
) -> None:
    endless = EndlessHeader()
    with (
        server(tmp_path, failures_to_pause=100, timeout_s=10.0) as running,
        httpx.Client(base_url=running.url) as http,
    ):
        sub = Sub(http)
        sub.subscribe(topics=["t"])
        url = f"http://127.0.0.1:{endless.port}/hook"
        assert http.put(f"{sub.base}/webhook", json={"url": url}, headers=sub.auth).is_success
        publish(http, 1)
        reason = wait_for(lambda: sub.get("/webhook").json()["reason"], "the request to fail")
    endless.listener.close()
    # read until its timeout, one such endpoint took ~110 MB of the broker's memory; now a
    # connection is closed after 64 KiB, the rest of its bytes in the kernel's buffers
    assert reason.startswith("AnswerTooLarge") and "headers" in reason
    assert endless.sent and max(endless.sent) < 32 * 1024 * 1024


def test_two_brokers_on_one_postgresql_both_push_and_both_stop(
    tmp_path: Path, schema: str, receiver: Receiver
) -> None:
    """Set through one broker, the endpoint is pushed by both (the other reads it within
    its sync); every message arrives; deleted through one, both pushers stop."""
    from tests.conftest import PG

    def broker(name: str) -> EmbeddedServer:
        settings = load_settings({"store_url": f"{PG}?schema={schema}"}, env={})
        key = str(tmp_path / "secrets.key")  # brokers on one store share the sealing key
        hooks = WebhookSettings(**(FAST | {"failures_to_pause": 100, "secrets_key_file": key}))
        return EmbeddedServer(
            dataclasses.replace(settings, data_dir=tmp_path / name, webhooks=hooks)
        )

    with broker("a") as a, broker("b") as b, httpx.Client(base_url=a.url) as http:
        sub = Hooked(http, receiver)
        both = (a.broker.revocations.streaming, b.broker.revocations.streaming)
        wait_for(lambda: all(sub.id in pushing() for pushing in both), "both pushers")
        with httpx.Client(base_url=b.url) as other:
            ids = publish(other, 30)
        wait_for(lambda: {m["publication_id"] for m in receiver.delivered()} >= set(ids), "all")
        assert all(r.verified for r in receiver.all())
        assert http.delete(sub.base, headers=sub.auth).status_code == 204
        wait_for(lambda: not any(sub.id in pushing() for pushing in both), "both to stop")


def test_the_backoff_grows_with_full_jitter_up_to_the_cap() -> None:
    rng = random.Random(7)
    samples = {n: [backoff_s(n, 1.0, 60.0, rng) for _ in range(2000)] for n in range(1, 10)}
    for n, drawn in samples.items():
        bound = min(60.0, 2.0 ** (n - 1))
        assert all(0.0 <= d <= bound for d in drawn)
        assert max(drawn) > 0.9 * bound and min(drawn) < 0.1 * bound  # jitter spans it
    means = [sum(samples[n]) / 2000 for n in range(1, 8)]  # bounds 1, 2, ... 64 (capped)
    assert means == sorted(means) and means[-1] < 32  # growing, then held by the cap
    assert backoff_s(10_000, 1.0, 60.0, rng) <= 60.0
