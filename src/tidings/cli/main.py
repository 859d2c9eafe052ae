"""The one entry point. Each command group lives in its own module and is registered here."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer
from typer.core import TyperArgument, TyperOption

from tidings.errors import ErrorCode, TidingsError
from tidings.extras import extra_for, hint

app = typer.Typer(
    name="tidings",
    help="Tidings: publish/subscribe with topic, content and function matching.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


PLAIN = {"int": "INTEGER", "float": "NUMBER", "Path": "PATH", "datetime": "TIME"}


def _plain_value_names() -> None:
    """typer writes a Python type beside every parameter (`<list[str]>`, `<bool>` beside a
    flag, which takes no value): help shows click's plain names instead (TEXT, INTEGER,
    a|b for choices) and nothing beside a flag."""

    def display_type_rich(self: TyperOption | TyperArgument, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False):
            return None
        if self.metavar is not None:
            return self.metavar
        label = (self.display_type(ctx) or "").strip("<>")
        label = label.removeprefix("list[").removesuffix("]")
        if "|" in label:
            return label
        return PLAIN.get(label, "TEXT")

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
    TyperArgument.display_type_rich = display_type_rich  # type: ignore[method-assign,assignment]


def _version(shown: bool) -> None:
    if shown:
        from tidings import __version__

        typer.echo(f"tidings {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Say the version and stop."
    ),
) -> None:
    """Tidings: publish/subscribe with topic, content and function matching."""


# (module, attribute): each module exposes either a Typer group or plain commands.
COMMAND_MODULES: list[str] = [
    "tidings.cli.broker",  # serve, publish, subscribe, queue
    "tidings.cli.pipeline",  # pipeline match | replay | report
    "tidings.cli.cost",  # cost serverless | instances
    "tidings.cli.sim",  # sim, scenarios, experiment
    "tidings.cli.perf",  # perf
    "tidings.cli.placement",  # placement solve | solve-topics | experiment
    "tidings.cli.elastic",  # matcher, exit-point, cluster status | scale
    "tidings.cli.config",  # config show
    "tidings.cli.serverless",  # serverless local | housekeeping
]


# the command (or group) each module adds: a command's run imports its own module alone
COMMANDS: dict[str, str] = {
    **dict.fromkeys(
        ("serve", "publish", "subscribe", "queue", "subscribers"), "tidings.cli.broker"
    ),
    "pipeline": "tidings.cli.pipeline",
    "cost": "tidings.cli.cost",
    **dict.fromkeys(("sim", "scenarios", "experiment"), "tidings.cli.sim"),
    "perf": "tidings.cli.perf",
    "placement": "tidings.cli.placement",
    **dict.fromkeys(("matcher", "exit-point", "cluster"), "tidings.cli.elastic"),
    "config": "tidings.cli.config",
    "serverless": "tidings.cli.serverless",
}


def _register(argv: list[str] | None = None) -> None:
    """The modules of the command asked for, or all (help, `--version`, a typo): importing
    every command's module took 0.18 s of a `tidings publish`."""
    first = next((a for a in argv or () if not a.startswith("-")), None)
    names = [COMMANDS[first]] if first in COMMANDS else COMMAND_MODULES
    for name in names:
        module = importlib.import_module(name)
        module.register(app)


def main() -> None:
    _plain_value_names()
    _register(sys.argv[1:])
    try:
        app()
    except TidingsError as exc:
        field = f" ({exc.field})" if exc.field else ""
        typer.echo(f"tidings: {exc.message}{field}", err=True)
        sys.exit(1 if exc.code is ErrorCode.UNAVAILABLE else 2)
    except ModuleNotFoundError as exc:  # an optional part that is not installed
        extra = extra_for(exc)
        if extra is None:
            raise
        command = " ".join(sys.argv[1:3]) or "this command"
        typer.echo(f"tidings: {hint(extra, repr(command))}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
