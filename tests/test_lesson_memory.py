"""``mas.LessonMemory`` gives a real autogen ``AssistantAgent`` its role's lessons at inference:
the loopback endpoint records each request, and the system message the model gets is the one
training composes, chosen by the task (BM25) within the library's recorded budget."""

from __future__ import annotations

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.memory import ListMemory, Memory, MemoryContent
from autogen_core.models import ModelInfo
from autogen_ext.models.openai import OpenAIChatCompletionClient

import mas
from mas.errors import UserError
from mas.library.store import LibraryStore
from mas.team.scenario import Role
from mas.types.lessons import Budget, Lesson, Provenance, Version

PROMPT = "You are the solver of a small team that solves maths problems."
FRACTIONS = "When a fraction appears, bring both fractions to a common denominator first."
UNITS = "When quantities have units, convert them to the same unit before adding."
SHARED = "When you give the final result, write it as ANSWER: <number>."
BUDGET = Budget(inject_tokens=16)  # room for one private lesson: the task decides which
FRACTION_TASK = "What is 1/3 + 1/6 as a fraction?"
UNIT_TASK = "A rope is 2 m long and another 30 cm; convert the units and give their total length in cm."


@pytest.fixture
def library(tmp_path):
    path = tmp_path / "maths.json"
    trained = Provenance(run="r", epoch=0, step=0, budget=BUDGET)
    LibraryStore(path).commit(
        [
            Version(library="global", number=1, lessons=[Lesson(id="global/0001", text=SHARED)], next_id=2),
            Version(
                library="solver",
                number=1,
                next_id=3,
                provenance=trained,
                lessons=[Lesson(id="solver/0001", text=FRACTIONS), Lesson(id="solver/0002", text=UNITS)],
            ),  # fmt: skip
        ]
    )
    return path


def client(server, *, merged: bool) -> OpenAIChatCompletionClient:
    """``merged``: a model that takes one system message (autogen then joins them)."""
    info = ModelInfo(
        vision=False, function_calling=True, json_output=True, family="unknown", structured_output=False,
        multiple_system_messages=not merged,
    )  # fmt: skip
    return OpenAIChatCompletionClient(model="test-model", base_url=server.url, api_key="x", model_info=info)


def systems(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] in ("system", "developer")]


def training_prompt(library, task: str) -> str:
    role = Role(name="solver", description="Solves.", system_prompt=PROMPT)
    return mas.system_message(role, mas.load_library(str(library)), task=task, budget=BUDGET)


@pytest.mark.parametrize("task, lesson, other", [(FRACTION_TASK, FRACTIONS, UNITS), (UNIT_TASK, UNITS, FRACTIONS)])
async def test_the_model_gets_the_training_prompt_chosen_by_the_task(fault_server, library, task, lesson, other):
    model = client(fault_server, merged=True)
    agent = AssistantAgent(
        "solver", model_client=model, system_message=PROMPT, memory=[mas.LessonMemory(library, role="solver")]
    )
    await agent.run(task=task)
    [body] = fault_server.bodies
    assert systems(body) == [training_prompt(library, task)]  # one system message, exactly training's
    assert lesson in systems(body)[0] and SHARED in systems(body)[0] and other not in systems(body)[0]
    await model.close()


async def test_with_separate_system_messages_the_text_is_the_same(fault_server, library):
    model = client(fault_server, merged=False)
    agent = AssistantAgent(
        "solver", model_client=model, system_message=PROMPT, memory=[mas.LessonMemory(library, role="solver")]
    )
    await agent.run(task=FRACTION_TASK)
    [body] = fault_server.bodies
    assert "\n".join(systems(body)).rstrip() == training_prompt(library, FRACTION_TASK)
    assert [m["role"] for m in body["messages"]][:2] == ["system", "system"]
    await model.close()


async def test_in_a_team_over_many_turns_the_block_never_piles_up(fault_server, library):
    model = client(fault_server, merged=True)
    memory = mas.LessonMemory(library, role="solver")
    solver = AssistantAgent("solver", model_client=model, system_message=PROMPT, memory=[memory])
    other = AssistantAgent("planner", model_client=model, system_message="You are the planner of a small team.")
    team = RoundRobinGroupChat([other, solver], max_turns=6)
    await team.run(task=UNIT_TASK)
    solver_calls = [b for b in fault_server.bodies if "solver" in systems(b)[0]]
    assert len(solver_calls) == 3
    for body in solver_calls:  # the team's task chose the lessons every turn, other agents' words did not
        assert systems(body) == [training_prompt(library, UNIT_TASK)]
    await model.close()


async def test_autogen_list_memory_fails_where_lesson_memory_works(fault_server, library):
    """Why LessonMemory exists: ListMemory appends a system message after the task."""
    model = client(fault_server, merged=True)
    listed = ListMemory()
    await listed.add(MemoryContent(content=FRACTIONS, mime_type="text/plain"))
    agent = AssistantAgent("solver", model_client=model, system_message=PROMPT, memory=[listed])
    with pytest.raises(ValueError, match="Not continuous system messages"):
        await agent.run(task=FRACTION_TASK)
    await model.close()


async def test_it_reads_a_new_library_version_at_the_next_turn(fault_server, library):
    model = client(fault_server, merged=True)
    agent = AssistantAgent(
        "solver", model_client=model, system_message=PROMPT, memory=[mas.LessonMemory(library, role="solver")]
    )
    await agent.run(task=FRACTION_TASK)
    store = LibraryStore(library)
    newer = "When a fraction can be simplified, simplify it before you answer."
    head = store.head("solver")
    store.commit(
        [head.model_copy(update={"number": 2, "next_id": 4, "lessons": [Lesson(id="solver/0003", text=newer)]})]
    )
    await agent.run(task=FRACTION_TASK)
    assert newer in systems(fault_server.bodies[-1])[0] and FRACTIONS not in systems(fault_server.bodies[-1])[0]
    await model.close()


async def test_query_and_the_component_round_trip(library):
    memory = mas.LessonMemory(library, role="solver")
    found = await memory.query(FRACTION_TASK)
    assert [r.metadata["id"] for r in found.results] == ["global/0001", "solver/0001"]
    loaded = Memory.load_component(memory.dump_component())
    assert isinstance(loaded, mas.LessonMemory)
    assert [r.content for r in (await loaded.query(UNIT_TASK)).results] == [SHARED, UNITS]
    with pytest.raises(NotImplementedError):
        await memory.add(MemoryContent(content="x", mime_type="text/plain"))
    saved = memory.dump_component().model_copy(update={"provider": "mas.memory.LessonMemory"})  # saved before the move
    assert isinstance(Memory.load_component(saved), mas.LessonMemory)


def test_a_missing_library_or_a_bad_role_is_refused_at_once(tmp_path, library):
    with pytest.raises(UserError, match="no such library file"):
        mas.LessonMemory(tmp_path / "none.json", role="solver")
    with pytest.raises(UserError, match="not a role name"):
        mas.LessonMemory(library, role="../solver")


def test_import_mas_does_not_import_the_memory_module():
    import subprocess
    import sys

    code = "import sys, mas; print('mas.team.memory' in sys.modules); mas.LessonMemory; print('mas.team.memory' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]


def test_the_example_runs(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "lesson_memory.py"
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Lessons learned from earlier tasks" in done.stdout and "solver: " in done.stdout
