"""The wire format: every message kind comes back as it was sent, a frame is a tagged array,
state goes in ordered chunks, and a malformed frame is refused with an error that says where."""

from __future__ import annotations

import typing

import msgspec
import pytest

from tidings.elastic.protocol import wire
from tidings.model import Op, Predicate

RECORD = wire.SubscriptionRecord("s1", "alice", predicates=[("price", "<", 10), ("k", "in", [1])])
TOPIC_RECORD = wire.SubscriptionRecord("s2", "bob", topics=["news", "sport"])
PARTIAL = wire.Partial("ap", 7, 2, {"alice": ["s1"]}, b'{"x":1}', ev=3, mv=4)

EVERY_KIND: list[wire.Message] = [
    wire.Publish("ap", 7, 2, ["news"], {"price": 9.5, "k": 1, "ok": True, "s": "x"}, b"{}"),
    wire.Subscribe("ap", 2, RECORD),
    wire.Subscribe("ap", 2, TOPIC_RECORD),
    wire.Unsubscribe("ap", 2, "s1"),
    wire.StartScale("ap", 5, 3, ["m1"], ["m1", "m2"]),
    wire.AddMatcherState(5, 3, "m1", [RECORD, TOPIC_RECORD], last=False),
    wire.ChangeMatcherOnExitPoint("ap", 5, 3, matcher="m1", last_seq=41),
    wire.ChangeMatcher("ap", 5, 3),
    wire.ExitPointScaling("ap", 6, 2, ["e1", "e2"], ["e1"], 41, matcher="m2", old_view=1),
    wire.Partials("m1", [PARTIAL, wire.Partial("ap", 8, 2, {})]),
    wire.Committed("e1", [7, 8], [1, 0], epoch=2),
    wire.Stop(),
]


def test_every_message_kind_is_in_the_round_trip_cases() -> None:
    kinds = set(typing.get_args(wire.Message))
    assert {type(m) for m in EVERY_KIND} == kinds


@pytest.mark.parametrize("message", EVERY_KIND, ids=lambda m: type(m).__name__)
def test_a_message_decodes_to_what_was_encoded(message: wire.Message) -> None:
    assert wire.decode(wire.encode(message)) == message


@pytest.mark.parametrize("message", EVERY_KIND, ids=lambda m: type(m).__name__)
def test_a_frame_is_an_array_tagged_with_the_class_name(message: wire.Message) -> None:
    frame = msgspec.msgpack.decode(wire.encode(message))
    assert isinstance(frame, list)
    assert frame[0] == type(message).__name__
    assert len(frame) == 1 + len(message.__struct_fields__)


def test_defaults_left_out_by_an_older_sender_are_filled_in() -> None:
    frame = msgspec.msgpack.encode(["ChangeMatcherOnExitPoint", "ap", 5, 3])
    assert wire.decode(frame) == wire.ChangeMatcherOnExitPoint("ap", 5, 3, "", -1)


@pytest.mark.parametrize(
    ("frame", "error", "says"),
    [
        (b"", msgspec.DecodeError, "truncated"),
        (b"\xc1", msgspec.DecodeError, "malformed"),
        (wire.encode(wire.Stop()) + b"x", msgspec.DecodeError, "trailing characters"),
        (msgspec.msgpack.encode({"ap": "x"}), msgspec.ValidationError, "Expected `array`"),
        (msgspec.msgpack.encode(["Nope", 1]), msgspec.ValidationError, "Invalid value 'Nope'"),
        (msgspec.msgpack.encode(["Publish", "ap"]), msgspec.ValidationError, "at least length"),
        (
            msgspec.msgpack.encode(["Publish", "ap", "seven", 2, [], {}, b""]),
            msgspec.ValidationError,
            "Expected `int`, got `str` - at `$[2]`",
        ),
        (
            msgspec.msgpack.encode(["Publish", "ap", 7, 2, [], {"k": [1]}, b""]),
            msgspec.ValidationError,
            "at `$[5][...]`",
        ),
        (
            msgspec.msgpack.encode(["Partials", "m1", [["ap", 7]]]),
            msgspec.ValidationError,
            "at `$[2][0]`",
        ),
    ],
    ids=[
        "empty",
        "not msgpack",
        "trailing bytes",
        "a map",
        "unknown tag",
        "too short",
        "wrong type",
        "attribute not a scalar",
        "nested partial too short",
    ],
)
def test_a_malformed_frame_is_refused_saying_what_is_wrong(
    frame: bytes, error: type[Exception], says: str
) -> None:
    with pytest.raises(error) as raised:
        wire.decode(frame)
    assert says in str(raised.value)


def test_a_share_of_state_goes_in_ordered_chunks_the_last_one_marked() -> None:
    records = [wire.SubscriptionRecord(f"s{i}", "x") for i in range(2 * wire.STATE_CHUNK + 1)]
    chunks = wire.state_messages(5, 3, "m1", records)
    assert [len(c.records) for c in chunks] == [wire.STATE_CHUNK, wire.STATE_CHUNK, 1]
    assert [c.last for c in chunks] == [False, False, True]
    assert [r for c in chunks for r in c.records] == records
    assert {(c.scale, c.view, c.sender) for c in chunks} == {(5, 3, "m1")}


def test_an_empty_share_of_state_is_still_one_last_chunk() -> None:
    assert wire.state_messages(5, 3, "m1", []) == [wire.AddMatcherState(5, 3, "m1", [], True)]


def test_predicates_cross_the_wire_and_come_back_as_the_model_s() -> None:
    predicates = (Predicate("price", Op.LT, 10), Predicate("k", Op.IN, (1, 2)))
    sent = wire.wire_predicates(predicates)
    assert sent == [("price", "<", 10), ("k", "in", [1, 2])]
    record = wire.SubscriptionRecord("s", "x", predicates=sent)
    decoded = wire.decode(wire.encode(wire.Subscribe("ap", 1, record)))
    assert isinstance(decoded, wire.Subscribe)
    assert wire.model_predicates(decoded.record.predicates) == predicates
