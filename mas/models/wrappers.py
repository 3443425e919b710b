"""Clients that wrap another client: forwarding everything (``Delegating``), a rollout's seed
and settings on every call (``Seeded``), counting the calls in flight (``Counted``); the clock
of a rollout's time queued for a call slot (``Queued``). The in-flight limit is
``mas.models.limiter.Limited``."""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Any

from autogen_core.models import ChatCompletionClient, CreateResult, ModelInfo

from mas.meter import Meter


class Delegating(ChatCompletionClient):
    """Forwards everything to ``inner``; subclasses change ``create``."""

    def __init__(self, inner: ChatCompletionClient):
        self.inner = inner

    async def create(self, messages, **kwargs) -> CreateResult:
        return await self.inner.create(messages, **kwargs)

    def create_stream(self, messages, **kwargs):
        return self.inner.create_stream(messages, **kwargs)

    async def close(self) -> None:
        await self.inner.close()

    def actual_usage(self):
        return self.inner.actual_usage()

    def total_usage(self):
        return self.inner.total_usage()

    def count_tokens(self, messages, **kwargs) -> int:
        return self.inner.count_tokens(messages, **kwargs)

    def remaining_tokens(self, messages, **kwargs) -> int:
        return self.inner.remaining_tokens(messages, **kwargs)

    @property
    def capabilities(self):  # type: ignore[override]
        return self.inner.model_info

    @property
    def model_info(self) -> ModelInfo:
        return self.inner.model_info


class Queued:
    """Seconds the calls of one rollout spent waiting for a free slot (overlapping waits once).

    A rollout's deadline is for the team's own work: with 12 rollouts and 4 slots, the last
    ones would otherwise time out in the queue before their first call was sent."""

    def __init__(self) -> None:
        self.waited, self._waiting, self._since = 0.0, 0, 0.0

    def enter(self) -> None:
        if not self._waiting:
            self._since = time.monotonic()
        self._waiting += 1

    def leave(self) -> None:
        self._waiting -= 1
        if not self._waiting:
            self.waited += time.monotonic() - self._since

    @property
    def seconds(self) -> float:
        return self.waited + (time.monotonic() - self._since if self._waiting else 0.0)


QUEUED: ContextVar[Queued | None] = ContextVar("mas_queued", default=None)
"""The ``Queued`` clock of the rollout whose task is running, if any (set by ``mas.team``)."""


class Counted(Delegating):
    """Counts the calls in flight through it (for a progress display)."""

    def __init__(self, inner: ChatCompletionClient):
        super().__init__(inner)
        self.in_flight = 0

    async def create(self, messages, **kwargs) -> CreateResult:
        self.in_flight += 1
        try:
            return await self.inner.create(messages, **kwargs)
        finally:
            self.in_flight -= 1


class Seeded(Delegating):
    """Adds a rollout's seed and sampling settings to every call, and counts the calls;
    ``on_call`` is told before each call goes out."""

    def __init__(self, inner: ChatCompletionClient, *, settings: dict[str, Any], meter: Meter, on_call=lambda: None):
        super().__init__(inner)
        self.settings, self.meter, self.on_call = settings, meter, on_call

    async def create(self, messages, *, extra_create_args={}, **kwargs):
        self.on_call()
        result = await self.inner.create(messages, extra_create_args={**extra_create_args, **self.settings}, **kwargs)
        self.meter.count("rollout", result.usage)
        return result
