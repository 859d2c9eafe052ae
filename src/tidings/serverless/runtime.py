"""One broker per function instance: built by the first request (the cold start), kept by
the platform between requests while the instance is warm, frozen in between.

Stateless (`serverless.enabled`): nothing runs between requests. Before each request the
broker reads the subscription changes once its index is older than the staleness bound (the
paper's 10 s by default here), in proportion to the changes; after it, the request's own work
(function evaluations) is finished before the answer leaves, as a frozen instance would stall
it. The chores (retention, expiry, queue bounds, owed evaluations, webhook pushes) are the
scheduled handler's: `Runtime.housekeep`.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from tidings.addresses import Own
from tidings.api.app import create_app
from tidings.api.guards import WebGuard
from tidings.api.lane import PublishLane
from tidings.broker import Broker
from tidings.config import (
    FunctionSettings,
    HTTPSettings,
    ServerlessSettings,
    Settings,
    SubscriptionSettings,
    load_settings,
)
from tidings.delivery.webhooks import Webhooks
from tidings.ids import hash_token
from tidings.private import private_dir
from tidings.sandbox.runner import create_runner
from tidings.serverless import cold
from tidings.store import open_store

log = logging.getLogger("tidings.serverless")
FINISH_S = 20.0  # a request's function evaluations past this stay owed, for housekeeping
THAWED_S = 60.0  # idle this long, the instance checks its store connections first

# The defaults of a function instance, beneath its environment (TIDINGS_*): stateless; the
# paper's staleness bound; no event log on a disk that goes with the instance; no code
# functions (the platforms grant no namespaces for their boundary); any Host, as API Gateway
# and Azure answer on their own names (the rebinding guard protects brokers on loopback).
BASE = Settings(
    data_dir=Path(tempfile.gettempdir()) / "tidings",
    event_log=False,
    serverless=ServerlessSettings(enabled=True),
    subscriptions=SubscriptionSettings(staleness_s=10.0),
    functions=FunctionSettings(code_functions=False),
    http=HTTPSettings(allowed_hosts="*"),
)


def settings_from_env(env: Mapping[str, str] | None = None) -> Settings:
    """The instance's settings: its environment (and `TIDINGS_CONFIG`'s file) over `BASE`."""
    return load_settings(env=env, base=BASE)


class Runtime:
    """The ASGI application both platforms' adapters serve, around a broker built lazily."""

    def __init__(
        self, settings: Settings | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self._settings, self._clock = settings, clock
        self._started: tuple[Broker, ASGIApp] | None = None
        self._last = time.monotonic()  # the end of the last request
        self._lock: asyncio.Lock | None = None
        # the cold start's phases, seconds: what the start-up benchmark reports
        self.timings: dict[str, float] = {}

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = settings_from_env()
        return self._settings

    async def started(self) -> tuple[Broker, ASGIApp]:
        if self._started is None:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                if self._started is None:
                    self._started = await self._start()
        return self._started

    async def _start(self) -> tuple[Broker, ASGIApp]:
        settings = self.settings
        if not settings.store_url:
            log.warning(
                "no TIDINGS_STORE_URL: a SQLite file in %s, which this function instance holds "
                "alone; give the functions a PostgreSQL URL (docs/serverless.md)",
                settings.data_dir,
            )
        private_dir(settings.data_dir)
        began = time.perf_counter()
        store = await asyncio.to_thread(open_store, settings.resolved_store_url)
        connected = time.perf_counter()
        token = settings.admin_token  # empty: no admin calls (no instance may make one up)
        broker = Broker(
            settings,
            store,
            runner=create_runner(settings.functions, Own(settings.host, settings.port)),
            admin_token_hash=hash_token(token) if token else "",
            clock=self._clock,
        )
        app = WebGuard(PublishLane(create_app(broker), broker), settings)
        await broker.start()
        cold.end()
        loaded = time.perf_counter()
        self.timings = {"connect_s": connected - began, "load_s": loaded - connected}
        log.info("tidings started as a function: %s", self.timings)
        return broker, app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        broker, app = await self.started()
        await self._thaw(broker)
        await broker.freshen()
        try:
            await app(scope, receive, send)
        finally:
            await broker.finish(FINISH_S)
            self._last = time.monotonic()

    async def _thaw(self, broker: Broker) -> None:
        """After a long idle (frozen, most likely), the store's pooled connections checked:
        a database ends idle connections, and the first request would fail on one."""
        check = getattr(broker.store.sync, "check_connections", None)
        if check is not None and time.monotonic() - self._last > THAWED_S:
            await asyncio.to_thread(check)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """Nothing to start before the first request (the broker is built by it)."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def housekeep(self) -> dict[str, Any]:
        """The scheduled handler: every chore once, then the webhooks pushed for at most
        `serverless.push_s`; what was done."""
        broker, _ = await self.started()
        await broker.freshen()
        done: dict[str, Any] = dict(await broker.housekeep(FINISH_S))
        began = time.perf_counter()
        await Webhooks(broker.outlet()).push_for(broker.settings.serverless.push_s)
        done["pushed_s"] = round(time.perf_counter() - began, 3)
        return done

    async def close(self) -> None:
        if self._started is not None:
            broker, _ = self._started
            self._started = None
            await broker.close()
            await asyncio.to_thread(broker.store.sync.close)
