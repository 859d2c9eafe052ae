"""Frames embed the stored body bytes; the compact form leaves out what is repeated."""

from __future__ import annotations

import orjson

from tidings.delivery.frames import compact_json, messages_answer, messages_frame
from tidings.store.base import Message

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
    assert compact_json(leased(3))["attempt"] == 3
    assert len(messages_frame([leased()], "compact")) < len(messages_frame([leased()])) - 50
