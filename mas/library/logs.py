"""The files next to a library file, and their append-only writes: one owner for both.

For ``libraries/maths.json``:

    maths.json.bak            the last good state (written by the store with every commit)
    maths.json.lock           held by every write to the library file
    maths.json.train.lock     held by a training run for its whole length
    maths.usage.jsonl         the usage events of each step
    maths.quarantine.jsonl    the proposed lessons screening refused, with why
    maths.promotions.jsonl    every promotion pass: its promotions and demotions, with evidence
    maths.prunings.jsonl      the lessons pruned after each step, with their evidence
    maths.equivalence.jsonl   the judgements of which lessons say the same thing
    maths.graph.html|graphml  the usage graph, when exported

The three logs are append-only, one JSON line per training step (``{"run", "epoch", "step",
"items": [...]}``), so a crash can never leave a step half recorded and a resumed step is
never recorded twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Generic, NamedTuple, TypeVar

from pydantic import BaseModel

from mas.types import PromotionMove, QuarantineItem, UsageEvent

Item = TypeVar("Item", bound=BaseModel)


class StepKey(NamedTuple):
    run: str
    epoch: int
    step: int


class StepLog(Generic[Item]):
    """Append-only, one JSON line per training step, each holding that step's items."""

    def __init__(self, path: Path, item: type[Item]):
        self.path, self.item = path, item

    def steps(self) -> Iterator[tuple[StepKey, list[Item]]]:
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            for raw in f:
                try:
                    record = json.loads(raw)
                except ValueError:
                    return  # a line cut short by a crash; append() drops it
                key = StepKey(record["run"], record["epoch"], record["step"])
                yield key, [self.item.model_validate(x) for x in record["items"]]

    def items(self) -> Iterator[Item]:
        for _, items in self.steps():
            yield from items

    def has_step(self, key: StepKey) -> bool:
        return any(done == key for done, _ in self.steps())

    def append(self, key: StepKey, items: list[Item]) -> None:
        """Record the step's items once; a step already recorded is left as it is."""
        if self.has_step(key):
            return
        self._drop_torn_tail()
        line = {**key._asdict(), "items": [x.model_dump(mode="json") for x in items]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _drop_torn_tail(self) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with self.path.open("r+b") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":  # rare: the last append was cut short
                f.seek(0)
                f.truncate(f.read().rfind(b"\n") + 1)


class SideFiles:
    """The paths of the files next to one library file, and its logs."""

    def __init__(self, library: Path):
        self.library = Path(library)
        self.backup = Path(f"{self.library}.bak")
        self.lock = Path(f"{self.library}.lock")
        self.train_lock = Path(f"{self.library}.train.lock")
        self.usage = StepLog(self._beside(".usage.jsonl"), UsageEvent)
        self.quarantine = StepLog(self._beside(".quarantine.jsonl"), QuarantineItem)
        self.promotions = StepLog(self._beside(".promotions.jsonl"), PromotionMove)
        self.prunings = StepLog(self._beside(".prunings.jsonl"), PromotionMove)
        self.equivalence = self._beside(".equivalence.jsonl")

    def graph(self, fmt: str) -> Path:
        return self._beside(f".graph.{fmt}")

    def _beside(self, suffix: str) -> Path:
        return self.library.with_suffix(suffix)
