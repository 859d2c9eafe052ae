"""Subscribers and their subscriptions in the SQL store: who exists, when each was last seen,
and what each subscribed to, with the version every subscription change bumps.

Removing a subscriber removes everything it owned (queue, dead letters, their bodies,
subscriptions, presence, endpoint) and tells other brokers on the same store.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Literal

import orjson

from tidings.model import Subscriber, Subscription, subscription_from_json
from tidings.store.base import Change, Origin, SubscriberRecord, SubscriptionChanges
from tidings.store.bodies import drop_bodies
from tidings.store.database import Cursor, Database, dumps

# a subscriber with when it was last seen (its creation when never), whether it is ephemeral
# and the simulation that made it (NULL for a real one)
PRESENT = (
    "SELECT s.id, s.created_at, COALESCE(p.last_seen, s.created_at) AS last_seen, "
    "COALESCE(p.ephemeral, 0) AS ephemeral, m.simulation "
    "FROM subscribers s LEFT JOIN presence p ON p.subscriber_id = s.id "
    "LEFT JOIN simulated m ON m.subscriber_id = s.id"
)
ORIGINS = {
    "all": "",
    "real": " AND m.simulation IS NULL",
    "simulated": " AND m.simulation IS NOT NULL",
}
# presence rows of subscribers that exist (a report racing a deletion may leave one behind)
SEEN = "SELECT p.subscriber_id FROM presence p JOIN subscribers s ON s.id = p.subscriber_id"


def stored(body: str | bytes) -> Subscription:
    """A subscription as read from its row, with its body's bytes (`stored_bytes`)."""
    size = len(body) if isinstance(body, bytes) else len(body.encode())
    return subscription_from_json(orjson.loads(body), size)


