"""How long a killed matcher process holds the elastic deployment up: from SIGKILL to the
loss noticed (its member node gone), to the recovery done, and the longest wait of a
publisher meanwhile. Publications flow at a steady rate through one access point to two
matchers, one of them a `tidings matcher` process, which is killed.

    python benchmarks/elastic_failover.py [--quick] [--runs N] [--rate R]

Two ways to notice, alternating: the deployment's process watching its peers' connections
(`unreachable_s`, 1 s: the default) and ZooKeeper's session expiry alone (`unreachable_s`
0; the session timeout is 10 s); the summary gives their ratio, measured in the same run.
JSON lines: a header (machine, versions, source revision, workload), one per kill, one summary.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time
from collections.abc import Sequence

from common import emit, machine, versions
from elastic_remote import matcher_popens

from tidings.elastic.coordination.zookeeper import local_zookeeper
from tidings.elastic.hosting.deployment import Deployment
from tidings.model import Publication, Subscription
from tidings.store.base import Fanout

VARIANTS = {"connections": 1.0, "session": 0.0}  # name -> unreachable_s


class Sink:
    async def deliver(self, fanouts: Sequence[Fanout], fresh: bool = True) -> None:
        pass


async def one_kill(zk: str, unreachable_s: float, rate: float) -> dict[str, float]:
    async with Deployment(zk, Sink, transport="tcp", unreachable_s=unreachable_s) as d:
        with matcher_popens(zk, d.cluster, 1) as [(proc, remote)]:
            while remote not in await d.coordinator.members():
                await asyncio.sleep(0.05)
            for n in range(200):
                d.subscribe(Subscription(f"s{n}", f"u{n % 20}", "topic", ("news/#",)))
            (report,) = await d.scale(matchers=2)
            if report.outcome != "done":
                raise RuntimeError(f"the scale to 2 matchers ended {report.outcome}")
            answered: list[float] = []
            noticed: list[float] = []
            stop = asyncio.Event()

            async def publish() -> None:
                n = 0
                while not stop.is_set():
                    n += 1
                    started = time.monotonic()
                    pub = Publication(f"p{n}", time.time(), {"n": n}, ("news/x",))
                    await d.publish([pub])
                    answered.append(time.monotonic())
                    await asyncio.sleep(max(0.0, 1 / rate - (time.monotonic() - started)))

            def members(now: set[str]) -> None:
                if remote not in now and not noticed:
                    noticed.append(time.monotonic())

            publisher = asyncio.create_task(publish())
            await asyncio.sleep(1.0)
            d.coordinator.watch_members(members)
            killed = time.monotonic()
            proc.kill()
            while not any(r.kind == "recover" and r.outcome == "done" for r in d.reports):
                await asyncio.sleep(0.01)
            recovered = time.monotonic()
            await asyncio.sleep(1.0)
            stop.set()
            await publisher
    gaps = [b - a for a, b in itertools.pairwise(answered) if b > killed - 1]
    return {
        "noticed_s": round(noticed[0] - killed, 3) if noticed else float("nan"),
        "recovered_s": round(recovered - killed, 3),
        "longest_wait_s": round(max(gaps), 3),
        "published": len(answered),
    }


async def run(runs: int, rate: float) -> None:
    with local_zookeeper() as zk:
        found: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
        for i in range(runs):
            for name, unreachable_s in VARIANTS.items():
                result = await one_kill(zk, unreachable_s, rate)
                found[name].append(result)
                emit({"run": i, "variant": name, "unreachable_s": unreachable_s, **result})
    medians = {
        name: {k: statistics.median(r[k] for r in results) for k in ("noticed_s", "recovered_s")}
        for name, results in found.items()
    }
    emit(
        {
            "summary": medians,
            "ratio_recovered_session_over_connections": round(
                medians["session"]["recovered_s"] / medians["connections"]["recovered_s"], 2
            ),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="one kill of each")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=float, default=200.0, help="publications per second")
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    emit(
        {
            "benchmark": "elastic_failover",
            "machine": machine(),
            "versions": versions("pyzmq", "kazoo"),
            "workload": {"runs": runs, "rate": args.rate, "matchers": 2, "killed": 1},
        }
    )
    asyncio.run(run(runs, args.rate))


if __name__ == "__main__":
    main()
