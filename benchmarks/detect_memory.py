"""The broker's memory under a burst of large `/api/Detect*` bodies (issue #28).

    python benchmarks/detect_memory.py [--clients 20] [--mib 7]

The broker runs as its own process (`tidings serve`, default settings but the one compared).
`--clients` threads each POST one body of about `--mib` MiB of text to /api/DetectLanguages
at once (loopback clients are not rate-limited by default); the broker's peak resident
memory is sampled from /proc every 20 ms. Two phases in the same run: without a bound on the
calls read and worked on at once (`functions.detect_concurrency` and
`detect_reads_per_client` = 1000), then with the defaults (4 worked on, 2 read from one
client: the clients here count as one address, as one remote host's do); `ratio_growth` =
bounded growth over unbounded growth. The texts are past
`functions.max_text_bytes`, so each call ends 413 in a worker: the cost measured is the
broker's reading, parsing and handing on of the body.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
from common import emit, machine, versions

from tidings.server import broker_process

UNBOUNDED = 1000


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def phase(concurrency: int, args: argparse.Namespace) -> dict[str, Any]:
    text = "hello world " * (args.mib * 1024 * 1024 // 12)
    body = orjson.dumps({"publication": {"data": text}, "params": {"language": "en"}})
    headers = {"Content-Type": "application/json"}
    env = {
        "TIDINGS_FUNCTIONS__DETECT_CONCURRENCY": str(concurrency),
        # the clients count as one address, as a remote host's connections do (loopback's
        # are otherwise each their own: this machine's tools and the broker's own calls)
        "TIDINGS_LIMITS__RATE_LIMIT_LOOPBACK": "true",
        "TIDINGS_FUNCTIONS__DETECT_READS_PER_CLIENT": str(concurrency),
    }
    if not concurrency:  # the defaults
        env = {"TIDINGS_LIMITS__RATE_LIMIT_LOOPBACK": "true"}
    with (
        tempfile.TemporaryDirectory() as root,
        broker_process(Path(root), None, "--no-event-log", env=env) as (proc, url),
    ):
        small = orjson.dumps({"publication": {"data": "hello"}, "params": {"language": "en"}})
        httpx.post(f"{url}/api/DetectLanguages", content=small, headers=headers, timeout=60)
        before, peak, done = rss_kib(proc.pid), [0], threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], rss_kib(proc.pid))
                time.sleep(0.02)

        codes: list[int] = []

        def one() -> None:
            post = httpx.post(f"{url}/api/DetectLanguages", content=body, headers=headers,
                              timeout=300)  # fmt: skip
            codes.append(post.status_code)

        sampler = threading.Thread(target=sample)
        sampler.start()
        clients = [threading.Thread(target=one) for _ in range(args.clients)]
        started = time.monotonic()
        for c in clients:
            c.start()
        for c in clients:
            c.join()
        done.set()
        sampler.join()
        return {
            "bounds": concurrency or "defaults",
            "rss_before_mib": before // 1024,
            "rss_peak_mib": peak[0] // 1024,
            "growth_mib": (peak[0] - before) // 1024,
            "answers": sorted(set(codes)),
            "seconds": round(time.monotonic() - started, 2),
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--mib", type=int, default=7)
    args = parser.parse_args()
    emit({"bench": "detect_memory", "header": True, "machine": machine(),
          "versions": versions("httpx", "orjson"), "command": " ".join(sys.argv),
          "workload": {"clients": args.clients, "mib": args.mib}})  # fmt: skip
    unbounded, bounded = phase(UNBOUNDED, args), phase(0, args)
    growth = bounded["growth_mib"] / max(1, unbounded["growth_mib"])
    emit({"bench": "detect_memory", "unbounded": unbounded, "bounded": bounded,
          "ratio_growth": round(growth, 2), "load_average": os.getloadavg()[0]})  # fmt: skip


if __name__ == "__main__":
    main()
