"""An autogen team file (``team.dump_component()``) trained, evaluated, ablated and transferred
by ``mas`` through the CLI, with a model config file, against a loopback OpenAI-compatible
endpoint: the agents are the roles, their FunctionTool runs, run.json records the file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from autogen_agentchat.agents import AssistantAgent, UserProxyAgent
from autogen_agentchat.teams import RoundRobinGroupChat, SelectorGroupChat
from autogen_core.tools import FunctionTool
from autogen_ext.models.openai import OpenAIChatCompletionClient

import mas
from mas.errors import UserError
from mas.meter import Meter
from mas.team.rollout import run_rollout
from mas.team.teamfile import load_team
from mas.types.tasks import Task
from tests.inprocess import cli


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as (12 + 7) * 3."""
    import ast
    import operator

    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.USub: operator.neg}

    def value(node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp):
            return ops[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp):
            return ops[type(node.op)](value(node.operand))
        raise ValueError("not arithmetic")

    return f"{value(ast.parse(expression, mode='eval').body)} (computed by the team file's tool)"


SAVED = OpenAIChatCompletionClient(model="gpt-4o", api_key="sk-saved-in-the-file")


def agents() -> list[AssistantAgent]:
    return [
        AssistantAgent(
            "planner", model_client=SAVED, description="Plans the steps.",
            system_message="You are the planner of a small team that solves maths problems. Write a short plan.",
        ),
        AssistantAgent(
            "solver", model_client=SAVED, description="Computes with the calculator.",
            system_message="You are the solver of a small team. Compute with the calculator tool.",
            tools=[FunctionTool(calculator, description="Evaluate an arithmetic expression.")],
            tool_call_summary_format="ANSWER: {result}",
        ),
        AssistantAgent(
            "verifier", model_client=SAVED, description="Checks the answer.",
            system_message="You are the verifier of a small team. Check the work; end with ANSWER: <number>.",
        ),
    ]  # fmt: skip


def dump(team, path: Path) -> Path:
    path.write_text(json.dumps(team.dump_component().model_dump(mode="json"), indent=1))
    return path


