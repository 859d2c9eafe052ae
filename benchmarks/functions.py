"""Function matching throughput and latency in the sandbox pool (issue 3).

    python benchmarks/functions.py [--quick] [--subscribers N] [--tenants T] [--rate R]
        [--seconds S] [--cases code,fairness,fair_delivery,crowd,url]

Workload: N subscriptions (default 100) each with its own code function on one function
type (`len(words) > k` with a per-subscription k and a small dict lookup, so N distinct
compiled functions), spread over --tenants subscribers (default 10: each subscriber's code
runs in workers of its own, at most `functions.max_workers`, here tenants + 1), and N URL
subscriptions against a local endpoint (a Starlette app under
uvicorn in a separate process on 127.0.0.1 answering `{"match": true}`). Each publication is
a short English sentence evaluated against all N functions with one `runner.evaluate` call,
exactly as the broker does.

Prints JSON lines: a header (machine, versions, workload, command), then per case:
- `open_loop`: publications launched at R/s for S seconds (default 100/s, 10 s; --quick
  3 s), `latency_ms_p50/p99` from a publication's scheduled time to all N outcomes;
  `evaluations_per_s` = achieved publications/s x N.
  URL subscriptions are driven at --url-rate (default 10/s: 1,000 HTTP calls/s).
- `closed_loop`: as many publications as 8 in flight allow, `publications_per_s`.
The baseline (same run) evaluates the same compiled functions in this process without any
sandbox; `ratio_vs_in_process` = sandboxed evaluations/s / in-process evaluations/s.
Code functions run behind the OS boundary (bubblewrap + seccomp, docs/sandbox.md).

- `fairness`: 10 well-behaved subscribers at --fair-rate publications/s (default 50/s), the
  latency from a publication's scheduled time to the first well-behaved subscriber's
  outcomes (`runner.stream`, as the broker delivers), first alone (the baseline), then with
  runaway subscribers beside them (a CPU spin, a memory bomb, a spin that catches the
  interpreter's time limit under a bare `except` with 5 subscriptions, a hog that keeps
  the memory it filled; never suspended: the runner alone, the worst case); `p99_ratio` =
  with / without (target <= 2), the medians of --rounds (3) alternating rounds, alone then
  beside.
- `fair_delivery`: the same through a real Broker (in-memory SQLite store, the real runner,
  the runaways never suspended): from publish to the well-behaved subscriber's pull of the
  delivery, alone and beside the runaways, after a warm-up of 2 publications and --settle
  (3) seconds, so the runaways' first offences (about a second each: the kernel's CPU limit)
  are over; `--settle 0` measures them too; `p99_ratio` as above.
- `crowd`: a bystander's code subscription beside --crowd (20) subscribers with one each
  (with --crowd-library their code names the library: full workers, of which 8 fit),
  --crowd-publications (30) at --crowd-rate (5/s), each
  matching all: the bystander's wait from a publication's scheduled time to its outcome,
  alone and beside the crowd (`bystander_p50_ratio`), and the worker starts per evaluation.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from common import emit, machine, percentile, versions

from tidings.config import FunctionSettings
from tidings.model import FunctionSpec, Publication, Subscription
from tidings.sandbox import FunctionRunner
from tidings.sandbox.runner import create_runner

TEXT = "DEBS2018 will be held at the University of Waikato in New Zealand."
CODE = """
POPULATION = {{"New Zealand": 4_900_000, "Waikato": 500_000}}

def match(publication):
    words = publication["data"].split()
    return len(words) > {k} and any(p in publication["data"] for p in POPULATION)
"""
ENDPOINT = """
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

async def yes(request):
    return JSONResponse({"match": True})

