"""The deployment's watch on the other processes' operators: each is watched through a
connection of its own (`liveness.PeerWatch`), and one unreachable for the watch's grace is
evicted from the membership, as its session's expiry would do later. The membership watch
then starts the recovery (`recovery.Recovery`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from tidings.elastic.coordination.coordinator import Coordinator
from tidings.elastic.hosting.liveness import PeerWatch
from tidings.elastic.protocol.channels import shared_context
from tidings.elastic.tasks import cancelled

log = logging.getLogger("tidings.elastic")


class Evictions:
    """`follow()` at each change of the membership; `local()`: this process's operators,
    which are not watched; `closing()`: the deployment closes, nothing more starts."""

    def __init__(
        self,
        coordinator: Coordinator,
        local: Callable[[], set[str]],
        closing: Callable[[], bool],
        unreachable_s: float,
    ) -> None:
        self.coordinator = coordinator
        self._local = local
        self._closing = closing
        # 0 s: nobody is watched, an unreachable peer is left to its session's expiry
        self.peers = PeerWatch(shared_context(), self._unreachable, unreachable_s)
        self._sessions: dict[str, int] = {}  # watched peer -> the session of its node
        self._following: asyncio.Task[None] | None = None
        self._stale = False
        self._evictions: set[asyncio.Task[None]] = set()

    def follow(self) -> None:
        """Watch every other process's operator as the membership changes."""
        if self.peers.grace_s <= 0 or self._closing():
            return
        self._stale = True
        if self._following is None or self._following.done():
            self._following = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while self._stale and not self._closing():
            self._stale = False
            try:
                sessions = await self.coordinator.sessions()
            except Exception:
                log.exception("elastic: the membership could not be read; trying again")
                self._stale = True
                await asyncio.sleep(1.0)
                continue
            local = self._local()
            for peer in (self.peers.watched - set(sessions)) | (self.peers.watched & local):
                self.peers.unwatch(peer)
                self._sessions.pop(peer, None)
            for peer, (info, session) in sessions.items():
                if peer not in local:
                    self.peers.watch(peer, info.address)
                    self._sessions[peer] = session

    def _unreachable(self, peer: str) -> None:
        session = self._sessions.get(peer)
        if session is not None and not self._closing():
            task = asyncio.get_running_loop().create_task(self._evict(peer, session))
            self._evictions.add(task)
            task.add_done_callback(self._evictions.discard)

    async def _evict(self, peer: str, session: int) -> None:
        """As its session's expiry would, later: the membership watch starts the recovery."""
        try:
            if await self.coordinator.evict(peer, session):
                log.warning("elastic: %s evicted: unreachable for %g s", peer, self.peers.grace_s)
        except Exception:
            log.exception("elastic: %s could not be evicted", peer)

    async def close(self) -> None:
        """The watch of the membership ends, then every peer's connection."""
        await cancelled(self._following, "the membership watch")
        self.peers.close()
