"""The stages of one training step, each a small function with typed input and output:

rollout -> reward -> filter -> summarize -> advantage -> route -> screen -> edit -> apply
-> usage events

Stages that call the model check the run journal first and record their output in it, so a
resumed step repeats no finished call. A bad model reply is journaled as a failure, counted,
and skips only its group (advantage) or role (edit).
"""

from __future__ import annotations

import asyncio
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from autogen_core.models import ChatCompletionClient

from mas.ask import ask
from mas.config import TrainConfig, seed_of
from mas.errors import EndpointError, ModelReplyError
from mas.journal import Journal
from mas.library.edits import apply, parse_edits
from mas.meter import Meter
from mas.redact import secret_in
from mas.scenario import Scenario
from mas.screen import screen
from mas.team import render_trace, run_rollout
from mas.types import (
    GLOBAL,
    Advantage,
    Edit,
    EditBatch,
    Group,
    Provenance,
    QuarantineItem,
    Rejected,
    RoleNote,
    Rollout,
    Summary,
    Task,
    UsageEvent,
    Version,
    for_roles,
)

LESSON_ID = re.compile(r"\b(?:global|[a-z][a-z0-9_-]*)/\d{4}\b")
"""A lesson id as a role may cite it in its own messages (``solver/0003``)."""


@dataclass
class Context:
    """What every stage of a step shares."""

    scenario: Scenario
    config: TrainConfig
    client: ChatCompletionClient
    journal: Journal
    meter: Meter
    heads: dict[str, Version]
    provenance: Provenance

    @property
    def prefix(self) -> str:
        """Journal key prefix of the step, ``e<epoch>/s<step>``."""
        return f"e{self.provenance.epoch}/s{self.provenance.step}"


# -- rollout, reward, filter -------------------------------------------------------------------


async def rollout(ctx: Context, task: Task) -> Group:
    """G team runs of one task, concurrently; finished rollouts come from the journal."""

    async def one(index: int) -> Rollout:
        key = f"{ctx.prefix}/{task.id}/{index}"
        if (done := ctx.journal.get("rollout", key)) is not None:
            return Rollout.model_validate(done)
        result = await run_rollout(
            ctx.scenario, task, index, client=ctx.client, heads=ctx.heads, settings=ctx.config.sampling(key),
            timeout=ctx.config.rollout_timeout, meter=ctx.meter, budget=ctx.config.budget,
        )  # fmt: skip
        await ctx.journal.record("rollout", key, result.model_dump(mode="json"))
        return result

    rollouts = await asyncio.gather(*(one(i) for i in range(ctx.config.group_size)))
    return Group(task=task, rollouts=list(rollouts))


def reward(scenario: Scenario, group: Group, *, ground_truth: bool) -> Group:
    """Score each rollout; without ground truth, against the group's majority answer."""
    task = group.task
    if not ground_truth:
        answers = Counter(r.answer for r in group.rollouts if r.answer is not None)
        task = task.model_copy(update={"answer": answers.most_common(1)[0][0] if answers else None})
    scored = [r.model_copy(update={"reward": scenario.score(task, r)}) for r in group.rollouts]
    return Group(task=group.task, rollouts=scored)


def keep(config: TrainConfig, group: Group) -> bool:
    """Filter: only groups with winners and losers carry an advantage. G = 1 has no group to
    compare within: its one rollout is compared with the answer."""
    return group.informative or (config.group_size == 1 and config.ground_truth)


# -- summarize, advantage ------------------------------------------------------------------


async def summarize(ctx: Context, group: Group) -> list[Summary]:
    """One call per rollout of a kept group, one section per role."""

    roles = tuple(ctx.scenario.role_names)

    async def one(r: Rollout) -> Summary | None:
        traces = "\n\n".join(
            f"## {t.role} (lessons: {', '.join(t.shown) or 'none'})\n{render_trace(t)}" for t in r.traces
        )
        return await _journaled(
            ctx, "summary", f"{ctx.prefix}/{r.task_id}/{r.index}", for_roles(Summary, roles),
            question=group.task.question, answer=r.answer or "(none)", reward=f"{r.reward:g}", traces=traces,
        )  # fmt: skip

    summaries = await asyncio.gather(*(one(r) for r in group.rollouts))
    return [s or _excerpt(r) for r, s in zip(group.rollouts, summaries)]


def _excerpt(r: Rollout) -> Summary:
    """Stands in for a summary the model failed to write (already counted): each role's last
    message, cut short, so the group can still be compared."""
    notes = [RoleNote(role=t.role, note=(t.turns[-1].content if t.turns else "")[:300]) for t in r.traces]
    return Summary(roles=notes, outcome=f"answer {r.answer or 'none'}")


async def advantage(ctx: Context, group: Group, summaries: list[Summary]) -> Advantage | None:
    """Why the winners beat the losers, which role made the difference, lessons for it.

    The libraries are not in this prompt: each is read once per step, by its edit call, which
    merges what the advantages propose into it (and ``apply`` refuses copies)."""
    attempts = "\n\n".join(
        f"## Attempt {r.index + 1} (reward {r.reward:g}, answer {r.answer or 'none'})\n"
        + "\n".join(f"- {n.role}: {n.note}" for n in s.roles)
        + f"\n- outcome: {s.outcome}"
        for r, s in zip(group.rollouts, summaries)
    )
    truth = f"Correct answer: {group.task.answer}" if ctx.config.ground_truth else "Correct answer: unknown"
    return await _journaled(
        ctx, "advantage", f"{ctx.prefix}/{group.task.id}", for_roles(Advantage, tuple(ctx.scenario.role_names)),
        question=group.task.question, truth=truth, roles=", ".join(ctx.scenario.role_names),
        attempts=attempts, system_max_lessons=ctx.config.lessons_per_group,
    )  # fmt: skip


