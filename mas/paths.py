"""Where mas reads its inputs and writes its outputs.

Inputs: roles and scenarios are looked up in the user's own ``roles/`` and ``scenarios/``
folders first (in the home folder, below), then among the ones shipped inside the package
(``mas.roles`` and ``mas.scenarios``, which the repository keeps at its top level).

Outputs: ``runs/``, ``libraries/`` and ``report/`` go to the home folder: ``MAS_HOME`` when it
is set, else the current directory. Nothing is ever written inside the installed package.
"""

from __future__ import annotations

import os
import re
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


def checked_name(name: str, what: str) -> str:
    """A scenario or library name that is safe to use in a file name (no ``/``, no ``..``)."""
    if safe_name(name) is None:
        raise UserError(f"{what} {name!r}: use letters, digits, '-', '_' and '.', up to 64 characters")
    return name


def library_file(scenario: str) -> Path:
    return home() / "libraries" / f"{checked_name(scenario, 'scenario name')}.json"


def new_run_dir(label: str) -> Path:
    """A fresh run directory under ``runs/``, named after ``label`` and the time."""
    return home() / "runs" / f"{checked_name(label, 'run name')}-{datetime.now():%Y%m%d-%H%M%S}"


def report_dir() -> Path:
    return home() / "report"
