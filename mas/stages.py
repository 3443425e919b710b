"""The stages of one training step, each a small function with typed input and output:

rollout -> reward -> filter -> summarize -> advantage -> route -> screen -> edit -> apply
-> usage events

Stages that call the model check the run journal first and record their output in it, so a
resumed step repeats no finished call. A bad model reply is journaled as a failure, counted,
and skips only its group (advantage) or library (edit); a refused operation or edit is kept
with its reason.
"""

from __future__ import annotations

import asyncio
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from autogen_core.models import ChatCompletionClient
from pydantic import TypeAdapter

from mas import texts
from mas.ask import ask
from mas.config import TrainConfig, seed_of
from mas.errors import EndpointError, ModelReplyError
from mas.executors import Executor, Local, RolloutJob
from mas.journal import Journal
from mas.library import exposure
from mas.library.budget import tokens
from mas.library.edits import apply, parse_edits, parse_items
from mas.library.inject import injected
from mas.meter import Meter
from mas.redact import secret_in
from mas.screen import screen
from mas.team.rollout import start_gate
from mas.team.scenario import Scenario
from mas.types.evidence import Effect
from mas.types.lessons import GLOBAL, Edit, Lesson, Provenance, Rejected, Version
from mas.types.refusals import QuarantineItem
from mas.types.replies import (
    AddOperation,
    Advantage,
    DeleteOperation,
    ModifyOperation,
    Operation,
    Summary,
    advantage_schema,
    edit_schema,
    summary_schema,
)
from mas.types.reports import StageCount
from mas.types.rollouts import Group, Rollout
from mas.types.tasks import Task
from mas.types.usage import UsageEvent

_operation = TypeAdapter(Operation)
_counts = TypeAdapter(dict[str, StageCount])


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
    effects: dict[tuple[str, str], Effect] = field(default_factory=dict)
    """The randomized evidence so far, per (role, lesson): what exposure plans with."""
    same: Callable[[Lesson, Lesson], bool] = lambda a, b: False
    """Lessons judged to say the same thing (so far): no trial of what a role already has."""
    classes: dict[str, str] = field(default_factory=dict)
    """Lesson id -> its class of twins (``similar.classes``): randomized as one lesson."""
    refused: list[Rejected] = field(default_factory=list)
    """Operations of the step's advantages that could not be used, each with its reason."""
    learner: ChatCompletionClient | None = None
    """The client of the learning calls, when it is not ``client``."""
    on_rollout: Callable[[int], None] = lambda n: None
    """Told of each rollout as it ends, or is read back from the journal (for progress)."""
    starting: asyncio.Semaphore = field(default_factory=start_gate)
    """Rollouts building their team (``mas.team.run_rollout``), when they run in this process."""
    executor: Executor | None = None
    """Where the rollouts run (``mas.executor``); None: in this process, with ``client``."""

    @property
    def prefix(self) -> str:
        """Journal key prefix of the step, ``e<epoch>/s<step>``."""
        return f"e{self.provenance.epoch}/s{self.provenance.step}"

    @property
    def libraries(self) -> list[str]:
        return [GLOBAL, *self.scenario.role_names]

    def lesson(self, lesson_id: str) -> Lesson | None:
        library = lesson_id.rpartition("/")[0]
        version = self.heads.get(library)
        return next((l for l in version.lessons if l.id == lesson_id), None) if version else None


# -- rollout, reward, filter -------------------------------------------------------------------


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
        role, ctx.heads, ctx.effects, most=ctx.config.exposure.trials, promotion=policy, same=ctx.same
    )
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


