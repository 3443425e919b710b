"""One in-flight limit for the endpoint, shared by every Ray worker and the driver.

``Keeper`` is a Ray actor (``mas.ray_executor`` starts it) holding the run's one limit: the
adaptive one (``mas.models.limiter.AdaptiveLimit``) or a fixed ``--concurrency``. Each process
reaches it through a ``Shared`` handle, which ``mas.models.limiter.Limited`` takes like a limit
of its own: a call asks the keeper for a slot before it goes out, and gives it back (with its
latency, or its 429) when it returns, so the limit sees every call at the endpoint, from
whichever process, as it would in one process.

Why one keeper, and not a limit per worker: measured (``bench/distributed.py --slots 32
--refuse``), independent adaptive limits on an endpoint that refuses beyond 32 calls each
took slots the others' calls needed: 3% of the requests were refused (0.5% in one process)
and the step took 2.7 times as long. The price is an actor call per model call (and a
message when it returns); the keeper counts each worker's slots, so those of a worker that
died go back (``forget``).

This module imports no Ray: the handle only calls the actor it is given.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from mas.models.limiter import AdaptiveLimit


class Fixed:
    """A fixed limit with ``AdaptiveLimit``'s interface: at most ``n`` calls in flight."""

    def __init__(self, n: int):
        self.slots, self.in_flight = asyncio.Semaphore(n), 0

    async def acquire(self) -> None:
        await self.slots.acquire()
        self.in_flight += 1

    def release(self, latency: float | None, *, refused: bool = False) -> None:
        self.in_flight -= 1
        self.slots.release()

    def rate_limited(self) -> None:
        pass


class Keeper:
    """The limit (a Ray actor): ``concurrency`` calls at most, or adapted when None. Every
    method is a coroutine, so all of them run on the actor's one event loop."""

    def __init__(self, concurrency: int | None):
        self.limit = AdaptiveLimit() if concurrency is None else Fixed(concurrency)
        self.held: Counter[str] = Counter()
        """Slots held, by the process holding them."""

    async def acquire(self, holder: str) -> None:
        await self.limit.acquire()
        self.held[holder] += 1

    async def release(self, holder: str, latency: float | None, refused: bool) -> None:
        if self.held[holder] > 0:  # not a slot of a holder already forgotten
            self.held[holder] -= 1
            self.limit.release(latency, refused=refused)

    async def rate_limited(self) -> None:
        self.limit.rate_limited()

    async def forget(self, holder: str) -> None:
        """``holder`` died: the slots it held go back."""
        for _ in range(self.held.pop(holder, 0)):
            self.limit.release(None)

    async def state(self) -> dict:
        """The calls in flight and the limit now (for tests and benchmarks)."""
        allowed = getattr(self.limit, "allowed", None)
        return {"in_flight": self.limit.in_flight, "allowed": allowed, "held": dict(self.held)}


class Shared:
    """A process's handle on the ``Keeper`` actor, in place of a limit of its own."""

    def __init__(self, keeper: Any, holder: str):
        self.keeper, self.holder = keeper, holder

    async def acquire(self) -> None:
        granted = self.keeper.acquire.remote(self.holder)
        try:
            await granted
        except asyncio.CancelledError:  # the slot may come all the same: give it back then
            asyncio.ensure_future(self._give_back(granted))
            raise

    async def _give_back(self, granted) -> None:
        await granted
        self.release(None)

    def release(self, latency: float | None, *, refused: bool = False) -> None:
        self.keeper.release.remote(self.holder, latency, refused)

    def rate_limited(self) -> None:
        self.keeper.rate_limited.remote()
