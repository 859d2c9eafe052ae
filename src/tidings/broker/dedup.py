"""Publishers' dedup ids (docs/guarantees.md): `PublisherDedup`.

A dedup id is its publisher's: claimed under the publisher's scope (`publisher_scope`, from
the key it publishes with), as Kafka's idempotent producer numbers its sequences per
producer id. Whoever does not hold a publisher's key can neither take its ids first (and so
suppress its publications) nor be answered with its publications. Publishers without a key
share one scope.

A publication that carries a `dedup_id` claims it in the store for the dedup window, in
the same transaction as its deliveries' enqueue (`store.base.PublishOnce`), so a publish
answered 201 has both, and a crash before the commit leaves neither: the publisher's retry
then publishes afresh. A publication whose id is held is a duplicate: nothing of it is
enqueued, and it is answered as the first was.

The claims ride with the batch being published: `batch()` marks it (a context variable,
so the routing's `deliver`, awaited within the same task, finds them), `enqueue()` is what
`deliver` commits, and `settle()` claims whatever the routing did not enqueue here (no
matching subscriber, or a matching mode whose exit points enqueue elsewhere: there the
claim follows the enqueue, so a duplicate is answered as one but may be delivered).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from tidings.delivery.committer import Committer
from tidings.model import Publication
from tidings.store.asyncstore import AsyncStore
from tidings.store.base import DedupClaim, DedupKey, Fanout, PublishOnce

Spawn = Callable[[Coroutine[Any, Any, Any]], None]
ANONYMOUS = ""  # the one scope of every publisher without a key


def publisher_scope(key: str | None) -> str:
    """The scope of a publisher's dedup ids: its key, hashed apart from the token hashes the
    store keeps (a publisher key is never stored as itself or as its access hash)."""
    if not key:
        return ANONYMOUS
    return hashlib.sha256(b"tidings dedup scope\0" + key.encode()).hexdigest()


@dataclass
class Claims:
    """One publish call's dedup keys (its publisher's scope, each dedup id), by publication
    id, and once claimed the duplicates."""

    ids: dict[str, DedupKey]
    published_at: float
    duplicates: dict[DedupKey, DedupClaim] | None = None  # None: not claimed yet


_current: ContextVar[Claims | None] = ContextVar("tidings_dedup_claims", default=None)


class PublisherDedup:
    def __init__(
        self,
        window_s: float,
        committer: Committer,
        store: AsyncStore,
        clock: Callable[[], float],
    ) -> None:
        self.window_s, self.committer, self.store, self.clock = window_s, committer, store, clock
        self._pruned_at = 0.0

    @contextmanager
    def batch(
        self, pubs: Sequence[Publication], dedup_ids: Sequence[str | None], key: str | None
    ) -> Iterator[Claims | None]:
        """While these publications are routed, their dedup ids (None: there are none), in
        the scope of the key they were published with."""
        scope = publisher_scope(key)
        ids = {p.id: (scope, d) for p, d in zip(pubs, dedup_ids, strict=True) if d is not None}
        if not ids:
            yield None
            return
        claims = Claims(ids, pubs[0].published_at if pubs else self.clock())
        token = _current.set(claims)
        try:
            yield claims
        finally:
            _current.reset(token)

    async def enqueue(self, fanouts: list[Fanout]) -> list[Fanout] | None:
        """Claim the current batch's ids and enqueue `fanouts` but the duplicates', in one
        commit; the fan-outs enqueued. None when the batch has no dedup ids."""
        claims = _current.get()
        if claims is None or claims.duplicates is not None:
            return None
        counts: dict[str, int] = {}
        for f in fanouts:  # the thesis's per-topic publishing makes one per matching topic
            counts[f.publication_id] = counts.get(f.publication_id, 0) + len(f.owners)
        claims.duplicates = await self._claim(claims, counts, fanouts)
        return [f for f in fanouts if _is_first(f, claims)]

    async def settle(self, claims: Claims | None, spawn: Spawn) -> dict[str, DedupClaim]:
        """The duplicates among the batch's publications: publication id -> the claim of the
        first publication with its dedup id."""
        if claims is None:
            return {}
        if claims.duplicates is None:
            claims.duplicates = await self._claim(claims, {}, [])
        self._prune(spawn)
        held = claims.duplicates
        return {
            pid: held[d]
            for pid, d in claims.ids.items()
            if d in held and held[d].publication_id != pid
        }

    async def _claim(
        self, claims: Claims, counts: dict[str, int], fanouts: list[Fanout]
    ) -> dict[DedupKey, DedupClaim]:
        until = claims.published_at + self.window_s
        wanted = [
            DedupClaim(scope, d, pid, claims.published_at, counts.get(pid, 0), until)
            for pid, (scope, d) in claims.ids.items()
        ]
        return await self.committer.submit(PublishOnce(wanted, self.clock(), fanouts))

    def _prune(self, spawn: Spawn) -> None:
        """Expired ids are replaced when they come again; the rest go every quarter window."""
        now = self.clock()
        if now - self._pruned_at >= max(1.0, self.window_s / 4):
            self._pruned_at = now
            spawn(self.store.prune_dedup_ids(now))


def _is_first(f: Fanout, claims: Claims) -> bool:
    """Whether `f`'s publication holds its claim (so its deliveries were enqueued)."""
    held = claims.duplicates or {}
    key = claims.ids.get(f.publication_id)
    if key is None or key not in held:
        return True
    return held[key].publication_id == f.publication_id


def answered_as_first(pub: Publication, first: DedupClaim) -> Publication:
    """A duplicate as its answer shows it: the first publication's id and time."""
    return dataclasses.replace(pub, id=first.publication_id, published_at=first.published_at)
