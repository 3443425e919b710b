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

from mas import runs
from mas.errors import UserError
from mas.journal import CorruptJournal, read_back
from mas.studies.by_kind import failed_line, refused_line
from mas.studies.evaluate import EvalResult, compare
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
    found: dict[str, EvalResult] = {}
    try:  # each record checked as a resumed study checks it: a bad one is named by its line and field
        for _, key, result, _ in read_back(path / "journal.jsonl", {"evaluation": EvalResult}):
            found[key] = result
    except CorruptJournal:
        raise
    except (ValueError, KeyError, TypeError, OSError, RecursionError):
        raise UserError(f"{path}: not a readable study (bad journal.jsonl)") from None
    return Study(path, path.name, settings, list(found.items()))


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
    if rows:
        out += ["", f"Mean@k and Pass@k per rollout; [95% bootstrap interval over tasks] (seed {_seed(study)})."]
        out += _changes(study, table)
    out += ["", "### Refused and failed, per evaluation", ""]
    kinds = [[name(study, key), *by_kind(_as_step(result))] for key, result in study.evaluations]
    out += table(["evaluation", "refused", "failed"], kinds) if kinds else ["_None._"]
    return [*out, ""]


def _seed(study: Study) -> int:
    seed = (study.settings.get("config") or {}).get("seed", 0)
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else 0


def _changes(study: Study, table) -> list[str]:
    """The study's headline numbers, as its command prints them: the paired changes in Mean@k on
    the same tasks and seeds (two intervals side by side cannot give them), or the transfer
    matrix."""
    found, seed = dict(study.evaluations), _seed(study)
    if study.kind == "transfer":
        return _matrix(found, seed, table)
    base = {"eval": "none", "ablate": "no library"}.get(study.kind)
    pairs = [(key, base) for key in found if base in found and key != base]
    if study.kind == "eval" and "compare" in found and "library" in found:
        pairs.append(("compare", "library"))
    rows = [[name(study, a), name(study, b), str(compare(found[a], found[b], seed=seed))] for a, b in pairs]
    head = ["", "### Paired changes in Mean@k", ""]
    return head + table(["evaluation", "against", "change [95% CI]"], rows) if rows else []


def _matrix(found: dict[str, EvalResult], seed: int, table) -> list[str]:
    """Transfer: cell (A, B) as ``mas transfer`` prints it (``mas.studies.transfer.measured``)."""
    from mas.studies.transfer import key, measured

    current = found.get("current")
    if current is None:
        return []
    roles = list(current.tool_calls)  # the scenario's roles, in its order

    def cell(a: str, b: str) -> str:
        other = found.get(key(a, b))
        if other is None:
            return "-"
        c = measured(a, b, current, other, lessons=0, seed=seed)
        return f"{c.delta:+.2f} [{c.low:+.2f},{c.high:+.2f}]"

    rows = [[a, *(cell(a, b) for b in roles)] for a in roles]
    return [
        "",
        f"### Transfer matrix: change in Mean@k (baseline {current.mean_at_k.value:.3f}), 95% CI",
        "",
        *table(["lessons of \\ into", *roles], rows),
        "",
        "-: not evaluated (role A has no lessons, or the study stopped before it).",
    ]


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
        files = {k: Path(v["path"]) for k, v in (study.settings.get("libraries") or {}).items() if _has_path(v)}
        if key not in files:
            return key
        shared = sum(f.name == files[key].name for f in files.values()) > 1  # labelled as mas eval labels them
        return f"{files[key].parent.name}/{files[key].name}" if shared else files[key].name
    return key


def _has_path(library: object) -> bool:
    return isinstance(library, dict) and isinstance(library.get("path"), str) and bool(library["path"])


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
