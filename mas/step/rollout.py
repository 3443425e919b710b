"""Stages 1-3 of a step: rollouts (G team runs of a task, each showing each role the lessons
its randomized exposure chose), rewards, and the filter that keeps groups with winners and
losers. Finished rollouts come back from the run journal.

Stage: rollout, reward and filter.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from mas.config import TrainConfig
from mas.executors import Local, RolloutJob
from mas.library import exposure
from mas.library.inject import injected
from mas.step.context import Context
from mas.team.scenario import Scenario
from mas.types.rollouts import Group, Rollout
from mas.types.tasks import Task


async def rollout(ctx: Context, task: Task) -> Group:
    """G team runs of one task, concurrently, each showing each role the lessons its
    randomized exposure chose; finished rollouts come from the journal."""
    plans = {role: exposures(ctx, task, role) for role in ctx.scenario.role_names}
    executor = ctx.executor or Local(ctx.scenario, ctx.client, starting=ctx.starting)

    async def one(index: int) -> Rollout:
        key = f"{ctx.prefix}/{task.id}/{index}"
        if (done := ctx.journal.load("rollout", key, Rollout)) is not None:
            ctx.on_rollout(1)
            ctx.meter.add(done.calls)
            return done
        job = RolloutJob(
            key, task, index, ctx.heads, ctx.config.sampling(key), ctx.config.rollout_timeout, ctx.config.budget,
            exposures={role: plan[index] for role, plan in plans.items()},
        )  # fmt: skip
        result = await executor.run(job, journal=ctx.journal, meter=ctx.meter)  # a rollout cut short repeats no call
        await ctx.journal.record("rollout", key, result.model_dump(mode="json"))
        ctx.on_rollout(1)
        return result

    rollouts = await asyncio.gather(*(one(i) for i in range(ctx.config.group_size)))
    return Group(task=task, rollouts=list(rollouts))


def exposures(ctx: Context, task: Task, role: str) -> list[exposure.RoleExposure]:
    """Per rollout of the task's group, what ``role``'s prompt shows (``mas.library.exposure``)."""
    shared, own = injected(ctx.heads, role, task=task.question, budget=ctx.config.budget)
    policy = ctx.config.promotion
    trials = exposure.trial_lessons(
        role, ctx.heads, ctx.effects, most=ctx.config.exposure.trials, promotion=policy, same=ctx.same,
        departed=ctx.departed, reached=ctx.config.exposure.departed,
    )  # fmt: skip
    return exposure.plan(
        [l.id for l in shared + own], trials, role=role, effects=ctx.effects, policy=ctx.config.exposure,
        promotion=policy, group_size=ctx.config.group_size, key=(ctx.config.seed, ctx.prefix, task.id),
        classes=ctx.classes, roles=tuple(ctx.scenario.role_names),
    )  # fmt: skip


def reward(scenario: Scenario, group: Group, *, ground_truth: bool) -> Group:
    """Score each rollout that ran to the end. Without ground truth, against the answer that a
    strict majority of them gave; with no such answer the group carries no advantage."""
    task = group.task
    if not ground_truth:
        answers = Counter(r.answer for r in group.valid if r.answer is not None)
        top = answers.most_common(1)
        if not top or top[0][1] * 2 <= len(group.valid):
            return group.model_copy(update={"no_majority": True})
        task = task.model_copy(update={"answer": top[0][0]})
    scored = [r if r.error else r.model_copy(update={"reward": scenario.score(task, r)}) for r in group.rollouts]
    return group.model_copy(update={"rollouts": scored})


def keep(config: TrainConfig, group: Group) -> bool:
    """Filter: only groups with winners and losers carry an advantage. G = 1 has no group to
    compare within: its one rollout is compared with the answer."""
    single = config.group_size == 1 and config.ground_truth and len(group.valid) == 1
    return group.informative or single
