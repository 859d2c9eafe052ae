"""Lease bookkeeping: receipts remembered until settled, the oldest forgotten first."""

from __future__ import annotations

from tidings.delivery.leases import Leases
from tidings.store.base import Message


def leased(n: int, subscriber: str = "s", receipt: str | None = None) -> Message:
    return Message(n, subscriber, f"p{n}", ("x",), b"null", 0.0, 1, receipt or f"r{n}", 30.0)


def test_a_settled_receipt_names_its_message_once() -> None:
    leases = Leases()
    leases.remember([leased(1), leased(2)])
    assert [m.publication_id for m in leases.settle("s", ["r2", "r9"])] == ["p2"]
    assert leases.settle("s", ["r2"]) == [] and len(leases) == 1


def test_the_oldest_leases_are_forgotten_beyond_the_capacity() -> None:
    leases = Leases(capacity=2)
    leases.remember([leased(1), leased(2), leased(3)])
    assert [m.publication_id for m in leases.settle("s", ["r1", "r2", "r3"])] == ["p2", "p3"]


def test_a_lease_is_kept_without_its_body_with_what_its_ack_is_logged_with() -> None:
    leases = Leases()
    big = leased(1)._replace(raw=b"x" * 256 * 1024, attempt=3, enqueued_at=5.0)
    leases.remember([big])
    [kept] = leases.settle("s", ["r1"])
    assert kept == ("s", "p1", ("x",), 3, 5.0)
    assert not any(isinstance(field, bytes) for field in kept)


def test_two_subscribers_leases_under_the_same_receipt_are_settled_each_its_own() -> None:
    leases = Leases()  # on the log layout receipts are per queue: both are `1.1.<nonce>`
    leases.remember([leased(1, "a", "1.1.n"), leased(2, "b", "1.1.n")])
    assert [m.subscriber_id for m in leases.settle("b", ["1.1.n"])] == ["b"]
    assert [m.publication_id for m in leases.settle("a", ["1.1.n"])] == ["p1"]


def test_past_the_capacity_the_oldest_are_forgotten_down_to_an_eighth_below_it() -> None:
    leases = Leases(capacity=800)
    leases.remember([leased(n) for n in range(800)])
    settled = leases.settle("s", [f"r{n}" for n in range(700)])  # the front: holes now
    assert len(settled) == 700 and len(leases) == 100
    leases.remember([leased(n) for n in range(800, 1601)])  # 901 held: past the capacity
    assert len(leases) == 700  # the newest 700 kept
    kept = leases.settle("s", [f"r{n}" for n in range(700, 1601)])
    assert [m.publication_id for m in kept] == [f"p{n}" for n in range(901, 1601)]
