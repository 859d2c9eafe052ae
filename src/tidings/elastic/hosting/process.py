"""One operator as a process of its own (`tidings matcher`, `tidings exit-point`): it joins
a running deployment through the coordinator and waits, unassigned, until a scale takes it
in; SIGTERM or SIGINT stops it. Removed from the membership (evicted as unreachable by a
deployment process, or its session expired), it stops and the command fails.

It is ready before it joins. A matcher loads the compiled matching kernels first (numba's disk
cache, about 0.3 s), not at its first publication, the first after the scale that takes it in
(measured: the new matchers' first batch took 0.35 s, a pause in every notification). And what
start-up made (the imports of numba, numpy, kazoo and ZeroMQ: some 120,000 objects) is taken
out of the garbage collector's sight (`tidings.heap.settle_heap`), so a full collection, which
receiving a scale's state sets off, walks the operator's state alone, not them as well
(35-90 ms a pass here before).

Its young generation is larger than Python's default (`tidings.heap.widen_young_generation`)."""

from __future__ import annotations

import asyncio
import logging
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

from tidings import heap
from tidings.elastic.coordination.coordinator import Coordinator
from tidings.elastic.operators.exit_point import ExitPointOperator, StoreSink
from tidings.elastic.operators.matcher import MatcherOperator
from tidings.elastic.operators.operator import Operator
from tidings.elastic.protocol.channels import Security, shared_context
from tidings.elastic.protocol.curve import cluster_key
from tidings.matching import kernels

log = logging.getLogger("tidings.elastic")


async def run_operator(
    role: str,
    zookeeper: str,
    cluster: str,
    bind: str,
    member_id: str | None = None,
    store_url: str = "",
    started: Callable[[Operator], None] = lambda op: None,
    session_timeout_s: float = 10.0,
    key_file: str = "",
) -> None:
    if key_file:  # the deployment's cluster key: every channel is CURVE
        Security.secure(cluster_key(Path(key_file)))
    coordinator = Coordinator(zookeeper, cluster, session_timeout_s)
    await coordinator.start()
    await coordinator.require_config()
    name = member_id or f"{'m' if role == 'matcher' else 'e'}-{uuid.uuid4().hex[:8]}"
    op: Operator
    store = None
    if role == "matcher":
        await asyncio.to_thread(kernels.warm_up)
        op = MatcherOperator(name, coordinator, bind)
        op.alone = True
    else:
        from tidings.store import open_store

        store = open_store(store_url, writer=True)
        op = ExitPointOperator(name, coordinator, bind, StoreSink(store))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    heap.settle_heap()
    heap.widen_young_generation()
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
        try:
            await op.stop()
        except Exception:  # the coordinator's session and the store still close
            log.exception("elastic: %s %s did not stop cleanly", role, name)
        await coordinator.close()
        if store is not None:
            store.close()
        # what the operator queued for its peers goes out before the process ends
        await asyncio.to_thread(shared_context().destroy, 2000)
