"""``mas eval``, ``transfer`` and ``ablate``: the studies of trained libraries, each a journaled
job in its own run folder (``mas.studies.job``): the same command with the same ``--run-dir``
resumes it, repeating no finished model call. ``mas.cli.main`` imports this module only when
one of them runs.

Stage: none: the command line (evaluation and studies, after training).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mas import paths, runs
from mas.cli import interrupt
from mas.cli.commands import LibraryOpt, TestFile, _note, err
from mas.cli.flags import RunFlags, SourceFlags, run_flags, source_flags
from mas.cli.options import option, settings
from mas.cli.tables import print_ablation, print_eval, print_transfer
from mas.cli.tracking import log_ablate, log_eval, log_transfer, params, tracker
from mas.config import ABLATIONS, EvalConfig, TrainConfig
from mas.errors import UserError

if TYPE_CHECKING:
    from mas.studies.evaluate import EvalResult

app = typer.Typer(rich_markup_mode=None)
"""These commands, for ``mas.cli.main`` to list under ``mas``."""

AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _run_dir(kind: str) -> object:
    return typer.Option(
        None, "--run-dir", help="Run directory; an existing one is resumed.", show_default=f"runs/{kind}-SCENARIO-TIME"
    )


def _starting(run_dir: Path, as_json: bool) -> None:
    """Where the study runs, before it does: killed, the same command with it resumes it."""
    from mas.cli.summary import near

    if not as_json:
        _note(f"{'resuming' if (run_dir / 'run.json').is_file() else 'starting'} {near(run_dir)}")


def _no_learning(run: RunFlags, command: str, as_json: bool) -> None:
    if run.learner_config is not None and not as_json:
        _note(f"--learner-config is not used: mas {command} makes no learning calls")


@app.command("eval")
@run_flags
@source_flags
def eval_command(
    k: int = option(EvalConfig, "k"),
    tasks: int | None = option(EvalConfig, "tasks", help="Evaluate on the first N held-out tasks."),
    library: LibraryOpt = None,
    compare: Path | None = typer.Option(
        None, help="A second library file, evaluated on the same tasks and seeds (A/B)."
    ),
    no_library: bool = typer.Option(False, "--no-library", help="Only the baseline, no library."),
    test_file: TestFile = None,
    temperature: float = option(EvalConfig, "temperature"),
    max_tokens: int = option(EvalConfig, "max_tokens"),
    seed: int = option(EvalConfig, "seed"),
    run_dir: Path | None = _run_dir("eval"),
    as_json: AsJson = False,
    source: SourceFlags = None,
    run: RunFlags = None,
) -> None:
    """Mean@k and Pass@k without and with libraries, on the same held-out tasks and seeds.

    Each library is evaluated with the prompt composition it was trained with, and a task any
    of them was trained on is refused."""
    from mas.cli.summary import unread_line
    from mas.studies import job
    from mas.studies.evaluate import check_held_out, library_config

    spec = source.load(test_file=test_file, say=None if as_json else _note, trust=run.trust)
    config = settings(
        EvalConfig, k=k, tasks=tasks, temperature=temperature, max_tokens=max_tokens, seed=seed, **run.limits()
    )
    clients = run.clients()
    clients.check_executor(config)
    price = run.price(clients)
    _no_learning(run, "eval", as_json)
    scored = spec.held_out[: config.tasks]
    if not scored:
        raise UserError(f"{spec.name}: no held-out tasks to score (give a --test-file)")
    plan = [("none", None, None, config)]
    for key, path in _libraries(library, compare, no_library, spec.name, as_json, _made_by(source)):
        store = _store(path)
        check_held_out(scored, store)
        if not as_json and (unread := unread_line(path, store.heads(), spec.role_names)):
            _note(unread)
        plan.append((key, path, store.heads(), library_config(config, store)))
    run_dir = run_dir or paths.new_run_dir(f"eval-{spec.name}")
    libraries = {key: job.library(path, heads) for key, path, heads, _ in plan}
    recorded = job.settings("eval", spec, model=clients.label, config=config, libraries=libraries)
    runs.check(run_dir, recorded, job.NAMES)  # before anything is written
    tracking = tracker(run.track, spec.name)
    _starting(run_dir, as_json)

    async def main():
        async with run.open(clients) as (client, _), run.rollouts(clients, spec, config) as executor:
            study = job.Study(
                spec, client=client, journal=job.open_journal(run_dir, recorded), price=price,
                budget_usd=config.budget_usd, executor=executor,
            )  # fmt: skip
            return await _evaluations(study, plan, len(scored), as_json), study.stopped

    results, stopped = interrupt.run_in(run_dir, main())
    labels = _labels([path for _, path, _, _ in plan])[: len(results)]
    keys = [key for key, _, _, _ in plan][: len(results)]
    print_eval(
        spec, results, keys=keys, labels=labels, config=config, price=price, stopped=stopped, run_dir=run_dir,
        as_json=as_json,
    )  # fmt: skip
    logged = params(spec, clients.label, libraries=[str(path or "none") for _, path, _, _ in plan], config=config)
    log_eval(tracking, labels=labels, results=results, keys=keys, seed=config.seed, params=logged, run_dir=run_dir)


def _libraries(library, compare, no_library, name, as_json, made_by="") -> list[tuple[str, Path]]:
    """The library files to evaluate, by their key in the study's journal. ``--no-library``
    with ``--library`` is refused: dropping the library named would score something else than asked."""
    if no_library and library is not None:
        raise UserError("--no-library and --library: choose one (--compare FILE adds a library to the baseline)")
    given = [] if no_library else [("library", library or paths.library_file(name), library is not None)]
    given += [("compare", compare, True)] if compare is not None else []
    found = []
    for key, path, named in given:
        if key == "compare" and found and path.resolve() == found[0][1].resolve():
            raise UserError(f"--compare {path}: the library evaluated already; compare another file")
        if path.exists():
            found.append((key, path))
        elif named:
            raise UserError(f"{path}: no such library file")
        elif not as_json:
            _note(f"no library at {path} yet{made_by}: the team is scored without lessons only")
    return found


def _labels(paths: list[Path | None]) -> list[str]:
    """Each column's name: the file's name, with its folder when two files share a name (the
    resolved one: a bare ``maths.json`` has none as given)."""
    names = [Path(str(p)).name if p else "none" for p in paths]
    return [
        f"{Path(str(p)).resolve().parent.name}/{name}" if p and names.count(name) > 1 else name
        for p, name in zip(paths, names)
    ]


def _made_by(source: SourceFlags) -> str:
    """Which command writes the default library a study did not find: a new user's first
    ``mas eval`` or ``mas transfer`` may come before any ``mas train``."""
    if source.team is not None or source.scenario is None:
        return " (mas train with the same --team writes it with its first lesson)"
    return f" (mas train {source.scenario} writes it with its first lesson)"


def _store(path: Path):
    from mas.library.store import LibraryStore

    return LibraryStore(path)


async def _evaluations(study, plan, tasks: int, as_json: bool) -> list[EvalResult]:
    """Each planned evaluation in turn, with its progress bar, until the budget is spent."""
    from mas.cli.progress import bars, wanted

    results = []
    for key, path, heads, config in plan:
        with bars(err, show=wanted(err, as_json=as_json)) as bar:
            job = bar.add_task(f"eval ({Path(str(path)).name if path else 'none'})", total=tasks, unit="tasks")
            study.on_task = lambda score, job=job: bar.advance(job)
            result = await study.evaluate(key, heads, config)
        if result is None:
            break
        results.append(result)
    return results


@app.command("transfer")
@run_flags
@source_flags
def transfer_command(
    k: int = option(EvalConfig, "k"),
    tasks: int | None = option(EvalConfig, "tasks", help="The first N held-out tasks."),
    library: LibraryOpt = None,
    test_file: TestFile = None,
    from_trials: bool = typer.Option(
        False, "--from-trials", help="Read the matrix off the training run's transfer trials instead (no model calls)."
    ),
    seed: int = option(EvalConfig, "seed"),
    run_dir: Path | None = _run_dir("transfer"),
    as_json: AsJson = False,
    source: SourceFlags = None,
    run: RunFlags = None,
) -> None:
    """Role x role matrix: the change in Mean@k when role B's prompt gets role A's lessons (or,
    with --from-trials, the change in success rate the randomized transfer trials measured)."""
    from mas.library.logs import SideFiles
    from mas.studies import job
    from mas.studies.evaluate import check_held_out, library_config
    from mas.studies.transfer import from_trials as from_trials_of
    from mas.studies.transfer import recorded

    spec = source.load(test_file=test_file, say=None if as_json else _note, trust=run.trust)
    path = library or paths.library_file(spec.name)
    if not path.exists():
        raise UserError(f"{path}: no such library file" + ("" if library else _made_by(source)))
    store = _store(path)
    tracking = tracker(run.track, spec.name)
    if from_trials:
        result = from_trials_of(spec.role_names, SideFiles(path).usage)
        print_transfer(spec.role_names, result, as_json=as_json)
        log_transfer(tracking, params=params(spec, "", libraries=[str(path)]), result=result)
        return
    heads = store.heads()
    config = library_config(settings(EvalConfig, k=k, tasks=tasks, seed=seed, **run.limits()), store)
    check_held_out(spec.held_out[: config.tasks], store)
    clients = run.clients()
    clients.check_executor(config)
    price = run.price(clients)
    _no_learning(run, "transfer", as_json)
    run_dir = run_dir or paths.new_run_dir(f"transfer-{spec.name}")
    runs.check(run_dir, recorded(spec, heads, config, model_name=clients.label, library=path), job.NAMES)
    _starting(run_dir, as_json)
    work = _transfer(
        spec, run, clients=clients, heads=heads, config=config, run_dir=run_dir, library=path, price=price,
        as_json=as_json,
    )  # fmt: skip
    result = interrupt.run_in(run_dir, work)
    if _no_baseline(result, run_dir, as_json):
        return
    print_transfer(spec.role_names, result, as_json=as_json, run_dir=run_dir, price=price)
    logged = params(spec, clients.label, libraries=[str(path)], config=config)
    log_transfer(tracking, params=logged, result=result, run_dir=run_dir)


def _no_baseline(result, run_dir: Path, as_json: bool) -> bool:
    """Whether the study stopped before its baseline was measured; if so, say it in place of a
    matrix of changes against a baseline of 0 (the JSON with ``"baseline": null`` and no cells).
    Such a study has no number to log."""
    from mas.cli.commands import out
    from mas.studies.transfer import unmeasured

    why = unmeasured(result)
    if why is None:
        return False
    if as_json:
        print_transfer([], result, as_json=True)
    say = err if as_json else out
    for line in [why, *([f"stopped early: {result.stopped}"] if result.stopped else []), f"run in {run_dir}"]:
        say.print(line, markup=False, highlight=False)
    return True


async def _transfer(spec, run: RunFlags, *, clients, heads, config, run_dir, library, price, as_json):
    from mas.cli.progress import bars, wanted
    from mas.studies.transfer import planned_runs, transfer

    async with run.open(clients) as (client, _), run.rollouts(clients, spec, config) as executor:
        with bars(err, show=wanted(err, as_json=as_json)) as bar:
            total = planned_runs(spec.role_names, heads) * len(spec.held_out[: config.tasks])
            job = bar.add_task("transfer", total=total, unit="tasks")
            return await transfer(
                spec, client=client, heads=heads, config=config, run_dir=run_dir, model_name=clients.label,
                library=library, price=price, on_run=lambda label: bar.console.print(f"eval: {label}"),
                on_task=lambda: bar.advance(job), executor=executor,
            )  # fmt: skip


@app.command("ablate")
@run_flags
@source_flags
def ablate_command(
    variants: str | None = typer.Option(None, help=f"Comma-separated subset of: {', '.join(ABLATIONS)}."),
    tasks: int = typer.Option(8, min=1, help="Training tasks."),
    test_tasks: int = typer.Option(20, min=1, help="Held-out tasks."),
    epochs: int = option(TrainConfig, "epochs"),
    group_size: int = option(TrainConfig, "group_size", help="G for the variants that compare within groups."),
    k: int = option(EvalConfig, "k"),
    seed: int = option(TrainConfig, "seed"),
    run_dir: Path | None = _run_dir("ablate"),
    as_json: AsJson = False,
    source: SourceFlags = None,
    run: RunFlags = None,
) -> None:
    """The paper's ablations and ours, trained and evaluated alike, in one table."""
    from mas.studies import job
    from mas.studies.ablate import recorded

    spec = source.load(say=None if as_json else _note, trust=run.trust)
    chosen = _variants(variants)
    limits = run.limits()
    train_config = settings(TrainConfig, tasks=tasks, epochs=epochs, group_size=group_size, seed=seed, **limits)
    eval_config = settings(EvalConfig, tasks=test_tasks, k=k, seed=seed, **limits)
    clients = run.clients()
    clients.check_executor(eval_config)
    price = run.price(clients)
    run_dir = run_dir or paths.new_run_dir(f"ablate-{spec.name}")
    runs.check(run_dir, recorded(spec, chosen, train_config, eval_config, model_name=clients.label), job.NAMES)
    tracking = tracker(run.track, spec.name)
    _starting(run_dir, as_json)
    work = _ablate(
        spec, run, clients=clients, chosen=chosen, train_config=train_config, eval_config=eval_config,
        run_dir=run_dir, price=price, as_json=as_json,
    )  # fmt: skip
    done = interrupt.run_in(run_dir, work)
    trained, scored = len(spec.tasks[:tasks]), len(spec.held_out[:test_tasks])  # the flags may ask for more
    print_ablation(spec, done, tasks=trained, test_tasks=scored, k=eval_config.k, run_dir=run_dir, as_json=as_json)
    logged = params(spec, clients.label, libraries=[], variants=chosen, train=train_config, eval=eval_config)
    log_ablate(tracking, params=logged, rows=done.rows, run_dir=run_dir)


