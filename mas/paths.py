"""Where mas reads its inputs and writes its outputs.

Stage: none (shared by every stage and command).

Inputs: roles and scenarios are looked up in the user's own ``roles/`` and ``scenarios/``
folders first (in the home folder, below), then among the ones shipped inside the package
(``mas.roles`` and ``mas.scenarios``, which the repository keeps at its top level).

Outputs: ``runs/``, ``libraries/`` and ``report/`` go to the home folder: ``MAS_HOME`` when it
is set, else the current directory. Nothing is ever written inside the installed package.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from datetime import datetime
from importlib.resources import files
from pathlib import Path

from mas.errors import UserError

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def home() -> Path:
    """``MAS_HOME``, or the current directory."""
    return Path(os.environ.get("MAS_HOME") or ".")


def shipped(kind: str) -> Path:
    """The folder of the roles or scenarios shipped with mas (``kind``: roles, scenarios)."""
    return Path(str(files(f"mas.{kind}")))


def search_path(kind: str) -> list[Path]:
    """Where to look for roles or scenarios: the user's folder first, then the shipped one."""
    return [home() / kind, shipped(kind)]


def safe_name(name: str) -> str | None:
    """``name`` when it can be part of a file name (no ``/``, no ``..``), else None."""
    return name if _NAME.fullmatch(name) and ".." not in name else None


def slug(text: str) -> str:
    """A safe name made from ``text`` (a task file's stem): runs of other characters become
    ``-``; ``tasks`` when nothing is left.

    >>> slug("my tasks (v2)"), slug(".."), slug("données")
    ('my-tasks-v2', 'tasks', 'donn-es')
    """
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-_")[:64].strip("-_")
    return name or "tasks"


def checked_name(name: str, what: str) -> str:
    """A scenario or library name that is safe to use in a file name (no ``/``, no ``..``)."""
    if safe_name(name) is None:
        raise UserError(f"{what} {name!r}: use letters, digits, '-', '_' and '.', up to 64 characters")
    return name


def library_file(scenario: str) -> Path:
    return home() / "libraries" / f"{checked_name(scenario, 'scenario name')}.json"


def new_run_dir(label: str) -> Path:
    """A fresh run directory under ``runs/``, named after ``label`` and the time; a run started
    in the same second as an earlier one gets ``-2``, ``-3``, ... and never resumes it."""
    base = home() / "runs" / f"{checked_name(label, 'run name')}-{datetime.now():%Y%m%d-%H%M%S}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def report_dir() -> Path:
    return home() / "report"


def regular_file(path: Path) -> Path:
    """``path``, when it is a regular file (through links); a ``UserError`` when it is a
    folder, a FIFO or a device, which reading would take for a file or wait on for ever."""
    if path.is_dir():
        raise UserError(f"{path}: a folder, not a file")
    if path.exists() and not path.is_file():
        raise UserError(f"{path}: not a regular file (a pipe or a device)")
    return path


def atomic_write(path: Path, text: str | bytes) -> None:
    """Write via a synced temp file and a rename: a crash leaves the old or new file. A file
    that cannot be written (read-only, disk full, a folder in the way) is a ``UserError``."""
    try:
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise UserError(f"{path}: cannot write ({e.strerror or e})") from None
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise UserError(f"{path}: cannot write ({e.strerror or e})") from None
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable; some platforms cannot open a directory."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
