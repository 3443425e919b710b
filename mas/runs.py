"""Run folders, for training and the studies alike: ``run.json`` holds a run's kind and
settings, ``journal.jsonl`` (``mas.journal``) every finished unit of its work.

Stage: none (shared by training and the studies): the folder a run resumes from.

Starting a command again on the same folder resumes it, so the folder must hold that very run:
its kind, its settings, and digests of what it works on (tasks, role prompts, libraries, a team
file). Anything else is refused before a byte is written, with one line naming ``run.json``:
mixing two runs in one journal would read back work done for other inputs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

from mas.errors import UserError
from mas.journal import Journal
from mas.paths import atomic_write, regular_file
from mas.redact import redact_data

KINDS = {"train": "a training run", "eval": "an evaluation", "ablate": "an ablation", "transfer": "a transfer study"}
"""Each kind of run, as messages name it. ``run.json`` without a kind is a training run (runs
made before studies had folders)."""

FREE_ON_RESUME = frozenset(
    {"budget_usd", "concurrency", "call_timeout", "retries", "executor", "ray_address", "workers"}
)
"""Settings a resumed run may change: they bound the run, or say where its rollouts run, not
what it computes."""

NAMES = {
    "scenario": "scenario",
    "model": "model",
    "library": "library",
    "tasks_sha256": "tasks",
    "roles_sha256": "role prompts",
    "team_sha256": "team file",
}
"""The settings compared on resume besides ``config``, as messages name them. A key the
earlier run did not record (a run made before it was kept) is not compared."""


def kind_of(settings: dict) -> str:
    kind = settings.get("kind", "train")
    return kind if isinstance(kind, str) else ""


def check(run_dir: Path, settings: dict, names: dict[str, str] = NAMES, *, defaults: dict | None = None) -> dict | None:
    """``settings`` to write for a new run; None when ``run_dir`` holds this run already.
    Another kind of run, or this kind with other settings, is a ``UserError``. ``defaults``:
    the value of a ``config`` setting the earlier run did not record (one added since it started)."""
    before = expect(run_dir, settings["kind"])
    if before is None:
        return settings
    old = before.get("config") if isinstance(before.get("config"), dict) else {}
    old = {**(defaults or {}), **old}
    config = settings.get("config", {})
    changed = sorted(k for k in config if k not in FREE_ON_RESUME and old.get(k) != config[k])
    changed += [name for key, name in names.items() if key in before and before[key] != settings.get(key)]
    if changed:
        raise UserError(
            f"{run_dir / 'run.json'}: this run was started with other settings ({', '.join(dict.fromkeys(changed))}); "
            "use a new --run-dir"
        )
    return None


def expect(run_dir: Path, kind: str) -> dict | None:
    """The settings of the run in ``run_dir`` (None for a new run), which must be of ``kind``."""
    before = read_settings(run_dir)
    if before is not None and kind_of(before) != kind:
        found = KINDS.get(kind_of(before), "another kind of run")
        raise UserError(f"{run_dir / 'run.json'}: the folder holds {found}, not {KINDS[kind]}; use a new --run-dir")
    return before


def start(run_dir: Path, settings: dict) -> None:
    """Make the folder of a new run and write its ``run.json``."""
    make_folder(run_dir)
    atomic_write(run_dir / "run.json", json.dumps(redact_data(settings), indent=1) + "\n")


def open_journal(run_dir: Path, settings: dict, names: dict[str, str] = NAMES) -> Journal:
    """The journal of the run ``settings`` describe: a new one (its folder made), or the one
    ``run_dir`` holds, checked to be this run's."""
    new = check(run_dir, settings, names)
    if new is not None:
        start(run_dir, new)
    return Journal(run_dir / "journal.jsonl")


@contextlib.contextmanager
def undone_if_refused(run_dir: Path) -> Iterator[None]:
    """A new run refused (a ``UserError``) before its journal holds a line leaves nothing behind:
    its ``run.json`` is taken back, and the folders this command made for it. A setup that only
    the first model calls show wrong (a model name the server lacks, nothing listening there)
    then writes nothing, and the corrected command may use the same ``--run-dir``."""
    new = read_settings(run_dir) is None
    made = [p for p in [run_dir, *run_dir.parents] if not p.exists()]
    try:
        yield
    except UserError:
        if new:
            _take_back(run_dir, made)
        raise


def _take_back(run_dir: Path, made: list[Path]) -> None:
    journal = run_dir / "journal.jsonl"
    with contextlib.suppress(OSError):
        if journal.exists() and journal.stat().st_size:
            return  # work was journaled: a resume reads it
        journal.unlink(missing_ok=True)
        (run_dir / "run.json").unlink(missing_ok=True)
        for folder in made:
            folder.rmdir()  # only when empty: anyone else's file stays, and its folders


def make_folder(run_dir: Path) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"{run_dir}: cannot make the run folder ({e.strerror or e})") from None


def read_settings(run_dir: Path) -> dict | None:
    """The settings of the run in ``run_dir``; None for a new run (no folder, or an empty one)."""
    path = run_dir / "run.json"
    existing = next((p for p in [run_dir, *run_dir.parents] if p.exists()), None)
    if existing is not None and not existing.is_dir():
        what = "a file" if existing == run_dir else f"inside {existing}, a file"
        raise UserError(f"{run_dir}: {what}, not a folder (--run-dir names a run folder, new or to resume)")
    if not path.exists():
        if run_dir.is_dir() and any(run_dir.iterdir()):
            raise UserError(f"{run_dir}: not a run folder (it holds other files but no run.json); use a new --run-dir")
        return None
    try:
        before = json.loads(regular_file(path).read_text(encoding="utf-8"))  # a FIFO would block for ever
    except (ValueError, OSError, RecursionError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e).splitlines()[0]
        raise UserError(f"{path}: not readable as a run's settings ({reason}); use a new --run-dir") from None
    if not isinstance(before, dict):
        raise UserError(f"{path}: not a run's settings (expected a JSON object); use a new --run-dir")
    return before


def digest(value: object) -> str:
    """SHA-256 of ``value`` as canonical JSON."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=True).encode()).hexdigest()
