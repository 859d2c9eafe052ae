"""The Store's promises, checked against every backend."""

from __future__ import annotations

import asyncio
import threading

import orjson
from tests.store.conftest import logs_of, sql_of

from tidings.delivery.committer import Committer
from tidings.model import Op, Predicate, Subscriber, Subscription
from tidings.store.base import (
    Ack,
    Discharge,
    Enqueue,
    Fanout,
    Hasten,
    Lease,
    NewMessage,
    Owe,
    PendingEvaluation,
    QueueDepth,
    Store,
    encode_body,
    subscription_bytes,
)
from tidings.store.inbox import partition_of
from tidings.store.partitions import PartitionedLogStore

T0 = 1_000_000.0


def subscriber(store: Store, sid: str = "s1") -> str:
    store.add_subscriber(Subscriber(sid, "hash", T0))
    return sid


def msg(pub: str, owner: str = "s1", key: str | None = None, at: float = T0) -> NewMessage:
    return NewMessage(owner, pub, key or pub, ("sub1",), encode_body({"id": pub}), at)


def lease(store: Store, n: int = 10, now: float = T0, owner: str = "s1", attempts: int = 5):  # type: ignore[no-untyped-def]
    return store.lease(owner, n, 30.0, attempts, now)


def test_a_subscriber_is_stored_and_found(store: Store) -> None:
    subscriber(store)
    found = store.get_subscriber("s1")
    assert found is not None and found.token_hash == "hash"
    assert store.get_subscriber("nobody") is None and store.count_subscribers() == 1


def test_subscriptions_round_trip_with_their_predicates(store: Store) -> None:
    subscriber(store)
    sub = Subscription("x1", "s1", "content", predicates=(Predicate("a", Op.IN, ("p", 2)),))
    store.add_subscription(sub)
    assert store.get_subscription("x1") == sub
    assert store.list_subscriptions("s1") == [sub] and store.count_subscriptions("s1") == 1


def test_a_subscribers_subscriptions_come_in_pages_in_id_order(store: Store) -> None:
    subscriber(store), subscriber(store, "s2")
    for n in (3, 1, 4, 0, 2):
        store.add_subscription(Subscription(f"x{n}", "s1", "topic", topics=(f"t{n}",)))
    store.add_subscription(Subscription("x9", "s2", "topic", topics=("other",)))
    pages = [store.subscriptions_page("s1", after, 2) for after in ("", "x1", "x3", "x4")]
    assert [[s.id for s in page] for page in pages] == [["x0", "x1"], ["x2", "x3"], ["x4"], []]


def test_a_subscribers_usage_is_its_subscriptions_and_their_stored_bytes(store: Store) -> None:
    subscriber(store), subscriber(store, "s2")
    assert store.subscription_usage("s1") == (0, 0)
    made = [  # a value beyond ASCII: bytes, not characters, are counted
        Subscription("x1", "s1", "content", predicates=(Predicate("a", Op.EQ, "café" * 50),)),
        Subscription("x2", "s1", "topic", topics=("a/b",)),
    ]
    for sub in [*made, Subscription("x3", "s2", "topic", topics=("c",))]:
        store.add_subscription(sub)
    size = sum(map(subscription_bytes, made))
    assert subscription_bytes(made[0]) == len(orjson.dumps(made[0].to_json()).decode()) + 50
    assert store.subscription_usage("s1") == (2, size)
    store.remove_subscription("x1")
    assert store.subscription_usage("s1") == (1, subscription_bytes(made[1]))


def test_a_subscription_read_says_its_stored_bytes_as_the_usage_counts_them(
    store: Store,
) -> None:
    subscriber(store)
    made = Subscription("x1", "s1", "content", predicates=(Predicate("a", Op.EQ, "café" * 50),))
    store.add_subscription(made)
    _, [read] = store.snapshot()
    assert read == made and made.stored_bytes == 0  # not read from a store: encoded to count
    assert read.stored_bytes == subscription_bytes(made) == store.subscription_usage("s1")[1]
    assert store.get_subscription("x1").stored_bytes == read.stored_bytes  # type: ignore[union-attr]


