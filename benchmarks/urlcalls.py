"""URL functions: calls per second and latency against a fast local endpoint (issue 13).

    python benchmarks/urlcalls.py [--quick] [--rate R] [--seconds S] [--in-flight N]

The endpoint is a raw asyncio server on uvloop in its own process on 127.0.0.1, answering
every POST with `{"match": true}` (it serves well over 10,000 requests/s on one core here,
so the client is what is measured). Cases for the broker's `URLCaller` (the lean HTTP/1.1
client, `tidings.http1`):
- `closed_loop`: N calls in flight (default 256) for S seconds: `calls_per_s`, `p50_ms`,
  `p99_ms` of each call. The baseline, in the same run, is the same caller's logic over httpx
  (what the broker used before); `ratio_vs_httpx` = lean calls/s / httpx calls/s.
- `open_loop`: calls launched at R/s (default 5,000) for S seconds: achieved `calls_per_s`
  and latency from each call's scheduled time (`p50_ms`, `p99_ms`), so queueing counts.
  `meets`: the offered rate was >= 5,000/s, no call failed, and p99 < 100 ms. (httpx is not
  run open-loop: it sustains a few hundred calls/s, and its queue would take minutes.)
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import httpx
from common import emit, machine, percentile, versions

from tidings.config import FunctionSettings
from tidings.sandbox.urlcall import URLCaller

ENDPOINT = r"""
import asyncio, sys
import uvloop

ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
          b"Content-Length: 15\r\n\r\n{\"match\": true}")

class Endpoint(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buffer = transport, b""

    def data_received(self, data):
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15:].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length:]
            self.transport.write(ANSWER)

async def main(port):
    server = await asyncio.get_running_loop().create_server(Endpoint, "127.0.0.1", port)
    print("ready", flush=True)
    await server.serve_forever()

uvloop.run(main(int(sys.argv[1])))
"""
PUBLICATION = {"id": "p", "data": "DEBS2018 will be held at the University of Waikato."}


class HttpxCaller(URLCaller):
    """The baseline: the same retries and breaker, each call through httpx as before."""

    def __init__(self, settings: FunctionSettings) -> None:
        super().__init__(settings)
        limits = httpx.Limits(max_connections=settings.url_concurrency)
        self._httpx = httpx.AsyncClient(timeout=settings.url_timeout_s, limits=limits)

    async def _once(self, url: str, body: bytes) -> bool:
        response = await self._httpx.post(
            url, content=body, headers={"Content-Type": "application/json"}
        )
        response.raise_for_status()
        return bool(response.json()["match"])

    async def aclose(self) -> None:
        await self._httpx.aclose()
        await super().aclose()


Call = Callable[[], Awaitable[tuple[bool, str | None]]]


async def closed_loop(call: Call, in_flight: int, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    stop = time.perf_counter() + seconds

    async def lane() -> None:
        nonlocal errors
        while time.perf_counter() < stop:
            started = time.perf_counter()
            _, error = await call()
            latencies.append(time.perf_counter() - started)
            errors += error is not None

    began = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(in_flight)))
    return summary(latencies, errors, time.perf_counter() - began)


async def open_loop(call: Call, rate: float, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0

    async def one(scheduled: float) -> None:
        nonlocal errors
        _, error = await call()
        latencies.append(time.perf_counter() - scheduled)
        errors += error is not None

    began = time.perf_counter()
    tasks: list[asyncio.Task[None]] = []
    for i in range(int(rate * seconds)):
        scheduled = began + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(scheduled)))
    await asyncio.gather(*tasks)
    return summary(latencies, errors, time.perf_counter() - began)


def summary(latencies: list[float], errors: int, elapsed: float) -> dict[str, Any]:
    ms = [x * 1000 for x in latencies]
    return {
        "calls": len(ms),
        "errors": errors,
        "calls_per_s": round(len(ms) / elapsed, 1),
        "p50_ms": round(percentile(ms, 50), 2),
        "p99_ms": round(percentile(ms, 99), 2),
    }


async def measure(args: argparse.Namespace, url: str) -> None:
    # the endpoint is on this machine, which URL functions reach only when the operator says;
    # the calls are one subscriber's: its share is the whole client, and none is shed
    settings = FunctionSettings(
        url_timeout_s=2.0,
        url_allow_networks="127.0.0.0/8",
        url_concurrency_per_subscriber=64,
        url_queue_per_subscriber=10**6,
    )
    closed: dict[str, dict[str, Any]] = {}
    for client, kind in (("httpx", HttpxCaller), ("lean", URLCaller)):
        caller = kind(settings)

        def call(caller: URLCaller = caller) -> Awaitable[tuple[bool, str | None]]:
            return caller.call(url, PUBLICATION, {})

        await closed_loop(call, 16, 0.5)  # connections open, code warm
        closed[client] = await closed_loop(call, args.in_flight, args.seconds)
        if client == "lean":
            opened = await open_loop(call, args.rate, args.seconds)
        await caller.aclose()
    lean, base = closed["lean"], closed["httpx"]
    ratio = round(lean["calls_per_s"] / max(base["calls_per_s"], 1e-9), 2)
    emit({"case": "closed_loop", "lean": lean, "httpx": base, "ratio_vs_httpx": ratio})
    meets = args.rate >= 5000 and opened["errors"] == 0 and opened["p99_ms"] < 100
    emit({"case": "open_loop", "offered_per_s": args.rate, "lean": opened, "meets": meets})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 s per case")
    parser.add_argument("--rate", type=float, default=5000.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--in-flight", type=int, default=256)
    parser.add_argument("--port", type=int, default=18093)
    args = parser.parse_args()
    if args.quick:
        args.seconds = 2.0
    emit(
        {
            "benchmark": "urlcalls",
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(),
            "versions": versions("httpx", "httptools", "uvloop"),
            "workload": {"rate": args.rate, "seconds": args.seconds, "in_flight": args.in_flight},
            "command": " ".join(sys.argv),
        }
    )
    endpoint = subprocess.Popen(
        [sys.executable, "-c", ENDPOINT, str(args.port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert endpoint.stdout is not None and endpoint.stdout.readline().strip() == "ready"
        asyncio.run(measure(args, f"http://127.0.0.1:{args.port}/match"))
    finally:
        endpoint.kill()
        endpoint.wait()


if __name__ == "__main__":
    main()
