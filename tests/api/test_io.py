"""Reading bodies: integers past 64 bits refused as the body is read, whatever else holds
a long run of digits (strings, fractions) passed."""

from __future__ import annotations

import pytest

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
