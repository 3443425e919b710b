"""Tasks, and the passages a task's search tools see.

Stage: rollout (its input; task files are read by ``mas.datasets``).
"""

from __future__ import annotations

from mas.types.base import Frozen


class Passage(Frozen):
    title: str
    text: str


class Task(Frozen):
    id: str
    question: str
    answer: str | None = None
    """Ground truth; None when the scenario is trained without it."""
    level: int | None = None
    """Difficulty, for generated packs."""
    aliases: list[str] = []
    """Other answers that count as right (multi-hop QA)."""
    passages: list[Passage] = []
    """The documents the task's search tools see (multi-hop QA)."""
