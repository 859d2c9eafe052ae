"""Which partitions of a partitioned log this broker owns, and the thread that keeps it so
(`partitions.py`'s store runs its queue operations on what this owns).

A partition is owned by the broker holding its session advisory lock (`lock_key`), whose
session then runs every one of the partition's transactions: a broker whose session ended
(killed, or cut off) has lost the lock with it, and its transactions fail, so two owners
never write at once. Each broker takes the partitions it prefers (`own=`) or, naming none, a
fair share (the partitions over the brokers counted by their member locks); after a grace
it adopts any partition with no owner; an adopter hands a partition back when a broker
preferring it holds the partition's "want" lock. The thread also listens for the inbox
notes publishers send (`inbox.put`) and wakes the subscribers they name.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

import psycopg

from tidings.errors import ErrorCode, TidingsError
from tidings.store import inbox
from tidings.store.database import Database
from tidings.store.dialect import POSTGRES
from tidings.store.loglayout import LogLayout
from tidings.store.logqueues import LogQueues
from tidings.store.sql import SQLStore

log = logging.getLogger("tidings.store")
Connection = psycopg.Connection[tuple[object, ...]]
TICK_S = 0.5  # how often ownership is looked at (and inboxes read, should a note be lost)
ADOPT_AFTER_S = 2.0  # how long a partition is seen without an owner before it is adopted
RETRY_AFTER_S = 1
OWNER_WAIT_S = 3.0  # a preferred partition waited for at the start (`pglog.OWNER_WAIT_S`)


def lock_key(schema: str, partition: int, purpose: str = "owner") -> int:
    """A signed 64-bit advisory lock key for a partition's owner (or a broker wanting it)."""
    digest = hashlib.sha256(f"tidings {purpose} {schema} {partition}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def members_space(schema: str) -> int:
    """The first key of the brokers' member locks (`pg_try_advisory_lock(space, member)`),
    a positive 32-bit number naming this schema's brokers."""
    digest = hashlib.sha256(f"tidings members {schema}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


class PartitionQueues(LogLayout):
    """One owned partition: the log layout's queue operations in the partition's session
    (its log tables first on the search path, the shared rows after them)."""

    def __init__(self, db: Database, on_arrival: Callable[[set[str]], None]) -> None:
        SQLStore.__init__(self, db)
        self.queues = LogQueues(db, inbox=True, on_arrival=on_arrival)


class Partition:
    """A partition this broker owns, for as long as its session holds the lock."""

    def __init__(
        self, conn: Connection, number: int, on_arrival: Callable[[set[str]], None]
    ) -> None:
        self.number = number
        self._conn = conn
        self._guard = threading.RLock()
        db = Database(POSTGRES, self._session, self._session)
        self.store = PartitionQueues(db, on_arrival)

    @contextmanager
    def _session(self) -> Iterator[psycopg.Cursor[tuple[object, ...]]]:
        with self._guard:
            if self._conn.closed:  # handed back while this operation waited for it
                raise TidingsError(
                    ErrorCode.UNAVAILABLE,
                    detail=f"partition {self.number} moved to another broker: try again",
                    retry_s=RETRY_AFTER_S,
                )
            with self._conn.transaction(), self._conn.cursor() as cur:
                yield cur

    @property
    def lost(self) -> bool:
        """Its session ended (and the lock with it): another broker may own it now."""
        return bool(self._conn.closed or self._conn.broken)

    @property
    def backend_pid(self) -> int:
        """The PostgreSQL backend of its session (ending it takes the partition away)."""
        return self._conn.info.backend_pid

    def take_inbox(self) -> None:
        self.store.queues.commit_alone()

    def close(self) -> None:
        with self._guard:
            self._conn.close()  # the lock goes with the session


class Ownership:
    """The partitions this broker owns (`parts`), kept by a thread of its own once `start`
    is called. `on_arrival`: told the subscribers whose queues here received deliveries
    (from a note, or an inbox taken in); `on_tick`: called every `TICK_S` after ownership
    was looked at."""

    def __init__(
        self,
        conninfo: str,
        schema: str,
        partitions: int,
        own: Sequence[int] | None,
        on_arrival: Callable[[set[str]], None],
        on_tick: Callable[[], None],
    ) -> None:
        self._conninfo = conninfo
        self.schema = schema
        self.partitions = partitions
        self._fair = own is None  # no `own=`: a fair share, whichever (`_tend_fairly`)
        self._preferred = set() if own is None else set(own)
        self._on_arrival = on_arrival
        self._on_tick = on_tick
        self.inbox_channel = f"tidings.{schema}.inbox"[:63]
        self._members_space = members_space(schema)
        self.parts: dict[int, Partition] = {}
        self._parts_lock = threading.Lock()
        self._free_since: dict[int, float] = {}
        self._wanting: set[int] = set()  # preferred partitions whose "want" lock is held
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._control: Connection | None = None

    def start(self) -> None:
        """Count this broker in, take what it prefers (or its share), then keep it so."""
        self._control = self.connect()
        self._join()
        self._take_preferred()
        self._thread = threading.Thread(target=self._run, name="tidings-partitions", daemon=True)
        self._thread.start()

    def connect(self, search_path: str | None = None) -> Connection:
        options = {"options": f"-c search_path={search_path}"} if search_path else {}
        conn: Connection = psycopg.connect(self._conninfo, autocommit=True, **options)  # type: ignore[arg-type]
        return conn

    # ------------------------------------------------------------------ what is owned

    def owned(self) -> set[int]:
        """The partitions this broker serves now."""
        with self._parts_lock:
            return set(self.parts)

    def part_of(self, subscriber_id: str) -> Partition | None:
        """The partition holding this subscriber's queue, if owned here."""
        return self.parts.get(inbox.partition_of(subscriber_id, self.partitions))

    def stores(self) -> list[PartitionQueues]:
        """The queues of each partition owned here, by number."""
        with self._parts_lock:
            return [part.store for _, part in sorted(self.parts.items())]

    def home(self) -> tuple[dict[int, Partition], Partition | None]:
        """The partitions owned here, and the first whose session is alive (a publishing
        transaction runs in it), if any."""
        with self._parts_lock:
            owned = dict(self.parts)
        return owned, next((part for _, part in sorted(owned.items()) if not part.lost), None)

    # ------------------------------------------------------------------ taking, handing back

    def _take(self, p: int) -> bool:
        """Own partition `p` if no broker does: its session takes the lock, then its log is
        read (and its inbox taken in)."""
        name = inbox.partition_schema(self.schema, p)
        conn = self.connect(f'"{name}","{self.schema}"')
        try:
            row = conn.execute(
                "SELECT pg_try_advisory_lock(%s)", (lock_key(self.schema, p),)
            ).fetchone()
            if not (row and row[0]):
                conn.close()
                return False
            part = Partition(conn, p, self._on_arrival)
        except BaseException:
            conn.close()
            raise
        with self._parts_lock:
            if self._stop.is_set():  # closed meanwhile: nothing is served any more
                part.close()
                return False
            self.parts[p] = part
        log.info("partition %d of %s owned here", p, self.schema)
        return True

    def _take_preferred(self) -> None:
        """At the start, the preferred partitions (or a fair share), waited for a moment: a
        killed broker's session (this broker's before a restart) ends as soon as
        PostgreSQL reads its closed socket. What is still owned after that is left to the
        thread."""
        deadline = time.monotonic() + OWNER_WAIT_S
        missing = sorted(self._preferred)
        while True:
            if self._fair:
                share = self._share()
                for p in range(self.partitions):
                    if len(self.parts) >= share:
                        return
                    if p not in self.parts:
                        self._take(p)
            else:
                missing = [p for p in missing if not self._take(p)]
                if not missing:
                    return
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)

    def _join(self) -> None:
        """Count this broker among the store's (a session lock of its own in the members'
        space)."""
        while True:
            member = secrets.randbelow(2**31 - 1) + 1
            row = (
                self._control_session()
                .execute("SELECT pg_try_advisory_lock(%s, %s)", (self._members_space, member))
                .fetchone()
            )
            if row and row[0]:
                return

    def _share(self) -> int:
        """A fair share of the partitions: their count over the brokers', rounded up."""
        row = (
            self._control_session()
            .execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND objsubid = 2 AND classid = %s::oid "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                (self._members_space,),
            )
            .fetchone()
        )
        brokers = max(1, int(str(row[0])) if row else 1)
        return -(-self.partitions // brokers)

    def _tend_fairly(self, owned: set[int]) -> None:
        """No partition preferred: one handed on if a broker preferring it waits or if more
        than a fair share are owned here; one taken if fewer and one is free."""
        wanted = [p for p in owned if not self._probe(lock_key(self.schema, p, "want"))]
        if wanted:
            self._release(wanted[0])
            return
        share = self._share()
        if len(owned) > share:
            self._release(max(owned))
            return
        if len(owned) < share:
            for p in range(self.partitions):
                free = p not in owned and self._probe(lock_key(self.schema, p))
                if free and self._probe(lock_key(self.schema, p, "want")) and self._take(p):
                    return

    def _release(self, p: int) -> None:
        """Stop serving partition `p` (another broker prefers it): its operations from now
        on are refused here, and its lock goes with its session once the one running ends."""
        with self._parts_lock:
            part = self.parts.pop(p, None)
        if part is not None:
            with part.store.queues.log.lock:
                part.close()
            log.info("partition %d of %s handed back", p, self.schema)

    @property
    def control_pid(self) -> int:
        """The PostgreSQL backend of the control session (its member lock and wants)."""
        return self._control_session().info.backend_pid

    def _control_session(self) -> Connection:
        """The control session (the member lock and the wants it holds, the probes)."""
        assert self._control is not None
        return self._control

    def _probe(self, key: int) -> bool:
        """Whether nobody holds the lock `key` (taken and let go at once)."""
        row = self._control_session().execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        if row and row[0]:
            self._control_session().execute("SELECT pg_advisory_unlock(%s)", (key,))
            return True
        return False

    def _tend(self, now: float) -> None:
        """One look at ownership: drop what lost its session, take what is preferred and
        free (wanting it meanwhile), adopt what has had no owner for a while, hand back what
        its preferrer waits for."""
        with self._parts_lock:
            lost = [part for part in self.parts.values() if part.lost]
        for part in lost:
            self.drop(part)
            log.warning("partition %d lost its session", part.number)
        owned = self.owned()
        if self._fair:
            self._tend_fairly(owned)
            return
        for p in range(self.partitions):
            want = lock_key(self.schema, p, "want")
            if p in owned:
                if p not in self._preferred and not self._probe(want):
                    self._release(p)
                continue
            if p in self._preferred:
                self._want_or_take(p, want)
                continue
            if not self._probe(lock_key(self.schema, p)):
                self._free_since.pop(p, None)
                continue
            since = self._free_since.setdefault(p, now)
            grace = now - self._started >= ADOPT_AFTER_S and now - since >= ADOPT_AFTER_S
            if grace and self._probe(want) and self._take(p):
                self._free_since.pop(p, None)

    def _want_or_take(self, p: int, want: int) -> None:
        """A preferred partition owned elsewhere: hold its "want" lock (its adopter hands
        it back), and take it once free."""
        if p not in self._wanting:  # (once held: a session's advisory locks count up)
            row = (
                self._control_session()
                .execute("SELECT pg_try_advisory_lock(%s)", (want,))
                .fetchone()
            )
            if row and row[0]:  # (else an adopter's probe held it a moment: again)
                self._wanting.add(p)
        if self._take(p):
            self._control_session().execute("SELECT pg_advisory_unlock(%s)", (want,))
            self._wanting.discard(p)

    def drop(self, part: Partition) -> None:
        """A partition whose session is gone (and the lock with it) is no longer served."""
        with self._parts_lock:
            if self.parts.get(part.number) is part:
                del self.parts[part.number]
        part.close()

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        """Inboxes taken in as soon as they are told of, ownership looked at every
        `TICK_S`."""
        last = 0.0
        while not self._stop.is_set():
            try:
                with self.connect() as conn:
                    conn.execute(f'LISTEN "{self.inbox_channel}"')
                    while not self._stop.is_set():
                        notes = list(conn.notifies(timeout=TICK_S, stop_after=1))
                        notes += conn.notifies(timeout=0.0)
                        told = _told(n.payload for n in notes)
                        now = time.monotonic()
                        due = now - last >= TICK_S
                        if due:
                            self._tend(now)
                            last = now
                            self._tick()
                        self._take_inboxes(told, due)
            except Exception as exc:  # (the thread goes on: ownership must be looked at)
                if self._stop.is_set():
                    return
                log.warning("partitions' look failed (%r); connecting again", exc)
                with contextlib.suppress(psycopg.Error):
                    self._lost()
                self._stop.wait(TICK_S)

    def _tick(self) -> None:
        """`on_tick`, whose failure (a partition's log unreadable for a moment) is logged:
        the inboxes are taken in and ownership looked at all the same."""
        try:
            self._on_tick()
        except Exception as exc:
            log.warning("the partitions' tick failed (%r)", exc)

    def _take_inboxes(self, told: dict[int, set[str] | None], every: bool) -> None:
        """Partitions told of their subscribers' deliveries wake those (whose leases take
        the inbox in); others, and every one each tick, take their inbox in here."""
        with self._parts_lock:
            parts = list(self.parts.values())
        for part in parts:
            if not every and part.number not in told:
                continue
            part.store.queues.inbox_waiting = True
            subscribers = None if every else told[part.number]
            if subscribers is not None:
                self._on_arrival(subscribers)
                continue
            try:
                part.take_inbox()
            except Exception as exc:
                if not part.lost:
                    raise
                self.drop(part)
                log.warning("partition %d lost its session (%r)", part.number, exc)

    def _lost(self) -> None:
        """The control session failed: the wants it held are gone with it."""
        if self._control is not None:
            with contextlib.suppress(psycopg.Error):
                self._control.close()
        self._wanting.clear()
        self._control = self.connect()
        self._join()

    def stop_looking(self) -> None:
        """Stop the thread: no inbox taken in, no partition taken or handed on any more;
        what is owned stays owned, with its sessions, until `close`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def close(self) -> None:
        """Stop the thread and let every partition go (their locks with their sessions)."""
        self.stop_looking()
        if self._control is not None:
            self._control.close()
        with self._parts_lock:
            parts, self.parts = list(self.parts.values()), {}
        for part in parts:
            with part.store.queues.log.lock:
                part.close()


def _told(payloads: Iterable[str]) -> dict[int, set[str] | None]:
    """The partitions notifications named, each with its subscribers (None: some not
    named, so the inbox is taken in by its owner at once)."""
    told: dict[int, set[str] | None] = {}
    for payload in payloads:
        found = inbox.noted(payload)
        if found is None:
            continue
        p, owners = found
        if owners is None or (p in told and told[p] is None):
            told[p] = None
        else:
            told.setdefault(p, set()).update(owners)  # type: ignore[union-attr]
    return told
