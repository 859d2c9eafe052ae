"""The push endpoints' promises (webhooks), checked against every backend."""

from __future__ import annotations

from tests.store.test_behaviour import T0, subscriber

from tidings.store.base import Endpoint, Store


def endpoint(sid: str = "s1", url: str = "https://example.org/hook") -> Endpoint:
    return Endpoint(sid, url, "whsec_x", updated_at=T0)


def test_an_endpoint_is_stored_replaced_and_deleted(store: Store) -> None:
    subscriber(store)
    assert store.get_endpoint("s1") is None and store.endpoints() == []
    assert store.set_endpoint("s1", endpoint())
    assert store.get_endpoint("s1") == endpoint()
    assert store.set_endpoint("s1", endpoint(url="http://other.example/in"))
    assert store.endpoints() == [endpoint(url="http://other.example/in")]
    assert store.set_endpoint("s1", None) is True
    assert store.get_endpoint("s1") is None and store.set_endpoint("s1", None) is False


def test_an_endpoint_needs_its_subscriber(store: Store) -> None:
    assert store.set_endpoint("nobody", endpoint("nobody")) is False
    assert store.endpoints() == []


def test_the_state_is_recorded_and_the_url_and_secret_stay(store: Store) -> None:
    subscriber(store)
    store.set_endpoint("s1", endpoint())
    assert store.set_endpoint_state("s1", "paused", "10 failed requests", 10, T0 + 5)
    paused = store.get_endpoint("s1")
    assert paused == Endpoint(
        "s1", "https://example.org/hook", "whsec_x", "paused", "10 failed requests", 10, T0 + 5
    )
    assert store.set_endpoint_state("s1", "active", None, 0, T0 + 6)
    assert store.get_endpoint("s1") == Endpoint(
        "s1", "https://example.org/hook", "whsec_x", "active", None, 0, T0 + 6
    )
    assert store.set_endpoint_state("nobody", "paused", None, 0, T0) is False


def test_every_endpoint_is_listed_in_subscriber_order(store: Store) -> None:
    for sid in ("s2", "s1", "s3"):
        subscriber(store, sid)
        store.set_endpoint(sid, endpoint(sid))
    store.set_endpoint_state("s2", "paused", "down", 3, T0)
    assert [(e.subscriber_id, e.state) for e in store.endpoints()] == [
        ("s1", "active"),
        ("s2", "paused"),
        ("s3", "active"),
    ]


def test_the_endpoint_goes_with_its_subscriber(store: Store) -> None:
    subscriber(store)
    subscriber(store, "s2")
    store.set_endpoint("s1", endpoint())
    store.set_endpoint("s2", endpoint("s2"))
    assert store.remove_subscriber("s1")
    assert store.get_endpoint("s1") is None
    assert [e.subscriber_id for e in store.endpoints()] == ["s2"]
