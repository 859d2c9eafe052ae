"""Durable state behind one small interface: `tidings.store.base.Store`.

`open_store(url)` picks the backend: `memory://` (SQLite in memory: same behaviour, nothing
kept), `sqlite:///path/to/file.db` (the embedded default), `postgresql://...`. Queues are a
log on the embedded store and rows on PostgreSQL unless `layout=rows` or `layout=log` says.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tidings.errors import ErrorCode, TidingsError
from tidings.store.base import Store


def check_store_url(url: str) -> str:
    """The URL's scheme, or CONFIG_INVALID naming what is wrong: checked before anything
    binds or connects, so a wrong setting is reported as itself."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme not in ("memory", "sqlite", "postgresql", "postgres"):
        raise TidingsError(
            ErrorCode.CONFIG_INVALID,
            field="store_url",
            detail=f"unknown store URL {url!r}: use memory://, sqlite:///PATH or postgresql://...",
        )
    query = dict(parse_qsl(urlsplit(url).query))
    if scheme == "sqlite" and query.get("synchronous", "normal").lower() not in ("normal", "full"):
        raise TidingsError(
            ErrorCode.CONFIG_INVALID, field="store_url", detail="synchronous is normal or full"
        )
    if query.get("layout", "log") not in ("rows", "log"):
        raise TidingsError(
            ErrorCode.CONFIG_INVALID, field="store_url", detail="layout is rows or log"
        )
    if "partitions" in query or "own" in query:
        _partitioning(scheme, query)
    return scheme


MAX_PARTITIONS = 1024


def _partitioning(scheme: str, query: dict[str, str]) -> tuple[int, list[int] | None]:
    """`partitions=N` (and the `own=i,j` a broker prefers) of a PostgreSQL log, checked."""

    def refuse(detail: str) -> TidingsError:
        return TidingsError(ErrorCode.CONFIG_INVALID, field="store_url", detail=detail)

    if scheme not in ("postgresql", "postgres") or query.get("layout") != "log":
        raise refuse("partitions and own are for PostgreSQL with layout=log")
    count = query.get("partitions", "")
    if not count.isdigit() or not 1 <= int(count) <= MAX_PARTITIONS:
        raise refuse(f"partitions is a whole number from 1 to {MAX_PARTITIONS}")
    if "own" not in query:
        return int(count), None
    own = query["own"].split(",")
    if not all(p.isdigit() and int(p) < int(count) for p in own):
        raise refuse(f"own lists partitions by number, each below partitions ({count})")
    return int(count), sorted({int(p) for p in own})


def open_store(url: str, writer: bool = False) -> Store:
    """The store at `url`. A `writer` only enqueues beside the broker that owns the store
    (the pipeline's `tidings match`, an elastic exit point): on a store whose queues are a
    log (`layout=log`) it writes rows, which the owner moves into its log."""
    scheme = check_store_url(url)
    query = dict(parse_qsl(urlsplit(url).query))
    if scheme in ("memory", "sqlite"):
        from tidings.store.sqlite import SQLiteStore

        path = ":memory:"
        if scheme == "sqlite":
            path = url[len("sqlite:///") :].split("?", 1)[0] or ":memory:"
        sync = query.get("synchronous", "normal")
        if query.get("layout", "log") == "log" and not writer:
            from tidings.store.loglayout import SQLiteLogStore

            return SQLiteLogStore(path, sync)
        return SQLiteStore(path, sync)
    from tidings.store.postgres import PostgresStore

    url = _without_layout(url)
    if "partitions" in query:  # several brokers, each partition of the queues with an owner
        from tidings.store.partitions import PartitionedLogStore

        count, own = _partitioning(scheme, query)
        return PartitionedLogStore(url, count, own, writer=writer)
    if query.get("layout") == "log" and not writer:  # (several brokers: the rows, by default)
        from tidings.store.pglog import PostgresLogStore

        return PostgresLogStore(url)
    return PostgresStore(url)


TIDINGS_PARAMETERS = ("layout", "partitions", "own")


def _without_layout(url: str) -> str:
    """A PostgreSQL URL without `layout=`, `partitions=` and `own=`, which are Tidings', not
    connection parameters."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in TIDINGS_PARAMETERS]
    return urlunsplit(parts._replace(query=urlencode(query)))