def test_every_subscription_change_bumps_the_version(store: Store) -> None:
    subscriber(store)
    v0 = store.subscriptions_version()
    store.add_subscription(Subscription("x1", "s1", "topic", topics=("a",)))
    store.set_subscription_status("x1", "suspended", "keeps failing")
    assert store.get_subscription("x1").status_reason == "keeps failing"  # type: ignore[union-attr]
    store.remove_subscription("x1")
    assert store.subscriptions_version() == v0 + 3
    assert store.remove_subscription("x1") is False


def test_enqueue_is_idempotent_by_subscriber_and_dedup_key(store: Store) -> None:
    subscriber(store)
    assert store.enqueue([msg("p1"), msg("p2")]) == 2
    assert store.enqueue([msg("p1"), msg("p2"), msg("p3")]) == 1
    assert store.depth("s1", T0).ready == 3


def test_a_repeat_is_ignored_even_after_the_first_copy_was_acknowledged(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg("p1")])
    store.ack("s1", [m.receipt for m in lease(store)])
    assert store.enqueue([msg("p1")]) == 0


def test_lease_hands_out_messages_in_fifo_order(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg(f"p{i}") for i in range(5)])
    assert [m.publication_id for m in lease(store, 3)] == ["p0", "p1", "p2"]
    assert [m.publication_id for m in lease(store, 3)] == ["p3", "p4"]


def test_a_leased_message_is_hidden_until_its_visibility_timeout(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg("p1")])
    first = lease(store)
    assert lease(store, now=T0 + 29) == []
    again = lease(store, now=T0 + 31)
    assert [m.attempt for m in first + again] == [1, 2]
    assert store.depth("s1", T0 + 31).leased == 1


def test_ack_deletes_and_a_stale_receipt_acknowledges_nothing(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg("p1")])
    stale = lease(store)[0].receipt
    fresh = lease(store, now=T0 + 31)[0].receipt
    assert store.ack("s1", [stale, "garbage", "12.1.x"]).acked == []
    assert store.ack("s1", [fresh]).acked == [fresh]
    assert store.depth("s1", T0 + 100).ready == 0


def test_a_receipt_of_another_subscriber_acknowledges_nothing(store: Store) -> None:
    subscriber(store, "s1"), subscriber(store, "s2")
    store.enqueue([msg("p1")])
    receipt = lease(store)[0].receipt
    assert store.ack("s2", [receipt]).unknown == [receipt]


def test_nack_releases_a_message_after_its_delay(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg("p1")])
    receipt = lease(store)[0].receipt
    assert store.nack("s1", [receipt], T0, delay_s=5).acked == [receipt]
    assert lease(store, now=T0 + 4) == []
    assert lease(store, now=T0 + 5)[0].attempt == 2


def test_hasten_makes_messages_waiting_out_a_backoff_ready_and_leaves_leased_ones(
    store: Store,
) -> None:
    subscriber(store), subscriber(store, "s2")
    store.enqueue([msg("p1"), msg("p2"), msg("p3"), msg("p4", "s2")])
    first, second, _ = lease(store, n=3)
    store.nack("s1", [first.receipt, second.receipt], T0, delay_s=600)
    [held] = lease(store, owner="s2")
    store.nack("s2", [held.receipt], T0, delay_s=600)
    assert store.apply([Hasten("s1", T0 + 1)]) == [2]  # not the leased third, not s2's
    assert [m.publication_id for m in lease(store, now=T0 + 1)] == ["p1", "p2"]
    assert lease(store, now=T0 + 1, owner="s2") == []
    assert store.apply([Hasten("s1", T0 + 2)]) == [0]


