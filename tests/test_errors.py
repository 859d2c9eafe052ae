"""Every error code has a status and a message template; errors render as one JSON shape."""

from __future__ import annotations

import string

from tidings.errors import CATALOGUE, ErrorCode, TidingsError, invalid


def test_every_code_is_catalogued_with_a_client_or_server_status() -> None:
    assert set(CATALOGUE) == set(ErrorCode)
    assert all(400 <= status < 600 for status, _ in CATALOGUE.values())


def test_client_mistakes_are_never_server_errors() -> None:
    server_side = {code for code, (status, _) in CATALOGUE.items() if status >= 500}
    # the broker's own state: unreachable parts, a bug, a nearly full disk
    assert server_side == {
        ErrorCode.UNAVAILABLE,
        ErrorCode.INTERNAL,
        ErrorCode.INSUFFICIENT_STORAGE,
    }


def test_an_error_renders_code_message_and_field() -> None:
    body = invalid("topics[0]", "bad").to_dict()
    assert body == {"error": {"code": "invalid_field", "message": "bad", "field": "topics[0]"}}


def test_templates_take_only_named_parameters() -> None:
    for code, (_, template) in CATALOGUE.items():
        names = {n for _, n, _, _ in string.Formatter().parse(template) if n}
        err = TidingsError(code, **dict.fromkeys(names, "x"))
        assert err.status == CATALOGUE[code][0]
