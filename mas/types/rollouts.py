"""A rollout of the team on one task: each role's trace (its prompt, the lessons shown, its
turns and tool calls) and the reward; a group is the rollouts of one task.

Stage: rollout, reward and filter (a group is informative, or filtered out).
"""

from __future__ import annotations

from pydantic import model_validator

from mas.types.base import Frozen
from mas.types.reports import StageCount
from mas.types.tasks import Task
from mas.types.usage import check_drawn


class ToolCall(Frozen):
    name: str
    arguments: str
    result: str = ""
    is_error: bool = False


class Turn(Frozen):
    """One message a role produced (or a tool call round it made)."""

    content: str
    tool_calls: list[ToolCall] = []
    prompt_tokens: int = 0
    completion_tokens: int = 0


class RoleTrace(Frozen):
    role: str
    system_message: str
    shown: list[str] = []
    """Ids of the lessons rendered into ``system_message``, recorded when it was built."""
    randomized: list[str] = []
    """Ids of the lessons whose showing to this role was randomized in this rollout's group."""
    chance: dict[str, float] = {}
    """Each randomized lesson's chance of being shown to this role in each rollout of the group
    (a fixed number of the group's rollouts, drawn without replacement)."""
    classes: dict[str, str] = {}
    """A randomized lesson drawn with its twins, as one class: the class (named by one of them)."""
    turns: list[Turn] = []

    @property
    def tokens(self) -> int:
        return sum(t.prompt_tokens + t.completion_tokens for t in self.turns)

    @model_validator(mode="after")
    def _drawn(self):
        return check_drawn(self)


class Rollout(Frozen):
    task_id: str
    index: int
    """Position within the group, 0..G-1."""
    traces: list[RoleTrace]
    answer: str | None
    """The team's final answer as extracted from the transcript."""
    error: str | None = None
    """Set when the team failed (model error, timeout); the rollout then leaves its group."""
    reward: float = 0.0
    calls: dict[str, StageCount] = {}
    """The model calls the team made, with their tokens and failures (``Meter.snapshot``): a
    rollout read back from a journal counts them again, so a resumed run costs what it used."""


class Group(Frozen):
    task: Task
    rollouts: list[Rollout]
    no_majority: bool = False
    """Without ground truth: no answer had a strict majority, so nothing can be scored."""

    @property
    def valid(self) -> list[Rollout]:
        """The rollouts that ran to the end; a failed one (endpoint error, timeout) is not a
        loser, and leaves the group's statistics."""
        return [r for r in self.rollouts if r.error is None]

    @property
    def rewards(self) -> list[float]:
        return [r.reward for r in self.valid]

    @property
    def informative(self) -> bool:
        return not self.no_majority and len(set(self.rewards)) > 1
