"""Reading the cost data files: TOML, shipped in the package or given by path.

Every file starts with a header (`source`, `date`, `currency`, `region`) so that a price is never
read without knowing whose it is and when it was true. Every malformed value is refused naming
the file and the dotted path of the field.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from tidings.errors import invalid

Table = dict[str, Any]
DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")


@dataclass(frozen=True, slots=True)
class Header:
    """Whose numbers these are and as of when."""

    source: str
    date: str
    currency: str | None
    region: str


@dataclass(frozen=True, slots=True)
class Doc:
    """A parsed data file and the name its errors are reported under."""

    name: str
    table: Table

    def where(self, path: str) -> str:
        return f"{self.name}:{path}"


def read(path: Path | None, shipped: str, folder: str = "prices") -> Doc:
    """The file at `path`, or the shipped default `shipped` in the package folder."""
    if path is None:
        text = resources.files("tidings.cost").joinpath(folder, shipped).read_text("utf-8")
        return _parse(shipped, text)
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise invalid(str(path), f"cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise invalid(str(path), "is not UTF-8 text") from None
    return _parse(str(path), text)


def _parse(name: str, text: str) -> Doc:
    try:
        return Doc(name, tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise invalid(name, f"is not valid TOML: {exc}") from None


def header(doc: Doc, priced: bool = True) -> Header:
    """The file's provenance; `currency` is required of price tables only."""
    date = text(doc, doc.table, "date", "date")
    if not DATE.match(date):
        raise invalid(doc.where("date"), f"{date!r} is not a date (YYYY, YYYY-MM or YYYY-MM-DD)")
    return Header(
        source=text(doc, doc.table, "source", "source"),
        date=date,
        currency=text(doc, doc.table, "currency", "currency") if priced else None,
        region=text(doc, doc.table, "region", "region"),
    )


def text(doc: Doc, table: Table, key: str, path: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value.strip():
        raise invalid(doc.where(path), "is required and must be a non-empty string")
    return value


def number(doc: Doc, table: Table, key: str, path: str, default: float | None = None) -> float:
    """A non-negative number; `default` when absent (required when there is none)."""
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(doc.where(path), "is required and must be a number")
    if value < 0 or value != value:
        raise invalid(doc.where(path), f"must be a number >= 0, not {value}")
    return float(value)


def subtable(doc: Doc, table: Table, key: str, path: str) -> Table:
    value = table.get(key)
    if not isinstance(value, dict) or not value:
        raise invalid(doc.where(path), "is required and must be a non-empty table")
    return value


def array(doc: Doc, table: Table, key: str, path: str) -> list[Table]:
    value = table.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
        raise invalid(doc.where(path), "is required and must be a non-empty array of tables")
    return value
