"""The engines' bake-off of issue #30 (`python benchmarks/store.py --bakeoff`), in one run:
the rows layout on SQLite and on PostgreSQL (the `Store`) beside the queue log
(`tidings.store.log`) on SQLite, LMDB, segment files of its own and PostgreSQL, and the
broker's embedded store as it is (`store/sqlite`: the log in the store's SQLite database,
through the `Store`, every operation as the broker makes it), and the same on PostgreSQL
(`store/postgres`: `?layout=log`, one broker owning the queues).

Cases, each target fresh, every step its own transaction (the log's `commit` after each):
- `fanout`: publications one at a time, each to 100 subscribers; deliveries/s;
- `one_to_one`: 100 messages enqueued, leased, acknowledged, again and again; messages/s;
- `backlog`: N messages enqueued (1,000 a transaction), then `restart`: the target closed and
  opened again, until its first lease is answered (recovery), then `drain`: leased 100 at a
  time and acknowledged, messages/s;
- `disk`: the engine's bytes (files after a WAL checkpoint; PostgreSQL's tables with their
  indexes after VACUUM) per delivery, with the backlog queued and after the fan-out.
With `--runs R`, each (case, target) runs R times, interleaved (run 1 of every target, then
run 2...), and a line gives the medians (`runs` lists every run's figures). Every line
carries `ratio_vs_rows_sqlite`, the same case's figure over today's SQLite rows in
this run (for seconds and bytes, lower is better: the ratio is theirs over ours).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import psycopg
from common import emit

from tidings.model import Subscriber
from tidings.store import open_store
from tidings.store.base import Enqueue, Fanout, NewMessage, Store, encode_body
from tidings.store.log import QueueLog
from tidings.store.log.files import FilesLog
from tidings.store.log.postgres import PostgresLog
from tidings.store.log.sqlite import SQLiteLog

PG = "postgresql://postgres@127.0.0.1:5432/test"
BODY = encode_body({"data": "x" * 120, "topic": "bench/a"})
T0 = 1_000_000.0
FANOUT = [f"s{i}" for i in range(100)]


class Target(Protocol):
    def publish(self, subscribers: Sequence[str]) -> None: ...
    def enqueue(self, n: int) -> None: ...  # n messages to s0, one transaction
    def lease_ack(self, n: int) -> int: ...  # from s0; answers how many
    def first_lease(self) -> None: ...  # lease one and hand it back
    def disk_bytes(self) -> int: ...
    def reopen(self) -> None: ...
    def close(self) -> None: ...


class Rows:
    """A `Store`: the rows layout (a row per delivery), or the broker's store as it is."""

    def __init__(self, url: str, schema: str | None = None) -> None:
        self.url, self.schema, self.n = url, schema, 0
        self.store: Store = open_store(url)
        for name in FANOUT:
            self.store.add_subscriber(Subscriber(name, "h", T0))

    def publish(self, subscribers: Sequence[str]) -> None:
        self.n += 1
        key = f"p{self.n}"
        fanout = Fanout(key, key, BODY, T0, {s: ("sub",) for s in subscribers})
        self.store.apply([Enqueue((), fanouts=[fanout])])

    def enqueue(self, n: int) -> None:
        keys = [f"m{self.n + i}" for i in range(n)]
        self.n += n
        self.store.enqueue([NewMessage("s0", k, k, ("sub",), BODY, T0) for k in keys], True)

    def lease_ack(self, n: int) -> int:
        batch = self.store.lease("s0", n, 30.0, 5, T0)
        if batch:
            self.store.ack("s0", [m.receipt for m in batch])
        return len(batch)

    def first_lease(self) -> None:
        batch = self.store.lease("s0", 1, 30.0, 5, T0)
        self.store.nack("s0", [m.receipt for m in batch], T0, 0.0)

    def disk_bytes(self) -> int:
        if self.schema is None:
            path = self.url.removeprefix("sqlite:///").split("?", 1)[0]
            with sqlite3.connect(path) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return file_bytes(path)
        return schema_bytes(self.schema)

    def reopen(self) -> None:
        self.store.close()
        self.store = open_store(self.url)

    def close(self) -> None:
        self.store.close()


class Log:
    """The queue log over one engine."""

    def __init__(self, open_engine: Callable[[], Any]) -> None:
        self.open_engine = open_engine
        self.log = QueueLog(open_engine())

    def publish(self, subscribers: Sequence[str]) -> None:
        self.log.publish([(BODY, subscribers)])
        self.log.commit()

    def enqueue(self, n: int) -> None:
        self.log.publish([(BODY, ("s0",))] * n)
        self.log.commit()

    def lease_ack(self, n: int) -> int:
        batch = self.log.lease("s0", n, 30.0, T0)
        self.log.commit()
        if batch:
            self.log.ack("s0", [m.receipt for m in batch])
            self.log.commit()
        return len(batch)

    def first_lease(self) -> None:
        batch = self.log.lease("s0", 1, 30.0, T0)
        self.log.commit()
        self.log.nack("s0", [m.receipt for m in batch], T0, 0.0)

    def disk_bytes(self) -> int:
        return int(self.log.engine.disk_bytes())

    def reopen(self) -> None:
        self.log.close()
        self.log = QueueLog(self.open_engine())

    def close(self) -> None:
        self.log.close()


