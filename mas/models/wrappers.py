"""Clients that wrap another client: forwarding everything (``Delegating``), a rollout's seed
and settings on every call (``Seeded``); the in-flight limit is ``mas.models.limiter.Limited``."""

from __future__ import annotations

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


class Seeded(Delegating):
    """Adds a rollout's seed and sampling settings to every call, and counts the calls."""

    def __init__(self, inner: ChatCompletionClient, *, settings: dict[str, Any], meter: Meter):
        super().__init__(inner)
        self.settings, self.meter = settings, meter

    async def create(self, messages, *, extra_create_args={}, **kwargs):
        result = await self.inner.create(messages, extra_create_args={**extra_create_args, **self.settings}, **kwargs)
        self.meter.count("rollout", result.usage)
        return result
