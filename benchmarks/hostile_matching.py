"""Issue #28's hostile matching workloads against a real `tidings serve`: how long the hostile
request takes and how late /healthz answers meanwhile (the event loop's freeze).

    python benchmarks/hostile_matching.py [--case wildcards|contains|long-needles|bomb|
        topic-cache|not-equal|prefix|suffix|affixes|both] [--publications 64]

- wildcards: one subscriber's subscriptions hold every combination of `*` and `a` over
  `--levels` (14) levels (2^14 filters, 256 a subscription: as many subscriptions as needed,
  the last ones refused past a limit are counted), then one batch of `--publications`
  publications, each of 64 distinct topics `a/.../a/<n>` that reach every node of that trie.
- contains: 1,000 subscriptions of 32 `contains` predicates on one attribute (32,000 distinct
  needles of 8 characters, none found; 200 subscriptions a subscriber, within its budget of
  needle characters), then `--publications` publications in one batch whose attribute is a
  250 KB string.
- long-needles: the broker's budget of needle characters filled with needles of 1,024
  characters (8 subscribers x 2 subscriptions x 32: 524,288 characters), one publication of a
  250 KB value (the first build), then `--churn` rounds of one subscription removed and one
  of 32 new needles added, each followed by a publication (later builds); /healthz meanwhile
  and the broker's RSS.
- bomb: one subscriber asks for 1,000 subscriptions of 32 needles of 1,024 characters (32 M
  characters: ~8 GB of automaton before the budgets); counts the answers (`--bomb` asks).
- topic-cache: `--cache-subscriptions` subscriptions on `#` (1,000 a subscriber), then
  publications of 64 distinct topics each, `--cache-topics` topics in all: every answer of the
  topic cache holds every slot; the broker's RSS before and after.
- not-equal, prefix, suffix (`affixes`: the three): one subscriber's 1,000 subscriptions of
  32 predicates `!=` (or `prefix`, `suffix`) on one attribute, values of 1,000 characters
  alike but for their last 4 (all within the limits), then one batch of
  `--affix-publications` (100) publications whose attribute is 1,000 or more characters
  (each value satisfies every `!=`; none of the prefixes or suffixes).
- baseline (the same-run reference): the same batch sizes with one plain subscription.

/healthz is asked every 20 ms from a thread during each publish; its worst and median
answer times are reported. Prints JSON lines: a header (machine, versions, revision, load
average, workload), then one line per case with the ratio of the hostile publish to the
baseline publish of the same run.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from common import emit, machine, versions

from tidings.server import broker_process


def timed_with_probe(url: str, attack: Callable[[], httpx.Response]) -> dict[str, Any]:
    """Run `attack` while /healthz is asked every 20 ms; its time and the probe's figures."""
    latencies: list[float] = []
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=120) as client:
            while not done.is_set():
                started = time.perf_counter()
                client.get(f"{url}/healthz")
                latencies.append(time.perf_counter() - started)
                time.sleep(0.02)

    prober = threading.Thread(target=probe)
    prober.start()
    time.sleep(0.1)
    started = time.perf_counter()
    answer = attack()
    took = time.perf_counter() - started
    done.set()
    prober.join()
    return {
        "status": answer.status_code,
        "publish_s": round(took, 3),
        "healthz_max_ms": round(max(latencies) * 1000, 1),
        "healthz_median_ms": round(statistics.median(latencies) * 1000, 2),
        "healthz_answers": len(latencies),
    }


def subscriber(client: httpx.Client) -> tuple[str, dict[str, str]]:
    raw = client.post("/v1/subscribers").json()
    return f"/v1/subscribers/{raw['id']}/subscriptions", {"Authorization": f"Bearer {raw['token']}"}


def subscribe_all(client: httpx.Client, bodies: list[dict[str, Any]]) -> dict[str, int]:
    path, auth = subscriber(client)
    statuses: dict[str, int] = {}
    for body in bodies:
        code = str(client.post(path, json=body, headers=auth).status_code)
        statuses[code] = statuses.get(code, 0) + 1
    return statuses


def wildcard_filters(levels: int) -> list[str]:
    return ["/".join(c) for c in itertools.product(("*", "a"), repeat=levels)]


def wildcards(client: httpx.Client, url: str, levels: int, publications: int) -> dict[str, Any]:
    filters = wildcard_filters(levels)
    bodies = [{"topics": filters[i : i + 256]} for i in range(0, len(filters), 256)]
    statuses = subscribe_all(client, bodies)
    prefix = "/".join(["a"] * (levels - 1))
    batch = {
        "publications": [
            {"topics": [f"{prefix}/t{p}x{t}" for t in range(64)]} for p in range(publications)
        ]
    }
    figures = timed_with_probe(
        url, lambda: client.post("/v1/publications/batch?answer=count", json=batch)
    )
    return {"filters": len(filters), "subscribe_statuses": statuses, **figures}


