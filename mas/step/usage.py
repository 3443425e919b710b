"""Stage 10 of a step: the usage events (per rollout and role, what its prompt showed, which
of it was randomized, the reward and the numeric advantage), the evidence's raw material.

Stage: record usage (the events; ``mas.library.hierarchy`` writes them).
"""

from __future__ import annotations

import statistics

from mas.step.context import Context
from mas.types.replies import Summary
from mas.types.rollouts import Group
from mas.types.usage import UsageEvent


def usage_events(ctx: Context, group: Group, summaries: list[Summary] | None) -> list[UsageEvent]:
    """One event per valid rollout and role: the lessons its prompt showed and those whose
    showing was randomized (both recorded on its trace), the ones the summarizer judged it
    applied (a description only), the reward and the numeric advantage within the group."""
    p = ctx.provenance
    judged = {r.index: {n.role: n.applied for n in s.roles} for r, s in zip(group.valid, summaries or [])}
    out = []
    for r, adv in zip(group.valid, numeric_advantages(group.rewards)):
        for t in r.traces:
            out.append(
                UsageEvent(
                    run=p.run,
                    epoch=p.epoch,
                    step=p.step,
                    task_id=group.task.id,
                    rollout=r.index,
                    role=t.role,
                    shown=t.shown,
                    randomized=t.randomized,
                    chance=t.chance,
                    classes=t.classes,
                    judged=sorted(set(judged.get(r.index, {}).get(t.role, [])) & set(t.shown)),
                    reward=r.reward,
                    advantage=round(adv, 6),
                )  # fmt: skip
            )
    return out


def numeric_advantages(rewards: list[float]) -> list[float]:
    """GRPO's numeric advantage, (r - mean) / std within the group; 0 for equal rewards."""
    if not rewards:
        return []
    mean, std = statistics.fmean(rewards), statistics.pstdev(rewards)
    return [0.0 if std == 0 else (r - mean) / std for r in rewards]
