"""Journals and run.json read back are untrusted: a record that cannot be read back, or that is
another unit of work's, stops the command with one line naming the file, the line and the
field, exit code 2, and nothing written; a run.json that is a FIFO is refused, not waited on.

Each case damages a copy of a real run on the fake model (made once per module) and runs the
command again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mas.cli.main import main
from tests.test_integrity import cli as run_cli

TRAIN = ["train", "maths", "--model", "fake", "--tasks", "4", "--epochs", "2", "--group-size", "3"]
EVAL = ["eval", "maths", "--model", "fake", "--tasks", "2", "--k", "2"]


# -- helpers ------------------------------------------------------------------------------------


def cli(*args, capsys, monkeypatch) -> tuple[int, str]:
    """``mas ARGS`` in this process: exit code and stderr."""
    code, _, err = run_cli(*args, capsys=capsys, monkeypatch=monkeypatch)
    return code, err


def snapshot(folder: Path) -> dict:
    return {p: (p.stat().st_mtime_ns, p.stat().st_size) if p.is_file() else None for p in folder.rglob("*")}


def refused(args, message, folder, capsys, monkeypatch) -> str:
    """One line on stderr holding ``message``, exit code 2, no traceback, nothing written."""
    before = snapshot(folder)
    code, err = cli(*args, capsys=capsys, monkeypatch=monkeypatch)
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and message in lines[0], err
    assert snapshot(folder) == before
    return lines[0]


def made(args, root: Path, cache: Path) -> Path:
    """A real run of ``mas ARGS`` in ``root`` (its library there too)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MAS_HOME", str(root))
        patch.setenv("XDG_CACHE_HOME", str(cache))
        patch.setattr(
            sys, "argv", ["mas", *map(str, [*args, "--library", root / "lib.json", "--run-dir", root / "run"])]
        )
        try:
            main()
        except SystemExit as done:
            assert not done.code
    return root


def copy(base: Path, to: Path) -> Path:
    """``base`` (a run and its library) copied into ``to``; its run.json names the copied library."""
    shutil.copytree(base, to, dirs_exist_ok=True)
    settings = to / "run" / "run.json"
    settings.write_text(settings.read_text().replace(str(base.resolve()), str(to.resolve())))
    return to / "run"


def rewrite(run: Path, change) -> list[dict]:
    """The journal of ``run``, its records changed by ``change`` (a list in, a list out)."""
    journal = run / "journal.jsonl"
    records = change([json.loads(line) for line in journal.read_text().splitlines()])
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def unfinished(records: list[dict]) -> list[dict]:
    """The records without the last step report: resuming redoes that step."""
    last = max(i for i, r in enumerate(records) if r["kind"] == "step")
    return records[:last] + records[last + 1 :]


def line_of(records: list[dict], kind: str, key_start: str = "") -> int:
    return next(i for i, r in enumerate(records, 1) if r["kind"] == kind and r["key"].startswith(key_start))


@pytest.fixture(scope="module")
def trained(tmp_path_factory, cache) -> Path:
    return made(TRAIN, tmp_path_factory.mktemp("trained"), cache)


@pytest.fixture(scope="module")
def evaluated(trained, tmp_path_factory, cache) -> Path:
    """An evaluation of the trained library (and of none)."""
    root = tmp_path_factory.mktemp("evaluated")
    shutil.copytree(trained, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("run"))
    return made(EVAL, root, cache)


def train_args(tmp_path: Path) -> list:
    return [*TRAIN, "--library", tmp_path / "lib.json", "--run-dir", tmp_path / "run"]


def eval_args(tmp_path: Path) -> list:
    return [*EVAL, "--library", tmp_path / "lib.json", "--run-dir", tmp_path / "run"]


# -- 1. the learning records of an unfinished step ------------------------------------------------


@pytest.mark.parametrize(
    "kind, data, field",
    [
        ("summary", {"ok": "maybe"}, "(ok: "),
        ("summary", {"ok": True, "reply": {"roles": "x"}}, "(reply.roles: "),
        ("summary", {"ok": True}, "(reply: "),
        ("summary", {"ok": False, "calls": {"summary": {"calls": "x"}}}, "(calls.summary.calls: "),
        ("advantage", {"ok": True, "reply": 7}, "(reply: "),
        ("edit", None, "(Input should be"),
    ],
)
def test_a_bad_learning_record_is_named_by_its_line_and_field(
    kind, data, field, trained, tmp_path, capsys, monkeypatch
):
    run = copy(trained, tmp_path)

    def damage(records):
        records = unfinished(records)
        records[line_of(records, kind, "e1/") - 1]["data"] = data
        return records

    records = rewrite(run, damage)
    number = line_of(records, kind, "e1/")
    message = f"journal.jsonl:{number}: not {'an' if kind in ('edit', 'advantage') else 'a'} {kind} record"
    line = refused(train_args(tmp_path), message, tmp_path, capsys, monkeypatch)
    assert field in line


