"""Authentication: a wrong token answers alike, and as fast, for known and unknown ids (both
are answered from memory after the first look), and a later registration is seen."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidings.broker import auth
from tidings.broker.auth import Authenticator
from tidings.config import SubscriberSettings
from tidings.delivery.presence import Presence
from tidings.delivery.signals import Revocations
from tidings.errors import ErrorCode, TidingsError
from tidings.ids import hash_token
from tidings.model import Subscriber
from tidings.store import open_store
from tidings.store.asyncstore import AsyncStore
from tidings.store.base import Store


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    yield s
    s.close()


def reads_of(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = store.get_subscriber

    def counted(subscriber_id: str) -> Subscriber | None:
        reads.append(subscriber_id)
        return real(subscriber_id)

    monkeypatch.setattr(store, "get_subscriber", counted)
    return reads


def authenticator(store: Store, clock: Clock) -> Authenticator:
    return Authenticator(
        AsyncStore(store), Presence(SubscriberSettings()), Revocations(), clock, admin_token_hash=""
    )


async def refused(auth_: Authenticator, subscriber_id: str) -> ErrorCode:
    with pytest.raises(TidingsError) as caught:
        await auth_.authenticate(subscriber_id, "wrong")
    return caught.value.code


async def test_wrong_tokens_on_known_and_unknown_ids_are_both_answered_from_memory(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    known = Subscriber("known", hash_token("right"), time.time())
    store.add_subscriber(known)
    reads, clock = reads_of(store, monkeypatch), Clock()
    a = authenticator(store, clock)
    for _ in range(3):
        assert await refused(a, "known") == ErrorCode.FORBIDDEN
        assert await refused(a, "nobody") == ErrorCode.FORBIDDEN
    assert sorted(reads) == ["known", "nobody"]  # one look each, then memory


async def test_an_unknown_id_is_looked_up_again_after_a_while(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads, clock = reads_of(store, monkeypatch), Clock()
    a = authenticator(store, clock)
    await refused(a, "later")
    store.add_subscriber(Subscriber("later", hash_token("right"), time.time()))  # elsewhere
    clock.now += auth.UNKNOWN_S + 0.1
    await a.authenticate("later", "right")
    assert reads == ["later", "later"]


async def test_a_registration_here_is_known_at_once(store: Store) -> None:
    clock = Clock()
    a = authenticator(store, clock)
    await refused(a, "fresh")
    subscriber = Subscriber("fresh", hash_token("right"), time.time())
    store.add_subscriber(subscriber)
    a.registered(subscriber)
    await a.authenticate("fresh", "right")


async def test_the_unknown_ids_remembered_are_bounded(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "UNKNOWN_MAX", 3)
    reads, clock = reads_of(store, monkeypatch), Clock()
    a = authenticator(store, clock)
    for name in ("a", "b", "c", "d"):
        await refused(a, name)
    await refused(a, "a")  # the oldest was forgotten: looked up again
    await refused(a, "d")
    assert reads == ["a", "b", "c", "d", "a"]
