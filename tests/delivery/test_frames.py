"""Frames embed the stored body bytes; the compact form leaves out what is repeated."""

from __future__ import annotations

import msgspec
import orjson

from tidings.delivery.frames import messages_answer, messages_frame, msgpack_frame
from tidings.store.base import Message
from tidings.wire.v1 import Messages

BODY = b'{"id":"p1","published_at":1.5,"data":"x"}'


def leased(attempt: int = 1) -> Message:
    return Message(7, "s1", "p1", ("a",), BODY, 1.5, attempt, f"7.{attempt}.n", 31.5)


def test_a_frame_carries_the_body_exactly_as_stored() -> None:
    frame = messages_frame([leased()])
    assert BODY in frame
    [message] = orjson.loads(frame)["messages"]
    assert message == {
        "id": 7,
        "receipt": "7.1.n",
        "attempt": 1,
        "publication_id": "p1",
        "subscription_ids": ["a"],
        "enqueued_at": 1.5,
        "body": orjson.loads(BODY),
    }


def test_the_compact_form_has_no_repeated_ids_and_a_first_attempt_unsaid() -> None:
    [first] = orjson.loads(messages_answer([leased()], "compact"))["messages"]
    assert first == {"receipt": "7.1.n", "subscription_ids": ["a"], "body": orjson.loads(BODY)}
    [again] = orjson.loads(messages_answer([leased(3)], "compact"))["messages"]
    assert again["attempt"] == 3
    assert len(messages_frame([leased()], "compact")) < len(messages_frame([leased()])) - 50


def test_frames_are_the_wire_shapes_the_client_decodes() -> None:
    decoded = msgspec.json.decode(messages_answer([leased(2)]), type=Messages)
    [message] = decoded.messages
    assert (message.id, message.attempt, message.body["data"]) == (7, 2, "x")
    frame = msgspec.msgpack.decode(msgpack_frame([leased()], "compact"))
    assert frame["type"] == "messages" and "attempt" not in frame["messages"][0]
