"""One queue in memory (`Cursor`): what a lease takes, what it leaves, and the floor."""

from __future__ import annotations

from array import array

from tidings.store.log.cursor import Cursor


def queue(n: int) -> Cursor:
    """Sequence numbers 1..n, body i+100 and tag i each."""
    cursor = Cursor()
    seqs = array("q", range(1, n + 1))
    cursor.extend(seqs, array("q", (s + 100 for s in seqs)), array("i", seqs))
    return cursor


def test_a_lease_within_a_byte_budget_leaves_the_rest_ready_in_order() -> None:
    cursor = queue(4)
    taken, _ = cursor.take(10, 30.0, 0.0, max_bytes=25, size=lambda body: 10)
    assert [t.seq for t in taken] == [1, 2]  # a third would make 30
    taken, _ = cursor.take(10, 30.0, 0.0, max_bytes=5, size=lambda body: 10)
    assert [(t.seq, t.attempt) for t in taken] == [(3, 1)]  # the first always goes
    assert [t.seq for t in cursor.take(10, 30.0, 0.0)[0]] == [4]


def test_a_delivery_leased_max_attempts_times_is_taken_out_not_leased() -> None:
    cursor = queue(2)
    cursor.take(1, 1.0, 0.0, max_attempts=1)  # seq 1, attempt 1; its lease runs out at 1.0
    taken, dead = cursor.take(10, 30.0, 2.0, max_attempts=1)
    assert [(d.seq, d.body, d.tag, d.attempt) for d in dead] == [(1, 101, 1, 1)]
    assert [t.seq for t in taken] == [2]
    assert cursor.depth() == 1  # only 2, leased


def test_a_handed_back_delivery_waits_its_delay_and_hastening_ends_it() -> None:
    cursor = queue(1)
    [leased], _ = cursor.take(1, 30.0, 0.0)
    assert cursor.hand_back(leased.seq, leased.attempt, ready_at=100.0)
    assert not cursor.ack(leased.seq, leased.attempt)  # handed back: its receipt is spent
    assert cursor.hidden(1.0) == 1 and cursor.take(1, 30.0, 1.0)[0] == []
    assert cursor.hasten(1.0) == 1
    [again], _ = cursor.take(1, 30.0, 1.0)
    assert (again.seq, again.attempt) == (1, 2)


def test_settling_out_of_order_keeps_a_sparse_set_until_the_floor_reaches_it() -> None:
    cursor = queue(5)
    cursor.settle(2)
    cursor.settle(4)
    assert (cursor.floor, sorted(cursor.acked)) == (0, [2, 4])
    assert [seq for seq, _, _ in cursor.entries()] == [1, 3, 5]
    cursor.settle(1)
    assert (cursor.floor, sorted(cursor.acked)) == (2, [4])
    assert [seq for seq, _, _ in cursor.entries(after=3)] == [5]
    taken, _ = cursor.take(10, 30.0, 0.0)
    assert [t.seq for t in taken] == [3, 5]  # what was settled never leases
