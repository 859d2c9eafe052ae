"""`tidings serve | publish | subscribe | queue`."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import msgspec
import orjson
import typer

from tidings.admin import admin_token
from tidings.client import AsyncClient, Client, Message, TidingsClientError
from tidings.config import Limits, load_settings
from tidings.errors import TidingsError
from tidings.model import parse_subscription_body

URL = typer.Option("--url", envvar="TIDINGS_URL", help="The broker's base URL.")
DEFAULT_URL = "http://127.0.0.1:8080"
ORDERING = ("<", "<=", ">", ">=")


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr; exit 2 for bad input (the default), 1 for anything else."""
    typer.echo(f"tidings: {message}", err=True)
    raise typer.Exit(code)


def scalar(text: str) -> Any:
    """`21.5` -> 21.5, `true` -> True, `"21"` -> "21" (quoted: a string), anything else stays
    a string."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    return value if isinstance(value, int | float | bool | str) else text


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
    parsed = choices(value) if op == "in" else scalar(value)
    if op in ORDERING and isinstance(parsed, str) and not value.startswith('"'):
        fail(
            f"--where {text!r} compares with the word {value!r}: give a number, or quote a "
            f"string to compare strings ('{key} {op} \"{value}\"')"
        )
    return {"key": key, "op": op, "value": parsed}


def choices(text: str) -> Any:
    """`in` takes a JSON list (`["a", "b"]`) or comma-separated values (`a,b`)."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return [scalar(v.strip()) for v in text.split(",")]
    return value if isinstance(value, list) else [value]


CONFIG = typer.Option(
    "--config", help="A tidings.toml (default: $TIDINGS_CONFIG); flags and TIDINGS_* win over it."
)


def serve(
    config: Annotated[Path | None, CONFIG] = None,
    host: Annotated[str | None, typer.Option(help="Address to bind (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8080).")] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help="Where state lives (default ./.tidings).")
    ] = None,
    store: Annotated[
        str | None, typer.Option(help="Store URL: sqlite:///F, postgresql://, memory://")
    ] = None,
    matching: Annotated[
        str | None,
        typer.Option(
            help="local, spark to leave matching to the pipeline, or elastic (E-SilboPS "
            "operators: docs/elastic.md)."
        ),
    ] = None,
    zookeeper: Annotated[
        str | None,
        typer.Option(help="With --matching elastic: ZooKeeper's HOST:PORT (default: its own)."),
    ] = None,
    matchers: Annotated[
        int | None, typer.Option(help="With --matching elastic: matchers at start (default 1).")
    ] = None,
    exit_points: Annotated[
        int | None,
        typer.Option(help="With --matching elastic: exit points at start (default 1)."),
    ] = None,
    event_log: Annotated[
        bool | None, typer.Option("--event-log/--no-event-log", help="Write the event logs.")
    ] = None,
    log_level: Annotated[
        str | None, typer.Option(help="debug, info (default), warning or error.")
    ] = None,
    log_format: Annotated[str | None, typer.Option(help="text (default) or json lines.")] = None,
    access_log: Annotated[
        bool | None, typer.Option("--access-log/--no-access-log", help="A line per request.")
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
            "elastic__zookeeper": zookeeper,
            "elastic__matchers": matchers,
            "elastic__exit_points": exit_points,
            "event_log": event_log,
            "logs__level": log_level and log_level.lower(),
            "logs__format": log_format,
            "logs__access_log": access_log,
            "functions__unsafe_code_functions": unsafe_code_functions or None,
        },
        config=config,
    )
    if settings.functions.unsafe_code_functions:
        typer.echo(
            "tidings: WARNING --unsafe-code-functions: where the sandbox cannot start, "
            "subscribers' code runs without it (docs/sandbox.md)",
            err=True,
        )
    base = f"http://{settings.host}:{settings.port}"
    typer.echo(
        f"Tidings on {base}  (API {base}/v1, console {base}/ui, docs {base}/docs, "
        f"store {settings.resolved_store_url})"
    )
    token, made = admin_token(settings.admin_token, settings.data_dir)
    if made:
        path = settings.data_dir / "admin-token"
        typer.echo(f"Admin token (shown once, kept in {path}): {token}")
    run(settings)


KEY = typer.Option(
    "--key",
    envvar="TIDINGS_KEY",
    help="The broker's publisher or registration key, where it requires one.",
)


def publish(
    data: Annotated[str, typer.Argument(help="The data: JSON if it parses, else a string.")],
    topic: Annotated[list[str], typer.Option("--topic", "-t", help="A topic (repeatable).")] = [],  # noqa: B006
    attr: Annotated[list[str], typer.Option("--attr", "-a", help="key=value (repeatable).")] = [],  # noqa: B006
    function_type: Annotated[list[str], typer.Option("--function-type", "-f")] = [],  # noqa: B006
    dedup_id: Annotated[
        str | None,
        typer.Option(
            "--dedup-id",
            help="Name the publication: the same name again within the broker's dedup "
            "window publishes nothing more (default: one of its own, for its retries).",
        ),
    ] = None,
    url: Annotated[str, URL] = DEFAULT_URL,
    key: Annotated[str | None, KEY] = None,
) -> None:
    """Publish one publication (retried, under its dedup id, if the answer is lost)."""
    try:
        value: Any = orjson.loads(data)
    except orjson.JSONDecodeError:
        value = data
    if dedup_id is not None and not 1 <= len(dedup_id) <= 128:
        fail("--dedup-id is 1 to 128 characters")
    with Client(url, key=key) as client:
        result = client.publish(
            value,
            topics=topic,
            attributes=pairs(attr, "--attr"),
            function_types=function_type,
            dedup_id=dedup_id,
        )
    answer: dict[str, Any] = {"id": result.id, "deliveries": result.deliveries}
    if result.duplicate:
        answer["duplicate"] = True
    typer.echo(orjson.dumps(answer).decode())


