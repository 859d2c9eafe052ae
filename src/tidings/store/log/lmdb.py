"""The log on LMDB (`lmdb`, the optional extra `log`): four sub-databases keyed by
big-endian integers, so keys sort as numbers and appends go to the B+tree's right edge.

`sync=False` (the default) is LMDB's MDB_NOSYNC: a committed transaction is in the OS's page
cache and survives a crash of the process, as SQLite's `synchronous=NORMAL`; `sync=True`
flushes at every commit, surviving a power loss. One writer at a time (LMDB's own lock).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator, Sequence

import lmdb

from tidings.store.log.engine import Stored, WriteBatch

_KEY = struct.Struct(">q")
_SEGMENT = struct.Struct("<q")
MAP_SIZE = 1 << 36  # 64 GiB of address space: a limit, not a file size


def _key(n: int) -> bytes:
    return _KEY.pack(n)


class LMDBLog:
    def __init__(self, path: str, sync: bool = False, map_size: int = MAP_SIZE) -> None:
        self._path = path
        self._env = lmdb.open(path, map_size=map_size, max_dbs=4, sync=sync, metasync=sync)
        self._names = self._env.open_db(b"names")
        self._bodies = self._env.open_db(b"bodies")
        self._records = self._env.open_db(b"records")
        self._states = self._env.open_db(b"states")

    def write(self, batch: WriteBatch) -> None:
        with self._env.begin(write=True) as txn:
            for number, name in batch.names:
                txn.put(_key(number), name.encode(), db=self._names)
            if batch.bodies:
                with txn.cursor(db=self._bodies) as cur:
                    cur.putmulti([(_key(i), b) for i, b in batch.bodies], append=True)
            if batch.records:
                rows = [(_key(i), _SEGMENT.pack(s) + r) for i, s, r in batch.records]
                with txn.cursor(db=self._records) as cur:
                    cur.putmulti(rows, append=True)
            for number, state in batch.states:
                txn.put(_key(number), state, db=self._states)
            for span in batch.drops:
                self._delete(txn, self._bodies, span.first_body, span.last_body)
                self._delete(txn, self._records, span.first_record, span.last_record)
            for number in batch.gone:
                txn.delete(_key(number), db=self._names)
                txn.delete(_key(number), db=self._states)

    @staticmethod
    def _delete(txn: lmdb.Transaction, db: lmdb._Database, first: int, last: int) -> None:
        with txn.cursor(db=db) as cur:
            cur.set_range(_key(first))
            while (key := cur.key()) and _KEY.unpack(key)[0] <= last:
                cur.delete()

    def read_bodies(self, ids: Sequence[int]) -> dict[int, bytes]:
        with self._env.begin(db=self._bodies) as txn:
            found = {i: txn.get(_key(i)) for i in ids}
        return {i: bytes(b) for i, b in found.items() if b is not None}

    def recover(self) -> Stored:
        with self._env.begin() as txn:
            names = [(_KEY.unpack(k)[0], bytes(v).decode()) for k, v in txn.cursor(db=self._names)]
            states = [(_KEY.unpack(k)[0], bytes(v)) for k, v in txn.cursor(db=self._states)]
        return Stored(names, states, self._read_records())

    def _read_records(self) -> Iterator[tuple[int, int, bytes]]:
        with self._env.begin(db=self._records) as txn:
            for key, value in txn.cursor():
                (segment,) = _SEGMENT.unpack_from(value)
                yield _KEY.unpack(key)[0], segment, bytes(value[_SEGMENT.size :])

    def count_bodies(self) -> int:
        with self._env.begin() as txn:
            return int(txn.stat(self._bodies)["entries"])

    def count_records(self) -> int:
        with self._env.begin() as txn:
            return int(txn.stat(self._records)["entries"])

    def disk_bytes(self) -> int:
        """The pages in use (the data file is sparse up to its map size)."""
        return int((self._env.info()["last_pgno"] + 1) * self._env.stat()["psize"])

    def file_bytes(self) -> int:
        return os.path.getsize(os.path.join(self._path, "data.mdb"))

    def close(self) -> None:
        self._env.close()
