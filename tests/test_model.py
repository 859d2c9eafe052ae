"""The model validates input and names the offending field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tidings.config import Limits
from tidings.errors import ErrorCode, TidingsError
from tidings.model import (
    Op,
    Predicate,
    Publication,
    _plain_publication,
    _publication_parts,
    is_pattern,
    parse_attributes,
    parse_function_spec,
    parse_predicate,
    parse_predicates,
    parse_publication_body,
    parse_subscription_body,
    parse_topic_filters,
    validate_topic,
)

LIMITS = Limits()


def error_of(call: Any, *args: Any) -> TidingsError:
    with pytest.raises(TidingsError) as caught:
        call(*args)
    return caught.value


def test_a_publication_body_keeps_topics_in_order_without_duplicates() -> None:
    data, topics, attrs, ftypes = parse_publication_body(
        {"data": "hi", "topics": ["a/b", "c", "a/b"], "attributes": {"x": 1}}, LIMITS
    )
    assert (data, topics, attrs, ftypes) == ("hi", ("a/b", "c"), {"x": 1}, ())


def test_an_unknown_publication_field_is_named() -> None:
    err = error_of(parse_publication_body, {"data": 1, "topicz": ["a"]}, LIMITS)
    assert (err.code, err.field) == (ErrorCode.INVALID_FIELD, "topicz")


def test_a_wildcard_in_a_publication_topic_is_rejected() -> None:
    err = error_of(parse_publication_body, {"topics": ["a/*"]}, LIMITS)
    assert (err.code, err.field) == (ErrorCode.INVALID_TOPIC, "topics[0]")


@pytest.mark.parametrize("topic", ["", "a//b", "/a", "a/", "a b", "a/#/b", "a/b#"])
def test_malformed_topic_filters_are_rejected(topic: str) -> None:
    with pytest.raises(TidingsError) as caught:
        validate_topic(topic, "topics[0]", LIMITS, pattern=True)
    assert (caught.value.code, caught.value.field) == (ErrorCode.INVALID_TOPIC, "topics[0]")


def test_patterns_allow_a_single_level_star_and_a_trailing_hash() -> None:
    assert parse_topic_filters(["a/*/c", "a/#", "#"], LIMITS) == ("a/*/c", "a/#", "#")
    assert is_pattern("a/*") and is_pattern("#") and not is_pattern("a/b")


def test_too_many_topics_in_a_publication_exceed_the_limit() -> None:
    err = error_of(parse_publication_body, {"topics": [f"t{i}" for i in range(65)]}, LIMITS)
    assert (err.code, err.field) == (ErrorCode.LIMIT_EXCEEDED, "topics")


def test_attribute_values_must_be_scalars() -> None:
    err = error_of(parse_attributes, {"x": [1]}, LIMITS)
    assert (err.code, err.field) == (ErrorCode.INVALID_FIELD, "attributes.x")


def test_nan_is_not_an_attribute_value() -> None:
    assert error_of(parse_attributes, {"x": float("nan")}, LIMITS).field == "attributes.x"


def test_operators_accept_symbols_and_words() -> None:
    assert parse_predicate({"key": "k", "op": "gte", "value": 1}, "p").op is Op.GE
    assert parse_predicate({"key": "k", "op": "==", "value": 1}, "p").op is Op.EQ


def test_an_unknown_operator_is_named_with_its_path() -> None:
    err = error_of(parse_predicates, [{"key": "k", "op": "~", "value": 1}], LIMITS)
    assert (err.code, err.field) == (ErrorCode.UNKNOWN_OPERATOR, "predicates[0].op")


def test_a_missing_predicate_value_is_named() -> None:
    err = error_of(parse_predicates, [{"key": "k", "op": "<"}], LIMITS)
    assert (err.code, err.field) == (ErrorCode.MISSING_FIELD, "predicates[0].value")


@pytest.mark.parametrize(
    ("op", "value"), [("in", []), ("in", [[1]]), ("prefix", 3), ("<", True), ("=", {"a": 1})]
)
def test_predicate_values_must_fit_their_operator(op: str, value: Any) -> None:
    err = error_of(parse_predicate, {"key": "k", "op": op, "value": value}, "p")
    assert (err.code, err.field) == (ErrorCode.INVALID_FIELD, "p.value")


def test_exists_defaults_to_true() -> None:
    assert parse_predicate({"key": "k", "op": "exists"}, "p") == Predicate("k", Op.EXISTS, True)


def test_in_values_become_a_tuple() -> None:
    assert parse_predicate({"key": "k", "op": "in", "value": ["a", 1]}, "p").value == ("a", 1)


def test_too_many_predicates_exceed_the_limit() -> None:
    many = [{"key": f"k{i}", "op": "=", "value": i} for i in range(33)]
    assert error_of(parse_predicates, many, LIMITS).code is ErrorCode.LIMIT_EXCEEDED


def test_a_subscription_body_names_exactly_one_kind() -> None:
    assert parse_subscription_body({"topics": ["a"]}, LIMITS)[0] == "topic"
    err = error_of(parse_subscription_body, {"topics": ["a"], "predicates": []}, LIMITS)
    assert err.field == "$"


def test_a_function_spec_takes_exactly_one_source() -> None:
    spec = parse_function_spec({"function_type": "t", "url": "http://x/f"}, "function", LIMITS)
    assert (spec.kind, spec.source, spec.fail_open) == ("url", "http://x/f", False)
    err = error_of(parse_function_spec, {"function_type": "t"}, "function", LIMITS)
    assert err.field == "function"


def test_a_function_url_must_be_http() -> None:
    err = error_of(parse_function_spec, {"function_type": "t", "url": "file:///etc"}, "f", LIMITS)
    assert err.field == "f.url"


def test_a_publication_round_trips_through_json() -> None:
    pub = Publication("id1", 1.5, {"a": 1}, ("t",), {"x": 2}, ("f",))
    assert Publication.from_json(pub.to_json()) == pub


# ---------------------------------------------------------------- nesting, receipts, types


def test_json_depth_counts_containers_and_stops_past_the_limit() -> None:
    from tidings.model import json_depth

    assert [json_depth(v) for v in (1, [], [[1]], {"a": [{"b": 2}]})] == [0, 1, 2, 3]
    deep: Any = 1
    for _ in range(10_000):  # no recursion: as deep as orjson ever decodes, and deeper
        deep = [deep]
    assert json_depth(deep, stop=5) == 6


def test_receipts_are_ascii_digits_within_64_bits() -> None:
    from tidings.model import receipt_seq

    assert receipt_seq("12.1.abcdef") == 12
    assert receipt_seq(f"{2**63 - 1}.1.ab") == 2**63 - 1
    for bad in ("¹.1.ab", "١.1.ab", f"{2**63}.1.ab", "99999999999999999999.1.x", "1.1.", "x"):
        assert receipt_seq(bad) is None, bad


def test_a_typed_conversion_names_the_path_of_the_mistake() -> None:
    import msgspec

    from tidings.model import convert

    class Item(msgspec.Struct, forbid_unknown_fields=True):
        key: str
        values: dict[str, int] = {}

    cases = [
        ([{"key": 1}], "invalid_field", "[0].key"),
        ([{}], "missing_field", "[0].key"),
        ([{"key": "k", "extra": 1}], "invalid_field", "[0].extra"),
        ([{"key": "k", "values": {"a": 1, "b": [2]}}], "invalid_field", "[0].values.b"),
        ({"key": "k"}, "invalid_field", "$"),
    ]
    for raw, code, field in cases:
        with pytest.raises(TidingsError) as caught:
            convert(raw, list[Item])
        assert (caught.value.code.value, caught.value.field) == (code, field), raw


def test_an_in_list_and_a_predicate_string_are_bounded() -> None:
    limits = Limits(max_in_values=3, max_predicate_string=5)
    many = [{"key": "k", "op": "in", "value": [1, 2, 3, 4]}]
    long = [{"key": "k", "op": "=", "value": "sixsix"}]
    for raw in (many, long):
        with pytest.raises(TidingsError) as caught:
            parse_predicates(raw, limits)
        assert (caught.value.code, caught.value.field) == (
            ErrorCode.LIMIT_EXCEEDED,
            "predicates[0].value",
        )
    assert parse_predicates([{"key": "k", "op": "in", "value": ["12345", 2, 3]}], limits)


@pytest.mark.parametrize("deep", ["a/b/c/d/e/f/g/h/*", "*/b/c/d/e/f/g/h/i", "a/b/c/d/e/f/g/h/#"])
def test_a_wildcard_filter_past_max_pattern_segments_is_a_limit_naming_it(deep: str) -> None:
    with pytest.raises(TidingsError) as caught:
        parse_topic_filters(["a", deep], Limits())
    assert caught.value.code is ErrorCode.LIMIT_EXCEEDED and caught.value.field == "topics[1]"
    assert "max_pattern_segments" in str(caught.value)


def test_exact_filters_and_topics_may_be_deeper_than_a_pattern() -> None:
    deep = "/".join("abcdefghijkl")
    assert parse_topic_filters([deep, "a/b/c/d/e/f/g/*"], Limits()) == (deep, "a/b/c/d/e/f/g/*")
    assert validate_topic(deep, "topics[0]", Limits(), pattern=False) == deep


def test_a_topic_has_at_most_max_topic_segments() -> None:
    limits = Limits(max_topic_segments=4)
    assert validate_topic("a/b/c/d", "topics[0]", limits, pattern=False) == "a/b/c/d"
    with pytest.raises(TidingsError) as caught:
        validate_topic("a/b/c/d/e", "topics[0]", limits, pattern=False)
    assert caught.value.code is ErrorCode.INVALID_TOPIC and "at most 4" in str(caught.value)


# A publication's body, as a client might write it: right (most), or right but for one field
_TOPIC_OK = st.sampled_from(["a", "a/b", "x" * 255, "/".join("s" * 32), "é/ü"])
_TOPIC_BAD = st.sampled_from(["", "a/*", "a/#", "a b", "a//b", "x" * 256, "/".join("s" * 33), 7])
_SCALAR_OK = st.one_of(st.text(max_size=3), st.integers(), st.booleans(), st.floats(-1e9, 1e9))
_VALUE_BAD = st.sampled_from([float("nan"), None, [1], {"k": 1}, b"x"])
_DATA = st.one_of(_SCALAR_OK, st.none(), st.lists(_SCALAR_OK, max_size=2), st.just({"t": [[1]]}))
_VALID = st.fixed_dictionaries(
    {},
    optional={
        "data": _DATA,
        "topics": st.lists(_TOPIC_OK, max_size=3),
        "attributes": st.dictionaries(
            st.sampled_from(["k", "x" * 255, "é"]), _SCALAR_OK, max_size=2
        ),
        "function_types": st.lists(st.sampled_from(["f", "g", "x" * 1024]), max_size=2),
    },
)
_SPOILS = st.sampled_from(
    [
        ("topics", st.lists(st.one_of(_TOPIC_OK, _TOPIC_BAD), min_size=1, max_size=4)),
        ("topics", st.sampled_from([None, "a", {"a": 1}])),
        (
            "attributes",
            st.dictionaries(
                st.sampled_from(["k", "", "x" * 256]), st.one_of(_SCALAR_OK, _VALUE_BAD), max_size=3
            ),
        ),
        ("attributes", st.sampled_from([None, [], "k"])),
        ("attributes", st.dictionaries(st.sampled_from("abcd"), _SCALAR_OK, min_size=3)),
        ("attributes", st.fixed_dictionaries({"k": _VALUE_BAD})),
        ("function_types", st.lists(st.sampled_from(["f", "", "x" * 1025, 3]), max_size=3)),
        ("function_types", st.sampled_from([None, "f"])),
        ("function_types", st.lists(st.sampled_from("fgh"), min_size=3, max_size=4)),
        ("data", st.just([[[[1]]]])),  # deeper than the test's limit
        ("topicz", st.just(["a"])),
    ]
)


@st.composite
def _bodies(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(_VALID)
    if draw(st.booleans()):
        field, values = draw(_SPOILS)
        body[field] = draw(values)
    return body


@settings(max_examples=600, deadline=None)
@given(_bodies(), st.sampled_from([255, 2000]))
@example({"topics": ["x" * 1025]}, 2000)  # a topic is a string of at most 1,024 all the same
@example({"attributes": {"k": float("nan")}}, 255)
@example({"topics": ["a", "b", "c", "d"]}, 255)  # past the test's limit of 3
@example({"attributes": {"a": 1, "b": 2, "c": 3}}, 255)  # past the test's limit of 2
@example({"attributes": {"k": [1]}}, 255)
@example({"function_types": ["f", "g", "h"]}, 255)  # past the test's limit of 2
@example({"function_types": [""]}, 255)
def test_a_publication_read_in_one_pass_is_read_as_the_checks_one_by_one_read_it(
    raw: dict[str, Any], longest: int
) -> None:
    limits = Limits(
        max_topics_per_publication=3,
        max_attributes=2,
        max_function_types=2,
        max_json_depth=3,
        max_topic_length=longest,
    )
    try:
        expected: Any = _publication_parts(raw, limits)
    except TidingsError as exc:
        expected = (exc.code, exc.field, exc.message)
    try:
        got: Any = parse_publication_body(raw, limits)
    except TidingsError as exc:
        got = (exc.code, exc.field, exc.message)
    assert repr(got) == repr(expected)  # repr: NaN is not equal to itself


def test_the_common_publications_take_the_one_pass() -> None:
    for raw in (
        {"topics": ["perf-0"], "data": "x" * 150},
        {"topics": ["a/b", "c", "a/b"], "data": {"t": [1, 2]}, "attributes": {"k": 1.5}},
        {"function_types": ["resize", "resize"], "data": None},
        {},
    ):
        assert _plain_publication(raw, LIMITS) == _publication_parts(raw, LIMITS)
