"""A new user's own domain, as the README tells them to bring it: a scenario folder (scenario.toml,
roles as TOML, tasks), a bare task file, an autogen team file with a reward of their own. Each
mistake they make gets one line naming the file and field, exit code 2 and nothing written."""

from __future__ import annotations

import json

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.replay import ReplayChatCompletionClient

from mas import paths
from mas.datasets import Fields, load_jsonl
from mas.team.scenario import held_out, load_scenario
from mas.team.teamfile import load_team
from mas.types.tasks import Task
from tests.inprocess import cli

SCENARIO = 'name = "{name}"\nroles = {roles}\ntasks = "tasks.jsonl"\nreward = "qa"\n'
ROLE = 'name = "{name}"\ndescription = "d"\nsystem_prompt = "You are the {name}. Finish with ANSWER: <city>."\n'
TASKS = "".join(
    json.dumps({"id": f"cap-{i}", "question": f"What is the capital of country {i}?", "answer": f"City{i}"}) + "\n"
    for i in range(12)
)


def run(args, capsys, monkeypatch) -> tuple[int, str, str]:
    return cli([str(a) for a in args], capsys, monkeypatch)


def written() -> list:
    """Everything under the runs and libraries folders: a refused command adds nothing."""
    return sorted(p for f in ("runs", "libraries") for p in (paths.home() / f).rglob("*"))


def refused(args, message, capsys, monkeypatch) -> str:
    before = written()
    code, _, err = run([*args, "--model", "fake", "--tasks", "2", "--group-size", "2"], capsys, monkeypatch)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err, err
    assert written() == before
    return err


def scenario(name: str, roles: list[str], files: dict[str, str] | None = None):
    """A scenario folder of the user's, in their scenarios/ (looked up by name)."""
    folder = paths.home() / "scenarios" / name
    (folder / "roles").mkdir(parents=True)
    (folder / "scenario.toml").write_text(SCENARIO.format(name=name, roles=json.dumps(roles)))
    (folder / "tasks.jsonl").write_text(TASKS)
    for role in roles:
        (folder / "roles" / f"{role}.toml").write_text(ROLE.format(name=role))
    for path, text in (files or {}).items():
        (folder / path).write_text(text)
    return folder


def test_the_readme_recipe_for_a_scenario_folder_trains_then_evaluates(capsys, monkeypatch):
    scenario("capitals", ["guesser", "checker"])
    code, out, err = run(
        ["train", "capitals", "--model", "fake", "--tasks", "4", "--group-size", "2"], capsys, monkeypatch
    )
    assert code == 0, err
    code, out, err = run(["eval", "capitals", "--model", "fake", "--k", "1", "--json"], capsys, monkeypatch)
    assert code == 0, err
    assert json.loads(out)[0]["library"] == "none"


@pytest.mark.parametrize("role", ["fact-checker", "global", "2nd"])
def test_a_role_no_agent_can_be_named_is_refused_at_load(role, capsys, monkeypatch):
    """'fact-checker' passed as a file name and failed in autogen's agent, with a traceback and exit
    code 1 after the run folder was made; 'global' trained a role into the library every role shares."""
    scenario("pack", ["guesser", role])
    err = refused(["train", "pack"], "scenario.toml: field 'roles'", capsys, monkeypatch)
    assert repr(role) in err and "cannot name a role" in err


def test_a_misspelt_key_is_named_not_only_the_field_it_left_missing(capsys, monkeypatch):
    """It said "field 'system_prompt': Field required", with no word of the key the user wrote."""
    scenario(
        "pack", ["guesser"], {"roles/guesser.toml": ROLE.format(name="guesser").replace("system_prompt", "prompt")}
    )
    err = refused(["train", "pack"], "roles/guesser.toml: field 'prompt': not a field", capsys, monkeypatch)
    assert "system_prompt" in err  # the known fields, among them the one meant


