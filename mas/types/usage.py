"""Usage events: what each role was shown in one valid rollout, which of it by a coin
(randomized exposure), and how the rollout fared. The randomized showings are the evidence.

Stage: record usage.
"""

from __future__ import annotations

from pydantic import FiniteFloat, model_validator

from mas.types.base import Frozen


class UsageEvent(Frozen):
    """One role in one valid rollout: the lessons its prompt showed, which of them were shown
    by a coin (randomized exposure), and the outcome. The randomized ones are the evidence."""

    schema_version: int = 2
    run: str
    epoch: int
    step: int
    task_id: str
    rollout: int
    role: str
    shown: list[str]
    """Ids of the lessons in the role's prompt."""
    randomized: list[str] = []
    """Ids of the lessons whose showing to this role was randomized in this group: for each,
    some rollouts of the group showed it and the others did not."""
    chance: dict[str, float] = {}
    """Each randomized lesson's chance of being shown, as drawn (``RoleTrace.chance``)."""
    classes: dict[str, str] = {}
    """A randomized lesson drawn as one class with its twins: the class (``RoleTrace.classes``)."""
    judged: list[str] = []
    """Lesson ids the summarizer judged the role to have applied (a description, never
    evidence: the summarizer sees the reward)."""
    reward: FiniteFloat
    advantage: FiniteFloat
    """(r - mean) / std within the group; 0 when the group's rewards are all equal."""

    @model_validator(mode="before")
    @classmethod
    def _from_version_1(cls, data: object) -> object:
        """Usage logs written before randomized exposure: nothing in them was randomized."""
        if isinstance(data, dict) and "in_prompt" in data:
            old = {k: v for k, v in data.items() if k not in ("in_prompt", "cited", "schema_version")}
            return {**old, "shown": data["in_prompt"], "schema_version": 2}
        return data

    @model_validator(mode="after")
    def _drawn(self):
        return check_drawn(self)


def check_drawn(record):
    """A record of randomized exposure must be one that a draw could make: every chance in (0, 1)
    and given for a randomized lesson, every class one of the randomized lessons (records made
    before chances were kept have none)."""
    randomized = set(record.randomized)
    for lesson, chance in record.chance.items():
        if lesson not in randomized:
            raise ValueError(f"a chance for {lesson!r}, which was not randomized")
        if not 0 < chance < 1:
            raise ValueError(f"the chance of {lesson!r} is {chance}, not between 0 and 1")
    for lesson, unit in record.classes.items():
        if lesson not in randomized or unit not in randomized:
            raise ValueError(f"{lesson!r} is drawn with class {unit!r}, which is not a randomized lesson here")
        if record.chance.get(lesson) != record.chance.get(unit):
            raise ValueError(f"{lesson!r} is drawn with class {unit!r} at another chance")
    return record
