"""Ablations as one command: the paper's (no library, directly generated lessons, group size
1, no ground truth) and ours (private libraries only, global only, promotion off), each
trained on the same training tasks and evaluated on the same held-out tasks and seeds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from autogen_core.models import ChatCompletionClient
from pydantic import BaseModel

from mas.ask import ask
from mas.config import ABLATIONS, EvalConfig, TrainConfig, ablated
from mas.cost import Price, stage_costs
from mas.errors import EndpointError, ModelReplyError, UserError
from mas.library.edits import apply, parse_edits
from mas.library.store import LibraryStore
from mas.meter import Meter
from mas.scenario import Scenario
from mas.studies.evaluate import check_held_out, compare, evaluate, library_config
from mas.studies.stats import Estimate
from mas.train import train
from mas.types import DirectLessons, Provenance

VARIANTS = ABLATIONS
"""Each variant's changes to the training settings; None trains nothing, "direct" asks."""


class Row(BaseModel):
    variant: str
    mean_at_k: Estimate
    delta: Estimate
    """Paired difference from "no library"."""
    lessons: int
    cost_usd: float


async def ablate(
    scenario: Scenario,
    *,
    client: ChatCompletionClient,
    folder: Path,
    train_config: TrainConfig,
    eval_config: EvalConfig,
    variants: list[str] = list(VARIANTS),
    model_name: str = "",
    price: Price = Price(),
    on_variant: Callable[[str], None] = lambda name: None,
    learner: ChatCompletionClient | None = None,
    on_rollout: Callable[[int], None] = lambda n: None,
) -> list[Row]:
    """Run each variant in ``folder/<variant>/`` (resumable like any run) and score it.
    ``learner``, when given, makes the learning calls (``train``'s); ``on_variant`` is told of
    each variant as it starts, ``on_rollout`` of the rollouts done (``planned_rollouts`` of
    them per variant)."""
    _check_folder(folder)
    rows, results = [], {}
    for name in variants:
        on_variant(name)
        change = VARIANTS[name]
        store = LibraryStore(folder / name.replace(" ", "-") / "lib.json")
        cost = 0.0
        if change == "direct":
            cost = await _direct(scenario, learner or client, store, train_config, price)
        elif change is not None:
            config = ablated(train_config, change)
            done = await train(
                scenario, client=client, store=store, run_dir=store.path.parent / "run", config=config,
                model_name=model_name, price=price, learner=learner, on_rollout=on_rollout,
            )  # fmt: skip
            cost = done.cost_usd
        heads = store.heads() if change is not None else None
        check_held_out(scenario.held_out[: eval_config.tasks], store)
        result = await evaluate(
            scenario, client=client, heads=heads, config=library_config(eval_config, store),
            on_task=lambda score: on_rollout(len(score.rewards)),
        )  # fmt: skip
        results[name] = result
        cost += sum(stage_costs(result.calls, price).values())
        base = results.get("no library", result)
        lessons = sum(len(v.lessons) for v in (heads or {}).values())
        rows.append(
            Row(variant=name, mean_at_k=result.mean_at_k, delta=compare(result, base), lessons=lessons, cost_usd=cost)
        )
    return rows


def _check_folder(folder: Path) -> None:
    """An ablation folder is new, or holds the variants' folders and nothing else."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder}: not a folder (--folder names an ablation folder, new or to resume)")
    ours = {name.replace(" ", "-") for name in VARIANTS}
    other = sorted(p.name for p in folder.iterdir() if p.name not in ours) if folder.is_dir() else []
    if other:
        raise UserError(f"{folder}: not an ablation folder (it holds {other[0]}); use a new --folder")


def planned_rollouts(scenario: Scenario, variant: str, train_config: TrainConfig, eval_config: EvalConfig) -> int:
    """The team rollouts ``variant`` runs: its training (if it trains) and its evaluation."""
    change = VARIANTS[variant]
    total = len(scenario.held_out[: eval_config.tasks]) * eval_config.k
    if isinstance(change, dict):
        config = ablated(train_config, change)
        total += config.epochs * len(scenario.tasks[: config.tasks]) * config.group_size
    return total


async def _direct(scenario: Scenario, client, store: LibraryStore, config: TrainConfig, price: Price) -> float:
    """Ask each role's library outright for ``max_lessons`` lessons: no rollouts, no groups."""
    if store.heads():
        return 0.0  # done in an earlier, interrupted run of the same folder
    meter = Meter()
    examples = "\n".join(f"- {t.question}" for t in scenario.tasks[:5])

    async def one(role):
        try:
            reply = await ask(
                client, "direct", DirectLessons, meter=meter, seed=config.seed, temperature=config.learning_temperature,
                max_tokens=200 + 60 * config.max_lessons,
                system_role=role.name, system_description=role.description, system_count=config.max_lessons,
                examples=examples,
            )  # fmt: skip
        except (ModelReplyError, EndpointError):
            return None
        edits, _ = parse_edits([{"op": "add", "text": text} for text in reply.lessons[: config.max_lessons]])
        head = store.head(role.name)
        return apply(head, edits, provenance=Provenance(run="direct", epoch=0, step=0, stage="direct"))[0]

    versions = [v for v in await asyncio.gather(*(one(r) for r in scenario.roles)) if v is not None and v.edits]
    store.commit(versions)
    return sum(stage_costs(meter.snapshot(), price).values())
