"""Single publishes that arrive together are published as one batch (issue #30).

A publish of one publication cost the broker about as much in fixed work (checks, routing,
its enqueue's submission, counting, its event-log line written at once) as a batch of a
hundred spends on all of them: 64 publishers each sending one at a time spent 150 us of
broker CPU a message, a batch of a hundred 16 us. Publishes of one that come in the same turn
of the event loop, with the same publisher key, are gathered and published in one batch at
the next turn, each caller answered with its own publication's answer, as the committer
gathers queue operations into one commit.

What stays each caller's own: the publisher key's check of its topics (a refusal is its
alone, made before it joins), and a publication with a dedup id, which is published alone
(its claim answers it as a repeat or not, in its own batch as before). What a batch's failure
raises (the store unreachable, the disk alarm) is raised to every caller in it, as the
commit they shared would have failed for each; a batch stopped as the broker closes answers
its callers `unavailable`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from tidings.broker.publishing import PublicationInput, Published
from tidings.errors import ErrorCode, TidingsError

PublishBatch = Callable[[Sequence[PublicationInput], str | None], Awaitable[list[Published]]]
CheckTopics = Callable[[str | None, Sequence[Sequence[str]]], None]

MOST = 1024  # publications in one gathered batch; more in the same turn start another
Waiting = list[tuple[PublicationInput, "asyncio.Future[Published]"]]


class PublishCombiner:
    def __init__(self, publish_batch: PublishBatch, check: CheckTopics) -> None:
        self._publish_batch, self._check = publish_batch, check
        self._waiting: dict[str | None, Waiting] = {}
        self._due = False
        self._running: set[asyncio.Task[None]] = set()  # (held: a task is weakly referenced)
        self.batches = 0  # batches published, for the tests

    async def publish(self, item: PublicationInput, key: str | None) -> Published:
        """The publication's answer, once the batch it joined is published."""
        if item.dedup_id is not None:
            return (await self._publish_batch([item], key))[0]
        self._check(key, [item.topics])
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Published] = loop.create_future()
        waiting = self._waiting.setdefault(key, [])
        waiting.append((item, future))
        if len(waiting) >= MOST:
            self._start(key, self._waiting.pop(key))
        elif not self._due:
            self._due = True
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._due = False
        waiting, self._waiting = self._waiting, {}
        for key, group in waiting.items():
            self._start(key, group)

    def _start(self, key: str | None, group: Waiting) -> None:
        task = asyncio.get_running_loop().create_task(self._run(key, group))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, key: str | None, group: Waiting) -> None:
        self.batches += 1
        failed: BaseException | None = None
        try:
            answers = await self._publish_batch([item for item, _ in group], key)
            for (_, future), answer in zip(group, answers, strict=True):
                if not future.done():  # (its caller stopped waiting: published all the same)
                    future.set_result(answer)
        except asyncio.CancelledError:  # the broker closing: its callers hear it is away
            failed = TidingsError(ErrorCode.UNAVAILABLE, detail="the broker is closing", retry_s=1)
            raise
        except Exception as exc:
            failed = exc
        finally:  # no caller is left waiting, whatever happened
            for _, future in group:
                if not future.done():
                    future.set_exception(failed or TidingsError(ErrorCode.INTERNAL))

    async def close(self) -> None:
        """Stop the batches under way (their callers answered `unavailable`): nothing
        publishes after the broker's parts are closed."""
        running = list(self._running)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
