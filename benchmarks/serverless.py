"""Cold and warm invocations of the Lambda handler, per operation, at N topic subscriptions:
the thesis's start-up experiment (section 6.3.1, figures 6.2 and 6.3) on this machine.

    PYTHONPATH=src:. python benchmarks/serverless.py [--quick | --sizes 100 10000 1000000]
        [--cold-runs 5] [--warm-runs 200] [--warm-up 20] [--paths deployed numba] [--save]

A function instance is a process (`python -m tidings.serverless.invoke aws`) reading API
Gateway (HTTP API v2) events on stdin, over a PostgreSQL schema of its own per population:
N topic subscriptions of one subscriber, each on a topic of its own (`t/<n>/#`), written in
bulk; then one subscriber made through a warm instance, subscribed to `t/hit/#`.

Operations: publish (1 KB to `t/hit/now`: it matches that one subscription), register,
subscribe (topics; the subscriber the round's register made), pull (wait=0, max=1, of the
subscriber made beforehand: each round's publish left it one message).

Cold: per operation `--cold-runs` fresh processes (rounds of publish, register, subscribe,
pull): the wall time from spawn to the answer line and the instance's own phases: importing
the handler module, connecting to the store, loading the subscription index, the invocation
(`duration_s`, which holds the connect and the load: `op` is what remains; `to_handler` is
the wall time before it: the interpreter and the imports), and the peak resident memory
(`rss_mb`, beside the 512 MB priced). Warm: one process, `--warm-up` rounds discarded, then
`--warm-runs` rounds: p50 and p99 of `duration_s`.

Two paths, labelled: `deployed` (numba hidden, as on Lambda: the core install) and `numba`
(this venv's `fast` extra, whose import the instance pays). Registrations a minute are
unbounded in the instances (one warm instance registers faster than the default 60).

Prints JSON lines: a header (machine, versions, load average, workload), one line per
(N, operation, path), and a summary: the issue's targets as pass/fail (cold publish at 10^4
under 500 ms, warm publish p50 under 5 ms), GB-seconds at 512 MB and the monthly bill per
provider of 10^6 publications at the measured mean warm duration (tidings.cost.serverless).
`--save` appends them to benchmarks/results/serverless-<date>.jsonl. The processes are local,
over a local PostgreSQL: no platform's scheduling, network or sandbox is in these figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
import psycopg
from common import emit, machine, percentile, versions

from tidings.cost.prices import load_serverless
from tidings.cost.serverless import Usage, bill
from tidings.model import Subscriber, Subscription
from tidings.serverless.events import Request, aws_event
from tidings.store import open_store

PG = "postgresql://postgres@127.0.0.1:5432/test"
HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
OPS = ("publish", "register", "subscribe", "pull")
HIT, PUBLISHED = "t/hit/#", "t/hit/now"
PAYLOAD = "x" * 1000  # the thesis's 1 KB message
MEMORY_MB = 512
TARGET_COLD_MS, TARGET_WARM_MS = 500.0, 5.0
HIDE_NUMBA = "sys.modules['numba'] = None; "
PATHS = {"deployed": HIDE_NUMBA, "numba": ""}


@dataclass(frozen=True)
class Who:
    """A subscriber as its client knows it."""

    id: str
    token: str


# --- the population --------------------------------------------------------------------


def populate(schema: str, count: int) -> None:
    """The schema's tables, then N topic subscriptions of one subscriber (each on a topic of
    its own) written in one transaction, as benchmarks/subscription_changes.py's bulk_load."""
    store = open_store(f"{PG}?schema={schema}")
    store.add_subscriber(Subscriber("bulk", "hash", time.time()))
    store.close()
    with psycopg.connect(PG, autocommit=False) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        with conn.cursor() as cur:
            with cur.copy("COPY subscriptions (id, subscriber_id, body) FROM STDIN") as copy:
                for n in range(count):
                    copy.write_row((f"s{n:08d}", "bulk", _topic_subscription(n)))
            cur.execute("UPDATE meta SET value = value + 1 WHERE name = 'subscriptions'")
            cur.execute("UPDATE meta SET value = (SELECT value FROM meta WHERE name = "
                        "'subscriptions') WHERE name = 'changes_from'")  # fmt: skip
        conn.commit()


