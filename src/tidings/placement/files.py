"""The instance file (JSON): decoded with msgspec, checked, turned into a `model.Instance`.

Every refusal names the path of the bad field the way a user would write it
(`publishers[3].client`, `LR[1][1]`), with the file it came from.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal, TypeVar

import msgspec
import numpy as np

from tidings.errors import invalid
from tidings.placement.model import Instance, Mode

T = TypeVar("T")
MAX_REGIONS = 16  # 2 * (2^16 - 1) - 16 configurations is already ~131k

Latency = Annotated[float, msgspec.Meta(ge=0)]
Price = Annotated[float, msgspec.Meta(ge=0)]
Bytes = Annotated[float, msgspec.Meta(ge=0)]
Client = Annotated[int, msgspec.Meta(ge=0)]
Percent = Annotated[float, msgspec.Meta(gt=0, le=100)]


class Publisher(msgspec.Struct, forbid_unknown_fields=True):
    client: Client
    sizes: list[Bytes]


class World(msgspec.Struct, forbid_unknown_fields=True):
    """Regions, their latencies and prices: shared by every topic over the same clients."""

    regions: Annotated[list[str], msgspec.Meta(min_length=1, max_length=MAX_REGIONS)]
    L: list[list[Latency]]
    LR: list[list[Latency]]
    alpha: list[Price]
    beta: list[Price]


class Topic(msgspec.Struct, forbid_unknown_fields=True):
    """One topic's clients, messages and constraint."""

    publishers: list[Publisher]
    subscribers: list[Client]
    ratio: Percent
    max_ms: Latency
    modes: Annotated[list[Literal["direct", "routed"]], msgspec.Meta(min_length=1)] | None = None


class InstanceFile(msgspec.Struct, forbid_unknown_fields=True):
    """`tidings placement solve`'s input: a world and one topic in one object."""

    regions: Annotated[list[str], msgspec.Meta(min_length=1, max_length=MAX_REGIONS)]
    L: list[list[Latency]]
    LR: list[list[Latency]]
    alpha: list[Price]
    beta: list[Price]
    publishers: list[Publisher]
    subscribers: list[Client]
    ratio: Percent
    max_ms: Latency
    modes: Annotated[list[Literal["direct", "routed"]], msgspec.Meta(min_length=1)] | None = None

    def world(self) -> World:
        return World(self.regions, self.L, self.LR, self.alpha, self.beta)

    def topic(self) -> Topic:
        return Topic(self.publishers, self.subscribers, self.ratio, self.max_ms, self.modes)


def _path(message: str) -> tuple[str, str]:
    """msgspec's "... - at `$.publishers[3].client`" as ("publishers[3].client", "...").

    A missing or unknown field is named in the message, not the path: it is appended.
    """
    found = re.search(r" - at `\$\.?(.*)`$", message)
    path, detail = (found.group(1), message[: found.start()]) if found else ("", message)
    named = re.search(r"(?:missing required|unknown) field `([^`]*)`", detail)
    if named:
        path = f"{path}.{named.group(1)}" if path else named.group(1)
    return path, detail


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise invalid(str(path), f"cannot be read: {exc.strerror or exc}") from None


def decode(data: bytes, kind: type[T], name: str) -> T:
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as exc:
        field, detail = _path(str(exc))
        raise invalid(field or name, f"{name}: {detail}") from None
    except msgspec.DecodeError as exc:
        raise invalid(name, f"{name} is not valid JSON: {exc}") from None


def check_world(world: World, name: str) -> None:
    n = len(world.regions)
    if len(set(world.regions)) != n:
        raise invalid("regions", f"{name}: region names must be distinct")
    for i, row in enumerate(world.L):
        if len(row) != n:
            raise invalid(f"L[{i}]", f"{name}: expected {n} latencies, one per region")
    if len(world.LR) != n:
        raise invalid("LR", f"{name}: expected {n} rows, one per region")
    for i, row in enumerate(world.LR):
        if len(row) != n:
            raise invalid(f"LR[{i}]", f"{name}: expected {n} latencies")
        if row[i] != 0:
            raise invalid(f"LR[{i}][{i}]", f"{name}: a region is 0 ms from itself")
    for field, prices in (("alpha", world.alpha), ("beta", world.beta)):
        if len(prices) != n:
            raise invalid(field, f"{name}: expected {n} prices, one per region")


def check_topic(topic: Topic, clients: int, name: str, where: str = "") -> None:
    for k, publisher in enumerate(topic.publishers):
        if publisher.client >= clients:
            field = f"{where}publishers[{k}].client"
            raise invalid(field, f"{name}: no client {publisher.client} (L has {clients} rows)")
    for i, client in enumerate(topic.subscribers):
        if client >= clients:
            field = f"{where}subscribers[{i}]"
            raise invalid(field, f"{name}: no client {client} (L has {clients} rows)")


def to_instance(world: World, topic: Topic) -> Instance:
    """A checked world and topic as the model's instance (float64 arrays)."""
    modes = tuple(Mode(m) for m in topic.modes) if topic.modes else (Mode.DIRECT, Mode.ROUTED)
    return Instance(
        L=np.array(world.L, dtype=np.float64).reshape(-1, len(world.regions)),
        LR=np.array(world.LR, dtype=np.float64),
        alpha=np.array(world.alpha, dtype=np.float64),
        beta=np.array(world.beta, dtype=np.float64),
        publishers=np.array([p.client for p in topic.publishers], dtype=np.int64),
        sizes=tuple(np.array(p.sizes, dtype=np.float64) for p in topic.publishers),
        subscribers=np.array(topic.subscribers, dtype=np.int64),
        ratio=topic.ratio,
        max_ms=topic.max_ms,
        modes=modes,
        names=tuple(world.regions),
    )


def load_world(path: Path) -> World:
    world = decode(read_bytes(path), World, str(path))
    check_world(world, str(path))
    return world


def load_instance(path: Path) -> Instance:
    """The instance file at `path`, or a `TidingsError` naming the bad field."""
    name = str(path)
    parsed = decode(read_bytes(path), InstanceFile, name)
    world = parsed.world()
    check_world(world, name)
    check_topic(parsed.topic(), len(world.L), name)
    return to_instance(world, parsed.topic())
