"""One training step, stage by stage in the order it runs.

Stage: every stage, in order (the step itself).

    rollout -> reward -> filter            (``rollout.py``, per task, concurrently)
    -> summarize -> advantage              (``learn.py``, per kept group)
    -> usage events                        (``usage.py``)
    -> route -> screen -> edit -> apply    (``edit.py``, per library)
    -> evidence: record, judge new pairs, prune, budgets, promotion   (``mas.library.hierarchy``)

The step reads the evidence once as it starts (``hierarchy.snapshot``: what exposure plans
with), adds its own groups to it for its edits (the overrule: ``_with_step``) and returns its
report; ``mas.train`` orders the steps into epochs, keeps the budget and resumes.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from autogen_core.models import ChatCompletionClient

from mas.config import TrainConfig
from mas.cost import Price, stage_costs
from mas.executors import Executor
from mas.journal import Journal
from mas.library import hierarchy, pending, people
from mas.library.store import LibraryStore
from mas.meter import Meter
from mas.models.endpoint import endpoint_counts
from mas.models.tokens import tokenizer
from mas.step.context import Context
from mas.step.edit import edit_all
from mas.step.learn import advantage, summarize
from mas.step.rollout import keep, reward, rollout
from mas.step.usage import usage_events
from mas.team.scenario import Scenario
from mas.types.lessons import GLOBAL, Provenance, Rejected, Version
from mas.types.refusals import RefusedEdit
from mas.types.replies import Advantage, Summary
from mas.types.reports import EndpointCounts, StepReport
from mas.types.rollouts import Group
from mas.types.tasks import Task
from mas.types.usage import UsageEvent


async def run_step(
    scenario: Scenario,
    batch: list[Task],
    config: TrainConfig,
    clients: tuple[ChatCompletionClient, ChatCompletionClient],
    store: LibraryStore,
    journal: Journal,
    provenance: Provenance,
    price: Price,
    *,
    promote: bool,
    last: bool = False,
    on_rollout=lambda n: None,
    executor: Executor | None = None,
) -> StepReport:
    """The step of ``batch``: ``clients`` are the team's and the learner's; ``promote`` runs the
    promotion pass after it; ``last`` is the run's last step (pruning then judges every
    lesson with enough evidence)."""
    started, meter = time.perf_counter(), Meter()
    client, learner = clients
    pending.settle(store)  # review decisions taken since the last step: this step sees them
    before = await _counted(client, learner, executor)
    known = hierarchy.snapshot(store, config.promotion)
    heads = {name: store.head(name) for name in [GLOBAL, *scenario.role_names]}
    ctx = Context(
        scenario, config, client, journal, meter, heads, provenance, effects=known.effects, same=known.same,
        classes=known.classes, learner=learner, on_rollout=on_rollout, executor=executor,
        decided_against=people.decided_against(store),
        departed=hierarchy.departed(store, known) if config.exposure.departed is not None else [],
    )  # fmt: skip

    async def learn(task: Task) -> tuple[Group, list[Summary] | None, Advantage | None]:
        group = reward(scenario, await rollout(ctx, task), ground_truth=config.ground_truth)
        if not keep(config, group):
            return group, None, None
        summaries = await summarize(ctx, group)
        return group, summaries, await advantage(ctx, group, summaries)

    learned = await asyncio.gather(*(learn(task) for task in batch))
    groups = [group for group, _, _ in learned]
    advantages = [adv for _, _, adv in learned if adv is not None]
    events = [e for group, summaries, _ in learned for e in usage_events(ctx, group, summaries)]
    ctx = _with_step(ctx, store, known, events)  # from here on, one context: what the edits refused is in it
    versions, quarantined = await edit_all(ctx, groups, advantages)
    held = 0
    if config.review:
        held = pending.hold(
            store, provenance, versions, learned, heads=heads, route=config.route, limit=config.max_lessons
        )
    elif not store.has_provenance(provenance.run, provenance.epoch, provenance.step):
        store.commit([v for v in versions if v.edits])
    hierarchy.record(
        store, provenance, usage=events, quarantined=quarantined, refused=_refusals(versions, ctx.refused)
    )  # fmt: skip
    if not config.exposure.off:  # twins known now are randomized as one from the next step on
        await hierarchy.judge_new(
            store, config.promotion, client=learner, seed=config.seed, temperature=config.learning_temperature,
            meter=meter,
        )  # fmt: skip
    pruned = hierarchy.prune(store, config.promotion, provenance, last=last, room=ctx.room)
    retired = hierarchy.enforce_budgets(store, config.budget, provenance, config.promotion)
    moves = []
    if promote:
        moves = await hierarchy.promote(
            store, config.promotion, provenance, budget=config.budget, client=learner, seed=config.seed,
            temperature=config.learning_temperature, meter=meter, roles=scenario.role_names, last=last,
        )  # fmt: skip
    rewards = [r for group in groups for r in group.rewards]
    stage_cost = stage_costs(meter.snapshot(), price)
    informative = sum(group.informative for group in groups)
    return StepReport(
        epoch=provenance.epoch,
        step=provenance.step,
        task_ids=provenance.task_ids,
        groups=len(groups),
        informative=informative,
        mean_reward=sum(rewards) / len(rewards) if rewards else 0.0,
        applied={v.library: len(v.edits) for v in versions if not config.review},
        pending=held,
        rejected={v.library: v.rejected for v in versions if v.rejected},
        retired={v.library: len(v.edits) for v in retired},
        pruned=sum(m.kind == "prune" for m in pruned) + sum(m.kind == "merge" for m in moves),
        adopted=sum(m.kind == "adopt" for m in pruned),
        promoted=sum(m.kind == "promote" for m in moves),
        demoted=sum(m.kind == "demote" for m in moves),
        quarantined=len(quarantined),
        skipped_groups=informative - len(advantages),
        failed_rollouts=sum(len(group.rollouts) - len(group.valid) for group in groups),
        no_majority=sum(group.no_majority for group in groups),
        refused_operations=ctx.refused,
        calls=meter.snapshot(),
        stage_cost_usd=stage_cost,
        cost_usd=sum(stage_cost.values()),
        seconds=round(time.perf_counter() - started, 3),
        endpoint=after.minus(before) if before and (after := await _counted(client, learner, executor)) else None,
        tokens_counted=tokenizer(config.budget.tokenizer).label,
        **_role_spend(groups, scenario.role_names, price),
    )


def _endpoints(
    client: ChatCompletionClient, learner: ChatCompletionClient, elsewhere: EndpointCounts | None = None
) -> EndpointCounts | None:
    """What the endpoints met so far: the team's, plus the learner's when it has its own, plus
    what the rollouts run ``elsewhere`` met (another executor's workers)."""
    team, learning = endpoint_counts(client), endpoint_counts(learner)
    if team is None or learning is None or learning is team:
        found = team or learning
        here = found.model_copy(deep=True) if found else None
    else:
        here = team.plus(learning)
    if elsewhere is None or here is None:
        return here or elsewhere
    return here.plus(elsewhere)


async def _counted(client, learner, executor: Executor | None) -> EndpointCounts | None:
    """``_endpoints``, with what the executor's workers met."""
    return _endpoints(client, learner, await executor.endpoint_counts() if executor else None)


def _refusals(versions: list[Version], operations: list[Rejected]) -> list[RefusedEdit]:
    """The step's refused operations (of its advantages) and edits (of its edit calls)."""
    out = [
        RefusedEdit(library=_library_of(r.edit), edit=r.edit, reason=r.reason, stage="advantage") for r in operations
    ]
    return out + [
        RefusedEdit(library=v.library, edit=r.edit, reason=r.reason, stage="edit") for v in versions for r in v.rejected
    ]


def _library_of(proposed: dict | str) -> str:
    """The library an operation names: an add's, or that of the lesson it changes."""
    if not isinstance(proposed, dict):
        return ""
    named = proposed.get("library") or str(proposed.get("id") or "").rpartition("/")[0]
    return named if isinstance(named, str) else ""


def _role_spend(groups: list[Group], roles: list[str], price: Price) -> dict:
    tokens, cost = dict.fromkeys(roles, 0), dict.fromkeys(roles, 0.0)
    for trace in (t for g in groups for r in g.rollouts for t in r.traces):
        tokens[trace.role] += trace.tokens
        cost[trace.role] += sum(price.of(t.prompt_tokens, t.completion_tokens) for t in trace.turns)
    return {"role_tokens": tokens, "role_cost_usd": cost}


def _with_step(ctx: Context, store: LibraryStore, known: hierarchy.Snapshot, events: list[UsageEvent]) -> Context:
    """``ctx`` whose evidence counts the step's own groups too: the model proposes a delete from
    the step's rollouts, which also randomized the lesson, so a lesson shown for the first time
    in this step is not retired on the model's reading of them while its contrasts are left
    out. (A step resumed after its usage was recorded has it in ``known`` already.)"""
    if store.side.usage.has_step(hierarchy.step_key(ctx.provenance)):
        return ctx
    return replace(ctx, effects=store.side.evidence.ahead(events, lineage=known.lineage, classes=known.classes))
