"""One operator as a process of its own (`tidings matcher`, `tidings exit-point`): it joins
a running deployment through the coordinator and waits, unassigned, until a scale takes it
in; SIGTERM or SIGINT stops it."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import uuid
from collections.abc import Callable

from tidings.elastic.coordinator import Coordinator
from tidings.elastic.exit_point import ExitPointOperator, StoreSink
from tidings.elastic.matcher import MatcherOperator
from tidings.elastic.operator import Operator


async def run_operator(
    role: str,
    zookeeper: str,
    cluster: str,
    bind: str,
    member_id: str | None = None,
    store_url: str = "",
    started: Callable[[Operator], None] = lambda op: None,
) -> None:
    coordinator = Coordinator(zookeeper, cluster)
    await coordinator.start()
    await coordinator.require_config()
    name = member_id or f"{'m' if role == 'matcher' else 'e'}-{uuid.uuid4().hex[:8]}"
    op: Operator
    store = None
    if role == "matcher":
        op = MatcherOperator(name, coordinator, bind)
    else:
        from tidings.store import open_store

        store = open_store(store_url)
        op = ExitPointOperator(name, coordinator, bind, StoreSink(store))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await op.start()
    started(op)
    try:
        ended = asyncio.ensure_future(op.wait())
        waiting = asyncio.ensure_future(stop.wait())
        await asyncio.wait([ended, waiting], return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if ended.done():
            ended.result()  # a failure of the operator's loop is raised
        ended.cancel()
    finally:
        with contextlib.suppress(Exception):
            await op.stop()
        await coordinator.close()
        if store is not None:
            store.close()
