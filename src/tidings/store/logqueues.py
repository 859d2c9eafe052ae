"""Each subscriber's queue as a log (`layout=log`, docs/storage.md): the queue operations
over a `QueueLog` whose tables live in the store's database (`logtables.py`).

A publication's body is appended once; its deliveries are a record of small integers (the
subscribers' numbers, their sequence numbers, a tag each naming the delivery's subscription
ids); an acknowledgement raises the subscriber's floor or joins the sparse set above it.
Leases, attempts and nack delays are held in memory; each `apply` is one transaction that
commits the log's group commit with the rows beside it (dedup-id claims, pending
evaluations, dead letters), and only then do its publications become leasable.

One process owns the queues (the embedded store): a lease held at a crash is ready again at
the restart with its attempt counted, and a nack's delay ends at the restart (as a RabbitMQ
queue requeues what a lost channel held). A receipt names the process that leased
(`nonce`): one from before a restart acknowledges nothing.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from itertools import groupby
from typing import Any, TypeVar

import orjson

from tidings.model import ATTEMPT_DIGITS, SEQ_DIGITS
from tidings.store import inbox, logtables
from tidings.store.base import (
    ENQUEUES,
    Ack,
    AckResult,
    Busy,
    Discharge,
    Enqueue,
    Fanout,
    Hasten,
    Lease,
    Message,
    Nack,
    NewMessage,
    Owe,
    PublishOnce,
    QueueOp,
    Reject,
)
from tidings.store.bodies import drop_bodies
from tidings.store.database import Cursor, Database, dumps
from tidings.store.dedup import DedupIds
from tidings.store.log import QueueLog
from tidings.store.log.cursor import Taken
from tidings.store.log.queuelog import Post
from tidings.store.logtables import SQLLogEngine
from tidings.store.pending import discharge_step, owe_step

T = TypeVar("T")
PUBLICATION_REPLACES = (
    "ON CONFLICT (dedup_key) DO UPDATE SET publication_id = excluded.publication_id, "
    "enqueued_at = excluded.enqueued_at, recipients = excluded.recipients"
)
# operations that change only memory (the cursors), whatever they raise
MEMORY_ONLY = (Ack, Nack, Hasten)
# bodies known to be JSON, by id: a body this process wrote and still holds in memory is
# read once, not once a subscriber and a lease (a fan-out's to 100 subscribers was read 100
# times; a 100 kB body takes 0.85 ms to read). One read from the store is read every time, as
# before (a body corrupted on disk is dead-lettered); a reload forgets them all.
DECODABLE_KEPT = 65_536
SEPARATOR = b"\n"  # between a stored body's publication id and its JSON (which has no newline)
# a leased message made from its fields at once, not through the named tuple's constructor
# (a Python call of its own a delivery: 7% of a lease's time)
new_message: Callable[[tuple[Any, ...]], Message] = partial(tuple.__new__, Message)


def pack(publication_id: str, body: bytes) -> bytes:
    return publication_id.encode() + SEPARATOR + body


def unpack(stored: bytes) -> tuple[str, bytes]:
    publication_id, _, body = stored.partition(SEPARATOR)
    return publication_id.decode(), body


class LogQueues:
    """The queue operations over the log; `apply` is one transaction."""

    def __init__(
        self,
        db: Database,
        segment_bodies: int = 4096,
        inbox: bool = False,
        on_arrival: Callable[[set[str]], None] | None = None,
    ) -> None:
        """`inbox`: a partition's queues (`partitions.py`), which take what publishing
        brokers left in the partition's inbox instead of the rows writers leave;
        `on_arrival`: told, after each transaction, the subscribers whose queues it took
        deliveries into from there (their streams may be waiting elsewhere)."""
        self._db = db
        self._inbox = inbox
        self._on_arrival = on_arrival
        self._arrived: set[str] = set()
        # whether the inbox may hold rows: set when its owner is told of some (from another
        # thread), cleared as a transaction takes them in
        self.inbox_waiting = True
        self._engine = SQLLogEngine(db)
        self.log = QueueLog(self._engine, segment_bodies=segment_bodies, eager=True)
        self._dedup = DedupIds(db)
        self._sets: dict[tuple[str, ...], int] = {}
        self._ids: dict[int, tuple[str, ...]] = {}
        self._new_sets: list[tuple[int, tuple[str, ...]]] = []
        self.nonce = os.urandom(4).hex()
        self._decodable: set[int] = set()  # bodies read as JSON once (a fan-out's, by all)
        self._load()
        self._loaded = True  # False: a reload failed, and memory is not what was committed
        self.commit_alone()  # what `_load` settled, and what writers left (`_absorb`)

    def _load(self) -> None:
        """The sets by number, and no queue for a subscriber removed before a crash."""
        self._sets.clear()
        self._ids.clear()
        with self._db.read() as cur:
            cur.execute("SELECT number, ids FROM log_sets")
            for number, ids in cur.fetchall():
                key = tuple(orjson.loads(ids))
                self._sets[key], self._ids[int(number)] = int(number), key
            cur.execute("SELECT id FROM subscribers")
            known = {str(r[0]) for r in cur.fetchall()}
        with self.log.lock:
            for name in [name for name, _ in self.log.queues() if name not in known]:
                self.log.forget(name)  # written by the next transaction
            self._version = -1  # the next transaction looks for writers' rows

    def reload(self) -> None:
        """After a failed transaction: memory from what was committed, receipts from before
        refused (as after a restart). If reading the store fails too, memory stays unloaded
        and the next transaction reads it again before anything else: one built on what is
        left would number a new queue as an old one (names and states are upserted)."""
        with self.log.lock:
            self._loaded = False
            self._decodable.clear()  # first: the log numbers bodies from its store again
            self.log.reload()
            self._new_sets.clear()
            self._arrived.clear()
            self.inbox_waiting = True
            self.nonce = os.urandom(4).hex()
            self._load()
            self._loaded = True

    @property
    def loaded(self) -> bool:
        """False: a reload failed, and memory is not what was committed (`memory` reads it)."""
        return self._loaded

    @contextmanager
    def memory(self) -> Iterator[QueueLog]:
        """The log under its lock, read again first if a reload failed: a read outside a
        transaction (a depth, a page, the depths told to other brokers) would otherwise
        answer from what was left, a queue looking empty. Raises what reading raises."""
        with self.log.lock:
            if not self._loaded:
                self.reload()
            yield self.log

    # ------------------------------------------------------------------ transactions

    def apply(self, ops: Sequence[QueueOp], wait: bool = True) -> list[Any]:
        """The operations in order, in one transaction with the log's group commit; what
        each appends is leasable by the operations after it. An operation that fails is its
        caller's answer (its rows undone in a savepoint, the log read again afterwards); one
        refused before it changed anything (`_check`) leaves the others' memory alone.
        `wait=False`: `Busy` if another thread holds the log (with the database's `nowait`,
        its write lock too), and nothing ran."""

        def run(cur: Cursor) -> list[Any]:
            return [self._isolated(cur, op) for op in ops]

        try:
            answers = self.transaction(run, wait)
        except Busy:
            raise
        except Exception as exc:
            return [exc] * len(ops)
        if any(isinstance(a, Exception) and not isinstance(a, Refused) for a in answers):
            self.reload()  # what the failed operation did in memory was not committed
        return answers

    def transaction(self, step: Callable[[Cursor], T], wait: bool = True) -> T:
        """`step` and the log's group commit in one transaction; memory read again if it
        fails (what it changed in memory did not commit). `wait=False`: `Busy` rather than
        wait for another thread holding the log."""
        if not self.log.lock.acquire(blocking=wait):
            raise Busy
        try:
            if not self._loaded:
                self.reload()
            try:
                with self._db.tx() as cur:
                    self._engine.attach(cur)
                    self._absorb(cur, wait)
                    answer = step(cur)
                    prepared = self._flush(cur)
            except Busy:
                raise  # before anything ran (rolled back)
            except Exception:
                self.reload()
                raise
            finally:
                self._engine.attach(None)
            if prepared is not None:
                self.log.finish(prepared)
            if self._arrived:
                arrived, self._arrived = self._arrived, set()
                if self._on_arrival is not None:
                    self._on_arrival(arrived)
            return answer
        finally:
            self.log.lock.release()

    def one(self, op: QueueOp) -> Any:
        """One operation in a transaction of its own; what it raised is raised."""
        answer = self.apply([op])[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def commit_alone(self) -> None:
        """A group commit of what memory changed outside a transaction."""
        self.transaction(lambda cur: None)

    def _flush(self, cur: Cursor) -> Any:
        if self._new_sets:
            cur.executemany(
                self._db.q("INSERT INTO log_sets VALUES (?, ?)"),
                [(n, dumps(list(ids))) for n, ids in self._new_sets],
            )
            self._new_sets.clear()
        return self.log.prepare()

    def _isolated(self, cur: Cursor, op: QueueOp) -> Any:
        if isinstance(op, MEMORY_ONLY):  # no rows to undo: no savepoint's two statements
            try:
                return self._run(cur, op)
            except Exception as exc:
                return exc
        cur.execute("SAVEPOINT op")
        try:
            result = self._run(cur, op)
        except Exception as exc:  # one caller's failure is that caller's answer
            cur.execute("ROLLBACK TO SAVEPOINT op")
            result = exc
        cur.execute("RELEASE SAVEPOINT op")
        return result

    def _run(self, cur: Cursor, op: QueueOp) -> Any:
        refuse_malformed(op)
        match op:
            case Enqueue(messages, fresh, fanouts):
                return self._fanouts(cur, fanouts) + self._messages(cur, messages, fresh)
            case PublishOnce():
                duplicates, fresh_fanouts = self._dedup.claim(cur, op)
                self._fanouts(cur, fresh_fanouts)
                return duplicates
            case Lease():
                return self._lease(cur, op)
            case Ack(subscriber_id, receipts):
                return self._settle(subscriber_id, receipts, None)
            case Nack(subscriber_id, receipts, now, delay_s):
                return self._settle(subscriber_id, receipts, now + delay_s)
            case Reject():
                return self._reject(cur, op)
            case Hasten(subscriber_id, now):
                cursor = self.log.cursor(subscriber_id)
                return 0 if cursor is None else cursor.hasten(now)
            case Owe(evaluations):
                return owe_step(self._db, evaluations)(cur)
            case Discharge(publication_ids):
                return discharge_step(self._db, publication_ids)(cur)
        raise TypeError(f"not a queue operation: {op!r}")

    # ------------------------------------------------------------------ enqueueing

    def _absorb(self, cur: Cursor, wait: bool = True) -> None:
        """Move into the log the deliveries another process wrote as rows since this
        connection last looked (SQLite's `PRAGMA data_version` tells, one statement a
        transaction; elsewhere the first page is looked for):
        the pipeline's `tidings match` and elastic exit points write to a log store as to
        the rows layout (`open_store(..., writer=True)`); a delivery a fresh publication
        already made to its subscriber is dropped as the repeat it is. `wait=False` (a
        commit on the event loop's thread): `Busy` when there may be rows to take in, which
        may be a pipeline's million, so that a worker thread takes them."""
        if self._inbox:
            self._take_inbox(cur)
            return
        asked = self._db.dialect.changed_elsewhere
        if asked is not None:
            cur.execute(asked)
            version = int(cur.fetchone()[0])
            if version == self._version:
                return
            if not wait:
                raise Busy
            self._version = version
        while rows := self._rows_page(cur):
            keys = {str(r[6]).split("~", 1)[0] for r in rows}
            recipients = logtables.recipients(self._db, cur, keys)
            for r in rows:
                key = str(r[6]).split("~", 1)[0]
                if self.log.number(r[1]) in recipients.get(key, ()):
                    continue
                body = (r[4] or "null").encode()
                tag = self.tag(orjson.loads(r[3]))
                self.log.append([Post(pack(r[2], body), [r[1]], [tag], float(r[5]), len(body))])
                if r[7]:  # an attempt made before: still counted
                    cursor = self.log.cursor(r[1])
                    assert cursor is not None
                    cursor.attempts[cursor.last_seq] = int(r[7])
                    self.log.touched(r[1])
            cur.execute(self._db.q("DELETE FROM messages WHERE seq <= ?"), (rows[-1][0],))
            drop_bodies(self._db, cur, {str(r[6]) for r in rows})

    def _take_inbox(self, cur: Cursor) -> None:
        """What publishing brokers left for this partition, appended in their order (when
        it may hold some: a statement a transaction saved otherwise)."""
        if not self.inbox_waiting:
            return
        self.inbox_waiting = False
        for delivered in inbox.take(cur):
            self.take(cur, delivered)
            for f in delivered.fanouts:
                self._arrived.update(f.owners)
            self._arrived.update(m.subscriber_id for m in delivered.checked)

    def take(self, cur: Cursor, delivered: inbox.Delivered) -> int:
        """A partition's share of publications, in this transaction: fresh fan-outs
        appended, checked deliveries (claimed by their publisher) unless already made."""
        appended = self._fanouts(cur, delivered.fanouts)
        if delivered.checked:
            appended += self._messages(cur, delivered.checked, fresh=False, claimed=True)
        return appended

    @staticmethod
    def _rows_page(cur: Cursor) -> list[Any]:
        cur.execute(
            "SELECT m.seq, m.subscriber_id, m.publication_id, m.subscription_ids, b.body, "
            "m.enqueued_at, m.body_key, m.attempt FROM messages m "
            "LEFT JOIN bodies b ON b.key = m.body_key "
            "ORDER BY m.seq LIMIT 5000"
        )
        return list(cur.fetchall())

    def tag(self, ids: Sequence[str]) -> int:
        """A delivery's subscription ids, by number (a set's number is kept once)."""
        key = tuple(ids)
        number = self._sets.get(key)
        if number is None:
            number = len(self._sets) + 1
            self._sets[key], self._ids[number] = number, key
            self._new_sets.append((number, key))
        return number

    def subscription_ids(self, tag: int) -> tuple[str, ...]:
        return self._ids.get(tag, ())

    def _fanouts(self, cur: Cursor, fanouts: Sequence[Fanout]) -> int:
        if not fanouts:
            return 0
        posts = [
            Post(
                pack(f.publication_id, f.body),
                list(f.owners),
                [self.tag(ids) for ids in f.owners.values()],
                f.enqueued_at,
                len(f.body),
            )
            for f in fanouts
        ]
        self._remember(
            cur, [(f.dedup_key, f.publication_id, f.enqueued_at, f.owners) for f in fanouts]
        )
        return self.log.append(posts)

    def _messages(
        self,
        cur: Cursor,
        messages: Sequence[NewMessage],
        fresh: bool,
        remember: bool = True,
        claimed: bool = False,
    ) -> int:
        """Deliveries one by one: a run of one publication's (one key, one body) is a post;
        unless `fresh`, each is checked against every delivery of its key before (`claimed`:
        its claim in `dedup` made already, by the broker that published it)."""
        if not fresh:
            messages = self._new_only(cur, messages, claim=not claimed)
        posts: list[Post] = []
        seen: list[tuple[str, str, float, list[str]]] = []
        for (key, _), run in groupby(messages, key=lambda m: (m.dedup_key, m.body)):
            group = list(run)
            first = group[0]
            owners = [m.subscriber_id for m in group]
            tags = [self.tag(m.subscription_ids) for m in group]
            stored = pack(first.publication_id, first.body)
            posts.append(Post(stored, owners, tags, first.enqueued_at, len(first.body)))
            if fresh and remember:
                seen.append((key, first.publication_id, first.enqueued_at, owners))
        if seen:
            self._remember(cur, seen)
        return self.log.append(posts) if posts else 0

    def _remember(
        self, cur: Cursor, publications: Iterable[tuple[str, str, float, Iterable[str]]]
    ) -> None:
        """Each publication's key and recipients, for replays and progress: one row a key,
        its recipients gathered wherever its deliveries were in the batch."""
        rows: dict[str, tuple[str, str, float, array[int]]] = {}
        number = self.log.number
        for key, pid, at, owners in publications:
            found = rows.get(key)
            recipients = found[3] if found else array("i")
            recipients.extend(map(number, owners))
            rows[key] = (key, pid, max(at, found[2]) if found else at, recipients)
        self._db.dialect.insert_rows(
            cur,
            "log_publications",
            ("text", "text", "float8", "bytea"),
            [(key, pid, at, recipients.tobytes()) for key, pid, at, recipients in rows.values()],
            PUBLICATION_REPLACES,
        )

    def _new_only(
        self, cur: Cursor, messages: Sequence[NewMessage], claim: bool = True
    ) -> list[NewMessage]:
        """The deliveries whose (subscriber, key) was never enqueued: claimed in `dedup`
        (unless `claim` is false: claimed before), and not among a fresh publication's
        recipients (`log_publications`)."""
        recipients = logtables.recipients(self._db, cur, {m.dedup_key for m in messages})
        new: list[NewMessage] = []
        for m in messages:
            number = self.log.number(m.subscriber_id)
            if number in recipients.get(m.dedup_key, ()):
                continue
            if not claim or claim_delivery(self._db, cur, m):
                new.append(m)
        return new

    # ------------------------------------------------------------------ leasing, settling

    def _lease(self, cur: Cursor, op: Lease) -> list[Message]:
        taken, dead = self.log.take(
            op.subscriber_id,
            op.max_messages,
            op.visibility_s,
            op.now,
            op.max_attempts,
            op.max_bytes,
        )
        bodies = self.log.read({t.body for t in (*taken, *dead)})
        if dead:
            self.dead_letter(cur, op.subscriber_id, dead, bodies, "max_attempts", op.now)
        until = op.now + op.visibility_s
        out: list[Message] = []
        sid, ids, nonce, body_time = op.subscriber_id, self._ids, self.nonce, self.log.body_time
        decodable, in_memory = self._decodable, self.log.in_memory
        for t in taken:
            seq, body, attempt = t.seq, t.body, t.attempt
            stored = bodies.get(body)
            publication_id, raw = unpack(stored) if stored is not None else ("", b"")
            if stored is None or body not in decodable or not in_memory(body):
                try:
                    if stored is None:
                        raise TypeError("the body is missing")
                    orjson.loads(raw)
                except (orjson.JSONDecodeError, TypeError) as exc:
                    self._undecodable(cur, sid, t, bodies, exc, op.now)
                    continue
                if len(decodable) >= DECODABLE_KEPT:
                    decodable.clear()
                decodable.add(body)
            out.append(
                new_message(
                    (
                        seq,
                        sid,
                        publication_id,
                        ids.get(t.tag, ()),
                        raw,
                        body_time(body),
                        attempt,
                        f"{seq}.{attempt}.{nonce}",
                        until,
                    )
                )
            )
        return out

    def _undecodable(
        self, cur: Cursor, sid: str, t: Taken, bodies: dict[int, bytes], exc: Exception, now: float
    ) -> None:
        self.dead_letter(cur, sid, [t], bodies, f"undecodable: {exc}", now)
        cursor = self.log.cursor(sid)
        if cursor is not None:
            cursor.settle(t.seq)

    def parse(self, receipt: str) -> tuple[int, int] | None:
        """(seq, attempt) of a receipt this process issued, or None. Its nonce is compared
        first: a receipt ending in this process's nonce has a valid one, so only its numbers
        are left to check (the pattern's whole match cost twice this, per acknowledgement)."""
        parts = receipt.split(".") if isinstance(receipt, str) else ()
        if len(parts) != 3 or parts[2] != self.nonce:
            return None
        seq, attempt = parts[0], parts[1]
        if not (seq.isascii() and attempt.isascii() and seq.isdigit() and attempt.isdigit()):
            return None
        if len(seq) > SEQ_DIGITS or len(attempt) > ATTEMPT_DIGITS:
            return None
        return int(seq), int(attempt)

    def _settle(
        self, subscriber_id: str, receipts: Sequence[str], ready_at: float | None
    ) -> AckResult:
        wanted = list(dict.fromkeys(receipts))
        cursor = self.log.cursor(subscriber_id)
        done: set[str] = set()
        for receipt in wanted:
            parsed = self.parse(receipt)
            if cursor is None or parsed is None:
                continue
            ok = cursor.ack(*parsed) if ready_at is None else cursor.hand_back(*parsed, ready_at)
            if ok:
                done.add(receipt)
        if done and ready_at is None:
            self.log.touched(subscriber_id)
        return AckResult([r for r in wanted if r in done], [r for r in wanted if r not in done])

    def _reject(self, cur: Cursor, op: Reject) -> bool:
        cursor = self.log.cursor(op.subscriber_id)
        parsed = self.parse(op.receipt)
        if cursor is None or parsed is None:
            return False
        seq, attempt = parsed
        if seq in cursor.handed or seq in cursor.acked or cursor.attempts.get(seq) != attempt:
            return False
        entry = next(cursor.entries(seq - 1), None)
        if entry is None or entry[0] != seq:
            return False
        taken = Taken(seq, entry[1], entry[2], attempt)
        bodies = self.log.read({taken.body})
        self.dead_letter(cur, op.subscriber_id, [taken], bodies, op.reason, op.now)
        cursor.settle(seq)
        self.log.touched(op.subscriber_id)
        return True

    # ------------------------------------------------------------------ dead letters

    def dead_letter(
        self,
        cur: Cursor,
        subscriber_id: str,
        taken: Sequence[Taken],
        bodies: dict[int, bytes],
        reason: str,
        now: float,
    ) -> None:
        """Copy deliveries into the dead letters (their bodies into `bodies`, once); the
        caller settles them in the log."""
        rows, texts = [], {}
        for t in taken:
            stored = bodies.get(t.body)
            publication_id, raw = unpack(stored) if stored is not None else ("", b"null")
            key = f"log~{publication_id}~{t.body}"
            texts[key] = raw.decode(errors="replace")
            rows.append(
                (
                    subscriber_id,
                    publication_id,
                    dumps(list(self._ids.get(t.tag, ()))),
                    key,
                    self.log.body_time(t.body),
                    t.attempt,
                    reason,
                    now,
                )
            )
        add_body = self._db.dialect.ignoring_duplicates("bodies", "VALUES (?, ?)")
        cur.executemany(add_body, list(texts.items()))
        cur.executemany(
            self._db.q(
                "INSERT INTO dead_letters (subscriber_id, publication_id, subscription_ids, "
                "body_key, enqueued_at, attempt, reason, dead_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            rows,
        )

    def settle_out(
        self, subscriber_id: str, pick: Callable[[int, int], bool], reason: str | None, now: float
    ) -> int:
        """Take out of the queue every delivery `pick(seq, body)` chooses, dead-lettering
        each with `reason` (None: dropped, a purge), in one transaction; how many went."""
        with self.memory():
            cursor = self.log.cursor(subscriber_id)
            if cursor is None:
                return 0
            chosen = [
                Taken(seq, body, tag, cursor.attempts.get(seq, 0))
                for seq, body, tag in cursor.entries()
                if pick(seq, body)
            ]
            if not chosen:
                return 0

            def step(cur: Cursor) -> None:
                if reason is not None:
                    bodies = self.log.read({t.body for t in chosen})
                    self.dead_letter(cur, subscriber_id, chosen, bodies, reason, now)
                for t in chosen:
                    cursor.settle(t.seq)
                self.log.touched(subscriber_id)

            self.transaction(step)
            return len(chosen)


def claim_delivery(db: Database, cur: Cursor, m: NewMessage) -> bool:
    """Claim a checked delivery's (subscriber, key) in `dedup`: False if it was before."""
    cur.execute(
        db.dialect.ignoring_duplicates("dedup", "VALUES (?, ?, ?)"),
        (m.subscriber_id, m.dedup_key, m.enqueued_at),
    )
    return bool(cur.rowcount == 1)


class Refused(TypeError):
    """An operation refused before it changed anything."""


def refuse_malformed(op: QueueOp) -> None:
    """Refuse a malformed enqueue before any of it is appended (the log has no savepoint)."""
    if isinstance(op, ENQUEUES):
        for f in op.fanouts:  # (no object made per delivery to check it)
            if not all(isinstance(owner, str) for owner in f.owners):
                raise Refused("a delivery needs a subscriber")
            if not isinstance(f.body, bytes) or not isinstance(f.publication_id, str):
                raise Refused("a fan-out's body is bytes and its publication id a string")
    if not isinstance(op, Enqueue):
        return
    for m in op.messages:
        if not isinstance(m.subscriber_id, str) or not isinstance(m.publication_id, str):
            raise Refused("a delivery needs a subscriber and a publication id")
        if not isinstance(m.body, bytes) or not isinstance(m.dedup_key, str):
            raise Refused("a delivery's body is bytes and its key a string")
