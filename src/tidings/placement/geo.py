"""Latency from geography: great-circle distance, a propagation speed, inflation, overheads. Pure.

`km_per_ms` is the speed of light in fibre, about 2/3 c (299,792 km/s / 1.5 = 199.86 km/ms).
A path is longer than the great circle (`*_inflation`) and every path has fixed costs
(`backbone_overhead_ms` between regions, `access_ms` for a client's last mile).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidings.placement.model import Floats

EARTH_RADIUS_KM = 6371.0088  # the IUGG mean radius


def great_circle_km(lat1: Floats, lon1: Floats, lat2: Floats, lon2: Floats) -> Floats:
    """Haversine distance between points given in degrees (arrays broadcast)."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dp, dl = p2 - p1, np.radians(lon2) - np.radians(lon1)
    h = np.sin(dp / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    km: Floats = 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))
    return km


@dataclass(frozen=True, slots=True)
class LatencyModel:
    """One-way latency, ms, as a function of great-circle distance, km."""

    km_per_ms: float
    backbone_inflation: float
    backbone_overhead_ms: float
    internet_inflation: float
    access_ms: float

    def backbone(self, km: Floats) -> Floats:
        """Region to region over the provider's network; 0 for a region to itself."""
        ms: Floats = self.backbone_inflation * km / self.km_per_ms + self.backbone_overhead_ms
        return np.where(km > 0, ms, 0.0)

    def internet(self, km: Floats) -> Floats:
        """Client to region over the open internet, with the client's access delay."""
        ms: Floats = self.internet_inflation * km / self.km_per_ms + self.access_ms
        return ms


def region_latencies(model: LatencyModel, lat: Floats, lon: Floats) -> Floats:
    """LR: regions x regions, one-way ms, zero diagonal."""
    km = great_circle_km(lat[:, None], lon[:, None], lat[None, :], lon[None, :])
    LR: Floats = model.backbone(km).round(2)
    np.fill_diagonal(LR, 0.0)
    return LR


def client_latencies(
    model: LatencyModel, lat: Floats, lon: Floats, region_lat: Floats, region_lon: Floats
) -> Floats:
    """L: clients x regions, one-way ms."""
    km = great_circle_km(lat[:, None], lon[:, None], region_lat[None, :], region_lon[None, :])
    L: Floats = model.internet(km).round(2)
    return L
