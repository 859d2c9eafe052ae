"""What the coordinator keeps in ZooKeeper, as JSON (msgspec structs): the configuration
(`ClusterConfig`: the views of matchers and exit points, the access points), each running
operator's membership record (`Member`), and the scale in progress or the last one
(`ScaleState`: its kind and phase). The layout is in `coordinator`'s docstring."""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

Role: TypeAlias = Literal["access_point", "matcher", "exit_point", "scaler"]
# recover: the views without lost operators, and every unanswered publication sent again;
# access_points: an access point joins or leaves (or a lost one is removed), start -> end
ScaleKind: TypeAlias = Literal["matchers", "exit_points", "recover", "access_points"]
# start: buffering and state transfer; change: the new view is adopted; release: (exit
# points) the old exit points have drained, the new ones deliver; resume: (recover) the access
# points send again what was not answered; end: done; aborted: rolled back; failed: a member
# was lost (or stuck) after `change`, past the point of return: a recovery follows (see docs)
Phase: TypeAlias = Literal["start", "change", "release", "resume", "end", "aborted", "failed"]
IDLE: tuple[Phase, ...] = ("end", "aborted", "failed")


class View(msgspec.Struct, frozen=True):
    view: int
    members: list[str]


class ClusterConfig(msgspec.Struct, frozen=True):
    matchers: View
    exit_points: View
    access_points: list[str]


class ScaleState(msgspec.Struct, frozen=True):
    id: int
    kind: ScaleKind
    phase: Phase
    view: int  # the new view's number
    old: list[str]
    new: list[str]
    reason: str = ""  # why it was aborted
    # recover only: the lost operators, the new exit point view, and (from `change` on) each
    # access point's [first, last] publication sent before it paused, to be sent again
    lost: list[str] = []
    exit_points: list[str] = []
    ep_view: int = 0
    since: dict[str, list[int]] = {}

    @property
    def idle(self) -> bool:
        return self.phase in IDLE


class Member(msgspec.Struct, frozen=True):
    role: Role
    address: str
