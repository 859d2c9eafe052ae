"""What a batch's topics cost to validate on the event loop, against its data (issue #28).

    python benchmarks/batch_validation.py [--rounds R]

A batch at the body limit is validated in the request's task, on the event loop: 900
publications of 64 topics of 16 segments (2.6 MB of JSON) held `/healthz` for 0.93 s when
each segment was checked by its own regular-expression call. Prints JSON lines: a header
(machine, versions), then the median seconds of `parse_publication_body` over a batch's
publications for that topic-heavy batch and for one whose bytes are data (1,000
publications of a 4,000-character string and one topic), each per MB of JSON, and their
ratio, measured in the same run. A second line does the same for a body's whole reading
(`parse_json`, then each publication's checks, nesting depth included) of a batch of tiny
arrays, as many as a body may hold (`[[[]]]` x 13,000, 10 publications, 0.65 MB; 600,000 in
3 MB took 2.6 s on the loop when the depth and duplicate-key walks took a Python step per
container). A third line reads
MessagePack bodies (`parse_msgpack`): a batch of 4.18 MB of one-byte integers (11 x 380,000)
against one of the same data batch: 5.1 s when its checks took a Python step per item.
A fourth line reads the worst MessagePack batch for its bytes (260,000 `[[0]]`, the most a
body may hold, 0.5 MB; 1.9 M in 3.8 MB held `/healthz` 5.5 s) on an event loop, in place
and then as the API does (`tidings.api.beside`): the longest the loop went without running a
ticking task, each way, and their ratio. A fifth reads a batch as the load tool sends it
(100 publications of 150 bytes with a topic; their data holds colons, as a time of day does):
microseconds a publication, as the API reads it and with its one-pass reads switched off
(every key read by the regular expression, every check one by one: how it was read before
issue #30's sixth sitting), and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from collections.abc import Iterator
from typing import Any

import msgspec
import orjson
from common import emit, machine, versions

from tidings import model
from tidings.api import io
from tidings.api.beside import beside
from tidings.api.io import parse_json, parse_msgpack
from tidings.api.v1.publications import batch_inputs, publication_input
from tidings.config import Settings
from tidings.model import parse_publication_body

TOPICS = [[f"b/b/b/b/b/b/b/q{j}/s0/s1/s2/s3/s4/s5/s6/s7" for j in range(64)] for _ in range(900)]
DATA = [("x" * 4000, ["t"]) for _ in range(1000)]
EVERYDAY = [{"data": f"{1764280000123456789 + i}:00001:{i:010d}:00000:" + "x" * 107,
             "topics": ["perf-0"]} for i in range(100)]  # fmt: skip


def seconds_per_mb(publications: list[dict[str, Any]], rounds: int) -> float:
    limits = Settings().limits
    megabytes = len(orjson.dumps({"publications": publications})) / 1e6
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for publication in publications:
            parse_publication_body(publication, limits)
        times.append(time.perf_counter() - start)
    return statistics.median(times) / megabytes


def read_seconds_per_mb(publications: list[dict[str, Any]], rounds: int) -> float:
    settings = Settings()
    body = orjson.dumps({"publications": publications})
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for publication in parse_json(body)["publications"]:
            publication_input(publication, settings, False)
        times.append(time.perf_counter() - start)
    return statistics.median(times) / (len(body) / 1e6)


@contextlib.contextmanager
def one_by_one() -> Iterator[None]:
    """The one-pass reads switched off: every body's keys and every check read one by one."""
    none_repeated, plain = io._none_repeated, model._plain_publication
    io._none_repeated = lambda body, kept: False
    model._plain_publication = lambda raw, limits: None
    try:
        yield
    finally:
        io._none_repeated, model._plain_publication = none_repeated, plain


def everyday_us(rounds: int) -> float:
    """Microseconds a publication to read the load tool's batch as the API does."""
    settings = Settings()
    body = orjson.dumps({"publications": EVERYDAY})
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(20):
            batch_inputs(parse_json(body), settings, False, False)
        times.append(time.perf_counter() - start)
    return statistics.median(times) / (20 * len(EVERYDAY)) * 1e6


def msgpack_seconds_per_mb(body: dict[str, Any], rounds: int) -> float:
    packed = msgspec.msgpack.encode(body)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        parse_msgpack(packed)
        times.append(time.perf_counter() - start)
    return statistics.median(times) / (len(packed) / 1e6)


async def longest_hold(read: Any) -> float:
    """The longest the event loop went between two turns of a ticking task while `read()`
    was awaited."""
    loop, longest, done = asyncio.get_running_loop(), 0.0, False

    async def tick() -> None:
        nonlocal longest
        last = loop.time()
        while not done:
            await asyncio.sleep(0.001)
            now = loop.time()
            longest, last = max(longest, now - last), now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    await read()
    done = True
    await ticker
    return longest


def loop_held(body: bytes) -> tuple[float, float]:
    """Seconds the loop was held by reading `body` in place, and beside it."""

    async def in_place() -> Any:
        return parse_msgpack(body)

    async def aside() -> Any:
        return await beside(len(body), lambda: parse_msgpack(body))

    return asyncio.run(longest_hold(in_place)), asyncio.run(longest_hold(aside))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    emit({"machine": machine(), "versions": versions("orjson")})
    topics = seconds_per_mb([{"topics": t} for t in TOPICS], rounds)
    data = seconds_per_mb([{"data": d, "topics": t} for d, t in DATA], rounds)
    emit(
        {
            "case": "batch_validation",
            "topics_s_per_mb": round(topics, 4),
            "data_s_per_mb": round(data, 4),
            "topics_over_data": round(topics / data, 1),
        }
    )
    arrays = read_seconds_per_mb([{"data": [[[]]] * 13_000} for _ in range(10)], rounds)
    data = read_seconds_per_mb([{"data": d, "topics": t} for d, t in DATA], rounds)
    emit(
        {
            "case": "body_reading",
            "tiny_arrays_s_per_mb": round(arrays, 4),
            "data_s_per_mb": round(data, 4),
            "tiny_arrays_over_data": round(arrays / data, 1),
        }
    )
    ints = msgpack_seconds_per_mb({"publications": [{"data": [0] * 380_000}] * 11}, rounds)
    packed = {"publications": [{"data": d, "topics": t} for d, t in DATA]}
    data = msgpack_seconds_per_mb(packed, rounds)
    emit(
        {
            "case": "msgpack_reading",
            "one_byte_items_s_per_mb": round(ints, 4),
            "data_s_per_mb": round(data, 4),
            "one_byte_items_over_data": round(ints / data, 1),
        }
    )
    tiny = msgspec.msgpack.encode({"publications": [{"data": [[0]] * 26_000}] * 10})
    in_place, aside = loop_held(tiny)
    emit(
        {
            "case": "loop_held_by_tiny_containers",
            "in_place_s": round(in_place, 3),
            "beside_s": round(aside, 3),
            "in_place_over_beside": round(in_place / aside, 1),
        }
    )

    now, before = [], []
    for _ in range(rounds):  # alternately: a drift of the machine touches both
        now.append(everyday_us(rounds))
        with one_by_one():
            before.append(everyday_us(rounds))
    emit(
        {
            "case": "everyday_batch_reading",
            "us_per_publication": round(statistics.median(now), 2),
            "one_by_one_us_per_publication": round(statistics.median(before), 2),
            "over_one_by_one": round(statistics.median(now) / statistics.median(before), 2),
        }
    )


if __name__ == "__main__":
    main()
