"""The live system on one machine: region brokers, emulated geography, a topic that spreads.

Each region is a real `tidings serve` process (its own port, an in-memory store). Every
client-to-region link and region-to-region link is a `DelayRelay` carrying the one-way delay
of `L` or `LR`. A region manager sits beside each broker; the controller solves and deploys.

`run_spread` is the issue's scenario: a topic whose publishers and subscribers are on one
continent (North America) is joined by clients on a second (Europe); the controller
reconfigures it, the European clients move, and the run reports what every subscriber
received (lost, duplicated) and the measured delivery-time percentile against the model's.
`dilation` multiplies every latency (and the bound), so that the brokers' own few
milliseconds of processing, which the model neglects, stay small against the links.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from tidings.client.multiregion import MultiRegionClient, Placement
from tidings.placement import cities, data
from tidings.placement.controller import Constraint, Controller
from tidings.placement.geo import client_latencies, region_latencies
from tidings.placement.model import (
    Configuration,
    Floats,
    Instance,
    Mode,
    evaluate,
    rank,
)
from tidings.placement.regions import RegionManager
from tidings.placement.relay import DelayRelay
from tidings.ports import free_port

REGIONS = ("us-east-1", "eu-central-1", "ap-northeast-1")
TOPIC = "game/lobby"
OnProgress = Callable[[str, int, int], None]  # (step, done, total): the CLI draws it
STEPS = (
    "starting the region brokers",
    "relays and region managers",
    "the American clients join",
    "an interval observed; the controller solves",
    "the European clients join",
    "an interval observed; the controller spreads the topic",
    "the European clients move",
    "measuring after the moves",
    "the last publications arrive",
)


def _steps(on_progress: OnProgress | None) -> Callable[[int], None]:
    """Says step `i` of `STEPS` (and `len(STEPS)`: all done)."""

    def say(i: int) -> None:
        if on_progress is not None:
            on_progress(STEPS[min(i, len(STEPS) - 1)], i, len(STEPS))

    return say


@dataclass
class Geography:
    """Latencies (ms) and prices of the emulated world; clients are rows of `L`."""

    names: tuple[str, ...]
    L: Floats
    LR: Floats
    alpha: Floats
    beta: Floats


def geography(lat: Floats, lon: Floats, dilation: float) -> Geography:
    """The model's latencies for clients at (lat, lon) over `REGIONS`, times `dilation`."""
    ec2 = data.ec2_regions()
    keep = [ec2.names.index(n) for n in REGIONS]
    model = data.latency_model()
    rl, rn = ec2.lat[keep], ec2.lon[keep]
    return Geography(
        REGIONS,
        client_latencies(model, lat, lon, rl, rn) * dilation,
        region_latencies(model, rl, rn) * dilation,
        ec2.alpha[keep],
        ec2.beta[keep],
    )


@asynccontextmanager
async def brokers(count: int) -> AsyncIterator[list[int]]:
    """`count` `tidings serve` processes on free ports; their ports."""
    ports = [free_port() for _ in range(count)]
    with tempfile.TemporaryDirectory(prefix="tidings-regions-") as tmp:
        procs = [_serve(port, Path(tmp) / str(port)) for port in ports]
        try:
            await asyncio.gather(*(_healthy(port) for port in ports))
            yield ports
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)


