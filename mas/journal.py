"""The run journal: every stage's output, appended as it finishes, so a run can resume.

One JSON line per finished unit of work (a rollout, a summary, an advantage, an edit batch,
a step report), keyed by what produced it. Each line is flushed and fsynced before the next
stage may depend on it. A crash can only cut the last line short; loading drops such a line,
so its unit of work is simply done again. Any other bad line is damage from outside: loading
stops with one line naming it, rather than silently dropping every record after it. What is
written is redacted (``mas.redact``), and kept in memory as written.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

from mas.errors import UserError
from mas.redact import redact_data


class CorruptJournal(UserError):
    """A journal line in the middle of the file that is not a record."""


class Journal:
    def __init__(self, path: Path):
        self.path = path
        self.records: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        if path.exists():
            self._load()

    def _load(self) -> None:
        found, whole = records(self.path)
        for record in found:
            self.records[(record["kind"], record["key"])] = record["data"]
        with self.path.open("r+b") as f:
            size = f.seek(0, os.SEEK_END)
            if whole < size:  # a last line cut short by a crash: its work is done again
                f.truncate(whole)
            elif size:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":  # whole, but its newline was cut off
                    f.write(b"\n")

    def get(self, kind: str, key: str) -> Any | None:
        return self.records.get((kind, key))

    def put(self, kind: str, key: str, data: Any) -> None:
        data = redact_data(data)
        line = json.dumps({"kind": kind, "key": key, "data": data}, separators=(",", ":")) + "\n"
        try:
            with self._lock, self.path.open("a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
                self.records[(kind, key)] = data
        except OSError as e:
            raise UserError(f"{self.path}: cannot write ({e.strerror or e})") from None

    async def record(self, kind: str, key: str, data: Any) -> None:
        """``put`` in a worker thread: an fsync takes milliseconds, and the event loop has
        every other rollout's calls to send meanwhile."""
        await asyncio.to_thread(self.put, kind, key, data)

    def all(self, kind: str) -> list[Any]:
        return [data for (k, _), data in self.records.items() if k == kind]


def records(path: Path) -> tuple[list[dict], int]:
    """The records of a journal file, and the length of the part of it that holds them: all
    of it but a last line cut short by a crash. Any other bad line is a ``CorruptJournal``."""
    try:
        with path.open("rb") as f:
            lines = f.readlines()
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
    last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
    found, whole = [], 0
    for i, raw in enumerate(lines):
        if raw.strip():
            try:
                found.append(_record(raw))
            except ValueError as e:
                if i == last:
                    break
                reason = "not UTF-8" if isinstance(e, UnicodeDecodeError) else str(e).splitlines()[0][:120]
                raise CorruptJournal(
                    f"{path}:{i + 1}: not a journal record ({reason}); the lines after it are intact: delete "
                    f"line {i + 1} to redo its work, or use a new --run-dir"
                ) from None
        whole += len(raw)
    return found, whole


def _record(raw: bytes) -> dict:
    record = json.loads(raw)
    if not (isinstance(record, dict) and {"kind", "key", "data"} <= record.keys()):
        raise ValueError("expected an object with kind, key and data")
    if not (isinstance(record["kind"], str) and isinstance(record["key"], str)):
        raise ValueError("kind and key must be strings")
    return record
