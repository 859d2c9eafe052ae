"""Authentication: subscribers' tokens and the admin's, with a cache of token hashes that
other brokers on a shared store keep honest (a deleted subscriber's token stops working
everywhere, and so do its open streams)."""

from __future__ import annotations

import hmac
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from tidings.delivery.presence import Presence
from tidings.delivery.signals import Revocations
from tidings.errors import ErrorCode, TidingsError
from tidings.ids import hash_token
from tidings.model import Subscriber
from tidings.store.asyncstore import AsyncStore
from tidings.store.base import Change

NO_SUBSCRIBER = hash_token("")  # compared against when there is no admin token
UNKNOWN_S = 5.0  # an unknown token is remembered this long (then the store is asked again)
UNKNOWN_MAX = 10_000  # unknown tokens remembered at most (the oldest go first)


class Authenticator:
    """A subscriber's call is authorized by finding whose token it presents (by the token's
    hash: from memory for a token seen valid, else one store read) and comparing that owner
    with the id it names. The named id is never looked up to authorize, so a wrong token
    costs the same whether the id exists or not (nothing to tell one from the other by time)."""

    def __init__(
        self,
        store: AsyncStore,
        presence: Presence,
        revocations: Revocations,
        clock: Callable[[], float],
        admin_token_hash: str = "",  # empty: no admin calls
    ) -> None:
        self.store, self.presence, self.revocations = store, presence, revocations
        self.clock = clock
        self.admin_token_hash = admin_token_hash
        self._owners: dict[str, str] = {}  # a valid token's hash -> its subscriber
        self._tokens: dict[str, str] = {}  # the reverse, to forget a deleted subscriber's
        # token hashes the store did not know, and when it said so: a token guessed again
        # and again costs no store read
        self._unknown: OrderedDict[str, float] = OrderedDict()
        self._told = 0  # deletions and resyncs told so far: a token read across one is stale

    def registered(self, subscriber: Subscriber) -> None:
        self._unknown.pop(subscriber.token_hash, None)
        self._remember(subscriber.id, subscriber.token_hash)

    async def authenticate(self, subscriber_id: str, token: str | None) -> None:
        """401 without a token; 403 for a token that is not this subscriber's, and equally
        for a subscriber that does not exist, so that nobody without its token can tell
        whether an id exists."""
        if not token:
            raise TidingsError(ErrorCode.UNAUTHORIZED)
        if await self._owner(hash_token(token)) != subscriber_id:
            raise TidingsError(ErrorCode.FORBIDDEN, resource=f"subscriber {subscriber_id}")
        self.presence.saw(subscriber_id, self.clock())

    async def _owner(self, token_hash: str) -> str | None:
        """Whose token this is: cached unless a deletion was told while it was read (a
        removal that overtook the read must not leave a dead token cached: read again)."""
        owner = self._owners.get(token_hash)
        if owner is not None or self._known_unknown(token_hash):
            return owner
        while True:
            told = self._told
            owner = await self.store.token_owner(token_hash)
            if owner is None:
                self._remember_unknown(token_hash)
                return None
            if told == self._told:
                self._remember(owner, token_hash)
                return owner

    def _remember(self, subscriber_id: str, token_hash: str) -> None:
        self._owners[token_hash] = subscriber_id
        self._tokens[subscriber_id] = token_hash

    def _known_unknown(self, token_hash: str) -> bool:
        seen = self._unknown.get(token_hash)
        if seen is None:
            return False
        if self.clock() - seen < UNKNOWN_S:
            return True
        del self._unknown[token_hash]
        return False

    def _remember_unknown(self, token_hash: str) -> None:
        self._unknown[token_hash] = self.clock()
        self._unknown.move_to_end(token_hash)
        while len(self._unknown) > UNKNOWN_MAX:
            self._unknown.popitem(last=False)

    def is_admin(self, token: str | None) -> bool:
        """Whether `token` is the admin's (for answers that only show more to the admin)."""
        try:
            self.authenticate_admin(token)
        except TidingsError:
            return False
        return True

    def authenticate_admin(self, token: str | None) -> None:
        """401 without a token, 403 for any token but the admin's."""
        if not token:
            raise TidingsError(ErrorCode.UNAUTHORIZED)
        expected = self.admin_token_hash or NO_SUBSCRIBER
        if not hmac.compare_digest(expected, hash_token(token)) or not self.admin_token_hash:
            raise TidingsError(ErrorCode.FORBIDDEN, resource="the admin calls")

    def forget(self, subscriber_id: str) -> None:
        """The subscriber is gone: its token and its open streams with it."""
        self._told += 1
        self._owners.pop(self._tokens.pop(subscriber_id, ""), None)
        self.revocations.revoke(subscriber_id)

    def forget_all(self) -> None:
        """Every cached token read again at its next use (a stateless broker, whose cache no
        other broker's deletions reach, at each look at the store)."""
        self._told += 1
        self._tokens.clear()
        self._owners.clear()

    def changed(self, change: Change, spawn: Callable[[Any], None]) -> None:
        """Another broker on the shared store deleted a subscriber, or notifications may
        have been lost (a resync): then trust no cached token or open stream."""
        if change.kind == "subscriber_removed":
            self.forget(change.subscriber_id)
            return
        self._told += 1
        self._tokens.clear()
        self._owners.clear()
        spawn(self._check_streams())

    async def _check_streams(self) -> None:
        """After a resync: close the streams of subscribers deleted meanwhile."""
        for subscriber_id in self.revocations.streaming():
            if await self.store.get_subscriber(subscriber_id) is None:
                self.forget(subscriber_id)
