"""Evaluation: Mean@k of the team on held-out tasks, with a library or without one.

The k rollouts of a task use the same seeds whatever library is injected, so a comparison
with and without the library is paired: the only difference is the lessons in the prompts.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from autogen_core.models import ChatCompletionClient
from pydantic import BaseModel

from .clients import Limited
from .config import EvalConfig
from .meter import Meter, StageCount
from .scenario import Scenario
from .stages import seed_of
from .team import run_rollout
from .types import Task, Version


class TaskScore(BaseModel):
    task_id: str
    rewards: list[float]
    answers: list[str | None]


class EvalResult(BaseModel):
    library: str
    """What was injected: ``none`` or a description of the library versions."""
    mean_at_k: float
    k: int
    tasks: list[TaskScore]
    calls: dict[str, StageCount]


async def evaluate(
    scenario: Scenario,
    *,
    client: ChatCompletionClient,
    heads: dict[str, Version] | None,
    config: EvalConfig = EvalConfig(),
    on_task: Callable[[TaskScore], None] = lambda score: None,
) -> EvalResult:
    """Run k team rollouts on each held-out task; ``heads=None`` injects no library."""
    client, meter = Limited(client, config.concurrency), Meter()
    heads = heads or {}

    async def score(task: Task) -> TaskScore:
        rollouts = await asyncio.gather(*(one(task, i) for i in range(config.k)))
        result = TaskScore(
            task_id=task.id,
            rewards=[0.0 if r.error else scenario.reward(task, r.answer) for r in rollouts],
            answers=[r.answer for r in rollouts],
        )
        on_task(result)
        return result

    async def one(task: Task, index: int):
        settings = {
            "seed": seed_of(config.seed, "eval", task.id, index),
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
        }
        return await run_rollout(
            scenario, task, index, client=client, heads=heads, settings=settings,
            timeout=config.rollout_timeout, meter=meter, budget=config.budget,
        )  # fmt: skip

    scores = await asyncio.gather(*(score(t) for t in scenario.held_out[: config.tasks]))
    means = [sum(s.rewards) / len(s.rewards) for s in scores]
    return EvalResult(
        library=describe(heads),
        mean_at_k=sum(means) / len(means) if means else 0.0,
        k=config.k,
        tasks=list(scores),
        calls=meter.snapshot(),
    )


def describe(heads: dict[str, Version]) -> str:
    parts = [f"{name} v{v.number} ({len(v.lessons)})" for name, v in sorted(heads.items()) if v.lessons]
    return ", ".join(parts) or "none"
