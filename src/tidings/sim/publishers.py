"""Publishers as asyncio tasks, each on its own schedule; every send is logged with its time."""

from __future__ import annotations

import asyncio
import random
import time

from tidings.client import AsyncClient, TidingsClientError
from tidings.sim.config import PublisherGroup, SimConfig
from tidings.sim.control import Control
from tidings.sim.events import EventWriter
from tidings.sim.workload import Publications, planned, schedule


class Counter:
    published = 0
    errors = 0


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
