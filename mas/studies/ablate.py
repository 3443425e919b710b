"""Ablations as one command: the paper's (no library, directly generated lessons, group size
1, no ground truth) and ours (private libraries only, global only, promotion off), each
trained on the same training tasks and evaluated on the same held-out tasks and seeds.

Stage: none: evaluation and studies, after training (each variant trains through every stage).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from autogen_core.models import ChatCompletionClient
from pydantic import BaseModel

from mas import runs
from mas.ask import ask
from mas.config import ABLATIONS, EvalConfig, TrainConfig, ablated
from mas.cost import Price, stage_costs
from mas.errors import EndpointError, ModelReplyError
from mas.executors import Executor
from mas.journal import Journal
from mas.library.edits import apply, parse_edits
from mas.library.store import LibraryStore
from mas.meter import Meter
from mas.models.wrappers import Replayed
from mas.studies import job
from mas.studies.evaluate import EvalResult, check_held_out, compare, library_config
from mas.studies.stats import Estimate
from mas.team.scenario import Scenario
from mas.train import train
from mas.types.lessons import Provenance
from mas.types.replies import DirectLessons

VARIANTS = ABLATIONS
"""Each variant's changes to the training settings; None trains nothing, "direct" asks."""
REFERENCE = "no library"
"""The variant every other one is compared with; it is evaluated first, whatever the order asked."""


class Row(BaseModel):
    variant: str
    mean_at_k: Estimate
    delta: Estimate | None = None
    """Paired difference from "no library"; None for "no library" itself (a difference from
    itself is no measurement) and when "no library" was not evaluated."""
    lessons: int
    cost_usd: float
    k: int | None = None
    tasks: int | None = None
    """The held-out tasks scored, k rollouts each: what a script needs to read ``mean_at_k``."""


class Ablation(BaseModel):
    rows: list[Row]
    """One per variant done, in the order asked (``REFERENCE`` is evaluated first)."""
    cost_usd: float
    stopped: str | None = None
    """Why the ablation ended before its last variant (its budget), or None."""


async def ablate(
    scenario: Scenario,
    *,
    client: ChatCompletionClient,
    run_dir: Path,
    train_config: TrainConfig,
    eval_config: EvalConfig,
    variants: list[str] = list(VARIANTS),
    model_name: str = "",
    price: Price = Price(),
    on_variant: Callable[[str], None] = lambda name: None,
    learner: ChatCompletionClient | None = None,
    on_rollout: Callable[[int], None] = lambda n: None,
    executor: Executor | None = None,
) -> Ablation:
    """Learn each variant's libraries in ``run_dir/<variant>/`` (its training a train run in
    ``run/``) and score them; ``run_dir`` holds the ablation's own ``run.json`` and journal
    (the evaluations, the direct lessons' calls), so the same call resumes it
    (``mas.studies.job``). ``eval_config.budget_usd`` bounds the whole ablation.

    ``learner``, when given, makes the learning calls (``train``'s); ``on_variant`` is told of
    each variant as it starts, ``on_rollout`` of the rollouts done (``planned_rollouts`` of
    them per variant). ``executor`` runs every rollout, training's and evaluation's
    (``mas.executors``; None: in this process)."""
    settings = recorded(scenario, variants, train_config, eval_config, model_name=model_name)
    study = job.Study(
        scenario, client=client, journal=job.open_journal(run_dir, settings), price=price,
        budget_usd=eval_config.budget_usd, on_task=lambda score: on_rollout(len(score.rewards)), executor=executor,
    )  # fmt: skip
    learn = _Learning(scenario, study, learner, train_config, model_name, on_rollout)
    rows, results = [], {}
    for name in sorted(variants, key=lambda v: v != REFERENCE):
        if study.over():
            break
        on_variant(name)
        store = LibraryStore(run_dir / name.replace(" ", "-") / "lib.json")
        cost = await learn(name, store)
        heads = store.heads() if VARIANTS[name] is not None else None
        check_held_out(scenario.held_out[: eval_config.tasks], store)
        result = None if study.stopped else await study.evaluate(name, heads, library_config(eval_config, store))
        if result is None:
            break
        results[name] = result
        lessons = sum(len(v.lessons) for v in (heads or {}).values())
        delta = _delta(name, result, results.get(REFERENCE), seed=eval_config.seed)
        row = Row(
            variant=name, mean_at_k=result.mean_at_k, delta=delta, lessons=lessons, cost_usd=cost + study.cost(result),
            k=result.k, tasks=len(result.tasks),
        )  # fmt: skip
        rows.append(row)
    rows.sort(key=lambda r: variants.index(r.variant))
    return Ablation(rows=rows, cost_usd=study.spent, stopped=study.stopped)


