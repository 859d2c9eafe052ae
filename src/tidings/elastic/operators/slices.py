"""A matcher's share of the subscriptions under one view (`Slice`): the records, to
repartition at a scale, and the compiled `Matcher` index that matches them. Records come
one by one or many at once; many at once, the numeric content subscriptions go into the
index as columns (`numeric_rows`)."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable
from dataclasses import InitVar, dataclass, field

import numpy as np

from tidings.elastic.protocol import wire
from tidings.elastic.protocol.partition import Selector
from tidings.matching.bitset import EXACT, OP_CODES, IntervalRows
from tidings.matching.engine import Event, Matcher
from tidings.matching.exclusion import Exclusion
from tidings.matching.owners import Matches

BULK_FROM = 256  # records added at once from which the columns are worth making
_OP_CODES = {op.value: code for op, code in OP_CODES.items()}
_ID, _TOPICS, _PREDICATES = (operator.attrgetter(a) for a in ("id", "topics", "predicates"))


@dataclass
class Slice:
    """One view's share of the subscriptions: the records (to repartition) and the index.

    A matcher in both views of a scale keeps one index for both slices (see
    `MatcherScale._grow`): each slice's `foreign` ids are in the index but not in the slice,
    and left out of its answers until they are removed from the index."""

    selector: Selector
    records: dict[str, wire.SubscriptionRecord] = field(default_factory=dict)
    index: Matcher = field(default_factory=Matcher)
    hide: InitVar[Iterable[str]] = ()
    foreign: Exclusion = field(init=False)

    def __post_init__(self, hide: Iterable[str]) -> None:
        # left out by slot, before the answers are named: filtering named answers by id
        # cost a matcher in both views of a scale 2-3x its matching
        self.foreign = self.index.exclusion(hide)

    def match_batch(self, events: list[Event]) -> list[Matches]:
        return self.index.match_batch(events, self.foreign if self.foreign else None)

    def add(self, records: list[wire.SubscriptionRecord]) -> None:
        """Many at once (a scale's state, a recovery's): the content subscriptions made of
        comparisons with numbers as columns, in one bulk call of the index
        (`Matcher.add_content_arrays`, no Predicate object each: 34 k records in 0.10 s
        instead of 0.41 s; 0.14 s with a Python pass per record to check and make the
        columns); the rest one by one."""
        records = list({r.id: r for r in records}.values())  # an id given twice: the last
        if self.foreign:  # (replaced, as the index does)
            self.foreign.difference_update(r.id for r in records)
        if len(records) < BULK_FROM:
            self._add_each(records)
            return
        ids = [r.id for r in records]
        rows = numeric_rows(records) if self.records.keys().isdisjoint(ids) else None
        if rows is not None:  # all of them (a scale's state, usually): checked in C passes
            bulk, rest = records, []
        else:  # a mix: what is not numeric, and ids already held, one by one (replaced)
            fits = [_numeric(r) and r.id not in self.records for r in records]
            bulk = list(itertools.compress(records, fits))
            rest = [r for r, fit in zip(records, fits, strict=True) if not fit]
            rows = numeric_rows(bulk) if bulk else None
            ids = [r.id for r in bulk]
        if rows is None:
            rest = records
        else:
            try:
                self.index.add_content_arrays(ids, [r.subscriber for r in bulk], rows)
            except (TypeError, ValueError):  # an index without arrays, a value it refuses
                rest = records  # (refused before anything changed)
            else:
                self.records.update(zip(ids, bulk, strict=True))
        self._add_each(rest)

    def _add_each(self, records: list[wire.SubscriptionRecord]) -> None:
        contents = []
        for record in records:
            self.records[record.id] = record
            if record.topics:
                self.index.add_topic(record.id, record.subscriber, record.topics)
            else:
                contents.append(
                    (record.id, record.subscriber, wire.model_predicates(record.predicates))
                )
        if contents:
            self.index.add_contents(contents)

    def remove(self, subscription_id: str) -> None:
        if self.records.pop(subscription_id, None) is not None:
            self.index.remove(subscription_id)


def built(piece: Slice, records: list[wire.SubscriptionRecord]) -> None:
    """The slice with its records, and the index done with any rebuild this set off (not
    left to run beside the matching once the slice is in use)."""
    piece.add(records)
    piece.index.wait()


def _numeric(record: wire.SubscriptionRecord) -> bool:
    return (
        not record.topics
        and bool(record.id)
        and bool(record.predicates)
        and all(
            op in _OP_CODES and type(v) in (int, float) and abs(v) < EXACT
            for _, op, v in record.predicates
        )
    )


def numeric_rows(records: list[wire.SubscriptionRecord]) -> IntervalRows | None:
    """The records as columns if every one is a conjunction of comparisons with numbers
    (`_numeric`), else None. Row i: record i's predicates, a shorter row repeating its last.
    The checks and the columns are passes in C over all of them: one by one, the 34,000
    records of a scale took 50 ms, the core of a new matcher's build."""
    if not records or any(map(_TOPICS, records)) or not all(map(_ID, records)):
        return None
    lists = list(map(_PREDICATES, records))
    widths = set(map(len, lists))
    if 0 in widths:
        return None
    width = max(widths)
    if len(widths) == 1:
        flat = list(itertools.chain.from_iterable(lists))
    else:
        flat = [p for ps in lists for p in itertools.chain(ps, [ps[-1]] * (width - len(ps)))]
    keys, ops, values = zip(*flat, strict=True)
    if not set(ops) <= _OP_CODES.keys() or not set(map(type, values)) <= {int, float}:
        return None
    try:
        vals = np.array(values, np.float64)
    except OverflowError:  # an int beyond any float
        return None
    if not (np.abs(vals) < EXACT).all():
        return None
    codes = {key: code for code, key in enumerate(dict.fromkeys(keys))}
    n, shape = len(flat), (len(records), width)
    return IntervalRows(
        tuple(codes),
        np.fromiter(map(codes.__getitem__, keys), np.int32, n).reshape(shape),
        np.fromiter(map(_OP_CODES.__getitem__, ops), np.int8, n).reshape(shape),
        vals.reshape(shape),
    )
