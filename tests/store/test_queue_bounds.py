"""A queue's size, and trimming it from the oldest, on every backend."""

from __future__ import annotations

import time

from tidings.model import Subscriber
from tidings.store.base import NewMessage, Store


def filled(store: Store, count: int, body: bytes = b'{"x":"0123456789"}') -> None:
    store.add_subscriber(Subscriber("s", "hash", time.time()))
    store.enqueue(
        [NewMessage("s", f"p{n:02d}", f"p{n:02d}", ("t",), body, time.time()) for n in range(count)]
    )


def test_a_queue_s_size_is_its_messages_and_their_bodies(store: Store) -> None:
    filled(store, 6)
    assert store.queue_size("s") == (6, 6 * len(b'{"x":"0123456789"}'))
    assert store.queue_size("nobody") == (0, 0)


def test_trimming_dead_letters_the_oldest_past_the_count(store: Store) -> None:
    filled(store, 10)
    assert store.trim_queue("s", 4, 10**9, time.time()) == 6
    kept = store.lease("s", 100, 30.0, 5, time.time())
    assert [m.publication_id for m in kept] == ["p06", "p07", "p08", "p09"]
    dead = store.dead_letters("s", 100)
    assert [d.publication_id for d in dead] == [f"p{n:02d}" for n in range(6)]
    assert {d.reason for d in dead} == {"overflow"}


def test_trimming_by_bytes_keeps_the_newest_that_fit(store: Store) -> None:
    body = b'{"x":"0123456789"}'
    filled(store, 5, body)
    assert store.trim_queue("s", 100, 2 * len(body) + 1, time.time()) == 3
    assert store.queue_size("s") == (2, 2 * len(body))
    assert store.trim_queue("s", 100, 10**9, time.time()) == 0  # within bounds: nothing
