"""`tidings config show`: the effective settings, and where each came from."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.table import Table

from tidings.cli.broker import CONFIG
from tidings.config import explain

app = typer.Typer(help="The configuration: what is in force, and from where.", no_args_is_help=True)


@app.command("show")
def show(
    config: Annotated[Path | None, CONFIG] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Every setting: its value and its source (flag, environment, file or default)."""
    settings, sources = explain(config=config)
    rows = [(key, _value(settings, key), source) for key, source in sorted(sources.items())]
    if as_json:
        for key, value, source in rows:
            shown = _shown(key, value) if _secret(key, value) else value
            line = {"setting": key.replace("__", "."), "value": shown, "source": source}
            typer.echo(orjson.dumps(line, default=str).decode())
        return
    table = Table(show_edge=False)
    for column in ("setting", "value", "source"):
        table.add_column(column)
    for key, value, source in rows:
        table.add_row(key.replace("__", "."), _shown(key, value), source)
    Console().print(table)


def _value(settings: Any, key: str) -> Any:
    for part in key.split("__"):
        settings = getattr(settings, part)
    return settings


def _secret(key: str, value: Any) -> bool:
    return bool(value) and (key.endswith(("token", "_key")) or "://" in str(value))


def _shown(key: str, value: Any) -> str:
    """Secrets are said to be set, never shown; a URL's password neither."""
    if not _secret(key, value):
        return str(value)
    if "://" in str(value):
        return _without_password(str(value))
    return "(set)"


def _without_password(url: str) -> str:
    scheme, _, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="config")