def file_bytes(path: str) -> int:
    import os

    return sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))


def schema_bytes(schema: str) -> int:
    with psycopg.connect(PG, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
        for (table,) in tables:
            conn.execute(f'VACUUM "{schema}"."{table}"')
        row = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
    return int(row[0]) if row and row[0] else 0


def lmdb_log(path: str) -> Any:
    from tidings.store.log.lmdb import LMDBLog  # the optional extra `log`: only when measured

    return LMDBLog(path)


def opener(name: str, tmp: str, schema: str) -> Callable[[], Target]:
    openers: dict[str, Callable[[], Target]] = {
        "rows/sqlite": lambda: Rows(f"sqlite:///{tmp}/rows.db?layout=rows"),
        # the broker's embedded store as it is now: its queues a log, through the `Store`
        "store/sqlite": lambda: Rows(f"sqlite:///{tmp}/store.db"),
        "log/sqlite": lambda: Log(lambda: SQLiteLog(f"{tmp}/log.db")),
        "log/lmdb": lambda: Log(lambda: lmdb_log(f"{tmp}/log.lmdb")),
        "log/files": lambda: Log(lambda: FilesLog(f"{tmp}/segments")),
        "rows/postgres": lambda: Rows(f"{PG}?schema={schema}", schema),
        # the broker's store on PostgreSQL with its queues a log (one broker owns them)
        "store/postgres": lambda: Rows(f"{PG}?schema={schema}&layout=log", schema),
        "log/postgres": lambda: Log(lambda: PostgresLog(PG, schema)),
    }
    return openers[name]


def with_target(name: str, work: Callable[[Target], dict[str, Any]]) -> dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix="tidings-bakeoff-")
    schema = f"bake_{uuid.uuid4().hex[:10]}"
    target = opener(name, tmp, schema)()
    try:
        return work(target)
    finally:
        target.close()
        shutil.rmtree(tmp, ignore_errors=True)
        if name.endswith("postgres"):
            with psycopg.connect(PG, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def fanout(target: Target, publications: int) -> dict[str, Any]:
    start = time.perf_counter()
    for _ in range(publications):
        target.publish(FANOUT)
    elapsed = time.perf_counter() - start
    deliveries = publications * len(FANOUT)
    return {
        "deliveries_per_s": round(deliveries / elapsed),
        "disk_bytes_per_delivery": round(target.disk_bytes() / deliveries, 1),
    }


def one_to_one(target: Target, messages: int) -> dict[str, Any]:
    start = time.perf_counter()
    for _ in range(messages // 100):
        target.enqueue(100)
        assert target.lease_ack(100) == 100
    return {"messages_per_s": round(messages / (time.perf_counter() - start))}


def backlog(target: Target, messages: int) -> dict[str, Any]:
    start = time.perf_counter()
    for i in range(0, messages, 1000):
        target.enqueue(min(1000, messages - i))
    enqueued = time.perf_counter() - start
    disk = target.disk_bytes()
    start = time.perf_counter()
    target.reopen()
    target.first_lease()
    restart = time.perf_counter() - start
    start = time.perf_counter()
    drained = 0
    while n := target.lease_ack(100):
        drained += n
    assert drained == messages, (drained, messages)
    return {
        "enqueue_messages_per_s": round(messages / enqueued),
        "disk_bytes_per_delivery": round(disk / messages, 1),
        "restart_s": round(restart, 4),
        "drain_messages_per_s": round(messages / (time.perf_counter() - start)),
    }


HIGHER_IS_BETTER = {"deliveries_per_s", "messages_per_s", "enqueue_messages_per_s",
                    "drain_messages_per_s"}  # fmt: skip


def run(args: argparse.Namespace, header: dict[str, Any]) -> None:
    cases: dict[str, Callable[[Target], dict[str, Any]]] = {
        "fanout": lambda t: fanout(t, args.fanout_publications),
        "one_to_one": lambda t: one_to_one(t, args.messages),
        "backlog": lambda t: backlog(t, args.backlog),
    }
    targets = args.targets.split(",")
    for case, work in cases.items():
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in targets}
        for _ in range(args.runs):
            for name in targets:
                runs[name].append(with_target(name, work))
        base: dict[str, Any] = {}
        for name in targets:
            figures = {
                k: round(statistics.median(r[k] for r in runs[name]), 4) for k in runs[name][0]
            }
            base = base or figures
            ratios = {
                k: round(v / base[k] if k in HIGHER_IS_BETTER else base[k] / v, 2)
                for k, v in figures.items()
                if v and base.get(k)
            }
            emit({**header, "case": case, "target": name, **figures,
                  "ratio_vs_rows_sqlite": ratios, "runs": runs[name]})  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bakeoff", action="store_true", help="the engines' bake-off")
    parser.add_argument(
        "--targets",
        default="rows/sqlite,log/sqlite,log/lmdb,log/files,rows/postgres,log/postgres",
    )
    parser.add_argument("--backlog", type=int, default=100_000, help="queued, then drained")
    parser.add_argument("--fanout-publications", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=1, help="medians of this many runs")
