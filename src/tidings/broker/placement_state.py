"""The last placement state this broker routed (`GET /v1/admin/placement`).

The broker holds no placement of its own: the MultiPub controller runs beside it and
publishes its state on `placement/state` (`tidings.wire.placement`). Of the publications
the broker accepts, it keeps the last one on that topic that is a valid state, in memory
(a restart forgets it until the controller publishes again). The body is anyone's to write
who may publish on the topic, so it is bounded before it is decoded (`MAX_STATE_BYTES`),
checked against the shape's limits, and its region names must be the state's own; anything
else is ignored and counted, the publication itself routed as any other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import msgspec
import orjson

from tidings.model import Publication
from tidings.wire.placement import MAX_STATE_BYTES, STATE_TOPIC, PlacementSeen, PlacementState

log = logging.getLogger("tidings.broker")
REASON_CHARS = 300  # of the last reason kept


class LastPlacement:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.seen: PlacementSeen | None = None
        self.ignored = 0
        self.last_ignored: str | None = None

    def record(self, pubs: Sequence[Publication]) -> None:
        """A batch the broker accepted: keeps the last valid state among them."""
        for pub in pubs:
            if STATE_TOPIC in pub.topics:
                self._consider(pub)

    def _consider(self, pub: Publication) -> None:
        try:
            state = parse(pub)
        except ValueError as exc:
            self.ignored += 1
            self.last_ignored = str(exc)[:REASON_CHARS]
            log.warning("placement state %s ignored: %s", pub.id, self.last_ignored)
            return
        self.seen = PlacementSeen(state, self.clock(), pub.id, 0, None)

    def answer(self) -> PlacementSeen | None:
        if self.seen is None:
            return None
        seen, ignored = self.seen, self.ignored
        return msgspec.structs.replace(seen, ignored=ignored, last_ignored=self.last_ignored)


def parse(pub: Publication) -> PlacementState:
    """The publication's data as a state, or ValueError saying why it is not one."""
    if pub.data_encoding != "json":
        raise ValueError(f"its data is {pub.data_encoding}, not a JSON object")
    size = len(orjson.dumps(pub.data))
    if size > MAX_STATE_BYTES:
        raise ValueError(f"{size} bytes; a state is at most {MAX_STATE_BYTES}")
    try:
        state = msgspec.convert(pub.data, PlacementState)
    except msgspec.ValidationError as exc:
        raise ValueError(f"not a placement state: {exc}") from None
    known = set(state.regions)
    for topic in state.topics:
        named = set(topic.regions) | {c.region for c in topic.clients}
        if not named <= known:
            raise ValueError(f"topic {topic.topic!r} names regions the state does not list")
    return state
