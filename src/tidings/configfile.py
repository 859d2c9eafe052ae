"""The configuration file, `tidings.toml`: every setting the environment can set, as TOML.

Top-level settings are top-level keys (`port = 8081`); nested ones are tables named like
their group (`[queues]` `max_attempts = 3`, `[elastic]` `autoscale = true`). Read with the
standard library's `tomllib`. A key the settings do not have is refused with its name, and
so is a value of the wrong type: a typo never passes silently as a default.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any

from tidings.errors import ErrorCode, TidingsError


def read_config(path: Path, defaults: Any) -> dict[str, Any]:
    """The file's settings as `group__name` keys (the environment's names, lowercase),
    each checked against `defaults` (a `Settings`)."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _wrong("config", f"no configuration file at {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _wrong("config", f"{path} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise _wrong("config", f"{path} is not valid TOML: {exc}") from None
    found: dict[str, Any] = {}
    _flatten(raw, defaults, "", found)
    return found


def _flatten(table: dict[str, Any], defaults: Any, prefix: str, found: dict[str, Any]) -> None:
    known = {f.name: getattr(defaults, f.name) for f in dataclasses.fields(defaults)}
    for name, value in table.items():
        key, dotted = f"{prefix}{name}", f"{prefix.replace('__', '.')}{name}"
        if name not in known:
            raise _wrong(dotted, f"unknown setting {dotted!r}: see `tidings config show`")
        current = known[name]
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise _wrong(dotted, f"{dotted} is a table: [{dotted}]")
            _flatten(value, current, f"{key}__", found)
        else:
            found[key] = _typed(dotted, value, current)


def _typed(dotted: str, value: Any, current: Any) -> Any:
    """`value` as the setting's type: booleans only as booleans, integers as numbers too."""
    if isinstance(current, bool):
        ok = isinstance(value, bool)
    elif isinstance(current, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(current, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif isinstance(current, Path):
        ok, value = isinstance(value, str), Path(value) if isinstance(value, str) else value
    else:
        ok = isinstance(value, str)
    if not ok:
        expected = type(current).__name__.replace("PosixPath", "path").replace("str", "string")
        raise _wrong(dotted, f"{dotted} = {value!r}: expected a {expected}")
    return value


def _wrong(field: str, detail: str) -> TidingsError:
    return TidingsError(ErrorCode.CONFIG_INVALID, field=field, detail=detail)