def test_a_message_leased_max_attempts_times_becomes_a_dead_letter(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg("p1")])
    for i in range(3):
        assert len(lease(store, now=T0 + 31 * i, attempts=3)) == 1
    assert lease(store, now=T0 + 31 * 3, attempts=3) == []
    dead = store.dead_letters("s1")
    assert [(d.publication_id, d.reason, d.attempt) for d in dead] == [("p1", "max_attempts", 3)]
    assert store.depth("s1", T0 + 200).dead == 1


def test_redrive_returns_dead_letters_to_the_queue_with_fresh_attempts(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg("p1"), msg("p2")])
    store.expire(T0 + 10, retention_s=5)
    dead = store.dead_letters("s1")
    assert [d.reason for d in dead] == ["retention", "retention"]
    assert store.redrive("s1", [dead[0].id], T0 + 11) == 1
    assert [(m.publication_id, m.attempt) for m in lease(store, now=T0 + 11)] == [("p1", 1)]
    assert store.redrive("s1", None, T0 + 12) == 1 and store.dead_letters("s1") == []


def test_a_browsed_page_ends_at_its_bytes_and_says_more_wait(store: Store) -> None:
    subscriber(store)
    big = encode_body({"text": "x" * (3 * 1024 * 1024)})  # two would pass a page's 4 MiB
    store.enqueue([NewMessage("s1", f"p{i}", f"p{i}", ("sub1",), big, T0) for i in range(3)])
    first = store.browse("s1", 0, 10, T0 + 1)
    assert [m.publication_id for m in first] == ["p0"] and first.more
    second = store.browse("s1", first[-1].id, 10, T0 + 1)
    assert [m.publication_id for m in second] == ["p1"] and second.more
    last = store.browse("s1", second[-1].id, 10, T0 + 1)
    assert [m.publication_id for m in last] == ["p2"] and not last.more
    assert store.browse("s1", 0, 1, T0 + 1).more  # ended by its count, more wait


def test_browsing_a_queue_pages_its_waiting_messages_in_fifo_order_and_leases_nothing(
    store: Store,
) -> None:
    subscriber(store), subscriber(store, "s2")
    store.enqueue([msg(f"p{i}") for i in range(5)] + [msg("other", "s2")])
    first = store.browse("s1", 0, 3, T0 + 1)
    rest = store.browse("s1", first[-1].id, 3, T0 + 1)
    assert [m.publication_id for m in first + rest] == ["p0", "p1", "p2", "p3", "p4"]
    assert first[0].body == {"id": "p0"} and first[0].subscription_ids == ("sub1",)
    assert (first[0].attempt, first[0].enqueued_at, first[0].ready_at) == (0, T0, T0)
    assert store.browse("s1", rest[-1].id, 3, T0 + 1) == []
    assert [m.attempt for m in lease(store, n=5, now=T0 + 1)] == [1] * 5  # none was leased


def test_browsing_leaves_out_leased_messages_and_shows_delayed_and_expired_ones(
    store: Store,
) -> None:
    subscriber(store)
    store.enqueue([msg("p1"), msg("p2"), msg("p3")])
    _, second = lease(store, n=2)  # leased until T0 + 30
    store.nack("s1", [second.receipt], T0, delay_s=600)
    seen = store.browse("s1", 0, 10, T0 + 1)
    assert [(m.publication_id, m.attempt, m.ready_at) for m in seen] == [
        ("p2", 1, T0 + 600),
        ("p3", 0, T0),
    ]
    after_lease = store.browse("s1", 0, 10, T0 + 31)  # p1's lease ran out: it waits again
    assert [m.publication_id for m in after_lease] == ["p1", "p2", "p3"]


