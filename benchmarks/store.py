"""Store throughput: enqueue and lease+ack, per call and group-committed, on each backend.

    python benchmarks/store.py [--backends memory,sqlite,postgres] [--messages N] [--quick]
    python benchmarks/store.py --bakeoff [--backlog N] [--quick]   (issue #30: bakeoff.py)

Workload: one subscriber; N messages of a 150-byte JSON body (`{"data": "x" * 120, ...}`)
enqueued in batches of 100 (the broker's `fresh` bulk path and the checked path), then leased
in batches of `--lease-max` and acknowledged. Two ways of calling the store:
- `per_call`: one thread, one transaction per call (the same-run baseline);
- `group`: `--threads` concurrent callers (asyncio tasks) submit through the broker's
  `Committer`, which runs whatever is waiting as one `Store.apply` (one transaction); each
  caller returns once it is committed.
Prints JSON lines: a header (machine, versions, command), then one line per (backend, op,
mode) with `messages_per_s`, `transactions`, and for `group` lines `ratio_vs_per_call`.
SQLite runs on a file in a temporary directory with `synchronous=NORMAL` (and `full` for the
enqueue baseline), PostgreSQL in a fresh schema dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import bakeoff
from common import emit, machine, versions

from tidings.delivery.committer import Committer
from tidings.model import Subscriber
from tidings.store import open_store
from tidings.store.base import Ack, Enqueue, Lease, NewMessage, Store, encode_body

PG = "postgresql://postgres@127.0.0.1:5432/test"
BODY = encode_body({"data": "x" * 120, "topic": "bench/a"})
T0 = 1_000_000.0


@contextmanager
def opened(backend: str, sync: str = "normal") -> Iterator[Store]:
    tmp = tempfile.mkdtemp(prefix="tidings-bench-")
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    urls = {
        "memory": "memory://",
        "sqlite": f"sqlite:///{tmp}/bench.db?synchronous={sync}",  # its queues a log
        "sqlite-rows": f"sqlite:///{tmp}/bench.db?synchronous={sync}&layout=rows",
        "postgres": f"{PG}?schema={schema}",
    }
    store = open_store(urls[backend])
    store.add_subscriber(Subscriber("s1", "h", T0))
    try:
        yield store
    finally:
        store.close()
        shutil.rmtree(tmp, ignore_errors=True)
        if backend == "postgres":
            import psycopg

            with psycopg.connect(PG, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def batches(n: int, tag: str) -> list[list[NewMessage]]:
    keys = [f"{tag}-{i}" for i in range(n)]
    return [
        [NewMessage("s1", k, k, ("sub1",), BODY, T0) for k in keys[i : i + 100]]
        for i in range(0, n, 100)
    ]


def concurrently(callers: int, work: Callable[[int], Any]) -> float:
    """Seconds for `callers` asyncio tasks running `work(k)` at once."""

    async def run() -> None:
        await asyncio.gather(*(work(k) for k in range(callers)))

    start = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - start


def enqueue_per_call(store: Store, n: int, fresh: bool, threads: int) -> float:
    work = batches(n, "pc")
    start = time.perf_counter()
    for batch in work:
        store.enqueue(batch, fresh=fresh)
    return time.perf_counter() - start


def enqueue_group(store: Store, n: int, fresh: bool, threads: int) -> float:
    work = batches(n, "gc")
    committer = Committer(store.apply)

    async def caller(k: int) -> None:
        for b in work[k::threads]:
            await committer.submit(Enqueue(b, fresh=fresh))

    return concurrently(threads, caller)


def drain(lease: Callable[..., Any], ack: Callable[..., Any], size: int) -> int:
    done = 0
    while batch := lease("s1", size, 30.0, 5, T0):
        ack("s1", [m.receipt for m in batch])
        done += len(batch)
    return done


def lease_ack_per_call(store: Store, n: int, size: int, threads: int) -> float:
    start = time.perf_counter()
    assert drain(store.lease, store.ack, size) == n
    return time.perf_counter() - start


def lease_ack_group(store: Store, n: int, size: int, threads: int) -> float:
    committer = Committer(store.apply)
    counts: list[int] = []

    async def caller(k: int) -> None:
        done = 0
        while batch := await committer.submit(Lease("s1", size, 30.0, 5, T0)):
            await committer.submit(Ack("s1", [m.receipt for m in batch]))
            done += len(batch)
        counts.append(done)

    elapsed = concurrently(threads, caller)
    assert sum(counts) == n
    return elapsed


def run_enqueue(backend: str, args: argparse.Namespace, header: dict[str, Any]) -> None:
    cases = [("per_call", enqueue_per_call, "normal"), ("group", enqueue_group, "normal")]
    if backend == "sqlite":
        cases.insert(1, ("per_call", enqueue_per_call, "full"))
    for fresh in (True, False):
        base = 0.0
        for mode, fn, sync in cases:
            with opened(backend, sync) as store:
                elapsed = fn(store, args.messages, fresh, args.threads)
            rate = args.messages / elapsed
            record = {
                **header,
                "backend": backend,
                "op": "enqueue",
                "mode": mode,
                "fresh": fresh,
                "batch": 100,
                "messages_per_s": round(rate),
                "transactions_per_call_mode": args.messages // 100,
            }
            if backend == "sqlite":
                record["synchronous"] = sync
            if mode == "per_call" and sync == "normal":
                base = rate
            if mode == "group":
                record["ratio_vs_per_call"] = round(rate / base, 2)
            emit(record)


def run_lease_ack(backend: str, args: argparse.Namespace, header: dict[str, Any]) -> None:
    for size in args.lease_max:
        base = 0.0
        for mode, fn in (("per_call", lease_ack_per_call), ("group", lease_ack_group)):
            with opened(backend) as store:
                for batch in batches(args.messages, "la"):
                    store.enqueue(batch, fresh=True)
                elapsed = fn(store, args.messages, size, args.threads)
            rate = args.messages / elapsed
            record = {
                **header,
                "backend": backend,
                "op": "lease+ack",
                "mode": mode,
                "lease_max": size,
                "messages_per_s": round(rate),
            }
            if mode == "per_call":
                base = rate
            else:
                record["ratio_vs_per_call"] = round(rate / base, 2)
            emit(record)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--lease-max", type=int, nargs="+", default=[100, 10])
    parser.add_argument("--quick", action="store_true", help="10,000 messages")
    bakeoff.add_arguments(parser)
    args = parser.parse_args()
    if args.quick:
        args.messages = 10_000
        if args.backlog == 100_000:
            args.backlog, args.fanout_publications = 20_000, 200
    emit(
        {
            "bench": "store",
            "header": True,
            "machine": machine(),
            "versions": versions("psycopg", "orjson", "lmdb"),
            "sqlite": __import__("sqlite3").sqlite_version,
            "command": " ".join(["python", *sys.argv]),
            "messages": args.messages,
            "threads": args.threads,
            "load_average": os.getloadavg(),
            "body_bytes": len(str(BODY)),
        }
    )
    header = {"bench": "store", "messages": args.messages, "threads": args.threads}
    if args.bakeoff:
        bakeoff.run(args, {"bench": "store-bakeoff", "messages": args.messages,
                           "backlog": args.backlog})  # fmt: skip
        return
    for backend in args.backends.split(","):
        run_enqueue(backend, args, header)
        run_lease_ack(backend, args, header)


if __name__ == "__main__":
    main()
