"""Experiment tracking: a training run, an evaluation, an ablation or a transfer study logged as
an MLflow run (``--track mlflow``).

Stage: none: tracking (training runs and studies, as MLflow runs).

MLflow is an optional extra (``pip install 'mas[mlflow]'``), imported here only, and only when
a command asks for tracking. Runs go to ``MAS_TRACKING_URI``, else ``MLFLOW_TRACKING_URI``, else
``mlruns/`` in the mas home folder: a local file store, which needs no server. The store is
checked before the command writes anything, and one that cannot be reached ends it with one line
naming it. The experiment is the scenario's name (or ``MLFLOW_EXPERIMENT_NAME``).

A training run logs its settings (``run.json``) as params, every step's report as metrics at
the step's number, and at its end the artifacts of ``mas.track_run``. Its MLflow run is
tagged with the run folder, so a resumed run continues it and logs the steps it has not logged
yet. Logging a step never stops training: a failure is said once, and the steps are logged
again at the end.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mas import paths
from mas.errors import UserError

EXTRA = "pip install 'mas[mlflow]'"
RETRIES = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
"""MLflow's retries of a request to a tracking server, for mas (its own defaults: 7, and 120 s)."""
MAX_PARAM = 6000
"""MLflow's longest param value, in characters."""


def tracking_uri() -> tuple[str, str]:
    """The tracking URI and where it came from (to name it in an error)."""
    for name in ("MAS_TRACKING_URI", "MLFLOW_TRACKING_URI"):
        if os.environ.get(name, "").strip():
            return os.environ[name].strip(), name
    return (paths.home() / "mlruns").resolve().as_uri(), "the default store"


class Tracker:
    """One MLflow tracking store and experiment; its client is made on first use (a file
    store's folder is created then, not when the store is checked)."""

    def __init__(self, uri: str, source: str, experiment: str):
        self.uri, self.source, self.experiment = uri, source, experiment
        self._client: Any = None
        self._experiment_id: str | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            from mlflow import MlflowClient

            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    def experiment_id(self) -> str:
        if self._experiment_id is None:
            found = self.client.get_experiment_by_name(self.experiment)
            if found is None:
                self._experiment_id = self.client.create_experiment(self.experiment)
            else:
                if found.lifecycle_stage == "deleted":
                    self.client.restore_experiment(found.experiment_id)
                self._experiment_id = found.experiment_id
        return self._experiment_id

    def run(self, name: str, tags: dict[str, str], key: str | None = None) -> tuple[str, bool]:
        """The id of the run tagged ``key`` (``mas.run_key``), or of a new one; and whether it is new."""
        if key is not None:
            found = self.client.search_runs([self.experiment_id()], f"tags.`mas.run_key` = '{key}'", max_results=1)
            if found:
                self.client.update_run(found[0].info.run_id, status="RUNNING")
                return found[0].info.run_id, False
            tags = {**tags, "mas.run_key": key}
        return self.client.create_run(self.experiment_id(), run_name=name, tags=tags).info.run_id, True

    def params(self, run_id: str, values: dict[str, Any]) -> None:
        """Log the params the run does not have yet (MLflow refuses to change one)."""
        from mlflow.entities import Param

        have = self.client.get_run(run_id).data.params
        new = [Param(k, _value(v)) for k, v in values.items() if k not in have]
        for i in range(0, len(new), 100):
            self.client.log_batch(run_id, params=new[i : i + 100])

    def metrics(self, run_id: str, values: dict[str, float], step: int, *, synchronous: bool = True) -> Any:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        batch = [Metric(metric_name(k), float(v), stamp, step) for k, v in values.items()]
        return self.client.log_batch(run_id, metrics=batch, synchronous=synchronous)

    def study(
        self, kind: str, *, params: dict, metrics: dict[str, float], table: list[dict], text: str,
        run_dir: Path | None = None,
    ) -> str:  # fmt: skip
        """One MLflow run holding a study's table: params, metrics, the table (JSON) and the
        table as the command printed it (Markdown); returns its id. A study with a run folder
        (``run_dir``) logs to the MLflow run tagged with it, so a resumed study updates its own."""
        if run_dir is None:
            run_id, _ = self.run(f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}", {"mas.kind": kind})
        else:
            tags = {"mas.kind": kind, "mas.run_dir": str(run_dir.resolve())}
            run_id, _ = self.run(run_dir.name, tags, key=run_key(run_dir))
        self.params(run_id, params)
        if metrics:
            self.metrics(run_id, metrics, 0)
        self.client.log_dict(run_id, table, f"{kind}.json")
        self.client.log_text(run_id, text, f"{kind}.md")
        self.client.set_terminated(run_id, "FINISHED")
        return run_id


