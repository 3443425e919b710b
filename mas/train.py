"""The training loop: epochs of steps, each step the stages in order, checkpointed.

This module only orders the stages (``stages.py``) and records their results; it has no
learning logic of its own. A run lives in a run directory (``run.json`` with its settings,
``journal.jsonl`` with every stage's output); starting it again resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from pathlib import Path

from autogen_core.models import ChatCompletionClient
from pydantic import BaseModel

from mas import runs, screen, stages
from mas.config import TrainConfig, seed_of
from mas.cost import Price, stage_costs
from mas.executors import Executor
from mas.journal import Journal, records
from mas.library import hierarchy, pending
from mas.library.edits import apply
from mas.library.logs import SideFiles
from mas.library.store import LibraryStore
from mas.meter import Meter
from mas.models.endpoint import endpoint_counts
from mas.models.limiter import Limited
from mas.models.tokens import resolve, tokenizer
from mas.team.scenario import Scenario
from mas.types.lessons import GLOBAL, Delete, Provenance, Rejected, Version
from mas.types.refusals import QuarantineItem, RefusedEdit
from mas.types.replies import Advantage, Summary
from mas.types.reports import EndpointCounts, StepReport
from mas.types.rollouts import Group
from mas.types.tasks import Task


class TrainResult(BaseModel):
    run: str
    steps: list[StepReport]
    heads: dict[str, Version]
    cost_usd: float = 0.0
    stopped: str | None = None
    """Why the run ended early (the dollar budget), or None when it finished."""

    def __repr_args__(self):
        """Short: ``asyncio.run`` formats its task's result as it restores the signal handlers,
        and a run of thousands of steps took most of a second to print."""
        yield "run", self.run
        yield "steps", f"<{len(self.steps)} step reports>"
        yield "cost_usd", self.cost_usd
        yield "stopped", self.stopped


async def train(
    scenario: Scenario,
    *,
    client: ChatCompletionClient,
    store: LibraryStore,
    run_dir: Path,
    config: TrainConfig = TrainConfig(),
    model_name: str = "",
    price: Price = Price(),
    on_step: Callable[[StepReport], None] = lambda report: None,
    learner: ChatCompletionClient | None = None,
    on_rollout: Callable[[int], None] = lambda n: None,
    executor: Executor | None = None,
) -> TrainResult:
    """Train the scenario's role libraries in ``store``; resume if ``run_dir`` holds a run.
    ``learner``, when given, makes the learning calls (summaries, advantages, edits,
    equivalence judgements) and ``client`` only the team's. ``executor`` runs the rollouts
    (``mas.executor``; None: in this process, with ``client``); the learning stages, the
    journal and every library write stay here.

    ``on_step`` gets each step's report as the step ends; ``on_rollout`` the number of rollouts
    done, 1 as each ends (or is read back from the journal) and all of a step at once for a step
    a resumed run finished before.

    The run holds the library file for its whole length (``LibraryStore.exclusive``): a second
    training run, or a rollback, promote, recover or graph export of the same library, is
    refused at once, since it would change the library under the steps of this one."""
    config = with_tokenizer(config, client)
    new = _check_run(run_dir, scenario, config, model_name, store.path)  # before anything is written
    with store.exclusive():
        SideFiles(store.path).check()  # a damaged log stops the run here, not after its folder is made
        if new is not None:
            runs.make_folder(run_dir)
            if config.fresh:
                _empty(store, Provenance(run=run_dir.name, epoch=0, step=0, model=model_name, stage="fresh"))
            # The versions the run starts from: its report tells its own history from later runs'.
            runs.start(run_dir, {**new, "start": {name: v.number for name, v in store.heads().items()}})
        result = await _train(
            scenario, client, store, run_dir, config, model_name, price, on_step, learner, on_rollout, executor
        )
        if pending.settle(store):  # decisions taken during the last step: in the library before the run lets go
            result = result.model_copy(update={"heads": store.heads()})
        return result


async def _train(
    scenario, client, store, run_dir, config, model_name, price, on_step, learner, on_rollout, executor
) -> TrainResult:
    journal = Journal(run_dir / "journal.jsonl")
    limit = config.concurrency if executor is None else executor.learning_limit(config.concurrency)
    client = Limited(client, limit)
    learner = Limited(learner, limit) if learner is not None else client
    tasks = scenario.tasks[: config.tasks]
    steps_per_epoch = -(-len(tasks) // config.batch_size)
    reports: list[StepReport] = []
    spent = 0.0
    for epoch in range(config.epochs):
        for step, batch in enumerate(_batches(_order(tasks, config, epoch), config.batch_size)):
            if config.budget_usd is not None and spent >= config.budget_usd:
                stopped = f"budget: ${spent:.4f} spent of ${config.budget_usd:g}; start again with a larger --budget-usd to go on"
                return TrainResult(
                    run=run_dir.name, steps=reports, heads=store.heads(), cost_usd=spent, stopped=stopped
                )
            done = journal.get("step", f"e{epoch}/s{step}")
            if done is None:
                provenance = Provenance(
                    run=run_dir.name, epoch=epoch, step=step, task_ids=[t.id for t in batch], model=model_name,
                    budget=config.budget, held_out=scenario.split,
                )  # fmt: skip
                cadence = config.promotion.cadence
                promote = cadence == "step" or (cadence == "epoch" and step == steps_per_epoch - 1)
                report = await _step(
                    scenario, batch, config, (client, learner), store, journal, provenance, price, promote, on_rollout,
                    executor, last=epoch == config.epochs - 1 and step == steps_per_epoch - 1,
                )  # fmt: skip
                journal.put("step", f"e{epoch}/s{step}", done := report.model_dump(mode="json"))
                on_step(report)
            else:
                on_rollout(len(batch) * config.group_size)
            reports.append(StepReport.model_validate(done))
            spent += reports[-1].cost_usd
    return TrainResult(run=run_dir.name, steps=reports, heads=store.heads(), cost_usd=sum(r.cost_usd for r in reports))


async def _step(
    scenario,
    batch,
    config,
    clients,
    store,
    journal,
    provenance: Provenance,
    price: Price,
    promote: bool,
    on_rollout,
    executor: Executor | None,
    *,
    last: bool = False,
) -> StepReport:
    """rollout -> reward -> filter -> summarize -> advantage (per task, concurrently), then
    route -> screen -> edit -> apply (per library), then usage events, pruning, budgets, and
    the promotion pass when it is due."""
    started, meter = time.perf_counter(), Meter()
    client, learner = clients
    pending.settle(store)  # review decisions taken since the last step: this step sees them
    before = await _counted(client, learner, executor)
    heads = {name: store.head(name) for name in [GLOBAL, *scenario.role_names]}
    judged = hierarchy.judge(store, config.promotion)
    twins = hierarchy.classes(store, config.promotion, judged)
    known = hierarchy.effects(store, config.promotion, twins=twins)
    same = judged.known_same
    ctx = stages.Context(
        scenario,
        config,
        client,
        journal,
        meter,
        heads,
        provenance,
        effects=known,
        same=same,
        classes=twins,
        learner=learner,
        on_rollout=on_rollout,
        executor=executor,
    )

    async def learn(task: Task) -> tuple[Group, list[Summary] | None, Advantage | None]:
        group = stages.reward(scenario, await stages.rollout(ctx, task), ground_truth=config.ground_truth)
        if not stages.keep(config, group):
            return group, None, None
        summaries = await stages.summarize(ctx, group)
        return group, summaries, await stages.advantage(ctx, group, summaries)

    learned = await asyncio.gather(*(learn(task) for task in batch))
    groups = [group for group, _, _ in learned]
    advantages = [adv for _, _, adv in learned if adv is not None]
    versions, refused = await _edit(ctx, groups, advantages)
    held = 0
    if config.review:
        held = pending.hold(
            store, provenance, versions, learned, heads=heads, route=config.route, limit=config.max_lessons
        )
    elif not store.has_provenance(provenance.run, provenance.epoch, provenance.step):
        store.commit([v for v in versions if v.edits])
    events = [e for group, summaries, _ in learned for e in stages.usage_events(ctx, group, summaries)]
    hierarchy.record_usage(store, events, provenance)
    hierarchy.record_quarantine(store, refused, provenance)
    hierarchy.record_rejected(store, _refusals(versions, ctx.refused), provenance)
    if not config.exposure.off:  # twins known now are randomized as one from the next step on
        await hierarchy.judge_new(
            store, config.promotion, client=learner, seed=config.seed, temperature=config.learning_temperature,
            meter=meter,
        )  # fmt: skip
    pruned = hierarchy.prune(store, config.promotion, provenance, last=last)
    retired = hierarchy.enforce_budgets(store, config.budget, provenance, config.promotion)
    moves = []
    if promote:
        moves = await hierarchy.promote(
            store, config.promotion, provenance, budget=config.budget, client=learner, seed=config.seed,
            temperature=config.learning_temperature, meter=meter, roles=scenario.role_names,
        )  # fmt: skip
    rewards = [reward for group in groups for reward in group.rewards]
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
        pruned=len(pruned) + sum(m.kind == "merge" for m in moves),
        promoted=sum(m.kind == "promote" for m in moves),
        demoted=sum(m.kind == "demote" for m in moves),
        quarantined=len(refused),
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


async def _edit(
    ctx: stages.Context, groups: list[Group], advantages: list[Advantage]
) -> tuple[list[Version], list[QuarantineItem]]:
    """Route and screen the operations, one edit call per library, screen the edits, apply them."""
    answers, sources = screen.step_material(groups)
    routed, refused = stages.screened(stages.route(ctx, advantages), answers, sources)
    batches = await asyncio.gather(*(stages.edit(ctx, library, ops) for library, ops in routed.items()))
    versions = []
    for library, parsed in zip(routed, batches):
        if parsed is not None:
            edits, bad = parsed
            edits, caught = stages.screened_edits(library, edits, answers, sources)
            refused += caught
            versions.append(stages.apply_edits(ctx, library, edits, bad))
    return versions, refused


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


def _empty(store: LibraryStore, provenance: Provenance) -> None:
    """A new, empty version of every library that has lessons: each lesson deleted by an edit,
    so that the history says what left and why."""
    heads = store.heads().values()
    store.commit(
        [
            apply(v, [Delete(op="delete", id=l.id) for l in v.lessons], provenance=provenance)[0]
            for v in heads
            if v.lessons
        ]
    )


def finished(run_dir: Path) -> list[StepReport]:
    """The steps a run has finished, read without changing its journal (none for a new run)."""
    path = run_dir / "journal.jsonl"
    if not path.is_file():
        return []
    steps = [StepReport.model_validate(r["data"]) for r in records(path)[0] if r["kind"] == "step"]
    return sorted(steps, key=lambda s: (s.epoch, s.step))


def with_tokenizer(config: TrainConfig, client: ChatCompletionClient) -> TrainConfig:
    """``config`` with its budget's ``model`` tokenizer named: the run records what counted."""
    budget = config.budget
    return config.model_copy(
        update={"budget": budget.model_copy(update={"tokenizer": resolve(budget.tokenizer, client)})}
    )


