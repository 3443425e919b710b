"""Usage events: which lessons each role had, which it applied, and how its rollout fared.

Events are derived from a step's rollouts (and the summaries of its informative groups) and
appended to ``<library file>.usage.jsonl``, one line per step, so a crash can never leave a
step half recorded and a resumed step is never recorded twice. The usage graph is rebuilt
from this log; the log is the source of truth.
"""

from __future__ import annotations

import json
import os
import re
import statistics
from pathlib import Path
from typing import Iterator

from .types import Group, Summary, UsageEvent

LESSON_ID = re.compile(r"\b(?:global|[a-z][a-z0-9_-]*)/\d{4}\b")
PROMPT_LINE = re.compile(r"^\[((?:global|[a-z][a-z0-9_-]*)/\d{4})\]", re.M)


def advantages(rewards: list[float]) -> list[float]:
    """GRPO's numeric advantage, (r - mean) / std within the group; 0 for equal rewards."""
    mean, std = statistics.fmean(rewards), statistics.pstdev(rewards)
    return [0.0 if std == 0 else (r - mean) / std for r in rewards]


def events(group: Group, summaries: list[Summary] | None, *, run: str, epoch: int, step: int) -> list[UsageEvent]:
    """One event per rollout and role. "Cited" and "judged" are kept apart, and both are
    limited to lessons that really were in the role's prompt."""
    out = []
    for rollout, adv in zip(group.rollouts, advantages(group.rewards)):
        judged = {n.role: n.applied for n in summaries[rollout.index].roles} if summaries else {}
        for trace in rollout.traces:
            in_prompt = PROMPT_LINE.findall(trace.system_message)
            said = " ".join(t.content for t in trace.turns)
            out.append(
                UsageEvent(
                    run=run, epoch=epoch, step=step, task_id=group.task.id, rollout=rollout.index, role=trace.role,
                    in_prompt=in_prompt,
                    cited=sorted(set(LESSON_ID.findall(said)) & set(in_prompt)),
                    judged=sorted(set(judged.get(trace.role, [])) & set(in_prompt)),
                    reward=rollout.reward, advantage=round(adv, 6),
                )  # fmt: skip
            )
    return out


class StepLog:
    """Append-only, one JSON line per training step: ``{"run", "epoch", "step", "items": [...]}``,
    so a step is recorded whole or not at all, and once."""

    suffix = ".steps.jsonl"

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def beside(cls, library_file: Path):
        return cls(library_file.with_suffix(cls.suffix))

    def steps(self) -> Iterator[dict]:
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            for raw in f:
                try:
                    yield json.loads(raw)
                except ValueError:
                    return  # a line cut short by a crash; append() drops it

    def items(self) -> Iterator[dict]:
        for record in self.steps():
            yield from record["items"]

    def has_step(self, run: str, epoch: int, step: int) -> bool:
        return any((r["run"], r["epoch"], r["step"]) == (run, epoch, step) for r in self.steps())

    def append(self, run: str, epoch: int, step: int, items: list[dict]) -> None:
        if self.has_step(run, epoch, step):
            return
        self._drop_torn_tail()
        line = {"run": run, "epoch": epoch, "step": step, "items": items}
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


class UsageLog(StepLog):
    """``<library file>.usage.jsonl``: the usage events of each step."""

    suffix = ".usage.jsonl"

    def events(self) -> Iterator[UsageEvent]:
        for item in self.items():
            yield UsageEvent.model_validate(item)

    def record(self, run: str, epoch: int, step: int, events: list[UsageEvent]) -> None:
        self.append(run, epoch, step, [e.model_dump(mode="json") for e in events])


class QuarantineLog(StepLog):
    """``<library file>.quarantine.jsonl``: the lessons refused by screening, with why."""

    suffix = ".quarantine.jsonl"
