"""Keeping Python's garbage collector off the indexes of many subscriptions.

Those indexes are a few dicts, lists and arrays of millions of entries, and every full
collection walks every entry of every container it tracks: 60-70 ms each at 10^6
subscriptions, several a second while matching makes its answers' short-lived lists. Settling
the heap after a large load takes everything alive then out of the collector's sight.
"""

from __future__ import annotations

import gc

SETTLE_FROM = 10_000  # subscriptions: below this, full collections cost too little to matter


def settle_heap() -> None:
    """Freeze what is alive now (`gc.freeze`), after one full collection. The previous freeze
    is undone first, so an index replaced since is collected. Blocks for that collection
    (about 0.1 s at 10^6 subscriptions)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
