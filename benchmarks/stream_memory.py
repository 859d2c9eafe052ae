"""The broker's memory for WebSocket streams whose clients stop reading (issue #28).

    python benchmarks/stream_memory.py [--streams 20] [--messages 150] [--size 50000]

`--streams` subscribers each open the push stream (default prefetch, 100) and never read;
`--messages` publications of `--size` bytes go to all of them; the broker's resident memory
(from /proc) before and after. Two phases in the same run: the default bound on a stream's
unacknowledged bytes (`queues.stream_inflight_bytes`, 1 MiB), then practically none;
`ratio_per_stream` = bounded over unbounded growth per stream.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import websockets
from common import emit, machine, versions

from tidings.server import broker_process

UNBOUNDED = str(1 << 40)


def rss_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return 0


async def phase(bound: str | None, args: argparse.Namespace) -> dict[str, Any]:
    env = {"TIDINGS_QUEUES__STREAM_INFLIGHT_BYTES": bound} if bound else {}
    with (
        tempfile.TemporaryDirectory() as root,
        broker_process(Path(root), None, "--no-event-log", env=env) as (proc, url),
    ):
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            streams = []
            for _ in range(args.streams):
                me = (await http.post("/v1/subscribers")).json()
                auth = {"Authorization": f"Bearer {me['token']}"}
                path = f"/v1/subscribers/{me['id']}"
                await http.post(f"{path}/subscriptions", json={"topics": ["all"]}, headers=auth)
                ws_url = url.replace("http", "ws", 1) + f"{path}/stream"
                ws = await websockets.connect(ws_url, additional_headers=auth, max_queue=1)
                ws.transport.pause_reading()  # the client stops reading
                streams.append(ws)
            before = rss_mib(proc.pid)
            body = {"data": "x" * args.size, "topics": ["all"]}
            for _ in range(args.messages):
                await http.post("/v1/publications", json=body)
            await asyncio.sleep(3)
            after = rss_mib(proc.pid)
            for ws in streams:
                ws.transport.abort()
    growth = (after - before) / args.streams
    return {"bound": bound or "default", "rss_before_mib": before, "rss_after_mib": after,
            "per_stream_mib": round(growth, 2)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--messages", type=int, default=150)
    parser.add_argument("--size", type=int, default=50_000)
    args = parser.parse_args()
    emit({"bench": "stream_memory", "header": True, "machine": machine(),
          "versions": versions("websockets"), "command": " ".join(sys.argv),
          "workload": vars(args)})  # fmt: skip
    bounded = asyncio.run(phase(None, args))
    unbounded = asyncio.run(phase(UNBOUNDED, args))
    ratio = bounded["per_stream_mib"] / max(0.01, unbounded["per_stream_mib"])
    emit({"bench": "stream_memory", "bounded": bounded, "unbounded": unbounded,
          "ratio_per_stream": round(ratio, 2)})  # fmt: skip


if __name__ == "__main__":
    main()