def test_purging_a_queue_deletes_its_waiting_messages_and_leaves_leased_ones(
    store: Store,
) -> None:
    subscriber(store), subscriber(store, "s2")
    store.enqueue([msg("p1"), msg("p2"), msg("p3"), msg("other", "s2")], fresh=True)
    [held] = lease(store, n=1)
    [delayed] = lease(store, n=1)
    store.nack("s1", [delayed.receipt], T0, delay_s=600)
    assert store.purge("s1", T0 + 1) == 2  # p2 (delayed) and p3 (ready)
    assert store.browse("s1", 0, 10, T0 + 1) == [] and store.depth("s1", T0 + 1).leased == 1
    assert store.ack("s1", [held.receipt]).acked == [held.receipt]  # its holder still settles
    assert store.depth("s1", T0 + 700) == QueueDepth(0, 0, 0)
    assert bodies(store) == 1  # s2's only
    assert store.depth("s2", T0 + 1).ready == 1
    assert store.enqueue([msg("p3")]) == 0  # a replay of a purged one is still a repeat
    assert store.purge("s1", T0 + 2) == 0


def test_a_publications_progress_is_its_owed_evaluations_and_its_deliveries_so_far(
    store: Store,
) -> None:
    subscriber(store), subscriber(store, "s2")
    owed = PendingEvaluation("p1", b'{"id": "p1"}', ("f1",), "a", T0)
    store.apply([Enqueue([msg("p1")], fresh=True), Owe([owed])])
    assert store.publication_progress("p1") == (True, 1)
    store.ack("s1", [m.receipt for m in lease(store)])  # acknowledged deliveries still count
    store.apply([Enqueue([msg("p1", "s2")]), Discharge(["p1"])])
    assert store.publication_progress("p1") == (False, 2)
    assert store.publication_progress("unknown") == (False, 0)


def test_removing_a_subscriber_removes_everything_it_owned(store: Store) -> None:
    subscriber(store)
    store.add_subscription(Subscription("x1", "s1", "topic", topics=("a",)))
    store.enqueue([msg("p1"), msg("p2")])
    store.expire(T0 + 10, retention_s=5)
    assert store.remove_subscriber("s1") is True
    assert store.get_subscription("x1") is None and store.dead_letters("s1") == []
    assert store.depth("s1", T0) == store.depth("nobody", T0)
    assert store.remove_subscriber("s1") is False


def test_concurrent_enqueues_lose_nothing_and_duplicate_nothing(store: Store) -> None:
    subscriber(store)

    def worker(start: int) -> None:
        for i in range(start, start + 200, 10):
            store.enqueue([msg(f"p{j}") for j in range(i, i + 10)] + [msg("shared")])

    threads = [threading.Thread(target=worker, args=(k * 100,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.depth("s1", T0).ready == len({f"p{j}" for j in range(500)}) + 1


def test_snapshot_reads_subscriptions_and_version_together(store: Store) -> None:
    subscriber(store)
    store.add_subscription(Subscription("x1", "s1", "topic", topics=("a/#",)))
    version, subs = store.snapshot()
    assert version == store.subscriptions_version() and [s.id for s in subs] == ["x1"]


def test_iterating_subscriptions_streams_them_all_page_by_page_in_id_order(
    store: Store,
) -> None:
    subscriber(store)
    for i in (5, 1, 4, 2, 3, 6, 0):
        store.add_subscription(Subscription(f"x{i}", "s1", "topic", topics=(f"t/{i}",)))
    store.remove_subscription("x4")
    store.add_subscription(Subscription("x4", "s1", "topic", topics=("again",)))
    store.remove_subscription("x6")
    streamed = store.iter_subscriptions(page=2)
    first = next(streamed)
    store.add_subscription(Subscription("x7", "s1", "topic", topics=("late",)))
    rest = list(streamed)
    assert [s.id for s in [first, *rest]] == [f"x{i}" for i in range(8) if i != 6]
    assert [s.topics for s in rest if s.id == "x4"] == [("again",)]
    assert [s.id for s in store.iter_subscriptions(page=3)] == [
        s.id for s in store.all_subscriptions()
    ]


def test_a_stale_and_a_fresh_receipt_in_one_call_ack_only_the_fresh(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg("p1")])
    stale = lease(store)[0].receipt
    fresh = lease(store, now=T0 + 31)[0].receipt
    assert store.ack("s1", [stale, fresh]).acked == [fresh]


def test_fresh_messages_go_in_in_bulk_and_are_still_remembered(store: Store) -> None:
    subscriber(store)
    assert store.enqueue([msg("p1"), msg("p2")], fresh=True) == 2
    assert store.enqueue([msg("p1")]) == 0 and store.depth("s1", T0).ready == 2


def test_a_failing_operation_in_a_batch_leaves_nothing_and_the_others_commit(
    store: Store,
) -> None:
    subscriber(store)
    # "half" goes in, then a row without an owner breaks the statement (NOT NULL)
    nobody = NewMessage(None, "p0", "p0", ("x",), b"{}", T0)  # type: ignore[arg-type]
    results = store.apply([Enqueue([msg("half"), nobody], fresh=True), Enqueue([msg("p1")])])
    assert isinstance(results[0], Exception) and results[1] == 1
    assert [m.publication_id for m in lease(store)] == ["p1"]
    assert store.enqueue([msg("half")]) == 1  # its dedup key was undone with it


def test_queue_operations_applied_together_answer_in_order(store: Store) -> None:
    subscriber(store)
    enqueued, leased = store.apply([Enqueue([msg("p1"), msg("p2")]), Lease("s1", 1, 30, 5, T0)])
    assert enqueued == 2 and [m.publication_id for m in leased] == ["p1"]
    [acked] = store.apply([Ack("s1", [leased[0].receipt])])
    assert acked.acked == [leased[0].receipt]


def test_a_nack_with_a_stale_receipt_releases_nothing(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg("p1")])
    stale = lease(store)[0].receipt
    lease(store, now=T0 + 31)
    assert store.nack("s1", [stale], T0 + 32).unknown == [stale]
    assert store.depth("s1", T0 + 32) == QueueDepth(ready=0, leased=1, dead=0)


def test_after_the_retention_a_key_may_be_enqueued_again(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg("p1")])
    assert store.expire(T0 + 10, retention_s=5) == 1
    assert store.enqueue([msg("p1", at=T0 + 10)]) == 1


