"""Durable delivery throughput and latency, over HTTP pull or the WebSocket stream.

    python benchmarks/delivery.py --case one-to-one|fanout --transport http|websocket [--quick]
        [--url U]

The broker runs as its own process (`tidings serve`, SQLite in a temporary directory);
subscribers run in separate processes, the publisher in this one. Each case is measured
twice in the same run: with the durable SQLite store and with `memory://` (the baseline),
and `ratio_vs_memory` is durable throughput / in-memory throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from common import emit, machine, percentile, versions

from tidings.client import AsyncClient
from tidings.server import broker_process

PAYLOAD = "x" * 150


@dataclass
class Workload:
    case: str
    transport: str
    subscribers: int
    messages: int  # publications
    rate: float  # publications/s; 0 = as fast as possible
    batch: int


async def receive(
    url: str, sid: str, token: str, transport: str, expected: int, deadline: float
) -> list[float]:
    """Latencies (ms) of every delivery, publish to receipt."""
    async with AsyncClient(url) as client:
        me = client.subscriber(sid, token)
        latencies: list[float] = []
        if transport == "websocket":
            async with me.stream(prefetch=1000) as stream:
                pending: list[str] = []

                async def drain() -> None:
                    async for m in stream:
                        latencies.append((time.time() - m.body["published_at"]) * 1000)
                        pending.append(m.receipt)
                        if len(pending) >= 200 or len(latencies) >= expected:
                            await stream.ack(pending[:])
                            pending.clear()
                        if len(latencies) >= expected:
                            return

                with contextlib.suppress(TimeoutError):  # keep what arrived in time
                    await asyncio.wait_for(drain(), max(1.0, deadline - time.time()))
        else:
            while len(latencies) < expected and time.time() < deadline:
                batch = await me.pull(100, wait=1)
                now = time.time()
                latencies += [(now - m.body["published_at"]) * 1000 for m in batch]
                if batch:
                    await me.ack([m.receipt for m in batch])
        return latencies


def subscriber_process(
    url: str, subs: list[tuple[str, str]], transport: str, expected: int, deadline: float, out: Any
) -> None:
    async def run() -> list[list[float] | BaseException]:
        tasks = [receive(url, s, t, transport, expected, deadline) for s, t in subs]
        return await asyncio.gather(*tasks, return_exceptions=True)

    # a subscriber that failed counts its deliveries as lost and says why
    out.put([r if isinstance(r, list) else repr(r) for r in asyncio.run(run())])


async def publish(url: str, w: Workload) -> float:
    async with AsyncClient(url) as client:
        started = time.time()
        sent = 0
        while sent < w.messages:
            n = min(w.batch, w.messages - sent)
            await client.publish_batch([{"data": PAYLOAD, "topics": ["bench"]}] * n)
            sent += n
            if w.rate:
                await asyncio.sleep(max(0.0, started + sent / w.rate - time.time()))
        return time.time() - started


async def setup(url: str, n: int) -> list[tuple[str, str]]:
    async with AsyncClient(url) as client:
        subs = []
        for _ in range(n):
            me = await client.register()
            await me.subscribe(topics=["bench"])
            subs.append((me.id, me.token))
        return subs


def measure(w: Workload, store: str, url: str | None = None) -> dict[str, Any]:
    """One run against `url`, or against a fresh broker process with `store`."""
    if url:
        return run(w, url)
    extra = ["--no-event-log", *(["--store", store] if store else [])]
    with tempfile.TemporaryDirectory() as tmp, broker_process(Path(tmp), None, *extra) as (_, url):
        return run(w, url)


def run(w: Workload, url: str) -> dict[str, Any]:
    subs = asyncio.run(setup(url, w.subscribers))
    procs = 2 if w.subscribers > 1 else 1
    deadline = time.time() + (w.messages / w.rate if w.rate else 60) + 60
    queue: Any = mp.get_context("spawn").Queue()
    workers = [
        mp.get_context("spawn").Process(
            target=subscriber_process,
            args=(url, subs[i::procs], w.transport, w.messages, deadline, queue),
        )
        for i in range(procs)
    ]
    for p in workers:
        p.start()
    time.sleep(1.0)
    started = time.time()
    asyncio.run(publish(url, w))
    results = [queue.get(timeout=deadline - time.time() + 30) for _ in workers]
    elapsed = time.time() - started
    for p in workers:
        p.join(10)
    per_sub = [r for per_proc in results for r in per_proc]
    latencies = [x for r in per_sub if isinstance(r, list) for x in r]
    errors = sorted({r for r in per_sub if isinstance(r, str)})
    expected = w.messages * w.subscribers
    return {
        "messages_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 50), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "lost": expected - len(latencies),
        "delivered": len(latencies),
        "elapsed_s": round(elapsed, 2),
        **({"errors": errors} if errors else {}),
    }


def workload(case: str, transport: str, quick: bool) -> Workload:
    if case == "one-to-one":
        return Workload(case, transport, 1, 20_000 if quick else 100_000, 0, 100)
    seconds = 3 if quick else 60  # --quick: both stores within about a minute
    return Workload(case, transport, 100, 500 * seconds, 500, 25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=["one-to-one", "fanout"], default="one-to-one")
    parser.add_argument("--transport", choices=["http", "websocket"], default="websocket")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--url", help="Measure this running broker (baseline: a local memory://).")
    args = parser.parse_args()
    w = workload(args.case, args.transport, args.quick)
    load_before = [round(x, 2) for x in os.getloadavg()]  # others sharing the cores show here
    durable = measure(w, "", args.url)
    baseline = measure(w, "memory://")
    ratio = durable["messages_per_s"] / max(baseline["messages_per_s"], 1e-9)
    workload_info = {
        "subscribers": w.subscribers,
        "publications": w.messages,
        "rate_per_s": w.rate or "max",
        "publish_batch": w.batch,
        "payload_bytes": len(PAYLOAD),
        "store": "sqlite (WAL, synchronous=NORMAL)" if not args.url else args.url,
        "lost_means": "not received within 60 s after the last publication",
    }
    emit(
        {
            "benchmark": "delivery",
            "case": w.case,
            "transport": w.transport,
            **durable,
            "baseline": "same workload, memory:// store",
            "baseline_messages_per_s": baseline["messages_per_s"],
            "baseline_p99_ms": baseline["p99_ms"],
            "ratio_vs_memory": round(ratio, 3),
            "workload": workload_info,
            "machine": machine(),
            "load_avg_before": load_before,
            "versions": versions("starlette", "uvicorn", "httpx", "websockets"),
        }
    )


if __name__ == "__main__":
    main()
