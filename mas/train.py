"""The training loop: epochs of steps (``mas.step``), budgets, checkpoints and resume.

Stage: none: the loop around the steps (each stage runs in ``mas.step``).

This module orders the steps and records their reports; it has no learning logic of its
own. A run lives in a run directory (``run.json`` with its settings,
``journal.jsonl`` with every stage's output); starting it again resumes where it stopped.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from autogen_core.models import ChatCompletionClient
from pydantic import BaseModel

from mas import runs
from mas.config import TrainConfig, given, seed_of
from mas.cost import Price
from mas.errors import UserError
from mas.executors import Executor
from mas.journal import Journal, read_back
from mas.library import pending
from mas.library.edits import apply
from mas.library.logs import SideFiles
from mas.library.store import LibraryStore
from mas.models.limiter import Limited
from mas.models.tokens import resolve
from mas.step.run import run_step
from mas.team.scenario import Scenario
from mas.types.lessons import Delete, Provenance, Version
from mas.types.reports import StepReport
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
    store: LibraryStore | str | Path,
    run_dir: str | Path,
    config: TrainConfig | dict = TrainConfig(),
    model_name: str = "",
    price: Price = Price(),
    on_step: Callable[[StepReport], None] = lambda report: None,
    learner: ChatCompletionClient | None = None,
    on_rollout: Callable[[int], None] = lambda n: None,
    executor: Executor | None = None,
) -> TrainResult:
    """Train the scenario's role libraries in ``store`` (or the library file at that path);
    resume if ``run_dir`` holds a run. ``config``: a ``TrainConfig`` or a dict of its fields.
    ``learner``, when given, makes the learning calls (summaries, advantages, edits,
    equivalence judgements) and ``client`` only the team's. ``executor`` runs the rollouts
    (``mas.executors``; None: in this process, with ``client``); the learning stages, the
    journal and every library write stay here.

    ``on_step`` gets each step's report as the step ends; ``on_rollout`` the number of rollouts
    done, 1 as each ends (or is read back from the journal) and all of a step at once for a step
    a resumed run finished before.

    The run holds the library file for its whole length (``LibraryStore.exclusive``): a second
    training run, or a rollback, promote, recover or graph export of the same library, is
    refused at once, since it would change the library under the steps of this one."""
    run_dir, store = Path(run_dir), store if isinstance(store, LibraryStore) else LibraryStore(store)
    config = with_tokenizer(given(config, TrainConfig, "config"), client)
    if not scenario.tasks[: config.tasks]:
        raise UserError(f"scenario {scenario.name!r} has no tasks to train on ({len(scenario.held_out)} held out)")
    new = check_run(run_dir, scenario, config, model_name, store.path)  # before anything is written
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
            done = journal.load("step", f"e{epoch}/s{step}", StepReport)  # read back: untrusted
            if done is None:
                provenance = Provenance(
                    run=run_dir.name, epoch=epoch, step=step, task_ids=[t.id for t in batch], model=model_name,
                    budget=config.budget, held_out=scenario.split,
                )  # fmt: skip
                cadence = config.promotion.cadence
                promote = cadence == "step" or (cadence == "epoch" and step == steps_per_epoch - 1)
                report = await run_step(
                    scenario, batch, config, (client, learner), store, journal, provenance, price, promote=promote,
                    last=epoch == config.epochs - 1 and step == steps_per_epoch - 1, on_rollout=on_rollout,
                    executor=executor,
                )  # fmt: skip
                journal.put("step", f"e{epoch}/s{step}", report.model_dump(mode="json"))
                on_step(report)
            else:
                on_rollout(len(batch) * config.group_size)
                report = done
            reports.append(report)
            spent += reports[-1].cost_usd
    return TrainResult(run=run_dir.name, steps=reports, heads=store.heads(), cost_usd=sum(r.cost_usd for r in reports))


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
    steps = [report for _, _, report, _ in read_back(path, {"step": StepReport})]
    return sorted(steps, key=lambda s: (s.epoch, s.step))


def with_tokenizer(config: TrainConfig, client: ChatCompletionClient) -> TrainConfig:
    """``config`` with its budget's ``model`` tokenizer named: the run records what counted."""
    budget = config.budget
    return config.model_copy(
        update={"budget": budget.model_copy(update={"tokenizer": resolve(budget.tokenizer, client)})}
    )


def _order(tasks: list[Task], config: TrainConfig, epoch: int) -> list[Task]:
    if not config.shuffle:
        return list(tasks)
    shuffled = list(tasks)
    random.Random(seed_of(config.seed, "order", epoch)).shuffle(shuffled)
    return shuffled


def _batches(tasks: list[Task], size: int) -> list[list[Task]]:
    return [tasks[i : i + size] for i in range(0, len(tasks), size)]


def check_run(run_dir: Path, scenario: Scenario, config: TrainConfig, model_name: str, library: Path) -> dict | None:
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
