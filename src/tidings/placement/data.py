"""The shipped, dated data files: EC2 prices (table I), region coordinates, the latency model's
parameters, published inter-region round trips. Read here, never written into the logic."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import msgspec
import numpy as np

from tidings.placement.files import World
from tidings.placement.geo import LatencyModel, client_latencies, region_latencies
from tidings.placement.model import Floats

BYTES_PER_GB = 1e9  # table I's prices are per GB; the paper's 1 KB messages are 1,000 bytes


def _read(name: str) -> Any:
    text = resources.files("tidings.placement").joinpath("data", name).read_bytes()
    return msgspec.json.decode(text)


@dataclass(frozen=True, slots=True)
class Regions:
    """The ten EC2 regions of the paper, with prices per byte and coordinates."""

    names: tuple[str, ...]
    alpha: Floats  # per byte to another region ($EC2)
    beta: Floats  # per byte to the internet ($Inet)
    lat: Floats
    lon: Floats


def ec2_regions() -> Regions:
    prices = _read("ec2-prices-2016.json")["regions"]
    places = {r["name"]: r for r in _read("ec2-regions.json")["regions"]}
    names = tuple(r["name"] for r in prices)
    return Regions(
        names=names,
        alpha=np.array([r["ec2"] for r in prices]) / BYTES_PER_GB,
        beta=np.array([r["inet"] for r in prices]) / BYTES_PER_GB,
        lat=np.array([places[n]["lat"] for n in names], dtype=np.float64),
        lon=np.array([places[n]["lon"] for n in names], dtype=np.float64),
    )


def latency_model() -> LatencyModel:
    p = _read("latency-model.json")
    return LatencyModel(
        p["km_per_ms"],
        p["backbone_inflation"],
        p["backbone_overhead_ms"],
        p["internet_inflation"],
        p["access_ms"],
    )


def published_round_trips() -> tuple[tuple[str, ...], Floats]:
    """The published EC2 inter-region round trips (ms) the latency model is checked against."""
    table = _read("ec2-rtts-2017.json")
    return tuple(table["regions"]), np.array(table["rtt"], dtype=np.float64)


def world(lat: Floats, lon: Floats, regions: Regions | None = None) -> World:
    """Clients at (lat, lon) and the EC2 regions, latencies from the model."""
    regions = regions or ec2_regions()
    model = latency_model()
    return World(
        regions=list(regions.names),
        L=client_latencies(model, lat, lon, regions.lat, regions.lon).tolist(),
        LR=region_latencies(model, regions.lat, regions.lon).tolist(),
        alpha=regions.alpha.tolist(),
        beta=regions.beta.tolist(),
    )
