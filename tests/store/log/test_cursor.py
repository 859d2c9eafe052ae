"""One queue in memory (`Cursor`): what a lease takes, what it leaves, and the floor."""

from __future__ import annotations

from array import array

from tidings.store.log.codec import ConsumerState
from tidings.store.log.cursor import Cursor


def queue(n: int) -> Cursor:
    """Sequence numbers 1..n, body i+100, tag i and size 10*i each."""
    cursor = Cursor()
    seqs = array("q", range(1, n + 1))
    sizes = array("i", (10 * s for s in seqs))
    cursor.extend(seqs, array("q", (s + 100 for s in seqs)), array("i", seqs), sizes)
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


def test_a_queue_s_bytes_are_those_not_acknowledged_wherever_the_acks_fall() -> None:
    cursor = queue(4)  # 10 + 20 + 30 + 40
    taken, _ = cursor.take(4, 30.0, 0.0)
    assert cursor.queued_bytes() == 100  # leased is still queued
    assert cursor.ack(taken[2].seq, taken[2].attempt)  # 3: into the sparse set
    assert cursor.queued_bytes() == 70 and cursor.depth() == 3
    assert cursor.ack(taken[0].seq, taken[0].attempt)  # 1: the floor rises
    assert cursor.queued_bytes() == 60 and cursor.depth() == 2


def test_a_queue_recovered_with_a_sparse_set_counts_and_lists_only_what_is_left() -> None:
    cursor = Cursor(ConsumerState(3, (5,), {}))  # 1..3 and 5 acknowledged before a restart
    for seq in range(1, 8):
        cursor.append(seq, seq + 100, 0, 10)
    assert cursor.depth() == 3 and cursor.queued_bytes() == 30
    assert [seq for seq, _, _ in cursor.entries()] == [4, 6, 7]
    taken, _ = cursor.take(10, 30.0, 0.0)
    assert [t.seq for t in taken] == [4, 6, 7]
    for t in taken:
        assert cursor.ack(t.seq, t.attempt)
    assert cursor.depth() == 0 and cursor.queued_bytes() == 0
    assert cursor.floor == 7 and not cursor.acked  # the floor stepped over 5 too


def test_settled_leases_leave_no_pile_of_timeouts_and_the_unsettled_still_run_out() -> None:
    cursor = queue(20_000)
    kept, _ = cursor.take(3, 50.0, 0.0)  # never settled: their leases must still run out
    for _ in range(19_997):
        [leased], _ = cursor.take(1, 30.0, 0.0)
        if leased.seq % 2:
            assert cursor.ack(leased.seq, leased.attempt)
        else:
            assert cursor.hand_back(leased.seq, leased.attempt, ready_at=1e9)
    assert len(cursor.timeouts) <= 2 * len(cursor.leases) + 1024
    assert cursor.take(10, 100.0, 49.0) == ([], [])  # handed back for later, or leased
    again, _ = cursor.take(10, 100.0, 51.0)
    assert [(t.seq, t.attempt) for t in again] == [(t.seq, 2) for t in kept]
