"""Settling the heap keeps the collector off what is alive, and lets go of what is dropped."""

from __future__ import annotations

import gc
import weakref

from tidings.heap import settle_heap


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def test_what_is_alive_when_the_heap_settles_is_frozen(unfrozen: None) -> None:
    gc.unfreeze()
    node = Node()
    settle_heap()
    assert gc.get_freeze_count() > 0
    assert node.me is node


def test_settling_the_heap_again_collects_what_was_dropped_since(unfrozen: None) -> None:
    node = Node()
    gone = weakref.ref(node)
    settle_heap()
    del node
    gc.collect()
    assert gone() is not None  # frozen: out of the collector's sight
    settle_heap()
    assert gone() is None
