"""Settling the heap keeps the collector off what is alive, and lets go of what is dropped;
a wide young generation lets a burst of short-lived objects die before it is collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from tidings.heap import YOUNG_OBJECTS, settle_heap, widen_young_generation


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