app = Starlette(routes=[Route("/match", yes, methods=["POST"])])
uvicorn.run(app, host="127.0.0.1", port=%d, log_level="warning")
"""


def subscriptions(n: int, kind: str, url: str = "", tenants: int = 0) -> list[Subscription]:
    tenants = tenants or n

    def spec(i: int) -> FunctionSpec:
        source = CODE.format(k=i % 20) if kind == "code" else url
        return FunctionSpec("t", kind, source)  # type: ignore[arg-type]

    return [
        Subscription(f"s{i}", f"u{i % tenants}", "function", function=spec(i)) for i in range(n)
    ]


def publication(i: int) -> Publication:
    return Publication(f"p{i}", time.time(), data=TEXT, function_types=("t",))


async def open_loop(
    runner: FunctionRunner, subs: list[Subscription], rate: float, seconds: float
) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0

    async def one(i: int, due: float) -> None:
        nonlocal errors
        outcomes = await runner.evaluate(publication(i), subs)
        latencies.append(time.perf_counter() - due)
        errors += sum(1 for o in outcomes if o.error)

    start, tasks = time.perf_counter(), []
    for i in range(int(rate * seconds)):
        due = start + i / rate
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        tasks.append(asyncio.create_task(one(i, due)))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    return {
        "mode": "open_loop",
        "target_publications_per_s": rate,
        "publications": len(tasks),
        "publications_per_s": round(len(tasks) / elapsed, 1),
        "evaluations_per_s": round(len(tasks) * len(subs) / elapsed),
        "latency_ms_p50": round(percentile(latencies, 50) * 1000, 1),
        "latency_ms_p99": round(percentile(latencies, 99) * 1000, 1),
        "failed_evaluations": errors,
    }


async def closed_loop(
    runner: FunctionRunner, subs: list[Subscription], seconds: float, inflight: int = 8
) -> dict[str, Any]:
    done = 0
    stop = time.perf_counter() + seconds

    async def lane() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await runner.evaluate(publication(done), subs)
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(inflight)))
    elapsed = time.perf_counter() - start
    return {
        "mode": "closed_loop",
        "inflight": inflight,
        "publications_per_s": round(done / elapsed, 1),
        "evaluations_per_s": round(done * len(subs) / elapsed),
    }


def in_process(subs: list[Subscription], seconds: float) -> float:
    """Evaluations/s of the same functions compiled and called here, no sandbox."""
    fns = []
    for s in subs:
        namespace: dict[str, Any] = {}
        exec(s.function.source, namespace)  # type: ignore[union-attr]  # our own code
        fns.append(namespace["match"])
    calls, stop = 0, time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < stop:
        pub = publication(calls).to_json()
        for fn in fns:
            fn(pub)
        calls += len(fns)
    return calls / (time.perf_counter() - start)


async def run_case(
    kind: str, subs: list[Subscription], args: argparse.Namespace, baseline: float
) -> None:
    rate = args.rate if kind == "code" else args.url_rate
    # the URL case's endpoint is on this machine, which URL functions reach only when allowed
    local = "127.0.0.0/8"
    functions = FunctionSettings(
        workers=args.workers, max_workers=args.tenants + 1, url_allow_networks=local
    )
    runner = create_runner(functions)
    try:
        await runner.evaluate(publication(-1), subs)  # start workers, compile
        for result in (
            await open_loop(runner, subs, rate, args.seconds),
            await closed_loop(runner, subs, args.seconds),
        ):
            ratio = result["evaluations_per_s"] / baseline
            emit({"bench": "functions", "case": kind, "subscriptions": len(subs),
                  "subscribers": len({s.subscriber_id for s in subs}), **result,
                  "baseline_in_process_evaluations_per_s": round(baseline),
                  "ratio_vs_in_process": round(ratio, 4)})  # fmt: skip
    finally:
        await runner.aclose()


RUNAWAYS = {
    "spin": "def match(publication):\n    while True:\n        pass\n",
    "bomb": "def match(publication):\n    x = []\n    while True:\n        x.append(' ' * 10**6)\n",
    "spin-caught": (
        "def match(publication):\n    while True:\n        try:\n            while True:\n"
        "                pass\n        except:\n            pass\n"
    ),
    "hog-held": (
        "HELD = []\ndef match(publication):\n    try:\n        while True:\n"
        "            HELD.append(' ' * 10**6)\n    except MemoryError:\n        pass\n"
        "    return [] == [0] * 10**6\n"
    ),
}
COPIES = {"spin-caught": 5}  # one subscriber, many spinning subscriptions
FAIR_TENANTS = 16  # workers: 10 well-behaved subscribers, the runaways, a spare


async def well_behaved_p99(subs: list[Subscription], args: argparse.Namespace) -> float:
    """p99 (ms) from a publication's scheduled time to subscriber u0's outcomes."""
    runner = create_runner(FunctionSettings(workers=args.workers, max_workers=FAIR_TENANTS))
    latencies: list[float] = []

    async def one(i: int, due: float) -> None:
        async for outcomes in runner.stream(publication(i), subs):
            if outcomes[0].subscription_id == "s0":
                latencies.append(time.perf_counter() - due)

    try:
        await runner.evaluate(publication(-1), subs)  # start workers, compile
        await runner.evaluate(publication(-2), subs)  # the runaways are suspect from now on
        start, tasks = time.perf_counter(), []
        for i in range(int(args.fair_rate * args.seconds)):
            due = start + i / args.fair_rate
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            tasks.append(asyncio.create_task(one(i, due)))
        await asyncio.gather(*tasks)
    finally:
        await runner.aclose()
    return percentile(latencies, 99) * 1000


async def fairness(args: argparse.Namespace) -> None:
    good = subscriptions(10, "code")
    bad = [
        Subscription(
            f"bad-{name}-{i}",
            f"bad-{name}",
            "function",
            function=FunctionSpec("t", "code", f"{src}# {i}\n"),
        )
        for name, src in RUNAWAYS.items()
        for i in range(COPIES.get(name, 1))
    ]
    alone, beside = await alternate(
        lambda: well_behaved_p99(good, args), lambda: well_behaved_p99(good + bad, args), args
    )
    emit({"bench": "functions", "case": "fairness", "well_behaved_subscribers": len(good),
          "runaways": list(RUNAWAYS), "rate": args.fair_rate, "seconds": args.seconds,
          **ratio_fields(alone, beside)})  # fmt: skip


CHEAP = "def match(publication):\n    return publication['data'] != ''\n"
# the same, in a worker that loaded the library (the code names it): a full worker's start
WITH_LIBRARY = "import tidings.functions\n" + CHEAP


async def crowd_round(crowd: int, args: argparse.Namespace) -> dict[str, float]:
    """A bystander's code subscription beside `crowd` subscribers with one each, more than
    `max_workers`' worth of full workers; every publication matches all."""
    runner = create_runner(FunctionSettings(workers=args.workers))
    owners = [*(f"crowd-{i}" for i in range(crowd)), "bystander"]
    source = {o: WITH_LIBRARY if args.crowd_library and o != "bystander" else CHEAP for o in owners}
    subs = [
        Subscription(o, o, "function", function=FunctionSpec("t", "code", source[o]))
        for o in owners
    ]
    waits: list[float] = []

    async def one(n: int, at: float) -> None:
        pub = Publication(f"p{n}", time.time(), data=TEXT, function_types=("t",))
        async for outcomes in runner.stream(pub, subs):
            if outcomes[0].subscription_id == "bystander":
                waits.append((time.monotonic() - at) * 1000)

    started = time.monotonic()
    try:
        tasks = []
        for n in range(args.crowd_publications):
            at = started + n / args.crowd_rate
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            tasks.append(asyncio.ensure_future(one(n, at)))
        await asyncio.gather(*tasks)
        return {
            "bystander_p50_ms": round(statistics.median(waits), 1),
            "bystander_max_ms": round(max(waits), 1),
            "finished_s": round(time.monotonic() - started, 2),
            "worker_starts": runner.main.workers.started,
            "evaluations": len(subs) * args.crowd_publications,
        }
    finally:
        await runner.aclose()


