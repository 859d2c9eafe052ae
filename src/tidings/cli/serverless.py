"""`tidings serverless local | housekeeping`: the function handlers on this machine."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from tidings.cli.broker import CONFIG
from tidings.errors import invalid

app = typer.Typer(
    help="Tidings as AWS Lambda and Azure Functions handlers (docs/serverless.md).",
    no_args_is_help=True,
)


@app.command("local")
def local(
    platform: Annotated[
        str, typer.Option(help="aws or azure: whose events to invoke with.")
    ] = "aws",
    payload: Annotated[
        str, typer.Option("--format", help="With aws: API Gateway's v2 (HTTP API) or v1 (REST).")
    ] = "v2",
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 3000,
    instances: Annotated[int, typer.Option(help="Function instances at most, each serial.")] = 4,
    cold: Annotated[bool, typer.Option(help="A fresh instance for every request.")] = False,
) -> None:
    """Serve the handlers on 127.0.0.1 as the platform's front door would.

    Each request is an invocation of a function instance (a process); TIDINGS_* come from
    this environment."""
    import uvicorn

    from tidings.server import bind
    from tidings.serverless.local import FrontDoor

    if platform not in ("aws", "azure"):
        raise invalid("platform", "--platform is aws or azure")
    if payload not in ("v2", "v1"):
        raise invalid("format", "--format is v2 or v1")
    if instances < 1:
        raise invalid("instances", "--instances is at least 1")
    door = FrontDoor(platform, payload, instances, cold)  # type: ignore[arg-type]
    listening = bind("127.0.0.1", port)
    typer.echo(f"Tidings as {platform} functions on http://127.0.0.1:{port}", err=True)
    config = uvicorn.Config(
        door, log_config=None, lifespan="on", timeout_graceful_shutdown=5, proxy_headers=False
    )
    uvicorn.Server(config).run(sockets=[listening])


@app.command("housekeeping")
def housekeeping(
    config: Annotated[Path | None, CONFIG] = None,
    store: Annotated[str | None, typer.Option(help="Store URL (postgresql://...).")] = None,
    push_s: Annotated[
        float | None, typer.Option(help="Push webhooks for at most this long (default 40 s).")
    ] = None,
) -> None:
    """What the scheduled handler does, once; prints what was done as JSON.

    Presence, retention, queue bounds, owed function evaluations, then webhook pushes."""
    from tidings.config import load_settings
    from tidings.serverless.runtime import BASE, Runtime

    overrides: dict[str, Any] = {"store_url": store, "serverless__push_s": push_s}
    runtime = Runtime(load_settings(overrides, config=config, base=BASE))

    async def once() -> dict[str, Any]:
        try:
            return await runtime.housekeep()
        finally:
            await runtime.close()

    typer.echo(orjson.dumps(asyncio.run(once())).decode())


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="serverless")
