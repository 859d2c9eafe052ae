"""Turns by subscriber: round-robin whatever the queues' lengths, one turn per subscriber
at a time, a cancelled waiter passes its turn on, a turn costs its owner the time it held
the slot."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.sandbox.fair import FairShare


def stopped() -> float:
    """A clock that does not move: every turn costs the least (the order alone is tested)."""
    return 0.0


async def test_turns_go_round_robin_by_subscriber() -> None:
    share, order = FairShare(1, clock=stopped), []

    async def one(owner: str) -> None:
        async with share.turn(owner):
            order.append(owner)
            await asyncio.sleep(0)

    await asyncio.gather(*(one("hog") for _ in range(4)), one("b"), one("c"))
    assert order == ["hog", "b", "c", "hog", "hog", "hog"]


async def test_a_subscriber_holds_one_turn_at_a_time_the_others_take_the_rest() -> None:
    share, running, most = FairShare(2), {"a": 0, "b": 0}, {"a": 0, "b": 0}

    async def one(owner: str) -> None:
        async with share.turn(owner):
            running[owner] += 1
            most[owner] = max(most[owner], running[owner])
            await asyncio.sleep(0.01)
            running[owner] -= 1

    await asyncio.gather(*(one("a") for _ in range(5)), one("b"))
    assert most == {"a": 1, "b": 1}


async def test_a_cancelled_waiter_passes_its_turn_on() -> None:
    share = FairShare(1)
    async with share.turn("a"):
        waiting = asyncio.ensure_future(_enter(share, "b"))
        later = asyncio.ensure_future(_enter(share, "c"))
        await asyncio.sleep(0)
        waiting.cancel()
    assert await asyncio.wait_for(later, 1) == "c"
    assert share.free == 1


async def test_a_turn_costs_its_owner_the_time_it_held_the_slot() -> None:
    """One holding the slot half a second (a worker's start) waits for the quick owner's
    turns: fifty times as long, counted against it, not one turn each."""
    share, order = FairShare(1), []

    async def one(owner: str, held_s: float) -> None:
        async with share.turn(owner):
            order.append(owner)
            await asyncio.sleep(held_s)

    slow = [asyncio.ensure_future(one("slow", 0.5)) for _ in range(2)]
    await asyncio.sleep(0)
    await asyncio.gather(*slow, *(one("quick", 0) for _ in range(3)))
    assert order == ["slow", "quick", "quick", "quick", "slow"]


async def test_of_owners_waiting_alike_the_one_whose_turn_is_expected_shortest_goes_first() -> None:
    """Two never served: one needs a worker started (a second expected), the other's is warm
    (nothing expected): the warm one goes first, though it came later."""
    share, order = FairShare(1, clock=stopped), []

    async def one(owner: str, expected_s: float) -> None:
        async with share.turn(owner, expected_s):
            order.append(owner)

    async with share.turn("busy"):
        starting = asyncio.ensure_future(one("starting", 1.0))
        await asyncio.sleep(0)
        warm = asyncio.ensure_future(one("warm", 0.0))
        await asyncio.sleep(0)
    await asyncio.gather(starting, warm)
    assert order == ["warm", "starting"]


async def test_turns_expected_to_cost_leave_a_turn_free_for_the_short_ones() -> None:
    """Two slots, at most one turn expected to cost (a worker's start) at once: the second
    owner that must start a worker waits, and the free slot goes to a warm one at once."""
    share, order = FairShare(2, clock=stopped, costly=1), []
    first_done = asyncio.Event()

    async def one(owner: str, expected_s: float, until: asyncio.Event | None = None) -> None:
        async with share.turn(owner, expected_s):
            order.append(owner)
            if until is not None:
                await until.wait()

    starting = asyncio.ensure_future(one("start-a", 1.0, first_done))
    second = asyncio.ensure_future(one("start-b", 1.0))
    await asyncio.sleep(0)
    assert order == ["start-a"] and share.free == 1  # held back, its slot kept
    await one("warm", 0.0)
    assert order == ["start-a", "warm"]
    first_done.set()
    await asyncio.gather(starting, second)
    assert order == ["start-a", "warm", "start-b"]


async def _enter(share: FairShare, owner: str) -> str:
    async with share.turn(owner):
        return owner


async def _order(share: FairShare, owners: list[str]) -> list[str]:
    order: list[str] = []

    async def one(owner: str) -> None:
        async with share.turn(owner):
            order.append(owner)
            await asyncio.sleep(0)

    await asyncio.gather(*(one(o) for o in owners))
    return order


async def test_a_turn_passes_to_its_owners_next_evaluation_up_to_the_burst() -> None:
    order = await _order(FairShare(1, burst=3, clock=stopped), ["hog"] * 5 + ["b"])
    assert order == ["hog", "hog", "hog", "b", "hog", "hog"]


async def test_a_turn_is_not_kept_by_an_owner_that_may_not_keep_it() -> None:
    share = FairShare(1, burst=3, may_keep=lambda owner: owner != "suspect", clock=stopped)
    order = await _order(share, ["suspect"] * 3 + ["b", "c"])
    assert order == ["suspect", "b", "c", "suspect", "suspect"]


def round_robin(requests: list[str]) -> list[str]:
    """The reference: one turn at a time, to the owner with waiters served longest ago (never
    served first, in their order of arrival)."""
    left: dict[str, int] = {}
    for owner in requests:
        left[owner] = left.get(owner, 0) + 1
    last: dict[str, int] = {}
    order: list[str] = []
    while left:
        owner = min(left, key=lambda o: last.get(o, -1))
        order.append(owner)
        last[owner] = len(order)
        left[owner] -= 1
        if not left[owner]:
            del left[owner]
    return order


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abcdefgh"), max_size=40))
def test_turns_follow_the_round_robin_reference(requests: list[str]) -> None:
    """Turns of equal cost (a stopped clock: each the least, one quantum)."""
    share = FairShare(1, clock=stopped)
    assert asyncio.run(_order(share, requests)) == round_robin(requests)
