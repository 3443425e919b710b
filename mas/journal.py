"""The run journal: every stage's output, appended as it finishes, so a run can resume.

One JSON line per finished unit of work (a rollout, a summary, an advantage, an edit batch,
a step report), keyed by what produced it. Each line is flushed and fsynced before the next
stage may depend on it. A crash can only cut the last line short; loading ignores such a
line, so its unit of work is simply done again.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any


class Journal:
    def __init__(self, path: Path):
        self.path = path
        self.records: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        if path.exists():
            self._load()

    def _load(self) -> None:
        good = 0
        with self.path.open("rb") as f:
            for raw in f:
                try:
                    record = json.loads(raw)
                except ValueError:
                    break  # a line cut short by a crash: everything after it is untrusted
                self.records[(record["kind"], record["key"])] = record["data"]
                good += len(raw)
        if good < self.path.stat().st_size:
            with self.path.open("r+b") as f:
                f.truncate(good)

    def get(self, kind: str, key: str) -> Any | None:
        return self.records.get((kind, key))

    def put(self, kind: str, key: str, data: Any) -> None:
        line = json.dumps({"kind": kind, "key": key, "data": data}, separators=(",", ":")) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
            self.records[(kind, key)] = data

    async def record(self, kind: str, key: str, data: Any) -> None:
        """``put`` in a worker thread: an fsync takes milliseconds, and the event loop has
        every other rollout's calls to send meanwhile."""
        await asyncio.to_thread(self.put, kind, key, data)

    def all(self, kind: str) -> list[Any]:
        return [data for (k, _), data in self.records.items() if k == kind]
