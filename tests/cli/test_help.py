"""Help reads as sentences: a command's summary is one line in the lists, a flag has no type
tag (it takes no value)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import typer.main

from tidings.cli.main import _register, app


def commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    for name, sub in getattr(group, "commands", {}).items():
        yield " ".join((*path, name)), sub
        yield from commands(sub, (*path, name))


def test_every_command_s_summary_is_one_line() -> None:
    _register()
    broken = [
        name
        for name, command in commands(typer.main.get_command(app))
        if "\n" in inspect.cleandoc(command.help or "").split("\n\n")[0]
    ]
    assert broken == []


def test_a_flag_shows_no_type_tag() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tidings.cli.main", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "PATH": ""},
    )
    flags = [line for line in done.stdout.splitlines() if "--event-log" in line or "--help" in line]
    assert flags and not any("<bool>" in line for line in flags)
    assert any("<int>" in line for line in done.stdout.splitlines() if "--port" in line)