class Subscribers:
    """The subscribers and their presence (when each was last seen)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def add(
        self, subscriber: Subscriber, ephemeral: bool = False, simulation: str | None = None
    ) -> None:
        q = self._db.q
        with self._db.tx() as cur:
            cur.execute(
                q("INSERT INTO subscribers VALUES (?, ?, ?)"),
                (subscriber.id, subscriber.token_hash, subscriber.created_at),
            )
            cur.execute(
                q("INSERT INTO presence VALUES (?, ?, ?)"),
                (subscriber.id, subscriber.created_at, int(ephemeral)),
            )
            if simulation is not None:
                cur.execute(q("INSERT INTO simulated VALUES (?, ?)"), (subscriber.id, simulation))

    def get(self, subscriber_id: str) -> Subscriber | None:
        with self._db.read() as cur:
            cur.execute(
                self._db.q("SELECT id, token_hash, created_at FROM subscribers WHERE id = ?"),
                (subscriber_id,),
            )
            row = cur.fetchone()
        return Subscriber(row[0], row[1], float(row[2])) if row else None

    def owner(self, token_hash: str) -> str | None:
        """The id of the subscriber whose token hashes to this, or None."""
        with self._db.read() as cur:
            cur.execute(
                self._db.q("SELECT id FROM subscribers WHERE token_hash = ?"), (token_hash,)
            )
            row = cur.fetchone()
        return str(row[0]) if row else None

    def remove(self, subscriber_id: str) -> bool:
        q = self._db.q
        with self._db.tx() as cur:
            keys: set[str] = set()
            for table in ("messages", "dead_letters"):
                cur.execute(
                    q(f"DELETE FROM {table} WHERE subscriber_id = ? RETURNING body_key"),
                    (subscriber_id,),
                )
                keys.update(str(r[0]) for r in cur.fetchall())
            drop_bodies(self._db, cur, keys)
            # its dedup rows stay until the retention: keyed by publication first (a
            # fan-out's rows are neighbours), they have no index by subscriber, and an id
            # is never used again
            cur.execute(
                q("DELETE FROM subscriptions WHERE subscriber_id = ? RETURNING id"),
                (subscriber_id,),
            )
            gone = [str(r[0]) for r in cur.fetchall()]
            if gone:
                bump(self._db, cur, gone)
            for table in ("presence", "endpoints", "simulated"):
                cur.execute(q(f"DELETE FROM {table} WHERE subscriber_id = ?"), (subscriber_id,))
            cur.execute(q("DELETE FROM subscribers WHERE id = ?"), (subscriber_id,))
            found = bool(cur.rowcount)
            if found:
                self._db.notify(cur, Change("subscriber_removed", subscriber_id))
            return found

    def count(self) -> int:
        with self._db.read() as cur:
            cur.execute("SELECT COUNT(*) FROM subscribers")
            return int(cur.fetchone()[0])

    def touch(self, seen: Mapping[str, float]) -> None:
        with self._db.tx() as cur:
            cur.executemany(
                self._db.q(
                    "INSERT INTO presence SELECT id, ?, 0 FROM subscribers WHERE id = ? "
                    "ON CONFLICT (subscriber_id) DO UPDATE SET last_seen = excluded.last_seen "
                    "WHERE presence.last_seen < excluded.last_seen"
                ),
                [(at, sid) for sid, at in sorted(seen.items())],  # one lock order: no deadlocks
            )

    def page(self, after: str, limit: int, origin: Origin = "all") -> list[SubscriberRecord]:
        with self._db.read() as cur:
            cur.execute(
                self._db.q(f"{PRESENT} WHERE s.id > ?{ORIGINS[origin]} ORDER BY s.id LIMIT ?"),
                (after, limit),
            )
            rows = cur.fetchall()
        return [SubscriberRecord(r[0], float(r[1]), float(r[2]), bool(r[3]), r[4]) for r in rows]

    def idle(self, idle_before: float, ephemeral_before: float) -> list[str]:
        # two index range scans (every few seconds, whatever the number of subscribers)
        with self._db.read() as cur:
            cur.execute(
                self._db.q(
                    f"{SEEN} WHERE p.last_seen < ? UNION "
                    f"{SEEN} WHERE p.ephemeral = 1 AND p.last_seen < ? ORDER BY 1"
                ),
                (idle_before, ephemeral_before),
            )
            return [r[0] for r in cur.fetchall()]


def bump(db: Database, cur: Cursor, changed: Iterable[str]) -> None:
    """Bump the subscriptions' version and log which subscriptions changed under it (inside
    the change's own transaction). The version's row is locked until the commit, so versions
    are logged in commit order: a reader that sees one sees every lower one."""
    cur.execute("UPDATE meta SET value = value + 1 WHERE name = 'subscriptions'")
    cur.executemany(
        db.q(
            "INSERT INTO subscription_changes "
            "SELECT value, ? FROM meta WHERE name = 'subscriptions'"
        ),
        [(sid,) for sid in dict.fromkeys(changed)],
    )


class Subscriptions:
    """The subscriptions, each stored as its JSON, and their version."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def add(self, subscription: Subscription) -> None:
        with self._db.tx() as cur:
            cur.execute(
                self._db.q("INSERT INTO subscriptions VALUES (?, ?, ?)"),
                (subscription.id, subscription.subscriber_id, dumps(subscription.to_json())),
            )
            bump(self._db, cur, [subscription.id])

    def get(self, subscription_id: str) -> Subscription | None:
        with self._db.read() as cur:
            cur.execute(
                self._db.q("SELECT body FROM subscriptions WHERE id = ?"), (subscription_id,)
            )
            row = cur.fetchone()
        return stored(row[0]) if row else None

    def of(self, subscriber_id: str) -> list[Subscription]:
        with self._db.read() as cur:
            cur.execute(
                self._db.q("SELECT body FROM subscriptions WHERE subscriber_id = ? ORDER BY id"),
                (subscriber_id,),
            )
            rows = cur.fetchall()
        return [stored(r[0]) for r in rows]

    def page(self, subscriber_id: str, after: str, limit: int) -> list[Subscription]:
        """The subscriber's subscriptions in id order, the first `limit` after `after`."""
        with self._db.read() as cur:
            cur.execute(
                self._db.q(
                    "SELECT body FROM subscriptions WHERE subscriber_id = ? AND id > ? "
                    "ORDER BY id LIMIT ?"
                ),
                (subscriber_id, after, limit),
            )
            rows = cur.fetchall()
        return [stored(r[0]) for r in rows]

    def count(self, subscriber_id: str) -> int:
        with self._db.read() as cur:
            cur.execute(
                self._db.q("SELECT COUNT(*) FROM subscriptions WHERE subscriber_id = ?"),
                (subscriber_id,),
            )
            return int(cur.fetchone()[0])

    def usage(self, subscriber_id: str) -> tuple[int, int]:
        """How many subscriptions the subscriber holds, and their stored bodies' bytes."""
        size = self._db.dialect.octets.format("body")
        with self._db.read() as cur:
            cur.execute(
                self._db.q(
                    f"SELECT COUNT(*), COALESCE(SUM({size}), 0) FROM subscriptions "
                    "WHERE subscriber_id = ?"
                ),
                (subscriber_id,),
            )
            count, total = cur.fetchone()
            return int(count), int(total)

    def remove(self, subscription_id: str) -> bool:
        with self._db.tx() as cur:
            cur.execute(self._db.q("DELETE FROM subscriptions WHERE id = ?"), (subscription_id,))
            found = bool(cur.rowcount)
            if found:
                bump(self._db, cur, [subscription_id])
            return found

    def set_status(
        self, subscription_id: str, status: Literal["active", "suspended"], reason: str | None
    ) -> bool:
        q = self._db.q
        with self._db.tx() as cur:
            cur.execute(q("SELECT body FROM subscriptions WHERE id = ?"), (subscription_id,))
            row = cur.fetchone()
            if row is None:
                return False
            body = orjson.loads(row[0])
            body.update(status=status, status_reason=reason)
            cur.execute(
                q("UPDATE subscriptions SET body = ? WHERE id = ?"),
                (dumps(body), subscription_id),
            )
            bump(self._db, cur, [subscription_id])
            return True

    def snapshot(self) -> tuple[int, list[Subscription]]:
        """The subscriptions and their version, read in one transaction."""
        with self._db.read() as cur:
            cur.execute("SELECT value FROM meta WHERE name = 'subscriptions'")
            version = int(cur.fetchone()[0])
            cur.execute("SELECT body FROM subscriptions ORDER BY id")
            rows = cur.fetchall()
        return version, [stored(r[0]) for r in rows]

    def iterate(self, page: int = 10_000) -> Iterator[Subscription]:
        """Every subscription in id order, read `page` rows at a time (each page its own
        read, by key, so no transaction stays open between pages and no more than a page is
        held). Not one snapshot: compare `version` before and after."""
        q = self._db.q
        after: str | None = None
        while True:
            with self._db.read() as cur:
                if after is None:
                    cur.execute(
                        q("SELECT id, body FROM subscriptions ORDER BY id LIMIT ?"), (page,)
                    )
                else:
                    cur.execute(
                        q("SELECT id, body FROM subscriptions WHERE id > ? ORDER BY id LIMIT ?"),
                        (after, page),
                    )
                rows = cur.fetchall()
            yield from (stored(body) for _, body in rows)
            if len(rows) < page:
                return
            after = rows[-1][0]

    def version(self) -> int:
        with self._db.read() as cur:
            cur.execute("SELECT value FROM meta WHERE name = 'subscriptions'")
            return int(cur.fetchone()[0])

    def changes_since(self, version: int) -> SubscriptionChanges | None:
        """What changed after `version`, read in one transaction: the version now, and each
        changed subscription as it is now (its id alone when it is gone). None when the log
        no longer reaches back to `version` (pruned): read everything anew then."""
        q = self._db.q
        with self._db.read() as cur:
            cur.execute(
                "SELECT name, value FROM meta WHERE name IN ('subscriptions', 'changes_from')"
            )
            meta = {str(name): int(value) for name, value in cur.fetchall()}
            if version < meta.get("changes_from", 0):
                return None
            cur.execute(
                q(
                    "SELECT DISTINCT c.subscription_id, s.body FROM subscription_changes c "
                    "LEFT JOIN subscriptions s ON s.id = c.subscription_id WHERE c.version > ?"
                ),
                (version,),
            )
            rows = cur.fetchall()
        changed = [stored(body) if body is not None else str(sid) for sid, body in rows]
        return SubscriptionChanges(meta["subscriptions"], changed)

    def prune_changes(self, keep: int) -> int:
        """Forget the changes of all but the last `keep` versions (a reader further behind
        reads everything anew); how many rows went."""
        q = self._db.q
        with self._db.tx() as cur:
            cur.execute("SELECT value FROM meta WHERE name = 'subscriptions'")
            floor = int(cur.fetchone()[0]) - keep
            cur.execute("SELECT value FROM meta WHERE name = 'changes_from'")
            row = cur.fetchone()
            if row is not None and int(row[0]) >= floor:
                return 0
            cur.execute(q("DELETE FROM subscription_changes WHERE version <= ?"), (floor,))
            gone = int(cur.rowcount)
            cur.execute(q("UPDATE meta SET value = ? WHERE name = 'changes_from'"), (floor,))
            return gone
