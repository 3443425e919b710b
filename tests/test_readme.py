"""The README's commands run as written, on the fake model.

Every ``mas ...`` command in a fenced ``bash`` block of README.md (``.venv/bin/mas ...`` in an
``&&`` chain too) runs in order, in one fresh folder that is both the current directory and
``MAS_HOME``, and must exit 0. A command is changed only where it cannot run in a test, and
only in its values, never in its subcommands or flags:

- the model: ``--model X`` becomes ``--model fake``, and a command that calls a model (train,
  eval, ablate, transfer) without ``--model`` gets ``--model fake``: tests have neither the
  embedded server nor an API key;
- sizes: ``--tasks N`` and ``--test-tasks N`` are capped at 4, and a train, eval or transfer
  without ``--tasks`` gets ``--tasks 4``;
- placeholders: ``runs/maths-2026...`` is the first run directory of the maths scenario made so
  far, and its second mention the last one; ``../shared/data/<name>.jsonl`` is a small file of
  the same shape written next to the folder (numeric answers, passages, LaTeX answers);
  ``other.json`` is a copy of ``libraries/maths.json`` and ``my-prices.toml`` a price table,
  both made just before the command that names them;
- ``mas library recover maths`` meets a damaged library file (the test damages it first:
  recovering a sound file is refused, with exit code 2);
- the autogen-team section: ``team.json`` is a RoundRobinGroupChat of three AssistantAgents as
  ``dump_component()`` writes it, ``tasks.jsonl`` and ``hf.jsonl`` small task files (the second
  with ``problem`` / ``solution``), ``my_rewards.py`` a reward module, and the model configs
  (``model.json``, ``small.json``, ``big.yaml``) OpenAI clients aimed at the loopback
  OpenAI-compatible server of ``tests/fault_server.py`` (no faults): a command with a model
  config keeps it, and is not given ``--model fake``.

Before anything runs, every command of the code blocks and every inline ``mas ...`` span of
the prose is checked against the command tree: a subcommand or flag the README names that
does not exist fails the test, with its line.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import typer
import yaml

from mas.cli.main import app, main

README = Path(__file__).resolve().parents[1] / "README.md"
ROOT = typer.main.get_command(app)
MODEL_COMMANDS = {"train", "eval", "ablate", "transfer"}
SIZED = {"train", "eval", "transfer"}
MOST = 4


def blocks(text: str) -> list[tuple[int, str]]:
    """The lines of the fenced bash blocks, with their line numbers."""
    out, inside = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            inside = line.strip() == "```bash" if not inside else False
            continue
        if inside:
            out.append((number, line))
    return out


def commands(text: str) -> list[tuple[int, list[str]]]:
    """Every mas command of the bash blocks, as words after ``mas``, with its line number."""
    out = []
    for number, line in blocks(text):
        words = shlex.split(line, comments=True)
        chain: list[list[str]] = [[]]
        for word in words:
            chain.append([]) if word == "&&" else chain[-1].append(word)
        out += [(number, part[1:]) for part in chain if part and part[0] in ("mas", ".venv/bin/mas")]
    return out


def inline(text: str) -> list[tuple[int, list[str]]]:
    """The inline ``mas ...`` spans of the prose (outside code blocks), with their line numbers."""
    fenced = {number for number, _ in blocks(text)}
    spans = []
    for number, line in enumerate(text.splitlines(), 1):
        if number not in fenced:
            spans += [(number, span.split()[1:]) for span in re.findall(r"`((?:\.venv/bin/)?mas(?: [^`]*)?)`", line)]
    return spans


def check(number: int, words: list[str]) -> None:
    """The subcommands and flags of ``mas <words>`` exist."""
    command, path = ROOT, ["mas"]
    rest = list(words)
    while hasattr(command, "commands") and rest and not rest[0].startswith("-"):
        assert rest[0] in command.commands, f"README.md:{number}: `{' '.join(path)}` has no command {rest[0]!r}"
        command = command.commands[rest[0]]
        path.append(rest.pop(0))
    flags = {flag for p in command.params for flag in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))}
    flags.add("--help")  # every command has it; click adds it outside ``params``
    for word in rest:
        if word.startswith("--"):
            flag = word.split("=")[0]
            assert flag in flags, f"README.md:{number}: `{' '.join(path)}` has no option {flag}"


def test_the_readme_names_only_commands_and_flags_that_exist():
    text = README.read_text()
    found = commands(text) + inline(text)
    assert len(commands(text)) > 25 and len(inline(text)) > 10  # the extraction works
    for number, words in found:
        check(number, words)


def test_a_misnamed_flag_or_command_is_caught():
    with pytest.raises(AssertionError, match="no option --no-no-ground-truth"):
        check(1, ["train", "maths", "--no-no-ground-truth"])
    with pytest.raises(AssertionError, match="no command 'publish'"):
        check(1, ["library", "publish", "maths"])


def adapted(words: list[str], folder: Path) -> list[str]:
    """The command as it can run here (see the module docstring)."""
    words, name = list(words), words[0]
    if name in MODEL_COMMANDS and "--from-trials" not in words and "--model-config" not in words:
        if "--model" in words:
            words[words.index("--model") + 1] = "fake"
        else:
            words += ["--model", "fake"]
    for flag in ("--tasks", "--test-tasks"):
        if flag in words:
            at = words.index(flag) + 1
            words[at] = str(min(int(words[at]), MOST))
    if name in SIZED and "--tasks" not in words:
        words += ["--tasks", str(MOST)]
    made = sorted(p for p in (folder / "runs").glob("maths-*") if p.is_dir())
    placeholders = iter([made[0], made[-1]] if made else [])
    return [str(next(placeholders)) if re.fullmatch(r"runs/maths-\d*\.\.\.", w) else w for w in words]


def prepare(words: list[str], folder: Path, server_url: str) -> None:
    """The files a command names that a user would have."""
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    if "team.json" in words and not (folder / "team.json").exists():
        saved = OpenAIChatCompletionClient(model="gpt-4o", api_key="sk-saved")
        agents = [
            AssistantAgent(name, model_client=saved, system_message=f"You are the {name} of a small maths team.")
            for name in ("planner", "solver", "verifier")
        ]
        team = RoundRobinGroupChat(agents, max_turns=3)
        (folder / "team.json").write_text(team.dump_component().model_dump_json())
    numbers = [(f"What is {i} + {i + 2}?", str(2 * i + 2)) for i in range(12)]
    (folder / "tasks.jsonl").write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in numbers))
    (folder / "hf.jsonl").write_text(
        "".join(json.dumps({"problem": q, "solution": f"So $\\boxed{{{a}}}$."}) + "\n" for q, a in numbers)
    )
    (folder / "my_rewards.py").write_text("def score(task, answer):\n    return float(task.answer in answer)\n")
    config = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=server_url, api_key="sk-loopback")
    dumped = config.dump_component().model_dump(mode="json")
    for name in ("model.json", "small.json"):
        (folder / name).write_text(json.dumps(dumped))
    (folder / "big.yaml").write_text(yaml.safe_dump(dumped))
    if "other.json" in words:
        shutil.copy(folder / "libraries" / "maths.json", folder / "other.json")
    if "my-prices.toml" in words:
        (folder / "my-prices.toml").write_text('[prices]\n"fake" = [1.0, 2.0]\n')
    if words[:2] == ["library", "recover"]:
        (folder / "libraries" / "maths.json").write_text('{"versions": {"1": ')


def shared_data(root: Path) -> None:
    """Small files shaped like ../shared/data's: numeric answers, passages, LaTeX answers."""
    data = root / "shared" / "data"
    data.mkdir(parents=True)
    rows = {
        "gsm8k_test.jsonl": [
            {
                "id": f"g{i}",
                "question": f"Ann has {i + 3} apples and buys {2 * i} more. How many now?",
                "answer": 3 * i + 3,
            }
            for i in range(12)
        ],
        "hotpotqa_dev_distractor_200.jsonl": [
            {
                "id": f"h{i}",
                "question": f"Which city is the home of band {i}?",
                "answer": f"City{i}",
                "passages": [
                    {"title": f"Band {i}", "text": f"Band {i} comes from City{i}."},
                    {"title": f"City{i}", "text": f"City{i} is a port."},
                ],
            }
            for i in range(12)
        ],  # fmt: skip
        "math500.jsonl": [
            {"id": f"m{i}", "question": f"Simplify $\\frac{{{i + 1}}}{{{2 * i + 2}}}$.", "answer": "\\frac{1}{2}"}
            for i in range(12)
        ],
    }
    for name, items in rows.items():
        (data / name).write_text("".join(json.dumps(item) + "\n" for item in items))


def test_every_readme_command_runs_on_the_fake_model(tmp_path, monkeypatch, capsys, fault_server):
    """In one process, as ``mas`` itself runs them (``main()``), to spare the start-up of thirty."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")  # a dumped config writes "**********" for its key
    folder = tmp_path / "project"
    folder.mkdir()
    shared_data(tmp_path)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("MAS_HOME", str(folder))
    for number, words in commands(README.read_text()):
        prepare(words, folder, fault_server.url)
        run = adapted(words, folder)
        monkeypatch.setattr(sys, "argv", ["mas", *run])
        try:
            main()
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
        err = capsys.readouterr().err
        assert code == 0, f"README.md:{number}: mas {' '.join(run)}\n{err[-2000:]}"
    assert (folder / "report" / "report.md").is_file() and (folder / "libraries" / "maths.graph.graphml").is_file()
