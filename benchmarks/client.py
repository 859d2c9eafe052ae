"""The asyncio client's own cost per call: CPU seconds in the client process per publish.

    python benchmarks/client.py [--calls N]

A broker runs in its own process (`tidings serve`, memory store); this process publishes N
publications one at a time through `AsyncClient` (the lean HTTP/1.1 transport), and, as the
baseline in the same run, through httpx (the transport before), then N more with 64 in
flight and `linger` batching. Prints the client's CPU microseconds per call
(`time.process_time`, this process only) and calls/s; `ratio_vs_httpx` = httpx's CPU per
call / the client's.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from common import emit, machine, versions

from tidings.client import AsyncClient
from tidings.server import broker_process

BODY = {"data": "x" * 150, "topics": ["bench"]}


async def lean(url: str, calls: int) -> None:
    async with AsyncClient(url) as client:
        for _ in range(calls):
            await client.publish(BODY["data"], topics=BODY["topics"])


async def baseline(url: str, calls: int) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        for _ in range(calls):
            (await client.post("/v1/publications", json=BODY)).raise_for_status()


async def batched(url: str, calls: int) -> None:
    async with AsyncClient(url, linger=0.002, batch_size=100) as client:
        gate = asyncio.Semaphore(64)

        async def one() -> None:
            async with gate:
                await client.publish(BODY["data"], topics=BODY["topics"])

        await asyncio.gather(*(one() for _ in range(calls)))


def measure(run: Any, url: str, calls: int) -> dict[str, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    asyncio.run(run(url, calls))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "client_cpu_us_per_call": round(cpu / calls * 1e6, 1),
        "calls_per_s": round(calls / wall),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    emit(
        {
            "benchmark": "client",
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(),
            "versions": versions("httpx", "httptools"),
            "workload": {"calls": args.calls, "body_bytes": 150, "store": "memory://"},
            "command": " ".join(sys.argv),
        }
    )
    with (
        tempfile.TemporaryDirectory() as root,
        broker_process(Path(root), None, "--store", "memory://", "--no-event-log") as (_, url),
    ):
        measure(lean, url, 200)  # warm: connections, the broker's first requests
        one_by_one, before = measure(lean, url, args.calls), measure(baseline, url, args.calls)
        many = measure(batched, url, args.calls)
    ratio = before["client_cpu_us_per_call"] / max(one_by_one["client_cpu_us_per_call"], 1e-9)
    emit(
        {
            "case": "one_at_a_time",
            "lean": one_by_one,
            "httpx": before,
            "ratio_vs_httpx": round(ratio, 2),
        }
    )
    emit({"case": "64_in_flight_linger_2ms", "lean": many})


if __name__ == "__main__":
    main()
