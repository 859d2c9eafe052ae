"""What a match is, stated once and simply. Indexes must agree with these functions;
the property tests and the Spark matcher use them as the oracle.

Types: numbers (int, float; not bool) compare as numbers, strings as strings, booleans
only with booleans. A predicate between values of different types is false, whatever the
operator. A predicate on a missing key is false, except `exists: false`.
"""

from __future__ import annotations

from collections.abc import Mapping

from tidings.model import Op, Predicate, Scalar

_NUMBERS = (int, float)  # a tuple: `int | float` builds a union object at each call


def type_class(value: object) -> int:
    """0 for booleans, 1 for numbers, 2 for strings, -1 for anything else."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, _NUMBERS):
        return 1
    return 2 if isinstance(value, str) else -1


def same_type(a: object, b: object) -> bool:
    return type_class(a) == type_class(b) != -1


def _compare(op: Op, actual: Scalar, expected: Scalar) -> bool:
    if not same_type(actual, expected):
        return False
    if op is Op.EQ:
        return actual == expected
    if op is Op.NE:
        return actual != expected
    if isinstance(actual, bool):
        return False  # booleans have no order
    if op is Op.LT:
        return actual < expected  # type: ignore[operator]
    if op is Op.LE:
        return actual <= expected  # type: ignore[operator]
    if op is Op.GT:
        return actual > expected  # type: ignore[operator]
    return actual >= expected  # type: ignore[operator]


def predicate_holds(predicate: Predicate, attributes: Mapping[str, Scalar]) -> bool:
    """Does `attributes` satisfy `predicate`?"""
    if predicate.op is Op.EXISTS:
        return (predicate.key in attributes) is predicate.value
    if predicate.key not in attributes:
        return False
    actual = attributes[predicate.key]
    op, expected = predicate.op, predicate.value
    if op is Op.IN:
        assert isinstance(expected, tuple)
        return any(same_type(actual, v) and actual == v for v in expected)
    if op in (Op.PREFIX, Op.SUFFIX, Op.CONTAINS):
        if not isinstance(actual, str) or not isinstance(expected, str):
            return False
        if op is Op.PREFIX:
            return actual.startswith(expected)
        return actual.endswith(expected) if op is Op.SUFFIX else expected in actual
    assert not isinstance(expected, tuple)
    return _compare(op, actual, expected)


def conjunction_holds(predicates: tuple[Predicate, ...], attributes: Mapping[str, Scalar]) -> bool:
    """A content subscription matches when every one of its predicates holds."""
    return all(predicate_holds(p, attributes) for p in predicates)


def topic_matches(topic_filter: str, topic: str) -> bool:
    """`*` matches exactly one segment; a trailing `#` matches zero or more segments.

    `a/#` matches `a`, `a/b` and `a/b/c`; `a/*` matches `a/b` only.
    """
    fs, ts = topic_filter.split("/"), topic.split("/")
    for i, f in enumerate(fs):
        if f == "#":
            return True
        if i >= len(ts) or (f != "*" and f != ts[i]):
            return False
    return len(fs) == len(ts)


def any_topic_matches(filters: tuple[str, ...], topics: tuple[str, ...]) -> bool:
    return any(topic_matches(f, t) for f in filters for t in topics)
