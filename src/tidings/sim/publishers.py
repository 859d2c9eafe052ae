"""Publishers as asyncio tasks, each on its own schedule; every send is logged with its time."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass

from tidings.client import AsyncClient, TidingsClientError
from tidings.sim.config import PublisherGroup, SimConfig
from tidings.sim.control import Control
from tidings.sim.events import EventWriter
from tidings.sim.schedules import Publications, planned, schedule


@dataclass
class Counter:
    published: int = 0
    errors: int = 0


def total_planned(config: SimConfig) -> int:
    return sum(planned(p, config.duration) * p.count for p in config.publishers)


async def _publish_one(
    client: AsyncClient, body: dict[str, object], name: str, writer: EventWriter
) -> bool:
    sent_at = time.time()
    try:
        answer = await client.publish(**body)  # type: ignore[arg-type]
    except TidingsClientError as exc:
        writer.write({"event": "error", "publisher": name, "code": exc.code, "at": sent_at})
        return False
    keys = ("topics", "attributes", "function_types")
    event = {k: body[k] for k in keys} | {
        "event": "published",
        "publication_id": answer.id,
        "publisher": name,
        "sent_at": sent_at,
        "published_at": answer.published_at,
        "at": time.time(),
        "deliveries": answer.deliveries,
    }
    writer.write(event)
    return True


async def _publisher(
    client: AsyncClient,
    pub: PublisherGroup,
    name: str,
    context: tuple[SimConfig, Control, EventWriter, Counter],
) -> None:
    config, control, writer, counter = context
    rng = random.Random(f"{config.seed}-{name}")
    bodies = Publications(pub, rng)
    for seq, at in enumerate(schedule(pub, config.duration, rng)):
        if not await control.sleep_until(control.start + at):
            return
        if await _publish_one(client, bodies.body(seq), name, writer):
            counter.published += 1
        else:
            counter.errors += 1


async def publish_all(
    client: AsyncClient, config: SimConfig, control: Control, writer: EventWriter, counter: Counter
) -> None:
    context = (config, control, writer, counter)
    tasks = [
        _publisher(client, pub, f"p{g}.{i}", context)
        for g, pub in enumerate(config.publishers)
        for i in range(pub.count)
    ]
    await asyncio.gather(*tasks)


async def warm_up(client: AsyncClient, config: SimConfig, control: Control) -> None:
    """One unlogged publication per publisher group, then wait (up to `warmup` s) for the
    first delivery, so cold starts (function workers, caches) stay out of the figures."""
    for pub in config.publishers:
        await client.publish(**Publications(pub, random.Random(0)).body(-1))
    deadline = time.time() + config.warmup
    while not control.delivered_count and time.time() < deadline and not control.stopped:
        await asyncio.sleep(0.05)
    await asyncio.sleep(min(0.5, config.warmup))  # the rest of the warm-up deliveries
