"""Malformed input of every kind: one line on stderr naming the file, line or field, exit
code 2, no traceback, and no file written or changed anywhere."""

from __future__ import annotations

import json
import sys

import pytest

from mas import paths
from mas.cli.main import main

GOOD = {"id": "1", "question": "What is 1 + 1?", "answer": "2"}
ROLE = 'name = "{name}"\ndescription = "d"\nsystem_prompt = "You are the {name} of a small team."\n'
SCENARIO = 'name = "s"\nroles = ["planner", "solver", "verifier"]\ntasks = "tasks.jsonl"\nreward = "numeric"\n'


def jsonl(*records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


DATASETS = {  # file text -> what the message must say
    "": "no tasks",
    "not json\n": ":1: not valid JSON",
    jsonl(GOOD, "[1, 2]"): ":2: expected a JSON object",
    jsonl({**GOOD, "id": None}): ":1: field 'id'",
    jsonl({**GOOD, "id": "2"}, {"question": "q", "answer": "1"}): ":2: duplicate id '2'",  # its line number
    jsonl({**GOOD, "id": " "}): "field 'id' is empty",
    jsonl({"id": "1", "answer": "1"}): "missing field 'question'",
    jsonl({**GOOD, "question": 7}): "field 'question' must be a string",
    jsonl({"id": "1", "question": "q"}): "missing field 'answer'",
    jsonl({**GOOD, "answer": None}): "field 'answer'",
    jsonl({**GOOD, "answer": [1]}): "field 'answer'",
    jsonl(GOOD, GOOD): ":2: duplicate id '1'",
    jsonl({**GOOD, "passages": "doc"}): "field 'passages' must be a list",
    jsonl({**GOOD, "passages": [{"text": "t"}]}): "field 'passages[0]'",
    jsonl({**GOOD, "answer_aliases": "x"}): "field 'answer_aliases'",
    jsonl(GOOD) + '{"id": "2", "question": "q", "answer": "1"': ":2: not valid JSON",
}

SCENARIO_FOLDERS = {  # {relative path: text} -> message
    "no scenario.toml": ({"tasks.jsonl": jsonl(GOOD)}, "unknown scenario"),
    "bad toml": ({"scenario.toml": "name = ", "tasks.jsonl": jsonl(GOOD)}, "scenario.toml: not valid TOML"),
    "no roles": (
        {
            "scenario.toml": SCENARIO.replace('roles = ["planner", "solver", "verifier"]\n', ""),
            "tasks.jsonl": jsonl(GOOD),
        },
        "field 'roles'",
    ),
    "roles not a list": (
        {
            "scenario.toml": SCENARIO.replace('["planner", "solver", "verifier"]', '"solver"'),
            "tasks.jsonl": jsonl(GOOD),
        },
        "field 'roles'",
    ),
    "unknown role": (
        {"scenario.toml": SCENARIO.replace('"verifier"', '"astronaut"'), "tasks.jsonl": jsonl(GOOD)},
        "unknown role 'astronaut'",
    ),
    "unknown reward": (
        {"scenario.toml": SCENARIO.replace('"numeric"', '"vibes"'), "tasks.jsonl": jsonl(GOOD)},
        "unknown reward 'vibes'",
    ),
    "no task file": ({"scenario.toml": SCENARIO}, "tasks.jsonl: no such file"),
    "no test file": (
        {"scenario.toml": SCENARIO + 'test_tasks = "test.jsonl"\n', "tasks.jsonl": jsonl(GOOD)},
        "test.jsonl: no such file",
    ),
    "unknown field": ({"scenario.toml": SCENARIO + "colour = 1\n", "tasks.jsonl": jsonl(GOOD)}, "field 'colour'"),
    "role bad toml": (
        {"scenario.toml": SCENARIO, "tasks.jsonl": jsonl(GOOD), "roles/solver.toml": "name = = 1"},
        "solver.toml: not valid TOML",
    ),
    "role no prompt": (
        {
            "scenario.toml": SCENARIO,
            "tasks.jsonl": jsonl(GOOD),
            "roles/solver.toml": 'name = "solver"\ndescription = "d"\n',
        },
        "field 'system_prompt'",
    ),
    "role unknown tool": (
        {
            "scenario.toml": SCENARIO,
            "tasks.jsonl": jsonl(GOOD),
            "roles/solver.toml": ROLE.format(name="solver") + 'tools = ["shell"]\n',
        },
        "unknown tool 'shell'",
    ),
    "role wrong name": (
        {"scenario.toml": SCENARIO, "tasks.jsonl": jsonl(GOOD), "roles/solver.toml": ROLE.format(name="planner")},
        "field 'name'",
    ),
    "role tool_rounds 0": (
        {
            "scenario.toml": SCENARIO,
            "tasks.jsonl": jsonl(GOOD),
            "roles/solver.toml": ROLE.format(name="solver") + "tool_rounds = 0\n",
        },
        "field 'tool_rounds'",
    ),
    "role tools not list": (
        {
            "scenario.toml": SCENARIO,
            "tasks.jsonl": jsonl(GOOD),
            "roles/solver.toml": ROLE.format(name="solver") + 'tools = "calculator"\n',
        },
        "field 'tools'",
    ),
}

LIBRARIES = {  # library file text -> message
    "{not json": "not a valid library file",
    "": "not a valid library file",
    '{"versions": {"1": {"library": "solver"}}}': "not a valid library file",
    '{"versions": {"1": {"schema_version": 99, "library": "solver", "number": 1, "lessons": [], "next_id": 1}}}': "newer",
    "[1, 2, 3]": "not a valid library file",
}

CLI = [  # arguments -> message ("{lib}": a good library file, "{tmp}": a scratch folder)
    (["train", "maths", "--epochs", "0"], "--epochs"),
    (["train", "maths", "--group-size", "x"], "--group-size"),
    (["train", "maths", "--batch-size", "-1"], "--batch-size"),
    (["train", "maths", "--temperature", "5"], "--temperature"),
    (["train", "maths", "--tasks", "0"], "--tasks"),
    (["train", "maths", "--bogus"], "--bogus"),
    (["train"], "Missing argument"),
    (["train", "maths", "--model", "gpt"], "--model 'gpt'"),
    (["train", "maths", "--model", "fake:slow"], "--model 'fake:slow'"),
    (["train", "maths", "--model", "openai:x"], "no API key"),
    (["train", "maths", "--model", "fake", "--inject", "some"], "'--inject'"),
    (["train", "maths", "--model", "fake", "--promote-every", "week"], "'--promote-every'"),
    (["train", "maths", "--model", "fake", "--prices", "{tmp}/none.toml"], "none.toml: no such price file"),
    (["train", "maths", "--model", "fake", "--prices", "{tmp}/bad.toml"], "bad.toml: expected [prices]"),
    (["eval", "maths", "--k", "0"], "--k"),
    (["eval", "maths", "--model", "fake", "--library", "{tmp}/none.json"], "none.json: no such library file"),
    (["eval", "maths", "--model", "fake", "--compare", "{tmp}/none.json"], "none.json: no such library file"),
    (["ablate", "maths", "--model", "fake", "--variants", "magic"], "--variants: unknown 'magic'"),
    (["report", "{tmp}"], "not a training run"),
    (["transfer", "maths", "--model", "fake", "--library", "{tmp}/none.json"], "no such library file"),
    (["graph", "export", "{lib}", "--format", "pdf"], "'--format'"),
    (["promote", "{tmp}/none.json"], "no such library file"),
    (["library", "show", "{tmp}/none.json"], "no such library file"),
    (["library", "show", "{lib}", "--role", "astronaut"], "unknown library 'astronaut'"),
    (["library", "show", "{lib}", "--version", "1"], "--version needs --role"),
    (["library", "diff", "{lib}", "solver", "99"], "99"),
    (["library", "rollback", "{lib}", "solver", "42"], "42"),
    (["library", "export", "{lib}", "--format", "pdf"], "'pdf' is not one of 'markdown', 'prompt'"),
    (["library", "export", "{lib}", "--format", "prompt"], "--format prompt needs --role"),
    (["library", "recover", "{lib}"], "not corrupt"),
    (["fly"], "No such command"),
    (["train", "nope", "--model", "fake"], "unknown scenario 'nope'"),
    (["train", "Maths", "--model", "fake"], "unknown scenario 'Maths'"),
    (["eval", "../etc", "--model", "fake"], "unknown scenario '../etc'"),
]


def run(args, capsys, monkeypatch) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["mas", *args])
    with pytest.raises(SystemExit) as done:
        main()
    return done.value.code, capsys.readouterr().err


