"""What one subscription change costs another broker on a shared PostgreSQL: applying it
from the store's change log against reading every subscription anew (what a broker did
before the log), at N topic subscriptions.

    python benchmarks/subscription_changes.py [--subscriptions 100000] [--changes 20]

Brokers A and B share a fresh schema holding N topic subscriptions (loaded in bulk). For each
of `--changes` rounds, A makes one subscription and B applies it (`Broker.refresh`, timed);
then B reads everything anew (`_reload`, timed) as the baseline measured in the same run.
Prints JSON lines: a header (machine, versions, load), then one line with both medians and
their ratio. The brokers run in this process; the load average is stated, as on every
benchmark of this shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import orjson
import psycopg
from common import emit, machine, versions

from tidings.broker import Broker
from tidings.config import SubscriptionSettings, load_settings
from tidings.model import Subscriber, Subscription
from tidings.store import open_store

PG = "postgresql://postgres@127.0.0.1:5432/test"


def bulk_load(schema: str, count: int) -> None:
    """N topic subscriptions of one subscriber, written in one transaction (the fixture)."""
    store = open_store(f"{PG}?schema={schema}")
    store.add_subscriber(Subscriber("bulk", "hash", time.time()))
    store.close()
    rows = [
        (f"s{n:08d}", "bulk", orjson.dumps(Subscription(f"s{n:08d}", "bulk", "topic",
                                                         (f"t/{n % 1000}/#",)).to_json()).decode())
        for n in range(count)
    ]  # fmt: skip
    with psycopg.connect(PG, autocommit=False) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO subscriptions VALUES (%s, %s, %s)", rows)
            cur.execute("UPDATE meta SET value = value + 1 WHERE name = 'subscriptions'")
            cur.execute("UPDATE meta SET value = (SELECT value FROM meta WHERE name = "
                        "'subscriptions') WHERE name = 'changes_from'")  # fmt: skip
        conn.commit()


async def broker(tmp: Path, url: str) -> Broker:
    base = load_settings({"data_dir": tmp, "store_url": url, "event_log": False}, env={})
    quiet = dataclasses.replace(base, subscriptions=SubscriptionSettings(staleness_s=3600))
    b = Broker(quiet, open_store(url))
    await b.start()
    return b


async def measure(count: int, rounds: int) -> dict[str, float]:
    schema = f"b_{uuid.uuid4().hex[:10]}"
    url = f"{PG}?schema={schema}"
    open_store(url).close()  # the schema's tables
    bulk_load(schema, count)
    with tempfile.TemporaryDirectory() as tmp:
        a, b = await broker(Path(tmp) / "a", url), await broker(Path(tmp) / "b", url)
        try:
            subscriber, _ = await a.register()
            incremental, full = [], []
            for n in range(rounds):
                await a.subscribe(subscriber.id, "topic", topics=(f"new/{n}",))
                started = time.perf_counter()
                await b.refresh(shared=True)
                incremental.append(time.perf_counter() - started)
            for _ in range(max(1, rounds // 5)):
                started = time.perf_counter()
                await b.following.reload()
                full.append(time.perf_counter() - started)
        finally:
            for x in (a, b):
                await x.close()
                x.store.sync.close()
            with psycopg.connect(PG, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return {"incremental_ms": statistics.median(incremental) * 1000,
            "full_reload_ms": statistics.median(full) * 1000}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=20)
    args = parser.parse_args()
    emit({"benchmark": "subscription_changes", "machine": machine(),
          "versions": versions("psycopg"), "load_average": os.getloadavg(),
          "workload": {"subscriptions": args.subscriptions, "changes": args.changes}})  # fmt: skip
    result = asyncio.run(measure(args.subscriptions, args.changes))
    ratio = result["full_reload_ms"] / result["incremental_ms"]
    emit({"case": "one change, applied by another broker", **result,
          "full_over_incremental": ratio, "load_average": os.getloadavg()})  # fmt: skip


if __name__ == "__main__":
    main()
