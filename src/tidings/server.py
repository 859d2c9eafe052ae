"""Running the broker: `serve` for the CLI, `EmbeddedServer` for tests, tools and the perf
harness (a real server on 127.0.0.1 and a free port, in a background thread)."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from types import TracebackType

import uvicorn

from tidings.api.app import create_app
from tidings.broker import Broker
from tidings.config import Settings
from tidings.eventlog import EventLog
from tidings.sandbox.runner import create_runner
from tidings.store import open_store


def build_broker(settings: Settings) -> Broker:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = open_store(settings.resolved_store_url)
    log = (
        EventLog(settings.log_dir, settings.log_rotate_bytes, settings.log_rotate_s)
        if settings.event_log
        else None
    )
    return Broker(settings, store, runner=create_runner(settings.functions), eventlog=log)


def _config(settings: Settings, broker: Broker) -> uvicorn.Config:
    return uvicorn.Config(
        create_app(broker),
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        ws="websockets-sansio",
        lifespan="on",
        timeout_graceful_shutdown=5,
    )


def serve(settings: Settings) -> None:
    """Run the broker in the foreground until interrupted."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    uvicorn.Server(_config(settings, build_broker(settings))).run()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddedServer:
    """`with EmbeddedServer(settings) as server: httpx.get(server.url + "/healthz")`."""

    def __init__(self, settings: Settings) -> None:
        import dataclasses

        self.settings = dataclasses.replace(settings, host="127.0.0.1", port=free_port())
        self.url = f"http://127.0.0.1:{self.settings.port}"
        self.broker = build_broker(self.settings)
        self._server = uvicorn.Server(_config(self.settings, self.broker))
        self._thread = threading.Thread(target=self._run, name="tidings-embedded", daemon=True)

    def _run(self) -> None:
        asyncio.run(self._server.serve())

    def __enter__(self) -> EmbeddedServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the embedded Tidings server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=15)
        self.broker.store.close()