def _role_spend(groups: list[Group], roles: list[str], price: Price) -> dict:
    tokens, cost = dict.fromkeys(roles, 0), dict.fromkeys(roles, 0.0)
    for trace in (t for g in groups for r in g.rollouts for t in r.traces):
        tokens[trace.role] += trace.tokens
        cost[trace.role] += sum(price.of(t.prompt_tokens, t.completion_tokens) for t in trace.turns)
    return {"role_tokens": tokens, "role_cost_usd": cost}


def _order(tasks: list[Task], config: TrainConfig, epoch: int) -> list[Task]:
    if not config.shuffle:
        return list(tasks)
    shuffled = list(tasks)
    random.Random(seed_of(config.seed, "order", epoch)).shuffle(shuffled)
    return shuffled


def _batches(tasks: list[Task], size: int) -> list[list[Task]]:
    return [tasks[i : i + size] for i in range(0, len(tasks), size)]


def _check_run(run_dir: Path, scenario: Scenario, config: TrainConfig, model_name: str, library: Path) -> dict | None:
    """The settings to write for a new run; None when ``run_dir`` holds this run already.

    A resumed run must keep its settings. A run is its tasks and role prompts as much as its
    settings: their digests are kept, so resuming with another task file of the same name is
    refused instead of mixing both in one journal."""
    settings = {
        "kind": "train",
        "scenario": scenario.name,
        "model": model_name,
        "library": str(library.resolve()),
        "held_out": scenario.split,
        "held_out_tasks": [t.id for t in scenario.held_out],
        "tasks_sha256": runs.digest([t.model_dump(mode="json") for t in scenario.tasks[: config.tasks]]),
        "roles_sha256": runs.digest([r.model_dump(mode="json") for r in scenario.roles]),
        "config": config.model_dump(mode="json"),
        **scenario.sources,  # an autogen team file: its path and digest
    }
    # a setting added since the run started: its default
    return runs.check(run_dir, settings, defaults=TrainConfig().model_dump(mode="json"))
