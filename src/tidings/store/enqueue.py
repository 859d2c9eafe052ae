"""Putting deliveries into queues: an `Enqueue` operation as a step on a transaction's cursor.

Every (subscriber, dedup key) ever enqueued is claimed in `dedup`, so a repeat is ignored;
a delivery's row goes into `messages` only when its claim is new, and its body into `bodies`
once per key. Where the dialect has a batch statement (PostgreSQL) the whole operation is
one round trip; otherwise (SQLite) rows go in per statement, bulk when `fresh`, and fan-outs
are spread into rows by SQLite's `json_each`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from tidings.store.base import Fanout, NewMessage
from tidings.store.bodies import body_key, body_rows
from tidings.store.database import Cursor, Database, dumps

EnqueueStep = Callable[[Cursor], int]


def message_rows(messages: Sequence[NewMessage], nonce: str = "") -> list[tuple[Any, ...]]:
    """Insert rows: subscriber, publication, subscription ids, body key, enqueued at."""
    return [
        (
            m.subscriber_id,
            m.publication_id,
            dumps(list(m.subscription_ids)),
            body_key(m, nonce),
            m.enqueued_at,
        )
        for m in messages
    ]


def enqueue_step(
    db: Database, messages: Sequence[NewMessage], fresh: bool, fanouts: Sequence[Fanout] = ()
) -> EnqueueStep:
    """`fresh`: the caller guarantees the keys are new (a new publication's id), so the
    rows go in with three bulk statements instead of a check per row. Fan-outs go in
    with three statements for all of them, their rows made by SQLite (`json_each`)."""
    if db.dialect.batch_enqueue is not None:
        return _batch(db.dialect.batch_enqueue, messages, fresh, fanouts)
    spread = _fanouts(db, fanouts)
    plain = _messages(db, messages, fresh)

    def op(cur: Cursor) -> int:
        return spread(cur) + plain(cur)

    return op


def _batch(
    statement: str, messages: Sequence[NewMessage], fresh: bool, fanouts: Sequence[Fanout]
) -> EnqueueStep:
    """One round trip per batch (`fresh` or not), instead of one per row; fan-outs
    travel in the same arrays (a row each there: the statement checks every key)."""
    if fanouts:
        messages = [*messages, *(m for f in fanouts for m in f.messages())]
    nonce = "" if fresh else os.urandom(6).hex()
    rows = message_rows(messages, nonce)
    bodies = body_rows(messages, nonce)
    columns = [
        [m.subscriber_id for m in messages],
        [m.dedup_key for m in messages],
        *([row[i] for row in rows] for i in (1, 2, 3, 4)),
        list(bodies),
        list(bodies.values()),
    ]

    def op(cur: Cursor) -> int:
        cur.execute(statement, columns)
        return int(cur.fetchone()[0])

    return op


def _fanouts(db: Database, fanouts: Sequence[Fanout]) -> EnqueueStep:
    """One parameter row per publication: its subscribers as one JSON object, spread
    into rows by SQLite's `json_each` (PostgreSQL puts fan-outs into the arrays of its
    batch statement instead)."""
    rows = [
        (f.dedup_key, f.publication_id, f.enqueued_at, orjson.dumps(f.owners).decode())
        for f in fanouts
    ]
    bodies = list({f.dedup_key: f.body.decode() for f in fanouts}.items())
    dedup = db.dialect.ignoring_duplicates(
        "dedup",
        "SELECT j.key, f.k, f.at FROM (SELECT ? AS k, ? AS p, ? AS at, ? AS o) f, json_each(f.o) j",
    )
    insert = db.q(
        "INSERT INTO messages (subscriber_id, publication_id, subscription_ids, body_key, "
        "enqueued_at) SELECT j.key, f.p, j.value, f.k, f.at FROM "
        "(SELECT ? AS k, ? AS p, ? AS at, ? AS o) f, json_each(f.o) j"
    )

    def op(cur: Cursor) -> int:
        if not rows:
            return 0
        cur.executemany(dedup, rows)
        cur.executemany(db.q("INSERT INTO bodies VALUES (?, ?)"), bodies)
        cur.executemany(insert, rows)
        return sum(len(f.owners) for f in fanouts)

    return op


def _messages(db: Database, messages: Sequence[NewMessage], fresh: bool) -> EnqueueStep:
    nonce = "" if fresh else os.urandom(6).hex()
    rows = message_rows(messages, nonce)
    bodies = body_rows(messages, nonce)
    dedup = db.dialect.ignoring_duplicates("dedup", "VALUES (?, ?, ?)")
    insert = db.q(
        "INSERT INTO messages (subscriber_id, publication_id, subscription_ids, "
        "body_key, enqueued_at) VALUES (?, ?, ?, ?, ?)"
    )
    add_body = db.q("INSERT INTO bodies VALUES (?, ?)")

    def op(cur: Cursor) -> int:
        if fresh:
            keys = [(m.subscriber_id, m.dedup_key, m.enqueued_at) for m in messages]
            cur.executemany(dedup, keys)
            cur.executemany(add_body, list(bodies.items()))
            cur.executemany(insert, rows)
            return len(messages)
        added, stored = 0, set()
        for m, row in zip(messages, rows, strict=True):
            cur.execute(dedup, (m.subscriber_id, m.dedup_key, m.enqueued_at))
            if cur.rowcount != 1:
                continue
            if row[3] not in stored:  # a body only for the deliveries that are new
                cur.execute(add_body, (row[3], bodies[row[3]]))
                stored.add(row[3])
            cur.execute(insert, row)
            added += 1
        return added

    return op
