"""The transfer study: what does role A's library do for role B?

Stage: none: evaluation and studies, after training.

Two ways to the same role x role matrix:

- ``transfer`` runs it: cell (A, B) is the change in Mean@k when B's prompt gets A's lessons,
  on held-out tasks with paired seeds (for A != B, B with A's lessons added against the current
  libraries; on the diagonal, A with its own lessons against A with none); the interval is a
  paired bootstrap over tasks (95%).
- ``from_trials`` reads it off the training run's randomized evidence, at no model cost: cell
  (A, B) pools the contrasts of A's lessons shown to B (transfer trials for A != B, A's own
  evidence on the diagonal), clustered by task, with a 95% t interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from itertools import product
from pathlib import Path
from typing import TYPE_CHECKING

from autogen_core.models import ChatCompletionClient
from pydantic import BaseModel

from mas.config import EvalConfig
from mas.cost import Price
from mas.executors import Executor
from mas.library import evidence
from mas.studies import job
from mas.studies.evaluate import EvalResult
from mas.studies.stats import paired
from mas.team.scenario import Scenario
from mas.types.lessons import Version
from mas.types.usage import UsageEvent

if TYPE_CHECKING:
    from mas.library.logs import StepLog


class Cell(BaseModel):
    source: str
    """A: the role whose lessons are injected."""
    target: str
    """B: the role whose prompt gets them."""
    lessons: int
    delta: float | None
    """None: no evidence at all (from trials: none of A's lessons was ever tried on B)."""
    low: float | None
    high: float | None
    """The 95% interval; None when the evidence cannot give one (from trials: fewer than 2
    tasks), rather than a width of zero that would claim certainty."""
    tasks: int | None = None
    """The tasks behind the cell: for a run, those scored (0: A has no lessons, so B's prompt is
    unchanged and the change is 0 exactly); from trials, those of its contrasts."""


class TransferResult(BaseModel):
    baseline: float | None
    """Mean@k with the current libraries; None from trials, which have no baseline, and from a
    run stopped before it measured it (``unmeasured``)."""
    tasks: int
    k: int | None
    """None from trials: they score single rollouts, not k of them."""
    cells: list[Cell]
    source: str = "run"
    """``run`` (a dedicated evaluation) or ``trials`` (the training run's randomized evidence)."""
    cost_usd: float = 0.0
    stopped: str | None = None
    """Why the study ended before its last cell (its budget), or None."""


def unmeasured(result: TransferResult) -> str | None:
    """Why a run's matrix has no baseline to show, or None when it has one (or comes from trials,
    which need none). A run stopped before it scored the current libraries measured nothing: a
    "baseline 0.000" would read as a measured one, and every change is against it."""
    if result.source != "run" or result.baseline is not None:
        return None
    return "transfer: the baseline (the current libraries) was not measured, so no change against it is shown"


def from_trials(
    roles: list[str], events: Iterable[UsageEvent] | StepLog, lineage: dict[str, str] | None = None
) -> TransferResult:
    """The matrix from the randomized evidence in a usage log (``delta`` is a change in the
    success rate when the lesson is shown, not in Mean@k); given the log itself, it is read a
    step at a time."""
    tallies = evidence.contrasts(events, lineage)
    cells = []
    for a in roles:
        for b in roles:
            mine = [t for (role, lesson), t in tallies.items() if role == b and lesson.startswith(f"{a}/")]
            e = evidence.pooled(b, f"{a}/*", mine, 0.025)
            low, high = (e.lcb, e.ucb) if math.isfinite(e.lcb) else (None, None)
            delta = e.effect if e.tasks else None
            cells.append(Cell(source=a, target=b, lessons=len(mine), delta=delta, low=low, high=high, tasks=e.tasks))
    tasks = len({task for t in tallies.values() for task in t.per_task})
    return TransferResult(baseline=None, tasks=tasks, k=None, cells=cells, source="trials")


async def transfer(
    scenario: Scenario,
    *,
    client: ChatCompletionClient,
    heads: dict[str, Version],
    config: EvalConfig = EvalConfig(),
    run_dir: Path | None = None,
    model_name: str = "",
    library: Path | None = None,
    price: Price = Price(),
    on_run: Callable[[str], None] = lambda label: None,
    on_task: Callable[[], None] = lambda: None,
    executor: Executor | None = None,
) -> TransferResult:
    """The matrix by evaluation runs (``planned_runs`` of them); ``on_run`` is told of each as
    it starts, ``on_task`` of each task it scores. With a ``run_dir`` the study is a journaled
    job (``mas.studies.job``) recording ``library`` (the file of ``heads``) and ``model_name``;
    ``config.budget_usd`` stops it, with the cells done so far, once it is spent. ``executor``
    runs the rollouts (``mas.executors``; None: in this process)."""
    journal = None
    if run_dir is not None:
        settings = recorded(scenario, heads, config, model_name=model_name, library=library)
        journal = job.open_journal(run_dir, settings)
    study = job.Study(
        scenario, client=client, journal=journal, price=price, budget_usd=config.budget_usd,
        on_task=lambda score: on_task(), executor=executor,
    )  # fmt: skip

    async def run(key: str, label: str, injected: dict[str, Version]) -> EvalResult | None:
        if study.over():  # the budget is spent: nothing more starts, nor is announced
            return None
        on_run(label)
        return await study.evaluate(key, injected, config)

    base = await run("current", "current libraries", heads)
    cells: list[Cell] = []
    for a, b in product(scenario.role_names, repeat=2) if base is not None else []:
        cell = await _cell(run, heads, a, b, base, seed=config.seed)
        if cell is None:  # the budget is spent
            break
        cells.append(cell)
    baseline, tasks = (base.mean_at_k.value, len(base.tasks)) if base is not None else (None, 0)
    return TransferResult(
        baseline=baseline, tasks=tasks, k=config.k, cells=cells, cost_usd=study.spent, stopped=study.stopped
    )


async def _cell(run, heads: dict[str, Version], a: str, b: str, base: EvalResult, *, seed: int) -> Cell | None:
    """Cell (A, B): B with A's lessons added against the current libraries, or, on the
    diagonal, A with its lessons against A without them. None when its run was not made."""
    lessons = heads[a].lessons if a in heads else []
    if not lessons:  # nothing to inject: no run needed
        return Cell(source=a, target=b, lessons=0, delta=0.0, low=0.0, high=0.0, tasks=0)
    if a == b:
        other = await run(key(a, b), f"{b} without its lessons", {**heads, b: _with(heads, b, [], keep=False)})
    else:
        other = await run(key(a, b), f"{b} with {a}'s lessons", {**heads, b: _with(heads, b, lessons)})
    return None if other is None else measured(a, b, base, other, lessons=len(lessons), seed=seed)


def key(a: str, b: str) -> str:
    """The journal key of cell (A, B)'s evaluation."""
    return f"{b}-" if a == b else f"{a}>{b}"


def measured(a: str, b: str, current: EvalResult, other: EvalResult, *, lessons: int, seed: int) -> Cell:
    """Cell (A, B) from the current libraries' evaluation and the cell's own (``key``): the
    change where B gets A's lessons, or on the diagonal, where A keeps its lessons."""
    with_, without = (current, other) if a == b else (other, current)
    d = paired(with_.per_task(), without.per_task(), seed=seed)
    tasks = len(with_.per_task().keys() & without.per_task().keys())
    return Cell(source=a, target=b, lessons=lessons, delta=d.value, low=d.low, high=d.high, tasks=tasks)


def recorded(
    scenario: Scenario, heads: dict[str, Version], config: EvalConfig, *, model_name: str, library: Path | None
) -> dict:
    """What the ``run.json`` of a transfer study records (``job.settings``)."""
    return job.settings(
        "transfer", scenario, model=model_name, config=config, libraries={"library": job.library(library, heads)}
    )


def planned_runs(roles: list[str], heads: dict[str, Version]) -> int:
    """Evaluation runs ``transfer`` makes: the current libraries, then one per role B for each
    role A that has lessons."""
    return 1 + len(roles) * sum(1 for a in roles if a in heads and heads[a].lessons)


def _with(heads: dict[str, Version], role: str, extra: list, *, keep: bool = True) -> Version:
    own = heads.get(role) or Version.empty(role)
    return own.model_copy(update={"lessons": (own.lessons if keep else []) + list(extra)})