def snapshot(*folders) -> dict:
    return {p: p.stat().st_mtime_ns for f in folders if f.exists() for p in f.rglob("*")}


@pytest.fixture
def good_library(tmp_path):
    path = tmp_path / "good.json"
    path.write_text(json.dumps({"versions": {"1": {"schema_version": 1, "library": "solver", "number": 1,
        "lessons": [{"id": "solver/0001", "text": "Check the units."}], "next_id": 2}}}))  # fmt: skip
    (tmp_path / "bad.toml").write_text("prices = 3")
    return path


def check(args, message, tmp_path, capsys, monkeypatch):
    before = snapshot(tmp_path, paths.home() / "runs", paths.home() / "libraries")
    code, err = run(args, capsys, monkeypatch)
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and message in lines[0], err
    assert "Traceback" not in err
    assert snapshot(tmp_path, paths.home() / "runs", paths.home() / "libraries") == before


@pytest.mark.parametrize("text, message", DATASETS.items(), ids=[f"dataset{i}" for i in range(len(DATASETS))])
@pytest.mark.parametrize("command", ["train", "eval"])
def test_bad_dataset(text, message, command, tmp_path, capsys, monkeypatch):
    path = tmp_path / "tasks.jsonl"
    path.write_text(text)
    check([command, str(path), "--model", "fake"], message, tmp_path, capsys, monkeypatch)


