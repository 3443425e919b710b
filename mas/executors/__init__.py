"""Where rollouts run: the executor seam.

Stage: rollout (where it runs).

Every team rollout of a training step, and of ``mas eval``, ``ablate`` and ``transfer``, is
one ``RolloutJob`` handed to an executor, which runs it and returns its ``Rollout``:

- ``Local`` runs it in this process, on this event loop (the default; what mas always did);
- ``ray_driver.RayExecutor`` sends it to a Ray actor (``--executor ray``): ``ray_worker`` is
  the actor, ``ray_limit`` the one in-flight limit the driver serves to the workers. (Not
  ``ray.py``: a module of that name here would read as the Ray library.)

Everything that decides what a rollout computes is in the job, made by the driver: the task,
the libraries, the exposure draws, the sampling settings and seed. An executor only runs
it, so a rollout is the same wherever it ran. Journaling the rollout, and every learning
stage, stay with the caller.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from autogen_core.models import ChatCompletionClient

from mas.meter import Meter
from mas.models.wrappers import Replayed
from mas.team.rollout import run_rollout, start_gate
from mas.types.lessons import Budget, Version
from mas.types.reports import EndpointCounts
from mas.types.rollouts import Rollout
from mas.types.tasks import Task

if TYPE_CHECKING:
    from mas.journal import Journal
    from mas.library.exposure import RoleExposure
    from mas.models.limiter import AdaptiveLimit
    from mas.team.scenario import Scenario


@dataclass(frozen=True)
class RolloutJob:
    """One rollout to run, as the driver decided it (a dataclass, not a model: the libraries
    it holds are validated once, not once per rollout)."""

    key: str
    """Its journal key (``e0/s1/<task>/<index>``, ``<evaluation>/<task>/<index>``): the calls
    it makes are journaled under it."""
    task: Task
    index: int
    heads: dict[str, Version]
    settings: dict[str, Any]
    """Sampling settings of each of its calls, its seed among them."""
    timeout: float
    budget: Budget
    exposures: dict[str, RoleExposure] | None = None


class Executor(Protocol):
    """Runs rollouts. ``run`` never raises for a model or team failure: a rollout that failed
    comes back with its ``error`` set, its calls counted in ``meter``."""

    async def run(self, job: RolloutJob, *, journal: Journal | None, meter: Meter) -> Rollout: ...

    def learning_limit(self, concurrency: int | None) -> int | AdaptiveLimit | None:
        """The in-flight limit of this process's own calls (the learning calls), for ``Limited``:
        ``concurrency`` itself, or the limit the executor's workers share."""
        ...

    async def endpoint_counts(self) -> EndpointCounts | None:
        """What the endpoint answered the rollouts run elsewhere (None when they run here: this
        process's client counts them)."""
        ...


class Local:
    """Rollouts in this process: the default executor. ``client`` is the team's, already
    behind the run's in-flight limit; every rollout of one ``Local`` shares its start gate
    (``mas.team.rollout.run_rollout``'s ``starting``)."""

    def __init__(self, scenario: Scenario, client: ChatCompletionClient, *, starting: asyncio.Semaphore | None = None):
        self.scenario, self.client = scenario, client
        self.starting = starting or start_gate()

    async def run(self, job: RolloutJob, *, journal: Journal | None, meter: Meter) -> Rollout:
        client = Replayed(self.client, journal=journal, key=job.key) if journal is not None else self.client
        return await run_rollout(
            self.scenario, job.task, job.index, client=client, heads=job.heads, settings=job.settings,
            timeout=job.timeout, meter=meter, budget=job.budget, exposures=job.exposures, starting=self.starting,
        )  # fmt: skip

    def learning_limit(self, concurrency: int | None) -> int | None:
        return concurrency

    async def endpoint_counts(self) -> None:
        return None
