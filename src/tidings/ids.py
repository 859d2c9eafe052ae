"""Time-ordered identifiers and secret tokens."""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import secrets
import threading
import time

_lock = threading.Lock()
_last_ms = 0
_seq = itertools.count()
# The random part of an id only keeps processes apart, it guards nothing (tokens do): a
# generator seeded from the OS, seeded again in a forked child, costs no system call per
# id (os.urandom releases the GIL, and on a busy broker getting it back costs more).
_random = random.Random(os.urandom(16))
os.register_at_fork(after_in_child=lambda: _random.seed(os.urandom(16)))


def new_id() -> str:
    """A 24-hex-digit id that sorts by creation time: 12 digits of ms, 4 of sequence, 8 random.

    Ids made in one process are strictly increasing; across processes they are ordered by ms.
    """
    global _last_ms, _seq
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            _last_ms, _seq = ms, itertools.count()
        n = next(_seq)
        if n > 0xFFFF:  # more than 65,536 ids in one ms: borrow the next ms
            _last_ms, _seq, n = _last_ms + 1, itertools.count(1), 0
        return f"{_last_ms:012x}{n:04x}{_random.getrandbits(32):08x}"


def id_time(identifier: str) -> float:
    """The creation time (epoch seconds) encoded in an id from `new_id`."""
    return int(identifier[:12], 16) / 1000.0


def new_token() -> str:
    """A secret bearer token, shown to its subscriber once."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """What the store keeps instead of the token itself."""
    return hashlib.sha256(token.encode()).hexdigest()
