"""Ids sort by time; tokens are secret and stored only as hashes."""

from __future__ import annotations

import time

from tidings.ids import hash_token, id_time, new_id, new_token


def test_ids_made_in_one_process_strictly_increase() -> None:
    ids = [new_id() for _ in range(10_000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_an_id_carries_its_creation_time() -> None:
    before = time.time()
    assert abs(id_time(new_id()) - before) < 5


def test_tokens_are_distinct_and_their_hashes_do_not_reveal_them() -> None:
    a, b = new_token(), new_token()
    assert a != b and len(a) >= 40
    assert hash_token(a) != a and hash_token(a) == hash_token(a)
