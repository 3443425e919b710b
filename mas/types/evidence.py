"""The randomized evidence about a lesson for a role, and the moves of the hierarchy it justifies
(promotion, demotion, pruning, merging, splitting).

Stage: promote.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import ConfigDict, model_validator

from mas.types.base import Frozen


class Effect(Frozen):
    """The randomized evidence about one lesson for one role: within groups of rollouts of
    the same task, the rollouts shown the lesson against those not shown it, the other
    lessons randomized in the same rollouts held fixed (``mas.library.evidence``)."""

    model_config = ConfigDict(ser_json_inf_nan="constants")
    role: str
    lesson: str
    tasks: int
    """Tasks with at least one contrast (the unit of the interval: contrasts are clustered by task)."""
    contrasts: int
    """Groups in which the lesson was shown to some rollouts and not to others."""
    exposures: int
    """Rollouts that were shown the lesson under randomization."""
    effect: float
    """The change in reward when the lesson is shown: least squares over the groups, with a
    fixed effect per group (one group alone: mean reward shown - mean reward not shown)."""
    lcb: float
    """Lower confidence bound (one-sided, t over tasks, at a fixed level)."""
    ucb: float
    se: float = math.inf
    """Standard error of ``effect``, clustered by task (infinite below two tasks)."""
    e_value: float = 1.0
    """The evidence against "showing it does not help": the largest its betting wealth has
    been. Where the lesson does not help, it ever reaches 1/alpha with chance at most alpha."""
    e_now: float = 1.0
    """Where that wealth stands after the last group. It too reaches 1/alpha with chance at
    most alpha where the lesson does not help; unlike the peak, it falls back after a chance
    crossing, and when the lesson stops helping."""
    trial: bool = False
    """The lesson belongs to another role's library: shown to this role as a transfer trial."""
    judged: float = 0.0
    """Share of the exposed rollouts in which the summarizer judged it applied (a description)."""


class PromotionMove(Frozen):
    """One change of the hierarchy, with the evidence that justified it: a promotion to the
    global library, a demotion back to the roles it still helps, a lesson pruned because its
    evidence no longer supports it, one merged into a lesson of its library that says the same
    thing, two lessons the judge called the same that their own evidence tells apart, or, after
    a run's last step, a lesson adopted by a role whose transfer trial of it leans towards help."""

    schema_version: int = 2
    kind: Literal["promote", "demote", "prune", "merge", "split", "adopt"]
    text: str
    lessons: list[str]
    """The lesson ids moved: the lesson promoted and the equivalent private lessons merged into
    it, the global lesson demoted, the lesson pruned, the two lessons judged the same that
    their evidence splits apart (the one that did worse first), or the lesson adopted."""
    evidence: list[Effect]
    roles: list[str] = []
    """Roles helped (promotion), roles the lesson goes back to (demotion), or the role that
    adopts it."""
    into: str | None = None
    """The id the lesson got in its new library (promotion, demotion, adoption)."""
    reason: str = ""

    @model_validator(mode="before")
    @classmethod
    def _from_version_1(cls, data: object) -> object:
        """Moves logged before randomized evidence carried evidence of another kind: dropped."""
        if isinstance(data, dict) and isinstance(data.get("evidence"), dict):
            return {**data, "evidence": [], "schema_version": 2}
        return data
