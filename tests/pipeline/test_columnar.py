from __future__ import annotations

import random

import numpy as np

from tidings.matching.bitset import GE, LT
from tidings.matching.engine import Event, Matcher
from tidings.model import Op, Predicate, Publication, Subscriber, Subscription
from tidings.pipeline import index
from tidings.pipeline.columnar import ColumnsBuilder, eligible
from tidings.pipeline.snapshot import take_snapshot
from tidings.store import open_store
from tidings.store.base import Store

from .workloads import KEYS, NUMBERS, SUBSCRIBERS, matcher_triples, publications, subscriptions

COMPARISONS = (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ)


def numeric_subscription(rng: random.Random, sid: str) -> Subscription:
    """A conjunction the interval index takes: comparisons with numbers only."""
    preds = tuple(
        Predicate(rng.choice(KEYS), rng.choice(COMPARISONS), rng.choice(NUMBERS))
        for _ in range(rng.randint(1, 4))
    )
    return Subscription(sid, rng.choice(SUBSCRIBERS), "content", predicates=preds)


def churned_store(rng: random.Random) -> Store:
    """A store after adds, replacements (removed, then added again differently) and removals."""
    store = open_store("memory://")
    for owner in SUBSCRIBERS:
        store.add_subscriber(Subscriber(owner, "hash", 0.0))
    subs = subscriptions(rng, 120) + [numeric_subscription(rng, f"n{i:04d}") for i in range(150)]
    for sub in subs:
        store.add_subscription(sub)
    for sub in rng.sample(subs, 60):
        store.remove_subscription(sub.id)
        if rng.random() < 0.5:  # replaced: same id, new predicates and perhaps a new owner
            store.add_subscription(numeric_subscription(rng, sub.id))
    return store


Triple = tuple[str, str, str]


def triples(snapshot: index.SnapshotIndex, pubs: list[Publication]) -> set[Triple]:
    return {
        (p.id, owner, sid)
        for p, found in zip(pubs, snapshot.match(pubs), strict=True)
        for owner, sids in found.items()
        for sid in sids
    }


def test_the_columnar_snapshot_matches_as_the_tuple_path_and_the_broker_after_churn() -> None:
    rng = random.Random(5)
    store = churned_store(rng)
    subs = list(store.iter_subscriptions())
    pubs = publications(rng, 300)
    _, packed = take_snapshot(store, index.pack)
    reference = index.pack(1, subs, columnar=False)
    assert len(packed.columns) > 100 and packed.content  # both paths really carry some
    assert len(reference.columns) == 0
    columnar = triples(index.SnapshotIndex(packed), pubs)
    assert columnar == triples(index.SnapshotIndex(reference), pubs)
    assert columnar == matcher_triples(subs, pubs)
    assert any(t[2].startswith("n") for t in columnar)


def test_the_columns_hold_each_eligible_subscription_with_its_owner_once() -> None:
    store = churned_store(random.Random(8))
    subs = list(store.iter_subscriptions())
    _, packed = take_snapshot(store, index.pack)
    columns = packed.columns
    owners = [columns.owner_names[c] for c in columns.owners]
    held = list(zip(columns.ids.tolist(), owners, strict=True))
    assert held == [
        (s.id, s.subscriber_id)
        for s in subs
        if s.kind == "content" and eligible(s.id, s.predicates)
    ]
    assert {sid for sid, _, _ in packed.content}.isdisjoint(columns.ids.tolist())


def test_a_shorter_row_is_padded_with_its_last_predicate() -> None:
    builder = ColumnsBuilder()
    builder.add("a", "alice", (Predicate("x", Op.GE, 1), Predicate("y", Op.LT, 2.5)))
    builder.add("b", "bob", (Predicate("y", Op.GE, 3),))
    attrs, ops, vals = builder.build().matrices()
    assert attrs.tolist() == [[0, 1], [1, 1]]
    assert ops.tolist() == [[GE, LT], [GE, GE]]
    assert vals.tolist() == [[1.0, 2.5], [3.0, 3.0]]


def test_columns_load_into_a_matcher_with_their_owners() -> None:
    builder = ColumnsBuilder()
    builder.add("a", "alice", (Predicate("x", Op.GE, 1), Predicate("x", Op.LE, 3)))
    builder.add("b", "bob", (Predicate("x", Op.GT, 3),))
    builder.add("c", "alice", (Predicate("x", Op.GE, 3),))
    columns = builder.build()
    matcher = Matcher()
    columns.load_into(matcher)
    answers = [matcher.match(Event(attributes={"x": x})) for x in (0, 3, 3.5)]
    assert answers == [{}, {"alice": ["a", "c"]}, {"alice": ["c"], "bob": ["b"]}]
    assert columns.ids.dtype.kind == "U" and columns.vals.dtype == np.float64


def test_an_empty_snapshot_packs_and_matches_nothing() -> None:
    snapshot = index.SnapshotIndex(index.pack(1, []))
    assert snapshot.match([Publication("p", 1.0, None, ("a",), {"x": 1})]) == [{}]