async def crowd(args: argparse.Namespace) -> None:
    alone = await crowd_round(0, args)
    beside = await crowd_round(args.crowd, args)
    ratio = beside["bystander_p50_ms"] / max(alone["bystander_p50_ms"], 0.1)
    starts = beside["worker_starts"] / beside["evaluations"]
    emit({"bench": "functions", "case": "crowd", "crowd": args.crowd,
          "crowd_library": args.crowd_library,
          "publications": args.crowd_publications, "rate": args.crowd_rate,
          "alone": alone, "beside": beside, "bystander_p50_ratio": round(ratio, 2),
          "starts_per_evaluation": round(starts, 3)})  # fmt: skip


async def alternate(
    alone: Callable[[], Awaitable[float]],
    beside: Callable[[], Awaitable[float]],
    args: argparse.Namespace,
) -> tuple[list[float], list[float]]:
    """p99s of alternating rounds, alone then beside: a busy machine's drift hits both."""
    out: tuple[list[float], list[float]] = ([], [])
    for _ in range(args.rounds):
        out[0].append(await alone())
        out[1].append(await beside())
    return out


def ratio_fields(alone: list[float], beside: list[float]) -> dict[str, Any]:
    a, b = statistics.median(alone), statistics.median(beside)
    return {"rounds": len(alone), "p99_ms_alone_per_round": [round(x, 1) for x in alone],
            "p99_ms_with_runaways_per_round": [round(x, 1) for x in beside],
            "baseline_p99_ms_alone": round(a, 1), "p99_ms_with_runaways": round(b, 1),
            "p99_ratio": round(b / a, 2)}  # fmt: skip


