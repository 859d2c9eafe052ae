"""Settling the heap keeps the collector off what is alive, and lets go of what is dropped;
a wide young generation lets a burst of short-lived objects die before it is collected; a
hold keeps the collector off a large state while it arrives."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from tidings.heap import (
    YOUNG_OBJECTS,
    hold_collections,
    release_collections,
    settle_heap,
    widen_young_generation,
)


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


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_widening_the_young_generation_leaves_the_older_ones_as_they_were(
    thresholds: tuple[int, int, int],
) -> None:
    gc.set_threshold(700, 10, 10)
    widen_young_generation()
    assert gc.get_threshold() == (YOUNG_OBJECTS, 10, 10)
    widen_young_generation(1234)
    assert gc.get_threshold() == (1234, 10, 10)


def test_holding_collections_nests_and_the_release_freezes_what_arrived(unfrozen: None) -> None:
    assert gc.isenabled()
    hold_collections()
    hold_collections()
    arrived = Node()
    assert not gc.isenabled()
    release_collections()
    assert not gc.isenabled()  # one hold is left
    frozen = gc.get_freeze_count()
    release_collections()
    assert gc.isenabled()
    assert gc.get_freeze_count() > frozen  # what arrived is out of the collector's sight
    assert arrived.me is arrived
    release_collections()  # (one too many: no harm)
    assert gc.isenabled()
