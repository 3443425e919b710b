"""A training run as an MLflow run (``mas.tracking``): settings as params, each step's report as
metrics at the step's number, and at the end the run's files as artifacts:

    run.json                       the settings and the library versions the run started from
    library/maths.json             the library file: every version of every library
    library/maths.md               its Markdown export (``mas library export``)
    graph/maths.graphml, .html     the usage graph (``mas graph export``)
    report/report.md, *.png        the report and its plots (``mas report``)

Stage: none: tracking (each step's report as the step ends, the run's files at its end).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from mas.errors import UserError
from mas.library.store import LibraryStore
from mas.redact import redact
from mas.tracking import Tracker, flat, run_key
from mas.types.reports import StepReport


def step_metrics(r: StepReport) -> dict[str, float]:
    """What a step's report says, as metrics: reward, groups, edits, refusals, failures, calls,
    and tokens and dollars per role (``role_tokens/solver``) and edits per library
    (``library_edits/solver``): a file store cannot hold both ``tokens`` and ``tokens/solver``."""
    counts = r.calls.values()
    out = {
        "epoch": r.epoch,
        "reward": r.mean_reward,
        "groups": r.groups,
        "informative_groups": r.informative,
        "edits": sum(r.applied.values()),
        "held_edits": r.pending,
        "refused_edits": sum(len(v) for v in r.rejected.values()),
        "refused_operations": len(r.refused_operations),
        "quarantined": r.quarantined,
        "failed_rollouts": r.failed_rollouts,
        "skipped_groups": r.skipped_groups,
        "failures": sum(c.failures for c in counts),
        "calls": sum(c.calls for c in counts),
        "tokens": sum(c.prompt_tokens + c.completion_tokens for c in counts),
        "cost_usd": r.cost_usd,
        "promoted": r.promoted,
        "demoted": r.demoted,
        "pruned": r.pruned,
        "adopted": r.adopted,
        "retired": sum(r.retired.values()),
        "seconds": r.seconds,
    }
    out.update({f"library_edits/{library}": n for library, n in r.applied.items()})
    out.update({f"role_tokens/{role}": n for role, n in r.role_tokens.items()})
    out.update({f"role_cost_usd/{role}": usd for role, usd in r.role_cost_usd.items()})
    return out


class TrainingRun:
    """The MLflow run of one run folder, made (or found again) at its first step."""

    def __init__(self, tracker: Tracker, run_dir: Path, *, steps_per_epoch: int, roles: list[str]):
        self.tracker, self.run_dir, self.per_epoch, self.roles = tracker, run_dir, max(steps_per_epoch, 1), roles
        self.run_id: str | None = None
        self._queued: list[Any] = []
        self._said = False

    def number(self, r: StepReport) -> int:
        return r.epoch * self.per_epoch + r.step

    def step(self, report: StepReport) -> None:
        """Log one step as it ends, without waiting for the store; a failure is said once."""
        try:
            self._start()
            self._queued.append(
                self.tracker.metrics(self.run_id, step_metrics(report), self.number(report), synchronous=False)
            )
        except Exception as e:  # tracking must never stop training
            self._warn(e)

    def _start(self) -> None:
        if self.run_id is not None:
            return
        settings = json.loads((self.run_dir / "run.json").read_text(encoding="utf-8"))
        tags = {"mas.kind": "train", "mas.run_dir": str(self.run_dir.resolve())}
        self.run_id, _ = self.tracker.run(self.run_dir.name, tags, key=run_key(self.run_dir))
        tasks = settings.pop("held_out_tasks", [])
        self.tracker.params(self.run_id, {**flat(settings), "held_out_tasks": len(tasks)})

    def stop(self, status: str, store: LibraryStore | None = None) -> None:
        """End the MLflow run: every finished step logged (``mas.train.finished``), the files
        too when ``store`` is given, then ``status`` (FINISHED, KILLED, FAILED)."""
        from mas.train import finished

        try:
            for queued in self._queued:
                queued.wait()
        except Exception as e:
            self._warn(e)
        self._queued = []
        try:
            steps = finished(self.run_dir)
            if not steps and self.run_id is None:
                return  # the run never started a step: nothing to log
            self._start()
            logged = {m.step for m in self.tracker.client.get_metric_history(self.run_id, "reward")}
            for r in steps:
                if self.number(r) not in logged:
                    self.tracker.metrics(self.run_id, step_metrics(r), self.number(r))
            if store is not None:
                self._files(store)
            self.tracker.client.set_terminated(self.run_id, status)
        except Exception as e:
            self._warn(e, final=True)

    def _files(self, store: LibraryStore) -> None:
        with tempfile.TemporaryDirectory(prefix="mas-track-") as folder:
            write_files(Path(folder), self.run_dir, store, roles=self.roles)
            self.tracker.client.log_artifacts(self.run_id, folder)

    def _warn(self, e: Exception, *, final: bool = False) -> None:
        if self._said and not final:
            return
        self._said = True
        reason = " ".join(str(e).split())[:200] or type(e).__name__
        then = (
            f"run the same command with --run-dir {self.run_dir} to log it again"
            if final
            else "training goes on; its steps are logged again at its end"
        )
        print(redact(f"tracking: {self.tracker.uri} did not take the run ({reason}); {then}"), file=sys.stderr)


def write_files(folder: Path, run_dir: Path, store: LibraryStore, *, roles: list[str]) -> list[Path]:
    """Write a training run's files into ``folder`` for logging; a file that cannot be made
    (a damaged log) is left out and said."""
    from mas.config import PromotionPolicy
    from mas.library import hierarchy, review
    from mas.studies.graph_view import export
    from mas.studies.report import write_report

    name = store.path.stem
    (folder / "library").mkdir()
    (folder / "graph").mkdir()
    shutil.copyfile(run_dir / "run.json", folder / "run.json")
    if store.path.exists():
        shutil.copyfile(store.path, folder / "library" / store.path.name)
    made = {
        "library/" + name + ".md": lambda: review.markdown(
            store, hierarchy.effects(store, PromotionPolicy()), roles=roles
        ),
        "graph/" + name + ".graphml": lambda: export(store, "graphml")[0],
        "graph/" + name + ".html": lambda: export(store, "html")[0],
    }
    for path, make in made.items():
        try:
            (folder / path).write_text(redact(make()), encoding="utf-8")
        except UserError as e:
            print(f"tracking: {path} left out ({e})", file=sys.stderr)
    try:
        write_report([run_dir], folder / "report")
    except UserError as e:
        print(f"tracking: report left out ({e})", file=sys.stderr)
    return sorted(p for p in folder.rglob("*") if p.is_file())
