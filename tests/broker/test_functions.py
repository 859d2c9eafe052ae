"""Function matches are durable: a publish answered 201 owes its function evaluations in the
store until they are done, so a broker killed with SIGKILL and restarted finishes them (code,
builtin and URL functions, real `tidings serve` processes), each match delivered once; and
a broker never takes the pending work another live broker holds."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import orjson
import psycopg
import pytest
from tests.broker.test_operations import SPEC, FakeRunner, settings_for, started
from tests.conftest import require_service
from tests.store.conftest import PG

from tidings.broker import Broker, PublicationInput
from tidings.config import Settings
from tidings.model import Publication
from tidings.server import broker_processes, free_port
from tidings.store.base import Owe, PendingEvaluation, QueueDepth

ENGLISH = "The weather in Munich is sunny and warm today."
SPANISH = "El tiempo en Madrid es soleado y cálido hoy."
EVEN = "def match(publication):\n    return publication['data']['n'] % 2 == 0\n"
PUBLICATIONS = 400
CLAIM_S = "2"  # the queues' visibility timeout, which is a claim's length


@pytest.fixture
def url_function() -> Iterator[str]:
    """A URL function matching the even `n`, a little slow, so calls are in flight."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = orjson.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(0.01)
            answer = orjson.dumps({"match": body["publication"]["data"]["n"] % 2 == 0})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/match"
    server.shutdown()
    server.server_close()


def subscribed(http: httpx.Client, function: dict[str, object]) -> dict[str, str]:
    who: dict[str, str] = http.post("/v1/subscribers").json()
    answer = http.post(
        f"/v1/subscribers/{who['id']}/subscriptions",
        json={"function": {"function_type": "f", **function}},
        headers={"Authorization": f"Bearer {who['token']}"},
    )
    assert answer.status_code == 201, answer.text
    return who


def received(url: str, who: dict[str, str], expected: int, timeout_s: float) -> list[str]:
    """Every publication id queued for `who` (leased for long: none comes twice from the
    lease), once `expected` have come or the time is up, and a moment more."""
    auth = {"Authorization": f"Bearer {who['token']}"}
    out: list[str] = []
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=url, headers=auth, timeout=10) as http:
        path = f"/v1/subscribers/{who['id']}/messages"
        while time.monotonic() < deadline:
            wait = 1 if len(out) < expected else 0.5
            batch = http.get(path, params={"max": 100, "wait": wait, "visibility": 600})
            got = [m["publication_id"] for m in batch.json()["messages"]]
            out += got
            if len(out) >= expected and not got:
                break
    return out