# -- 2. step reports: on resume and in the report ------------------------------------------------


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda data: {}, "(epoch: "),
        (lambda data: 5, "(Input should be a valid dictionary"),
        (lambda data: {**data, "informative": "many"}, "(informative: "),
        (lambda data: {**data, "groups": 1e30}, "(groups: "),
    ],
)
def test_a_bad_step_report_is_named_by_its_line_and_field(change, field, trained, tmp_path, capsys, monkeypatch):
    run = copy(trained, tmp_path)

    def damage(records):
        step = records[line_of(records, "step", "e0/s0") - 1]
        step["data"] = change(step["data"])
        return records

    number = line_of(rewrite(run, damage), "step", "e0/s0")
    line = refused(train_args(tmp_path), f"journal.jsonl:{number}: not a step record", tmp_path, capsys, monkeypatch)
    assert field in line
    report = ["report", run, "--output", tmp_path / "report"]
    line = refused(report, f"journal.jsonl:{number}: not a step record", tmp_path, capsys, monkeypatch)
    assert field in line


# -- 3. an evaluation's records ------------------------------------------------------------------


def _without_results(records):
    """An evaluation cut short before its results: its rollouts are read back."""
    return [r for r in records if r["kind"] != "evaluation"]


@pytest.mark.parametrize(
    "kind, change, field, cut",
    [
        ("evaluation", lambda data: {}, "(library: ", False),
        ("evaluation", lambda data: {**data, "k": "two"}, "(k: ", False),
        ("rollout", lambda data: {**data, "traces": "x"}, "(traces: ", True),
        ("rollout", lambda data: {}, "(task_id: ", True),
    ],
)
def test_a_bad_evaluation_record_is_named_by_its_line_and_field(
    kind, change, field, cut, evaluated, tmp_path, capsys, monkeypatch
):
    run = copy(evaluated, tmp_path)

    def damage(records):
        records = _without_results(records) if cut else records
        at = line_of(records, kind) - 1
        records[at]["data"] = change(records[at]["data"])
        return records

    number = line_of(rewrite(run, damage), kind)
    message = f"journal.jsonl:{number}: not {'an' if kind == 'evaluation' else 'a'} {kind} record"
    line = refused(eval_args(tmp_path), message, tmp_path, capsys, monkeypatch)
    assert field in line


# -- 4. a record whose key its data contradict ---------------------------------------------------


def test_a_step_report_of_another_step_is_refused(trained, tmp_path, capsys, monkeypatch):
    """A step report of another run, appended under the key of the step it would finish."""
    run = copy(trained, tmp_path)

    def damage(records):
        records = unfinished(records)
        other = next(r for r in records if r["kind"] == "step")
        return [*records, {**other, "key": "e1/s0"}]

    number = len(rewrite(run, damage))
    message = f"journal.jsonl:{number}: not the step record of 'e1/s0' (its epoch is 0)"
    refused(train_args(tmp_path), message, tmp_path, capsys, monkeypatch)
    refused(["report", run, "--output", tmp_path / "report"], message, tmp_path, capsys, monkeypatch)


def test_a_rollout_of_another_task_is_refused(trained, tmp_path, capsys, monkeypatch):
    run = copy(trained, tmp_path)

    def damage(records):
        records = unfinished(records)
        records[line_of(records, "rollout", "e1/") - 1]["data"]["task_id"] = "maths-0099"
        return records

    number = line_of(rewrite(run, damage), "rollout", "e1/")
    line = refused(
        train_args(tmp_path), f"journal.jsonl:{number}: not the rollout record", tmp_path, capsys, monkeypatch
    )
    assert "(its task_id is 'maths-0099')" in line


def test_an_evaluation_rollout_of_another_index_is_refused(evaluated, tmp_path, capsys, monkeypatch):
    run = copy(evaluated, tmp_path)

    def damage(records):
        records = _without_results(records)
        rollout = records[line_of(records, "rollout") - 1]["data"]
        rollout["index"] += 1
        return records

    number = line_of(rewrite(run, damage), "rollout")
    line = refused(
        eval_args(tmp_path), f"journal.jsonl:{number}: not the rollout record", tmp_path, capsys, monkeypatch
    )
    assert "(its index is " in line


# -- 5. a run.json that is a FIFO ----------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("command", [TRAIN, EVAL])
def test_a_fifo_run_json_is_refused_not_waited_on(command, trained, tmp_path):
    """In a process of its own: before the fix, reading the FIFO waited for ever."""
    run = copy(trained, tmp_path)
    (run / "run.json").unlink()
    os.mkfifo(run / "run.json")
    before = snapshot(tmp_path)
    args = [*command, "--library", tmp_path / "lib.json", "--run-dir", run]
    done = subprocess.run(
        [sys.executable, "-c", "from mas.cli.main import main; main()", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"error: {run / 'run.json'}: not a regular file (a pipe or a device)"]
    assert snapshot(tmp_path) == before
