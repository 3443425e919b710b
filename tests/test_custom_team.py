"""Bring your own team: a user's autogen team factory, trained and injected by mas."""

import asyncio

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.teams import RoundRobinGroupChat

import mas
import mas.models.fake
from mas.models.fake import default_respond


def my_team(system_messages, client, task):
    """What a user writes: their own agents (and tools), with mas's system messages."""
    writer = AssistantAgent("writer", model_client=client, system_message=system_messages["writer"])
    checker = AssistantAgent("checker", model_client=client, system_message=system_messages["checker"])
    return RoundRobinGroupChat([writer, checker], max_turns=2)


def respond(request):
    if request.schema is not None:
        return default_respond(request)
    word = "yes" if request.unit("ok") < 0.5 else "no"
    return f"Checked. Result: {word}" if "checker" in request.system else "Draft: done."


def writer_and_checker(tasks: int, reward=lambda task, answer: float(answer == task.answer)) -> mas.Scenario:
    """A user's scenario: ``my_team`` on ``tasks`` items whose answer is "yes"."""
    return mas.custom_scenario(
        "mine",
        roles={"writer": "You are the writer. Draft the item.", "checker": "You are the checker. Check the draft."},
        team=my_team,
        tasks=[mas.Task(id=f"t{i}", question=f"Write item {i}.", answer="yes") for i in range(tasks)],
        reward=reward,
        extract=lambda transcript: transcript.rsplit("Result: ", 1)[-1].strip() if "Result: " in transcript else None,
    )


def test_a_users_team_is_trained_and_gets_its_lessons(tmp_path):
    scenario = writer_and_checker(8)
    store = mas.LibraryStore(tmp_path / "lib.json")
    client = mas.FakeClient(respond)
    result = asyncio.run(mas.train(scenario, client=client, store=store, run_dir=tmp_path / "run"))
    assert any(s.informative for s in result.steps)
    lessons = [l for v in store.heads().values() for l in v.lessons]
    assert lessons and all(l.id.split("/")[0] in {"writer", "checker", "global"} for l in lessons)
    role = next(l.id.split("/")[0] for l in lessons)
    prompt = mas.system_message(scenario.role(role), store.heads(), task=scenario.tasks[0].question)
    assert lessons[0].text in prompt
    seen = [r.system for r in client.requests if r.schema is None]
    assert any("Lessons learned" in s for s in seen)  # the user's agents got the lessons in later rollouts
