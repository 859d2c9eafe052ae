"""A matcher's slice takes many subscriptions at once (a scale's or a recovery's state) in
one bulk call where it can, and answers exactly as when they are added one by one."""

from __future__ import annotations

import random

import pytest

from tidings.elastic.operators.slices import BULK_FROM, Slice, numeric_rows
from tidings.elastic.protocol import wire
from tidings.elastic.protocol.partition import Selector
from tidings.matching.engine import Event, Matcher


def records(n: int, seed: int) -> list[wire.SubscriptionRecord]:
    """Numeric intervals (the bulk path), and what it leaves to the one-by-one path: topics,
    strings, `in`, `!=`, numbers too large to be exact, a repeated id."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        low = rng.randrange(0, 100)
        kind = i % 7
        if kind == 0:
            out.append(wire.SubscriptionRecord(f"s{i}", f"u{i % 13}", topics=[f"t/{i % 5}"]))
            continue
        predicates: list[wire.WirePredicate] = [("x", ">=", low), ("x", "<", low + 10)]
        if kind == 1:
            predicates.append(("y", "=", rng.choice([1, 2.5, 3])))
        elif kind == 2:
            predicates = [("name", "=", rng.choice(["a", "b"]))]
        elif kind == 3:
            predicates.append(("y", "in", [1, 2]))
        elif kind == 4:
            predicates.append(("y", "!=", 2))
        elif kind == 5:
            predicates = [("x", "<", 2**60)]
        out.append(wire.SubscriptionRecord(f"s{i}", f"u{i % 13}", predicates=predicates))
    out.append(out[1])  # the same subscription twice
    return out


def events(seed: int) -> list[Event]:
    rng = random.Random(seed)
    return [
        Event(
            (f"t/{rng.randrange(6)}",),
            {"x": rng.randrange(-5, 115), "y": rng.choice([1, 2, 2.5, 3]), "name": "a"},
        )
        for _ in range(300)
    ]


@pytest.fixture
def in_bulk(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of subscriptions of each bulk call of an index from now on."""
    calls: list[int] = []
    add_arrays = Matcher.add_content_arrays

    def counted(index: Matcher, ids: list[str], *rest: object) -> None:
        add_arrays(index, ids, *rest)  # type: ignore[arg-type]
        calls.append(len(ids))

    monkeypatch.setattr(Matcher, "add_content_arrays", counted)
    return calls


def test_many_subscriptions_at_once_match_as_when_added_one_by_one(in_bulk: list[int]) -> None:
    given = records(3 * BULK_FROM, seed=3)
    bulk = Slice(Selector(1, ("m",)))
    bulk.add(given)
    assert in_bulk == [sum(1 for i in range(3 * BULK_FROM) if i % 7 in (1, 6))]
    bulk.index.wait()
    each = Slice(Selector(1, ("m",)))
    for record in given:
        each.add([record])
    assert bulk.records == each.records
    for event in events(seed=4):
        got = bulk.index.match(event)
        want = each.index.match(event)
        assert {s: sorted(ids) for s, ids in got.items()} == {
            s: sorted(ids) for s, ids in want.items()
        }
    bulk.remove("s1")
    each.remove("s1")
    probe = Event((), {"x": records(2, 3)[1].predicates[0][2], "y": 1})
    assert bulk.index.match(probe) == each.index.match(probe)


@pytest.mark.parametrize("many", [False, True], ids=["one by one", "in bulk"])
def test_an_id_given_twice_in_one_add_keeps_its_last_subscription_whatever_its_kind(
    many: bool,
) -> None:
    numeric = wire.SubscriptionRecord("s", "u", predicates=[("x", ">=", 0), ("x", "<", 9)])
    topical = wire.SubscriptionRecord("s", "u", topics=["t/a"])
    filler = [r for r in records(BULK_FROM, seed=5) if r.id != "s"] if many else []
    for order in ([topical, numeric], [numeric, topical], [topical, numeric, topical]):
        piece = Slice(Selector(1, ("m",)))
        piece.add([*filler, *order])
        last = order[-1]
        assert piece.records["s"] == last
        (by_topic,) = piece.match_batch([Event(("t/a",), {"x": 100})])
        (by_content,) = piece.match_batch([Event(("t/b",), {"x": 1})])
        assert ("s" in by_topic.get("u", [])) == (last is topical)
        assert ("s" in by_content.get("u", [])) == (last is numeric)


def intervals(n: int, seed: int) -> list[wire.SubscriptionRecord]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        low = rng.randrange(0, 100)
        predicates: list[wire.WirePredicate] = [("x", ">=", low), ("x", "<", low + 10)]
        if i % 3 == 0:
            predicates = [("x", ">", low)]  # a shorter row: repeats its last
        elif i % 3 == 1:
            predicates.append(("y", "<=", rng.choice([1, 2.5])))
        out.append(wire.SubscriptionRecord(f"s{i}", f"u{i % 13}", predicates=predicates))
    return out


def assert_answers_alike(one: Slice, other: Slice) -> None:
    for event in events(seed=8):
        assert one.match_batch([event]) == other.match_batch([event])


@pytest.mark.parametrize(
    "spoiler",
    [
        None,
        ("y", "=", True),
        ("y", "<", 2**60),
        ("y", "<", 10**400),
        ("y", "<", float("nan")),
        ("y", "<", float("inf")),
        ("y", "in", [1, 2]),
        ("y", "=", "a"),
    ],
    ids=["none", "a boolean", "too large", "beyond a float", "nan", "inf", "in", "text"],
)
def test_numeric_subscriptions_go_in_one_bulk_call_and_one_that_is_not_goes_alone(
    in_bulk: list[int], spoiler: wire.WirePredicate | None
) -> None:
    given = intervals(2 * BULK_FROM, seed=6)
    if spoiler is not None:
        given[7] = wire.SubscriptionRecord("s7", "u7", predicates=[("x", ">=", 1), spoiler])
    bulk, each = Slice(Selector(1, ("m",))), Slice(Selector(1, ("m",)))
    bulk.add(given)
    assert in_bulk == [len(given) - (spoiler is not None)]
    for record in given:
        each.add([record])
    assert bulk.records == each.records
    assert_answers_alike(bulk, each)


def test_a_batch_with_ids_already_held_replaces_them_and_adds_the_rest_in_bulk(
    in_bulk: list[int],
) -> None:
    first, second = intervals(2 * BULK_FROM, seed=6), intervals(2 * BULK_FROM, seed=9)
    again = [
        *second[:10],
        *[
            wire.SubscriptionRecord(f"n{r.id}", r.subscriber, r.topics, r.predicates)
            for r in second[10:]
        ],
    ]
    bulk, each = Slice(Selector(1, ("m",))), Slice(Selector(1, ("m",)))
    bulk.add(first)
    in_bulk.clear()
    bulk.add(again)
    assert in_bulk == [len(again) - 10]
    for record in [*first, *again]:
        each.add([record])
    assert bulk.records == each.records
    assert_answers_alike(bulk, each)


def test_no_records_make_no_columns() -> None:
    assert numeric_rows([]) is None
