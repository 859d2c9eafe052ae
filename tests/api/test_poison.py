"""Poison-proof queues: a client's value is refused past the nesting cap, and a stored
message that cannot be served is dead-lettered alone, with its reason."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.api.conftest import Sub

from tidings.config import load_settings
from tidings.model import JSON_DEPTH_CEILING
from tidings.server import EmbeddedServer
from tidings.store.base import NewMessage, encode_body
from tidings.store.loglayout import SQLiteLogStore

CAP = 64


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def test_data_at_the_cap_is_accepted_and_delivered(http: httpx.Client, sub: Sub) -> None:
    sub.subscribe(topics=["deep/ok"])
    response = http.post("/v1/publications", json={"topics": ["deep/ok"], "data": nested(CAP)})
    assert response.status_code == 201
    [message] = sub.drain()
    assert message["body"]["data"] == nested(CAP)


@pytest.mark.parametrize("levels", [CAP + 1, 252, 300])
def test_data_nested_past_the_cap_is_refused_naming_data(http: httpx.Client, levels: int) -> None:
    response = http.post("/v1/publications", json={"data": nested(levels)})
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["field"]) == (422, "invalid_field", "data")


def test_a_batch_names_the_publication_whose_data_is_too_deep(http: httpx.Client) -> None:
    body = {"publications": [{"data": 1}, {"data": nested(CAP + 1)}]}
    error = http.post("/v1/publications/batch", json=body).json()["error"]
    assert error["field"] == "publications[1].data"


@pytest.mark.parametrize("route", ["PublishTopics", "PublishContent", "PublishFunctions"])
def test_the_thesis_api_refuses_a_message_nested_past_the_cap(
    http: httpx.Client, route: str
) -> None:
    body = {
        "message": nested(254),
        "topics": ["t"],
        "content": [{"key": "k", "value": "v"}],
        "subscriptionTopics": ["f"],
    }
    body = {k: v for k, v in body.items() if k in ("message", *REQUIRED[route])}
    response = http.post(f"/api/{route}", json=body)
    assert (response.status_code, response.json()["error"]["field"]) == (422, "message")


REQUIRED = {
    "PublishTopics": ("topics",),
    "PublishContent": ("content",),
    "PublishFunctions": ("subscriptionTopics",),
}


def test_function_parameters_nested_past_the_cap_are_refused(sub: Sub) -> None:
    body = {"function": {"function_type": "f", "url": "http://x", "params": {"p": nested(CAP)}}}
    response = sub.post("/subscriptions", body)
    assert (response.status_code, response.json()["error"]["field"]) == (422, "function.params")


def stored(server: EmbeddedServer, sub: Sub, body: Any) -> None:
    """A message put straight into the store, as one stored before the cap would be (just
    now: one enqueued at 0.0 was older than the retention, and the server's sweep could
    dead-letter it in the middle of a test)."""
    key = f"k{time.time_ns()}"
    now = time.time()
    message = NewMessage(sub.id, f"p{time.time_ns()}", key, ("s",), encode_body(body), now)
    server.broker.store.sync.enqueue([message])


def corrupt_last(server: EmbeddedServer, sub: Sub) -> None:
    """Overwrite the stored body of the subscriber's newest message with something not JSON
    (in the log layout, the default, then read from disk again, as after a restart)."""
    store = server.broker.store.sync
    if isinstance(store, SQLiteLogStore):
        cursor = store.queues.log.cursor(sub.id)
        assert cursor is not None
        *_, (_, body, _) = cursor.entries()
        with store.db.tx() as cur:
            cur.execute("SELECT body FROM log_bodies WHERE id = ?", (body,))
            publication_id = bytes(cur.fetchone()[0]).split(b"\n", 1)[0]
            cur.execute(
                "UPDATE log_bodies SET body = ? WHERE id = ?",
                (publication_id + b"\n{not json", body),
            )
        store.queues.reload()
        return
    with sqlite3.connect(server.settings.data_dir / "tidings.db") as db:
        db.execute(
            "UPDATE bodies SET body = '{not json' WHERE key = (SELECT body_key FROM messages "
            "WHERE seq = (SELECT MAX(seq) FROM messages WHERE subscriber_id = ?))",
            (sub.id,),
        )


def test_a_message_that_cannot_be_decoded_is_dead_lettered_alone(
    server: EmbeddedServer, http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["mixed"])
    http.post("/v1/publications", json={"topics": ["mixed"], "data": "first"})
    stored(server, sub, {"data": "soon corrupt"})
    corrupt_last(server, sub)
    http.post("/v1/publications", json={"topics": ["mixed"], "data": "last"})

    pulled = sub.get("/messages", max=10)
    assert pulled.status_code == 200
    assert [m["body"]["data"] for m in pulled.json()["messages"]] == ["first", "last"]
    listed = sub.get("/dead-letters")
    assert listed.status_code == 200
    [letter] = listed.json()["dead_letters"]
    assert (letter["reason"].split(":")[0], letter["body"]) == ("undecodable", None)


def test_a_body_deeper_than_the_encoder_allows_is_delivered_as_it_was_stored(
    server: EmbeddedServer, http: httpx.Client, sub: Sub
) -> None:
    """Stored before the cap existed: the pull answer embeds its stored text, so nothing
    encodes it again (the thesis's queue, which rebuilds each message, cannot: below)."""
    sub.subscribe(topics=["deep"])
    stored(server, sub, {"data": nested(253)})
    [message] = sub.get("/messages", max=10).json()["messages"]
    assert message["body"]["data"] == nested(253)
    assert sub.get("/dead-letters").json()["dead_letters"] == []


def test_the_thesis_queue_and_the_stream_skip_an_unservable_message_too(
    server: EmbeddedServer, http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["compat/mixed"])
    stored(server, sub, {"data": nested(253)})
    http.post("/v1/publications", json={"topics": ["compat/mixed"], "data": "good"})
    response = http.get(f"/api/queues/{sub.id}", headers=sub.auth)
    assert response.status_code == 200
    assert [m["body"]["message"] for m in response.json()["messages"]] == ["good"]
    assert sub.get("/dead-letters").status_code == 200


async def test_the_stream_delivers_a_deep_stored_body_and_the_next(
    server: EmbeddedServer, http: httpx.Client, sub: Sub
) -> None:
    from tests.api.test_ws import frames, ws_url
    from websockets.asyncio.client import connect

    sub.subscribe(topics=["ws/mixed"])
    stored(server, sub, {"data": nested(253)})
    async with connect(ws_url(server, sub), additional_headers=sub.auth) as ws:
        http.post("/v1/publications", json={"topics": ["ws/mixed"], "data": "good"})
        deep, good = await frames(ws, 2)
        assert (deep["body"]["data"], good["body"]["data"]) == (nested(253), "good")  # type: ignore[index]


def test_whatever_the_setting_a_value_at_the_ceiling_is_served_everywhere(
    tmp_path: Path,
) -> None:
    settings = load_settings({"data_dir": tmp_path, "limits__max_json_depth": 10_000}, env={})
    with EmbeddedServer(settings) as server, httpx.Client(base_url=server.url) as client:
        sub = Sub(client)
        sub.subscribe(topics=["ceiling"])
        body = {"topics": ["ceiling"], "data": nested(JSON_DEPTH_CEILING)}
        assert client.post("/v1/publications", json=body).status_code == 201
        too_deep = {"data": nested(JSON_DEPTH_CEILING + 1)}
        assert client.post("/v1/publications", json=too_deep).status_code == 422
        compat = {"message": nested(JSON_DEPTH_CEILING), "topics": ["ceiling"]}
        assert client.post("/api/PublishTopics", json=compat).status_code == 200
        [native] = sub.pull(max=1)
        assert native["body"]["data"] == nested(JSON_DEPTH_CEILING)
        queue = client.get(f"/api/queues/{sub.id}", headers=sub.auth).json()["messages"]
        assert [m["body"]["message"] for m in queue] == [nested(JSON_DEPTH_CEILING)]
