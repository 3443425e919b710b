"""What every stage of a step shares (``Context``): the scenario, settings, clients, journal,
meter, the libraries as the step found them, and the evidence exposure plans with.

Stage: none (shared by every stage of a step).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from autogen_core.models import ChatCompletionClient

from mas.config import TrainConfig
from mas.executors import Executor
from mas.journal import Journal
from mas.meter import Meter
from mas.team.rollout import start_gate
from mas.team.scenario import Scenario
from mas.types.evidence import Effect, PromotionMove
from mas.types.lessons import GLOBAL, Lesson, Provenance, Rejected, Version


@dataclass
class Context:
    """What every stage of a step shares."""

    scenario: Scenario
    config: TrainConfig
    client: ChatCompletionClient
    journal: Journal
    meter: Meter
    heads: dict[str, Version]
    provenance: Provenance
    effects: dict[tuple[str, str], Effect] = field(default_factory=dict)
    """The randomized evidence so far, per (role, lesson): what exposure plans with."""
    same: Callable[[Lesson, Lesson], bool] = lambda a, b: False
    """Lessons judged to say the same thing (so far): no trial of what a role already has."""
    classes: dict[str, str] = field(default_factory=dict)
    """Lesson id -> its class of twins (``similar.classes``): randomized as one lesson."""
    departed: list[Lesson] = field(default_factory=list)
    """Private lessons that left their library, pruned or deleted (``hierarchy.departed``):
    their transfer trials may go on (``ExposurePolicy.departed``)."""
    decided_against: dict[tuple, str] = field(default_factory=dict)
    """Edits people decided against, by ``pending.same_edit``, each with why: a step does not make
    them (``mas.library.people``)."""
    refused: list[Rejected] = field(default_factory=list)
    """Operations of the step's advantages that could not be used, each with its reason."""
    room: list[PromotionMove] = field(default_factory=list)
    """Lessons the step's edits removed to make room in a full library, each with why
    (``edit.made_room``): logged with the step's prunings."""
    learner: ChatCompletionClient | None = None
    """The client of the learning calls, when it is not ``client``."""
    on_rollout: Callable[[int], None] = lambda n: None
    """Told of each rollout as it ends, or is read back from the journal (for progress)."""
    starting: asyncio.Semaphore = field(default_factory=start_gate)
    """Rollouts building their team (``mas.team.rollout.run_rollout``), when they run in this process."""
    executor: Executor | None = None
    """Where the rollouts run (``mas.executor``); None: in this process, with ``client``."""

    @property
    def prefix(self) -> str:
        """Journal key prefix of the step, ``e<epoch>/s<step>``."""
        return f"e{self.provenance.epoch}/s{self.provenance.step}"

    @property
    def libraries(self) -> list[str]:
        return [GLOBAL, *self.scenario.role_names]

    def lesson(self, lesson_id: str) -> Lesson | None:
        """The lesson of a library's head (what an edit can change)."""
        library = lesson_id.rpartition("/")[0]
        version = self.heads.get(library)
        return next((l for l in version.lessons if l.id == lesson_id), None) if version else None

    def shown(self, lesson_id: str) -> Lesson | None:
        """A lesson a rollout of the step may show: a library's, or a departed one on trial."""
        return self.lesson(lesson_id) or next((l for l in self.departed if l.id == lesson_id), None)
