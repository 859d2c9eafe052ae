"""Windows of pipelined sends completed by the broker's answers: in order (OrderedAcks) or
by AMQP publisher confirms, which may ack one tag or every tag up to one (Confirms)."""

import asyncio

import pytest

from tidings.sim.perf.targets.acks import OrderedAcks
from tidings.sim.perf.targets.amqp import AmqpError, Confirms


def test_a_window_completes_once_every_send_up_to_its_last_is_answered() -> None:
    async def scenario() -> None:
        acks = OrderedAcks()
        first, second = acks.reserve(3), acks.reserve(2)
        acks.on_acks(2)
        assert not first.done()
        acks.on_acks(2)
        assert first.done() and not second.done()
        acks.on_acks(1, RuntimeError("refused"))
        with pytest.raises(RuntimeError):
            second.result()

    asyncio.run(scenario())


def test_a_lost_connection_fails_every_window_still_waiting() -> None:
    async def scenario() -> None:
        acks = OrderedAcks()
        window = acks.reserve(5)
        acks.fail(ConnectionResetError("gone"))
        with pytest.raises(ConnectionResetError):
            window.result()

    asyncio.run(scenario())


def test_confirms_single_and_multiple_acks_release_windows_in_tag_order() -> None:
    async def scenario() -> None:
        confirms = Confirms()
        first, second = confirms.reserve(2), confirms.reserve(2)  # tags 1-2, 3-4
        confirms.settle(2, multiple=False, nack=False)  # out of order: 1 not yet
        assert not first.done.done()
        confirms.settle(1, multiple=False, nack=False)
        assert first.done.done() and not second.done.done()
        confirms.settle(4, multiple=True, nack=False)
        assert second.done.result() is None

    asyncio.run(scenario())


def test_a_nacked_tag_fails_its_window_only() -> None:
    async def scenario() -> None:
        confirms = Confirms()
        first, second = confirms.reserve(2), confirms.reserve(2)
        confirms.settle(3, multiple=False, nack=True)
        confirms.settle(4, multiple=True, nack=False)
        assert first.done.result() is None
        with pytest.raises(AmqpError):
            second.done.result()

    asyncio.run(scenario())
