"""Small random workloads and log files for the pipeline tests (alphabets kept small so
that matches, near misses and type mismatches all come up)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson

from tidings.model import ORDERED_OPS, STRING_OPS, Op, Predicate, Publication, Scalar, Subscription

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


def publications(rng: random.Random, n: int, start: float = 1_700_000_000.0) -> list[Publication]:
    return [
        Publication(
            f"p{i:05d}",
            start + i,
            {"n": i},
            tuple(dict.fromkeys(_topic(rng) for _ in range(rng.randint(0, 2)))),
            {k: _scalar(rng) for k in rng.sample(KEYS, rng.randint(0, 3))},
        )
        for i in range(n)
    ]


def line(record: Publication | dict[str, Any]) -> str:
    raw = record.to_json() if isinstance(record, Publication) else record
    return orjson.dumps(raw).decode()


def write_log(directory: Path, name: str, lines: list[str]) -> Path:
    """A finished log file, named as the event log names them."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.jsonl"
    path.write_text("".join(f"{text}\n" for text in lines))
    return path