def _topic_subscription(n: int) -> str:
    sub = Subscription(f"s{n:08d}", "bulk", "topic", (f"t/{n}/#",))
    return orjson.dumps(sub.to_json()).decode()


def drop(schema: str) -> None:
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# --- events ----------------------------------------------------------------------------


def event(method: str, path: str, body: Any = None, who: Who | None = None,
          query: str = "") -> dict[str, Any]:  # fmt: skip
    headers = {"host": "tidings.execute-api.localhost"}
    if body is not None:
        headers["content-type"] = "application/json"
    if who is not None:
        headers["authorization"] = f"Bearer {who.token}"
    raw = orjson.dumps(body) if body is not None else b""
    return aws_event(Request(method, path, query, headers, raw))


def operation(op: str, me: Who, fresh: Who | None) -> dict[str, Any]:
    """The event of `op`; `me` is the subscriber made beforehand, `fresh` the round's own."""
    if op == "publish":
        return event("POST", "/v1/publications", {"data": PAYLOAD, "topics": [PUBLISHED]})
    if op == "register":
        return event("POST", "/v1/subscribers", {})
    if op == "subscribe":
        assert fresh is not None
        path = f"/v1/subscribers/{fresh.id}/subscriptions"
        return event("POST", path, {"topics": [f"new/{fresh.id}"]}, fresh)
    return event("GET", f"/v1/subscribers/{me.id}/messages", who=me, query="wait=0&max=1")


def answered(op: str, said: dict[str, Any]) -> dict[str, Any]:
    """The answer's body; raises unless the operation did what it should."""
    answer = said["answer"]
    body = orjson.loads(answer.get("body") or "null")
    if answer["statusCode"] >= 300:
        raise RuntimeError(f"{op}: {answer['statusCode']} {body}")
    if op == "publish" and body["deliveries"] != 1:
        raise RuntimeError(f"publish matched {body['deliveries']} subscriptions, not 1")
    return body if isinstance(body, dict) else {}


# --- function instances ----------------------------------------------------------------


def instance_env(schema: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path,
            "TIDINGS_STORE_URL": f"{PG}?schema={schema}",
            "TIDINGS_LIMITS__REGISTRATIONS_PER_MINUTE": "1000000"}  # fmt: skip


