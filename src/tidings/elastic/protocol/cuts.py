"""Which exit point view delivers a publication: the cuts of the exit point scales an exit
point has seen, and the coordinator's decision on each.

After an access point's cut, until the scale is decided, the matchers split its
publications by both views (old and new); the exit points hold both. A publication at or
before a cut belongs to the old view; after it, to the new view once the scale is released,
to the old one if it was aborted, and to none yet while it is undecided. So whichever way
the scale ends, one view and only one delivers each publication: nothing lost, nothing
twice (docs/elastic.md, "Failures during a scale").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Final

ANY: Final = -1  # no cut known: whatever single view the partials came under
UNDECIDED: Final = None


@dataclass(frozen=True, slots=True)
class Cut:
    scale: int
    seq: int  # the access point's last publication before the marker
    old_view: int
    new_view: int


class Cuts:
    def __init__(self, keep: int = 8) -> None:
        self._by_ap: dict[str, list[Cut]] = defaultdict(list)
        self._released: dict[int, bool] = {}  # scale -> released (False: aborted)
        self._keep = keep

    def add(self, ap: str, cut: Cut) -> None:
        cuts = self._by_ap[ap]
        if all(c.scale != cut.scale for c in cuts):
            cuts.append(cut)
            del cuts[: -self._keep]

    def decide(self, scale: int, released: bool) -> None:
        self._released.setdefault(scale, released)

    def outcome(self, scale: int) -> bool | None:
        return self._released.get(scale)

    def views(self, ap: str) -> set[int]:
        """Every exit point view a cut of `ap` names (where partials of two may be)."""
        return {v for c in self._by_ap.get(ap, ()) for v in (c.old_view, c.new_view)}

    def wanted(self, ap: str, seq: int) -> int | None:
        """The exit point view whose partials deliver publication `seq` of `ap`: a view
        number, `ANY`, or `UNDECIDED` (wait)."""
        cuts = self._by_ap.get(ap)
        if not cuts:
            return ANY
        for cut in reversed(cuts):
            if cut.seq < seq:
                released = self._released.get(cut.scale)
                if released is None:
                    return UNDECIDED
                return cut.new_view if released else cut.old_view
        return cuts[0].old_view
