"""The function-subscription index, one copy for the broker and the pipeline: the active
function subscriptions by function type, and the suspended ones apart (no publication
reaches those until they are resumed)."""

from __future__ import annotations

from tidings.model import Publication, Subscription


class FunctionIndex:
    def __init__(self) -> None:
        self._active: dict[str, dict[str, Subscription]] = {}  # type -> id -> subscription
        self._suspended: dict[str, Subscription] = {}

    def __len__(self) -> int:
        return sum(map(len, self._active.values())) + len(self._suspended)

    def add(self, sub: Subscription) -> None:
        """Index (or index again) a function subscription by its status."""
        self.remove(sub.id)
        if sub.function is None:
            return
        if sub.status == "active":
            self._active.setdefault(sub.function.function_type, {})[sub.id] = sub
        else:
            self._suspended[sub.id] = sub

    def remove(self, subscription_id: str) -> None:
        self._suspended.pop(subscription_id, None)
        self.stop(subscription_id)

    def stop(self, subscription_id: str) -> None:
        """No publication reaches it from now on (it is being suspended), before its new
        status is committed and it is indexed again."""
        for subs in self._active.values():
            subs.pop(subscription_id, None)

    def candidates(self, pub: Publication) -> list[Subscription]:
        """The active subscriptions of the function types a publication names, each once, in
        the order the types are named."""
        found: dict[str, Subscription] = {}
        for function_type in pub.function_types:
            for sub in self._active.get(function_type, {}).values():
                found.setdefault(sub.id, sub)
        return list(found.values())

    def suspended(self) -> list[Subscription]:
        """The suspended subscriptions, by id."""
        return sorted(self._suspended.values(), key=lambda s: s.id)
