"""The paper's workloads on the model data: clients at cities, the ten EC2 regions, 1 KB a second.

Each publisher sends `messages` messages of 1,000 bytes in an interval of `messages` seconds
(one a second, as in section V); costs scale to a day by `86,400 / messages`. Equal rates
make the percentile independent of `messages`, so one message each is exact and cheapest.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from tidings.placement import cities, data
from tidings.placement.files import Publisher, Topic, World, to_instance
from tidings.placement.geo import client_latencies
from tidings.placement.model import Floats, Instance, Mode

MESSAGE_BYTES = 1000.0
SECONDS_PER_DAY = 86_400


@dataclass(frozen=True, slots=True)
class PlacementScenario:
    """Publishers are clients 0..P-1 of the world, subscribers P..P+S-1."""

    name: str
    world: World
    publishers: int
    subscribers: int
    ratio: float
    messages: int = 1

    def instance(
        self, max_ms: float, modes: tuple[Mode, ...] = (Mode.DIRECT, Mode.ROUTED)
    ) -> Instance:
        sizes = [MESSAGE_BYTES] * self.messages
        topic = Topic(
            publishers=[Publisher(k, sizes) for k in range(self.publishers)],
            subscribers=list(range(self.publishers, self.publishers + self.subscribers)),
            ratio=self.ratio,
            max_ms=max_ms,
            modes=[m.value for m in modes],
        )
        return to_instance(self.world, topic)

    @property
    def per_day(self) -> float:
        """Multiply an interval's cost by this for a day's."""
        return SECONDS_PER_DAY / self.messages


@cache
def _closest_region_of_cities() -> np.ndarray[tuple[int], np.dtype[np.int64]]:
    table, regions = cities.cities(), data.ec2_regions()
    L = client_latencies(data.latency_model(), table.lat, table.lon, regions.lat, regions.lon)
    closest: np.ndarray[tuple[int], np.dtype[np.int64]] = np.argmin(L, axis=1)
    return closest


def near_region(region: int) -> cities.Where:
    """Cities whose closest EC2 region (by the latency model) is `region`."""
    return lambda _table: _closest_region_of_cities() == region


def _positions(
    rng: np.random.Generator, groups: list[tuple[int, cities.Where]]
) -> tuple[Floats, Floats]:
    lats, lons = [], []
    for count, where in groups:
        lat, lon = cities.sample(rng, count, where)
        lats.append(lat)
        lons.append(lon)
    return np.concatenate(lats), np.concatenate(lons)


def build(
    name: str,
    publishers: list[tuple[int, cities.Where]],
    subscribers: list[tuple[int, cities.Where]],
    ratio: float,
    seed: int,
    messages: int = 1,
) -> PlacementScenario:
    rng = np.random.default_rng(seed)
    p_lat, p_lon = _positions(rng, publishers)
    s_lat, s_lon = _positions(rng, subscribers)
    world = data.world(np.concatenate((p_lat, s_lat)), np.concatenate((p_lon, s_lon)))
    return PlacementScenario(name, world, len(p_lat), len(s_lat), ratio, messages)


def global_spread(per_region: int, seed: int, messages: int = 1) -> PlacementScenario:
    """Experiment 1: `per_region` publishers and subscribers close to each region; 75 %."""
    groups = [(per_region, near_region(r)) for r in range(len(data.ec2_regions().names))]
    return build("global", groups, groups, 75.0, seed, messages)


def asia_and_usa(publishers: int, per_side: int, seed: int) -> PlacementScenario:
    """Experiment 2: publishers and `per_side` subscribers in Asia, `per_side` in the USA; 75 %."""
    asia, usa = cities.in_continent("AS"), cities.in_country("US")
    return build("asia-usa", [(publishers, asia)], [(per_side, asia), (per_side, usa)], 75.0, seed)


def localised(region_name: str, clients: int, seed: int) -> PlacementScenario:
    """Experiment 3: `clients` publishers and subscribers closest to one region; 95 %."""
    region = data.ec2_regions().names.index(region_name)
    near = [(clients, near_region(region))]
    return build(f"local-{region_name}", near, near, 95.0, seed)


def random_topics(
    clients: int, count: int, publishers: int, subscribers: int, seed: int, messages: int = 10
) -> list[dict[str, object]]:
    """`count` topic rows for `solve-topics`: clients drawn from a world's `clients` rows.

    Each topic has its own clients, a bound of 100-200 ms and a ratio of 75, 90 or 95 %.
    """
    rng = np.random.default_rng(seed)
    rows: list[dict[str, object]] = []
    for t in range(count):
        chosen = rng.choice(clients, size=publishers + subscribers, replace=False).tolist()
        sizes = [MESSAGE_BYTES] * messages
        rows.append({
            "topic": f"t{t}",
            "publishers": [{"client": c, "sizes": sizes} for c in chosen[:publishers]],
            "subscribers": chosen[publishers:],
            "ratio": float(rng.choice([75.0, 90.0, 95.0])),
            "max_ms": float(rng.integers(100, 201)),
            "modes": None,
        })  # fmt: skip
    return rows


def world_of_cities(clients: int, seed: int) -> World:
    """A world of `clients` clients at cities anywhere, by population."""
    lat, lon = cities.sample(np.random.default_rng(seed), clients)
    return data.world(lat, lon)
