"""A study (``mas eval``, ``ablate``, ``transfer``) as a journaled job, like training: a run
folder (``mas.runs``) whose ``run.json`` records what the study's results depend on, and whose
journal holds each evaluated rollout, each model call of a rollout under way
(``mas.models.wrappers.Replayed``) and each finished evaluation, keyed by the evaluation.

Stage: none: evaluation and studies, after training.

Run again on the same folder, a study reads back what was done and repeats no finished model
call; with other tasks, role prompts, libraries or settings it is refused. Its evaluations
share a budget in dollars: once it is spent, the study stops cleanly before its next
evaluation, with what it has so far, and the same command with a larger budget goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from autogen_core.models import ChatCompletionClient

from mas import runs
from mas.config import EvalConfig
from mas.cost import Price, stage_costs
from mas.executors import Executor
from mas.journal import Journal
from mas.studies.evaluate import EvalResult, TaskScore, evaluate
from mas.team.scenario import Scenario
from mas.types.lessons import Version

NAMES = {**runs.NAMES, "libraries": "libraries", "variants": "variants", "training": "training settings"}
"""What a resumed study must keep besides its settings, as messages name it."""


def settings(kind: str, scenario: Scenario, *, model: str, config: EvalConfig, **more: object) -> dict:
    """What a study's ``run.json`` records: the scored tasks, the role prompts, the settings,
    and ``more`` (the libraries, the variants, ...)."""
    scored = scenario.held_out[: config.tasks]
    return {
        "kind": kind,
        "scenario": scenario.name,
        "model": model,
        "held_out": scenario.split,
        "held_out_tasks": [t.id for t in scored],
        "tasks_sha256": runs.digest([t.model_dump(mode="json") for t in scored]),
        "roles_sha256": runs.digest([r.model_dump(mode="json") for r in scenario.roles]),
        "config": config.model_dump(mode="json"),
        **scenario.sources,
        **more,
    }


def library(path: Path | None, heads: dict[str, Version] | None) -> dict | None:
    """A library as a study records it: its file, and a digest of the versions injected."""
    if heads is None:
        return None
    versions = {name: v.model_dump(mode="json") for name, v in sorted(heads.items())}
    return {"path": str(path.resolve()) if path else None, "sha256": runs.digest(versions)}


def open_journal(run_dir: Path, recorded: dict) -> Journal:
    """The study's journal: a new run folder, or the one ``run_dir`` holds if it is this study's."""
    return runs.open_journal(run_dir, recorded, NAMES)


class Study:
    """What a study's evaluations share: the team's client (or the executor that runs its
    rollouts), the journal, and the budget."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        client: ChatCompletionClient,
        journal: Journal | None = None,
        price: Price = Price(),
        budget_usd: float | None = None,
        on_task: Callable[[TaskScore], None] = lambda score: None,
        executor: Executor | None = None,
    ):
        self.scenario, self.client, self.journal = scenario, client, journal
        self.executor = executor
        """Where the rollouts run (``mas.executors``); None: in this process, with ``client``."""
        self.price, self.budget_usd, self.on_task = price, budget_usd, on_task
        self.spent = 0.0
        """Dollars spent so far, by the evaluations and anything else the study adds."""
        self.stopped: str | None = None
        """Why the study stopped before its end (its budget), or None."""

    def over(self) -> bool:
        """Whether the budget is spent; ``stopped`` then says so."""
        if self.budget_usd is None or self.spent < self.budget_usd:
            return False
        self.stopped = (
            f"budget: ${self.spent:.4f} spent of ${self.budget_usd:g}; "
            "run the same command with a larger --budget-usd to go on"
        )
        return True

    def cost(self, result: EvalResult) -> float:
        return sum(stage_costs(result.calls, self.price).values())

    async def evaluate(self, key: str, heads: dict[str, Version] | None, config: EvalConfig) -> EvalResult | None:
        """The evaluation ``key`` (read back when it was done), or None once the budget is spent."""
        if self.over():
            return None
        result = await evaluate(
            self.scenario, client=self.client, heads=heads, config=config, on_task=self.on_task,
            journal=self.journal, key=key, executor=self.executor,
        )  # fmt: skip
        self.spent += self.cost(result)
        return result