@pytest.fixture
def files(tmp_path, fault_server, monkeypatch):
    """A team file, an HF-style task file (problem / solution, no ids) and a model config."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    team = dump(RoundRobinGroupChat(agents(), max_turns=3), tmp_path / "team.json")
    tasks = tmp_path / "problems.jsonl"
    lines = [f.read_text() for f in [Path(mas.__file__).parents[1] / "scenarios" / "maths" / "tasks.jsonl"]][0]
    records = [json.loads(line) for line in lines.splitlines()[:30]]
    tasks.write_text(
        "".join(json.dumps({"problem": r["question"], "solution": f"So it is $\\boxed{{{r['answer']}}}$."}) + "\n"
                for r in records)
    )  # fmt: skip
    config = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=fault_server.url, api_key="sk-loopback-key")
    model = tmp_path / "model.json"
    model.write_text(json.dumps(config.dump_component().model_dump(mode="json")))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback-key")  # the dump writes "**********" for the key
    monkeypatch.setenv("MAS_TRUST", "autogen_core.tools.FunctionTool")  # our own file: its tool's code may run
    return {"team": team, "tasks": tasks, "model": model, "server": fault_server, "tmp": tmp_path}


def journal(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]


def test_train_eval_ablate_transfer_on_a_team_file(files, capsys, monkeypatch):
    tmp, server = files["tmp"], files["server"]
    library, run = tmp / "team-lib.json", tmp / "run"
    common = ["--team", files["team"], "--model-config", files["model"], "--reward", "numeric"]
    common += ["--question-field", "problem", "--answer-field", "solution"]
    code, out, err = cli(
        ["train", files["tasks"], *common, "--tasks", "8", "--batch-size", "4", "--group-size", "3",
         "--library", library, "--run-dir", run],
        capsys, monkeypatch,
    )  # fmt: skip
    assert code == 0, err
    assert "team.json: RoundRobinGroupChat of planner, solver, verifier" in out  # which team it was given

    settings = json.loads((run / "run.json").read_text())
    assert settings["team_file"] == str(files["team"].resolve())
    assert settings["team_sha256"] == hashlib.sha256(files["team"].read_bytes()).hexdigest()
    assert settings["model"] == "openai:gpt-4o-mini"

    records = journal(run)
    rollouts = [r["data"] for r in records if r["kind"] == "rollout"]
    assert len(rollouts) == 8 * 3 and not any(r["error"] for r in rollouts)
    calls = [
        c
        for r in rollouts
        for t in r["traces"]
        if t["role"] == "solver"
        for turn in t["turns"]
        for c in turn["tool_calls"]
    ]
    assert calls and all(c["name"] == "calculator" and "computed by the team file's tool" in c["result"] for c in calls)
    assert {r["task_id"] for r in rollouts} <= {str(i) for i in range(1, 31)}  # ids are line numbers
    assert any(r["answer"] for r in rollouts)

    heads = mas.load_library(str(library))
    assert set(heads) <= {"global", "planner", "solver", "verifier"} and any(v.lessons for v in heads.values())
    assert all(b["model"] == "gpt-4o-mini" for b in server.bodies)  # the run's model, never the saved gpt-4o
    assert "sk-saved-in-the-file" not in json.dumps(server.keys)
    later = [b for b in server.bodies if "Lessons learned" in b["messages"][0]["content"]]
    assert later, "the team's agents got their lessons in the second step"

    code, out, err = cli(
        ["eval", files["tasks"], *common, "--library", library, "--k", "1", "--json"], capsys, monkeypatch
    )
    assert code == 0, err
    [baseline, trained] = json.loads(out)
    assert baseline["library"] == "none" and trained["library"] != "none"
    assert set(baseline["tool_calls"]) == {"planner", "solver", "verifier"}

    code, out, err = cli(["transfer", files["tasks"], *common, "--library", library, "--json"], capsys, monkeypatch)
    assert code == 0, err
    assert {c["source"] for c in json.loads(out)["cells"]} <= {"planner", "solver", "verifier"}

    folder = tmp / "ablate"
    code, out, err = cli(
        ["ablate", files["tasks"], *common, "--variants", "full", "--tasks", "4", "--test-tasks", "4",
         "--group-size", "2", "--run-dir", folder, "--json"],
        capsys, monkeypatch,
    )  # fmt: skip
    assert code == 0, err
    assert [r["variant"] for r in json.loads(out)] == ["no library", "full"]


def test_resuming_with_a_changed_team_file_is_refused(files, capsys, monkeypatch):
    tmp = files["tmp"]
    args = ["train", "--tasks-file", files["tasks"], "--team", files["team"], "--model-config", files["model"],
            "--question-field", "problem", "--answer-field", "solution", "--tasks", "4", "--group-size", "2",
            "--library", tmp / "lib.json", "--run-dir", tmp / "run"]  # fmt: skip
    assert cli(args, capsys, monkeypatch)[0] == 0
    data = json.loads(files["team"].read_text())
    data["config"]["participants"][1]["config"]["tool_call_summary_format"] = "RESULT: {result}"
    files["team"].write_text(json.dumps(data))
    code, _, err = cli(args, capsys, monkeypatch)
    assert code == 2 and "other settings (team file)" in err


def test_a_learner_config_takes_the_learning_calls(files, fault_server, capsys, monkeypatch):
    from tests.fault_server import FaultServer

    with FaultServer() as learning:
        learner = OpenAIChatCompletionClient(model="big-model", base_url=learning.url, api_key="sk-x",
                                             model_info=mas.FakeClient().model_info)  # fmt: skip
        path = files["tmp"] / "learner.yaml"
        import yaml

        path.write_text(yaml.safe_dump(learner.dump_component().model_dump(mode="json")))
        code, _, err = cli(
            ["train", files["tasks"], "--team", files["team"], "--model-config", files["model"],
             "--learner-config", path, "--question-field", "problem", "--answer-field", "solution",
             "--tasks", "8", "--group-size", "3", "--run-dir", files["tmp"] / "run"],
            capsys, monkeypatch,
        )  # fmt: skip
        assert code == 0, err
        assert learning.bodies and all(b.get("response_format") for b in learning.bodies)  # summaries, advantages...
        assert not any(b.get("response_format") for b in fault_server.bodies)  # the team's calls only
        assert {b["model"] for b in learning.bodies} == {"big-model"}


def respond(request):
    """A selector that names the next speaker; agents as in the fake's world."""
    from mas.models.fake import default_respond

    text = "\n".join([request.system, *request.messages])
    if "select the next role" in text:
        history = text.split("Read the following conversation", 1)[-1]
        return next(
            (after for name, after in (("solver", "verifier"), ("planner", "solver")) if f"{name}:" in history),
            "planner",
        )
    return default_respond(request)


async def test_a_selector_team_uses_the_runs_client_for_speaker_selection(tmp_path):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps({"question": "What is 2 + 3?", "answer": "5"}) + "\n")
    team = dump(SelectorGroupChat(agents(), model_client=SAVED, max_turns=3), tmp_path / "selector.json")
    scenario = load_team(team, tasks=tasks, reward="numeric", trust=["autogen_core.tools.FunctionTool"])
    client = mas.FakeClient(respond)
    rollout = await run_rollout(
        scenario, scenario.tasks[0] if scenario.tasks else scenario.held_out[0], 0, client=client, heads={},
        settings={"seed": 1}, timeout=30, meter=Meter(),
    )  # fmt: skip
    assert rollout.error is None and rollout.answer in ("5", "6")  # the fake solver slips at times
    assert [t.role for t in rollout.traces if t.turns] == ["planner", "solver", "verifier"]
    assert any("select the next role" in "".join([r.system, *r.messages]) for r in client.requests)


