"""A tenant nacking in a tight loop, and what it costs a bystander's publications (issue #28).

    python benchmarks/nack_flood.py [--quick] [--seconds 20] [--flooders 8]

The broker runs as its own process (`tidings serve`, SQLite in a temporary directory, default
settings). The flooder, in a process of its own, is one subscriber that publishes to itself,
then pulls (wait 0) and nacks every message at once (delay 0) from `--flooders` connections
as fast as the broker answers, publishing more whenever its queue runs dry (its messages end
as dead letters after their attempts). The bystander, in this process, is another tenant: it
publishes one publication at a time to its own subscriber and times each answer. Two phases
in the same run: the bystander alone, then with the flood; `ratio_p99` = flood p99 over
alone p99. The flooder's nacks are counted (answers and `tidings_deliveries_nacked`).
The broker takes its settings from this environment: compare
`TIDINGS_QUEUES__MAX_CONCURRENT_OPS_PER_SUBSCRIBER=0` (no admission) with the default.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from common import emit, machine, percentile, versions

from tidings.server import broker_process

REFILL = 100  # publications per refill of the flooder's queue
PAUSE_S = 0.02  # between the bystander's publications


def register(http: httpx.Client, topic: str) -> dict[str, str]:
    sub = http.post("/v1/subscribers").json()
    auth = {"Authorization": f"Bearer {sub['token']}"}
    http.post(f"/v1/subscribers/{sub['id']}/subscriptions", json={"topics": [topic]}, headers=auth)
    return {"id": sub["id"], "token": sub["token"]}


async def flood_worker(http: httpx.AsyncClient, sub: dict[str, str], stop_at: float) -> int:
    base, auth = f"/v1/subscribers/{sub['id']}", {"Authorization": f"Bearer {sub['token']}"}
    nacked = 0
    while time.monotonic() < stop_at:
        got = await http.get(f"{base}/messages", params={"max": 100, "wait": 0}, headers=auth)
        receipts = [m["receipt"] for m in got.json()["messages"]]
        if not receipts:
            batch = [{"topics": ["flood/x"], "data": i} for i in range(REFILL)]
            await http.post("/v1/publications/batch", json={"publications": batch})
            continue
        said = await http.post(f"{base}/messages/nack", json={"receipts": receipts}, headers=auth)
        nacked += len(said.json()["acked"])
    return nacked


async def read_worker(http: httpx.AsyncClient, sub: dict[str, str], stop_at: float) -> int:
    """The control: as many requests at once, writing nothing (the subscriber's depth)."""
    base, auth = f"/v1/subscribers/{sub['id']}", {"Authorization": f"Bearer {sub['token']}"}
    while time.monotonic() < stop_at:
        await http.get(base, headers=auth)
    return 0


async def flood(url: str, sub: dict[str, str], workers: int, seconds: float, mode: str) -> int:
    limits = httpx.Limits(max_connections=workers)
    worker = flood_worker if mode == "nack" else read_worker
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:
        stop_at = time.monotonic() + seconds
        done = await asyncio.gather(*(worker(http, sub, stop_at) for _ in range(workers)))
    return sum(done)


def flooder(
    url: str, sub: dict[str, str], workers: int, seconds: float, mode: str, out: Any
) -> None:
    out.put(asyncio.run(flood(url, sub, workers, seconds, mode)))


def bystander(http: httpx.Client, seconds: float) -> list[float]:
    latencies: list[float] = []
    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at:
        started = time.perf_counter()
        answer = http.post("/v1/publications", json={"topics": ["calm/x"], "data": 1})
        latencies.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 201, answer.text
        time.sleep(PAUSE_S)
    return latencies


def summary(latencies: list[float]) -> dict[str, float]:
    return {
        "publications": len(latencies),
        "p50_ms": round(percentile(latencies, 50), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
        "max_ms": round(max(latencies), 1),
    }


def nacked_total(http: httpx.Client) -> float:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("tidings_deliveries_nacked_total"):
            return float(line.split()[-1])
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--flooders", type=int, default=8)
    parser.add_argument(
        "--mode", choices=["nack", "read"], default="nack",
        help="read: the control, the same connections reading their depth, writing nothing",
    )  # fmt: skip
    args = parser.parse_args()
    seconds = 5.0 if args.quick else args.seconds
    emit(
        {
            "benchmark": "nack_flood",
            "machine": machine(),
            "versions": versions("httpx", "uvicorn"),
            "workload": {
                "seconds": seconds,
                "flooders": args.flooders,
                "mode": args.mode,
                "max_concurrent_ops_per_subscriber": os.environ.get(
                    "TIDINGS_QUEUES__MAX_CONCURRENT_OPS_PER_SUBSCRIBER", "default"
                ),
            },
            "command": " ".join(sys.argv),
        }
    )
    with (
        tempfile.TemporaryDirectory() as root,
        broker_process(Path(root), None, "--no-event-log") as (_, url),
        httpx.Client(base_url=url, timeout=60) as http,
    ):
        calm, flooding = register(http, "calm/x"), register(http, "flood/x")
        bystander(http, 1.0)  # warm
        alone = summary(bystander(http, seconds))
        emit({"case": "bystander_alone", **alone})
        out: Any = mp.get_context("spawn").Queue()
        proc = mp.get_context("spawn").Process(
            target=flooder, args=(url, flooding, args.flooders, seconds + 1.0, args.mode, out)
        )
        proc.start()
        time.sleep(1.0)  # the flood under way
        flooded = summary(bystander(http, seconds))
        nacks = out.get(timeout=120)
        proc.join()
        auth = {"Authorization": f"Bearer {calm['token']}"}
        depth = http.get(f"/v1/subscribers/{calm['id']}", headers=auth).json()["depth"]
        emit(
            {
                "case": f"bystander_with_{args.mode}_flood",
                **flooded,
                "ratio_p50": round(flooded["p50_ms"] / alone["p50_ms"], 2),
                "ratio_p99": round(flooded["p99_ms"] / alone["p99_ms"], 2),
                "flooder_nacks": nacks,
                "nacks_per_s": round(nacks / (seconds + 1.0)),
                "broker_nacked_total": nacked_total(http),
                "bystander_queued": depth["ready"],
            }
        )


if __name__ == "__main__":
    main()
