"""Ending one of the deployment's background tasks: cancelled, awaited, and what it raised
logged rather than lost or raised into the caller's shutdown."""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("tidings.elastic")


async def cancelled(task: asyncio.Task[None] | None, what: str) -> None:
    """Cancel `task` (None: nothing to end) and wait for its end; an error it ended with is
    logged with `what` it was."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    except Exception:
        log.warning("elastic: %s ended with an error", what, exc_info=True)