# -- summarize, advantage ------------------------------------------------------------------


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
    lessons = texts.shown_lessons(group, list(roles), ctx.lesson)

    async def one(r: Rollout) -> Summary | None:
        traces = "\n\n".join(texts.trace(t) for t in r.traces)
        cap = min(4000, 250 + 200 * len(roles) + tokens(traces, ctx.config.budget.tokenizer) // 2)
        return await _journaled(
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
    return await _journaled(
        ctx, "advantage", f"{ctx.prefix}/{group.task.id}", advantage_schema(tuple(ctx.libraries), ids, most), cap,
        system_objective=ctx.scenario.description, system_team=texts.team(ctx.scenario), system_max_operations=most,
        question=group.task.question, truth=truth(ctx, group),
        libraries=texts.libraries(ctx.scenario, ctx.heads), attempts=texts.attempts(group, summaries),
    )  # fmt: skip


# -- route, screen, edit, apply ----------------------------------------------------------------


def route(ctx: Context, advantages: list[Advantage]) -> dict[str, list[Operation]]:
    """The operations of every advantage, validated one by one, by the library they change:
    an add goes to the library it names (every add to the global one with ``route="global"``),
    a modify or delete to the library of the lesson it names. Whatever cannot be used is kept
    in ``ctx.refused`` with its reason, never dropped in silence."""
    routed: dict[str, list[Operation]] = {}
    for adv in advantages:
        operations, refused = parse_items(adv.operations, _operation)
        ctx.refused += refused
        for i, op in enumerate(operations):
            reason, library = _target(ctx, op)
            if i >= ctx.config.lessons_per_group:
                reason = f"over the limit of {ctx.config.lessons_per_group} operations per group"
            if reason:
                ctx.refused.append(Rejected(edit=op.model_dump(mode="json"), reason=reason))
                ctx.meter.fail("route", "refused")
            else:
                routed.setdefault(library, []).append(op)
    return routed


def _target(ctx: Context, op: Operation) -> tuple[str | None, str]:
    """(why ``op`` cannot be used or None, the library it changes)."""
    if isinstance(op, AddOperation):
        if op.library not in ctx.libraries:
            return f"unknown library {op.library!r}", ""
        return None, GLOBAL if ctx.config.route == "global" else op.library
    if ctx.lesson(op.id) is None:
        return f"unknown lesson id {op.id!r}", ""
    return None, op.id.rpartition("/")[0]


def screened(
    routed: dict[str, list[Operation]], answers: list[str], sources: list[str]
) -> tuple[dict[str, list[Operation]], list[QuarantineItem]]:
    """Operations whose text passes screening, and the refused ones as quarantine items."""
    kept: dict[str, list[Operation]] = {}
    refused = []
    for library, ops in routed.items():
        for op in ops:
            text = getattr(op, "text", None)
            reason = (screen(text, answers=answers, sources=sources) or secret_in(text)) if text is not None else None
            if reason:
                refused.append(QuarantineItem(library=library, text=op.text, reason=reason, stage="advantage"))
            else:
                kept.setdefault(library, []).append(op)
    return kept, refused


async def edit(ctx: Context, library: str, ops: list[Operation]) -> tuple[list[Edit], list[Rejected]] | None:
    """One batched edit call for one library: the step's operations on it, with their reasons,
    merged into one consistent list. Items are validated one by one."""
    head = ctx.heads[library]
    ids = tuple(sorted(l.id for l in head.lessons))
    reader = (
        "every role of the team:\n" + texts.team(ctx.scenario)
        if library == GLOBAL
        else texts.role_line(ctx.scenario.role(library))
    )
    batch = await _journaled(
        ctx, "edit", f"{ctx.prefix}/{library}", edit_schema(ids, 24), 300 + 80 * (len(ops) + len(ids)),
        system_library="the global list, which every role reads" if library == GLOBAL else f"the {library}'s",
        system_reader=reader, system_objective=ctx.scenario.description, system_max_lessons=ctx.config.max_lessons,
        count=len(head.lessons), max_lessons=ctx.config.max_lessons,
        lessons=texts.lessons(head), operations="\n".join(_describe(op) for op in ops),
    )  # fmt: skip
    return None if batch is None else parse_edits(batch.edits)


def _describe(op: Operation) -> str:
    reason = f" (why: {op.reason})" if op.reason else ""
    if isinstance(op, AddOperation):
        return f"- add: {op.text}{reason}"
    if isinstance(op, ModifyOperation):
        return f"- modify [{op.id}] to: {op.text}{reason}"
    assert isinstance(op, DeleteOperation)
    return f"- delete [{op.id}]{reason}"


def screened_edits(
    library: str, edits: list[Edit], answers: list[str], sources: list[str]
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
            refused.append(QuarantineItem(library=library, text=item.text, reason=reason, stage="edit"))
        else:
            kept.append(item)
    return kept, refused


def apply_edits(ctx: Context, library: str, edits: list[Edit], rejected: list[Rejected]) -> Version:
    shared = ctx.heads[GLOBAL].lessons if library != GLOBAL else []
    version, refused = apply(
        ctx.heads[library], edits, provenance=ctx.provenance, limit=ctx.config.max_lessons, shared=shared
    )
    return version.model_copy(update={"rejected": rejected + refused})


# -- usage events ------------------------------------------------------------------------------


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


# -- helpers -----------------------------------------------------------------------------------


async def _journaled(ctx: Context, stage: str, key: str, schema, max_tokens: int, **values: Any):
    """Ask once: a finished call (success or failure) is read back from the journal, and
    counted again as it was counted when it was made."""
    done = ctx.journal.get(stage, key)
    if done is not None:
        ctx.meter.add(_counts.validate_python(done.get("calls", {})))
        return schema.model_validate(done["reply"]) if done["ok"] else None
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
