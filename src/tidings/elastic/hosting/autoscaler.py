"""The autoscaler (issue #16, part 4b): scales the matcher layer on service-level signals.

Two parts, kept apart so that the policy can be tested with recorded signals:

- `decide(policy, samples, matchers, now, last_scale_at)`: a pure function from the recent
  signal samples to the number of matchers wanted (or None: leave it);
- `Autoscaler`: a loop that samples the deployment every `interval_s`, asks `decide`, and
  runs the scale it answers.

Signals, one sample per interval: the percentile (`percentile`, 0.99) of the access point's
publish-to-commit times in that interval (the matching layers' latency as the publisher
sees it) and the access point's backlog (publications sent, not yet committed).

Hysteresis: the layer grows when, over the window, the latency percentile or the backlog
exceeds its *up* threshold; it shrinks only when every sample of a full window is under both
*down* thresholds (well under the up ones); one matcher at a time, within `min_matchers`
..`max_matchers`, and never sooner than `cooldown_s` after the last scale.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tidings.elastic.protocol.scaling import ScaleReport

log = logging.getLogger("tidings.elastic")


@dataclass(frozen=True, slots=True)
class Policy:
    up_latency_s: float = 0.200
    down_latency_s: float = 0.020
    up_backlog: int = 2_000
    down_backlog: int = 100
    window_s: float = 5.0
    cooldown_s: float = 15.0
    interval_s: float = 0.5
    percentile: float = 0.99
    min_matchers: int = 1
    max_matchers: int = 4

    def __post_init__(self) -> None:
        if not (
            self.down_latency_s < self.up_latency_s
            and self.down_backlog < self.up_backlog
            and 1 <= self.min_matchers <= self.max_matchers
            and 0 < self.interval_s <= self.window_s
        ):
            raise ValueError("autoscaler policy: down < up thresholds, 1 <= min <= max")


@dataclass(frozen=True, slots=True)
class Sample:
    at: float  # monotonic seconds
    latency_s: float  # the policy's percentile of publish-to-commit times in the interval
    backlog: int


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))] if ordered else 0.0


def _window(samples: Sequence[Sample], now: float, window_s: float) -> list[Sample]:
    return [s for s in samples if now - s.at <= window_s]


def _overloaded(policy: Policy, recent: Sequence[Sample]) -> bool:
    return any(s.latency_s > policy.up_latency_s or s.backlog > policy.up_backlog for s in recent)


def _quiet(policy: Policy, recent: Sequence[Sample], now: float) -> bool:
    covered = bool(recent) and now - recent[0].at >= policy.window_s - policy.interval_s
    return covered and all(
        s.latency_s < policy.down_latency_s and s.backlog < policy.down_backlog for s in recent
    )


def decide(
    policy: Policy,
    samples: Sequence[Sample],
    matchers: int,
    now: float,
    last_scale_at: float | None,
) -> int | None:
    """The number of matchers wanted, or None to leave the layer as it is."""
    if last_scale_at is not None and now - last_scale_at < policy.cooldown_s:
        return None
    recent = _window(samples, now, policy.window_s)
    if last_scale_at is not None:  # what was measured before the last scale says nothing now
        recent = [s for s in recent if s.at > last_scale_at]
    if _overloaded(policy, recent) and matchers < policy.max_matchers:
        return matchers + 1
    if _quiet(policy, recent, now) and matchers > policy.min_matchers:
        return matchers - 1
    return None


class Scalable(Protocol):
    """What the autoscaler drives (a `Deployment`)."""

    async def matcher_count(self) -> int: ...

    def signals(self) -> tuple[list[float], int]: ...  # new latencies, backlog

    async def scale(
        self, matchers: int | None = None, exit_points: int | None = None
    ) -> list[ScaleReport]: ...


class Autoscaler:
    """Samples `target` every `policy.interval_s` and scales its matchers as `decide` says."""

    def __init__(
        self,
        target: Scalable,
        policy: Policy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = target
        self.policy = policy or Policy()
        self.clock = clock
        self.samples: deque[Sample] = deque(maxlen=10_000)
        self.last_scale_at: float | None = None
        self.decisions: list[tuple[float, int, int, str]] = []  # (at, from, to, outcome)
        self.scaled = asyncio.Event()  # set after every scale it ran
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="autoscaler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def sample(self) -> Sample:
        latencies, backlog = self.target.signals()
        taken = Sample(self.clock(), percentile(latencies, self.policy.percentile), backlog)
        self.samples.append(taken)
        return taken

    async def step(self) -> int | None:
        """Sample once, and scale if the policy says so; the matchers wanted, or None."""
        self.sample()
        now, current = self.clock(), await self.target.matcher_count()
        wanted = decide(self.policy, self.samples, current, now, self.last_scale_at)
        if wanted is None:
            return None
        reports = await self.target.scale(matchers=wanted)
        self.last_scale_at = self.clock()
        outcome = reports[0].outcome if reports else "unchanged"
        self.decisions.append((now, current, wanted, outcome))
        log.info("autoscaler: matchers %d -> %d (%s)", current, wanted, outcome)
        self.scaled.set()
        return wanted

    async def _run(self) -> None:
        while True:
            try:
                await self.step()
            except Exception:
                log.exception("autoscaler step failed")
            await asyncio.sleep(self.policy.interval_s)  # the sampling period
