"""Durable state behind one small interface: `tidings.store.base.Store`.

`open_store(url)` picks the backend: `memory://` (SQLite in memory: same behaviour, nothing
kept), `sqlite:///path/to/file.db` (the embedded default), `postgresql://...`.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from tidings.errors import ErrorCode, TidingsError
from tidings.store.base import Store


def open_store(url: str) -> Store:
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme == "memory":
        from tidings.store.sqlite import SQLiteStore

        return SQLiteStore(":memory:")
    if scheme == "sqlite":
        from tidings.store.sqlite import SQLiteStore

        parts = urlsplit(url)
        sync = dict(parse_qsl(parts.query)).get("synchronous", "normal")
        if sync.lower() not in ("normal", "full"):
            raise TidingsError(
                ErrorCode.CONFIG_INVALID, field="store_url", detail="synchronous is normal or full"
            )
        return SQLiteStore(url[len("sqlite:///") :].split("?", 1)[0] or ":memory:", sync)
    if scheme in ("postgresql", "postgres"):
        from tidings.store.postgres import PostgresStore

        return PostgresStore(url)
    raise TidingsError(
        ErrorCode.CONFIG_INVALID,
        field="store_url",
        detail=f"unknown store URL {url!r}: use memory://, sqlite:///PATH or postgresql://...",
    )
