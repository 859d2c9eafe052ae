"""Small random workloads and log files for the pipeline tests (alphabets kept small so
that matches, near misses and type mismatches all come up)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any, Literal

import orjson

from tidings.config import FunctionSettings
from tidings.matching.engine import Event, Matcher
from tidings.model import (
    ORDERED_OPS,
    STRING_OPS,
    FunctionSpec,
    Op,
    Predicate,
    Publication,
    Scalar,
    Subscription,
)
from tidings.sandbox.runner import create_runner

SEGMENTS = ("a", "b", "c", "dd")
KEYS = ("k0", "k1", "k2")
WORDS = ("", "a", "ab", "b", "ba")
NUMBERS: tuple[Scalar, ...] = (-1, 0, 1, 2, -0.0, 0.5, 1.0, 1e9)
SUBSCRIBERS = ("alice", "bob", "carol", "dave")


def _scalar(rng: random.Random) -> Scalar:
    kind = rng.randrange(3)
    if kind == 0:
        return rng.random() < 0.5
    return rng.choice(NUMBERS) if kind == 1 else rng.choice(WORDS)


def _predicate(rng: random.Random) -> Predicate:
    op = rng.choice(list(Op))
    value: Scalar | tuple[Scalar, ...]
    if op is Op.EXISTS:
        value = rng.random() < 0.5
    elif op is Op.IN:
        value = tuple(_scalar(rng) for _ in range(rng.randint(1, 3)))
    elif op in STRING_OPS:
        value = rng.choice(WORDS)
    elif op in ORDERED_OPS:
        value = rng.choice(NUMBERS + WORDS)
    else:
        value = _scalar(rng)
    return Predicate(rng.choice(KEYS), op, value)


def _filter(rng: random.Random) -> str:
    parts = [rng.choice((*SEGMENTS, "*")) for _ in range(rng.randint(0, 3))]
    if not parts or rng.random() < 0.25:
        parts.append("#")
    return "/".join(parts)


def _topic(rng: random.Random) -> str:
    return "/".join(rng.choice(SEGMENTS) for _ in range(rng.randint(1, 4)))


def subscriptions(rng: random.Random, n: int) -> list[Subscription]:
    out = []
    for i in range(n):
        owner = rng.choice(SUBSCRIBERS)
        if rng.random() < 0.5:
            filters = tuple(dict.fromkeys(_filter(rng) for _ in range(rng.randint(1, 2))))
            out.append(Subscription(f"t{i:04d}", owner, "topic", topics=filters))
        else:
            preds = tuple(_predicate(rng) for _ in range(rng.randint(1, 3)))
            out.append(Subscription(f"c{i:04d}", owner, "content", predicates=preds))
    return out


def publications(
    rng: random.Random, n: int, start: float = 1_700_000_000.0, functions: bool = False
) -> list[Publication]:
    return [
        Publication(
            f"p{i:05d}",
            start + i,
            {"n": i},
            tuple(dict.fromkeys(_topic(rng) for _ in range(rng.randint(0, 2)))),
            {k: _scalar(rng) for k in rng.sample(KEYS, rng.randint(0, 3))},
            tuple(rng.sample(FUNCTION_TYPES, rng.randint(0, 2))) if functions else (),
        )
        for i in range(n)
    ]


FUNCTION_TYPES = ("numbers", "topics")
# (code, fail_open): matches some, fails open (matches all), fails closed, answers a non-bool
FUNCTIONS = (
    ("def match(publication):\n    return publication['data']['n'] % 3 == 0\n", False),
    ("def match(publication):\n    return any('b' in t for t in publication['topics'])\n", False),
    ("def match(publication):\n    return 1 / 0\n", True),
    ("def match(publication):\n    return 1 / 0\n", False),
    ("def match(publication):\n    return 'yes'\n", False),
)


def function_subscriptions(rng: random.Random, n: int) -> list[Subscription]:
    """Code functions of every outcome; the last one is suspended and must never match."""
    out = []
    for i in range(n):
        code, fail_open = FUNCTIONS[i % len(FUNCTIONS)]
        spec = FunctionSpec(rng.choice(FUNCTION_TYPES), "code", code, fail_open=fail_open)
        status: Literal["active", "suspended"] = "suspended" if i == n - 1 else "active"
        owner = rng.choice(SUBSCRIBERS)
        out.append(Subscription(f"f{i:04d}", owner, "function", function=spec, status=status))
    return out


Triple = tuple[str, str, str]  # (publication, subscriber, subscription)


def matcher_triples(subs: list[Subscription], pubs: list[Publication]) -> set[Triple]:
    """What the broker's in-process Matcher delivers for topic and content subscriptions."""
    matcher = Matcher()
    for s in subs:
        if s.kind == "topic":
            matcher.add_topic(s.id, s.subscriber_id, s.topics)
        elif s.kind == "content":
            matcher.add_content(s.id, s.subscriber_id, s.predicates)
    answers = matcher.match_batch([Event(p.topics, p.attributes) for p in pubs])
    return {
        (p.id, owner, sid)
        for p, answer in zip(pubs, answers, strict=True)
        for owner, sids in answer.items()
        for sid in sids
    }


def runner_triples(subs: list[Subscription], pubs: list[Publication]) -> set[Triple]:
    """What the broker's sandboxed runner matches: each publication against the active
    function subscriptions of the types it names."""

    async def run() -> set[Triple]:
        runner = create_runner(FunctionSettings())
        try:
            out = set()
            for p in pubs:
                mine = [
                    s
                    for s in subs
                    if s.function is not None
                    and s.status == "active"
                    and s.function.function_type in p.function_types
                ]
                outcomes = await runner.evaluate(p, mine) if mine else []
                owner = {s.id: s.subscriber_id for s in mine}
                out |= {
                    (p.id, owner[o.subscription_id], o.subscription_id)
                    for o in outcomes
                    if o.matched
                }
            return out
        finally:
            await runner.aclose()

    return asyncio.run(run())


def line(record: Publication | dict[str, Any]) -> str:
    raw = record.to_json() if isinstance(record, Publication) else record
    return orjson.dumps(raw).decode()


def write_log(directory: Path, name: str, lines: list[str]) -> Path:
    """A finished log file, named as the event log names them."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.jsonl"
    path.write_text("".join(f"{text}\n" for text in lines))
    return path