def test_expire_leaves_messages_younger_than_the_retention(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg("old"), msg("young", at=T0 + 8)])
    assert store.expire(T0 + 10, retention_s=5) == 1
    assert [m.publication_id for m in lease(store, now=T0 + 10)] == ["young"]


def test_removing_a_subscriber_with_subscriptions_bumps_the_version(store: Store) -> None:
    subscriber(store)
    store.add_subscription(Subscription("x1", "s1", "topic", topics=("a",)))
    before = store.subscriptions_version()
    store.remove_subscriber("s1")
    assert store.subscriptions_version() == before + 1 and list(store.all_subscriptions()) == []


def test_redrive_of_no_ids_moves_nothing(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg("p1")])
    store.expire(T0 + 10, retention_s=5)
    assert store.redrive("s1", [], T0 + 11) == 0 and store.depth("s1", T0 + 11).dead == 1


def test_each_subscriber_leases_only_from_its_own_queue(store: Store) -> None:
    subscriber(store, "s1"), subscriber(store, "s2")
    store.enqueue([msg("p1", owner="s1"), msg("p1", owner="s2"), msg("p2", owner="s2")])
    assert [m.publication_id for m in lease(store, owner="s2")] == ["p1", "p2"]
    assert [m.subscriber_id for m in lease(store, owner="s1")] == ["s1"]


def test_bodies_come_back_as_the_json_values_enqueued(store: Store) -> None:
    subscriber(store)
    body = {"text": "grüße ✓", "n": [1, 2.5, None, True], "nested": {"k": ""}}
    store.enqueue([NewMessage("s1", "p1", "p1", ("a", "b"), encode_body(body), T0)])
    (got,) = lease(store)
    assert (got.body, got.subscription_ids, got.enqueued_at) == (body, ("a", "b"), T0)
    assert got.raw == encode_body(body)  # the stored bytes, as they were encoded


