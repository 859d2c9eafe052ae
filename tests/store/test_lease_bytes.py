"""A lease bounded by bytes (every backend): the bodies leased come to at most the bound,
the first always goes, and what is left stays ready with its attempt untouched."""

from __future__ import annotations

from tests.store.test_behaviour import T0, subscriber

from tidings.store.base import Lease, NewMessage, Store, encode_body


def sized(pub: str, size: int) -> NewMessage:
    return NewMessage("s1", pub, pub, ("sub1",), encode_body({"id": pub, "d": "x" * size}), T0)


def lease(store: Store, max_bytes: int | None, n: int = 10) -> list[str]:
    [leased] = store.apply([Lease("s1", n, 30.0, 5, T0, max_bytes)])
    return [m.publication_id for m in leased]


def test_a_lease_takes_bodies_up_to_its_bytes(store: Store) -> None:
    subscriber(store)
    store.enqueue([sized(f"p{i}", 1000) for i in range(5)])
    assert lease(store, 2500) == ["p0", "p1"]
    assert lease(store, None) == ["p2", "p3", "p4"]


def test_one_message_larger_than_the_bound_goes_alone(store: Store) -> None:
    subscriber(store)
    store.enqueue([sized("big", 50_000), sized("small", 10)])
    assert lease(store, 1000) == ["big"]
    assert lease(store, 1000) == ["small"]


def test_what_a_bounded_lease_leaves_keeps_its_first_attempt(store: Store) -> None:
    subscriber(store)
    store.enqueue([sized("a", 1000), sized("b", 1000)])
    lease(store, 1000)
    [b] = store.lease("s1", 10, 30.0, 5, T0)
    assert (b.publication_id, b.attempt) == ("b", 1)
