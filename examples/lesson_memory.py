"""A role's learned lessons in any autogen AssistantAgent, with ``mas.LessonMemory``.

    python examples/lesson_memory.py                     # trains a small library on the fake model first
    python examples/lesson_memory.py --library libraries/maths.json --role solver \\
        --model-config my-model.json "What is (12 + 7) * 3?"

The agent is plain autogen; the memory puts the role's lesson block in its system prompt
before each turn, chosen for the task as in training. ``--model-config`` is any autogen model
client config (what ``client.dump_component()`` writes, loaded here by autogen itself: its
``api_key`` is written as stars, so delete that line to use ``OPENAI_API_KEY``); without it
the agent talks to mas's deterministic fake model, so the example runs anywhere, offline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

from autogen_agentchat.agents import AssistantAgent
from autogen_core.models import ChatCompletionClient

import mas

SOLVER = "You are the solver of a small team that solves maths problems."


async def train_a_library(folder: Path) -> Path:
    """A few steps of training on the fake model: a library file to read lessons from."""
    store = mas.LibraryStore(folder / "maths.json")
    async with mas.open_client("fake") as client:
        config = mas.TrainConfig(tasks=12, group_size=3, batch_size=4)
        await mas.train(mas.load_scenario("maths"), client=client, store=store, run_dir=folder / "run", config=config)
    return store.path


async def main(args: argparse.Namespace) -> None:
    library = args.library or await train_a_library(Path(tempfile.mkdtemp(prefix="mas-example-")))
    libraries = mas.load_library(library)
    if args.role not in libraries:  # a mistyped role gets no lessons of its own, and the memory cannot tell
        print(f"note: {library} has no library for the role {args.role!r} (it has: {', '.join(libraries)})\n")
    if args.model_config:
        client = ChatCompletionClient.load_component(json.loads(Path(args.model_config).read_text()))
    else:
        client = mas.FakeClient()
    agent = AssistantAgent(
        args.role,
        model_client=client,
        system_message=args.system_message,
        memory=[mas.LessonMemory(library, role=args.role)],
    )
    result = await agent.run(task=args.task)
    if isinstance(client, mas.FakeClient):
        print("The model's system message:\n" + client.requests[-1].system + "\n")
    print(f"{args.role}: {result.messages[-1].to_text()}")
    await client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task", nargs="?", default="What is (14 * 11) - 31?")
    parser.add_argument("--library", type=Path, help="a library file; default: train one on the fake model")
    parser.add_argument("--role", default="solver")
    parser.add_argument("--system-message", default=SOLVER, help="the agent's own system message")
    parser.add_argument("--model-config", help="an autogen model client config (JSON)")
    asyncio.run(main(parser.parse_args()))
