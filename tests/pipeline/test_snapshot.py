from __future__ import annotations

from collections.abc import Iterable, Iterator

import pytest

from tidings.errors import ErrorCode, TidingsError
from tidings.model import Op, Predicate, Subscription
from tidings.pipeline.snapshot import literal_prefix, pattern_regex, predicate_rows, take_snapshot


class ChangingStore:
    """A store whose subscriptions change while the first `changes` listings are read."""

    def __init__(self, changes: int) -> None:
        self.version = 1
        self.changes = changes
        self.subs = [Subscription("s1", "alice", "topic", topics=("a",))]

    def subscriptions_version(self) -> int:
        return self.version

    def iter_subscriptions(self, page: int = 10_000) -> Iterator[Subscription]:
        yield self.subs[0]
        if self.changes > 0:  # a subscription is added in the middle of the listing
            self.changes -= 1
            self.version += 1
            self.subs = [
                *self.subs,
                Subscription(f"s{self.version}", "bob", "topic", topics=("b",)),
            ]
        yield from self.subs[1:]


def listed(version: int, subs: Iterable[Subscription]) -> list[Subscription]:
    return list(subs)


def test_a_change_during_the_listing_is_seen_entirely_or_not_at_all() -> None:
    store = ChangingStore(changes=2)
    version, subs = take_snapshot(store, listed, pause_s=0.0)
    assert version == 3
    assert [s.id for s in subs] == ["s1", "s2", "s3"]


def test_a_store_that_never_settles_is_a_clear_error() -> None:
    with pytest.raises(TidingsError) as caught:
        take_snapshot(ChangingStore(changes=100), listed, attempts=3, pause_s=0.0)
    assert caught.value.code is ErrorCode.UNAVAILABLE


@pytest.mark.parametrize(
    ("pattern", "regex", "prefix"),
    [
        ("a/*/c", "^a/[^/]+/c$", "a"),
        ("a/#", "^a(/.*)?$", "a"),
        ("#", "^.*$", ""),
        ("*/b.c", r"^[^/]+/b\.c$", ""),
    ],
)
def test_a_pattern_becomes_an_anchored_regex_joined_on_its_literal_prefix(
    pattern: str, regex: str, prefix: str
) -> None:
    assert pattern_regex(pattern) == regex
    assert literal_prefix(pattern) == prefix


def test_an_in_predicate_is_one_row_per_value_under_one_predicate_number() -> None:
    sub = Subscription(
        "s",
        "alice",
        "content",
        predicates=(Predicate("k", Op.IN, (1, "x")), Predicate("j", Op.EXISTS, False)),
    )
    rows = predicate_rows(sub)
    assert [(r[2], r[3], r[5], r[6]) for r in rows] == [(0, 1, "=", 1), (0, 1, "=", 2)]
