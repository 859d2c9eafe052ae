"""Fair shares of the URL calls in flight: a bound per subscriber, free slots in turns
whatever the queues' lengths, a bounded wait past which calls are shed, nothing left behind."""

from __future__ import annotations

import asyncio

import pytest

from tidings.sandbox.urlfair import Shed, URLShare


class Calls:
    """Calls through a share that stay in flight until released, noting who got a slot when
    and the most of each subscriber's in flight at once."""

    def __init__(self, share: URLShare) -> None:
        self.share = share
        self.release = asyncio.Event()
        self.order: list[str] = []
        self.flying: dict[str, int] = {}
        self.most: dict[str, int] = {}

    async def one(self, owner: str, hold: bool = True) -> None:
        async with self.share.slot(owner):
            self.order.append(owner)
            self.flying[owner] = self.flying.get(owner, 0) + 1
            self.most[owner] = max(self.most.get(owner, 0), self.flying[owner])
            await (self.release.wait() if hold else asyncio.sleep(0))
            self.flying[owner] -= 1

    def start(self, owner: str, n: int = 1, hold: bool = True) -> list[asyncio.Task[None]]:
        return [asyncio.create_task(self.one(owner, hold)) for _ in range(n)]


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_subscriber_has_at_most_its_share_in_flight_and_another_goes_past_its_queue() -> (
    None
):
    calls = Calls(URLShare(slots=8, per_subscriber=3, queue=100))
    hog = calls.start("hog", 50)
    await settle()
    bystander = calls.start("b")
    await settle()
    assert (calls.flying["hog"], calls.flying["b"]) == (3, 1)
    assert calls.share.waiting("hog") == 47
    calls.release.set()
    await asyncio.gather(*hog, *bystander)
    assert calls.most == {"hog": 3, "b": 1}


async def test_free_slots_go_round_robin_by_subscriber_whatever_the_queues_lengths() -> None:
    calls = Calls(URLShare(slots=1, per_subscriber=1, queue=100))
    tasks = calls.start("hog", 4, hold=False) + calls.start("b", hold=False)
    tasks += calls.start("c", hold=False)
    await asyncio.gather(*tasks)
    assert calls.order == ["hog", "b", "c", "hog", "hog", "hog"]


async def test_a_subscriber_with_one_call_waits_behind_one_turn_of_each_other() -> None:
    # all slots taken by six subscribers, each with many more calls waiting
    calls = Calls(URLShare(slots=4, per_subscriber=4, queue=100))
    tasks = [t for owner in "abcdef" for t in calls.start(owner, 20, hold=False)]
    tasks += calls.start("late", hold=False)
    await asyncio.gather(*tasks)
    # the first four turns, then at most one of each subscriber ahead: not one of each of
    # their `per_subscriber` lanes (4 x 6 ahead: free subscribers each brought 8 lanes)
    assert calls.order.index("late") <= 4 + 6


async def test_past_its_queue_a_subscriber_s_calls_are_shed_at_once_and_others_are_not() -> None:
    calls = Calls(URLShare(slots=2, per_subscriber=1, queue=2))
    held = calls.start("hog", 3)  # one in flight, two waiting
    await settle()
    with pytest.raises(Shed, match=r"^shed: 2 URL calls of this subscriber wait"):
        await calls.one("hog")
    other = calls.start("b")
    await settle()
    assert calls.flying["b"] == 1
    calls.release.set()
    await asyncio.gather(*held, *other)
    assert calls.order.count("hog") == 3


async def test_a_cancelled_call_leaves_its_place_and_nothing_is_kept_once_all_are_done() -> None:
    calls = Calls(URLShare(slots=1, per_subscriber=1, queue=10))
    first = calls.start("a")
    waiting = calls.start("a", 2)
    await settle()
    waiting[0].cancel()
    await settle()
    assert calls.share.waiting("a") == 1
    calls.release.set()
    await asyncio.gather(*first, waiting[1])
    assert calls.order == ["a", "a"]
    assert (calls.share.waiting("a"), calls.share.in_flight("a")) == (0, 0)
    assert not calls.share._calls  # subscribers with nothing in the share are forgotten
    assert calls.share.turns.free == 1
