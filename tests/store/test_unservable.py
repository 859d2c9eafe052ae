"""A message that cannot be served is dead-lettered alone, on every backend; malformed
receipts and ids are nobody's, never an error."""

from __future__ import annotations

from tests.store.conftest import logs_of, sql_of
from tests.store.test_behaviour import T0, lease, msg, subscriber

from tidings.store.base import Store


def corrupt(store: Store, publication_id: str) -> None:
    """Overwrite a stored body with text that is not JSON (as a bad migration might)."""
    for each in logs_of(store):  # a log body is its publication id, then JSON
        with each.db.tx() as cur:
            cur.execute(
                each.db.q("UPDATE log_bodies SET body = ? WHERE body = ?"),
                (
                    f"{publication_id}\n{{not json".encode(),
                    f'{publication_id}\n{{"id":"{publication_id}"}}'.encode(),
                ),
            )
        each.queues.reload()  # read from disk, not the bodies it wrote (a restart)
    if not logs_of(store):
        with sql_of(store).db.tx() as cur:
            cur.execute(
                "UPDATE bodies SET body = '{not json' WHERE key IN "
                f"(SELECT body_key FROM messages WHERE publication_id = '{publication_id}')"
            )


def test_an_undecodable_message_is_dead_lettered_alone_and_the_others_are_leased(
    store: Store,
) -> None:
    subscriber(store)
    store.enqueue([msg("p1"), msg("bad"), msg("p3")])
    corrupt(store, "bad")
    assert [m.publication_id for m in lease(store)] == ["p1", "p3"]
    [letter] = store.dead_letters("s1")
    assert (letter.publication_id, letter.body) == ("bad", None)
    assert letter.reason.startswith("undecodable")


def test_reject_dead_letters_one_message_by_its_current_receipt(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg("p1"), msg("p2")])
    first, second = lease(store)
    assert store.reject("s1", first.receipt, "unservable: too deep", T0)
    assert not store.reject("s1", first.receipt, "again", T0)  # no longer current
    assert [d.reason for d in store.dead_letters("s1")] == ["unservable: too deep"]
    assert store.ack("s1", [second.receipt]).acked == [second.receipt]


def test_malformed_receipts_and_ids_beyond_64_bits_match_nothing(store: Store) -> None:
    subscriber(store)
    store.enqueue([msg("p1")])
    lease(store)
    bad = ["¹", "99999999999999999999.1.x", f"{2**63}.1.abc"]
    assert store.ack("s1", bad).unknown == bad
    assert store.nack("s1", bad, T0).unknown == bad
    assert store.redrive("s1", [2**63, 2**64], T0) == 0


def test_a_body_corrupted_after_one_subscriber_leased_it_is_dead_lettered_for_the_next(
    store: Store,
) -> None:
    subscriber(store, "s1")
    subscriber(store, "s2")
    store.enqueue([msg("bad", owner="s1"), msg("bad", owner="s2")])
    assert [m.publication_id for m in lease(store, owner="s1")] == ["bad"]
    corrupt(store, "bad")  # and read again, as after a restart
    assert lease(store, owner="s2") == []
    [letter] = store.dead_letters("s2")
    assert letter.reason.startswith("undecodable")
