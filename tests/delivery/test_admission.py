"""Admission: at most `most` turns of one key at once, the rest served in the order they
came; a key's state is dropped once nothing of it runs or waits."""

from __future__ import annotations

import asyncio

from tidings.delivery.admission import Admission


async def _settled() -> None:
    for _ in range(5):  # let every ready task run up to its next wait
        await asyncio.sleep(0)


async def test_at_most_the_bound_of_one_key_work_at_once_and_the_rest_in_arrival_order() -> None:
    admission, gate = Admission(2), asyncio.Event()
    started: list[int] = []

    async def op(i: int) -> None:
        async with admission.turn("flooder"):
            started.append(i)
            await gate.wait()

    tasks = [asyncio.create_task(op(i)) for i in range(6)]
    await _settled()
    assert started == [0, 1] and admission.waiting("flooder") == 4
    gate.set()
    await asyncio.gather(*tasks)
    assert started == [0, 1, 2, 3, 4, 5]


async def test_another_key_is_not_held_by_a_busy_one() -> None:
    admission, gate = Admission(1), asyncio.Event()

    async def hold() -> None:
        async with admission.turn("flooder"):
            await gate.wait()

    holders = [asyncio.create_task(hold()) for _ in range(3)]
    await _settled()
    async with admission.turn("bystander"):
        assert admission.waiting("flooder") == 2
    gate.set()
    await asyncio.gather(*holders)


async def test_a_key_is_forgotten_once_idle_even_after_a_waiter_was_cancelled() -> None:
    admission, gate = Admission(1), asyncio.Event()

    async def hold() -> None:
        async with admission.turn("s"):
            await gate.wait()

    first, second, third = (asyncio.create_task(hold()) for _ in range(3))
    await _settled()
    second.cancel()
    await _settled()
    assert admission.waiting("s") == 1 and admission.active() == 1
    gate.set()
    await asyncio.gather(first, third)
    assert second.cancelled() and admission.active() == 0


async def test_no_bound_at_zero_keeps_no_state() -> None:
    admission, gate = Admission(0), asyncio.Event()
    inside: list[int] = []

    async def op(i: int) -> None:
        async with admission.turn("s"):
            inside.append(i)
            await gate.wait()

    tasks = [asyncio.create_task(op(i)) for i in range(10)]
    await _settled()
    assert len(inside) == 10 and admission.active() == 0
    gate.set()
    await asyncio.gather(*tasks)


async def test_a_task_holding_a_turn_is_granted_the_same_keys_turn_again_but_not_its_children() -> (
    None
):
    admission = Admission(1)
    async with admission.turn("s"), admission.turn("s"):  # a route, then its queue operation
        child = asyncio.create_task(_enter(admission, "s"))
        await _settled()
        assert not child.done() and admission.waiting("s") == 1
    await child
    assert admission.active() == 0


async def test_each_wait_is_told() -> None:
    told: list[None] = []
    admission, gate = Admission(1, lambda: told.append(None)), asyncio.Event()

    async def hold() -> None:
        async with admission.turn("s"):
            await gate.wait()

    tasks = [asyncio.create_task(hold()) for _ in range(3)]
    await _settled()
    assert len(told) == 2
    gate.set()
    await asyncio.gather(*tasks)


async def _enter(admission: Admission, key: str) -> None:
    async with admission.turn(key):
        pass
