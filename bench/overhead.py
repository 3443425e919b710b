"""Framework overhead of a mas rollout.

Goal: running the maths team through ``mas.team.rollout.run_rollout`` takes at most 1.15x the time
of the same team built by hand as a bare autogen-agentchat RoundRobinGroupChat (same agents,
tools, system messages, instant FakeClient) and run with ``team.run(task=...)``.

Both sides run CHUNK rollouts at a time, alternating, for ROUNDS rounds (N rollouts each
way in all); the ratio of the median chunk times is the result. Each role carries a small library (4 lessons), so the mas side also
pays for building the lesson block of every prompt, as it does in training.
``--profile`` prints a cProfile of the mas side.
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import pstats
import statistics
import sys
import time

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.teams import RoundRobinGroupChat

from mas.library.edits import apply
from mas.meter import Meter
from mas.models.fake import FakeClient
from mas.team.rollout import run_rollout, system_message
from mas.team.scenario import load_scenario
from mas.tools import TOOLS
from mas.types.lessons import GLOBAL, Add, Version

GOAL, CHUNK, ROUNDS = 1.15, 40, 25
N = CHUNK * ROUNDS
SCENARIO = load_scenario("maths")
TASKS = (SCENARIO.tasks * 10)[:CHUNK]
TEXTS = [
    "Check every number of the task twice.",
    "When the task has brackets, keep them in the expression.",
    "Pass the whole expression to the calculator.",
    "State the final answer on its own line.",
]


def library(name: str) -> Version:
    return apply(
        Version(library=name, number=0, lessons=[], next_id=1), [Add(op="add", text=f"{t} ({name})") for t in TEXTS]
    )[0]


HEADS = {n: library(n) for n in [GLOBAL, *SCENARIO.role_names]}


async def mas_side(client: FakeClient) -> None:
    for i, task in enumerate(TASKS):
        settings = {"seed": i, "temperature": 0.7, "max_tokens": 256}
        await run_rollout(SCENARIO, task, 0, client=client, heads=HEADS, settings=settings, timeout=60, meter=Meter())


PROMPTS = {t.id: {r.name: system_message(r, HEADS, task=t.question) for r in SCENARIO.roles} for t in TASKS}


async def bare_side(client: FakeClient) -> None:
    for task in TASKS:
        agents = [
            AssistantAgent(
                role.name,
                model_client=client,
                system_message=PROMPTS[task.id][role.name],
                description=role.description,
                tools=[TOOLS[name](task) for name in role.tools] or None,
                reflect_on_tool_use=role.reflect and bool(role.tools),
                max_tool_iterations=role.tool_rounds,
                tool_call_summary_format=role.tool_summary,
            )  # fmt: skip
            for role in SCENARIO.roles
        ]
        await RoundRobinGroupChat(agents, max_turns=len(agents)).run(task=task.question)


def timed(side) -> float:
    client = FakeClient()
    gc.collect()
    start = time.perf_counter()
    asyncio.run(side(client))
    elapsed = time.perf_counter() - start
    assert client.calls >= 3 * CHUNK, client.calls
    return elapsed


def main() -> int:
    if "--profile" in sys.argv:
        cProfile.run("asyncio.run(mas_side(FakeClient()))", "/tmp/overhead.prof")
        pstats.Stats("/tmp/overhead.prof").sort_stats("cumulative").print_stats(40)
        return 0
    timed(mas_side), timed(bare_side)  # warm up caches and imports
    mas_times, bare_times = [], []
    for r in range(ROUNDS):
        for side, times in ((mas_side, mas_times), (bare_side, bare_times))[:: 1 if r % 2 else -1]:
            times.append(timed(side))
    mas_t, bare_t = statistics.median(mas_times), statistics.median(bare_times)
    ratio = mas_t / bare_t
    print(
        f"{N} rollouts each way: mas {mas_t * 1000 / CHUNK:.2f} ms/rollout, bare {bare_t * 1000 / CHUNK:.2f} ms/rollout"
    )
    ok = ratio <= GOAL
    print(f"overhead ratio mas/bare = {ratio:.3f} (goal <= {GOAL}) {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