def rss_mib(pid: int) -> float:
    """The process's resident set, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def needle_body(values: list[str]) -> dict[str, Any]:
    return {"predicates": [{"key": "body", "op": "contains", "value": v} for v in values]}


def contains(client: httpx.Client, url: str, publications: int) -> dict[str, Any]:
    needles = (f"n{n:07d}" for n in range(32_000))
    bodies = [needle_body([next(needles) for _ in range(32)]) for _ in range(1000)]
    statuses: dict[str, int] = {}
    for start in range(0, len(bodies), 200):
        for code, count in subscribe_all(client, bodies[start : start + 200]).items():
            statuses[code] = statuses.get(code, 0) + count
    value = "x" * 250_000
    batch = {"publications": [{"attributes": {"body": value}} for _ in range(publications)]}
    figures = timed_with_probe(
        url, lambda: client.post("/v1/publications/batch?answer=count", json=batch)
    )
    return {"needles": 32_000, "subscribe_statuses": statuses, **figures}


def long_needles(client: httpx.Client, url: str, pid: int, churn: int) -> dict[str, Any]:
    rss = [rss_mib(pid)]
    made, statuses = [], {}
    for s in range(8):
        path, auth = subscriber(client)
        for k in range(2):
            values = [f"s{s}k{k}p{p:02d}".ljust(1024, "z") for p in range(32)]
            answer = client.post(path, json=needle_body(values), headers=auth)
            statuses[str(answer.status_code)] = statuses.get(str(answer.status_code), 0) + 1
            if answer.status_code == 201:
                made.append((path, auth, answer.json()["id"]))
    body = {"attributes": {"body": "y" * 250_000}}
    first = timed_with_probe(url, lambda: client.post("/v1/publications", json=body))
    rss.append(rss_mib(pid))
    later: list[dict[str, Any]] = []
    for r in range(churn):
        for k in range(3):  # 96 new needles: past the 64 pending, a build is due
            path, auth, sid = made.pop(0)
            client.delete(f"{path}/{sid}", headers=auth).raise_for_status()
            values = [f"c{r}k{k}p{p:02d}".ljust(1024, "z") for p in range(32)]
            again = client.post(path, json=needle_body(values), headers=auth)
            made.append((path, auth, again.json()["id"]))
        later.append(timed_with_probe(url, lambda: publish_then_idle(client, body, 2.0)))
    rss.append(rss_mib(pid))
    return {"needle_chars": 16 * 32 * 1024, "subscribe_statuses": statuses,
            "first": first, "rss_mib": rss,
            "churn_publish_plus_2s_max": max((c["publish_s"] for c in later), default=None),
            "churn_healthz_max_ms": max((c["healthz_max_ms"] for c in later), default=None),
            "publish_s": first["publish_s"]}  # fmt: skip


def publish_then_idle(client: httpx.Client, body: dict[str, Any], idle_s: float) -> httpx.Response:
    """The publication that starts a build, then time for a background one to land while
    /healthz is still being asked."""
    answer = client.post("/v1/publications", json=body)
    time.sleep(idle_s)
    return answer


def bomb(client: httpx.Client, pid: int, asks: int) -> dict[str, Any]:
    path, auth = subscriber(client)
    statuses: dict[str, int] = {}
    for s in range(asks):
        values = [f"{s:04d}{p:02d}".ljust(1024, "z") for p in range(32)]
        code = str(client.post(path, json=needle_body(values), headers=auth).status_code)
        statuses[code] = statuses.get(code, 0) + 1
    started = time.perf_counter()
    client.post("/v1/publications", json={"attributes": {"body": "y" * 1000}})
    return {"asked": asks, "subscribe_statuses": statuses, "rss_mib": rss_mib(pid),
            "publish_s": round(time.perf_counter() - started, 3)}  # fmt: skip


def topic_cache(
    client: httpx.Client, url: str, pid: int, subscriptions: int, topics: int
) -> dict[str, Any]:
    for _ in range(0, subscriptions, 1000):
        subscribe_all(client, [{"topics": ["#"]}] * 1000)
    rss = [rss_mib(pid)]
    started = time.perf_counter()
    for start in range(0, topics, 64 * 100):
        batch = {"publications": [
            {"topics": [f"t/{start + p * 64 + t}" for t in range(64)]}
            for p in range(min(100, (topics - start) // 64))]}  # fmt: skip
        client.post("/v1/publications/batch?answer=count", json=batch).raise_for_status()
    took = time.perf_counter() - started
    rss.append(rss_mib(pid))
    return {"subscriptions": subscriptions, "topics": topics, "rss_mib": rss,
            "rss_growth_mib": round(rss[1] - rss[0], 1), "publish_s": round(took, 3)}  # fmt: skip


AFFIX_OPS = {"not-equal": "!=", "prefix": "prefix", "suffix": "suffix"}


def affix_body(op: str, first: int) -> dict[str, Any]:
    """32 predicates `op` on `k` with values of 1,000 characters, alike but for the end (a
    prefix's) or the start (a suffix's)."""
    values = [f"{(first + j) % 10_000:04d}" for j in range(32)]
    pad = "p" * 996
    values = [pad + v if op != "suffix" else v + pad for v in values]
    return {"predicates": [{"key": "k", "op": op, "value": v} for v in values]}


def affixes(client: httpx.Client, url: str, case: str, publications: int) -> dict[str, Any]:
    op = AFFIX_OPS[case]
    statuses = subscribe_all(client, [affix_body(op, i * 32) for i in range(1000)])
    batch = {"publications": [{"attributes": {"k": f"p{'p' * 999}y{i}p"}}
                              for i in range(publications)]}  # fmt: skip
    figures = timed_with_probe(
        url, lambda: client.post("/v1/publications/batch?answer=count", json=batch)
    )
    return {"op": op, "predicates": 32_000, "subscribe_statuses": statuses, **figures}


def baseline(client: httpx.Client, publications: int, body: dict[str, Any]) -> float:
    batch = {"publications": [body] * publications}
    started = time.perf_counter()
    client.post("/v1/publications/batch?answer=count", json=batch).raise_for_status()
    return time.perf_counter() - started


def run(case: str, args: argparse.Namespace) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        broker_process(Path(tmp)) as (proc, url),
        httpx.Client(base_url=url, timeout=600) as client,
    ):
        if case == "long-needles":
            return {"case": case, **long_needles(client, url, proc.pid, args.churn),
                    "load_average": os.getloadavg()}  # fmt: skip
        if case == "bomb":
            return {"case": case, **bomb(client, proc.pid, args.bomb),
                    "load_average": os.getloadavg()}  # fmt: skip
        if case == "topic-cache":
            found = topic_cache(client, url, proc.pid, args.cache_subscriptions, args.cache_topics)
            return {"case": case, **found, "load_average": os.getloadavg()}
        if case == "wildcards":
            subscribe_all(client, [{"topics": ["b/#"]}])
            topics = {"topics": [f"b/t{t}" for t in range(64)]}
            plain = baseline(client, args.publications, topics)
            found = wildcards(client, url, args.levels, args.publications)
        elif case in AFFIX_OPS:
            subscribe_all(client, [{"predicates": [{"key": "k", "op": "exists"}]}])
            body = {"attributes": {"k": "p" * 1000 + "y"}}
            plain = baseline(client, args.affix_publications, body)
            found = affixes(client, url, case, args.affix_publications)
        else:
            subscribe_all(client, [{"predicates": [{"key": "body", "op": "exists"}]}])
            body = {"attributes": {"body": "x" * 250_000}}
            plain = baseline(client, args.contains_publications, body)
            found = contains(client, url, args.contains_publications)
    return {"case": case, **found, "baseline_publish_s": round(plain, 3),
            "hostile_over_baseline": round(found["publish_s"] / plain, 1),
            "load_average": os.getloadavg()}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cases = ["wildcards", "contains", "long-needles", "bomb", "topic-cache", *AFFIX_OPS]
    cases += ["affixes", "both"]
    parser.add_argument("--case", choices=cases, default="both")
    parser.add_argument("--churn", type=int, default=4)
    parser.add_argument("--bomb", type=int, default=20)
    parser.add_argument("--cache-subscriptions", type=int, default=5000)
    parser.add_argument("--cache-topics", type=int, default=32_768)
    parser.add_argument("--levels", type=int, default=14)
    parser.add_argument("--publications", type=int, default=64)
    parser.add_argument("--contains-publications", type=int, default=1)
    parser.add_argument("--affix-publications", type=int, default=100)
    args = parser.parse_args()
    emit({"benchmark": "hostile_matching", "machine": machine(),
          "versions": versions("numpy"), "load_average": os.getloadavg(),
          "workload": {"case": args.case, "levels": args.levels,
                       "publications": args.publications,
                       "contains_publications": args.contains_publications,
                       "affix_publications": args.affix_publications}})  # fmt: skip
    chosen = {"both": ("wildcards", "contains"), "affixes": tuple(AFFIX_OPS)}
    for case in chosen.get(args.case, (args.case,)):
        emit(run(case, args))


if __name__ == "__main__":
    main()
