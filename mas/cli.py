"""The ``mas`` command: a thin layer over the Python API.

Bad input (a file, a line, a field, an option) ends with a one-line message on stderr and exit
code 2, before anything is written.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from typer.exceptions import TyperException

from .clients import open_client
from .config import EvalConfig, TrainConfig
from .errors import UserError
from .evaluate import EvalResult, evaluate
from .library import role_block
from .scenario import HOME, load_scenario
from .store import LibraryStore, diff, export_markdown
from .train import StepReport, train

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, help="Train per-role lesson libraries for a team of agents.")
library_app = typer.Typer(no_args_is_help=True, help="Show, compare, export and roll back libraries.")
app.add_typer(library_app, name="library")
out, err = Console(soft_wrap=True), Console(stderr=True, soft_wrap=True)

Model = Annotated[str, typer.Option("--model", help="local (embedded SmolLM2-135M), openai:MODEL, or fake.")]
BaseUrl = Annotated[Optional[str], typer.Option(help="OpenAI-compatible base URL (or MAS_BASE_URL).")]
ApiKey = Annotated[Optional[str], typer.Option(help="API key (or OPENAI_API_KEY).")]
LibraryOpt = Annotated[Optional[Path], typer.Option("--library", help="Library file [libraries/SCENARIO.json].")]


@app.command("train")
def train_command(
    scenario: Annotated[str, typer.Argument(help="A shipped scenario (maths) or a .jsonl file.")],
    model: Model = "local",
    epochs: int = typer.Option(1, min=1),
    batch_size: int = typer.Option(4, min=1, help="Tasks per step."),
    group_size: int = typer.Option(3, min=1, help="Rollouts per task (G)."),
    tasks: Optional[int] = typer.Option(None, min=1, help="Use the first N training tasks."),
    no_ground_truth: bool = typer.Option(False, help="Reward against the group's majority answer."),
    temperature: float = typer.Option(0.7, min=0.0, max=2.0),
    max_tokens: int = typer.Option(256, min=16, help="Completion cap per team call."),
    max_lessons: int = typer.Option(8, min=1, help="Lessons per library at most."),
    shuffle: bool = typer.Option(True, help="Reorder the tasks each epoch."),
    rollout_timeout: float = typer.Option(300.0, min=1.0, help="Seconds before a rollout is cancelled."),
    concurrency: int = typer.Option(4, min=1, help="Model calls in flight."),
    seed: int = 0,
    library: LibraryOpt = None,
    run_dir: Annotated[Optional[Path], typer.Option(help="Run directory; an existing one is resumed.")] = None,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Train the role libraries of SCENARIO with Training-Free GRPO."""
    spec = load_scenario(scenario)
    config = TrainConfig(
        tasks=tasks, epochs=epochs, batch_size=batch_size, group_size=group_size, temperature=temperature,
        max_tokens=max_tokens, max_lessons=max_lessons, shuffle=shuffle, rollout_timeout=rollout_timeout,
        concurrency=concurrency, seed=seed, ground_truth=not no_ground_truth,
    )  # fmt: skip
    store = LibraryStore(library or HOME / "libraries" / f"{spec.name}.json")
    store.heads()  # a corrupt library file stops us here, before anything is written
    run_dir = run_dir or HOME / "runs" / f"{spec.name}-{datetime.now():%Y%m%d-%H%M%S}"
    steps = config.epochs * -(-len(spec.tasks[: config.tasks]) // config.batch_size)

    async def main():
        async with open_client(model, base_url=base_url, api_key=api_key) as client:
            with _progress() as bar:
                job = bar.add_task("training", total=steps)

                def on_step(report: StepReport) -> None:
                    bar.advance(job)
                    bar.console.print(_step_line(report))

                return await train(
                    spec, client=client, store=store, run_dir=run_dir, config=config, model_name=model, on_step=on_step
                )

    result = _run(main())
    out.print(f"run {result.run}: {len(result.steps)} steps, journal in {run_dir}")
    if not any(v.lessons for v in result.heads.values()):
        out.print(f"no lessons yet in {store.path} (no group had both winners and losers, or no edit was valid)")
    _print_lessons(result.heads)


@app.command("eval")
def eval_command(
    scenario: Annotated[str, typer.Argument(help="A shipped scenario (maths) or a .jsonl file.")],
    model: Model = "local",
    k: int = typer.Option(1, min=1, help="Rollouts per task (Mean@k)."),
    tasks: Optional[int] = typer.Option(None, min=1, help="Evaluate on the first N held-out tasks."),
    library: LibraryOpt = None,
    no_library: bool = typer.Option(False, help="Only the baseline, no library."),
    temperature: float = typer.Option(0.7, min=0.0, max=2.0),
    max_tokens: int = typer.Option(256, min=16, help="Completion cap per team call."),
    concurrency: int = typer.Option(4, min=1),
    seed: int = 0,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Mean@k of the team without and with the learned libraries, on the same tasks and seeds."""
    spec = load_scenario(scenario)
    config = EvalConfig(k=k, tasks=tasks, temperature=temperature, max_tokens=max_tokens, concurrency=concurrency, seed=seed)
    path = library or HOME / "libraries" / f"{spec.name}.json"
    if library and not path.exists():
        raise UserError(f"{path}: no such library file")
    heads = None if no_library else LibraryStore(path).heads()

    async def main():
        async with open_client(model, base_url=base_url, api_key=api_key) as client:
            results = []
            for label, injected in [("none", None)] + ([] if heads is None else [("library", heads)]):
                with _progress() as bar:
                    job = bar.add_task(f"eval ({label})", total=len(spec.held_out[: config.tasks]))
                    results.append(
                        await evaluate(spec, client=client, heads=injected, config=config, on_task=lambda s: bar.advance(job))
                    )
            return results

    results: list[EvalResult] = _run(main())
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in results], indent=1))
        return
    table = Table("library", "tasks", "k", "Mean@k", "model calls", "tokens")
    for r in results:
        calls = r.calls.get("rollout")
        tokens = (calls.prompt_tokens + calls.completion_tokens) if calls else 0
        table.add_row(r.library, str(len(r.tasks)), str(r.k), f"{r.mean_at_k:.3f}", str(calls.calls if calls else 0), str(tokens))
    out.print(table)


@library_app.command("show")
def library_show(
    which: Annotated[str, typer.Argument(help="A scenario name or a library file.")],
    role: Optional[str] = typer.Option(None, help="Only this library."),
    version: Optional[int] = typer.Option(None, help="This version instead of the latest (needs --role)."),
) -> None:
    """The lessons of each library, with their provenance."""
    store = _store(which)
    if version is not None:
        if role is None:
            raise UserError("--version needs --role")
        heads = {role: store.version(role, version)}
    else:
        heads = {name: v for name, v in store.heads().items() if role in (None, name)}
        if role is not None and not heads:
            raise UserError(f"{store.path}: unknown library {role!r} (has {', '.join(store.libraries()) or 'none'})")
    _print_lessons(heads, provenance=True)


@library_app.command("diff")
def library_diff(
    which: Annotated[str, typer.Argument(help="A scenario name or a library file.")],
    role: Annotated[str, typer.Argument(help="The library (role name or global).")],
    old: Annotated[int, typer.Argument(help="Old version number.")],
    new: Annotated[Optional[int], typer.Argument(help="New version number [latest].")] = None,
) -> None:
    """What changed in ROLE's library between two versions."""
    store = _store(which)
    newer = store.head(role) if new is None else store.version(role, new)
    for line in diff(store.version(role, old), newer) or ["(no change)"]:
        out.print(line, highlight=False, markup=False)


@library_app.command("export")
def library_export(
    which: Annotated[str, typer.Argument(help="A scenario name or a library file.")],
    format: str = typer.Option("markdown", help="markdown, or prompt (the exact block a role's prompt gets)."),
    role: Optional[str] = typer.Option(None, help="The role, for --format prompt."),
    task: Optional[str] = typer.Option(None, help="The task text the block is chosen for (--format prompt)."),
) -> None:
    """Export the latest libraries as Markdown, or one role's prompt block."""
    store = _store(which)
    if format == "markdown":
        print(export_markdown(store.heads()))
    elif format == "prompt":
        if role is None:
            raise UserError("--format prompt needs --role")
        print(role_block(store.heads(), role, task=task))
    else:
        raise UserError(f"--format {format!r}: expected markdown or prompt")


@library_app.command("rollback")
def library_rollback(
    which: Annotated[str, typer.Argument(help="A scenario name or a library file.")],
    role: Annotated[str, typer.Argument(help="The library (role name or global).")],
    version: Annotated[int, typer.Argument(help="The version to return to.")],
) -> None:
    """Make a new version of ROLE's library equal to an earlier one."""
    store = _store(which)
    store.version(role, version)  # fails cleanly on an unknown version
    made = store.rollback(role, version)
    out.print(f"{role}: version {made.number} now equals version {version} ({len(made.lessons)} lessons)")


def _store(which: str) -> LibraryStore:
    path = Path(which) if which.endswith(".json") else HOME / "libraries" / f"{which}.json"
    if not path.exists():
        raise UserError(f"{path}: no such library file")
    return LibraryStore(path)


def _print_lessons(heads, *, provenance: bool = False) -> None:
    for name, v in heads.items():
        out.print(f"[bold]{name}[/bold] v{v.number}: {len(v.lessons)} lessons")
        for lesson in v.lessons:
            out.print(f"  [{lesson.id}] {lesson.text}", highlight=False, markup=False)
        if provenance and v.provenance:
            p = v.provenance
            out.print(f"  (run {p.run}, epoch {p.epoch}, step {p.step}, model {p.model}, tasks {', '.join(p.task_ids)})", markup=False)


def _step_line(r: StepReport) -> str:
    applied = ", ".join(f"{k} {v} edits" for k, v in r.applied.items()) or "no edits"
    refused = sum(len(v) for v in r.rejected.values())
    applied += f" ({refused} refused)" if refused else ""
    calls = sum(c.calls for c in r.calls.values())
    failures = sum(c.failures for c in r.calls.values())
    return (
        f"epoch {r.epoch} step {r.step}: reward {r.mean_reward:.2f}, {r.informative}/{r.groups} groups informative, "
        f"{applied}, {calls} calls, {failures} failures, {r.seconds:.1f} s"
    )


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err)


def _run(coroutine):
    """Run the coroutine; SIGTERM unwinds like Ctrl-C so the embedded server is stopped."""
    signal.signal(signal.SIGTERM, _interrupt)
    # autogen logs every failed agent turn with a traceback; mas counts them in its reports.
    logging.getLogger("autogen_core").setLevel(logging.CRITICAL)
    return asyncio.run(coroutine)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main() -> None:
    try:
        app(standalone_mode=False)
    except UserError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted", markup=False)
        sys.exit(130)
    except TyperException as exc:  # a bad option or argument: the message names it; exit 2
        err.print(f"error: {exc.format_message()}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