def _serve(port: int, data_dir: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "tidings.cli.main", "serve", "--port", str(port)]
    command += ["--data-dir", str(data_dir), "--store", "memory://", "--no-event-log"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _healthy(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as http:
        while True:
            with contextlib.suppress(httpx.TransportError):
                if (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the broker on port {port} did not start")
            await asyncio.sleep(0.1)


@dataclass
class Links:
    """client x region and region x region relays; `urls[c][r]` is client c's way to r."""

    clients: list[list[DelayRelay]]
    regions: list[dict[int, DelayRelay]]

    @property
    def urls(self) -> list[list[str]]:
        return [[relay.url for relay in row] for row in self.clients]

    async def close(self) -> None:
        for relay in [r for row in self.clients for r in row] + [
            r for row in self.regions for r in row.values()
        ]:
            await relay.close()


async def links(world: Geography, ports: Sequence[int]) -> Links:
    n = len(ports)
    clients = [
        [DelayRelay(ports[r], world.L[c, r] / 1000) for r in range(n)] for c in range(len(world.L))
    ]
    regions = [
        {r: DelayRelay(ports[r], world.LR[q, r] / 1000) for r in range(n) if r != q}
        for q in range(n)
    ]
    for relay in [r for row in clients for r in row] + [r for row in regions for r in row.values()]:
        await relay.start()
    return Links(clients, regions)


@dataclass
class Report:
    """What the spread scenario measured."""

    placements: list[dict[str, Any]]  # the controller's answers, in order
    moves: dict[int, list[tuple[int, int]]]  # client -> (from region, to region)
    expected: int  # (publication, subscriber) pairs that had to arrive
    received: int
    lost: int
    duplicates_dropped: int  # copies seen twice across a move, dropped by placement_id
    measured_percentile_ms: float
    model_percentile_ms: float
    ratio: float
    max_ms: float
    dilation: float

    @property
    def relative_error(self) -> float:
        return (
            abs(self.measured_percentile_ms - self.model_percentile_ms) / self.model_percentile_ms
        )


@dataclass(frozen=True, slots=True)
class Timing:
    interval_s: float = 2.0  # an observation interval
    period_s: float = 0.25  # between two publications of one publisher
    measured_intervals: float = 2.0  # after every move: the deliveries compared with the model


async def run_spread(
    seed: int = 1,
    per_side: int = 2,
    dilation: float = 4.0,
    timing: Timing = Timing(),
    on_progress: OnProgress | None = None,
) -> Report:
    """`per_side` publishers and subscribers in the USA, then as many in Europe too;
    `on_progress` hears each of `STEPS` as it begins."""
    step = _steps(on_progress)
    rng = np.random.default_rng(seed)
    na = cities.sample(rng, 2 * per_side, cities.in_country("US"))
    eu = cities.sample(rng, 2 * per_side, cities.in_continent("EU"))
    world = geography(np.concatenate((na[0], eu[0])), np.concatenate((na[1], eu[1])), dilation)
    constraint = Constraint(75.0, _bound(world, per_side, 75.0))
    step(0)
    async with brokers(len(REGIONS)) as ports:
        step(1)
        net = await links(world, ports)
        managers = [_manager(q, ports, net) for q in range(len(ports))]
        for m in managers:
            await m.start()
        controller = Controller(
            managers, world.L, world.LR, world.alpha, world.beta, {TOPIC: constraint},
            world.names, timing.interval_s,
        )  # fmt: skip
        try:
            spread = Spread(world, net.urls, controller, timing)
            await spread.run(per_side, step)
            step(len(STEPS))
            return spread.report(constraint, dilation)
        finally:
            for m in managers:
                await m.close()
            await net.close()


def _manager(region: int, ports: Sequence[int], net: Links) -> RegionManager:
    peers = {r: relay.url for r, relay in net.regions[region].items()}
    return RegionManager(region, f"http://127.0.0.1:{ports[region]}", peers)


def _bound(world: Geography, per_side: int, ratio: float) -> float:
    """Half way between the best single region's percentile and two regions' (0 and 1)."""
    instance = _instance(world, per_side, ratio, 0.0)
    one = min(evaluate(instance, Configuration((r,), Mode.DIRECT)).percentile_ms for r in range(3))
    two = evaluate(instance, Configuration((0, 1), Mode.DIRECT)).percentile_ms
    return float((one + two) / 2)


def _instance(world: Geography, per_side: int, ratio: float, max_ms: float) -> Instance:
    """Both continents: clients [0, p) and [2p, 3p) publish, the others subscribe."""
    pubs = np.r_[0:per_side, 2 * per_side : 3 * per_side]
    subs = np.r_[per_side : 2 * per_side, 3 * per_side : 4 * per_side]
    sizes = tuple(np.ones(1) for _ in pubs)
    return Instance(world.L, world.LR, world.alpha, world.beta, pubs, sizes, subs, ratio, max_ms)


class Spread:
    """The scenario's clients and what they sent and received."""

    def __init__(
        self, world: Geography, urls: list[list[str]], controller: Controller, timing: Timing
    ) -> None:
        self.world, self.urls, self.controller, self.timing = world, urls, controller, timing
        self.longest_s = float(world.L.max() + world.LR.max()) / 1000
        self.drain_s = 2 * self.longest_s + 0.5
        self.clients: list[MultiRegionClient] = []
        self.sent: list[tuple[str, float, int]] = []  # (placement_id, sent at, phase)
        self.joined: dict[int, float] = {}
        self.phase = 1
        self._stop = asyncio.Event()
        self._runners: list[asyncio.Task[None]] = []

    async def run(self, per_side: int, step: Callable[[int], None] = lambda i: None) -> None:
        """The timeline; `step(i)` as each of `STEPS[2:]` begins."""
        t = self.timing
        self.controller.deployed[TOPIC] = Placement(1, (0,), "direct")
        await self.controller.announce(TOPIC)
        step(2)
        await self._join(range(0, 2 * per_side), per_side)  # America
        step(3)
        await asyncio.sleep(t.interval_s)
        await self.controller.step()
        step(4)
        await self._join(range(2 * per_side, 4 * per_side), 3 * per_side)  # Europe
        step(5)
        await asyncio.sleep(t.interval_s)
        await self.controller.step()  # both continents: the topic spreads
        step(6)
        await asyncio.sleep(self.drain_s + self.longest_s + 0.5)  # every move is done
        self.phase = 3
        step(7)
        await asyncio.sleep(t.measured_intervals * t.interval_s)
        self._stop.set()
        await asyncio.gather(*self._runners)
        step(8)
        await asyncio.sleep(2 * self.longest_s + 1.0)  # the last publications arrive
        await asyncio.gather(*(x.close() for x in self.clients))

    async def _join(self, clients: range, first_subscriber: int) -> None:
        await asyncio.gather(*(self._start(c, c >= first_subscriber) for c in clients))

    async def _start(self, c: int, subscriber: bool) -> None:
        placement = self.controller.deployed[TOPIC]
        row = self.world.L[c].tolist()
        x = MultiRegionClient(
            c, TOPIC, self.urls[c], row, placement, subscriber=subscriber, drain_s=self.drain_s
        )
        await x.start()
        self.joined[c] = time.time()
        self.clients.append(x)
        if not x.subscriber:
            self._runners.append(asyncio.create_task(self._publishing(x)))

    async def _publishing(self, publisher: MultiRegionClient) -> None:
        pending: set[asyncio.Task[None]] = set()
        while not self._stop.is_set():
            task = asyncio.create_task(self._publish(publisher, time.time(), self.phase))
            pending.add(task)
            task.add_done_callback(pending.discard)
            await asyncio.sleep(self.timing.period_s)
        await asyncio.gather(*pending)

    async def _publish(self, publisher: MultiRegionClient, at: float, phase: int) -> None:
        placement_id = await publisher.publish({"from": publisher.client})
        self.sent.append((placement_id, at, phase))

    def report(self, constraint: Constraint, dilation: float) -> Report:
        subscribers = [x for x in self.clients if x.subscriber]
        expected = received = 0
        for s in subscribers:
            due = {pid for pid, at, _ in self.sent if at >= self.joined[s.client]}
            expected += len(due)
            received += len(due & {d.placement_id for d in s.deliveries})
        last = {pid for pid, _, phase in self.sent if phase == 3}
        times = sorted(
            d.latency_ms for s in subscribers for d in s.deliveries if d.placement_id in last
        )
        n = rank(constraint.ratio, len(times))
        final = self.controller.deployed[TOPIC]
        per_side = len(self.clients) // 4
        instance = _instance(self.world, per_side, constraint.ratio, constraint.max_ms)
        model = evaluate(instance, Configuration(final.regions, Mode(final.mode)))
        return Report(
            placements=[_shown(c.to_json(0.0)) for _, c in self.controller.history],
            moves={x.client: x.moves for x in self.clients if x.moves},
            expected=expected,
            received=received,
            lost=expected - received,
            duplicates_dropped=sum(s.duplicates for s in subscribers),
            measured_percentile_ms=times[n - 1] if n else 0.0,
            model_percentile_ms=model.percentile_ms,
            ratio=constraint.ratio,
            max_ms=constraint.max_ms,
            dilation=dilation,
        )


def _shown(answer: dict[str, Any]) -> dict[str, Any]:
    """What the report keeps of a placement."""
    return {k: answer[k] for k in ("regions", "mode", "percentile_ms", "meets")}
