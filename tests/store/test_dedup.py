"""Publishers' dedup ids in the store (every backend): a claim and its publication's
enqueue are one step; a repeat within the window enqueues nothing and answers the first."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from tests.store.conftest import sql_of
from tests.store.test_behaviour import T0, subscriber

from tidings.store import open_store
from tidings.store.base import DedupClaim, DedupKey, Fanout, PublishOnce, Store, encode_body
from tidings.store.schema import run

WINDOW = 120.0


def fanout(pub: str, owners: tuple[str, ...] = ("s1",), at: float = T0) -> Fanout:
    body = encode_body({"id": pub})
    return Fanout(pub, pub, body, at, {o: ["sub1"] for o in owners})


def claim(
    dedup_id: str, pub: str, at: float = T0, deliveries: int = 1, publisher: str = ""
) -> DedupClaim:
    return DedupClaim(publisher, dedup_id, pub, at, deliveries, at + WINDOW)


def publish(
    store: Store, dedup_id: str, pub: str, at: float = T0, publisher: str = ""
) -> dict[DedupKey, DedupClaim]:
    op = PublishOnce([claim(dedup_id, pub, at, publisher=publisher)], at, [fanout(pub, at=at)])
    [answer] = store.apply([op])
    assert isinstance(answer, dict)
    return answer


def test_a_first_claim_enqueues_and_a_repeat_enqueues_nothing(store: Store) -> None:
    subscriber(store)
    assert publish(store, "order-1", "p1") == {}
    assert publish(store, "order-1", "p2", T0 + 5) == {("", "order-1"): claim("order-1", "p1")}
    assert [m.publication_id for m in store.lease("s1", 10, 30.0, 5, T0 + 6)] == ["p1"]


def test_a_repeat_in_the_same_step_is_the_duplicate_of_the_first(store: Store) -> None:
    subscriber(store)
    op = PublishOnce([claim("k", "p1"), claim("k", "p2")], T0, [fanout("p1"), fanout("p2")])
    [answer] = store.apply([op])
    assert answer == {("", "k"): claim("k", "p1")}
    assert [m.publication_id for m in store.lease("s1", 10, 30.0, 5, T0)] == ["p1"]


def test_a_claim_without_deliveries_still_holds_its_id(store: Store) -> None:
    subscriber(store)
    [answer] = store.apply([PublishOnce([claim("k", "p1", deliveries=0)], T0)])
    assert answer == {}
    assert publish(store, "k", "p2") == {("", "k"): claim("k", "p1", deliveries=0)}
    assert store.depth("s1", T0).ready == 0


def test_a_dedup_id_is_its_publishers_own(store: Store) -> None:
    subscriber(store)
    assert publish(store, "order-1", "p1", publisher="") == {}
    assert publish(store, "order-1", "p2", publisher="alice") == {}  # not the anonymous one's
    assert publish(store, "order-1", "p3", publisher="bob") == {}
    repeat = publish(store, "order-1", "p4", publisher="alice")
    assert repeat == {("alice", "order-1"): claim("order-1", "p2", publisher="alice")}
    leased = store.lease("s1", 10, 30.0, 5, T0)
    assert [m.publication_id for m in leased] == ["p1", "p2", "p3"]


def test_one_step_claims_one_id_of_two_publishers_both(store: Store) -> None:
    subscriber(store)
    claims = [claim("k", "p1", publisher="alice"), claim("k", "p2", publisher="bob")]
    [answer] = store.apply([PublishOnce(claims, T0, [fanout("p1"), fanout("p2")])])
    assert answer == {}
    assert store.depth("s1", T0).ready == 2


def test_once_the_window_has_passed_the_id_publishes_again(store: Store) -> None:
    subscriber(store)
    publish(store, "k", "p1")
    assert publish(store, "k", "p2", T0 + WINDOW) == {}
    assert publish(store, "k", "p3", T0 + WINDOW + 1) == {("", "k"): claim("k", "p2", T0 + WINDOW)}
    assert store.depth("s1", T0 + WINDOW + 1).ready == 2


def test_pruning_forgets_only_the_ids_whose_window_ended(store: Store) -> None:
    subscriber(store)
    publish(store, "old", "p1")
    publish(store, "new", "p2", T0 + 60)
    assert store.prune_dedup_ids(T0 + WINDOW) == 1
    assert publish(store, "new", "p3", T0 + WINDOW) != {}  # still held
    assert store.prune_dedup_ids(T0 + WINDOW) == 0


def test_racing_claims_of_one_id_enqueue_it_once(store: Store) -> None:
    subscriber(store)
    answers: list[dict[DedupKey, DedupClaim]] = []
    start = threading.Barrier(4)

    def racer(n: int) -> None:
        start.wait()
        for i in range(25):
            answers.append(publish(store, f"id-{i}", f"p{n}-{i}"))

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(1 for a in answers if not a) == 25  # one first per id
    leased = store.lease("s1", 100, 30.0, 5, T0)
    firsts = {m.publication_id for m in leased}
    assert len(leased) == 25 and all(
        c.publication_id in firsts for a in answers for c in a.values()
    )


def test_a_database_of_the_previous_schema_gains_the_dedup_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    open_store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:  # as a broker before dedup ids left it
        conn.execute("DROP TABLE publication_dedup")
        conn.execute("UPDATE meta SET value = ? WHERE name = 'schema'", (5,))
    store = open_store(f"sqlite:///{path}")
    try:
        subscriber(store)
        assert publish(store, "k", "p1") == {} and publish(store, "k", "p2") != {}
    finally:
        store.close()


V6 = """
DROP TABLE publication_dedup;
CREATE TABLE publication_dedup (
    dedup_id TEXT PRIMARY KEY, publication_id TEXT NOT NULL,
    published_at DOUBLE PRECISION NOT NULL, deliveries INTEGER NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL);
CREATE INDEX publication_dedup_expiry ON publication_dedup (expires_at);
UPDATE meta SET value = 6 WHERE name = 'schema'
"""


def as_version_6(store: Store) -> None:
    """The dedup ids' table as a broker of schema version 6 left it, with one id claimed."""
    db = sql_of(store).db
    with db.tx() as cur:
        run(cur, V6)
        cur.execute(
            db.q("INSERT INTO publication_dedup VALUES ('k', 'p1', ?, 1, ?)"), (T0, T0 + WINDOW)
        )
    sql_of(store).create_schema()


def test_unscoped_dedup_ids_are_kept_as_the_anonymous_publishers(store: Store) -> None:
    as_version_6(store)
    subscriber(store)
    assert publish(store, "k", "p2", T0 + 1) == {("", "k"): claim("k", "p1")}
    assert publish(store, "k", "p3", T0 + 1, publisher="alice") == {}
    assert store.prune_dedup_ids(T0 + WINDOW + 1) == 2


def test_the_upgraded_dedup_table_has_its_index_on_expiry(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/t.db")
    try:
        as_version_6(store)
    finally:
        store.close()
    with sqlite3.connect(tmp_path / "t.db") as conn:
        expiry = "SELECT tbl_name FROM sqlite_master WHERE name = 'publication_dedup_expiry'"
        assert conn.execute(expiry).fetchall() == [("publication_dedup",)]
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name LIKE '%v6'").fetchall()