def _variants(given: str | None) -> list[str]:
    chosen = [v.strip() for v in given.split(",")] if given else list(ABLATIONS)
    unknown = [v for v in chosen if v not in ABLATIONS]
    if unknown:
        raise UserError(f"--variants: unknown {', '.join(map(repr, unknown))} (known: {', '.join(ABLATIONS)})")
    return chosen if "no library" in chosen else ["no library", *chosen]


async def _ablate(spec, run: RunFlags, *, clients, chosen, train_config, eval_config, run_dir, price, as_json):
    from mas.cli.progress import bars, wanted
    from mas.studies.ablate import ablate, planned_rollouts

    async with run.open(clients) as (client, learner), run.rollouts(clients, spec, eval_config) as executor:
        with bars(err, show=wanted(err, as_json=as_json)) as bar:
            total = sum(planned_rollouts(spec, name, train_config, eval_config) for name in chosen)
            job = bar.add_task("ablation", total=total, unit="rollouts")
            return await ablate(
                spec, client=client, run_dir=run_dir, train_config=train_config, eval_config=eval_config,
                variants=chosen, model_name=clients.label, price=price, learner=learner,
                on_variant=lambda name: bar.console.print(f"ablation: {name}"),
                on_rollout=lambda n: bar.advance(job, n), executor=executor,
            )  # fmt: skip
