"""An operator's inbox loop: what runs beside it gets its turn even while frames keep
waiting in the inbox."""

from __future__ import annotations

import asyncio
import time

from tidings.elastic import wire
from tidings.elastic.channels import Inbox, Outboxes, shared_context
from tidings.elastic.operator import Operator


class Slow(Operator):
    """Handles a batch without awaiting anything; the first one takes long, and spawns a
    step that notes how many batches had been handled when it ran."""

    role = "matcher"

    def __init__(self) -> None:
        super().__init__("slow", None, "tcp://127.0.0.1:*")  # type: ignore[arg-type]
        self.batches = 0
        self.step_ran_after: int | None = None

    async def handle(self, batch: list[wire.Message]) -> None:
        self.batches += 1
        if self.batches == 1:
            self.spawn(self._step(), "step")
            time.sleep(0.3)  # (blocking: meanwhile every frame reaches the inbox)

    async def _step(self) -> None:
        self.step_ran_after = self.batches


async def test_a_spawned_step_runs_while_frames_keep_waiting_in_the_inbox() -> None:
    op = Slow()
    op.inbox = Inbox(shared_context(), op._bind)
    out = Outboxes(shared_context())
    out.know("slow", op.inbox.address)
    for seq in range(8 * 512):
        out.send("slow", wire.Committed("ep", [seq], [1]))
    out.send("slow", wire.Stop())
    await asyncio.wait_for(op._loop(), 30)
    assert op.batches >= 8  # (each batch holds at most 512 frames)
    assert op.step_ran_after == 1  # not once the inbox was empty
    out.close(linger=0)
    op.inbox.close()
