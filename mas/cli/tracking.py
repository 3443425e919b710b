"""``--track``: the run flag that logs a command's run to MLflow (``mas.tracking``), one of the
run flags every command that calls a model takes (``mas.cli.flags``), and what each of them
logs: a training run step by step (``mas.track_run``), a study (and a promotion pass) as one
MLflow run holding its table, tagged with the study's run folder so that finishing it again
(resumed) logs to the same MLflow run.

Stage: none: the command line (tracking, beside every stage).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Optional, get_args

import typer

if TYPE_CHECKING:
    from mas.track_run import TrainingRun
    from mas.tracking import Tracker

Track = Annotated[
    Optional[Literal["mlflow"]],  # noqa: UP045 (typer reads the annotation)
    typer.Option(
        "--track",
        help="Log the run to MLflow (the mlflow extra): to MAS_TRACKING_URI, else MLFLOW_TRACKING_URI, else "
        "mlruns/ in MAS_HOME (or the current folder).",
        show_default=False,
    ),
]


def tracker(track: str | None, experiment: str) -> Tracker | None:
    """The tracker asked for, its store checked (before the command writes anything)."""
    if track is None:
        return None
    from mas.tracking import open_tracker

    return open_tracker(experiment)


def training(track: str | None, experiment: str, run_dir: Path, *, steps_per_epoch: int, roles: list[str]):
    """The MLflow run of a training run, or None."""
    found = tracker(track, experiment)
    if found is None:
        return None
    from mas.track_run import TrainingRun

    return TrainingRun(found, run_dir, steps_per_epoch=steps_per_epoch, roles=roles)


@contextlib.contextmanager
def stopping(run: TrainingRun | None) -> Iterator[None]:
    """A training run that stops on a signal or fails after a step was logged: what is logged
    stays, with the status KILLED or FAILED."""
    from mas.cli.interrupt import Interrupted

    try:
        yield
    except BaseException as e:
        if run is not None and run.run_id is not None:
            run.stop("KILLED" if isinstance(e, (Interrupted, KeyboardInterrupt)) else "FAILED")
        raise


def params(spec, model: str, *, libraries: list[str], **settings) -> dict:
    """A study's settings as MLflow params: the scenario, the model, the libraries and the
    settings given (a settings model flattened: ``config.k``)."""
    from mas.tracking import flat

    values = {k: v.model_dump(mode="json") if hasattr(v, "model_dump") else v for k, v in settings.items()}
    return flat({"scenario": spec.name, "model": model, "held_out": spec.split, "libraries": libraries, **values})


def log_eval(
    tracker: Tracker | None,
    *,
    params: dict,
    labels: list[str],
    results: list,
    keys: list[str],
    seed: int,
    run_dir: Path | None = None,
) -> None:
    """An evaluation: Mean@k, Pass@k and the paired changes the table prints, per library, each
    bootstrapped with the evaluation's ``seed`` as the table's are."""
    if tracker is None:
        return
    from mas.studies.evaluate import deltas

    rows, metrics = [], {}
    for label, r, changes in zip(labels, results, deltas(results, keys, seed=seed)):
        row = {"library": label, "injected": r.library, **_estimate("mean_at_k", r.mean_at_k)}
        row.update(_estimate("pass_at_k", r.pass_at_k))
        for name, change in changes.items():  # vs_none: "delta", as it was logged before A/B had a row
            row.update(_estimate("delta" if name == "vs_none" else f"delta_{name}", change))
        rows.append(row)
        named = ("mean_at_k", "pass_at_k", "delta", "delta_vs_library")
        metrics.update({f"{k}/{label}": v for k, v in row.items() if k in named})
    _study(tracker, "eval", params=params, metrics=metrics, table=rows, text=markdown(rows), run_dir=run_dir)


def log_ablate(tracker: Tracker | None, *, params: dict, rows: list, run_dir: Path | None = None) -> None:
    """An ablation: per variant, Mean@k, its paired change from no library (none for no library
    itself), lessons and cost."""
    if tracker is None:
        return
    table, metrics = [], {}
    for r in rows:
        change = _estimate("delta", r.delta) if r.delta is not None else {}
        row = {"variant": r.variant, **_estimate("mean_at_k", r.mean_at_k), **change}
        row.update(lessons=r.lessons, cost_usd=r.cost_usd)
        table.append(row)
        metrics.update({f"{k}/{r.variant}": row[k] for k in ("mean_at_k", "delta", "lessons", "cost_usd") if k in row})
    _study(tracker, "ablate", params=params, metrics=metrics, table=table, text=markdown(table), run_dir=run_dir)


def log_transfer(tracker: Tracker | None, *, params: dict, result, run_dir: Path | None = None) -> None:
    """A transfer matrix: one row per cell (lessons of A into B), the change and its interval."""
    if tracker is None:
        return
    table = [c.model_dump(mode="json") for c in result.cells]
    metrics = {f"delta/{c.source}/{c.target}": c.delta for c in result.cells if c.delta is not None}
    params = {**params, "source": result.source, "tasks": result.tasks}
    if result.source == "run":  # the trials have neither a baseline nor a k: their 0s are no measure
        metrics.update({} if result.baseline is None else {"baseline": result.baseline})
        params.update(k=result.k)
    _study(tracker, "transfer", params=params, metrics=metrics, table=table, text=markdown(table), run_dir=run_dir)


def log_promote(tracker: Tracker | None, *, params: dict, moves: list, spent: float | None) -> None:
    """A promotion pass: one row per move, a count per kind of move, and what judging cost."""
    if tracker is None:
        return
    table = [m.model_dump(mode="json", include={"kind", "text", "lessons", "roles", "into", "reason"}) for m in moves]
    from mas.types.evidence import PromotionMove

    kinds = [k for k in get_args(PromotionMove.model_fields["kind"].annotation) if k != "adopt"]  # a run's end adopts
    metrics = {f"moves/{kind}": float(sum(m.kind == kind for m in moves)) for kind in kinds}
    metrics.update({"judging_cost_usd": spent} if spent is not None else {})
    _study(tracker, "promote", params=params, metrics=metrics, table=table, text=markdown(table))


def _study(tracker: Tracker, kind: str, *, run_dir: Path | None = None, **logged) -> None:
    """Log a finished study; a store that does not take it costs one line, not the study: its
    table is printed and journaled, and the same command with its run folder logs it again."""
    try:
        tracker.study(kind, run_dir=run_dir, **logged)
    except Exception as e:  # whatever MLflow raises, the study itself is done
        from mas.redact import redact

        reason = " ".join(str(e).split())[:200] or type(e).__name__
        again = f"; run the same command with --run-dir {run_dir} to log it again" if run_dir is not None else ""
        print(redact(f"tracking: {tracker.uri} did not take the {kind} ({reason}){again}"), file=sys.stderr)


def _estimate(name: str, e) -> dict[str, float]:
    return {name: e.value, f"{name}_low": e.low, f"{name}_high": e.high}


def markdown(rows: list[dict]) -> str:
    """``rows`` (dicts with the same keys) as a Markdown table."""
    if not rows:
        return "_(empty)_\n"
    head = list(dict.fromkeys(k for row in rows for k in row))
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(_cell(row.get(k, "")) for k in head) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _cell(value) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")