@pytest.mark.slow
def test_kill_9_right_after_the_last_201_loses_no_function_match(
    tmp_path: Path, url_function: str
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        "TIDINGS_QUEUES__VISIBILITY_TIMEOUT_S": CLAIM_S,
        "TIDINGS_FUNCTIONS__URL_DENY_NETWORKS": "",
        "TIDINGS_FUNCTIONS__URL_ALLOW_NETWORKS": "127.0.0.0/8",
        # what is tested is the crash: on a loaded machine a slow call must not count as a
        # failure, nor failures suspend a function (its matches would be lost to that)
        "TIDINGS_FUNCTIONS__CPU_MS": "2000",
        "TIDINGS_FUNCTIONS__URL_TIMEOUT_S": "20",
        "TIDINGS_FUNCTIONS__FAILURES_TO_SUSPEND": "1000000",
        # nor a slow call make its subscriber suspect: its calls would wait in the
        # quarantine lane at nice 19, and be shed past its queue (as failures)
        "TIDINGS_FUNCTIONS__SLOW_CALL_MS": "60000",
    }  # the URL function's here
    functions = [
        {"code": EVEN},
        {"code": EVEN},
        {"builtin": "detect_language", "params": {"language": "en"}},
        {"builtin": "detect_language", "params": {"language": "en"}},
        {"url": url_function},
        {"url": url_function},
    ]
    accepted: list[str] = []
    even: set[str] = set()
    with (
        broker_processes([tmp_path], [port], env=env) as [(proc, _)],
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        subs = [subscribed(http, f) for f in functions]
        for n in range(PUBLICATIONS):
            data = {"n": n, "text": ENGLISH if n % 2 == 0 else SPANISH}
            answer = http.post("/v1/publications", json={"data": data, "function_types": ["f"]})
            assert answer.status_code == 201, answer.text
            accepted.append(answer.json()["id"])
            if n % 2 == 0:
                even.add(accepted[-1])
        os.kill(proc.pid, signal.SIGKILL)  # right after the last 201
        proc.wait()
    with broker_processes([tmp_path], [port], env=env):
        # each subscriber's pulls as before, the six side by side: their quiet half-seconds
        # (nothing more comes) overlap instead of adding up
        with ThreadPoolExecutor(len(subs)) as pool:
            gots = list(pool.map(lambda who: received(url, who, len(even), 120), subs))
        for who, function, got in zip(subs, functions, gots, strict=True):
            twice = [p for p, n in Counter(got).items() if n > 1]
            assert not twice, f"delivered twice to {who['id']}: {twice[:3]}"
            if set(got) != even:  # what the restarted broker's function calls said
                said = [line for line in httpx.get(f"{url}/metrics").text.splitlines()
                        if "function" in line and not line.startswith("#")]  # fmt: skip
                lost = len(even - set(got))
                raise AssertionError(f"{lost} matches lost for {function}: {said}")


# ---------------------------------------------------------------- claims, in one process


def claims(tmp_path: Path, claim_s: float, store_url: str = "") -> Settings:
    base = settings_for(tmp_path)
    return dataclasses.replace(
        base,
        queues=dataclasses.replace(base.queues, visibility_timeout_s=claim_s),
        store_url=store_url,
    )


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store two brokers share: a SQLite file with its queues as rows (a log store has
    one owner), or PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/shared.db?layout=rows"
        return
    require_service("postgres")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield f"{PG}?schema={schema}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def pending_in(broker: Broker) -> list[str]:
    """The publications still owing evaluations (claimed now by a passer-by, for the look)."""
    return [e.publication_id for e in broker.store.sync.claim_pending("look", 1e12, 0.0, 100)]


@contextlib.asynccontextmanager
async def one_broker(tmp_path: Path, runner: FakeRunner) -> AsyncIterator[Broker]:
    """A broker on its own store with `runner`, closed (and its store) at the end."""
    broker = await started(claims(tmp_path, 30), runner)
    try:
        yield broker
    finally:
        await broker.close()
        broker.store.sync.close()


async def nothing_owed(broker: Broker, timeout_s: float = 2.0) -> bool:
    """Whether the broker comes to owe no evaluation within `timeout_s`."""
    for _ in range(int(timeout_s / 0.02)):
        if not pending_in(broker):
            return True
        await asyncio.sleep(0.02)
    return not pending_in(broker)


async def test_a_record_is_written_before_the_answer_and_removed_when_done(
    tmp_path: Path,
) -> None:
    runner = FakeRunner()
    async with one_broker(tmp_path, runner) as broker:
        me, _ = await broker.register()
        await broker.subscribe(me.id, "function", function=SPEC)
        await broker.subscribe(me.id, "topic", topics=("news",))
        runner.gate.clear()
        commits = broker._committer.commits
        published = await broker.publish(
            PublicationInput("positive", ("news",), function_types=("sentiment",))
        )
        assert broker._committer.commits == commits + 1  # the delivery and the record: one
        assert pending_in(broker) == [published.publication.id]
        plain = await broker.publish(PublicationInput("positive", ("no function",)))
        assert plain.publication.id not in pending_in(broker)  # owes nothing: no record
        runner.gate.set()
        [delivered] = await broker.pull(me.id, 10, wait_s=5, visibility_s=600)
        assert delivered.publication_id == published.publication.id
        assert await nothing_owed(broker)


async def test_a_live_brokers_work_is_not_taken_and_a_dead_ones_is_finished_once(
    tmp_path: Path, shared_url: str
) -> None:
    slow, other = FakeRunner(), FakeRunner()
    first = await started(claims(tmp_path, 0.3, shared_url), slow)
    second = await started(claims(tmp_path, 0.3, shared_url), other)
    try:
        me, _ = await first.register()
        await first.subscribe(me.id, "function", function=SPEC)
        await second.refresh(shared=True)  # the subscription, as another broker learns it
        slow.gate.clear()  # the first broker's evaluation hangs, its claim renewed meanwhile
        published = await first.publish(PublicationInput("positive", function_types=("sentiment",)))
        await asyncio.sleep(1.5)  # five claims' length
        assert other.calls == 0, "the second broker took work the first one holds"
        await first.close()  # as dead: its evaluation cut short, the record left behind
        [delivered] = await second.pull(me.id, 10, wait_s=5, visibility_s=600)
        assert delivered.publication_id == published.publication.id
        await asyncio.sleep(0.5)
        assert other.calls == 1 and pending_in(second) == []
        assert await second.depth(me.id) == QueueDepth(ready=0, leased=1)
    finally:
        await second.close()
        for b in (first, second):
            b.store.sync.close()


async def test_a_closing_broker_ends_its_claims_so_a_restart_finishes_at_once(
    tmp_path: Path,
) -> None:
    runner = FakeRunner()
    broker = await started(claims(tmp_path, 600), runner)
    me, _ = await broker.register()
    await broker.subscribe(me.id, "function", function=SPEC)
    runner.gate.clear()
    published = await broker.publish(PublicationInput("positive", function_types=("sentiment",)))
    await broker.close()  # its evaluation cut short; its claim would hold for 600 s
    broker.store.sync.close()
    again = await started(claims(tmp_path, 600), FakeRunner())
    try:
        [delivered] = await again.pull(me.id, 10, wait_s=5)
        assert delivered.publication_id == published.publication.id
    finally:
        await again.close()
        again.store.sync.close()


async def test_a_record_that_does_not_decode_is_dropped_and_the_others_finished(
    tmp_path: Path,
) -> None:
    settings = claims(tmp_path, 0.3)
    runner = FakeRunner()
    broker = await started(settings, runner)
    try:
        me, _ = await broker.register()
        sub = await broker.subscribe(me.id, "function", function=SPEC)
        good = Publication("p-good", 1.0, "positive", function_types=("sentiment",))
        broker.store.sync.apply([Owe([
            PendingEvaluation("p-bad", b"{not json", (sub.id,), "dead", 0.0),
            PendingEvaluation("p-good", orjson.dumps(good.to_json()), (sub.id,), "dead", 0.0),
        ])])  # fmt: skip
        [delivered] = await broker.pull(me.id, 10, wait_s=5, visibility_s=600)
        assert delivered.publication_id == "p-good"
        assert await nothing_owed(broker)
    finally:
        await broker.close()
        broker.store.sync.close()


# ---------------------------------------------------------------- removed while evaluated


async def test_an_unsubscribed_function_has_its_queued_calls_dropped_and_delivers_nothing(
    tmp_path: Path,
) -> None:
    runner = FakeRunner()
    async with one_broker(tmp_path, runner) as broker:
        me, _ = await broker.register()
        sub = await broker.subscribe(me.id, "function", function=SPEC)
        runner.gate.clear()  # its evaluation under way
        await broker.publish(PublicationInput("positive", function_types=("sentiment",)))
        await broker.unsubscribe(me.id, sub.id)
        assert runner.cancelled == [sub.id]
        runner.gate.set()  # the call running answers a match for a subscription now gone
        assert await nothing_owed(broker)
        assert await broker.depth(me.id) == QueueDepth(ready=0, leased=0)


async def test_an_unregistered_subscribers_function_calls_are_dropped(tmp_path: Path) -> None:
    runner = FakeRunner()
    async with one_broker(tmp_path, runner) as broker:
        me, _ = await broker.register()
        subs = [await broker.subscribe(me.id, "function", function=SPEC) for _ in range(2)]
        runner.gate.clear()
        await broker.publish(PublicationInput("positive", function_types=("sentiment",)))
        await broker.unregister(me.id)
        assert sorted(runner.cancelled) == sorted(s.id for s in subs)
        runner.gate.set()
        assert await nothing_owed(broker)


async def test_a_subscription_removed_through_another_broker_is_cancelled_here(
    tmp_path: Path, shared_url: str
) -> None:
    here, there = FakeRunner(), FakeRunner()
    first = await started(claims(tmp_path, 30, shared_url), here)
    second = await started(claims(tmp_path, 30, shared_url), there)
    try:
        me, _ = await first.register()
        sub = await first.subscribe(me.id, "function", function=SPEC)
        await second.refresh(shared=True)
        await second.unsubscribe(me.id, sub.id)
        await first.refresh(shared=True)  # the change log, as housekeeping reads it
        assert here.cancelled == [sub.id]
    finally:
        for b in (first, second):
            await b.close()
            b.store.sync.close()


async def test_a_subscription_gone_when_the_index_is_read_anew_is_cancelled(
    tmp_path: Path,
) -> None:
    runner = FakeRunner()
    async with one_broker(tmp_path, runner) as broker:
        me, _ = await broker.register()
        kept = await broker.subscribe(me.id, "function", function=SPEC)
        gone = await broker.subscribe(me.id, "function", function=SPEC)
        await broker.store.remove_subscription(gone.id)  # behind the change log's back
        await broker.following.reload()
        assert runner.cancelled == [gone.id] and kept.id not in runner.cancelled
