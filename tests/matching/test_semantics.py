"""The reference semantics of a match, which every index and the Spark matcher follow."""

from __future__ import annotations

import pytest

from tidings.matching.semantics import predicate_holds, topic_matches
from tidings.model import Op, Predicate, Scalar

ATTRS: dict[str, Scalar] = {"n": 5, "f": 2.5, "s": "mobile", "b": True}


@pytest.mark.parametrize(
    ("key", "op", "value", "expected"),
    [
        ("n", Op.LT, 10, True),
        ("n", Op.LT, 5, False),
        ("n", Op.LE, 5, True),
        ("f", Op.GT, 2, True),
        ("n", Op.EQ, 5.0, True),
        ("n", Op.EQ, "5", False),
        ("s", Op.LT, "n", True),
        ("s", Op.NE, "text", True),
        ("s", Op.NE, 3, False),
        ("s", Op.PREFIX, "mob", True),
        ("s", Op.SUFFIX, "ile", True),
        ("s", Op.CONTAINS, "bil", True),
        ("n", Op.CONTAINS, "5", False),
        ("b", Op.EQ, True, True),
        ("b", Op.EQ, 1, False),
        ("b", Op.GT, False, False),
        ("s", Op.IN, ("text", "mobile"), True),
        ("n", Op.IN, ("5", 6), False),
        ("missing", Op.NE, 1, False),
        ("missing", Op.EXISTS, False, True),
        ("n", Op.EXISTS, True, True),
        ("n", Op.EXISTS, False, False),
    ],
)
def test_predicates_follow_the_documented_semantics(
    key: str, op: Op, value: Scalar | tuple[Scalar, ...], expected: bool
) -> None:
    assert predicate_holds(Predicate(key, op, value), ATTRS) is expected


@pytest.mark.parametrize(
    ("pattern", "topic", "expected"),
    [
        ("a/b", "a/b", True),
        ("a/*", "a/b", True),
        ("a/*", "a", False),
        ("a/*", "a/b/c", False),
        ("a/#", "a", True),
        ("a/#", "a/b/c", True),
        ("#", "x/y", True),
        ("*/b/#", "a/b", True),
        ("a/b", "a/b/c", False),
    ],
)
def test_topic_patterns_match_by_segment(pattern: str, topic: str, expected: bool) -> None:
    assert topic_matches(pattern, topic) is expected
