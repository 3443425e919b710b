"""Evaluation: Mean@k and Pass@k of the team on held-out tasks, with any library or none, and
what each role spent doing it (tool calls and tokens per rollout), each with a bootstrap
interval over tasks.

The k rollouts of a task use the same seeds whatever library is injected, so two evaluations
are paired: the only difference between them is the lessons in the prompts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from autogen_core.models import ChatCompletionClient
from pydantic import BaseModel

from mas.config import EvalConfig
from mas.errors import UserError
from mas.library.store import LibraryStore
from mas.meter import Meter
from mas.models.limiter import Limited
from mas.models.tokens import resolve
from mas.scenario import Scenario
from mas.studies.stats import Estimate, bootstrap, paired
from mas.team import run_rollout, start_gate
from mas.types import Rollout, StageCount, Task, Version


class TaskScore(BaseModel):
    task_id: str
    rewards: list[float]
    answers: list[str | None]
    tool_calls: dict[str, float]
    """Per role, tool calls per rollout (averaged over the k rollouts)."""
    tokens: dict[str, float]
    """Per role, prompt + completion tokens per rollout."""

    @property
    def mean(self) -> float:
        return sum(self.rewards) / len(self.rewards)


class EvalResult(BaseModel):
    library: str
    """What was injected: ``none`` or the library versions."""
    k: int
    mean_at_k: Estimate
    pass_at_k: Estimate
    """Per task the best of the k rewards (for 0/1 rewards: solved at least once)."""
    tool_calls: dict[str, Estimate]
    tokens: dict[str, Estimate]
    tasks: list[TaskScore]
    calls: dict[str, StageCount]

    def per_task(self) -> dict[str, float]:
        return {t.task_id: t.mean for t in self.tasks}


async def evaluate(
    scenario: Scenario,
    *,
    client: ChatCompletionClient,
    heads: dict[str, Version] | None,
    config: EvalConfig = EvalConfig(),
    on_task: Callable[[TaskScore], None] = lambda score: None,
) -> EvalResult:
    """Run k team rollouts on each held-out task; ``heads=None`` injects no library."""
    budget = config.budget.model_copy(update={"tokenizer": resolve(config.budget.tokenizer, client)})
    config = config.model_copy(update={"budget": budget})
    client, meter, starting = Limited(client, config.concurrency), Meter(), start_gate()
    heads = heads or {}

    async def score(task: Task) -> TaskScore:
        rollouts = await asyncio.gather(*(one(task, i) for i in range(config.k)))
        result = _score(scenario, task, list(rollouts))
        on_task(result)
        return result

    async def one(task: Task, index: int) -> Rollout:
        return await run_rollout(
            scenario, task, index, client=client, heads=heads, settings=config.sampling("eval", task.id, index),
            timeout=config.rollout_timeout, meter=meter, budget=config.budget, starting=starting,
        )  # fmt: skip

    scores = list(await asyncio.gather(*(score(t) for t in scenario.held_out[: config.tasks])))
    per_role = lambda field: {  # noqa: E731
        role: bootstrap([getattr(s, field)[role] for s in scores], seed=config.seed) for role in scenario.role_names
    }
    return EvalResult(
        library=describe(heads),
        k=config.k,
        mean_at_k=bootstrap([s.mean for s in scores], seed=config.seed),
        pass_at_k=bootstrap([max(s.rewards) for s in scores], seed=config.seed),
        tool_calls=per_role("tool_calls"),
        tokens=per_role("tokens"),
        tasks=scores,
        calls=meter.snapshot(),
    )


def _score(scenario: Scenario, task: Task, rollouts: list[Rollout]) -> TaskScore:
    k = len(rollouts)
    calls = {role: 0.0 for role in scenario.role_names}
    tokens = dict(calls)
    for r in rollouts:
        for trace in r.traces:
            calls[trace.role] += sum(len(t.tool_calls) for t in trace.turns) / k
            tokens[trace.role] += trace.tokens / k
    return TaskScore(
        task_id=task.id,
        rewards=[scenario.score(task, r) for r in rollouts],
        answers=[r.answer for r in rollouts],
        tool_calls=calls,
        tokens=tokens,
    )


def compare(a: EvalResult, b: EvalResult, *, seed: int = 0) -> Estimate:
    """A/B: the paired difference in Mean@k, ``a - b``, over the tasks both evaluated."""
    return paired(a.per_task(), b.per_task(), seed=seed)


def describe(heads: dict[str, Version]) -> str:
    parts = [f"{name} v{v.number} ({len(v.lessons)})" for name, v in sorted(heads.items()) if v.lessons]
    return ", ".join(parts) or "none"


def check_held_out(tasks: list[Task], store: LibraryStore) -> None:
    """Refuse to score a task the libraries of ``store`` were trained on."""
    seen = store.trained_on() & {t.id for t in tasks}
    if seen:
        raise UserError(
            f"{store.path}: {len(seen)} of the {len(tasks)} tasks to score were used to train it "
            f"(e.g. {sorted(seen)[0]!r}); score held-out tasks (--test-file)"
        )


def library_config(config: EvalConfig, store: LibraryStore) -> EvalConfig:
    """``config`` with the prompt composition the library was trained with, unless the caller
    set one explicitly."""
    recorded = store.composition()
    if recorded is None or "budget" in config.model_fields_set:
        return config
    return config.model_copy(update={"budget": recorded})
