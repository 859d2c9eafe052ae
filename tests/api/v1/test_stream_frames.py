"""Reading a subscriber's ack and nack frames (`Framing.frame`): a plain frame decoded
straight into its type answers as the general reader does, and every other frame gets the
general reader's answer or error."""

from __future__ import annotations

from typing import Any

import pytest

from tidings.api.v1.stream import Framing
from tidings.errors import TidingsError
from tidings.model import check_receipts, convert
from tidings.wire.v1 import StreamFrame

PLAIN = [
    b'{"type":"ack","receipts":["1.1.ab","22.3.9f"]}',
    '{"type": "nack", "receipts": []}',
    b' {"receipts":["9223372036854775807.1.0"],"type":"ack"} ',
]
NOT_PLAIN = [
    b'{"type":"ack","type":"nack","receipts":["1.1.ab"]}',  # a key twice
    b'{"type":"ack","receipts":["1.1.ab"],"receipts":[]}',
    b'{"\\u0074ype":"ack","type":"nack","receipts":[]}',  # a key twice, one escaped
    b'{"type":"ack","receipts":["1.1.ab\\n"]}',  # the pattern's `$` passes a line break
    b'{"type":"ack","receipts":["9223372036854775808.1.ab"]}',  # past 64 bits
    b'{"type":"ack","receipts":["99999999999999999999.1.ab"]}',
    b'{"type":"ack","receipts":["1.1.AB"]}',
    b'{"type":"ack","receipts":["1.1.ab"],"more":1}',
    b'{"type":"ackn","receipts":[]}',
    b'{"type":"ack"}',
    b'{"type":"ack","receipts":["1.1.ab"]} trailing',
    b"",
    b"\xff",
]


def general(raw: Any) -> tuple[Any, list[str]]:
    """The general reader: any body, then its type, then each receipt."""
    frame = convert(Framing().read(raw), StreamFrame)
    return frame.type, check_receipts(frame.receipts)


def outcome(read: Any, raw: Any) -> tuple[str, Any]:
    try:
        return "read", read(raw)
    except TidingsError as exc:
        return "refused", (exc.code, exc.field, str(exc))


@pytest.mark.parametrize("raw", PLAIN)
def test_a_plain_frame_is_read_as_the_general_reader_reads_it(raw: Any) -> None:
    assert Framing().frame(raw) == general(raw)


@pytest.mark.parametrize("raw", NOT_PLAIN)
def test_any_other_frame_gets_the_general_reader_s_answer_or_error(raw: Any) -> None:
    answer = outcome(Framing().frame, raw)
    assert answer == outcome(general, raw)
    assert answer[0] == "refused"  # every one of them
