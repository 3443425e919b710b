"""The source flags: SCENARIO and the options that say where it comes from, declared once
(``mas.cli.flags``), taken with the same help and defaults by every command that loads a
scenario, and acting in each."""

import json
import os
import re

import pytest

from mas.cli import flags
from mas.tools import isolation
from tests.test_cli_help import ALL
from tests.test_run_flags import CLI, help_records
from tests.test_team_file import cli

SOURCE_FLAGS = ["--unsafe-python-tool", "--team", "--tasks-file", "--reward", "--question-field", "--answer-field"]
"""Where the scenario comes from besides SCENARIO: an autogen team file, its tasks and reward,
the fields of task files, and whether its python tool may run without isolation."""
SCENARIO_COMMANDS = {("train",), ("eval",), ("ablate",), ("transfer",)}


@pytest.mark.parametrize("path, command", ALL, ids=[" ".join(p) for p, _ in ALL])
def test_a_command_that_loads_a_scenario_takes_every_source_flag(path, command):
    """Walks every command: one that loads a scenario takes SCENARIO and every source flag, in
    this order; any other takes none (a flag it would silently ignore)."""
    listed = [opt for param in command.params for opt in param.opts if opt in SOURCE_FLAGS]
    assert listed == (SOURCE_FLAGS if path in SCENARIO_COMMANDS else []), path
    if path in SCENARIO_COMMANDS:
        assert [p.name for p in command.params if p.param_type_name == "argument"] == ["scenario"], path


def test_every_source_flag_has_one_help_and_one_default():
    """Each is declared once: the same help record in every command, and the list above is what
    ``mas.cli.flags`` declares (a flag added there is checked here)."""
    records = help_records(SOURCE_FLAGS)
    assert sorted(records) == sorted(SOURCE_FLAGS)
    assert all(len(seen) == 1 for seen in records.values()), {k: v for k, v in records.items() if len(v) > 1}
    assert "[default: question]" in next(iter(records["--question-field"]))[1]
    _, train = next((p, c) for p, c in ALL if p == ("train",))
    declared = [param.opts[0] for param in train.params if param.name in flags.SOURCE_FLAGS]
    assert declared == ["scenario", *SOURCE_FLAGS]


def test_no_command_loads_a_scenario_but_through_the_source_flags():
    """Only ``mas.cli.flags`` (through ``mas.cli.sources``) turns the command line into a
    scenario: a command that loads one must take ``SourceFlags``, so it has every flag."""
    for module in CLI.glob("*.py"):
        if module.name in ("flags.py", "sources.py"):
            continue
        assert not re.search(r"\bscenario_from\b|\bload_team\b|\bFields\(", module.read_text()), module.name


@pytest.mark.parametrize("command", sorted(" ".join(p) for p in SCENARIO_COMMANDS))
def test_the_source_flags_act_in_every_command(command, tmp_path, capsys, monkeypatch):
    """Each flag reaches the scenario in every command: a bad use is one line, exit 2, before
    anything is written; ``--unsafe-python-tool`` opts this process out of the isolation."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"problem": "1+1?", "solution": "2"}) + "\n")
    run = ["--model", "fake", "--run-dir", tmp_path / "run"]
    refused = {
        "--reward goes with --team": ["maths", "--reward", "numeric"],
        "--tasks-file goes with --team": ["maths", "--tasks-file", tasks],
        "missing field 'question'": [tasks],
        "missing field 'answer'": [tasks, "--question-field", "problem"],
        "missing field 'q'": [tasks, "--question-field", "q", "--answer-field", "solution"],
        "no-team.json": [tasks, "--team", tmp_path / "no-team.json"],
    }
    for message, args in refused.items():
        code, _, err = cli([command, *args, *run], capsys, monkeypatch)
        assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, (args, err)
    assert not (tmp_path / "run").exists()
    monkeypatch.setenv(isolation.UNSAFE_ENV, "0")
    code, _, err = cli([command, "maths", "--reward", "numeric", "--unsafe-python-tool", *run], capsys, monkeypatch)
    assert code == 2 and os.environ[isolation.UNSAFE_ENV] == "1", err
