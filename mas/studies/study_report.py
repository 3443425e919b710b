"""A study's run folder in a report (``mas report``), rendered as a training run is: its
settings, one row per evaluation where a training run has one per epoch (Mean@k, Pass@k, model
calls, tokens, failures), and what failed, by kind, per evaluation where a training run has it
per step. An ablation's folder also brings the training run of each variant, reported as any
training run.

Stage: none: evaluation and studies, after training (``mas report``).

Reads only what the study left (``run.json``, ``journal.jsonl``) and never changes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from mas import runs
from mas.errors import UserError
from mas.journal import records
from mas.studies.by_kind import failed_line, refused_line
from mas.studies.evaluate import EvalResult
from mas.types.reports import StepReport


@dataclass
class Study:
    """One study as read from disk: its evaluations, by their key in its journal, in order."""

    path: Path
    label: str
    settings: dict
    evaluations: list[tuple[str, EvalResult]]

    @property
    def kind(self) -> str:
        return runs.kind_of(self.settings)


def load(path: Path, settings: dict) -> Study:
    """Read the study in ``path`` (its ``run.json`` already read), or raise UserError naming it."""
    try:
        found = records(path / "journal.jsonl")[0]
        evaluations = [(r["key"], EvalResult.model_validate(r["data"])) for r in found if r["kind"] == "evaluation"]
    except (ValueError, KeyError, TypeError, ValidationError, OSError, RecursionError):
        raise UserError(f"{path}: not a readable study (bad journal.jsonl)") from None
    return Study(path, path.name, settings, evaluations)


def variant_runs(study: Study) -> list[Path]:
    """The training runs of an ablation's variants (those that train and have started)."""
    if study.kind != "ablate" or not isinstance(study.settings.get("variants"), list):
        return []
    variants = study.settings.get("variants")
    folders = [study.path / v.replace(" ", "-") / "run" for v in variants if isinstance(v, str)]
    return [f for f in folders if (f / "run.json").is_file()]


def section(study: Study, table) -> list[str]:
    """The study's part of the report; ``table`` makes a Markdown table from a header and rows."""
    s, config = study.settings, study.settings.get("config") or {}
    tasks = s.get("held_out_tasks")
    out = [
        f"## Run `{study.label}`",
        "",
        f"Directory `{study.path}`, {runs.KINDS.get(study.kind, 'a study')}",
        "",
        f"scenario **{s.get('scenario')}**, model **{s.get('model') or '(unnamed)'}**, k {config.get('k')}, "
        f"{len(tasks) if isinstance(tasks, list) else '?'} held-out tasks",
        "",
    ]
    header = ["evaluation", "injected", "Mean@k", "Pass@k", "model calls", "tokens", "failures"]
    rows = [_row(study, key, result) for key, result in study.evaluations]
    out += table(header, rows) if rows else ["_No finished evaluations._"]
    out += ["", "### Refused and failed, per evaluation", ""]
    kinds = [[name(study, key), *by_kind(_as_step(result))] for key, result in study.evaluations]
    out += table(["evaluation", "refused", "failed"], kinds) if kinds else ["_None._"]
    return [*out, ""]


def by_kind(step: StepReport) -> list[str]:
    """What was refused and what failed in one step (or evaluation), by kind."""
    return [refused_line([step]).removeprefix("refused: "), failed_line([step]).removeprefix("failed: ")]


def name(study: Study, key: str) -> str:
    """What an evaluation's key stands for."""
    if study.kind == "transfer":
        if key == "current":
            return "current libraries"
        if key.endswith("-"):
            return f"{key[:-1]} without its lessons"
        source, _, target = key.partition(">")
        return f"{target} with {source}'s lessons"
    if study.kind == "eval":
        library = (study.settings.get("libraries") or {}).get(key)
        return Path(library["path"]).name if isinstance(library, dict) and library.get("path") else key
    return key


def _row(study: Study, key: str, result: EvalResult) -> list[str]:
    counts = result.calls.values()
    return [
        name(study, key),
        result.library,
        str(result.mean_at_k),
        str(result.pass_at_k),
        str(sum(c.calls for c in counts)),
        str(sum(c.prompt_tokens + c.completion_tokens for c in counts)),
        str(sum(c.failures for c in counts)),
    ]


def _as_step(result: EvalResult) -> StepReport:
    """An evaluation as the report of a step that ran its rollouts and learned nothing."""
    failed = result.calls["rollout"].failures if "rollout" in result.calls else 0
    return StepReport(
        epoch=0, step=0, task_ids=[t.task_id for t in result.tasks], groups=len(result.tasks), informative=0,
        mean_reward=result.mean_at_k.value, failed_rollouts=failed, calls=result.calls,
    )  # fmt: skip
