"""Pending function evaluations' promises, on every backend: recorded in a group commit,
claimed by one claimant at a time until the claim runs out, renewed only by their holder,
removed when done; a database of the previous schema gains the table."""

from __future__ import annotations

import threading
from dataclasses import replace

from tests.store.conftest import sql_of
from tests.store.test_behaviour import T0, msg, subscriber
from tests.store.test_endpoints import endpoint

from tidings.store.base import Discharge, Enqueue, Owe, PendingEvaluation, Store
from tidings.store.schema import SCHEMA_VERSION


def owed(pub: str, until: float = T0, by: str = "a") -> PendingEvaluation:
    return PendingEvaluation(pub, b'{"id": "%s"}' % pub.encode(), ("f1", "f2"), by, until)


def test_a_record_commits_with_the_deliveries_and_a_repeat_is_ignored(store: Store) -> None:
    subscriber(store)
    assert store.apply([Enqueue([msg("p1")]), Owe([owed("p1"), owed("p2")])]) == [1, 2]
    assert store.apply([Owe([owed("p1")])]) == [0]
    claimed = store.claim_pending("b", T0, T0 + 30, 10)
    assert claimed == [owed("p1", T0 + 30, "b"), owed("p2", T0 + 30, "b")]
    assert claimed[0].publication == b'{"id": "p1"}' and claimed[0].subscription_ids == ("f1", "f2")


def test_a_claim_holds_until_it_runs_out(store: Store) -> None:
    store.apply([Owe([owed("p1", until=T0 + 30)])])  # claimed by its publisher, "a"
    assert store.claim_pending("b", T0 + 29, T0 + 59, 10) == []
    assert [e.claimed_by for e in store.claim_pending("b", T0 + 30, T0 + 60, 10)] == ["b"]
    assert store.claim_pending("c", T0 + 59, T0 + 89, 10) == []


def test_only_the_holder_renews_its_claims(store: Store) -> None:
    store.apply([Owe([owed("p1", until=T0 + 30), owed("p2", until=T0 + 30)])])
    assert store.renew_pending("someone else", ["p1", "p2"], T0 + 100) == 0
    assert store.renew_pending("a", ["p1", "nothing"], T0 + 100) == 1
    assert [e.publication_id for e in store.claim_pending("b", T0 + 50, T0 + 80, 10)] == ["p2"]


def test_claims_are_taken_oldest_first_up_to_the_limit(store: Store) -> None:
    store.apply([Owe([owed("p1", until=T0 + 3), owed("p2", until=T0 + 1), owed("p3", T0 + 2)])])
    assert [e.publication_id for e in store.claim_pending("b", T0 + 5, T0 + 9, 2)] == ["p2", "p3"]


def test_discharged_records_are_gone(store: Store) -> None:
    store.apply([Owe([owed("p1"), owed("p2")])])
    assert store.apply([Discharge(["p1", "p1", "unknown"]), Discharge([])]) == [1, 0]
    assert [e.publication_id for e in store.claim_pending("b", T0, T0 + 1, 10)] == ["p2"]


def test_two_claimants_at_once_never_share_a_record(store: Store) -> None:
    store.apply([Owe([owed(f"p{i:03}") for i in range(200)])])
    got: dict[str, list[str]] = {"x": [], "y": []}

    def claim(who: str) -> None:
        while batch := store.claim_pending(who, T0, T0 + 60, 7):
            got[who] += [e.publication_id for e in batch]

    threads = [threading.Thread(target=claim, args=(who,)) for who in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not set(got["x"]) & set(got["y"])
    assert len(got["x"]) + len(got["y"]) == 200


def test_a_database_of_the_previous_schema_gains_pending_and_endpoint_retention(
    store: Store,
) -> None:
    subscriber(store)
    store.set_endpoint("s1", endpoint())
    with sql_of(store).db.tx() as cur:  # as version 4 left it
        cur.execute("DROP TABLE pending_evaluations")
        cur.execute("ALTER TABLE endpoints DROP COLUMN retention_s")
        cur.execute(f"UPDATE meta SET value = {SCHEMA_VERSION - 1} WHERE name = 'schema'")
    sql_of(store).create_schema()
    assert store.get_endpoint("s1") == endpoint()  # kept, with the queues' retention
    store.set_endpoint("s1", replace(endpoint(), retention_s=60.0))
    assert store.get_endpoint("s1") == replace(endpoint(), retention_s=60.0)
    assert store.apply([Owe([owed("p1")])]) == [1]
