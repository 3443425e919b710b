"""A Ray worker: an actor that runs whole rollouts (``mas.executors.ray_driver`` starts them).

Stage: rollout (where it runs: a Ray actor).

Each worker is a process of its own, with its own event loop, model client and start gate;
its calls take a slot of the endpoint's one in-flight limit, which the driver keeps
(``mas.executors.ray_limit``). It gets the scenario once, when it starts, and a ``RolloutJob`` per
rollout, with everything that decides what the rollout computes already drawn by the
driver; it returns the ``Rollout`` and the replies of the calls it made, which the driver
journals. It writes nothing: no journal, no library.
The ``python`` tool's sandbox runs here, on the worker that called it.

This module imports no Ray: ``RolloutWorker`` is a plain class that ``mas.executors.ray_driver``
makes an actor, so it can be tested, and read, on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from autogen_core.models import ChatCompletionClient

from mas.executors import Local, RolloutJob
from mas.executors.ray_limit import Shared
from mas.meter import Meter
from mas.models.endpoint import endpoint_counts
from mas.models.limiter import Limited
from mas.team.scenario import Scenario
from mas.types.lessons import Version
from mas.types.reports import EndpointCounts
from mas.types.rollouts import Rollout

Opener = Callable[[], AbstractAsyncContextManager[ChatCompletionClient]]
"""How a worker opens its model client: a picklable function (``functools.partial`` of
``mas.models.clients.open_client``, say) returning an async context manager."""


class Recorder:
    """The journal of one rollout on a worker: the replies it had before (a rollout cut short
    that runs again gets them back, ``mas.models.wrappers.Replayed``), and the new ones, for
    the driver to journal."""

    def __init__(self, replies: dict[str, Any]):
        self.replies, self.new = replies, []

    def get(self, kind: str, key: str) -> Any | None:
        return self.replies.get(key) if kind == "call" else None

    async def record(self, kind: str, key: str, data: Any, *, sync: bool = True) -> None:
        self.new.append((kind, key, data))


class RolloutWorker:
    """Runs rollouts of ``scenario`` with the client ``opener`` opens, under the endpoint's one
    in-flight limit, which the driver serves at ``limit`` (``mas.executors.ray_limit``); ``holder`` is
    this worker's name there."""

    def __init__(self, scenario: Scenario, opener: Opener, limit: tuple[str, int, str], holder: str):
        logging.getLogger("autogen_core").setLevel(logging.CRITICAL)  # as the CLI does: failures are counted
        self.scenario, self.opener, self.limit = scenario, opener, Shared(limit, holder)
        self.heads: dict[str, dict[str, Version]] = {}
        """The libraries of the jobs, by the id of the object the driver put them in."""
        self._local: Local | None = None
        self._opening = asyncio.Lock()
        self._stack = contextlib.AsyncExitStack()

    async def ready(self) -> int:
        """Open the client now (a bad model spec fails the start, not every rollout); this
        worker's process id."""
        await self._ready()
        return os.getpid()

    async def _ready(self) -> Local:
        """The client, opened on this worker's event loop at its first rollout."""
        async with self._opening:
            if self._local is None:
                client = await self._stack.enter_async_context(self.opener())
                self._local = Local(self.scenario, Limited(client, self.limit))
            return self._local

    async def run(self, heads: list, job: RolloutJob, replies: dict[str, Any]) -> tuple[Rollout, list]:
        """Run ``job`` with the libraries in ``heads`` (one object reference, resolved once per
        step); the rollout and the ``(kind, key, reply)`` records of its calls."""
        local = await self._ready()
        job = dataclasses.replace(job, heads=await self._heads(heads[0]))
        recorder = Recorder(replies)
        rollout = await local.run(job, journal=recorder, meter=Meter())
        return rollout, recorder.new

    async def _heads(self, ref) -> dict[str, Version]:
        key = ref.hex()
        if key not in self.heads:
            if len(self.heads) >= 4:  # a few steps' or evaluations' libraries at most
                self.heads.pop(next(iter(self.heads)))
            self.heads[key] = await ref
        return self.heads[key]

    def counts(self) -> EndpointCounts | None:
        """What this worker's client met at the endpoint so far (None for the fake)."""
        found = endpoint_counts(self._local.client) if self._local else None
        return found.model_copy(deep=True) if found else None

    async def close(self) -> None:
        await self._stack.aclose()
