"""Bodies stored once (docs/storage.md): the key a delivery's body goes under, the rows that
store them, and their deletion when no message or dead letter refers to them any more.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tidings.store.base import NewMessage
from tidings.store.database import Cursor, Database

# the bodies among `keys` that nothing refers to any more
DROP_BODIES = (
    "DELETE FROM bodies WHERE key IN ({marks}) "
    "AND NOT EXISTS (SELECT 1 FROM messages WHERE body_key = bodies.key) "
    "AND NOT EXISTS (SELECT 1 FROM dead_letters WHERE body_key = bodies.key)"
)
BODY_PAGE = 500  # keys per statement when dropping or sweeping bodies


def body_key(m: NewMessage, nonce: str) -> str:
    """The key a delivery's body is stored under. A fresh publication's key is new, so its
    deliveries share one body; a checked enqueue (function matches, replays) stores its own
    copy under a key of its own, so it never adds a reference to a body that a concurrent
    last acknowledgement may be deleting (docs/storage.md)."""
    return f"{m.dedup_key}~{nonce}" if nonce else m.dedup_key


def body_rows(messages: Sequence[NewMessage], nonce: str = "") -> dict[str, str]:
    """Each distinct body by its key, decoded to text once per shared bytes object."""
    texts: dict[int, str] = {}
    out: dict[str, str] = {}
    for m in messages:
        key = body_key(m, nonce)
        if key not in out:
            text = texts.get(id(m.body))
            if text is None:
                text = texts[id(m.body)] = m.body.decode()
            out[key] = text
    return out


def drop_bodies(db: Database, cur: Cursor, keys: Iterable[str]) -> None:
    """Delete the bodies among `keys` that no message or dead letter refers to."""
    wanted = sorted(set(keys))
    for i in range(0, len(wanted), BODY_PAGE):
        page = wanted[i : i + BODY_PAGE]
        cur.execute(db.q(DROP_BODIES.format(marks=", ".join("?" * len(page)))), page)


def sweep_bodies(db: Database) -> int:
    """Delete every body nothing refers to, a page of keys per transaction; only where
    concurrent writers can leave one behind (`Dialect.concurrent_writers`)."""
    if not db.dialect.concurrent_writers:
        return 0
    swept, after = 0, ""
    while True:
        with db.tx() as cur:
            cur.execute(
                db.q("SELECT key FROM bodies WHERE key > ? ORDER BY key LIMIT ?"),
                (after, BODY_PAGE),
            )
            keys = [str(r[0]) for r in cur.fetchall()]
            drop_bodies(db, cur, keys)
            swept += max(0, cur.rowcount) if keys else 0
        if len(keys) < BODY_PAGE:
            return swept
        after = keys[-1]
