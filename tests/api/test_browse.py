"""Browsing a subscriber's queue without leasing it, and purging it, over real HTTP."""

from __future__ import annotations

import httpx
from tests.api.conftest import Sub

from tidings.client import AsyncClient, Client
from tidings.server import EmbeddedServer


def publish(http: httpx.Client, n: int, topic: str = "b") -> list[str]:
    answers = [http.post("/v1/publications", json={"topics": [topic], "data": i}) for i in range(n)]
    return [a.json()["id"] for a in answers]


def test_browsing_pages_the_waiting_messages_in_order_and_leases_none(
    http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["b"])
    ids = publish(http, 5)
    first = sub.get("/queue/messages", limit=3).json()
    rest = sub.get("/queue/messages", limit=3, after=first["next"]).json()
    seen = first["messages"] + rest["messages"]
    assert [m["publication_id"] for m in seen] == ids and rest["next"] is None
    assert [m["body"]["data"] for m in seen] == [0, 1, 2, 3, 4]
    assert {m["attempt"] for m in seen} == {0} and all(m["age_s"] >= 0 for m in seen)
    pulled = sub.pull()
    assert [(m["publication_id"], m["attempt"]) for m in pulled] == [(i, 1) for i in ids]


def test_a_leased_message_is_not_browsed_and_comes_back_with_its_attempts(
    http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["b"])
    [leased_id, waiting_id] = publish(http, 2)
    [leased] = sub.pull(max=1, visibility=0.5)
    assert leased["publication_id"] == leased_id
    seen = sub.get("/queue/messages").json()["messages"]
    assert [m["publication_id"] for m in seen] == [waiting_id]
    sub.post("/messages/nack", {"receipts": [leased["receipt"]]})
    seen = sub.get("/queue/messages").json()["messages"]
    assert [(m["publication_id"], m["attempt"]) for m in seen] == [(leased_id, 1), (waiting_id, 0)]


def test_purging_deletes_the_waiting_messages_and_leaves_the_leased_one(
    http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["b"])
    publish(http, 3)
    [leased] = sub.pull(max=1)
    assert sub.http.delete(f"{sub.base}/queue/messages", headers=sub.auth).json() == {"purged": 2}
    assert sub.get("/queue/messages").json() == {"messages": [], "next": None}
    assert sub.get("").json()["depth"] == {"ready": 0, "leased": 1, "dead": 0}
    acked = sub.post("/messages/ack", {"receipts": [leased["receipt"]]}).json()
    assert acked["acked"] == [leased["receipt"]]


def test_browsing_and_purging_need_the_subscribers_own_token(http: httpx.Client, sub: Sub) -> None:
    other = Sub(http)
    sub.subscribe(topics=["b"])
    publish(http, 1)
    path = f"{sub.base}/queue"
    assert http.get(f"{path}/messages").status_code == 401
    assert http.get(f"{path}/messages", headers=other.auth).status_code == 403
    refused = http.delete(f"{path}/messages", headers=other.auth)
    assert refused.status_code == 403 and refused.json()["error"]["code"]
    assert len(sub.get("/queue/messages").json()["messages"]) == 1


def test_a_browse_query_out_of_bounds_is_refused_naming_its_field(sub: Sub) -> None:
    for params, name in (({"limit": 0}, "limit"), ({"after": -1}, "after")):
        refused = sub.get("/queue/messages", **params)
        assert refused.status_code == 422 and refused.json()["error"]["field"] == name


def test_the_clients_browse_and_purge(server: EmbeddedServer) -> None:
    with Client(server.url) as client:
        me = client.register()
        me.subscribe(topics=["c"])
        client.publish_batch([{"topics": ["c"], "data": n} for n in range(3)])
        page, following = me.browse(limit=2)
        assert [m.body["data"] for m in page] == [0, 1] and following == page[-1].id
        rest, last = me.browse(limit=2, after=following)
        assert [m.body["data"] for m in rest] == [2] and last is None
        assert me.purge() == 3 and me.browse() == ([], None)


async def test_the_async_clients_browse_and_purge(server: EmbeddedServer) -> None:
    async with AsyncClient(server.url) as client:
        me = await client.register()
        await me.subscribe(topics=["a"])
        await client.publish_batch([{"topics": ["a"], "data": n} for n in range(2)])
        page, following = await me.browse()
        assert [m.body["data"] for m in page] == [0, 1] and following is None
        assert await me.purge() == 2 and await me.browse() == ([], None)