async def test_group_committed_leases_hand_out_each_message_once(store: Store) -> None:
    subscriber(store)
    committer = Committer(store.apply)
    await committer.submit(Enqueue([msg(f"p{i}") for i in range(300)]))
    seen: list[str] = []

    async def worker() -> None:
        while batch := await committer.submit(Lease("s1", 7, 30.0, 5, T0)):
            seen.extend(m.publication_id for m in batch)
            acked = await committer.submit(Ack("s1", [m.receipt for m in batch]))
            assert acked.unknown == []

    await asyncio.gather(*(worker() for _ in range(4)))
    assert sorted(seen) == sorted(f"p{i}" for i in range(300))
    assert store.depth("s1", T0) == QueueDepth()
    assert committer.commits < 300 / 7 * 2  # the workers' leases and acks shared commits


async def test_group_committed_enqueues_lose_and_duplicate_nothing(store: Store) -> None:
    subscriber(store)
    committer = Committer(store.apply)

    async def worker(k: int) -> list[int]:
        keys = [[f"p{k * 50 + j}" for j in range(i, i + 10)] for i in range(0, 100, 10)]
        return [await committer.submit(Enqueue([msg(key) for key in ks])) for ks in keys]

    added = await asyncio.gather(*(worker(k) for k in range(4)))
    assert sum(map(sum, added)) == 250 == store.depth("s1", T0).ready


def test_a_key_repeated_within_one_batch_is_enqueued_once_at_its_first_place(
    store: Store,
) -> None:
    subscriber(store)
    assert store.enqueue([msg("p2"), msg("p1"), msg("p2", at=T0 + 1), msg("p3")]) == 3
    got = lease(store, now=T0 + 1)
    assert [(m.publication_id, m.enqueued_at) for m in got] == [("p2", T0), ("p1", T0), ("p3", T0)]


def test_queue_totals_count_every_state_and_name_the_oldest_message(store: Store) -> None:
    subscriber(store), subscriber(store, "s2")
    store.enqueue([msg("p1", at=T0 - 5), msg("p2"), msg("q1", owner="s2", at=T0 - 9)])
    assert store.queue_totals(T0) == (QueueDepth(3, 0, 0), T0 - 9)
    lease(store, n=1)
    assert store.queue_totals(T0)[0] == QueueDepth(2, 1, 0)


def test_an_empty_store_has_no_oldest_message(store: Store) -> None:
    assert store.queue_totals(T0) == (QueueDepth(0, 0, 0), None)


def test_the_deepest_queues_come_first_and_no_more_than_asked(store: Store) -> None:
    for sid, n in (("a", 1), ("b", 3), ("c", 2)):
        subscriber(store, sid)
        store.enqueue([msg(f"{sid}{i}", owner=sid, at=T0 - i) for i in range(n)])
    lease(store, n=1, owner="b")
    deepest = store.deepest_queues(T0, 2)
    assert [(q.subscriber_id, q.ready, q.leased) for q in deepest] == [("b", 2, 1), ("c", 2, 0)]
    assert deepest[0].oldest_enqueued_at == T0 - 2


def test_a_subscriber_is_seen_when_made_and_later_times_win(store: Store) -> None:
    subscriber(store)
    store.touch({"s1": T0 + 10})
    store.touch({"s1": T0 + 5})  # an older report from a slower broker changes nothing
    [record] = store.subscribers_page("", 10)
    assert (record.id, record.created_at, record.last_seen) == ("s1", T0, T0 + 10)
    assert record.ephemeral is False


def test_subscribers_are_listed_page_by_page_in_id_order(store: Store) -> None:
    for sid in ("c", "a", "b"):
        subscriber(store, sid)
    first = store.subscribers_page("", 2)
    rest = store.subscribers_page(first[-1].id, 2)
    assert [r.id for r in first + rest] == ["a", "b", "c"]