def open_tracker(experiment: str) -> Tracker:
    """The tracker of ``experiment``, its store checked; a UserError naming the extra when
    MLflow is missing, or naming the URI when its store cannot be reached."""
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise UserError(f"--track mlflow: MLflow is not installed; {EXTRA}") from None
    import logging

    logging.getLogger("mlflow").setLevel(logging.WARNING)  # its INFO lines would mix with the command's
    for name, value in RETRIES.items():  # unless the user set them: a store gone quiet costs a minute, not ten
        os.environ.setdefault(name, value)
    uri, source = tracking_uri()
    tracker = Tracker(uri, source, os.environ.get("MLFLOW_EXPERIMENT_NAME") or experiment)
    folder = _file_store(uri)
    if folder is not None:
        _check_folder(folder, uri, source)
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # a file store is what was asked for
    else:
        _reach(tracker)
    return tracker


def _file_store(uri: str) -> Path | None:
    """The folder of a file store URI (``file:///...`` or a plain path), or None."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(parsed.path)
    return Path(uri) if parsed.scheme == "" or len(parsed.scheme) == 1 else None  # C:\\... on Windows


def _check_folder(folder: Path, uri: str, source: str) -> None:
    """A file store: a folder, or one that can be made where it is named (nothing made here)."""
    existing = next((p for p in [folder, *folder.parents] if p.exists()), None)
    if existing is None or not existing.is_dir():
        raise UserError(f"{uri} ({source}): cannot reach this MLflow store ({existing} is not a folder)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{uri} ({source}): cannot reach this MLflow store ({existing} is not writable)")


def _reach(tracker: Tracker) -> None:
    """One request, no retries, 10 s at most: the store answers, or a UserError naming it."""
    try:
        with _env(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="10"):
            tracker.client.search_experiments(max_results=1)
    except Exception as e:  # whatever the store's client raises, it was not reached
        found = re.search(r"\[Errno -?\d+\] [^'\")]+", str(e))  # the socket's reason, in a requests error
        reason = found[0] if found else " ".join(str(e).split())[:200]
        raise UserError(f"{tracker.uri} ({tracker.source}): cannot reach this MLflow store ({reason})") from None


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def flat(values: dict, prefix: str = "") -> dict[str, Any]:
    """Nested settings as flat params: ``{"config": {"budget": {"inject": "all"}}}`` gives
    ``{"config.budget.inject": "all"}``."""
    out: dict[str, Any] = {}
    for k, v in values.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _value(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v)
    return text if len(text) <= MAX_PARAM else text[: MAX_PARAM - 3] + "..."


def metric_name(name: str) -> str:
    """``name`` as MLflow takes it, where one name it refuses loses the whole batch: a character
    it refuses (a library file called ``other (v2).json``) becomes ``_``, and so does a part
    that a path would read otherwise (``//``, ``.``, ``..``).

    >>> metric_name("mean_at_k/other (v2).json")
    'mean_at_k/other _v2_.json'
    >>> metric_name("delta/../maths.json")
    'delta/_/maths.json'
    """
    name = re.sub(r"[^\w./\- ]", "_", name)  # a colon too: MLflow takes none on Windows
    return "/".join(part if part not in ("", ".", "..") else "_" for part in name.split("/"))


def run_key(run_dir: Path) -> str:
    """The tag that finds a run folder's MLflow run again (a digest: any path fits in a filter)."""
    return hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:32]
