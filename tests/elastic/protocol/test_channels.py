"""The ZeroMQ channels between operators: frames arrive in order, and an operator that was
never stopped does not hang the process when it is collected."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tidings.elastic.protocol import wire
from tidings.elastic.protocol.channels import Inbox, Outboxes, shared_context


async def test_frames_sent_to_a_peer_arrive_in_order_and_in_batches() -> None:
    inbox = Inbox(shared_context(), "tcp://127.0.0.1:*")
    out = Outboxes(shared_context())
    out.know("peer", inbox.address)
    for seq in range(1, 1001):
        out.send("peer", wire.Committed("ep", [seq], [1]))
    seqs: list[int] = []
    batches = 0
    while len(seqs) < 1000:
        batch = await inbox.receive()
        batches += 1
        seqs += [s for m in batch if isinstance(m, wire.Committed) for s in m.seqs]
    assert seqs == list(range(1, 1001))
    assert batches < 1000  # (more than one frame per wake-up)
    out.close(linger=0)
    inbox.close()


NEVER_STOPPED = """
    import gc
    from tidings.elastic.operators.operator import Operator

    op = Operator("op", None, "tcp://127.0.0.1:*")  # (no coordinator: never started)
    op.out.know("gone", "tcp://127.0.0.1:9")  # nobody listens: the frame stays queued
    op.out.send_frame("gone", b"frame")
    op.itself = op  # in a cycle, as a running operator is (its tasks): collected at once
    del op
    gc.collect()
    print("collected")
"""


def test_an_operator_collected_without_being_stopped_does_not_hang_the_process() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(NEVER_STOPPED)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.stdout.strip() == "collected", done.stderr
