"""Counting model calls, tokens and failures per stage (rollout, summary, advantage, edit).

Stage: every stage counts its model calls into it.
"""

from __future__ import annotations

from collections import defaultdict

from autogen_core.models import RequestUsage

from mas.types.reports import StageCount


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

    def add(self, counts: dict[str, StageCount]) -> None:
        """Count what another meter counted (``snapshot``): the calls of work read back from a
        journal count as they did when they were made."""
        for stage, c in counts.items():
            s = self.stages[stage]
            s.calls += c.calls
            s.prompt_tokens += c.prompt_tokens
            s.completion_tokens += c.completion_tokens
            s.failures += c.failures
            s.kinds = {k: s.kinds.get(k, 0) + c.kinds.get(k, 0) for k in sorted(s.kinds.keys() | c.kinds.keys())}

    def snapshot(self) -> dict[str, StageCount]:
        return {k: v.model_copy() for k, v in sorted(self.stages.items())}