# -- route, screen, edit, apply ----------------------------------------------------------------


def route(ctx: Context, advantages: list[Advantage]) -> dict[str, list[str]]:
    """Each proposed lesson to its role's library (or, with ``route="global"``, to the global
    one); a lesson naming no known role goes to the role the advantage said made the
    difference, or is dropped and counted."""
    known = set(ctx.scenario.role_names)
    routed: dict[str, list[str]] = {}
    for adv in advantages:
        for lesson in adv.lessons[: ctx.config.lessons_per_group]:
            role = lesson.role if lesson.role in known else adv.decisive_role
            if role not in known:
                ctx.meter.fail("route")
                continue
            routed.setdefault(GLOBAL if ctx.config.route == "global" else role, []).append(lesson.text.strip())
    return routed


def screened(
    routed: dict[str, list[str]], answers: list[str], sources: list[str]
) -> tuple[dict[str, list[str]], list[QuarantineItem]]:
    """Proposals that pass screening, and the refused ones as quarantine items."""
    kept: dict[str, list[str]] = {}
    refused = []
    for role, texts in routed.items():
        for text in texts:
            reason = screen(text, answers=answers, sources=sources) or secret_in(text)
            if reason:
                refused.append(QuarantineItem(library=role, text=text, reason=reason, stage="advantage"))
            else:
                kept.setdefault(role, []).append(text)
    return kept, refused


async def edit(ctx: Context, role: str, proposals: list[str]) -> tuple[list[Edit], list[Rejected]] | None:
    """One batched edit call for one role's library; items are validated one by one."""
    head = ctx.heads[role]
    batch = await _journaled(
        ctx, "edit", f"{ctx.prefix}/{role}", EditBatch,
        role=role, system_role="whole team (every role reads it)" if role == GLOBAL else role,
        system_max_lessons=ctx.config.max_lessons,
        library=_lessons_text(head), proposals="\n".join(f"- ({role}) {p}" for p in proposals),
    )  # fmt: skip
    return None if batch is None else parse_edits(batch.edits)


def screened_edits(
    role: str, edits: list[Edit], answers: list[str], sources: list[str]
) -> tuple[list[Edit], list[QuarantineItem]]:
    """The editor writes text too: its adds and modifies are screened the same way."""
    kept, refused = [], []
    for item in edits:
        reason = (
            (screen(item.text, answers=answers, sources=sources) or secret_in(item.text))
            if hasattr(item, "text")
            else None
        )
        if reason:
            refused.append(QuarantineItem(library=role, text=item.text, reason=reason, stage="edit"))
        else:
            kept.append(item)
    return kept, refused


def apply_edits(ctx: Context, role: str, edits: list[Edit], rejected: list[Rejected]) -> Version:
    shared = ctx.heads[GLOBAL].lessons if role != GLOBAL else []
    version, refused = apply(
        ctx.heads[role], edits, provenance=ctx.provenance, limit=ctx.config.max_lessons, shared=shared
    )
    return version.model_copy(update={"rejected": rejected + refused})


# -- usage events ------------------------------------------------------------------------------


def usage_events(ctx: Context, group: Group, summaries: list[Summary] | None) -> list[UsageEvent]:
    """One event per rollout and role: the lessons its prompt showed (recorded on its trace),
    the ones it cited and the ones the summarizer judged it applied (kept apart, and both
    limited to lessons it was shown), the reward and the numeric advantage."""
    p = ctx.provenance
    out = []
    for rollout, adv in zip(group.rollouts, numeric_advantages(group.rewards)):
        judged = {n.role: n.applied for n in summaries[rollout.index].roles} if summaries else {}
        for trace in rollout.traces:
            said = " ".join(t.content for t in trace.turns)
            out.append(
                UsageEvent(
                    run=p.run,
                    epoch=p.epoch,
                    step=p.step,
                    task_id=group.task.id,
                    rollout=rollout.index,
                    role=trace.role,
                    in_prompt=trace.shown,
                    cited=sorted(set(LESSON_ID.findall(said)) & set(trace.shown)),
                    judged=sorted(set(judged.get(trace.role, [])) & set(trace.shown)),
                    reward=rollout.reward,
                    advantage=round(adv, 6),
                )  # fmt: skip
            )
    return out


def numeric_advantages(rewards: list[float]) -> list[float]:
    """GRPO's numeric advantage, (r - mean) / std within the group; 0 for equal rewards."""
    mean, std = statistics.fmean(rewards), statistics.pstdev(rewards)
    return [0.0 if std == 0 else (r - mean) / std for r in rewards]


# -- helpers -----------------------------------------------------------------------------------


async def _journaled(ctx: Context, stage: str, key: str, schema, **values: Any):
    """Ask once: a finished call (success or failure) is read back from the journal."""
    done = ctx.journal.get(stage, key)
    if done is not None:
        return schema.model_validate(done["reply"]) if done["ok"] else None
    try:
        reply = await ask(
            ctx.client, stage, schema, meter=ctx.meter, seed=seed_of(ctx.config.seed, stage, key),
            temperature=ctx.config.learning_temperature, **values,
        )  # fmt: skip
    except ModelReplyError as exc:
        await ctx.journal.record(stage, key, {"ok": False, "error": str(exc), "raw": exc.raw[:4000]})
        return None
    except EndpointError:  # not journaled: a resumed run tries again
        ctx.meter.fail(stage)
        return None
    await ctx.journal.record(stage, key, {"ok": True, "reply": reply.model_dump(mode="json")})
    return reply


def _lessons_text(version: Version | None) -> str:
    if not version or not version.lessons:
        return "(none)"
    return "\n".join(f"[{l.id}] {l.text}" for l in version.lessons)
