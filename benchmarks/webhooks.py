"""Webhook delivery: many endpoints at a steady publication rate, publish-to-receipt latency.

    python benchmarks/webhooks.py [--quick] [--endpoints 100] [--rate 100] [--seconds 60]

Target (issue #14): 100 endpoints at 100 publications/s (10,000 deliveries/s) sustained,
p99 under 200 ms. The broker runs as its own process (`tidings serve`, SQLite in a temporary
directory, default webhook settings); the receivers are one asyncio HTTP server in another
process (httptools' parser, a path per endpoint, answering 200 at once); the publisher runs
in this one. Baseline, in the same run: the same load over the WebSocket stream (the
subscribers of benchmarks/delivery.py), `ratio_vs_websocket` = webhook deliveries/s over
stream deliveries/s. `--quick`: 5 s of publishing instead of 60.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import queue
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httptools
import httpx
import orjson

sys.path.insert(0, str(Path(__file__).parent))
from common import emit, machine, percentile, versions

from delivery import Workload, measure, publish
from tidings.server import broker_process

GRACE_S = 30.0  # after the last publication, for the last deliveries
PUBLISH_BATCH = 10
# the receivers are on this machine, which webhooks reach only when the operator says
LOCAL = {"TIDINGS_WEBHOOKS__ALLOW_NETWORKS": "127.0.0.0/8"}
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


class Tally:
    """What the receivers saw: each delivery's latency, and repeats."""

    def __init__(self) -> None:
        self.latencies_ms: list[float] = []
        self.seen: set[tuple[bytes, int]] = set()
        self.duplicates = 0
        self.requests = 0
        self.last_at = 0.0

    def record(self, path: bytes, messages: list[dict[str, Any]], now: float) -> None:
        self.requests += 1
        self.last_at = now
        for m in messages:
            key = (path, m["id"])
            if key in self.seen:
                self.duplicates += 1
                continue
            self.seen.add(key)
            self.latencies_ms.append((now - m["body"]["published_at"]) * 1000)


class Receiver(asyncio.Protocol):
    """One kept-alive connection from the broker: requests in, `200` out."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_begin(self) -> None:
        self.url, self.body = b"", []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        now = time.time()
        self.tally.record(self.url, orjson.loads(b"".join(self.body))["messages"], now)
        assert self.transport is not None
        self.transport.write(OK)


def receiver_process(expected: int, ready: Any, results: Any, stop: Any) -> None:
    async def serve() -> dict[str, Any]:
        tally = Tally()
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: Receiver(tally), "127.0.0.1", 0)
        ready.put(server.sockets[0].getsockname()[1])
        while len(tally.seen) < expected and not stop.is_set():
            await asyncio.sleep(0.05)
        server.close()
        return {
            "latencies_ms": tally.latencies_ms,
            "duplicates": tally.duplicates,
            "requests": tally.requests,
            "last_at": tally.last_at,
        }

    results.put(asyncio.run(serve()))


async def hook_up(url: str, endpoints: int, port: int) -> None:
    """Subscribers to `bench`, each with its webhook on its own path of the receiver."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        for i in range(endpoints):
            me = (await http.post("/v1/subscribers")).json()
            auth = {"Authorization": f"Bearer {me['token']}"}
            base = f"/v1/subscribers/{me['id']}"
            await http.post(f"{base}/subscriptions", json={"topics": ["bench"]}, headers=auth)
            hook = {"url": f"http://127.0.0.1:{port}/r/{i}"}
            (await http.put(f"{base}/webhook", json=hook, headers=auth)).raise_for_status()


def measure_webhooks(w: Workload) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    ready, results, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    expected = w.subscribers * w.messages
    receiver = ctx.Process(target=receiver_process, args=(expected, ready, results, stop))
    receiver.start()
    try:
        port = ready.get(timeout=30)
        with (
            tempfile.TemporaryDirectory() as tmp,
            broker_process(Path(tmp), None, "--no-event-log", env=LOCAL) as (_, url),
        ):
            asyncio.run(hook_up(url, w.subscribers, port))
            started = time.time()
            publishing_s = asyncio.run(publish(url, w))  # ends at `messages / rate` seconds
            try:
                seen = results.get(timeout=GRACE_S)
            except queue.Empty:  # not everything arrived: what did
                stop.set()
                seen = results.get(timeout=30)
    finally:
        stop.set()
        receiver.join(10)
    return summary(seen, expected, started, publishing_s)


def summary(
    seen: dict[str, Any], expected: int, started: float, publishing_s: float
) -> dict[str, Any]:
    """Deliveries per second over the publishing time, or until the last one arrived."""
    latencies = seen["latencies_ms"]
    elapsed = max(seen["last_at"] - started, publishing_s, 1e-9)
    return {
        "deliveries_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 50), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "max_ms": round(max(latencies, default=float("nan")), 2),
        "lost": expected - len(latencies),
        "duplicates": seen["duplicates"],
        "delivered": len(latencies),
        "requests": seen["requests"],
        "messages_per_request": round(len(latencies) / max(seen["requests"], 1), 1),
        "elapsed_s": round(elapsed, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 s of publishing, not 60")
    parser.add_argument("--endpoints", type=int, default=100)
    parser.add_argument("--rate", type=float, default=100.0, help="publications per second")
    parser.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args()
    seconds = args.seconds or (5.0 if args.quick else 60.0)
    messages = int(args.rate * seconds)
    w = Workload("webhooks", "webhook", args.endpoints, messages, args.rate, PUBLISH_BATCH)
    load_before = [round(x, 2) for x in os.getloadavg()]  # others sharing the cores show here
    hooks = measure_webhooks(w)
    same_load = Workload("fanout", "websocket", w.subscribers, messages, w.rate, w.batch)
    stream = measure(same_load, "")
    emit(
        {
            "benchmark": "webhooks",
            **hooks,
            "target": "10,000 deliveries/s sustained with p99 under 200 ms",
            "baseline": "the same load over the WebSocket stream (benchmarks/delivery.py)",
            "baseline_deliveries_per_s": stream["messages_per_s"],
            "baseline_p50_ms": stream["p50_ms"],
            "baseline_p99_ms": stream["p99_ms"],
            "baseline_lost": stream["lost"],
            "ratio_vs_websocket": round(
                hooks["deliveries_per_s"] / max(stream["messages_per_s"], 1e-9), 3
            ),
            "workload": {
                "endpoints": w.subscribers,
                "rate_per_s": w.rate,
                "seconds": seconds,
                "publications": messages,
                "offered_deliveries_per_s": w.rate * w.subscribers,
                "publish_batch": w.batch,
                "store": "sqlite (WAL, synchronous=NORMAL)",
                "webhook_settings": "defaults (batch 100, 4 requests in flight per endpoint)",
                "lost_means": f"not received within {GRACE_S:.0f} s after the last publication",
            },
            "machine": machine(),
            "load_avg_before": load_before,
            "load_avg_after": [round(x, 2) for x in os.getloadavg()],
            "versions": versions("starlette", "uvicorn", "httptools"),
        }
    )


if __name__ == "__main__":
    main()
