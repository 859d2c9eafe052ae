"""Clients at the package's cities, by population, seeded."""

from __future__ import annotations

import numpy as np

from tidings.placement.cities import cities, in_continent, in_country, sample


def test_the_same_seed_places_the_same_clients() -> None:
    a = sample(np.random.default_rng(3), 20)
    b = sample(np.random.default_rng(3), 20)
    assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()


def test_a_restriction_keeps_clients_in_the_country() -> None:
    lat, lon = sample(np.random.default_rng(1), 50, in_country("US"))
    assert ((lat > 18) & (lat < 72) & (lon < -60)).all()


def test_every_city_knows_its_continent() -> None:
    table = cities()
    assert in_continent("AS")(table).sum() > 1000
    assert "" not in set(table.continents) - {""} and len(table.names) > 30_000
