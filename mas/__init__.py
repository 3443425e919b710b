"""mas: Training-Free GRPO for multi-agent teams with per-role lesson libraries.

Stage: none: the Python API (training runs every stage; evaluation and inference, after training).

    import asyncio
    from pathlib import Path

    import mas

    scenario = mas.load_scenario("maths")
    async def main():
        async with mas.open_client("fake") as client:
            store = mas.LibraryStore("libraries/maths.json")
            await mas.train(scenario, client=client, store=store, run_dir=Path("runs/demo"))
            return await mas.evaluate(scenario, client=client, heads=store)
    print(asyncio.run(main()).mean_at_k)

Any autogen ``ChatCompletionClient`` can be passed as ``client``. At inference, any autogen
``AssistantAgent`` gets its role's lessons with ``memory=[mas.LessonMemory(library_file, role=...)]``.
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names below, imported when first used (``import mas`` stays cheap)
    from pathlib import Path

    from mas.config import EvalConfig, ExposurePolicy, PromotionPolicy, TrainConfig
    from mas.errors import ModelReplyError, Stopped, UserError
    from mas.executors.ray_driver import RayExecutor
    from mas.library.store import LibraryStore
    from mas.models.clients import open_client
    from mas.models.fake import FakeClient
    from mas.studies.evaluate import EvalResult, evaluate
    from mas.team.memory import LessonMemory
    from mas.team.rollout import system_message
    from mas.team.scenario import Scenario, custom_scenario, load_scenario
    from mas.team.teamfile import load_team
    from mas.train import TrainResult, train
    from mas.types.evidence import Effect
    from mas.types.lessons import Budget, Lesson, Version
    from mas.types.reports import StepReport
    from mas.types.tasks import Task

_WHERE = {
    "EvalConfig": "mas.config",
    "TrainConfig": "mas.config",
    "ExposurePolicy": "mas.config",
    "PromotionPolicy": "mas.config",
    "ModelReplyError": "mas.errors",
    "Stopped": "mas.errors",
    "UserError": "mas.errors",
    "LibraryStore": "mas.library.store",
    "LessonMemory": "mas.team.memory",
    "open_client": "mas.models.clients",
    "FakeClient": "mas.models.fake",
    "RayExecutor": "mas.executors.ray_driver",
    "Scenario": "mas.team.scenario",
    "custom_scenario": "mas.team.scenario",
    "load_scenario": "mas.team.scenario",
    "EvalResult": "mas.studies.evaluate",
    "evaluate": "mas.studies.evaluate",
    "system_message": "mas.team.rollout",
    "load_team": "mas.team.teamfile",
    "TrainResult": "mas.train",
    "train": "mas.train",
    "Task": "mas.types.tasks",
    "Version": "mas.types.lessons",
    "Lesson": "mas.types.lessons",
    "Effect": "mas.types.evidence",
    "Budget": "mas.types.lessons",
    "StepReport": "mas.types.reports",
}
"""Where each public name lives: ``import mas`` imports none of them (a command such as
``mas library show`` never needs autogen, sympy or matplotlib); the first use imports one."""


def __getattr__(name: str) -> object:
    if name not in _WHERE:
        raise AttributeError(f"module 'mas' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


class _Package(ModuleType):
    """``mas.train`` is the function, as when this file imported it: importing the submodule
    ``mas.train`` sets the package's attribute to the module, which is refused here."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _WHERE and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def load_library(path: str | Path) -> dict[str, Version]:
    """The latest version of every library in a library file, by library name, without the
    lessons that fail the screen. A missing file is refused, as ``LessonMemory`` refuses it: an
    empty result for a mistyped path put no lessons in a prompt, and nothing said so."""
    from pathlib import Path

    from mas.errors import UserError
    from mas.library.store import LibraryStore

    if not Path(path).is_file():
        raise UserError(f"{path}: no such library file")
    return LibraryStore(path).heads()


def evidence(path: str | Path) -> dict[tuple[str, str], Effect]:
    """The randomized evidence of a library file's runs, per (role, lesson id): what showing the
    lesson to that role did to the team's reward (``Effect``: the effect, its interval, its
    e-value), twins counted as one, as training and ``mas library show`` count it."""
    from pathlib import Path

    from mas.config import PromotionPolicy
    from mas.errors import UserError
    from mas.library.hierarchy import effects
    from mas.library.store import LibraryStore

    if not Path(path).is_file():
        raise UserError(f"{path}: no such library file")
    return effects(LibraryStore(path), PromotionPolicy())


__all__ = [
    "Budget",
    "Effect",
    "EvalConfig",
    "EvalResult",
    "ExposurePolicy",
    "FakeClient",
    "Lesson",
    "LessonMemory",
    "LibraryStore",
    "ModelReplyError",
    "PromotionPolicy",
    "RayExecutor",
    "Scenario",
    "StepReport",
    "Stopped",
    "Task",
    "TrainConfig",
    "TrainResult",
    "UserError",
    "custom_scenario",
    "evaluate",
    "evidence",
    "load_library",
    "load_scenario",
    "load_team",
    "open_client",
    "system_message",
    "train",
]
