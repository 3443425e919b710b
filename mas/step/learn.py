"""Stages 4-5 of a step, the model's learning calls on a kept group: a summary per rollout,
then the semantic advantage (why the winners won, which role decided, the operations on its
library). Each call checks the run journal first and records its output there, so a resumed
step repeats no finished call; a bad reply is journaled as a failure, counted, and skips only
its group.

Stage: summarize and advantage.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from mas import texts
from mas.ask import ask
from mas.config import seed_of
from mas.errors import EndpointError, ModelReplyError
from mas.library.budget import tokens
from mas.meter import Meter
from mas.step.context import Context
from mas.types.replies import Advantage, Summary, advantage_schema, summary_schema
from mas.types.reports import StageCount
from mas.types.rollouts import Group, Rollout

R = TypeVar("R", bound=BaseModel)


class Outcome(BaseModel, Generic[R]):
    """A learning call's journal record, as read back: the journal is untrusted like any file
    mas reads, so a record that is not one stops the run naming its line (``Journal.load``),
    as a bad rollout record does, instead of failing somewhere inside the step."""

    ok: bool
    reply: R | None = Field(None, validate_default=True)
    """The reply, validated as the call's schema; there is none for a call that failed."""
    calls: dict[str, StageCount] = {}

    @field_validator("reply")
    @classmethod
    def _reply_of_a_success(cls, reply: R | None, info: ValidationInfo) -> R | None:
        if reply is None and info.data.get("ok"):
            raise ValueError("required when ok is true")
        return reply


def truth(ctx: Context, group: Group) -> str:
    if ctx.config.ground_truth:
        return group.task.answer or "(unknown)"
    majority = Counter(r.answer for r in group.valid if r.answer is not None).most_common(1)
    answer = majority[0][0] if majority else "(none)"
    return f"unknown; rewards compare each answer with the group's majority answer, {answer}"


async def summarize(ctx: Context, group: Group) -> list[Summary]:
    """One call per valid rollout of a kept group, step by step per role. Its completion cap
    grows with the number of roles and the length of the trace."""
    roles = tuple(ctx.scenario.role_names)
    lessons = texts.shown_lessons(group, list(roles), ctx.shown)

    async def one(r: Rollout) -> Summary | None:
        traces = "\n\n".join(texts.trace(t) for t in r.traces)
        cap = min(4000, 250 + 200 * len(roles) + tokens(traces, ctx.config.budget.tokenizer) // 2)
        return await journaled(
            ctx, "summary", f"{ctx.prefix}/{r.task_id}/{r.index}", summary_schema(roles), cap,
            system_objective=ctx.scenario.description, system_team=texts.team(ctx.scenario),
            question=group.task.question, truth=truth(ctx, group), answer=r.answer or "(none)",
            reward=f"{r.reward:g}", lessons=lessons, traces=traces,
        )  # fmt: skip

    summaries = await asyncio.gather(*(one(r) for r in group.valid))
    return [s or texts.excerpt(r) for r, s in zip(group.valid, summaries)]


async def advantage(ctx: Context, group: Group, summaries: list[Summary]) -> Advantage | None:
    """Why the winners beat the losers, against the current libraries: which lessons were
    followed or ignored, which role decided, and the operations on its library."""
    ids = tuple(sorted(l.id for v in ctx.heads.values() for l in v.lessons))
    most = ctx.config.lessons_per_group
    cap = 400 + 250 * len(group.valid) + 150 * most
    return await journaled(
        ctx, "advantage", f"{ctx.prefix}/{group.task.id}", advantage_schema(tuple(ctx.libraries), ids, most), cap,
        system_objective=ctx.scenario.description, system_team=texts.team(ctx.scenario), system_max_operations=most,
        question=group.task.question, truth=truth(ctx, group),
        libraries=texts.libraries(ctx.scenario, ctx.heads), attempts=texts.attempts(group, summaries),
    )  # fmt: skip


# -- one journaled call ----------------------------------------------------------------------


async def journaled(ctx: Context, stage: str, key: str, schema, max_tokens: int, **values: Any):
    """Ask once: a finished call (success or failure) is read back from the journal, and
    counted again as it was counted when it was made."""
    done = ctx.journal.load(stage, key, Outcome[schema])
    if done is not None:
        ctx.meter.add(done.calls)
        return done.reply if done.ok else None
    own = Meter()
    try:
        reply = await ask(
            ctx.learner or ctx.client, stage, schema, meter=own, seed=seed_of(ctx.config.seed, stage, key),
            temperature=ctx.config.learning_temperature, max_tokens=max_tokens, **values,
        )  # fmt: skip
    except ModelReplyError as exc:
        reply, outcome = None, {"ok": False, "error": str(exc), "raw": exc.raw[:4000]}
    except EndpointError:  # not journaled: a resumed run tries again
        ctx.meter.fail(stage, "endpoint error")
        return None
    else:
        outcome = {"ok": True, "reply": reply.model_dump(mode="json")}
    ctx.meter.add(calls := own.snapshot())
    await ctx.journal.record(stage, key, {**outcome, "calls": {k: v.model_dump(mode="json") for k, v in calls.items()}})
    return reply
