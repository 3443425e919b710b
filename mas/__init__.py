"""mas: Training-Free GRPO for multi-agent teams with per-role lesson libraries.

    import asyncio
    from pathlib import Path

    import mas

    scenario = mas.load_scenario("maths")
    async def main():
        async with mas.open_client("fake") as client:
            store = mas.LibraryStore("libraries/maths.json")
            await mas.train(scenario, client=client, store=store, run_dir=Path("runs/demo"))
            return await mas.evaluate(scenario, client=client, heads=store.heads())
    print(asyncio.run(main()).mean_at_k)

Any autogen ``ChatCompletionClient`` can be passed as ``client``. At inference, any autogen
``AssistantAgent`` gets its role's lessons with ``memory=[mas.LessonMemory(library_file, role=...)]``.
"""

from mas.config import EvalConfig, TrainConfig
from mas.errors import ModelReplyError, UserError
from mas.library.store import LibraryStore
from mas.models.clients import open_client
from mas.models.fake import FakeClient
from mas.scenario import Scenario, custom_scenario, load_scenario
from mas.studies.evaluate import EvalResult, evaluate
from mas.team import system_message
from mas.train import TrainResult, train
from mas.types import Task, Version


def load_library(path: str) -> dict[str, Version]:
    """The latest version of every library in a library file, by library name."""
    return LibraryStore(path).heads()


def __getattr__(name: str):
    """Names imported on first use, so that ``import mas`` stays as light as it is."""
    if name == "LessonMemory":
        from mas.memory import LessonMemory

        return LessonMemory
    if name == "load_team":
        from mas.teamfile import load_team

        return load_team
    raise AttributeError(f"module 'mas' has no attribute {name!r}")


__all__ = [
    "EvalConfig",
    "EvalResult",
    "FakeClient",
    "LessonMemory",
    "LibraryStore",
    "ModelReplyError",
    "Scenario",
    "Task",
    "TrainConfig",
    "TrainResult",
    "UserError",
    "custom_scenario",
    "evaluate",
    "load_library",
    "load_scenario",
    "load_team",
    "open_client",
    "system_message",
    "train",
]