def test_idle_and_forsaken_ephemeral_subscribers_are_found(store: Store) -> None:
    store.add_subscriber(Subscriber("old", "h", T0))
    store.add_subscriber(Subscriber("busy", "h", T0))
    store.add_subscriber(Subscriber("gone", "h", T0 + 50), ephemeral=True)
    store.touch({"busy": T0 + 100})
    assert store.idle_subscribers(T0 + 60, 0.0) == ["gone", "old"]
    assert store.idle_subscribers(0.0, T0 + 60) == ["gone"]
    assert store.idle_subscribers(0.0, 0.0) == []


def test_a_removed_subscriber_leaves_no_presence_behind(store: Store) -> None:
    store.add_subscriber(Subscriber("e", "h", T0), ephemeral=True)
    store.remove_subscriber("e")
    assert store.subscribers_page("", 10) == []
    assert store.idle_subscribers(T0 + 1, T0 + 1) == []


def test_a_report_about_a_deleted_subscriber_brings_nothing_back(store: Store) -> None:
    store.add_subscriber(Subscriber("e", "h", T0), ephemeral=True)
    store.remove_subscriber("e")
    store.touch({"e": T0 + 5})  # a broker that saw it just before the deletion
    assert store.idle_subscribers(T0 + 10, T0 + 10) == []


def bodies(store: Store) -> int:
    """The bodies the store holds. In the log layout, the bodies the queues still refer to
    (a body's bytes go with their segment: tests/store/log), and those of dead letters."""
    with sql_of(store).db.read() as cur:
        cur.execute("SELECT COUNT(*) FROM bodies")
        rows = int(cur.fetchone()[0])
    for each in logs_of(store):  # (each partition keeps its own copy of a body)
        rows += len({body for _, c in each.queues.log.queues() for _, body, _ in c.entries()})
    return rows


def homes(store: Store, *subscriber_ids: str) -> int:
    """How many logs these subscribers' queues are in: their partitions' (one elsewhere)."""
    if isinstance(store, PartitionedLogStore):
        return len({partition_of(s, store.partitions) for s in subscriber_ids})
    return 1


def test_a_fanned_out_body_is_stored_once_and_goes_with_its_last_delivery(
    store: Store,
) -> None:
    for sid in ("s1", "s2", "s3"):
        subscriber(store, sid)
    body = encode_body({"data": "x" * 150})  # one object shared by the deliveries
    store.enqueue([NewMessage(s, "p1", "p1", ("x",), body, T0) for s in ("s1", "s2", "s3")], True)
    assert bodies(store) == homes(store, "s1", "s2", "s3")  # once (in each partition)
    for sid in ("s1", "s2"):
        store.ack(sid, [m.receipt for m in lease(store, owner=sid)])
    assert bodies(store) == 1  # s3 still has it
    store.ack("s3", [m.receipt for m in lease(store, owner="s3")])
    assert bodies(store) == 0


def test_dead_letters_keep_their_body_until_redriven_and_acknowledged(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg("p1")], fresh=True)
    store.expire(T0 + 10, retention_s=5)
    assert bodies(store) == 1 and store.dead_letters("s1")[0].body == {"id": "p1"}
    store.redrive("s1", None, T0 + 11)
    store.ack("s1", [m.receipt for m in lease(store, now=T0 + 11)])
    assert bodies(store) == 0


def test_removing_a_subscriber_drops_the_bodies_only_it_referred_to(store: Store) -> None:
    subscriber(store, "s1"), subscriber(store, "s2")
    store.enqueue([msg("shared", owner="s1"), msg("shared", owner="s2")], fresh=True)
    store.enqueue([msg("own", owner="s1")], fresh=True)
    store.expire(T0 + 10, retention_s=5)  # "own" and "shared" of s1 become dead letters
    store.remove_subscriber("s1")
    assert bodies(store) == 1
    assert [m.body for m in lease(store, owner="s2", now=T0 + 11)] == []  # expired too
    store.remove_subscriber("s2")
    assert bodies(store) == 0


