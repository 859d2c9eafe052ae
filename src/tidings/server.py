"""Running the broker: `serve` for the CLI, `EmbeddedServer` for tests, tools and the perf
harness (a real server on 127.0.0.1 and a free port, in a background thread)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

import httpx
import uvicorn

from tidings import heap, logs
from tidings.addresses import Own
from tidings.admin import admin_token
from tidings.api.app import create_app
from tidings.api.guards import WebGuard
from tidings.api.lane import ENDPOINTS, PublishLane
from tidings.api.v1.admin import Simulator
from tidings.broker import Broker
from tidings.config import Settings
from tidings.connections import guarded, seated
from tidings.errors import ErrorCode, TidingsError
from tidings.eventlog import EventLog, Retention
from tidings.ids import hash_token
from tidings.ports import free_port
from tidings.private import UMASK, tighten
from tidings.sandbox.runner import create_runner
from tidings.sim.background import Simulations
from tidings.sim.config import parse_config
from tidings.store import check_store_url, open_store


def build_broker(settings: Settings) -> Broker:
    tighten(settings.data_dir)  # 0700 and 0600, older deployments' files included
    store = open_store(settings.resolved_store_url)
    log = (
        EventLog(
            settings.log_dir,
            settings.log_rotate_bytes,
            settings.log_rotate_s,
            Retention(settings.log_retention_s, settings.log_retention_bytes),
        )
        if settings.event_log
        else None
    )
    token, _ = admin_token(settings.admin_token, settings.data_dir)
    elastic = None
    if settings.matching == "elastic":
        from tidings.elastic.hosting.seam import ElasticMatching

        elastic = ElasticMatching(
            settings.elastic, store, settings.data_dir / "elastic-cluster.key"
        )
    broker = Broker(
        settings,
        store,
        runner=create_runner(settings.functions, Own(settings.host, settings.port)),
        eventlog=log,
        admin_token_hash=hash_token(token),
        elastic=elastic,
    )
    if elastic is not None:
        broker.metrics.registry.register(elastic.collector())
    return broker


def build_app(broker: Broker) -> WebGuard:
    """The application, with the simulations the console runs, behind the publish lane,
    behind the guard against web pages (which the lane must not bypass)."""
    simulations = Simulations(broker.settings.data_dir / "simulations")
    app = create_app(broker, Simulator(simulations, parse_config))
    return WebGuard(PublishLane(app, broker), broker.settings)


# the publish lane's routes answer at once, in one write: a lighter cycle serves them
LIGHT_PATHS = frozenset(path.encode("ascii") for path in ENDPOINTS)


def _config(settings: Settings, broker: Broker) -> uvicorn.Config:
    return uvicorn.Config(
        build_app(broker),
        host=settings.host,
        port=settings.port,
        log_config=None,  # tidings.logs sets up every logger, uvicorn's included
        log_level=settings.logs.level,
        access_log=settings.logs.access_log,
        http=guarded(settings.http, broker.metrics, LIGHT_PATHS),
        ws=seated(settings.http),
        ws_max_size=settings.http.ws_max_frame_bytes,
        limit_concurrency=settings.http.max_connections,
        lifespan="on",
        timeout_graceful_shutdown=5,
        timeout_keep_alive=settings.http.keep_alive_s,
        ws_ping_interval=settings.http.ws_ping_interval_s,
        ws_ping_timeout=settings.http.ws_ping_timeout_s,
        proxy_headers=bool(settings.http.trusted_proxies),
        forwarded_allow_ips=settings.http.trusted_proxies or None,
    )


def serve(settings: Settings) -> None:
    """Run the broker in the foreground until interrupted."""
    logs.configure(settings.logs)
    heap.widen_young_generation()
    os.umask(UMASK)  # whatever else this process writes (the simulator's runs, Spark's work)
    check_store_url(settings.resolved_store_url)  # a wrong setting is said as itself, first
    listening = bind(settings.host, settings.port)  # before the store opens: fail fast
    uvicorn.Server(_config(settings, build_broker(settings))).run(sockets=[listening])


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, or UNAVAILABLE in Tidings' words (the port is taken, the
    address is not this machine's) instead of uvicorn's traceback."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto TCP, not 0: asyncio sets TCP_NODELAY only on connections whose socket says TCP,
    # and without it a kept-alive client waited out a delayed ACK (40 ms) for each body
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        why = "is in use: stop what holds it, or choose another with --port"
        if exc.errno != errno.EADDRINUSE:
            why = f"cannot be bound ({exc.strerror})"
        detail = f"{host}:{port} {why}"
        raise TidingsError(ErrorCode.UNAVAILABLE, field="port", detail=detail) from None
    return sock


class EmbeddedServer:
    """`with EmbeddedServer(settings) as server: httpx.get(server.url + "/healthz")`."""

    def __init__(self, settings: Settings) -> None:
        import dataclasses

        # bound before the broker is built: a port only looked up could be taken meanwhile
        # (the elastic operators bind ports the system picks, as `free_port` does)
        self._listening = bind("127.0.0.1", 0)
        port = int(self._listening.getsockname()[1])
        self.settings = dataclasses.replace(settings, host="127.0.0.1", port=port)
        self.url = f"http://127.0.0.1:{port}"
        try:
            self.broker = build_broker(self.settings)
        except BaseException:
            self._listening.close()
            raise
        self._server = uvicorn.Server(_config(self.settings, self.broker))
        self._thread = threading.Thread(target=self._run, name="tidings-embedded", daemon=True)

    def _run(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._listening]))

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
        self.broker.store.sync.close()


@contextlib.contextmanager
def embedded_broker(data_dir: Path) -> Iterator[str]:
    """A broker of its own for a simulation given no URL (`tidings.sim.simulation.Embedded`):
    its data in `data_dir`, no event log; yields its URL."""
    from tidings.config import load_settings

    with EmbeddedServer(load_settings({"data_dir": data_dir, "event_log": False})) as server:
        yield server.url


@contextlib.contextmanager
def broker_process(
    data_dir: Path, port: int | None = None, *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`tidings serve` in its own process (its own GIL; killable), and its URL once it
    answers. Extra `args` go to `serve`, e.g. `--store memory://`; `env` adds to this
    process's environment."""
    with broker_processes([data_dir], [port or free_port()], *args, env=env) as [started]:
        yield started


