"""One publication fanned out to thousands of URL subscriptions: how long the event loop
stalls (issue #28: 32,000 subscribers' evaluations started in one go of the loop held it
about a second, and every other request with it).

    python benchmarks/fanout_stall.py [--subscriptions 32000] [--rounds 3]

The runner (`sandbox/runner.py`) evaluates one publication for N subscribers, one URL
subscription each, against the fast endpoint of `benchmarks/urlcalls.py` in its own process;
a ticker task on the same loop measures its worst gap (`worst_stall_ms`, past its 5 ms
sleep) and the whole evaluation's time. Two ways, alternating, in the same run: the
evaluations started in chunks of `START_CHUNK` (as shipped) and all in one go (as before:
the chunk set past N). `stall_ratio` = chunked / all at once (medians of the rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

from common import emit, machine, versions
from urlcalls import ENDPOINT

from tidings.config import FunctionSettings
from tidings.model import FunctionSpec, Publication, Subscription
from tidings.sandbox import runner as runner_module
from tidings.sandbox.runner import create_runner

TICK_S = 0.005


async def one_round(url: str, subscriptions: int) -> dict[str, float]:
    runner = create_runner(FunctionSettings(url_allow_networks="127.0.0.0/8", code_functions=False))
    spec = FunctionSpec("t", "url", url)
    subs = [Subscription(f"s{i}", f"o{i}", "function", function=spec) for i in range(subscriptions)]
    publication = Publication("p1", time.time(), data="hello", function_types=("t",))
    worst, running = 0.0, True

    async def tick() -> None:
        nonlocal worst
        last = time.perf_counter()
        while running:
            await asyncio.sleep(TICK_S)
            now = time.perf_counter()
            worst, last = max(worst, now - last - TICK_S), now

    ticker = asyncio.ensure_future(tick())
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    try:
        outcomes = await runner.evaluate(publication, subs)
        took = time.perf_counter() - started
    finally:
        running = False
        await ticker
        await runner.aclose()
    return {
        "worst_stall_ms": round(worst * 1000, 1),
        "seconds": round(took, 2),
        "matched": sum(o.matched for o in outcomes),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscriptions", type=int, default=32_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    emit({"bench": "fanout_stall", "header": True, "machine": machine(), "versions": versions(),
          "command": " ".join(sys.argv), "workload": vars(args)})  # fmt: skip
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = subprocess.Popen(
        [sys.executable, "-c", ENDPOINT, str(port)], stdout=subprocess.PIPE, text=True
    )
    shipped = runner_module.START_CHUNK
    rounds: dict[str, list[dict[str, float]]] = {"chunked": [], "at_once": []}
    try:
        assert endpoint.stdout is not None and endpoint.stdout.readline().strip() == "ready"
        for _ in range(args.rounds):
            for way, chunk in (("chunked", shipped), ("at_once", args.subscriptions + 1)):
                runner_module.START_CHUNK = chunk
                result = asyncio.run(one_round(f"http://127.0.0.1:{port}/m", args.subscriptions))
                rounds[way].append(result)
                emit({"bench": "fanout_stall", "way": way, **result})
    finally:
        runner_module.START_CHUNK = shipped
        endpoint.kill()
        endpoint.wait()
    keys = ("worst_stall_ms", "seconds")
    med: dict[str, Any] = {
        way: {k: round(statistics.median(r[k] for r in results), 2) for k in keys}
        for way, results in rounds.items()
    }
    chunked, at_once = med["chunked"], med["at_once"]
    emit({"bench": "fanout_stall", "medians": med,
          "stall_ratio": round(chunked["worst_stall_ms"] / at_once["worst_stall_ms"], 3),
          "seconds_ratio": round(chunked["seconds"] / at_once["seconds"], 3)})  # fmt: skip


if __name__ == "__main__":
    main()
