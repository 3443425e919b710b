"""``mas train``, ``eval``, ``transfer``, ``ablate`` and ``report``: the commands that run the
team (or read its runs). ``mas.cli.main`` imports this module only when one of them runs.

Only what declaring the commands needs is imported here; each command imports what it runs
(autogen, sympy, networkx and matplotlib among them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Optional

import typer
from rich.console import Console

from mas import paths
from mas.cli import interrupt
from mas.cli.library import print_lessons, shown
from mas.cli.options import field_type, option, settings
from mas.cli.sources import (
    AnswerField,
    LearnerConfig,
    ModelConfig,
    QuestionField,
    Reasoning,
    Reward,
    ScenarioArg,
    TasksFile,
    Team,
    Trust,
    models,
    scenario_from,
)
from mas.cli.tracking import Track, log_ablate, log_eval, log_transfer, stopping, tracker, training
from mas.config import ABLATIONS, PRESETS, EvalConfig, PromotionPolicy, TrainConfig, train_config
from mas.errors import UserError
from mas.redact import redact
from mas.tools import isolation
from mas.types import Budget

if TYPE_CHECKING:
    from mas.studies.evaluate import EvalResult
    from mas.types import StepReport

app = typer.Typer(rich_markup_mode=None)
"""These commands, for ``mas.cli.main`` to list under ``mas``."""
out, err = Console(soft_wrap=True), Console(stderr=True, soft_wrap=True)

Model = Annotated[str, typer.Option("--model", help="local (embedded SmolLM2-135M), openai:MODEL, or fake.")]
BaseUrl = Annotated[str | None, typer.Option(help="OpenAI-compatible base URL (or MAS_BASE_URL).")]
ApiKey = Annotated[str | None, typer.Option(help="API key (or OPENAI_API_KEY).", show_default=False)]
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
Prices = Annotated[Path | None, typer.Option(help="Price table (TOML).", show_default="the shipped examples")]
UnsafePython = Annotated[
    bool,
    typer.Option(
        "--unsafe-python-tool",
        help=f"Run the python tool without isolation (no bubblewrap needed; same as {isolation.UNSAFE_ENV}=1): "
        "model-written code can read, write and reach whatever you can.",
    ),
]


@app.command("train")
def train_command(
    scenario: ScenarioArg = None,
    model: Model = "local",
    preset: Preset = None,
    epochs: int = option(TrainConfig, "epochs"),
    batch_size: int = option(TrainConfig, "batch_size"),
    group_size: int = option(TrainConfig, "group_size"),
    tasks: int | None = option(TrainConfig, "tasks"),
    ground_truth: bool = option(TrainConfig, "ground_truth", "--ground-truth/--no-ground-truth"),
    temperature: float = option(TrainConfig, "temperature"),
    max_tokens: int = option(TrainConfig, "max_tokens"),
    max_lessons: int = option(TrainConfig, "max_lessons"),
    shuffle: bool = option(TrainConfig, "shuffle", "--shuffle/--no-shuffle"),
    fresh: bool = option(TrainConfig, "fresh", "--fresh"),
    review: bool = option(TrainConfig, "review", "--review"),
    rollout_timeout: float = option(TrainConfig, "rollout_timeout"),
    concurrency: int = option(TrainConfig, "concurrency"),
    call_timeout: float = option(TrainConfig, "call_timeout"),
    retries: int = option(TrainConfig, "retries"),
    budget_usd: float | None = option(TrainConfig, "budget_usd"),
    prices: Prices = None,
    inject: Inject = option(Budget, "inject"),
    promote_every: Cadence = option(PromotionPolicy, "cadence", "--promote-every"),
    seed: int = option(TrainConfig, "seed"),
    library: LibraryOpt = None,
    test_file: TestFile = None,
    run_dir: Annotated[
        Path | None,
        typer.Option(help="Run directory; an existing one is resumed.", show_default="runs/SCENARIO-TIME"),
    ] = None,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
    unsafe_python_tool: UnsafePython = False,
    team: Team = None,
    tasks_file: TasksFile = None,
    reward: Reward = None,
    question_field: QuestionField = "question",
    answer_field: AnswerField = "answer",
    model_config: ModelConfig = None,
    learner_config: LearnerConfig = None,
    reasoning: Reasoning = None,
    track: Track = None,
    trust: Trust = None,
) -> None:
    """Train the role libraries of SCENARIO (or of an autogen --team) with Training-Free GRPO."""
    from mas.cli.progress import bars, wanted
    from mas.cli.summary import count, failed_line, near, refused_line, starting_line
    from mas.cost import price_for
    from mas.datasets import Fields
    from mas.library.store import LibraryStore
    from mas.models.wrappers import Counted
    from mas.train import train

    _allow_unsafe_python(unsafe_python_tool)
    spec = scenario_from(
        scenario, team=team, tasks_file=tasks_file, reward=reward, fields=Fields(question_field, answer_field),
        test_file=test_file, say=_note, trust=trust,
    )  # fmt: skip
    config = settings(
        train_config, {"budget": "--inject", "promotion": "--promote-every"}, preset=preset,
        tasks=tasks, epochs=epochs, batch_size=batch_size, group_size=group_size, temperature=temperature,
        max_tokens=max_tokens, max_lessons=max_lessons, shuffle=shuffle, rollout_timeout=rollout_timeout,
        concurrency=concurrency, seed=seed, ground_truth=ground_truth, budget_usd=budget_usd,
        call_timeout=call_timeout, retries=retries, fresh=fresh, review=review,
        budget=Budget(inject=inject) if inject else None,
        promotion=PromotionPolicy(cadence=promote_every) if promote_every else None,
    )  # fmt: skip
    clients = models(
        model, model_config=model_config, learner_config=learner_config, reasoning=reasoning,
        call_timeout=call_timeout, retries=retries, trust=trust,
    )  # fmt: skip
    price = price_for(clients.label, prices)
    store = LibraryStore(library or paths.library_file(spec.name))
    heads = store.heads()  # a corrupt library file stops us here, before anything is written
    run_dir = run_dir or paths.new_run_dir(spec.name)
    steps = config.epochs * -(-len(spec.tasks[: config.tasks]) // config.batch_size)
    tracked = training(track, spec.name, run_dir, steps_per_epoch=steps // config.epochs, roles=spec.role_names)
    _tell(starting_line(store.path, heads, run_dir, fresh=config.fresh, steps=steps))

    async def main():
        async with clients.open(
            base_url=base_url, api_key=api_key, call_timeout=call_timeout, retries=retries, reasoning=reasoning
        ) as (client, learner):
            counted = Counted(client)
            rollouts = config.epochs * len(spec.tasks[: config.tasks]) * config.group_size
            with bars(err, show=wanted(err), client=counted) as bar:
                job = bar.add_task("training", total=rollouts, unit="rollouts")
                return await train(
                    spec, client=counted, store=store, run_dir=run_dir, config=config, model_name=clients.label,
                    price=price, learner=learner,
                    on_step=lambda report: _stepped(bar, report, tracked),
                    on_rollout=lambda n: bar.advance(job, n),
                )  # fmt: skip

    with stopping(tracked):
        result = interrupt.run(main(), resume=f"run the same command with --run-dir {run_dir} to resume")
    if tracked is not None:
        tracked.stop("FINISHED", store)
    cost = f"${result.cost_usd:.4f}" if price.known else f"unknown (no price for {clients.label!r}; see --prices)"
    out.print(f"run {result.run}: {count(len(result.steps), 'step')}, cost {cost}, journal in {run_dir}")
    if result.stopped:
        out.print(f"stopped early: {result.stopped}")
    refused = refused_line(result.steps)
    _tell(refused if refused.endswith("nothing") else f"{refused}; see mas library show {near(store.path)} --rejected")
    _tell(failed_line(result.steps))
    if config.review:
        from mas.library.pending import queue

        waiting = sum(held.open for held in queue(store))
        _tell(f"{count(waiting, 'held edit')} waiting for review: mas library review {near(store.path)}")
    if not any(v.lessons for v in result.heads.values()):
        out.print(f"no lessons yet in {store.path} (no group had both winners and losers, or no edit was valid)")
    print_lessons(result.heads)


@app.command("eval")
def eval_command(
    scenario: ScenarioArg = None,
    model: Model = "local",
    k: int = option(EvalConfig, "k"),
    tasks: int | None = option(EvalConfig, "tasks", help="Evaluate on the first N held-out tasks."),
    library: LibraryOpt = None,
    compare: Path | None = typer.Option(
        None, help="A second library file, evaluated on the same tasks and seeds (A/B)."
    ),
    no_library: bool = typer.Option(False, "--no-library", help="Only the baseline, no library."),
    test_file: TestFile = None,
    prices: Prices = None,
    temperature: float = option(EvalConfig, "temperature"),
    max_tokens: int = option(EvalConfig, "max_tokens"),
    concurrency: int = option(EvalConfig, "concurrency"),
    call_timeout: float = option(EvalConfig, "call_timeout"),
    retries: int = option(EvalConfig, "retries"),
    seed: int = option(EvalConfig, "seed"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
    unsafe_python_tool: UnsafePython = False,
    team: Team = None,
    tasks_file: TasksFile = None,
    reward: Reward = None,
    question_field: QuestionField = "question",
    answer_field: AnswerField = "answer",
    model_config: ModelConfig = None,
    reasoning: Reasoning = None,
    track: Track = None,
    trust: Trust = None,
) -> None:
    """Mean@k and Pass@k without and with libraries, on the same held-out tasks and seeds.

    Each library is evaluated with the prompt composition it was trained with, and a task any
    of them was trained on is refused."""
    from rich.table import Table

    from mas.cli.progress import bars, wanted
    from mas.cost import price_for, stage_costs
    from mas.datasets import Fields
    from mas.library.store import LibraryStore
    from mas.studies.evaluate import check_held_out, evaluate, library_config
    from mas.studies.evaluate import compare as compare_results

    _allow_unsafe_python(unsafe_python_tool)
    spec = scenario_from(
        scenario, team=team, tasks_file=tasks_file, reward=reward, fields=Fields(question_field, answer_field),
        test_file=test_file, say=_note if not as_json else None, trust=trust,
    )  # fmt: skip
    config = settings(
        EvalConfig, k=k, tasks=tasks, temperature=temperature, max_tokens=max_tokens, concurrency=concurrency, seed=seed,
        call_timeout=call_timeout, retries=retries,
    )  # fmt: skip
    clients = models(
        model, model_config=model_config, reasoning=reasoning, call_timeout=call_timeout, retries=retries, trust=trust
    )
    price = price_for(clients.label, prices)
    scored = spec.held_out[: config.tasks]
    if not scored:
        raise UserError(f"{spec.name}: no held-out tasks to score (give a --test-file)")
    runs: list[tuple[str, dict | None, EvalConfig]] = [("none", None, config)]
    paths_given = [] if no_library else [(library or paths.library_file(spec.name), library is not None)]
    paths_given += [(compare, True)] if compare is not None else []
    for path, named in paths_given:
        if not path.exists():
            if named:
                raise UserError(f"{path}: no such library file")
            if not as_json:
                _note(f"no library at {path} yet: the team is scored without lessons only")
            continue
        store = LibraryStore(path)
        check_held_out(scored, store)
        runs.append((str(path), store.heads(), library_config(config, store)))
    tracking = tracker(track, spec.name)

    async def main():
        async with clients.open(
            base_url=base_url, api_key=api_key, call_timeout=call_timeout, retries=retries, reasoning=reasoning
        ) as (client, _):
            results = []
            for label, heads, run_config in runs:
                with bars(err, show=wanted(err, as_json=as_json)) as bar:
                    job = bar.add_task(f"eval ({Path(label).name})", total=len(scored), unit="tasks")
                    done = await evaluate(
                        spec, client=client, heads=heads, config=run_config,
                        on_task=lambda s, job=job: bar.advance(job),
                    )  # fmt: skip
                    results.append(done)
            return results

    results: list[EvalResult] = interrupt.run(main())
    log_eval(
        tracking, labels=[Path(label).name for label, _, _ in runs], results=results,
        params=_params(spec, clients.label, libraries=[label for label, _, _ in runs], config=config),
    )  # fmt: skip
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in results], indent=1))
        return
    table = Table("", *(Path(label).name for label, _, _ in runs))
    table.add_row("injected", *(r.library for r in results))
    table.add_row(f"Mean@{config.k}", *(str(r.mean_at_k) for r in results))
    table.add_row(f"Pass@{config.k}", *(str(r.pass_at_k) for r in results))
    table.add_row("vs none (paired)", "", *(str(compare_results(r, results[0], seed=config.seed)) for r in results[1:]))
    for role in spec.role_names:
        table.add_row(f"tool calls, {role}", *(r.tool_calls[role].format(".1f") for r in results))
    for role in spec.role_names:
        table.add_row(f"tokens, {role}", *(r.tokens[role].format(".0f") for r in results))
    if price.known:
        table.add_row("cost $", *(f"{sum(stage_costs(r.calls, price).values()):.4f}" for r in results))
    out.print(table)
    out.print(
        f"{len(results[0].tasks)} held-out tasks ({spec.split}), k={config.k}; per rollout; [95% bootstrap interval over tasks]"
    )


@app.command("transfer")
def transfer_command(
    scenario: ScenarioArg = None,
    model: Model = "local",
    k: int = option(EvalConfig, "k"),
    tasks: int | None = option(EvalConfig, "tasks", help="The first N held-out tasks."),
    library: LibraryOpt = None,
    test_file: TestFile = None,
    from_trials: bool = typer.Option(
        False, "--from-trials", help="Read the matrix off the training run's transfer trials instead (no model calls)."
    ),
    concurrency: int = option(EvalConfig, "concurrency"),
    seed: int = option(EvalConfig, "seed"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
    unsafe_python_tool: UnsafePython = False,
    team: Team = None,
    tasks_file: TasksFile = None,
    reward: Reward = None,
    question_field: QuestionField = "question",
    answer_field: AnswerField = "answer",
    model_config: ModelConfig = None,
    reasoning: Reasoning = None,
    track: Track = None,
    trust: Trust = None,
) -> None:
    """Role x role matrix: the change in Mean@k when role B's prompt gets role A's lessons (or,
    with --from-trials, the change in success rate the randomized transfer trials measured)."""
    from mas.cli.progress import bars, wanted
    from mas.datasets import Fields
    from mas.library.logs import SideFiles
    from mas.library.store import LibraryStore
    from mas.studies.evaluate import check_held_out, library_config
    from mas.studies.transfer import from_trials as from_trials_of
    from mas.studies.transfer import planned_runs, transfer

    _allow_unsafe_python(unsafe_python_tool)
    spec = scenario_from(
        scenario, team=team, tasks_file=tasks_file, reward=reward, fields=Fields(question_field, answer_field),
        test_file=test_file, say=_note if not as_json else None, trust=trust,
    )  # fmt: skip
    path = library or paths.library_file(spec.name)
    if not path.exists():
        raise UserError(f"{path}: no such library file")
    store = LibraryStore(path)
    tracking = tracker(track, spec.name)
    if from_trials:
        result = from_trials_of(spec.role_names, SideFiles(path).usage)
        log_transfer(tracking, params=_params(spec, "", libraries=[str(path)]), result=result)
        _print_transfer(spec.role_names, result, as_json)
        return
    heads = store.heads()
    config = library_config(settings(EvalConfig, k=k, tasks=tasks, concurrency=concurrency, seed=seed), store)
    check_held_out(spec.held_out[: config.tasks], store)

    clients = models(model, model_config=model_config, reasoning=reasoning, trust=trust)

    async def main():
        async with clients.open(base_url=base_url, api_key=api_key, reasoning=reasoning) as (client, _):
            with bars(err, show=wanted(err, as_json=as_json)) as bar:
                total = planned_runs(spec.role_names, heads) * len(spec.held_out[: config.tasks])
                job = bar.add_task("transfer", total=total, unit="tasks")
                return await transfer(
                    spec, client=client, heads=heads, config=config, on_run=lambda label: bar.console.print(f"eval: {label}"),
                    on_task=lambda: bar.advance(job),
                )  # fmt: skip

    result = interrupt.run(main())
    log_transfer(tracking, params=_params(spec, clients.label, libraries=[str(path)], config=config), result=result)
    _print_transfer(spec.role_names, result, as_json)


def _print_transfer(roles: list[str], result, as_json: bool) -> None:
    from rich.table import Table

    if as_json:
        print(result.model_dump_json(indent=1))
        return
    title = (
        f"success-rate change when shown, from transfer trials over {result.tasks} tasks, 95% CI"
        if result.source == "trials"
        else f"Mean@{result.k} change on {result.tasks} tasks (baseline {result.baseline:.3f}), 95% CI"
    )
    table = Table("lessons of \\ into", *roles, title=title)
    for a in roles:
        cells = {c.target: c for c in result.cells if c.source == a}
        table.add_row(a, *(f"{cells[b].delta:+.2f} [{cells[b].low:+.2f},{cells[b].high:+.2f}]" for b in roles))
    out.print(table)


@app.command("ablate")
def ablate_command(
    scenario: ScenarioArg = None,
    model: Model = "local",
    variants: str | None = typer.Option(None, help=f"Comma-separated subset of: {', '.join(ABLATIONS)}."),
    tasks: int = typer.Option(8, min=1, help="Training tasks."),
    test_tasks: int = typer.Option(20, min=1, help="Held-out tasks."),
    epochs: int = option(TrainConfig, "epochs"),
    group_size: int = option(TrainConfig, "group_size", help="G for the variants that compare within groups."),
    k: int = option(EvalConfig, "k"),
    concurrency: int = option(TrainConfig, "concurrency"),
    seed: int = option(TrainConfig, "seed"),
    folder: Path | None = typer.Option(
        None, help="Where the variants' runs go; an existing one is resumed.", show_default="runs/ablate-SCENARIO-TIME"
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    prices: Prices = None,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
    unsafe_python_tool: UnsafePython = False,
    team: Team = None,
    tasks_file: TasksFile = None,
    reward: Reward = None,
    question_field: QuestionField = "question",
    answer_field: AnswerField = "answer",
    model_config: ModelConfig = None,
    learner_config: LearnerConfig = None,
    reasoning: Reasoning = None,
    track: Track = None,
    trust: Trust = None,
) -> None:
    """The paper's ablations and ours, trained and evaluated alike, in one table."""
    from rich.table import Table

    from mas.cli.progress import bars, wanted
    from mas.cost import price_for
    from mas.datasets import Fields
    from mas.studies.ablate import ablate, planned_rollouts

    _allow_unsafe_python(unsafe_python_tool)
    spec = scenario_from(
        scenario, team=team, tasks_file=tasks_file, reward=reward, fields=Fields(question_field, answer_field),
        say=_note if not as_json else None, trust=trust,
    )  # fmt: skip
    chosen = [v.strip() for v in variants.split(",")] if variants else list(ABLATIONS)
    unknown = [v for v in chosen if v not in ABLATIONS]
    if unknown:
        raise UserError(f"--variants: unknown {', '.join(map(repr, unknown))} (known: {', '.join(ABLATIONS)})")
    if "no library" not in chosen:
        chosen.insert(0, "no library")
    train_config = settings(
        TrainConfig, tasks=tasks, epochs=epochs, group_size=group_size, concurrency=concurrency, seed=seed
    )
    eval_config = settings(EvalConfig, tasks=test_tasks, k=k, concurrency=concurrency, seed=seed)
    clients = models(model, model_config=model_config, learner_config=learner_config, reasoning=reasoning, trust=trust)
    price = price_for(clients.label, prices)
    folder = folder or paths.new_run_dir(f"ablate-{spec.name}")
    tracking = tracker(track, spec.name)

    async def main():
        async with clients.open(base_url=base_url, api_key=api_key, reasoning=reasoning) as (client, learner):
            with bars(err, show=wanted(err, as_json=as_json)) as bar:
                total = sum(planned_rollouts(spec, name, train_config, eval_config) for name in chosen)
                job = bar.add_task("ablation", total=total, unit="rollouts")
                return await ablate(
                    spec, client=client, folder=folder, train_config=train_config, eval_config=eval_config,
                    variants=chosen, model_name=clients.label, price=price, learner=learner,
                    on_variant=lambda name: bar.console.print(f"ablation: {name}"),
                    on_rollout=lambda n: bar.advance(job, n),
                )  # fmt: skip

    rows = interrupt.run(main(), resume=f"run the same command with --folder {folder} to resume")
    params = _params(
        spec, clients.label, libraries=[], folder=str(folder), variants=chosen, train=train_config, eval=eval_config
    )
    log_ablate(tracking, params=params, rows=rows)
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in rows], indent=1))
        return
    table = Table(
        "variant",
        f"Mean@{k}",
        "vs no library (paired)",
        "lessons",
        "cost $",
        title=f"{spec.name}: {tasks} training tasks, {test_tasks} held-out",
    )
    for r in rows:
        table.add_row(
            r.variant,
            str(r.mean_at_k),
            "" if r.variant == "no library" else str(r.delta),
            str(r.lessons),
            f"{r.cost_usd:.4f}",
        )
    out.print(table)
    out.print(f"runs in {folder}")