def test_a_checked_enqueue_stores_its_own_body_beside_a_fresh_one(store: Store) -> None:
    subscriber(store, "s1"), subscriber(store, "s2")
    store.enqueue([msg("p1", owner="s1")], fresh=True)
    store.enqueue([msg("p1", owner="s2"), msg("p1", owner="s1")])  # s1's is a repeat
    assert bodies(store) == 2
    for sid in ("s1", "s2"):
        store.ack(sid, [m.receipt for m in lease(store, owner=sid)])
    assert bodies(store) == 0


def test_a_fan_out_puts_one_row_per_subscriber_with_its_subscriptions_and_one_body(
    store: Store,
) -> None:
    for sid in ("s1", "s2"):
        subscriber(store, sid)
    body = encode_body({"id": "p1", "data": "x"})
    fanout = Fanout("p1", "p1", body, T0, {"s1": ["a", "b"], "s2": ["c"]})
    [added] = store.apply([Enqueue([], True, [fanout])])
    assert added == 2 and bodies(store) == homes(store, "s1", "s2")
    [one] = lease(store, owner="s1")
    [two] = lease(store, owner="s2")
    assert (one.subscription_ids, two.subscription_ids) == (("a", "b"), ("c",))
    assert one.raw == two.raw == body and one.publication_id == "p1"
    # its keys are remembered: a checked enqueue of the same publication adds nothing
    assert store.enqueue([msg("p1", owner="s1"), msg("p1", owner="s2")]) == 0


def test_fan_outs_and_messages_enqueued_together_all_arrive_the_fan_outs_in_order(
    store: Store,
) -> None:
    subscriber(store)
    fanouts = [Fanout(f"f{i}", f"f{i}", encode_body(i), T0, {"s1": ["x"]}) for i in range(3)]
    assert store.apply([Enqueue([msg("m0")], True, fanouts)]) == [4]
    leased = [m.publication_id for m in lease(store)]
    assert sorted(leased) == ["f0", "f1", "f2", "m0"]
    assert [p for p in leased if p.startswith("f")] == ["f0", "f1", "f2"]


def test_a_fresh_enqueue_remembers_every_recipient_of_a_publication_however_ordered(
    store: Store,
) -> None:
    subscriber(store), subscriber(store, "s2")
    # one publication's deliveries not side by side (as rows sorted by subscriber come)
    store.enqueue([msg("p1"), msg("p2"), msg("p1", "s2")], fresh=True)
    assert store.enqueue([msg("p1"), msg("p1", "s2"), msg("p2")]) == 0  # replays: repeats
    assert [m.publication_id for m in lease(store)] == ["p1", "p2"]
    assert [m.publication_id for m in lease(store, owner="s2")] == ["p1"]


def test_apply_now_answers_as_apply_would_or_runs_nothing(store: Store) -> None:
    subscriber(store)
    answered = store.apply_now([Enqueue([msg("p1"), msg("p2")]), Lease("s1", 1, 30, 5, T0)])
    if answered is None:  # a backend that never runs at once (a server's): nothing ran
        assert store.depth("s1", T0) == QueueDepth(0, 0, 0)
        return
    enqueued, leased = answered
    assert enqueued == 2 and [m.publication_id for m in leased] == ["p1"]
    assert store.depth("s1", T0) == QueueDepth(1, 1, 0)


def test_may_lease_is_false_only_when_a_lease_would_find_nothing(store: Store) -> None:
    subscriber(store)

    def check(now: float) -> None:
        if not store.may_lease("s1", now):
            assert store.apply([Lease("s1", 10, 0.0, 5, now)]) == [[]]  # visibility 0: no trace

    check(T0)
    store.enqueue([msg("p1"), msg("p2")])
    check(T0)
    assert len(lease(store, now=T0)) == 2
    check(T0)  # everything leased
    check(T0 + 31)  # the leases ran out
    again = [m.receipt for m in lease(store, now=T0 + 31)]
    store.nack("s1", again[:1], T0 + 31, delay_s=5)
    check(T0 + 32)  # one waits out its delay
    check(T0 + 36)  # and is ready again
    store.ack("s1", again)
    check(T0 + 100)