def subscribe(
    topic: Annotated[list[str], typer.Option("--topic", "-t", help="A topic or pattern.")] = [],  # noqa: B006
    where: Annotated[list[str], typer.Option("--where", "-w", help="'key op value'.")] = [],  # noqa: B006
    builtin: Annotated[str | None, typer.Option(help="A library function's name.")] = None,
    function_type: Annotated[str | None, typer.Option(help="With --builtin.")] = None,
    param: Annotated[list[str], typer.Option("--param", help="k=v for --builtin.")] = [],  # noqa: B006
    subscriber_id: Annotated[str | None, typer.Option("--id", help="Reuse a subscriber.")] = None,
    token: Annotated[str | None, typer.Option(help="Its token, with --id.")] = None,
    durable: Annotated[
        bool, typer.Option(help="Keep the new subscriber after this command ends.")
    ] = False,
    count: Annotated[int, typer.Option(help="Stop after this many deliveries (0: never).")] = 0,
    url: Annotated[str, URL] = DEFAULT_URL,
    key: Annotated[str | None, KEY] = None,
) -> None:
    """Register (or reuse) a subscriber, subscribe, print deliveries as JSON lines, ack them.

    A new subscriber is ephemeral unless --durable: the broker deletes it, with its queue,
    a while after this command ends."""
    bodies = _subscription_bodies(topic, where, builtin, function_type, param)
    asyncio.run(_subscribe(url, bodies, subscriber_id, token, durable, count, key))


def _subscription_bodies(
    topics: list[str], where: list[str], builtin: str | None, ftype: str | None, params: list[str]
) -> list[dict[str, Any]]:
    """The subscriptions asked for, checked as the broker would before anything is
    registered, so that a mistake leaves nothing behind."""
    bodies: list[dict[str, Any]] = []
    if topics:
        bodies.append({"topics": topics})
    if where:
        bodies.append({"predicates": [predicate(w) for w in where]})
    if builtin:
        function = {"function_type": ftype or builtin, "builtin": builtin}
        bodies.append({"function": function | {"params": pairs(params, "--param")}})
    for body in bodies:
        try:
            parse_subscription_body(body, Limits())
        except TidingsError as exc:
            fail(f"{exc.message} ({_flag(exc.field)})")
    return bodies


def _flag(field: str | None) -> str:
    """The option a model field came from: `predicates[0].op` -> `--where`."""
    head = (field or "").split("[", 1)[0].split(".", 1)[0]
    return {"predicates": "--where", "topics": "--topic", "function": "--builtin"}.get(head, head)


async def _subscribe(
    url: str,
    bodies: list[dict[str, Any]],
    sid: str | None,
    token: str | None,
    durable: bool,
    count: int,
    key: str | None = None,
) -> None:
    async with AsyncClient(url, key=key) as client:
        if sid and token:
            me = client.subscriber(sid, token)
        else:
            me = await client.register(ephemeral=not durable)
            typer.echo(orjson.dumps({"subscriber": me.id, "token": me.token}).decode(), err=True)
        try:
            for body in bodies:
                await me.subscribe(**body)
        except TidingsClientError:
            if not sid:  # refused after all: the subscriber made for it goes too
                await me.unregister()
            raise
        await _print_deliveries(me, count)


async def _print_deliveries(me: Any, count: int) -> None:
    show = _pretty if sys.stdout.isatty() else _json_line
    seen = 0
    async with me.stream() as stream:  # reconnects, with backoff, when the broker restarts
        async for message in stream:
            show(message)
            await message.ack()
            seen += 1
            if count and seen >= count:
                return


def _json_line(message: Message[Any]) -> None:
    line = {
        "publication_id": message.publication_id,
        "attempt": message.attempt,
        "body": message.body,
    }
    typer.echo(orjson.dumps(line).decode())
    sys.stdout.flush()


def _pretty(message: Message[Any]) -> None:
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


def subscribers(
    admin_token: Annotated[
        str, typer.Option(envvar="TIDINGS_ADMIN_TOKEN", help="The broker's admin token.")
    ],
    delete: Annotated[
        list[str], typer.Option("--delete", help="Delete this subscriber (repeatable).")
    ] = [],  # noqa: B006
    url: Annotated[str, URL] = DEFAULT_URL,
) -> None:
    """List subscribers, or delete some.

    One JSON line each: id, created, last seen, ephemeral, depth."""
    with Client(url) as client:
        admin = client.admin(admin_token)
        for subscriber_id in delete:
            admin.delete_subscriber(subscriber_id)
            typer.echo(orjson.dumps({"deleted": subscriber_id}).decode())
        if delete:
            return
        for record in admin.subscribers():
            typer.echo(msgspec.json.encode(record).decode())


def register(app: typer.Typer) -> None:
    for command in (serve, publish, subscribe, queue, subscribers):
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
            refused = 400 <= exc.status < 500  # the input was wrong; else the broker or network
            fail(f"{exc.message}{field}" if exc.status else exc.message, 2 if refused else 1)
        return None

    return wrapper