def test_bad_utf8_and_missing_dataset(tmp_path, capsys, monkeypatch):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b'{"id": "1", "question": "\xff", "answer": "1"}\n')
    check(["train", str(path), "--model", "fake"], ":1: not valid UTF-8", tmp_path, capsys, monkeypatch)
    check(
        ["train", str(tmp_path / "none.jsonl"), "--model", "fake"],
        "none.jsonl: no such file",
        tmp_path,
        capsys,
        monkeypatch,
    )


@pytest.mark.parametrize("name", SCENARIO_FOLDERS)
def test_bad_scenario_or_role(name, tmp_path, capsys, monkeypatch):
    files, message = SCENARIO_FOLDERS[name]
    folder = tmp_path / "scenario"
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    check(["train", str(folder), "--model", "fake"], message, tmp_path, capsys, monkeypatch)


@pytest.mark.parametrize("text, message", LIBRARIES.items(), ids=[f"library{i}" for i in range(len(LIBRARIES))])
@pytest.mark.parametrize(
    "command", [["train", "maths", "--model", "fake"], ["eval", "maths", "--model", "fake"], ["library", "show"]]
)
def test_bad_library_file(text, message, command, tmp_path, capsys, monkeypatch):
    path = tmp_path / "lib.json"
    path.write_text(text)
    args = [*command, str(path)] if command[0] == "library" else [*command, "--library", str(path)]
    check(args, message, tmp_path, capsys, monkeypatch)


@pytest.mark.parametrize("args, message", CLI, ids=[" ".join(a[:3]) for a, _ in CLI])
def test_bad_command_line(args, message, good_library, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    args = [a.format(lib=good_library, tmp=tmp_path) for a in args]
    check(args, message, tmp_path, capsys, monkeypatch)
