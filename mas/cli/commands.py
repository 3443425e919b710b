"""``mas train`` and ``report``: the command that trains the team, and the one that reads its
runs (the studies are in ``mas.cli.studies``). ``mas.cli.main`` imports this module only when
one of them runs.

Stage: none: the command line (``mas train`` runs every stage through ``mas.train``).

Only what declaring the commands needs is imported here; each command imports what it runs
(autogen, sympy, networkx and matplotlib among them).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Optional

import typer
from rich.console import Console

from mas import paths
from mas.cli import interrupt
from mas.cli.flags import RunFlags, SourceFlags, run_flags, source_flags
from mas.cli.library import print_lessons, shown
from mas.cli.options import field_type, option, settings
from mas.cli.tracking import stopping, training
from mas.config import PRESETS, PromotionPolicy, TrainConfig, train_config
from mas.redact import redact
from mas.types.lessons import Budget

if TYPE_CHECKING:
    from mas.types.reports import StepReport

app = typer.Typer(rich_markup_mode=None)
"""These commands, for ``mas.cli.main`` to list under ``mas``."""
out, err = Console(soft_wrap=True), Console(stderr=True, soft_wrap=True)

LibraryOpt = Annotated[
    Path | None, typer.Option("--library", help="Library file.", show_default="libraries/SCENARIO.json")
]
Inject = field_type(Budget, "inject")
Cadence = field_type(PromotionPolicy, "cadence")
Preset = Annotated[
    Optional[Literal[tuple(PRESETS)]],  # noqa: UP045
    typer.Option(help="Named settings; explicit options override them.", show_default=False),
]
TestFile = Annotated[
    Path | None,
    typer.Option(
        help="Held-out tasks (JSONL).", show_default="the scenario's test file, else a hash split of its tasks"
    ),
]


@app.command("train")
@run_flags
@source_flags
def train_command(
    preset: Preset = None,
    epochs: int = option(TrainConfig, "epochs"),
    batch_size: int = option(TrainConfig, "batch_size"),
    group_size: int = option(TrainConfig, "group_size"),
    tasks: int | None = option(TrainConfig, "tasks", help="Train on the first N tasks.", show_default="all"),
    ground_truth: bool = option(TrainConfig, "ground_truth", "--ground-truth/--no-ground-truth"),
    temperature: float = option(TrainConfig, "temperature"),
    max_tokens: int = option(TrainConfig, "max_tokens"),
    max_lessons: int = option(TrainConfig, "max_lessons"),
    shuffle: bool = option(TrainConfig, "shuffle", "--shuffle/--no-shuffle"),
    fresh: bool = option(TrainConfig, "fresh", "--fresh"),
    review: bool = option(TrainConfig, "review", "--review"),
    rollout_timeout: float = option(TrainConfig, "rollout_timeout"),
    inject: Inject = option(Budget, "inject"),
    promote_every: Cadence = option(PromotionPolicy, "cadence", "--promote-every"),
    seed: int = option(TrainConfig, "seed"),
    library: LibraryOpt = None,
    test_file: TestFile = None,
    run_dir: Annotated[
        Path | None,
        typer.Option(help="Run directory; an existing one is resumed.", show_default="runs/SCENARIO-TIME"),
    ] = None,
    source: SourceFlags = None,
    run: RunFlags = None,
) -> None:
    """Train the role libraries of SCENARIO (or of an autogen --team) with Training-Free GRPO."""
    from mas import runs
    from mas.cli.progress import bars, wanted
    from mas.cli.summary import count, failed_line, near, refused_line, starting_line, unread_line
    from mas.library.store import LibraryStore
    from mas.models.wrappers import Counted
    from mas.train import check_run, train, with_tokenizer

    spec = source.load(test_file=test_file, say=_note, trust=run.trust)
    config = settings(
        train_config, {"budget": "--inject", "promotion": "--promote-every"}, preset=preset,
        tasks=tasks, epochs=epochs, batch_size=batch_size, group_size=group_size, temperature=temperature,
        max_tokens=max_tokens, max_lessons=max_lessons, shuffle=shuffle, rollout_timeout=rollout_timeout,
        seed=seed, ground_truth=ground_truth, fresh=fresh, review=review, **run.limits(),
        budget=Budget(inject=inject) if inject else None,
        promotion=PromotionPolicy(cadence=promote_every) if promote_every else None,
    )  # fmt: skip
    clients = run.clients()
    clients.check_executor(config)
    price = run.price(clients)
    store = LibraryStore(library or paths.library_file(spec.name))
    heads = store.heads()  # a corrupt library file stops us here, before anything is written
    run_dir = run_dir or paths.new_run_dir(spec.name)
    runs.expect(run_dir, "train")  # a study's folder is refused before a line says anything
    steps = config.epochs * -(-len(spec.tasks[: config.tasks]) // config.batch_size)
    tracked = training(run.track, spec.name, run_dir, steps_per_epoch=steps // config.epochs, roles=spec.role_names)
    starting = starting_line(store.path, heads, run_dir, fresh=config.fresh, steps=steps)
    if unread := unread_line(store.path, heads, spec.role_names):
        starting += f"\n{unread}"

    async def main():
        async with run.open(clients) as (client, learner), run.rollouts(clients, spec, config) as executor:
            counted = Counted(client)
            # The model is known once its client is open; a resume with other settings is refused by
            # train's own check, run here first: a refusal is then the only line the command prints.
            check_run(run_dir, spec, with_tokenizer(config, counted), clients.label, store.path)
            _tell(starting)
            rollouts = config.epochs * len(spec.tasks[: config.tasks]) * config.group_size
            with bars(err, show=wanted(err), client=executor or counted) as bar:  # Ray's: every worker's calls
                job = bar.add_task("training", total=rollouts, unit="rollouts")
                return await train(
                    spec, client=counted, store=store, run_dir=run_dir, config=config, model_name=clients.label,
                    price=price, learner=learner,
                    on_step=lambda report: _stepped(bar, report, tracked),
                    on_rollout=lambda n: bar.advance(job, n), executor=executor,
                )  # fmt: skip

    with stopping(tracked):
        result = interrupt.run_in(run_dir, main())
    if tracked is not None:
        tracked.stop("FINISHED", store)
    cost = f"${result.cost_usd:.4f}" if price.known else f"unknown (no price for {clients.label!r}; see --prices)"
    out.print(f"run {result.run}: {count(len(result.steps), 'step')}, cost {cost}, journal in {run_dir}")
    if result.stopped:
        out.print(f"stopped early: {result.stopped}")
    refused = refused_line(result.steps)
    _tell(refused if refused.endswith("nothing") else f"{refused}; see mas library show {near(store.path)} --rejected")
    _tell(failed_line(result.steps))
    waiting = 0
    if config.review:
        from mas.library.pending import queue

        waiting = sum(held.open for held in queue(store))
        _tell(f"{count(waiting, 'held edit')} waiting for review: mas library review {near(store.path)}")
    learned = any(v.lessons for v in result.heads.values())
    if not learned and not waiting:  # with held edits, the line above says where the lessons are
        out.print(f"no lessons yet in {store.path} (no group had both winners and losers, or no edit was valid)")
    print_lessons(result.heads)
    if learned and source.team is None and source.scenario is not None:
        _tell(f"next: {_eval_command(source, library, run, test_file)}")


@app.command("report")
def report_command(
    run_dirs: Annotated[list[Path], typer.Argument(metavar="RUN_DIR", help="One or more run directories (runs/...).")],
    output: Path | None = typer.Option(None, help="Folder for report.md and the PNG plots.", show_default="report"),
) -> None:
    """Markdown and PNG plots of training runs and studies: reward, library size, tool calls, promotions,
    what was refused and what failed."""
    from mas.studies.report import write_report

    path = write_report(run_dirs, output or paths.report_dir())
    out.print(f"wrote {path}")


def _eval_command(source: SourceFlags, library: Path | None, run: RunFlags, test_file: Path | None) -> str:
    """The ``mas eval`` that scores what a training run learned: its scenario, library and model,
    and how its tasks were read (with the fields' other names, or the test file, left out the
    command failed on the first task, or scored a split of the training file)."""
    words = ["mas", "eval", source.scenario]
    given = {
        "--library": library, "--test-file": test_file, "--model": run.model, "--base-url": run.base_url,
        "--model-config": run.model_config,
        "--question-field": source.question_field if source.question_field != "question" else None,
        "--answer-field": source.answer_field if source.answer_field != "answer" else None,
    }  # fmt: skip
    words += [part for flag, value in given.items() if value is not None for part in (flag, str(value))]
    return shlex.join(words) + "   # Mean@k on held-out tasks, without and with the lessons"


def _step_line(r: StepReport) -> str:
    from mas.studies.by_kind import count

    applied = ", ".join(f"{k} {count(v, 'edit')}" for k, v in r.applied.items()) or "no edits"
    applied += f", {r.pending} held for review" if r.pending else ""
    refused = sum(len(v) for v in r.rejected.values())
    applied += f" ({refused} refused)" if refused else ""
    applied += "".join(
        f", {n} {what}"
        for n, what in (
            (sum(r.retired.values()), "retired"),
            (r.promoted, "promoted"),
            (r.demoted, "demoted"),
            (r.adopted, "adopted"),
        )
        if n
    )
    calls = sum(c.calls for c in r.calls.values())
    failures = sum(c.failures for c in r.calls.values())
    if r.endpoint and r.endpoint.retries:
        failures_text = f", {r.endpoint.retries} retries after endpoint faults"
    else:
        failures_text = ""
    return (
        f"epoch {r.epoch} step {r.step}: reward {r.mean_reward:.2f}, {r.informative}/{r.groups} groups informative, "
        f"{applied}, {calls} calls, {failures} failures{failures_text}, {r.seconds:.1f} s"
    )


def _stepped(bar, report: StepReport, tracked) -> None:
    bar.console.print(_step_line(report))
    if tracked is not None:
        tracked.step(report)


def _tell(message: str) -> None:
    out.print(shown(redact(message)), markup=False, highlight=False)


def _note(message: str) -> None:
    """How mas chose a team or reward: on stdout, so that an error after it is still the only
    line on stderr (``--json`` prints no note)."""
    out.print(shown(redact(message)), markup=False, highlight=False)
