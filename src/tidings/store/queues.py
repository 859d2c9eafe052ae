"""Each subscriber's queue in the SQL store: the queue operations (`Enqueue`, `Lease`, `Ack`,
`Nack`, `Reject`) and `apply`, their interpreter, plus dead letters, redrive and expiry.

A message row is visible when `visible_at <= now`; leasing bumps `attempt`, sets a new
`receipt` and hides the row until `now + visibility`. Acknowledging deletes the row and
then the bodies nothing refers to any more (docs/storage.md). The `dedup` table remembers
every (subscriber, dedup key) ever enqueued, so a repeat is ignored even after the first
copy was acknowledged (replays rely on this); `expire` prunes it together with the retention.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from tidings.model import ID_MAX, receipt_seq
from tidings.store.base import (
    Ack,
    AckResult,
    DeadLetter,
    Discharge,
    Enqueue,
    Hasten,
    Lease,
    Message,
    Nack,
    Owe,
    PublishOnce,
    QueueOp,
    Reject,
)
from tidings.store.bodies import drop_bodies
from tidings.store.database import Cursor, Database, loads_or
from tidings.store.dedup import DedupIds
from tidings.store.enqueue import enqueue_step
from tidings.store.pending import discharge_step, owe_step

MESSAGE_COLUMNS = (
    "m.seq, m.subscriber_id, m.publication_id, m.subscription_ids, b.body, m.enqueued_at, m.attempt"
)
WITH_BODY = "messages m LEFT JOIN bodies b ON b.key = m.body_key"

Step = Callable[[Cursor], Any]


def _receipt(seq: int, attempt: int, nonce: str) -> str:
    return f"{seq}.{attempt}.{nonce}"


def _seq_of(receipt: str) -> int | None:
    return receipt_seq(receipt) if isinstance(receipt, str) else None


class Queues:
    """The queue operations over one database; each public call is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._dedup = DedupIds(db)

    def apply(self, ops: Sequence[QueueOp]) -> list[Any]:
        """The operations in order, in one transaction (group commit). Each answer is the
        operation's value, or the exception it raised (the others still commit)."""
        steps = [self._prepared(op) for op in ops]
        try:  # the usual case, nothing fails: no savepoint statements around each operation
            with self._db.tx() as cur:
                return [s if isinstance(s, Exception) else s(cur) for s in steps]
        except Exception:  # all undone: again, each operation in a savepoint of its own
            results: list[Any] = []
            with self._db.tx() as cur:
                for s in steps:
                    results.append(s if isinstance(s, Exception) else _isolated(cur, s))
            return results

    def one(self, op: QueueOp) -> Any:
        """One operation in a transaction of its own; what it raised is raised."""
        with self._db.tx() as cur:
            return self._step(op)(cur)

    def _prepared(self, op: QueueOp) -> Step | Exception:
        try:
            return self._step(op)
        except Exception as exc:  # a malformed operation is its caller's answer alone
            return exc

    def _step(self, op: QueueOp) -> Step:
        """What an operation does to the tables, as a function of the transaction's cursor.
        Anything that needs no cursor (receipt parsing, nonces) is done here, outside it."""
        match op:
            case Enqueue(messages, fresh, fanouts):
                return enqueue_step(self._db, messages, fresh, fanouts)
            case Lease(subscriber_id, max_messages, visibility_s, max_attempts, now, max_bytes):
                return self._lease(
                    subscriber_id, max_messages, visibility_s, max_attempts, now, max_bytes
                )
            case PublishOnce():
                return self._dedup.publish_once(op)
            case Ack(subscriber_id, receipts):
                return self._settle(subscriber_id, receipts, None, 0.0)
            case Nack(subscriber_id, receipts, now, delay_s):
                return self._settle(subscriber_id, receipts, now, delay_s)
            case Reject(subscriber_id, receipt, reason, now):
                return self._reject(subscriber_id, receipt, reason, now)
            case Hasten(subscriber_id, now):
                return self._hasten(subscriber_id, now)
            case Owe(evaluations):  # pending function evaluations (pending.py)
                return owe_step(self._db, evaluations)
            case Discharge(publication_ids):
                return discharge_step(self._db, publication_ids)
        raise TypeError(f"not a queue operation: {op!r}")

    def _dead_letter(
        self, cur: Cursor, where: str, params: Sequence[Any], reason: str, now: float
    ) -> int:
        """Move messages to the dead letters; their bodies stay, now referred to by those."""
        cur.execute(
            self._db.q(
                "INSERT INTO dead_letters (subscriber_id, publication_id, subscription_ids, "
                "body_key, enqueued_at, attempt, reason, dead_at) SELECT subscriber_id, "
                "publication_id, subscription_ids, body_key, enqueued_at, attempt, ?, ? "
                f"FROM messages WHERE {where}"
            ),
            (reason, now, *params),
        )
        cur.execute(self._db.q(f"DELETE FROM messages WHERE {where}"), params)
        return int(cur.rowcount)

    def _lease(
        self,
        subscriber_id: str,
        max_messages: int,
        visibility_s: float,
        max_attempts: int,
        now: float,
        max_bytes: int | None = None,
    ) -> Callable[[Cursor], list[Message]]:
        nonce = os.urandom(6).hex()
        d = self._db.dialect

        def op(cur: Cursor) -> list[Message]:
            # candidates in FIFO order; one leased max_attempts times already is a dead letter
            rows = self._candidates(cur, subscriber_id, now, max_messages, max_bytes)
            dead = [r[0] for r in rows if int(r[6]) >= max_attempts]
            if dead:
                self._dead_letter(
                    cur, f"seq IN ({', '.join('?' * len(dead))})", dead, "max_attempts", now
                )
                rows = [r for r in rows if int(r[6]) < max_attempts]
            until = now + visibility_s
            good = [(r, ids) for r in rows if (ids := self._checked(cur, r, now)) is not None]
            if good:
                marks = ", ".join("?" * len(good))
                cur.execute(
                    d.q(
                        f"UPDATE messages SET attempt = attempt + 1, visible_at = ?, receipt = "
                        f"{d.next_receipt} WHERE seq IN ({marks})"
                    ),
                    (until, nonce, *(r[0] for r, _ in good)),
                )
            return [_leased(r, ids, until, nonce) for r, ids in good]

        return op

    def _candidates(
        self, cur: Cursor, subscriber_id: str, now: float, most: int, max_bytes: int | None
    ) -> list[Any]:
        """The ready rows to lease, in FIFO order, locked. With `max_bytes`, the bodies'
        sizes are read first and only the rows that fit are fetched: a queue of large
        messages is not read into memory by the hundred to lease one."""
        d = self._db.dialect
        ready = f"FROM {WITH_BODY} WHERE m.subscriber_id = ? AND m.visible_at <= ? ORDER BY m.seq"
        params = (subscriber_id, now, most)
        if max_bytes is None:
            cur.execute(d.skipping_locked(f"SELECT {MESSAGE_COLUMNS} {ready} LIMIT ?"), params)
            return list(cur.fetchall())
        cur.execute(d.skipping_locked(f"SELECT m.seq, length(b.body) {ready} LIMIT ?"), params)
        seqs = within(cur.fetchall(), max_bytes)
        if not seqs:
            return []
        marks = ", ".join("?" * len(seqs))
        cur.execute(
            d.q(
                f"SELECT {MESSAGE_COLUMNS} FROM {WITH_BODY} WHERE m.seq IN ({marks}) ORDER BY m.seq"
            ),
            seqs,
        )
        return list(cur.fetchall())

    def _checked(self, cur: Cursor, row: Sequence[Any], now: float) -> tuple[str, ...] | None:
        """A row's subscription ids, its body checked to decode; a row that does not (or
        whose body is missing) is dead-lettered alone, with the reason, so it cannot fail
        the others' lease. The body is checked, not kept: frames embed its text."""
        try:
            if row[4] is None:
                raise TypeError("the body is missing")
            orjson.loads(row[4])
            return tuple(orjson.loads(row[3]))
        except (orjson.JSONDecodeError, TypeError) as exc:
            self._dead_letter(cur, "seq = ?", (row[0],), f"undecodable: {exc}", now)
            return None

    def _hasten(self, subscriber_id: str, now: float) -> Callable[[Cursor], int]:
        sql = self._db.q(
            "UPDATE messages SET visible_at = ? WHERE subscriber_id = ? AND receipt IS NULL "
            "AND visible_at > ?"
        )

        def op(cur: Cursor) -> int:
            cur.execute(sql, (now, subscriber_id, now))
            return int(cur.rowcount)

        return op

    def _reject(
        self, subscriber_id: str, receipt: str, reason: str, now: float
    ) -> Callable[[Cursor], bool]:
        seq = _seq_of(receipt)

        def op(cur: Cursor) -> bool:
            if seq is None:
                return False
            where = "subscriber_id = ? AND seq = ? AND receipt = ?"
            return self._dead_letter(cur, where, (subscriber_id, seq, receipt), reason, now) > 0

        return op

    def _settle(
        self, subscriber_id: str, receipts: Sequence[str], now: float | None, delay_s: float
    ) -> Callable[[Cursor], AckResult]:
        """Ack (`now` None: delete, then drop the bodies nobody refers to now) or nack (make
        ready at `now + delay_s`), in one statement for all receipts."""
        wanted = list(dict.fromkeys(receipts))
        valid = [r for r in wanted if _seq_of(r) is not None]
        marks = ", ".join("?" * len(valid))
        where = f"WHERE subscriber_id = ? AND seq IN ({marks}) AND receipt IN ({marks})"
        keys: tuple[Any, ...] = (subscriber_id, *(_seq_of(r) for r in valid), *valid)
        if now is None:
            sql, params = f"DELETE FROM messages {where} RETURNING receipt, body_key", keys
        else:
            sql = f"UPDATE messages SET visible_at = ?, receipt = NULL {where} RETURNING seq"
            params = (now + delay_s, *keys)

        def op(cur: Cursor) -> AckResult:
            if not valid:
                return AckResult([], wanted)
            cur.execute(self._db.q(sql), params)
            rows = cur.fetchall()
            if now is None:
                done = {str(r[0]) for r in rows}
                drop_bodies(self._db, cur, (str(r[1]) for r in rows))
            else:  # an UPDATE returns the new (NULL) receipt: match by sequence
                seqs = {int(r[0]) for r in rows}
                done = {r for r in valid if _seq_of(r) in seqs}
            return AckResult([r for r in wanted if r in done], [r for r in wanted if r not in done])

        return op

    def dead_letters(self, subscriber_id: str, limit: int = 100) -> list[DeadLetter]:
        with self._db.read() as cur:
            cur.execute(
                self._db.q(
                    "SELECT d.id, d.subscriber_id, d.publication_id, d.subscription_ids, "
                    "b.body, d.enqueued_at, d.attempt, d.reason, d.dead_at FROM dead_letters d "
                    "LEFT JOIN bodies b ON b.key = d.body_key WHERE d.subscriber_id = ? "
                    "ORDER BY d.id LIMIT ?"
                ),
                (subscriber_id, limit),
            )
            rows = cur.fetchall()
        return [
            DeadLetter(
                int(r[0]),
                r[1],
                r[2],
                tuple(loads_or(r[3], ())),
                loads_or(r[4], None),
                float(r[5]),
                int(r[6]),
                r[7],
                float(r[8]),
            )
            for r in rows
        ]

    def redrive(self, subscriber_id: str, ids: Sequence[int] | None, now: float) -> int:
        where = "subscriber_id = ?"
        params: list[Any] = [subscriber_id]
        if ids is not None:
            ids = [i for i in ids if 0 <= i <= ID_MAX]  # no row has another id
            if not ids:
                return 0
            where += f" AND id IN ({', '.join('?' * len(ids))})"
            params += list(ids)
        with self._db.tx() as cur:
            cur.execute(
                self._db.q(
                    "INSERT INTO messages (subscriber_id, publication_id, subscription_ids, "
                    "body_key, enqueued_at) SELECT subscriber_id, publication_id, "
                    f"subscription_ids, body_key, ? FROM dead_letters WHERE {where} ORDER BY id"
                ),
                (now, *params),
            )
            cur.execute(self._db.q(f"DELETE FROM dead_letters WHERE {where}"), params)
            return int(cur.rowcount)

    def size(self, subscriber_id: str) -> tuple[int, int]:
        """A queue's messages and their bodies' bytes (dead letters apart)."""
        with self._db.read() as cur:
            cur.execute(
                self._db.q(
                    "SELECT COUNT(*), COALESCE(SUM(LENGTH(b.body)), 0) FROM messages m "
                    "JOIN bodies b ON b.key = m.body_key WHERE m.subscriber_id = ?"
                ),
                (subscriber_id,),
            )
            count, size = cur.fetchone()
        return int(count), int(size)

    def trim(self, subscriber_id: str, max_messages: int, max_bytes: int, now: float) -> int:
        """Dead-letter a queue's oldest messages (reason `overflow`) until at most
        `max_messages` of at most `max_bytes` are left; how many went. The newest are read a
        page at a time down to the first that does not fit."""
        with self._db.tx() as cur:
            first_gone = self._overflow_from(cur, subscriber_id, max_messages, max_bytes)
            if first_gone is None:
                return 0
            where = "subscriber_id = ? AND seq <= ?"
            return self._dead_letter(cur, where, (subscriber_id, first_gone), "overflow", now)

    def _overflow_from(
        self, cur: Cursor, subscriber_id: str, max_messages: int, max_bytes: int
    ) -> int | None:
        """The newest seq that does not fit the bounds, counted from the newest; None: all fit."""
        page, kept, size, below = 10_000, 0, 0, None
        newest = (
            "SELECT m.seq, LENGTH(b.body) FROM messages m JOIN bodies b ON b.key = m.body_key "
            "WHERE m.subscriber_id = ? {below} ORDER BY m.seq DESC LIMIT ?"
        )
        while True:
            if below is None:
                cur.execute(self._db.q(newest.format(below="")), (subscriber_id, page))
            else:
                query = newest.format(below="AND m.seq < ?")
                cur.execute(self._db.q(query), (subscriber_id, below, page))
            rows = cur.fetchall()
            for seq, length in rows:
                if kept + 1 > max_messages or size + int(length) > max_bytes:
                    return int(seq)
                kept, size, below = kept + 1, size + int(length), int(seq)
            if len(rows) < page:
                return None

    def expire(self, now: float, retention_s: float) -> int:
        cutoff = now - retention_s
        with self._db.tx() as cur:
            moved = self._dead_letter(cur, "enqueued_at < ?", (cutoff,), "retention", now)
            cur.execute(self._db.q("DELETE FROM dedup WHERE enqueued_at < ?"), (cutoff,))
        return moved


