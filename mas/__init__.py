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

Any autogen ``ChatCompletionClient`` can be passed as ``client``.
"""

from .clients import open_client
from .config import EvalConfig, TrainConfig
from .errors import ModelReplyError, UserError
from .evaluate import EvalResult, evaluate
from .fake import FakeClient
from .types import Task
from .library import role_block
from .scenario import Scenario, custom_scenario, load_scenario
from .store import LibraryStore
from .team import system_message
from .train import TrainResult, train


def load_library(path: str) -> dict:
    """The latest version of every library in a library file, by library name."""
    return LibraryStore(path).heads()


__all__ = [
    "EvalConfig",
    "EvalResult",
    "FakeClient",
    "LibraryStore",
    "ModelReplyError",
    "Scenario",
    "TrainConfig",
    "Task",
    "TrainResult",
    "UserError",
    "custom_scenario",
    "evaluate",
    "load_library",
    "load_scenario",
    "open_client",
    "role_block",
    "system_message",
    "train",
]