LOG_FILE = "serve.log"  # a broker process's stderr, in its data directory


@contextlib.contextmanager
def broker_processes(
    data_dirs: Sequence[Path],
    ports: Sequence[int],
    *args: str,
    env: dict[str, str] | None = None,
    each: Sequence[Sequence[str]] = (),
) -> Iterator[list[tuple[subprocess.Popen[bytes], str]]]:
    """Several `tidings serve` processes started at once (none waits for another), and
    their URLs once every one answers; all are stopped on exit. Each one's log goes to
    `<data dir>/serve.log`: a pipe nobody reads would fill and block the broker. `each`:
    arguments of the i-th broker's own, after the shared ones."""
    started: list[tuple[subprocess.Popen[bytes], str]] = []
    try:
        for i, (data_dir, port) in enumerate(zip(data_dirs, ports, strict=True)):
            cmd = [sys.executable, "-m", "tidings.cli.main", "serve", "--port", str(port)]
            cmd += ["--data-dir", str(data_dir), *args, *(each[i] if each else ())]
            data_dir.mkdir(parents=True, exist_ok=True)
            with (data_dir / LOG_FILE).open("ab") as log:
                proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=_with(env))
            started.append((proc, f"http://127.0.0.1:{port}"))
        for (proc, url), data_dir in zip(started, data_dirs, strict=False):
            _wait_until_up(proc, url, data_dir / LOG_FILE)
        yield started
    finally:
        for proc, _ in started:
            stop(proc)


def _with(env: dict[str, str] | None) -> dict[str, str] | None:
    return None if env is None else {**os.environ, **env}


def stop(proc: subprocess.Popen[bytes], grace_s: float = 10) -> None:
    """SIGTERM, and SIGKILL when it is not gone after `grace_s`."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_until_up(
    proc: subprocess.Popen[bytes], url: str, log: Path, timeout_s: float = 30
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            return
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                said = log.read_text(errors="replace")[-500:] if log.exists() else ""
                raise RuntimeError(f"the broker did not start: {said}") from None
            time.sleep(0.05)
