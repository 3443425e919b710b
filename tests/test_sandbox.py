"""The python tool: model-written code runs in a limited subprocess, never in mas."""

import asyncio
import os
import time

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import FunctionCall

from mas.meter import Meter
from mas.models.fake import FakeClient
from mas.scenario import custom_scenario
from mas.team import run_rollout
from mas.tools import TOOLS
from mas.tools.sandbox import Limits, run_python
from mas.types import Task


def run(code, **limits):
    return asyncio.run(run_python(code, Limits(**limits)))


def test_it_runs_code_and_returns_the_output():
    assert run("print(sum(range(10)))") == "45"
    assert "ZeroDivisionError" in run("1/0")


def test_no_secrets_and_a_scratch_directory(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    out = run("import os; print(sorted(os.environ)); print(os.getcwd()); open('x.txt', 'w').write('hi')")
    env, cwd = out.splitlines()[:2]
    assert "OPENAI_API_KEY" not in env and "sk-do-not-leak" not in out
    assert "mas-sandbox-" in cwd and not os.path.exists(cwd)  # the scratch directory is gone


@pytest.mark.parametrize(
    "code, limits, expected",
    [
        ("while True: pass", {"cpu_seconds": 1}, "signal"),
        ("x = bytearray(2_000_000_000)", {"memory_mb": 128}, "MemoryError"),
        ("import time; time.sleep(30)", {"wall_seconds": 1}, "ran past 1 s"),
        ("print('y' * 100_000)", {}, "y"),
    ],
)
def test_runaway_code_is_stopped(code, limits, expected):
    started = time.monotonic()
    out = run(code, **limits)
    assert expected in out and len(out) <= 2000 + 100
    assert time.monotonic() - started < 8


def test_a_hanging_tool_call_cannot_hold_the_rollout_past_its_deadline():
    def respond(request):
        if request.tool_results:
            return "ANSWER: 1"
        return [FunctionCall(id="1", name="python", arguments='{"code": "import time; time.sleep(60)"}')]

    def team(prompts, client, task):
        agent = AssistantAgent(
            "coder", model_client=client, system_message=prompts["coder"], tools=[TOOLS["python"](task)]
        )
        return RoundRobinGroupChat([agent], max_turns=1)

    scenario = custom_scenario("s", roles={"coder": "You are the coder."}, team=team, tasks=[], reward=lambda t, a: 0.0)
    started = time.monotonic()
    rollout = asyncio.run(run_rollout(
        scenario, Task(id="t", question="q"), 0, client=FakeClient(respond), heads={}, settings={}, timeout=1.0, meter=Meter(),
    ))  # fmt: skip
    assert rollout.error.startswith("timeout") and time.monotonic() - started < 5
    assert "sleep(60)" not in os.popen("ps -eo args").read()  # the child was killed, not left running