def _delta(name: str, result: EvalResult, reference: EvalResult | None, *, seed: int) -> Estimate | None:
    """The paired change of variant ``name`` from the reference, as mas eval gives it; None for the
    reference itself, whose change from itself would be a "+0.00 [+0.00,+0.00]" measuring nothing."""
    if name == REFERENCE or reference is None:
        return None
    return compare(result, reference, seed=seed)


def recorded(
    scenario: Scenario, variants: list[str], train_config: TrainConfig, eval_config: EvalConfig, *, model_name: str
) -> dict:
    """What the ``run.json`` of an ablation records (``job.settings``): the variants and the
    training settings too (those a resumed run may change left out, as for any run)."""
    training = {k: v for k, v in train_config.model_dump(mode="json").items() if k not in runs.FREE_ON_RESUME}
    return job.settings("ablate", scenario, model=model_name, config=eval_config, variants=variants, training=training)


class _Learning:
    """How each variant gets its libraries: trained (a train run), asked for outright, or none."""

    def __init__(self, scenario, study, learner, config: TrainConfig, model_name: str, on_rollout):
        self.scenario, self.study, self.learner, self.config = scenario, study, learner, config
        self.model_name, self.on_rollout = model_name, on_rollout

    async def __call__(self, name: str, store: LibraryStore) -> float:
        """The variant's libraries in ``store``; their cost, added to the study's spending (a
        training stopped by the budget stops the study)."""
        change, study = VARIANTS[name], self.study
        cost, stopped = 0.0, None
        if change == "direct":
            learner = self.learner or study.client
            cost = await _direct(self.scenario, learner, store, self.config, study.price, study.journal)
        elif change is not None:
            left = None if study.budget_usd is None else study.budget_usd - study.spent
            config = ablated(self.config, change).model_copy(update={"budget_usd": left})
            done = await train(
                self.scenario, client=study.client, store=store, run_dir=store.path.parent / "run", config=config,
                model_name=self.model_name, price=study.price, learner=self.learner, on_rollout=self.on_rollout,
                executor=study.executor,
            )  # fmt: skip
            cost, stopped = done.cost_usd, done.stopped
        study.spent += cost
        if stopped:
            study.over()  # says so with the ablation's spending, not the variant's
        return cost


def planned_rollouts(scenario: Scenario, variant: str, train_config: TrainConfig, eval_config: EvalConfig) -> int:
    """The team rollouts ``variant`` runs: its training (if it trains) and its evaluation."""
    change = VARIANTS[variant]
    total = len(scenario.held_out[: eval_config.tasks]) * eval_config.k
    if isinstance(change, dict):
        config = ablated(train_config, change)
        total += config.epochs * len(scenario.tasks[: config.tasks]) * config.group_size
    return total


async def _direct(
    scenario: Scenario, client, store: LibraryStore, config: TrainConfig, price: Price, journal: Journal
) -> float:
    """Ask each role's library outright for ``max_lessons`` lessons: no rollouts, no groups.
    The calls are journaled: run again, they are read back (and their cost counted again),
    and lessons the library already holds are not added twice."""
    meter, done = Meter(), bool(store.heads())
    examples = "\n".join(f"- {t.question}" for t in scenario.tasks[:5])

    async def one(role):
        try:
            reply = await ask(
                Replayed(client, journal=journal, key=f"direct/{role.name}"), "direct", DirectLessons, meter=meter,
                seed=config.seed, temperature=config.learning_temperature, max_tokens=200 + 60 * config.max_lessons,
                system_role=role.name, system_description=role.description, system_count=config.max_lessons,
                examples=examples,
            )  # fmt: skip
        except (ModelReplyError, EndpointError):
            return None
        edits, _ = parse_edits([{"op": "add", "text": text} for text in reply.lessons[: config.max_lessons]])
        head = store.head(role.name)
        return apply(head, edits, provenance=Provenance(run="direct", epoch=0, step=0, stage="direct"))[0]

    versions = [v for v in await asyncio.gather(*(one(r) for r in scenario.roles)) if v is not None and v.edits]
    if not done:  # committed by an earlier, interrupted run of the same folder
        store.commit(versions)
    return sum(stage_costs(meter.snapshot(), price).values())
