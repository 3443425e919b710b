"""Clients that wrap another client: forwarding everything (``Delegating``), a rollout's seed
and settings on every call (``Seeded``), counting the calls in flight (``Counted``), each
call's reply journaled and read back on resume (``Replayed``), no call past a budget in
dollars (``Budgeted``); the clock of a rollout's time
queued for a call slot (``Queued``). The in-flight limit is ``mas.models.limiter.Limited``.

Stage: none: the model seam (every model call; ``Seeded`` and ``Queued`` wrap a rollout's).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from autogen_core.models import ChatCompletionClient, CreateResult, ModelInfo
from autogen_core.tools import Tool
from pydantic import BaseModel, ValidationError

from mas.errors import EndpointError
from mas.meter import Meter

if TYPE_CHECKING:
    from mas.cost import Price
    from mas.journal import Journal


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
"""The ``Queued`` clock of the rollout whose task is running, if any (set by ``mas.team.rollout``)."""


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


class Budgeted(Delegating):
    """Makes no call once the calls through it have cost ``budget_usd`` (None: no limit): each
    later one raises ``EndpointError``, which a learning call counts and skips."""

    def __init__(self, inner: ChatCompletionClient, *, price: Price, budget_usd: float | None):
        super().__init__(inner)
        self.price, self.budget_usd, self.spent = price, budget_usd, 0.0

    async def create(self, messages, **kwargs) -> CreateResult:
        if self.budget_usd is not None and self.spent >= self.budget_usd:
            raise EndpointError(f"budget: ${self.spent:.4f} spent of ${self.budget_usd:g}; no more calls")
        result = await self.inner.create(messages, **kwargs)
        self.spent += self.price.of(result.usage.prompt_tokens, result.usage.completion_tokens)
        return result


class Replayed(Delegating):
    """Journals the reply of each call of one rollout, and gives a resumed rollout the replies
    of the calls it had finished instead of calling the model again.

    A call is keyed by the rollout's ``key``, a digest of its request (messages, tools, output
    format, settings and seed) and how many identical requests came before it in the rollout.
    A resumed rollout sends the same requests as long as it gets the same replies, so it is
    replayed up to where it was cut, then goes on calling the model. A request that differs
    (a team whose calls depend on something else) finds no reply and is sent: never a wrong
    reply, at worst a call made again. The record is not fsynced: losing it in a crash of the
    machine only means its call is made again. A record read back is checked like a reply."""

    def __init__(self, inner: ChatCompletionClient, *, journal: Journal, key: str):
        super().__init__(inner)
        self.journal, self.key = journal, key
        self._seen: Counter[str] = Counter()

    async def create(self, messages, **kwargs) -> CreateResult:
        request = _request_digest(messages, kwargs)
        if request is None:
            return await self.inner.create(messages, **kwargs)
        self._seen[request] += 1
        key = f"{self.key}/{request}/{self._seen[request]}"
        done = self.journal.get("call", key)
        if done is not None:
            try:
                return CreateResult.model_validate(done)
            except ValidationError:
                pass  # a damaged reply: ask again
        result = await self.inner.create(messages, **kwargs)
        await self.journal.record("call", key, result.model_dump(mode="json"), sync=False)
        return result


def _request_digest(messages, kwargs: dict) -> str | None:
    """A short digest of what a call asks; None when part of it cannot be written as JSON."""
    output = kwargs.get("json_output")
    if isinstance(output, type) and issubclass(output, BaseModel):
        output = output.model_json_schema()
    choice = kwargs.get("tool_choice", "auto")
    try:
        request = {
            "messages": [m.model_dump(mode="json") for m in messages],
            "tools": [t.schema if isinstance(t, Tool) else t for t in kwargs.get("tools", [])],
            "output": output,
            "tool_choice": choice.name if isinstance(choice, Tool) else choice,
            "settings": kwargs.get("extra_create_args", {}),
        }
        text = json.dumps(request, sort_keys=True, ensure_ascii=True)
    except (TypeError, ValueError):  # pydantic's serialization errors are ValueErrors
        return None
    return hashlib.sha256(text.encode()).hexdigest()[:24]
