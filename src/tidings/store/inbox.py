"""A partition's inbox (`layout=log&partitions=N`, docs/storage.md "Several brokers, each
queue with an owner"): where any broker puts the deliveries a publication makes to the
subscribers of a partition, for the partition's owner to append to its log.

A publishing transaction writes one row per partition it reaches (its publications'
deliveries there, encoded as MessagePack) and tells the owner with `pg_notify`; the owner
takes every row at the start of each of its transactions (`DELETE ... RETURNING`), so a
delivery is in exactly one place at every moment: the inbox, or the log. Rows are taken in
the order of their sequence numbers: a publisher's publications, one after the other, keep
their order (the second's row is written after the first's committed).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from tidings.store.base import Fanout, NewMessage
from tidings.store.database import Cursor

log = logging.getLogger("tidings.store")
INBOX_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS {schema}.log_inbox "
    "(seq BIGSERIAL PRIMARY KEY, entries BYTEA NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {schema}.log_inbox_refused "
    "(seq BIGINT PRIMARY KEY, entries BYTEA NOT NULL, reason TEXT NOT NULL)",
)


def partition_of(subscriber_id: str, partitions: int) -> int:
    """The partition a subscriber's queue lives in: CRC-32 of its id (zlib's, which is
    HAProxy's `crc32` converter too, so the balancer routes by it), modulo the count."""
    return zlib.crc32(subscriber_id.encode()) % partitions


def partition_schema(schema: str, partition: int) -> str:
    """The schema holding one partition's log, inbox and their sequence numbers."""
    return f"{schema}_p{partition}"


@dataclass(slots=True)
class Delivered:
    """What one partition receives from a transaction: fresh publications' fan-outs (their
    owners in this partition only), and deliveries to check against earlier ones."""

    fanouts: list[Fanout] = field(default_factory=list)
    checked: list[NewMessage] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.fanouts or self.checked)

    def size(self) -> int:
        return len(self.checked) + sum(len(f.owners) for f in self.fanouts)


def split(
    fanouts: Sequence[Fanout], checked: Sequence[NewMessage], partitions: int
) -> dict[int, Delivered]:
    """The deliveries by partition (a fan-out's owners cut along the partitions)."""
    out: dict[int, Delivered] = {}
    for f in fanouts:
        shares: dict[int, dict[str, Sequence[str]]] = {}
        for owner, ids in f.owners.items():
            shares.setdefault(partition_of(owner, partitions), {})[owner] = ids
        for p, owners in shares.items():
            share = Fanout(f.publication_id, f.dedup_key, f.body, f.enqueued_at, owners)
            out.setdefault(p, Delivered()).fanouts.append(share)
    for m in checked:
        out.setdefault(partition_of(m.subscriber_id, partitions), Delivered()).checked.append(m)
    return out


# on the wire: [fan-outs, checked], a fan-out [publication, key, body, at, {owner: [ids]}],
# a checked delivery [owner, publication, key, [ids], body, at]
_Fan = tuple[str, str, bytes, float, dict[str, list[str]]]
_Checked = tuple[str, str, str, list[str], bytes, float]
_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(tuple[list[_Fan], list[_Checked]])


def encode(delivered: Delivered) -> bytes:
    fans = [
        (f.publication_id, f.dedup_key, f.body, f.enqueued_at, _owners(f.owners))
        for f in delivered.fanouts
    ]
    checked = [
        (m.subscriber_id, m.publication_id, m.dedup_key, list(m.subscription_ids), m.body,
         m.enqueued_at)
        for m in delivered.checked
    ]  # fmt: skip
    return _ENCODER.encode((fans, checked))


def _owners(owners: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    return {owner: list(ids) for owner, ids in owners.items()}


def decode(blob: bytes) -> Delivered:
    fans, checked = _DECODER.decode(blob)
    return Delivered(
        [Fanout(p, k, b, at, {o: tuple(ids) for o, ids in owners.items()})
         for p, k, b, at, owners in fans],
        [NewMessage(o, p, k, tuple(ids), b, at) for o, p, k, ids, b, at in checked],
    )  # fmt: skip


def put(cur: Cursor, schema: str, by_partition: Mapping[int, Delivered], channel: str) -> None:
    """Write each partition's deliveries into its inbox and tell its owner, in the caller's
    transaction (the notification goes out when it commits)."""
    for p, delivered in sorted(by_partition.items()):
        if not delivered:
            continue
        inbox = f'"{partition_schema(schema, p)}".log_inbox'
        cur.execute(f"INSERT INTO {inbox} (entries) VALUES (%b)", (encode(delivered),))
        cur.execute("SELECT pg_notify(%s, %s)", (channel, note(p, delivered)))


NOTE_BYTES = 7000  # of PostgreSQL's 8,000 a notification's payload may hold


def note(p: int, delivered: Delivered) -> str:
    """A notification: the partition's number, and the subscribers who received (one a
    line) when they fit, so that the owner wakes their streams, whose leases take the inbox
    in, rather than taking it in itself first."""
    owners = {o for f in delivered.fanouts for o in f.owners}
    owners.update(m.subscriber_id for m in delivered.checked)
    text = "\n".join([str(p), *sorted(owners)])
    return text if len(text) <= NOTE_BYTES and text.count("\n") == len(owners) else str(p)


def noted(payload: str) -> tuple[int, tuple[str, ...] | None] | None:
    """A notification's partition and its subscribers (None: not told), or None if it is
    not one."""
    first, *owners = payload.split("\n")
    if not first.isdigit():
        return None
    return int(first), (tuple(owners) if owners else None)


def take(cur: Cursor) -> Iterator[Delivered]:
    """Every row of this partition's inbox (`log_inbox` on the search path), oldest first,
    deleted in the caller's transaction. A row that does not decode (a broker of another
    version wrote it) is kept aside in `log_inbox_refused`, not taken again and again."""
    cur.execute("DELETE FROM log_inbox RETURNING seq, entries")
    for seq, blob in sorted(cur.fetchall()):
        try:
            delivered = decode(bytes(blob))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.error("inbox row %d does not decode (%s): kept in log_inbox_refused", seq, exc)
            cur.execute(
                "INSERT INTO log_inbox_refused VALUES (%s, %s, %s)", (seq, bytes(blob), str(exc))
            )
            continue
        yield delivered
