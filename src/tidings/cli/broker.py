"""`tidings serve | publish | subscribe | queue`."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from tidings.client import AsyncClient, Client, Message, TidingsClientError
from tidings.config import load_settings

URL = typer.Option("--url", envvar="TIDINGS_URL", help="The broker's base URL.")
DEFAULT_URL = "http://127.0.0.1:8080"


def fail(message: str) -> None:
    typer.echo(f"tidings: {message}", err=True)
    raise typer.Exit(1)


def scalar(text: str) -> Any:
    """`21.5` -> 21.5, `true` -> True, anything else stays a string."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    return value if isinstance(value, int | float | bool) else text


def pairs(items: list[str], what: str) -> dict[str, Any]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"{what} {item!r} is not key=value")
        out[key] = scalar(value)
    return out


def predicate(text: str) -> dict[str, Any]:
    parts = text.split(None, 2)
    if len(parts) == 2 and parts[1] == "exists":
        return {"key": parts[0], "op": "exists", "value": True}
    if len(parts) != 3:
        fail(f"--where {text!r} is not 'key op value' (e.g. 'temp > 20')")
    key, op, value = parts
    return {"key": key, "op": op, "value": choices(value) if op == "in" else scalar(value)}


def choices(text: str) -> Any:
    """`in` takes a JSON list (`["a", "b"]`) or comma-separated values (`a,b`)."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return [scalar(v.strip()) for v in text.split(",")]
    return value if isinstance(value, list) else [value]


def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8080).")] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help="Where state lives (default ./.tidings).")
    ] = None,
    store: Annotated[
        str | None, typer.Option(help="Store URL: sqlite:///F, postgresql://, memory://")
    ] = None,
    matching: Annotated[
        str | None, typer.Option(help="local, or spark to leave matching to the pipeline.")
    ] = None,
    event_log: Annotated[
        bool | None, typer.Option("--event-log/--no-event-log", help="Write the event logs.")
    ] = None,
    unsafe_code_functions: Annotated[
        bool,
        typer.Option(
            "--unsafe-code-functions",
            help="Where the kernel refuses the sandbox (namespaces, seccomp), accept code "
            "functions anyway, guarded only by Python-level checks. UNSAFE: docs/sandbox.md.",
        ),
    ] = False,
) -> None:
    """Run the broker."""
    from tidings.server import serve as run

    settings = load_settings(
        {
            "host": host,
            "port": port,
            "data_dir": data_dir,
            "store_url": store,
            "matching": matching,
            "event_log": event_log,
            "functions__unsafe_code_functions": unsafe_code_functions or None,
        }
    )
    if settings.functions.unsafe_code_functions:
        typer.echo(
            "tidings: WARNING --unsafe-code-functions: where the sandbox cannot start, "
            "subscribers' code runs without it (docs/sandbox.md)",
            err=True,
        )
    base = f"http://{settings.host}:{settings.port}"
    typer.echo(
        f"Tidings on {base}  (API {base}/v1, docs {base}/docs, store {settings.resolved_store_url})"
    )
    run(settings)


def publish(
    data: Annotated[str, typer.Argument(help="The data: JSON if it parses, else a string.")],
    topic: Annotated[list[str], typer.Option("--topic", "-t", help="A topic (repeatable).")] = [],  # noqa: B006
    attr: Annotated[list[str], typer.Option("--attr", "-a", help="key=value (repeatable).")] = [],  # noqa: B006
    function_type: Annotated[list[str], typer.Option("--function-type", "-f")] = [],  # noqa: B006
    url: Annotated[str, URL] = DEFAULT_URL,
) -> None:
    """Publish one publication."""
    try:
        value: Any = orjson.loads(data)
    except orjson.JSONDecodeError:
        value = data
    with Client(url) as client:
        result = client.publish(
            value, topics=topic, attributes=pairs(attr, "--attr"), function_types=function_type
        )
    typer.echo(orjson.dumps({"id": result.id, "deliveries": result.deliveries}).decode())


def subscribe(
    topic: Annotated[list[str], typer.Option("--topic", "-t", help="A topic or pattern.")] = [],  # noqa: B006
    where: Annotated[list[str], typer.Option("--where", "-w", help="'key op value'.")] = [],  # noqa: B006
    builtin: Annotated[str | None, typer.Option(help="A library function's name.")] = None,
    function_type: Annotated[str | None, typer.Option(help="With --builtin.")] = None,
    param: Annotated[list[str], typer.Option("--param", help="k=v for --builtin.")] = [],  # noqa: B006
    subscriber_id: Annotated[str | None, typer.Option("--id", help="Reuse a subscriber.")] = None,
    token: Annotated[str | None, typer.Option(help="Its token, with --id.")] = None,
    count: Annotated[int, typer.Option(help="Stop after this many deliveries (0: never).")] = 0,
    url: Annotated[str, URL] = DEFAULT_URL,
) -> None:
    """Register (or reuse) a subscriber, subscribe, print deliveries as JSON lines, ack them."""
    asyncio.run(
        _subscribe(url, topic, where, builtin, function_type, param, subscriber_id, token, count)
    )


async def _subscribe(
    url: str,
    topics: list[str],
    where: list[str],
    builtin: str | None,
    ftype: str | None,
    params: list[str],
    sid: str | None,
    token: str | None,
    count: int,
) -> None:
    bodies: list[dict[str, Any]] = []  # checked before anything is registered
    if topics:
        bodies.append({"topics": topics})
    if where:
        bodies.append({"predicates": [predicate(w) for w in where]})
    if builtin:
        bodies.append(
            {
                "function": {
                    "function_type": ftype or builtin,
                    "builtin": builtin,
                    "params": pairs(params, "--param"),
                }
            }
        )
    async with AsyncClient(url) as client:
        if sid and token:
            me = client.subscriber(sid, token)
        else:
            me = await client.register()
            typer.echo(orjson.dumps({"subscriber": me.id, "token": me.token}).decode(), err=True)
        for body in bodies:
            await me.subscribe(**body)
        await _print_deliveries(me, count)


async def _print_deliveries(me: Any, count: int) -> None:
    show = _pretty if sys.stdout.isatty() else _json_line
    seen = 0
    async with me.stream() as stream:
        async for message in stream:
            show(message)
            await stream.ack([message.receipt])
            seen += 1
            if count and seen >= count:
                return


def _json_line(message: Message) -> None:
    line = {
        "publication_id": message.publication_id,
        "attempt": message.attempt,
        "body": message.body,
    }
    typer.echo(orjson.dumps(line).decode())
    sys.stdout.flush()


def _pretty(message: Message) -> None:
    from rich.console import Console
    from rich.markup import escape

    body = message.body if isinstance(message.body, dict) else {}
    topics = ", ".join(body.get("topics") or []) or "-"
    data = orjson.dumps(body.get("data")).decode()
    retry = f" [yellow](attempt {message.attempt})[/]" if message.attempt > 1 else ""
    Console(highlight=False).print(
        f"[dim]{message.publication_id}[/] [bold cyan]{escape(topics)}[/]{retry} {escape(data)}"
    )


def queue(
    subscriber_id: Annotated[str, typer.Option("--id", help="The subscriber.")],
    token: Annotated[str, typer.Option(help="Its token.")],
    dead_letters: Annotated[
        bool, typer.Option("--dead-letters", help="List dead letters.")
    ] = False,
    redrive: Annotated[bool, typer.Option("--redrive", help="Re-drive all dead letters.")] = False,
    url: Annotated[str, URL] = DEFAULT_URL,
) -> None:
    """Show a subscriber's queue depth; list, then re-drive, its dead letters."""
    with Client(url) as client:
        me = client.subscriber(subscriber_id, token)
        if dead_letters:
            for d in me.dead_letters():
                typer.echo(
                    orjson.dumps(
                        {
                            "id": d.id,
                            "publication_id": d.publication_id,
                            "reason": d.reason,
                            "attempt": d.attempt,
                        }
                    ).decode()
                )
        if redrive:
            typer.echo(orjson.dumps({"redriven": me.redrive()}).decode())
        depth = me.depth()
        typer.echo(
            orjson.dumps(
                {"ready": depth.ready, "leased": depth.leased, "dead": depth.dead}
            ).decode()
        )


def register(app: typer.Typer) -> None:
    for command in (serve, publish, subscribe, queue):
        app.command()(_friendly(command))


def _friendly(command: Any) -> Any:
    """Client errors become one line on stderr, never a traceback."""
    import functools

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with contextlib.suppress(KeyboardInterrupt):
                return command(*args, **kwargs)
        except TidingsClientError as exc:
            field = f" ({exc.field})" if exc.field else ""
            fail(f"{exc.message}{field}" if exc.status else exc.message)
        return None

    return wrapper