async def delivery_p99(runaways: bool, args: argparse.Namespace) -> float:
    """p99 (ms) from publishing to the well-behaved subscriber's pull of the delivery."""
    import dataclasses
    import tempfile

    from tidings.broker import Broker, PublicationInput
    from tidings.config import load_settings
    from tidings.store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        base = load_settings({"data_dir": tmp, "store_url": "memory://", "event_log": False}, {})
        functions = FunctionSettings(
            workers=args.workers, failures_to_suspend=10**9, max_workers=FAIR_TENANTS
        )
        settings = dataclasses.replace(base, functions=functions)
        broker = Broker(settings, open_store("memory://"), runner=create_runner(functions))
        await broker.start()
        try:
            good, _ = await broker.register()
            await broker.subscribe(
                good.id, "function", function=FunctionSpec("t", "code", CODE.format(k=3))
            )
            for name, source in RUNAWAYS.items() if runaways else ():
                bad, _ = await broker.register()
                for i in range(COPIES.get(name, 1)):
                    spec = FunctionSpec("t", "code", f"{source}# {i}\n")
                    await broker.subscribe(bad.id, "function", function=spec)
            return await _deliveries(
                broker, good.id, args, PublicationInput(TEXT, function_types=("t",))
            )
        finally:
            await broker.close()
            broker.store.sync.close()


async def _deliveries(broker: Any, subscriber: str, args: argparse.Namespace, item: Any) -> float:
    sent: dict[str, float] = {}
    latencies: list[float] = []
    n = int(args.fair_rate * args.seconds)

    async def consume(expected: int, record: bool) -> None:
        got = 0
        while got < expected:
            messages = await broker.pull(subscriber, 100, wait_s=5)
            if not messages:
                break  # lost: counted by the caller
            now = time.perf_counter()
            got += len(messages)
            if record:
                latencies.extend(now - sent[m.publication_id] for m in messages)
            await broker.ack(subscriber, [m.receipt for m in messages])

    for _ in range(2):  # warm-up: workers started, code compiled, runaways suspect
        await broker.publish(item)
    await consume(2, record=False)
    await asyncio.sleep(args.settle)  # the runaways' first offences over (the kernel's ~1 s)
    consumer = asyncio.create_task(consume(n, record=True))
    start = time.perf_counter()
    for i in range(n):
        due = start + i / args.fair_rate
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        sent[(await broker.publish(item)).publication.id] = due
    await consumer
    return percentile(latencies, 99) * 1000 if len(latencies) == n else float("inf")


async def fair_delivery(args: argparse.Namespace) -> None:
    alone, beside = await alternate(
        lambda: delivery_p99(False, args), lambda: delivery_p99(True, args), args
    )
    emit({"bench": "functions", "case": "fair_delivery", "runaways": list(RUNAWAYS),
          "rate": args.fair_rate, "seconds": args.seconds, "store": "memory://",
          **ratio_fields(alone, beside)})  # fmt: skip


def start_endpoint(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", ENDPOINT % port])
    import httpx

    for _ in range(100):
        try:
            httpx.post(f"http://127.0.0.1:{port}/match", json={})
            return proc
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("the endpoint did not start")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--subscribers", type=int, default=100)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--url-rate", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--fair-rate", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=3.0, help="fair_delivery's warm-up, s")
    parser.add_argument("--crowd", type=int, default=20, help="crowd's code subscribers")
    parser.add_argument("--crowd-rate", type=float, default=5.0)
    parser.add_argument("--crowd-publications", type=int, default=30)
    parser.add_argument(
        "--crowd-library",
        action="store_true",
        help="the crowd's code names the library (full workers)",
    )
    parser.add_argument("--port", type=int, default=18931)
    parser.add_argument(
        "--cases", default="code,fairness,fair_delivery,crowd,url", help="comma-separated"
    )
    args = parser.parse_args()
    if args.quick:
        args.seconds = 3.0
    emit({"bench": "functions", "header": True, "machine": machine(),
          "versions": versions("httpx", "orjson", "uvicorn"),
          "workload": {"subscribers": args.subscribers, "tenants": args.tenants,
                       "rate": args.rate,
                       "url_rate": args.url_rate, "seconds": args.seconds,
                       "workers": args.workers, "fair_rate": args.fair_rate,
                       "rounds": args.rounds, "text": TEXT},
          "command": " ".join(sys.argv), "started_at": datetime.now(UTC).isoformat()})  # fmt: skip
    cases = set(args.cases.split(","))
    code = subscriptions(args.subscribers, "code", tenants=args.tenants)
    baseline = in_process(code, 1.0)
    if "code" in cases:
        await run_case("code", code, args, baseline)
    if "fairness" in cases:
        await fairness(args)
    if "fair_delivery" in cases:
        await fair_delivery(args)
    if "crowd" in cases:
        await crowd(args)
    if "url" not in cases:
        return
    endpoint = start_endpoint(args.port)
    try:
        url = f"http://127.0.0.1:{args.port}/match"
        await run_case("url", subscriptions(args.subscribers, "url", url), args, baseline)
    finally:
        endpoint.terminate()
        endpoint.wait()


if __name__ == "__main__":
    asyncio.run(main())
