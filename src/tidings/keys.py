"""Publisher keys and the topic prefixes each may publish to (`access.publish_keys`, read by
tidings.broker.access): parsed here, below the settings that check them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tidings.ids import hash_token


@dataclass(frozen=True, slots=True)
class PublisherKey:
    hashed: str
    prefixes: tuple[str, ...]  # ("*",): any topic

    def allows(self, topics: Sequence[str]) -> bool:
        if "*" in self.prefixes:
            return True
        return bool(topics) and all(t.startswith(self.prefixes) for t in topics)


def publisher_keys(text: str) -> list[PublisherKey]:
    """`KEY=PREFIX|PREFIX,KEY2=*` -> the keys, hashed; ValueError names a malformed entry."""
    keys = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        key, sep, scope = entry.partition("=")
        prefixes = tuple(p for p in scope.split("|") if p)
        if not sep or not key.strip() or not prefixes:
            raise ValueError(f"{entry.split('=')[0][:4]}...: expected KEY=PREFIX|PREFIX or KEY=*")
        keys.append(PublisherKey(hash_token(key.strip()), prefixes))
    return keys