@app.command("report")
def report_command(
    run_dirs: Annotated[list[Path], typer.Argument(metavar="RUN_DIR", help="One or more run directories (runs/...).")],
    output: Path | None = typer.Option(None, help="Folder for report.md and the PNG plots.", show_default="report"),
) -> None:
    """Markdown and PNG plots of training runs: reward, library size, tool calls, promotions."""
    from mas.studies.report import write_report

    path = write_report(run_dirs, output or paths.report_dir())
    out.print(f"wrote {path}")


def _step_line(r: StepReport) -> str:
    applied = ", ".join(f"{k} {v} edits" for k, v in r.applied.items()) or "no edits"
    applied += f", {r.pending} held for review" if r.pending else ""
    refused = sum(len(v) for v in r.rejected.values())
    applied += f" ({refused} refused)" if refused else ""
    applied += "".join(
        f", {n} {what}"
        for n, what in ((sum(r.retired.values()), "retired"), (r.promoted, "promoted"), (r.demoted, "demoted"))
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


def _params(spec, model: str, *, libraries: list[str], **settings) -> dict:
    """A study's settings as MLflow params (``--track``): the scenario, the model, the libraries
    and the settings given (a settings model flattened: ``config.k``)."""
    from mas.tracking import flat

    values = {k: v.model_dump(mode="json") if hasattr(v, "model_dump") else v for k, v in settings.items()}
    return flat({"scenario": spec.name, "model": model, "held_out": spec.split, "libraries": libraries, **values})


def _tell(message: str) -> None:
    out.print(shown(redact(message)), markup=False, highlight=False)


def _allow_unsafe_python(allowed: bool) -> None:
    if allowed:  # the python tool reads it where it checks its isolation, in this process
        os.environ[isolation.UNSAFE_ENV] = "1"


def _note(message: str) -> None:
    """How mas chose a team or reward: on stdout, so that an error after it is still the only
    line on stderr (``--json`` prints no note)."""
    out.print(shown(redact(message)), markup=False, highlight=False)
