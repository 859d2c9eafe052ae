"""Selectors: which matcher holds a subscription, which exit point serves a subscriber.

A selector is a view (a number that grows with every scale) and its ordered members; a key
goes to `members[crc32(key) % len(members)]`, the same answer in every process.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Selector:
    view: int
    members: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.members:
            raise ValueError("a selector needs at least one member")

    def __len__(self) -> int:
        return len(self.members)

    def of(self, key: str) -> str:
        return self.members[zlib.crc32(key.encode()) % len(self.members)]

    def split(self, keys: Iterable[str]) -> dict[str, list[str]]:
        """Keys by member (every member present, maybe with none)."""
        out: dict[str, list[str]] = {m: [] for m in self.members}
        for key in keys:
            out[self.of(key)].append(key)
        return out