def test_a_copied_folder_whose_name_was_left_is_refused(capsys, monkeypatch):
    """A copy of a scenario with its ``name`` unchanged trained into the other scenario's library."""
    folder = scenario("mydomain", ["guesser"])
    (folder / "scenario.toml").write_text(SCENARIO.format(name="maths", roles='["guesser"]'))
    refused(["train", "mydomain"], "field 'name' is 'maths', expected 'mydomain'", capsys, monkeypatch)
    assert load_scenario(str(folder)).name == "maths"  # a folder given by its path keeps its own name


@pytest.fixture
def team_files(tmp_path):
    client = ReplayChatCompletionClient(["x"])
    agents = [AssistantAgent(n, model_client=client, system_message=f"You are the {n}.") for n in ("writer", "checker")]
    team = tmp_path / "team.json"
    team.write_text(RoundRobinGroupChat(agents, max_turns=2).dump_component().model_dump_json())
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": i + 1}) + "\n" for i in range(30)))
    (tmp_path / "rewards.py").write_text(
        "import numpy as np\n"
        "def boom(task, answer):\n    return 1 / 0\n"
        "def nothing(task, answer):\n    pass\n"
        "def same(task, answer):\n    return answer == task.answer\n"
        "def count(task, answer):\n    return np.int64(answer == task.answer)\n"
    )
    return team, tasks, tmp_path / "rewards.py"


@pytest.mark.parametrize(
    "function, message",
    [
        ("boom", "raised ZeroDivisionError: division by zero (task '1')"),
        ("nothing", "returned NoneType, expected a number (task '1')"),
    ],
)
def test_a_reward_that_cannot_score_is_refused_before_anything_is_written(
    function, message, team_files, capsys, monkeypatch
):
    """It stopped the run at its first scored rollout: the step's model calls paid, its run folder
    and library logs written."""
    team, tasks, rewards = team_files
    refused(["train", tasks, "--team", team, "--reward", f"{rewards}:{function}"], message, capsys, monkeypatch)


@pytest.mark.parametrize("function", ["same", "count"])
def test_a_reward_may_return_a_bool_or_a_numpy_number(function, team_files):
    """As a custom_scenario's reward may: ``answer == task.answer`` was refused as "returned bool"."""
    team, tasks, rewards = team_files
    scenario = load_team(team, tasks=tasks, reward=f"{rewards}:{function}")
    task = Task(id="1", question="q", answer="5")
    assert scenario.reward(task, "5") == 1.0 and scenario.reward(task, "6") == 0.0


def test_a_task_file_too_small_to_hold_a_task_out_is_told_before_training(tmp_path, capsys, monkeypatch):
    """The run ended with "next: mas eval FILE", which then had no held-out task to score."""
    ids = [str(i) for i in range(40) if not held_out(str(i))][:8]
    tasks = tmp_path / "sums.jsonl"
    tasks.write_text(
        "".join(json.dumps({"id": i, "question": f"What is {i} + 1?", "answer": int(i) + 1}) + "\n" for i in ids)
    )
    code, out, err = run(["train", tasks, "--model", "fake", "--tasks", "2", "--group-size", "2"], capsys, monkeypatch)
    assert code == 0, err
    assert f"{tasks}: no task is held out for mas eval" in out and "--test-file" in out
    big = tmp_path / "more.jsonl"
    big.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": i + 1}) + "\n" for i in range(40)))
    code, out, err = run(["train", big, "--model", "fake", "--tasks", "2", "--group-size", "2"], capsys, monkeypatch)
    assert code == 0 and "no task is held out" not in out, out


def test_a_misspelt_key_in_a_team_file_agent_is_said(team_files):
    """autogen drops an unknown key of an agent's config: a hand-edited ``system_messag`` trained
    a role with no prompt, and nothing said so."""
    team, tasks, _ = team_files
    assert "ignores" not in load_team(team, tasks=tasks, reward="numeric").origin  # as autogen saved it
    data = json.loads(team.read_text())
    agent = data["config"]["participants"][0]["config"]
    agent["system_messag"] = agent.pop("system_message")
    team.write_text(json.dumps(data))
    scenario = load_team(team, tasks=tasks, reward="numeric")
    assert "writer's config has 'system_messag', which autogen ignores (system_message?)" in scenario.origin
    assert scenario.role("writer").system_prompt == ""  # what the note warns of