@dataclass
class Instance:
    """One function instance: a process of the invocation loop."""

    schema: str
    path: str
    began: float = field(default_factory=time.perf_counter)
    proc: subprocess.Popen[bytes] | None = None
    # its stderr, read when it ends early; closed by `close`
    log: IO[bytes] = field(default_factory=lambda: tempfile.TemporaryFile())  # noqa: SIM115

    def __post_init__(self) -> None:
        code = f"import sys; {PATHS[self.path]}from tidings.serverless.invoke import main; "
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code + "sys.exit(main(['aws']))"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            env=instance_env(self.schema),
        )  # fmt: skip

    def ask(self, payload: dict[str, Any]) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(orjson.dumps(payload) + b"\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            raise RuntimeError("the instance ended: " + self.log.read()[-2000:].decode())
        return dict(orjson.loads(line))

    def close(self) -> float:
        """End the instance (its input ends): its peak resident memory, MB."""
        assert self.proc is not None and self.proc.stdin
        self.proc.stdin.close()
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.log.close()
        return usage.ru_maxrss / 1024  # KB on Linux


def subscriber_made(schema: str) -> Who:
    """The pulled subscriber, made through a warm instance: registered, subscribed to HIT."""
    helper = Instance(schema, "deployed")
    try:
        me = Who(**_who(answered("register", helper.ask(event("POST", "/v1/subscribers", {})))))
        answered("subscribe", helper.ask(event("POST", f"/v1/subscribers/{me.id}/subscriptions",
                                               {"topics": [HIT]}, me)))  # fmt: skip
    finally:
        helper.close()
    return me


def _who(body: dict[str, Any]) -> dict[str, str]:
    return {"id": body["id"], "token": body["token"]}


# --- cold ------------------------------------------------------------------------------


def cold_once(schema: str, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """One fresh instance, one invocation: its phases in seconds, and its answer."""
    instance = Instance(schema, path)
    try:
        said = instance.ask(payload)
        wall = time.perf_counter() - instance.began
    finally:
        rss_mb = instance.close()
    t = said["timings"]
    phases = {"wall": wall, "import": said["import_s"], "connect": t["connect_s"],
              "load": t["load_s"], "duration": said["duration_s"]}  # fmt: skip
    phases["op"] = phases["duration"] - phases["connect"] - phases["load"]
    phases["start_total"] = phases["import"] + phases["duration"]
    # the interpreter's start and the imports: until the handler is called
    phases["to_handler"] = wall - phases["duration"]
    return {"phases": phases, "rss_mb": rss_mb, "said": said}


def cold(schema: str, path: str, me: Who, runs: int) -> dict[str, list[dict[str, float]]]:
    """`runs` rounds of one fresh instance per operation: each operation's phases per run."""
    out: dict[str, list[dict[str, float]]] = {op: [] for op in OPS}
    for _ in range(runs):
        fresh = None
        for op in OPS:
            done = cold_once(schema, path, operation(op, me, fresh))
            body = answered(op, done["said"])
            if op == "register":
                fresh = Who(**_who(body))
            out[op].append({**done["phases"], "rss_mb": done["rss_mb"]})
    return out


def cold_summary(runs: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per phase, ms (peak memory, MB): median, min and max over the runs."""
    out = {}
    for phase in runs[0]:
        mb = phase.endswith("_mb")
        values = [r[phase] * (1 if mb else 1000) for r in runs]
        stats = {"median": statistics.median(values), "min": min(values), "max": max(values)}
        out[phase if mb else f"{phase}_ms"] = {k: round(v, 3) for k, v in stats.items()}
    return out


# --- warm ------------------------------------------------------------------------------


@dataclass
class Warm:
    durations: dict[str, list[float]]
    pulled: int = 0  # messages the measured pulls leased
    rss_mb: float = 0.0  # the instance's peak resident memory


def warm(schema: str, path: str, me: Who, warm_up: int, runs: int) -> Warm:
    """One instance, rounds of every operation: `duration_s` per operation after the warm-up.
    Each round's subscriber is deleted after it (not timed), so N stays as loaded."""
    done = Warm({op: [] for op in OPS})
    instance = Instance(schema, path)
    try:
        for n in range(warm_up + runs):
            fresh = None
            for op in OPS:
                said = instance.ask(operation(op, me, fresh))
                body = answered(op, said)
                if op == "register":
                    fresh = Who(**_who(body))
                if n >= warm_up:
                    done.durations[op].append(said["duration_s"])
                    done.pulled += len(body.get("messages", ())) if op == "pull" else 0
            assert fresh is not None
            gone = event("DELETE", f"/v1/subscribers/{fresh.id}", who=fresh)
            answered("unregister", instance.ask(gone))
    finally:
        done.rss_mb = instance.close()
    return done


def warm_summary(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    stats = {"p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99),
             "mean_ms": statistics.fmean(ms), "min_ms": min(ms), "max_ms": max(ms)}  # fmt: skip
    return {**{k: round(v, 3) for k, v in stats.items()}, "runs": len(ms)}


# --- one population --------------------------------------------------------------------


def measure(size: int, paths: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (operation, path) at `size` subscriptions: cold on both paths, then warm."""
    schema = f"sl_{uuid.uuid4().hex[:10]}"
    began = time.perf_counter()
    populate(schema, size)
    loaded_s = round(time.perf_counter() - began, 3)
    try:
        me = subscriber_made(schema)
        colds = {p: cold(schema, p, me, args.cold_runs) for p in paths}
        warms = {p: warm(schema, p, me, args.warm_up, args.warm_runs) for p in paths}
    finally:
        if not args.keep:
            drop(schema)
    return [
        {"subscriptions": size, "operation": op, "path": p,
         "cold": cold_summary(colds[p][op]),
         "warm": {**warm_summary(warms[p].durations[op]), "rss_mb": round(warms[p].rss_mb, 1)},
         **({"messages_per_pull": warms[p].pulled / args.warm_runs} if op == "pull" else {}),
         "populate_s": loaded_s, "load_average": os.getloadavg()}
        for p in paths for op in OPS
    ]  # fmt: skip


# --- the summary -----------------------------------------------------------------------


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Targets (at 10^4, else the largest size measured), GB-s and bills per size and path."""
    publish = {(r["subscriptions"], r["path"]): r for r in rows if r["operation"] == "publish"}
    sizes = sorted({n for n, _ in publish})
    at = 10_000 if 10_000 in sizes else sizes[-1]
    out: dict[str, Any] = {"summary": True, "targets_at": at, "targets": {}, "costs": []}
    for (n, path), row in sorted(publish.items()):
        if n == at:
            out["targets"][path] = targets(row)
        out["costs"].append({"subscriptions": n, "path": path, **costs(row)})
    out["load_average"] = os.getloadavg()
    return out


def targets(row: dict[str, Any]) -> dict[str, Any]:
    cold_ms = row["cold"]["start_total_ms"]["median"]
    warm_ms = row["warm"]["p50_ms"]
    return {
        "cold_publish_start_ms": cold_ms,
        "cold_under_500ms": cold_ms < TARGET_COLD_MS,
        "cold_wall_ms": row["cold"]["wall_ms"]["median"],
        "warm_publish_p50_ms": warm_ms,
        "warm_p50_under_5ms": warm_ms < TARGET_WARM_MS,
    }


def costs(row: dict[str, Any]) -> dict[str, Any]:
    """GB-s at 512 MB, and the bill of 10^6 publications a month at the mean warm duration."""
    gb = MEMORY_MB / 1024
    mean_ms = row["warm"]["mean_ms"]
    usage = Usage(publications_per_month=1e6, memory_mb=MEMORY_MB, duration_ms=mean_ms)
    bills = [bill(usage, p) for p in load_serverless(None).providers.values()]
    return {
        "warm_gb_s_per_1e6_publications": round(1e6 * gb * row["warm"]["p50_ms"] / 1000, 3),
        "cold_start_gb_s_each": round(gb * row["cold"]["start_total_ms"]["median"] / 1000, 6),
        "bill_duration_ms": mean_ms,
        "bills": [{"provider": b.provider, "total": round(b.total, 4),
                   "lines": {x.item: {"quantity": round(x.quantity, 3), "billable":
                                      round(x.billable, 3), "cost": round(x.cost, 4)}
                             for x in b.lines if x.quantity}} for b in bills],
    }  # fmt: skip


# --- main ------------------------------------------------------------------------------


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 10_000, 1_000_000])
    parser.add_argument("--quick", action="store_true", help="10^2 and 10^4 only")
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--warm-runs", type=int, default=200)
    parser.add_argument("--warm-up", type=int, default=20)
    parser.add_argument("--paths", nargs="+", choices=list(PATHS), default=list(PATHS))
    parser.add_argument("--keep", action="store_true", help="keep the schemas")
    parser.add_argument("--save", action="store_true", help="append to benchmarks/results")
    args = parser.parse_args()
    if args.quick:
        args.sizes = [100, 10_000]
    return args


def main() -> None:
    args = arguments()
    out = HERE / "results" / f"serverless-{time.strftime('%Y-%m-%d')}.jsonl"
    records = [header(args)]
    emit(records[0])
    rows: list[dict[str, Any]] = []
    for size in args.sizes:
        for row in measure(size, args.paths, args):
            emit(row)
            rows.append(row)
    records += [*rows, summary(rows)]
    emit(records[-1])
    if args.save:
        with out.open("ab") as f:
            f.writelines(orjson.dumps(r) + b"\n" for r in records)


def header(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "benchmark": "serverless", "machine": machine(),
        "versions": versions("psycopg", "mangum", "starlette", "numba"),
        "load_average": os.getloadavg(),
        "workload": {"sizes": args.sizes, "operations": list(OPS), "paths": args.paths,
                     "cold_runs": args.cold_runs, "warm_up": args.warm_up,
                     "warm_runs": args.warm_runs, "memory_mb": MEMORY_MB,
                     "payload_bytes": len(PAYLOAD), "platform": "aws (API Gateway v2 events)",
                     "store": "local PostgreSQL"},
    }  # fmt: skip


if __name__ == "__main__":
    main()