BAD_TEAMS = {
    "not json": ("{", "not valid JSON"),
    "a model, not a team": (
        lambda: OpenAIChatCompletionClient(model="gpt-4o", api_key="x").dump_component(),
        "field 'component_type' is 'model', expected 'team'",
    ),
    "a person in the team": (
        lambda: RoundRobinGroupChat([agents()[0], UserProxyAgent("human")]).dump_component(),
        "participant 1 (human): UserProxyAgent is not supported",
    ),
    "a role named global": (
        lambda: RoundRobinGroupChat([AssistantAgent("global", model_client=SAVED)]).dump_component(),
        "'global' cannot name a role",
    ),
    "a tool that does not load": ("broken tool", "autogen cannot load this team"),
}


@pytest.mark.parametrize("name", BAD_TEAMS)
def test_a_bad_team_file_is_one_line_and_exit_2(name, files, capsys, monkeypatch):
    make, message = BAD_TEAMS[name]
    path = files["tmp"] / "bad.json"
    if make == "broken tool":
        data = json.loads(files["team"].read_text())
        tool = data["config"]["participants"][1]["config"]["workbench"][0]["config"]["tools"][0]
        tool["config"]["source_code"] = "def calculator(expression: str) -> str:\n    return (\n"
        path.write_text(json.dumps(data))
    else:
        path.write_text(make if isinstance(make, str) else json.dumps(make().model_dump(mode="json")))
    before = sorted(files["tmp"].rglob("*"))
    code, _, err = cli(["train", files["tasks"], "--team", path, "--model", "fake"], capsys, monkeypatch)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err and str(path) in err, err
    assert sorted(files["tmp"].rglob("*")) == before


@pytest.mark.parametrize(
    "args, message",
    [
        (["--team", "{team}"], "--team needs its tasks as a .jsonl file"),
        (["{tasks}", "--team", "{team}", "--tasks-file", "{tasks}"], "give the tasks once"),
        (["{tasks}", "--tasks-file", "{tasks}"], "--tasks-file goes with --team"),
        (["maths", "--reward", "numeric"], "--reward goes with --team"),
        (["{tasks}", "--team", "{team}", "--reward", "exact"], "--reward 'exact': expected a shipped reward"),
        (
            ["{tasks}", "--team", "{team}", "--reward", "no_such_module:score"],
            "no module 'no_such_module' on the import path",
        ),
        (["{tasks}", "--team", "{team}", "--reward", "json:nothing_here"], "json has no function 'nothing_here'"),
        (["{tasks}", "--team", "{team}"], "missing field 'question'"),
    ],
)
def test_bad_team_arguments(args, message, files, capsys, monkeypatch):
    args = [a.format(team=files["team"], tasks=files["tasks"]) for a in args]
    code, _, err = cli(["train", *args, "--model", "fake"], capsys, monkeypatch)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


def test_a_reward_function_of_your_own_gets_the_final_message(tmp_path):
    (tmp_path / "my_reward.py").write_text(
        "def score(task, answer):\n    return float(answer is not None and answer.endswith(task.answer))\n"
    )
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps({"question": "Say 5.", "answer": "5"}) + "\n")
    team = dump(RoundRobinGroupChat(agents()[:1], max_turns=1), tmp_path / "team.json")
    scenario = load_team(team, tasks=tasks, reward=f"{tmp_path / 'my_reward.py'}:score")
    assert scenario.answer_from == "final" and scenario.extract("The answer is 5\nTERMINATE") == "The answer is 5"
    assert scenario.reward(scenario.held_out[0] if scenario.held_out else scenario.tasks[0], "it is 5") == 1.0
    (tmp_path / "bad_reward.py").write_text("def score(task, answer):\n    return 'yes'\n")
    bad = load_team(team, tasks=tasks, reward=f"{tmp_path / 'bad_reward.py'}:score")
    with pytest.raises(UserError, match="returned str, expected a number"):
        bad.reward(Task(id="1", question="q", answer="5"), "5")
    for value in ("float('nan')", "float('inf')", "-1e999"):
        (tmp_path / "odd_reward.py").write_text(f"def score(task, answer):\n    return {value}\n")
        odd = load_team(team, tasks=tasks, reward=f"{tmp_path / 'odd_reward.py'}:score")
        with pytest.raises(UserError, match="expected a finite number"):
            odd.reward(Task(id="1", question="q", answer="5"), "5")


def test_a_bare_task_file_says_which_team_it_got(tmp_path, capsys, monkeypatch):
    tasks = tmp_path / "sums.jsonl"
    tasks.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": i + 1}) + "\n" for i in range(30)))
    code, out, err = cli(
        ["train", tasks, "--model", "fake", "--tasks", "4", "--run-dir", tmp_path / "run"], capsys, monkeypatch
    )
    assert code == 0, err
    assert out.startswith(f"{tasks}: every answer is a number, so the maths team (planner, solver, verifier)")
    code, out, _ = cli(["eval", tasks, "--model", "fake", "--no-library", "--json"], capsys, monkeypatch)
    assert code == 0 and json.loads(out)[0]["library"] == "none"  # --json: the output stays JSON
