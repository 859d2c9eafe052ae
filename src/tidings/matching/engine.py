"""The Matcher: add / remove / match / match_batch over topic and content subscriptions.

Function subscriptions are not matched here: they run in the sandbox (see `tidings.sandbox`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tidings.matching.semantics import any_topic_matches, conjunction_holds
from tidings.model import Predicate, Scalar


@dataclass(frozen=True, slots=True)
class Event:
    """What matching sees of a publication."""

    topics: tuple[str, ...] = ()
    attributes: Mapping[str, Scalar] | None = None


# subscriber id -> ids of that subscriber's subscriptions that matched, sorted.
Matches = dict[str, list[str]]


class Matcher:
    """Topic and content matching. Subscriptions are keyed by id; each belongs to a subscriber."""

    def __init__(self) -> None:
        self._topic: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._content: dict[str, tuple[str, tuple[Predicate, ...]]] = {}

    def __len__(self) -> int:
        return len(self._topic) + len(self._content)

    def add_topic(self, subscription_id: str, subscriber_id: str, filters: Sequence[str]) -> None:
        self._topic[subscription_id] = (subscriber_id, tuple(filters))

    def add_content(
        self, subscription_id: str, subscriber_id: str, predicates: Sequence[Predicate]
    ) -> None:
        self._content[subscription_id] = (subscriber_id, tuple(predicates))

    def remove(self, subscription_id: str) -> bool:
        """Forget a subscription; False if it was not there."""
        found = self._topic.pop(subscription_id, None) or self._content.pop(subscription_id, None)
        return found is not None

    def match(self, event: Event) -> Matches:
        out: Matches = {}
        for sid, (owner, filters) in self._topic.items():
            if event.topics and any_topic_matches(filters, event.topics):
                out.setdefault(owner, []).append(sid)
        attributes = event.attributes or {}
        for sid, (owner, predicates) in self._content.items():
            if conjunction_holds(predicates, attributes):
                out.setdefault(owner, []).append(sid)
        return {owner: sorted(ids) for owner, ids in out.items()}

    def match_batch(self, events: Sequence[Event]) -> list[Matches]:
        return [self.match(e) for e in events]
