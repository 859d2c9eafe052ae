"""Authentication: a token is looked up by its hash, never the id it is used on, so a wrong
token costs the same for known and unknown ids; a later registration is seen, a deletion too."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    """Every look at a subscriber the store is asked for (by id or by token hash)."""
    reads: list[str] = []
    for name in ("get_subscriber", "token_owner"):
        real = getattr(store, name)

        def counted(key: str, real: Any = real) -> Any:
            reads.append(key)
            return real(key)

        monkeypatch.setattr(store, name, counted)
    return reads


def authenticator(store: Store, clock: Clock) -> Authenticator:
    return Authenticator(
        AsyncStore(store), Presence(SubscriberSettings()), Revocations(), clock, admin_token_hash=""
    )


async def refused(auth_: Authenticator, subscriber_id: str, token: str = "wrong") -> ErrorCode:
    with pytest.raises(TidingsError) as caught:
        await auth_.authenticate(subscriber_id, token)
    return caught.value.code


async def test_wrong_tokens_on_known_and_unknown_ids_cost_the_same_reads(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    known = Subscriber("known", hash_token("right"), time.time())
    other = Subscriber("other", hash_token("others"), time.time())
    for s in (known, other):
        store.add_subscriber(s)
    reads, clock = reads_of(store, monkeypatch), Clock()
    a = authenticator(store, clock)
    a.registered(known)  # its token and id in memory, as after a registration here
    for _ in range(3):
        for token in ("wrong", "others"):
            assert await refused(a, "known", token) == ErrorCode.FORBIDDEN
            assert await refused(a, "nobody", token) == ErrorCode.FORBIDDEN
    # one look per token, whatever the ids; never a look at an id
    assert reads == [hash_token("wrong"), hash_token("others")]


async def test_an_unknown_token_is_looked_up_again_after_a_while(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads, clock = reads_of(store, monkeypatch), Clock()
    a = authenticator(store, clock)
    await refused(a, "later", "right")
    store.add_subscriber(Subscriber("later", hash_token("right"), time.time()))  # elsewhere
    await refused(a, "later", "right")  # remembered as unknown a while
    clock.now += auth.UNKNOWN_S + 0.1
    await a.authenticate("later", "right")
    assert reads == [hash_token("right"), hash_token("right")]


async def test_a_registration_here_is_known_at_once(store: Store) -> None:
    clock = Clock()
    a = authenticator(store, clock)
    await refused(a, "fresh", "right")
    subscriber = Subscriber("fresh", hash_token("right"), time.time())
    store.add_subscriber(subscriber)
    a.registered(subscriber)
    await a.authenticate("fresh", "right")


async def test_a_forgotten_subscribers_token_is_read_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    subscriber = Subscriber("gone", hash_token("right"), time.time())
    store.add_subscriber(subscriber)
    reads, clock = reads_of(store, monkeypatch), Clock()
    a = authenticator(store, clock)
    a.registered(subscriber)
    await a.authenticate("gone", "right")
    store.remove_subscriber("gone")
    a.forget("gone")
    assert await refused(a, "gone", "right") == ErrorCode.FORBIDDEN
    assert reads == [hash_token("right")]


async def test_the_unknown_tokens_remembered_are_bounded(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "UNKNOWN_MAX", 3)
    reads, clock = reads_of(store, monkeypatch), Clock()
    a = authenticator(store, clock)
    for token in ("a", "b", "c", "d"):
        await refused(a, "someone", token)
    await refused(a, "someone", "a")  # the oldest was forgotten: looked up again
    await refused(a, "someone", "d")
    assert reads == [hash_token(t) for t in ("a", "b", "c", "d", "a")]
