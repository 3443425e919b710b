"""Config files name code: a provider is imported only when its module is trusted (autogen's
packages, mas, ``--trust MODULE``, ``MAS_TRUST``), checked for every component of the file
before anything is imported and before the run folder is made. The working directory is never
put on the import path by mas.

These tests start ``mas`` as a new process from a folder holding a module that writes a marker
file when it is imported: ``python -c`` puts that folder on the import path (as ``python -m``
does), so anything that imports the module by name runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.openai import OpenAIChatCompletionClient

MARKER = '''
from pathlib import Path

Path("imported.txt").write_text("{name} ran")

from autogen_agentchat.conditions import MaxMessageTermination


class Stop(MaxMessageTermination):
    """A termination condition of the user's own."""


def score(task, answer):
    return float(bool(answer) and task.answer in answer)
'''


def mas(*args: object, cwd: Path, env: dict | None = None, script: bool = False) -> subprocess.CompletedProcess:
    """``mas`` as a new process in ``cwd``: through ``python -c`` (the folder is on the import
    path), or the installed ``mas`` script (it is not)."""
    start = [str(Path(sys.executable).with_name("mas"))]
    if not script:
        start = [sys.executable, "-c", "from mas.cli.main import main; main()"]
    return subprocess.run(
        [*start, *map(str, args)], capture_output=True, text=True, cwd=cwd, env={**os.environ, **(env or {})}
    )


@pytest.fixture
def folder(tmp_path):
    """A folder with a task file, a team file and a module that marks its import."""
    (tmp_path / "marker_mod.py").write_text(MARKER.format(name="marker_mod"))
    (tmp_path / "tasks.jsonl").write_text(
        "".join(json.dumps({"question": f"What is {i} + 2?", "answer": str(i + 2)}) + "\n" for i in range(12))
    )
    client = OpenAIChatCompletionClient(model="gpt-4o", api_key="x")
    agents = [AssistantAgent("solver", model_client=client, system_message="You solve. End with ANSWER: <number>.")]
    team = RoundRobinGroupChat(agents, termination_condition=MaxMessageTermination(3))
    (tmp_path / "team.json").write_text(json.dumps(team.dump_component().model_dump(mode="json"), indent=1))
    return tmp_path


def edit_team(folder: Path, where: str) -> str:
    """Name ``marker_mod`` as a provider at ``where`` in the team file; the field's path."""
    data = json.loads((folder / "team.json").read_text())
    agent = data["config"]["participants"][0]["config"]
    if where == "termination":
        data["config"]["termination_condition"]["provider"] = "marker_mod.Stop"
        field = "config.termination_condition.provider"
    elif where == "tool":
        tool = {"provider": "marker_mod.Tool", "component_type": "tool", "config": {"name": "t"}}
        agent["workbench"][0]["config"]["tools"].append(tool)
        field = "config.participants[0].config.workbench[0].config.tools[0].provider"
    elif where == "model client":
        agent["model_client"]["provider"] = "marker_mod.Client"
        field = "config.participants[0].config.model_client.provider"
    else:
        agent["model_context"]["provider"] = "marker_mod.Context"
        field = "config.participants[0].config.model_context.provider"
    (folder / "team.json").write_text(json.dumps(data))
    return field


def snapshot(folder: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*") if "__pycache__" not in p.parts}


@pytest.mark.parametrize("where", ["termination", "tool", "model client", "model context"])
def test_a_nested_provider_from_the_working_directory_is_never_imported(folder, where):
    field = edit_team(folder, where)
    before = snapshot(folder)
    done = mas("train", "tasks.jsonl", "--team", "team.json", "--model", "fake", "--run-dir", "run", cwd=folder)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "team.json" in line and field in line and "'marker_mod'" in line, line
    assert not (folder / "imported.txt").exists()
    assert snapshot(folder) == before  # no run folder, no library


def test_trust_lets_a_provider_through(folder):
    edit_team(folder, "termination")
    common = ["tasks.jsonl", "--team", "team.json", "--model", "fake", "--tasks", "2", "--group-size", "2"]
    done = mas("train", *common, "--run-dir", "run", "--trust", "marker_mod", cwd=folder)
    assert done.returncode == 0, done.stderr
    assert (folder / "imported.txt").read_text() == "marker_mod ran"
    (folder / "imported.txt").unlink()
    done = mas("eval", *common[:-4], "--k", "1", "--tasks", "1", "--json", cwd=folder, env={"MAS_TRUST": "marker_mod"})
    assert done.returncode == 0, done.stderr
    assert (folder / "imported.txt").exists()


def test_code_saved_in_a_team_file_needs_trust(folder):
    """A FunctionTool runs the source code saved in the file: the file is code, trusted or not."""
    data = json.loads((folder / "team.json").read_text())
    tool = {
        "provider": "autogen_core.tools.FunctionTool", "component_type": "tool",
        "config": {"source_code": "import marker_mod\n\ndef t(x: str) -> str:\n    return x\n", "name": "t",
                   "description": "t", "global_imports": [], "has_cancellation_support": False},
    }  # fmt: skip
    data["config"]["participants"][0]["config"]["workbench"][0]["config"]["tools"].append(tool)
    (folder / "team.json").write_text(json.dumps(data))
    done = mas("train", "tasks.jsonl", "--team", "team.json", "--model", "fake", "--run-dir", "run", cwd=folder)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "team.json" in line and "tools[0].provider" in line and "autogen_core.tools.FunctionTool" in line, line
    assert not (folder / "imported.txt").exists() and not (folder / "run").exists()
    trusted = ["--trust", "autogen_core.tools.FunctionTool", "--tasks", "2", "--group-size", "2"]
    done = mas(
        "train", "tasks.jsonl", "--team", "team.json", "--model", "fake", "--run-dir", "run", *trusted, cwd=folder
    )
    assert done.returncode == 0, done.stderr


def test_a_model_config_naming_any_module_imports_nothing(folder):
    (folder / "m.json").write_text(json.dumps({"provider": "this.Nope", "config": {}}))
    done = mas("train", "maths", "--model-config", "m.json", "--run-dir", "run", cwd=folder)
    assert "Beautiful is better than ugly" not in done.stdout + done.stderr  # the stdlib's `this` never ran
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "m.json" in line and "field 'provider'" in line and "'this'" in line, line
    assert not (folder / "run").exists()


def test_a_provider_nested_in_a_model_config_is_checked(folder):
    token = {"provider": "marker_mod.Token", "component_type": "token_provider", "config": {}}
    config = {"provider": "AzureOpenAIChatCompletionClient", "config": {
        "model": "gpt-4o", "azure_endpoint": "https://example.openai.azure.com", "azure_deployment": "d",
        "api_version": "2024-06-01", "azure_ad_token_provider": token,
    }}  # fmt: skip
    (folder / "m.yaml").write_text(json.dumps(config))  # JSON is YAML too
    done = mas("train", "maths", "--learner-config", "m.yaml", "--model", "fake", "--run-dir", "run", cwd=folder)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "m.yaml" in line and "config.azure_ad_token_provider.provider" in line and "'marker_mod'" in line, line
    assert not (folder / "imported.txt").exists() and not (folder / "run").exists()


def test_a_reward_module_is_not_looked_for_in_the_working_directory(folder):
    """The installed ``mas`` script: the folder is not on the import path, and mas does not
    put it there; a file path names the user's own reward."""
    (folder / "my_rewards.py").write_text(MARKER.format(name="my_rewards"))
    args = ["train", "tasks.jsonl", "--team", "team.json", "--model", "fake", "--run-dir", "run"]
    done = mas(*args, "--reward", "my_rewards:score", cwd=folder, script=True)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "--reward 'my_rewards:score'" in line and "my_rewards.py:score" in line, line
    assert not (folder / "imported.txt").exists() and not (folder / "run").exists()
    done = mas(*args, "--reward", "my_rewards.py:score", "--tasks", "2", "--group-size", "2", cwd=folder, script=True)
    assert done.returncode == 0, done.stderr
    assert (folder / "imported.txt").read_text() == "my_rewards ran"


@pytest.mark.parametrize(
    "provider, runner",
    [
        ("autogen_core.tools.FunctionTool", "autogen_core.tools.FunctionTool"),
        ("autogen_ext.tools.mcp.McpWorkbench", "autogen_ext.tools.mcp"),
        ("autogen_ext.code_executors.local.LocalCommandLineCodeExecutor", "autogen_ext.code_executors"),
    ],
)
def test_classes_that_run_what_the_file_names_are_trusted_only_by_name(provider, runner):
    from mas.providers import refusal, trusted

    assert f"--trust {runner} to run it" in refusal(provider, trusted())
    assert refusal(provider, trusted(["autogen_ext", "autogen_core"])) is not None  # all of autogen is not enough
    assert refusal(provider, trusted([runner])) is None
    assert refusal("autogen_ext.models.openai.OpenAIChatCompletionClient", trusted()) is None
