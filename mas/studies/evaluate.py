"""Evaluation: Mean@k and Pass@k of the team on held-out tasks, with any library or none, and
what each role spent doing it (tool calls and tokens per rollout), each with a bootstrap
interval over tasks.

Stage: none: evaluation and studies, after training (rollout and reward, no learning).

The k rollouts of a task use the same seeds whatever library is injected, so two evaluations
are paired: the only difference between them is the lessons in the prompts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from autogen_core.models import ChatCompletionClient
from pydantic import BaseModel

from mas.config import EvalConfig, given
from mas.errors import UserError
from mas.executors import Executor, Local, RolloutJob
from mas.journal import Journal
from mas.library.store import LibraryStore
from mas.meter import Meter
from mas.models.limiter import Limited
from mas.models.tokens import resolve
from mas.studies.stats import Estimate, bootstrap, paired
from mas.team.scenario import Scenario
from mas.types.lessons import Version
from mas.types.reports import StageCount
from mas.types.rollouts import Rollout
from mas.types.tasks import Task


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

    def __repr_args__(self):
        """Short: every task's scores made a page of it."""
        for name in ("library", "k", "mean_at_k", "pass_at_k"):
            yield name, getattr(self, name)
        yield "tasks", f"<{len(self.tasks)} task scores>"

    def per_task(self) -> dict[str, float]:
        return {t.task_id: t.mean for t in self.tasks}


async def evaluate(
    scenario: Scenario,
    *,
    client: ChatCompletionClient,
    heads: dict[str, Version] | LibraryStore | None,
    config: EvalConfig | dict = EvalConfig(),
    on_task: Callable[[TaskScore], None] = lambda score: None,
    journal: Journal | None = None,
    key: str = "eval",
    executor: Executor | None = None,
) -> EvalResult:
    """Run k team rollouts on each held-out task. ``heads``: the libraries to inject (None: no
    library; a ``LibraryStore``: its latest versions, in the prompt composition they were trained
    with). ``config``: an ``EvalConfig`` or a dict of its fields. ``executor`` runs the rollouts
    (``mas.executors``; None: in this process, with ``client``).

    With a ``journal`` (a study's), each rollout is recorded under ``key`` as it ends, and the
    result once it is complete: run again, the evaluation reads back what was done, repeating
    no finished model call (``Replayed``), and counts it as it was counted."""
    config = given(config, EvalConfig, "config")
    if not scenario.held_out[: config.tasks]:  # a score of 0.00 [0.00, 0.00] over no task at all
        raise UserError(f"scenario {scenario.name!r} has no held-out tasks to score (give it test tasks)")
    if isinstance(heads, LibraryStore):  # as ``mas eval`` reads it: the composition it was trained with too
        config, heads = library_config(config, heads), heads.heads()
    if journal is not None and (result := journal.load("evaluation", key, EvalResult)) is not None:
        for score in result.tasks:
            on_task(score)
        return result
    budget = config.budget.model_copy(update={"tokenizer": resolve(config.budget.tokenizer, client)})
    config = config.model_copy(update={"budget": budget})
    executor = executor or Local(scenario, Limited(client, config.concurrency))
    heads = heads or {}

    async def score(task: Task) -> tuple[TaskScore, list[Rollout]]:
        rollouts = list(await asyncio.gather(*(one(task, i) for i in range(config.k))))
        result = _score(scenario, task, rollouts)
        on_task(result)
        return result, rollouts

    async def one(task: Task, index: int) -> Rollout:
        at = f"{key}/{task.id}/{index}"
        if journal is not None and (done := journal.load("rollout", at, Rollout)) is not None:
            return done  # checked like any file read back, and against its key
        job = RolloutJob(
            at, task, index, heads, config.sampling("eval", task.id, index), config.rollout_timeout, config.budget
        )
        rollout = await executor.run(job, journal=journal, meter=Meter())
        if journal is not None:
            await journal.record("rollout", at, rollout.model_dump(mode="json"))
        return rollout

    done = await asyncio.gather(*(score(t) for t in scenario.held_out[: config.tasks]))
    result = _result(scenario, heads, config, [s for s, _ in done], [r for _, rs in done for r in rs])
    if journal is not None:
        await journal.record("evaluation", key, result.model_dump(mode="json"))
    return result


def _result(
    scenario: Scenario, heads: dict[str, Version], config: EvalConfig, scores: list[TaskScore], rollouts: list[Rollout]
) -> EvalResult:
    """The estimates over tasks; the calls of the rollouts are added up in task order."""
    meter = Meter()
    for rollout in rollouts:
        meter.add(rollout.calls)
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


def deltas(results: list[EvalResult], keys: list[str], *, seed: int = 0) -> list[dict[str, Estimate]]:
    """The paired changes ``mas eval`` reports for each of its evaluations, by name: from the
    first, without libraries (``vs_none``), and for the ``compare`` file, from the ``library``
    one too (``vs_library``: the A/B itself, which two intervals side by side cannot give).
    ``keys``: each evaluation's key in the study's journal (``none``, ``library``, ``compare``)."""
    by_key = dict(zip(keys, results))
    out = []
    for key, result in zip(keys, results):
        changes = {"vs_none": compare(result, results[0], seed=seed)} if key != keys[0] else {}
        if key == "compare" and "library" in by_key:
            changes["vs_library"] = compare(result, by_key["library"], seed=seed)
        out.append(changes)
    return out


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
