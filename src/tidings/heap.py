"""Keeping Python's garbage collector off the indexes of many subscriptions.

Those indexes are a few dicts, lists and arrays of millions of entries, and every full
collection walks every entry of every container it tracks: 60-70 ms each at 10^6
subscriptions, several a second while matching makes its answers' short-lived lists. Settling
the heap after a large load takes everything alive then out of the collector's sight.
"""

from __future__ import annotations

import gc

SETTLE_FROM = 10_000  # subscriptions: below this, full collections cost too little to matter
YOUNG_OBJECTS = 50_000  # allocations between young collections (Python's default: 700)


def settle_heap() -> None:
    """Freeze what is alive now (`gc.freeze`), after one full collection. The previous freeze
    is undone first, so an index replaced since is collected. Blocks for that collection
    (about 0.1 s at 10^6 subscriptions). Under a hold, nothing: its release freezes."""
    if _holds:
        return
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def widen_young_generation(objects: int = YOUNG_OBJECTS) -> None:
    """A young generation larger than Python's default, for a process (the broker, an
    elastic operator) that holds a large, long-lived state and makes bursts of short-lived
    containers that live for one step: decoded frames, the answers of a batch of
    publications, the partial results an exit point merges.

    With 700, a burst outlived the young collections and reached the old generation. And
    after a freeze (`settle_heap`) the old generation counts few objects, so full collections
    came often: in the process holding an access point and an exit point at 2,000
    publications/s, one every 0.1 s, 1-4 ms each while nothing waited, 20-80 ms each once a
    backlog of partial results built up (a scale-out), which slowed the process and grew the
    backlog further: notifications never caught up again (figure 13, 2026-11-25). In a
    matcher holding 100,000 subscriptions, receiving 34,000 of a scale took 0.11 s to decode
    and 0.8 s to index, 0.5 s of it in four full passes. With 50,000 a burst dies by
    reference counting first."""
    _threshold, *older = gc.get_threshold()
    gc.set_threshold(objects, *older)


_holds = 0


def hold_collections() -> None:
    """No garbage collection while a large state arrives (an elastic matcher's share of a
    scale, 34,000-66,000 records): every record it keeps is new and long-lived, so the
    collector's full passes (100-180 ms each over a matcher's 100,000 subscriptions) came
    one after another, each a pause of the notifications it was matching. Holds nest."""
    global _holds
    _holds += 1
    gc.disable()


def release_collections() -> None:
    """The end of a hold: what arrived is frozen as long-lived (never scanned again; what
    is later dropped is still freed by reference counting) and collection resumes. Garbage
    in reference cycles made during the hold is frozen with it: a hold is short."""
    global _holds
    _holds = max(0, _holds - 1)
    if _holds == 0:
        gc.freeze()
        gc.enable()


class Settler:
    """Settles the heap once an index reaches `SETTLE_FROM` entries, and each time it has
    doubled since (an index fed one subscription at a time is never rebuilt whole)."""

    def __init__(self) -> None:
        self._settled = 0  # entries at the last settle

    def rebuilt(self) -> None:
        """The old index is garbage now: the next check settles whatever the size."""
        self._settled = 0

    def check(self, entries: int) -> None:
        if entries >= max(SETTLE_FROM, 2 * self._settled):
            settle_heap()
            self._settled = entries
