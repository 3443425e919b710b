"""Counting model calls, tokens and failures per stage (rollout, summary, advantage, edit)."""

from __future__ import annotations

from collections import defaultdict

from autogen_core.models import RequestUsage

from mas.types import StageCount


class Meter:
    def __init__(self) -> None:
        self.stages: dict[str, StageCount] = defaultdict(StageCount)

    def count(self, stage: str, usage: RequestUsage | None, calls: int = 1) -> None:
        s = self.stages[stage]
        s.calls += calls
        if usage is not None:
            s.prompt_tokens += usage.prompt_tokens
            s.completion_tokens += usage.completion_tokens

    def fail(self, stage: str, kind: str = "other") -> None:
        s = self.stages[stage]
        s.failures += 1
        s.kinds[kind] = s.kinds.get(kind, 0) + 1

    def snapshot(self) -> dict[str, StageCount]:
        return {k: v.model_copy() for k, v in sorted(self.stages.items())}
