"""The messages between the elastic operators, as msgspec structs (MessagePack on the wire).

Every message is an array `[tag, field, ...]` (msgspec's `array_like` with the class name
as tag), so a frame is small and decodes into one of the classes below in one call. The
format is documented in docs/elastic.md; a change to a struct is a change to the protocol.

Direction and meaning (AP access point, M matcher, EP exit point):

- `Publish` AP -> every M of the view: one publication, numbered per access point (`seq`),
  tagged with the matcher view it was sent under; `body` is the publication's JSON, encoded
  once at the access point.
- `Subscribe` / `Unsubscribe` AP -> the one M the selector names.
- `StartScale` AP -> old and new Ms: a matcher scale begins; the new membership.
- `AddMatcherState` M -> M: a slice of the sender's subscriptions for the new view, in
  chunks of at most `STATE_CHUNK` records (`last` on the final one), so that no receiver's
  loop stops matching for long to decode one.
- `ChangeMatcherOnExitPoint` AP -> old Ms, forwarded M -> every EP: the marker after which an
  access point's publications belong to the new matcher view.
- `ChangeMatcher` AP -> old and new Ms: swap to the new state.
- `ExitPointScaling` AP -> every M, forwarded M -> old and new EPs: the consistent cut of an
  exit point scale (Chandy-Lamport marker); `cut` is the access point's last sequence number
  before the marker. After it, until the coordinator decides, the matchers split each of that
  access point's publications by both exit point views (`Partial.ev` says which).
- `Partials` M -> EP: each publication's partial result for this exit point's subscribers.
- `Committed` EP -> AP: these publications' deliveries are in the store.

Recovery after a lost operator (a scale of kind `recover`) reuses `StartScale` and
`AddMatcherState` (an access point sends, as `sender`, the lost matchers' share of the
subscriptions it routed), then the access points send every unanswered publication again
under the new matcher view (`Partial.mv` and `Committed.epoch` tell the old attempt's from
the new one's).
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

from tidings.model import Op, Predicate, Scalar

WirePredicate: TypeAlias = tuple[str, str, Any]  # key, operator, value (a list for `in`)


class _Message(msgspec.Struct, array_like=True, tag=True, frozen=True):
    """A message between operators (tagged with its class name)."""


class Publish(_Message, frozen=True):
    ap: str
    seq: int
    view: int  # the matcher view it was broadcast under
    topics: list[str]
    attributes: dict[str, Scalar]
    body: bytes  # the publication's JSON


class SubscriptionRecord(msgspec.Struct, array_like=True, frozen=True):
    """A topic or content subscription as the matchers hold it."""

    id: str
    subscriber: str
    topics: list[str] = []
    predicates: list[WirePredicate] = []


class Subscribe(_Message, frozen=True):
    ap: str
    view: int
    record: SubscriptionRecord


class Unsubscribe(_Message, frozen=True):
    ap: str
    view: int
    id: str


class StartScale(_Message, frozen=True):
    ap: str
    scale: int
    view: int  # the new view's number
    old: list[str]
    new: list[str]


class AddMatcherState(_Message, frozen=True):
    scale: int
    view: int
    sender: str
    records: list[SubscriptionRecord]
    last: bool = True  # the sender's final chunk for this scale


class ChangeMatcherOnExitPoint(_Message, frozen=True):
    ap: str
    scale: int
    view: int
    matcher: str = ""  # set by the matcher that forwards it
    last_seq: int = -1  # the access point's last publication of the old view


class ChangeMatcher(_Message, frozen=True):
    ap: str
    scale: int
    view: int


class ExitPointScaling(_Message, frozen=True):
    ap: str
    scale: int
    view: int  # the new exit point view's number
    members: list[str]
    old: list[str]
    cut: int  # the access point's last sequence number before the marker
    matcher: str = ""  # set by the matcher that forwards it
    old_view: int = 0  # the exit point view before this scale


class Partial(msgspec.Struct, array_like=True, frozen=True):
    ap: str
    seq: int
    of: int  # how many matchers answer for this publication
    matches: dict[str, list[str]]  # subscriber -> subscription ids, this exit point's share
    body: bytes | None = None  # with matches only
    ev: int = 0  # the exit point view this share was split by
    mv: int = 0  # the matcher view the publication was matched under


class Partials(_Message, frozen=True):
    matcher: str
    items: list[Partial]


class Committed(_Message, frozen=True):
    ep: str
    seqs: list[int]
    deliveries: list[int]
    epoch: int = 0  # the exit point's last recovery (commits of an earlier one are stale)


class Stop(_Message, frozen=True):
    """Asks an operator's loop to end (sent by its own process on shutdown)."""


Message: TypeAlias = (
    Publish
    | Subscribe
    | Unsubscribe
    | StartScale
    | AddMatcherState
    | ChangeMatcherOnExitPoint
    | ChangeMatcher
    | ExitPointScaling
    | Partials
    | Committed
    | Stop
)

STATE_CHUNK = 4096  # records per AddMatcherState: about 130 kB, 3-5 ms to decode


def state_messages(
    scale: int, view: int, sender: str, records: list[SubscriptionRecord]
) -> list[AddMatcherState]:
    """A share of state as chunks, in order; at least one (an empty share is news too).
    Whole, 34,000 records took one matcher's loop 25-120 ms to decode (with the collector's
    pass it set off), a pause of every notification it was matching meanwhile."""
    starts = range(0, max(len(records), 1), STATE_CHUNK)
    return [
        AddMatcherState(
            scale, view, sender, records[i : i + STATE_CHUNK], last=i + STATE_CHUNK >= len(records)
        )
        for i in starts
    ]


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Message)


def encode(message: Message) -> bytes:
    return _encoder.encode(message)


def decode(frame: bytes) -> Message:
    message: Message = _decoder.decode(frame)
    return message


def wire_predicates(predicates: tuple[Predicate, ...]) -> list[WirePredicate]:
    return [
        (p.key, p.op.value, list(p.value) if isinstance(p.value, tuple) else p.value)
        for p in predicates
    ]


def model_predicates(predicates: list[WirePredicate]) -> tuple[Predicate, ...]:
    return tuple(
        Predicate(key, Op(op), tuple(value) if isinstance(value, list) else value)
        for key, op, value in predicates
    )