def test_a_missing_field_lists_the_fields_of_the_file_not_the_id_mas_gave(tmp_path, capsys, monkeypatch):
    """A Hugging Face record without ``id`` was said to have an 'id' field: the line number mas
    gives it, which the user never wrote."""
    tasks = tmp_path / "hf.jsonl"
    tasks.write_text(json.dumps({"problem": "What is 1 + 1?", "solution": "$\\boxed{2}$"}) + "\n")
    err = refused(["train", tasks], "the record has 'problem', 'solution';", capsys, monkeypatch)
    assert "'id'" not in err
    assert load_jsonl(tasks, fields=Fields("problem", "solution"))[0].id == "1"  # still its line number


def test_a_scenario_whose_test_tasks_are_training_tasks_is_refused(capsys, monkeypatch):
    """A pack's test.jsonl copied from its tasks.jsonl trained on every test task; only mas eval
    refused, after the training it spoilt."""
    folder = scenario("pack", ["guesser"])
    (folder / "scenario.toml").write_text(
        SCENARIO.format(name="pack", roles='["guesser"]') + 'test_tasks = "test.jsonl"\n'
    )
    (folder / "test.jsonl").write_text(TASKS.splitlines()[3] + "\n")
    refused(["train", "pack"], "test.jsonl: task 'cap-3' is also in tasks.jsonl", capsys, monkeypatch)
    (folder / "test.jsonl").write_text(TASKS.replace("cap-", "test-"))
    assert len(load_scenario("pack").held_out) == 12


def test_toml_files_saved_with_a_bom_and_crlf_load(capsys, monkeypatch):
    """Task files took a BOM; scenario.toml and role files saved by a Windows editor were refused
    as "Invalid statement (at line 1, column 1)"."""
    folder = scenario("pack", ["guesser"])
    for path in (folder / "scenario.toml", folder / "roles" / "guesser.toml"):
        path.write_bytes(b"\xef\xbb\xbf" + path.read_text().replace("\n", "\r\n").encode())
    assert load_scenario("pack").role("guesser").description == "d"


def test_a_scenario_folder_without_its_scenario_toml_says_so(capsys, monkeypatch):
    """It said only "unknown scenario 'pack': expected one of maths, multihop", of a folder that is there."""
    folder = scenario("pack", ["guesser"])
    (folder / "scenario.toml").rename(folder / "Scenario.toml")
    refused(["train", "pack"], f"{folder} has no scenario.toml", capsys, monkeypatch)
    refused(["train", str(folder)], f"{folder} has no scenario.toml", capsys, monkeypatch)


@pytest.mark.parametrize(
    "gold, got, reward",
    [
        ("Lima", "Mali", 0.0),  # sympy read each word as a product of its letters: any anagram was right
        ("Rome", "More", 0.0),
        ("New York", "York New", 0.0),
        ("Lima", "lima.", 1.0),
        ("Zürich", "\\text{Zürich}", 1.0),
        ("\\text{east}", "seat", 0.0),
        ("\\text{east}", "East", 1.0),
        ("\\frac{1}{2}", "0.5", 1.0),  # mathematics is still compared as mathematics
        ("x + y", "y + x", 1.0),
    ],
)
def test_a_task_file_of_word_answers_is_not_rewarded_for_anagrams(gold, got, reward, tmp_path):
    """A bare task file whose answers are names gets the symbolic reward, guessed: it scored "Mali"
    right for "Lima", so training learned from wrong answers as winners."""
    tasks = tmp_path / "capitals.jsonl"
    tasks.write_text(json.dumps({"id": "t", "question": "Which city?", "answer": gold}) + "\n")
    scenario = load_scenario(str(tasks), test_file=tasks)
    assert scenario.reward_name == "symbolic"
    assert scenario.reward(scenario.tasks[0], got) == reward
