"""Help reads as sentences: a command's summary is one line in the lists, values are named
as click names them (TEXT, INTEGER, a|b) rather than as Python types, and a flag, which
takes no value, names none."""

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


def test_help_names_values_plainly_and_a_flag_not_at_all() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tidings.cli.main", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "PATH": ""},
    )
    flags = [line for line in done.stdout.splitlines() if "--event-log" in line or "--help" in line]
    assert flags and not any("<bool>" in line or "BOOLEAN" in line for line in flags)
    assert not any("<" in line for line in done.stdout.splitlines() if "--" in line)
    assert any("INTEGER" in line for line in done.stdout.splitlines() if "--port" in line)