def within(sizes: Sequence[Sequence[Any]], max_bytes: int) -> list[int]:
    """Of (seq, body size) rows, the first seqs whose bodies come to at most `max_bytes` (the
    first always: one message larger than a batch goes alone); the rest stay ready, their
    attempt untouched."""
    seqs: list[int] = []
    total = 0
    for seq, size in sizes:
        total += int(size or 0)
        if seqs and total > max_bytes:
            break
        seqs.append(int(seq))
    return seqs


def _isolated(cur: Cursor, step: Step) -> Any:
    """Run one operation inside a savepoint, so a failing one leaves no partial writes
    and (on PostgreSQL) does not abort the transaction the others commit in."""
    cur.execute("SAVEPOINT op")
    try:
        result = step(cur)
    except Exception as exc:  # one caller's failure is that caller's answer
        cur.execute("ROLLBACK TO SAVEPOINT op")
        result = exc
    cur.execute("RELEASE SAVEPOINT op")
    return result


def _leased(row: Sequence[Any], ids: tuple[str, ...], until: float, nonce: str) -> Message:
    seq, attempt = int(row[0]), int(row[6]) + 1
    raw = row[4]
    return Message(
        id=seq,
        subscriber_id=row[1],
        publication_id=row[2],
        subscription_ids=ids,
        raw=raw.encode() if isinstance(raw, str) else bytes(raw),
        enqueued_at=float(row[5]),
        attempt=attempt,
        receipt=_receipt(seq, attempt, nonce),
        lease_until=until,
    )
