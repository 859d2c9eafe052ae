"""Wake-ups (`Signals`): a notification wakes every waiter of its subscriber and only them,
a waiter's time runs out alone, and nothing is left behind."""

from __future__ import annotations

import asyncio

from tidings.delivery.signals import Signals


async def test_a_notification_wakes_every_waiter_of_its_subscriber_and_no_other() -> None:
    signals = Signals()
    a1 = asyncio.create_task(signals.wait("a", 30.0))
    a2 = asyncio.create_task(signals.wait("a", 30.0))
    b = asyncio.create_task(signals.wait("b", 30.0))
    await asyncio.sleep(0)
    signals.notify(["a"])
    await asyncio.wait_for(asyncio.gather(a1, a2), 5)
    assert not b.done() and signals.waiting() == 1
    signals.notify(["b"])
    await asyncio.wait_for(b, 5)
    assert signals.waiting() == 0


async def test_a_waiter_returns_when_its_time_runs_out_and_leaves_nothing() -> None:
    signals = Signals()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await signals.wait("a", 0.05)
    assert loop.time() - started >= 0.04 and signals.waiting() == 0
    signals.notify(["a"])  # nobody waits: nothing to wake, nothing kept


async def test_a_notification_before_the_wait_is_not_kept_for_it() -> None:
    signals = Signals()
    signals.notify(["a"])
    waiter = asyncio.create_task(signals.wait("a", 30.0))
    await asyncio.sleep(0.05)
    assert not waiter.done()  # only a later enqueue wakes it (the caller leases first)
    signals.notify(["a"])
    await asyncio.wait_for(waiter, 5)


async def test_a_cancelled_waiter_is_forgotten() -> None:
    signals = Signals()
    waiter = asyncio.create_task(signals.wait("a", 30.0))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert signals.waiting() == 0
