"""Lease bookkeeping: receipts remembered until settled, the oldest forgotten first."""

from __future__ import annotations

from tidings.delivery.leases import Leases
from tidings.store.base import Message


def leased(n: int) -> Message:
    return Message(n, "s", f"p{n}", ("x",), None, 0.0, 1, f"r{n}", 30.0)


def test_a_settled_receipt_names_its_message_once() -> None:
    leases = Leases()
    leases.remember([leased(1), leased(2)])
    assert [m.publication_id for m in leases.settle(["r2", "r9"])] == ["p2"]
    assert leases.settle(["r2"]) == [] and len(leases) == 1


def test_the_oldest_leases_are_forgotten_beyond_the_capacity() -> None:
    leases = Leases(capacity=2)
    leases.remember([leased(1), leased(2), leased(3)])
    assert [m.id for m in leases.settle(["r1", "r2", "r3"])] == [2, 3]
