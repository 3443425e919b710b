"""``stoppable``: an ``async with`` block that another task may stop with an error.

Stage: none: the model seam (the embedded server's watcher, a misconfigured endpoint).

A fault found outside the block's own task (the embedded server died, every call to an endpoint
fails alike) can only be counted there; the command must stop. ``stop(error)`` cancels the
block's task, and the block ends by raising ``error`` instead of the ``CancelledError``, the task
uncancelled, so that an enclosing ``async with`` or ``asyncio.timeout`` reads it as an error and
not as its own cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class Stop:
    """Called with an error from another task: the first one stops the block."""

    def __init__(self) -> None:
        self.task = asyncio.current_task()
        self.error: BaseException | None = None

    def __call__(self, error: BaseException) -> None:
        if self.error is None and self.task is not None and not self.task.done():
            self.error = error
            self.task.cancel()


@contextlib.asynccontextmanager
async def stoppable() -> AsyncIterator[Stop]:
    stop = Stop()
    try:
        yield stop
    except BaseException:
        if stop.error is None:
            raise
    if stop.error is not None:
        stop.task.uncancel()
        raise stop.error
