"""A partition's inbox: deliveries cut along the partitions, their bytes, and the
notification that tells an owner who received."""

from __future__ import annotations

import psycopg
from tests.conftest import require_service
from tests.store.conftest import PG

from tidings.store.base import Fanout, NewMessage
from tidings.store.inbox import (
    Delivered,
    decode,
    encode,
    note,
    noted,
    partition_of,
    split,
    take,
)

BODY = b'{"id":"p1"}'


def test_a_subscribers_partition_is_the_crc32_of_its_id_modulo_the_count() -> None:
    assert partition_of("123456789", 1 << 32) == 0xCBF43926  # CRC-32's check value
    assert {partition_of(f"s{i}", 3) for i in range(30)} == {0, 1, 2}


def test_a_fan_out_is_cut_along_the_partitions_of_its_owners() -> None:
    owners = {f"s{i}": (f"sub{i}",) for i in range(12)}
    shares = split([Fanout("p1", "p1", BODY, 1.0, owners)], [], 3)
    assert sorted(o for d in shares.values() for f in d.fanouts for o in f.owners) == sorted(owners)
    for p, delivered in shares.items():
        [fanout] = delivered.fanouts
        assert all(partition_of(o, 3) == p for o in fanout.owners)
        assert (fanout.publication_id, fanout.body) == ("p1", BODY)


def test_an_inbox_row_reads_back_as_it_was_written() -> None:
    delivered = Delivered(
        [Fanout("p1", "p1#t", BODY, 2.5, {"s1": ("a", "b"), "s2": ()})],
        [NewMessage("s3", "p2", "p2", ("c",), b"null", 3.0)],
    )
    again = decode(encode(delivered))
    assert again.fanouts == delivered.fanouts and again.checked == delivered.checked
    assert again.size() == 3


def test_a_notification_names_who_received_when_they_fit() -> None:
    small = Delivered([Fanout("p1", "p1", BODY, 1.0, {"s2": (), "s1": ()})])
    assert noted(note(4, small)) == (4, ("s1", "s2"))
    many = {f"subscriber-{i:06d}": () for i in range(1000)}  # past a notification's bytes
    assert noted(note(4, Delivered([Fanout("p1", "p1", BODY, 1.0, many)]))) == (4, None)
    odd = Delivered([Fanout("p1", "p1", BODY, 1.0, {"a\nb": ()})])  # a line break in an id
    assert noted(note(1, odd)) == (1, None)
    assert noted("resync") is None


def test_an_inbox_row_that_does_not_decode_is_kept_aside_and_the_others_are_taken() -> None:

    require_service("postgres")
    with psycopg.connect(PG, autocommit=True) as conn, conn.transaction(force_rollback=True):
        conn.execute("CREATE TEMP TABLE log_inbox (seq BIGINT, entries BYTEA)")
        conn.execute("CREATE TEMP TABLE log_inbox_refused (seq BIGINT, entries BYTEA, reason TEXT)")
        good = Delivered([Fanout("p1", "p1", BODY, 1.0, {"s1": ()})])
        rows = [(1, encode(good)), (2, b"\xc1 not msgpack"), (3, encode(good))]
        conn.cursor().executemany("INSERT INTO log_inbox VALUES (%s, %s)", rows)
        with conn.cursor() as cur:
            assert [d.fanouts[0].publication_id for d in take(cur)] == ["p1", "p1"]
        assert conn.execute("SELECT seq FROM log_inbox_refused").fetchall() == [(2,)]
        assert conn.execute("SELECT count(*) FROM log_inbox").fetchone() == (0,)
