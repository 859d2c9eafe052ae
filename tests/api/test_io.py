"""Reading bodies: integers past 64 bits refused as the body is read, whatever else holds
a long run of digits (strings, fractions) passed; a key written twice in an object refused,
whatever colons its strings hold."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.api.io import parse_json
from tidings.errors import TidingsError


@pytest.mark.parametrize(
    ("body", "value"),
    [
        (b'{"t": 1764280000123456789}', 1764280000123456789),  # a nanosecond timestamp
        (b'{"t": 18446744073709551615}', 2**64 - 1),
        (b'{"t": -9223372036854775808}', -(2**63)),
        (b'{"t": 10000000000000000000}', 10**19),
        (b'{"t": -1234567890123456789}', -1234567890123456789),
        (b'{"t": "-12345678901234567890123-4"}', "-12345678901234567890123-4"),
        (b'{"t": "12345678901234567890123456789"}', "12345678901234567890123456789"),
        (b'{"t": 12345678901234567890123456789.5}', 12345678901234567890123456789.5),
        (b'{"t": 1.12345678901234567890123456789}', 1.12345678901234567890123456789),
        (b'{"t": "' + b"7" * 5000 + b'"}', "7" * 5000),  # no int() of 5,000 digits
        (
            b'{"t": [1764280000123456789, "x", 1764280000123456789]}',
            [1764280000123456789, "x", 1764280000123456789],
        ),
    ],
)
def test_long_runs_of_digits_that_are_no_wide_integer_are_read(body: bytes, value: object) -> None:
    assert parse_json(body) == {"t": value}


@pytest.mark.parametrize(
    "body",
    [
        b'{"s": "1234567890123456789012", "t": 18446744073709551616}',
        b'{"a": 1764280000123456789, "t": -9223372036854775809}',
        b'{"t": -9999999999999999999}',
        b'{"t": ' + b"9" * 30 + b"}",
    ],
)
def test_an_integer_past_64_bits_is_refused_naming_its_key(body: bytes) -> None:
    with pytest.raises(TidingsError) as refused:
        parse_json(body)
    assert refused.value.field == "t" and "integer past 64 bits" in refused.value.message


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (b'{"a": 1, "a": 2}', "a"),
        (b'{"s": "1:2:3", "a": 1, "a": 2}', "a"),  # a colon in a string: the keys are read
        (b'{"a:b": 1, "a:b": 2}', "a:b"),
        (b'{"d": {"k": "::", "k": 1}}', "k"),
        (b'[{"x": 1}, {"y": 2, "y": 3}]', "y"),
    ],
)
def test_a_duplicate_key_is_refused_naming_it(body: bytes, key: str) -> None:
    with pytest.raises(TidingsError) as refused:
        parse_json(body)
    assert refused.value.field == key and "duplicate key" in refused.value.message


_TEXTS = ["a", "a:", ":", " :", '"', '":', "\\", "b"]
_PAIRS = st.lists(
    st.tuples(
        st.sampled_from(_TEXTS),
        st.one_of(st.integers(-9, 9), st.sampled_from(_TEXTS)),
        st.sampled_from([":", ": ", " :", "\n:", ":\t"]),  # how the key meets its value
    )
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_PAIRS, min_size=1, max_size=3))
def test_a_body_is_refused_exactly_when_an_object_repeats_a_key(objects: list[Any]) -> None:
    written = [
        "{" + ",".join(f"{json.dumps(k)}{colon}{json.dumps(v)}" for k, v, colon in pairs) + "}"
        for pairs in objects
    ]
    body = ("[" + ",".join(written) + "]").encode()
    repeats = any(len({k for k, _, _ in pairs}) < len(pairs) for pairs in objects)
    try:
        parse_json(body)
    except TidingsError as exc:
        assert repeats and "duplicate key" in exc.message
    else:
        assert not repeats
