"""The fair turns' own cost as waiting owners grow (issue #28: a grant scanned every waiting
owner, so thousands of free subscribers made each of the broker's turns cost milliseconds).

    python benchmarks/fairshare.py [--waiters 8] [--slots 64]

`FairShare(slots)` (sandbox/fair.py, the code turns' and the URL calls' shares) takes
`--waiters` turns for each of N owners, all asked at once, for N = 500 and 4,000; each turn
yields once. `per_grant_ratio` = the time per turn with 4,000 owners over the time per turn
with 500, same run: 1.8 now that a grant costs O(log owners) (the event loop's own cost grows
with 32,000 tasks too), 8 when a grant scanned every waiting owner (12.2 s against 0.19 s).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from common import emit, machine, versions

from tidings.sandbox.fair import FairShare


async def drain_s(owners: int, waiters: int, slots: int) -> float:
    share = FairShare(slots)

    async def one(owner: str) -> None:
        async with share.turn(owner):
            await asyncio.sleep(0)

    started = time.perf_counter()
    await asyncio.gather(*(one(f"o{i}") for i in range(owners) for _ in range(waiters)))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--waiters", type=int, default=8)
    parser.add_argument("--slots", type=int, default=64)
    args = parser.parse_args()
    emit({"bench": "fairshare", "header": True, "machine": machine(), "versions": versions(),
          "command": " ".join(sys.argv), "workload": vars(args)})  # fmt: skip
    times = {n: asyncio.run(drain_s(n, args.waiters, args.slots)) for n in (500, 4000)}
    per_grant = {n: t / (n * args.waiters) for n, t in times.items()}
    emit({"bench": "fairshare", "seconds": {str(n): round(t, 3) for n, t in times.items()},
          "per_grant_us": {str(n): round(t * 1e6, 1) for n, t in per_grant.items()},
          "per_grant_ratio": round(per_grant[4000] / per_grant[500], 2)})  # fmt: skip


if __name__ == "__main__":
    main()
