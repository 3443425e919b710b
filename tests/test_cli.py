"""The CLI: bad input gets one line, exit 2, nothing written; library commands work."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mas import paths
from mas.library.store import LibraryStore


def mas(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-c", "from mas.cli.main import main; main()", *args], capture_output=True, text=True, cwd=cwd
    )


def snapshot(folder: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*")} if folder.exists() else {}


@pytest.fixture
def trained(tmp_path):
    lib = tmp_path / "maths.json"
    done = mas(
        "train", "maths", "--model", "fake", "--tasks", "8", "--library", str(lib), "--run-dir", str(tmp_path / "run")
    )
    assert done.returncode == 0, done.stderr
    return lib


def bad_jsonl(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "1", "question": "q", "answer": "1"}\n{"id": "2", "question": "q"}\n')
    return path


BAD = [
    (["train", "nope", "--model", "fake"], "unknown scenario 'nope'"),
    (["train", "maths", "--model", "gpt"], "--model 'gpt'"),
    (["train", "maths", "--epochs", "0"], "--epochs"),
    (["train", "maths", "--group-size", "x"], "--group-size"),
    (["train", "maths", "--bogus"], "--bogus"),
    (["train", "{tmp}/missing.jsonl", "--model", "fake"], "missing.jsonl: no such file"),
    (["train", "{bad}", "--model", "fake"], "bad.jsonl:2: missing field 'answer'"),
    (["eval", "maths", "--model", "fake", "--library", "{tmp}/none.json"], "none.json: no such library file"),
    (["library", "show", "{tmp}/none.json"], "no such library file"),
    (["library", "show", "{lib}", "--role", "astronaut"], "unknown library 'astronaut'"),
    (["library", "diff", "{lib}", "solver", "99"], "99"),
    (["library", "rollback", "{lib}", "solver", "42"], "42"),
    (["library", "export", "{lib}", "--format", "pdf"], "'pdf' is not one of 'markdown', 'prompt'"),
    (["train", "maths", "--model", "openai:x"], "no API key"),
    (["report", "{tmp}"], "not a training run"),
    (["train", "maths", "--model", "fake", "--prices", "{tmp}/none.toml"], "none.toml: no such price file"),
]


@pytest.mark.parametrize("args, message", BAD, ids=[" ".join(a[:3]) for a, _ in BAD])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, trained, args, message, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    args = [a.format(tmp=tmp_path, bad=bad_jsonl(tmp_path), lib=trained) for a in args]
    before, runs_before = snapshot(tmp_path), snapshot(paths.home() / "runs")
    done = mas(*args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in done.stderr
    assert snapshot(tmp_path) == before and snapshot(paths.home() / "runs") == runs_before


def test_library_show_diff_export_rollback(trained):
    show = mas("library", "show", str(trained))
    assert "solver/0001" in show.stdout and "epoch 0" in show.stdout
    assert mas("library", "diff", str(trained), "solver", "0").stdout.startswith("+ solver/0001")
    markdown = mas("library", "export", str(trained)).stdout
    assert "## solver" in markdown and "solver/0001" in markdown
    block = mas("library", "export", str(trained), "--format", "prompt", "--role", "solver").stdout
    lesson = LibraryStore(trained).head("solver").lessons[0]
    assert block.startswith("Lessons learned") and f"- {lesson.text}" in block
    rolled = mas("library", "rollback", str(trained), "solver", "0")
    assert rolled.returncode == 0
    assert "0 lessons" in mas("library", "show", str(trained), "--role", "solver").stdout


def test_eval_json_compares_with_and_without(trained):
    done = mas("eval", "maths", "--model", "fake", "--tasks", "10", "--k", "2", "--library", str(trained), "--json")
    results = json.loads(done.stdout)
    assert [r["library"] for r in results][0] == "none" and " v1 (" in results[1]["library"]
    assert all(len(r["tasks"]) == 10 and r["k"] == 2 for r in results)
