"""Inputs an audit found let through or badly reported: a price table with prices that are not
finite dollars, a role file that is not a regular file, and a training run that said what it
starts from before its model or its resume was refused. Each is refused with one line naming
the file, key or option, exit code 2, and nothing printed on stdout or written."""

from __future__ import annotations

import os

import pytest

from mas import paths
from mas.cost import price_for
from mas.errors import UserError
from mas.team.scenario import load_scenario
from tests.test_integrity import cli


def snapshot(*folders) -> dict:
    return {p: p.stat().st_mtime_ns for f in folders if f.exists() for p in f.rglob("*")}


def refused(args, message, tmp_path, capsys, monkeypatch) -> None:
    """One line on stderr holding ``message``, nothing on stdout, exit 2, nothing written."""
    before = snapshot(tmp_path, paths.home())
    code, out, err = cli(*args, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert snapshot(tmp_path, paths.home()) == before


BAD_PRICES = ["[nan, 1.0]", "[-1.0, -1.0]", "[inf, inf]", "[1e400, 1.0]", "[1.0]", "3", "[true, 2.0]", '["2", 1.0]']


@pytest.mark.parametrize("pair", BAD_PRICES)
def test_a_price_that_is_not_finite_dollars_is_refused_by_its_key(pair, tmp_path):
    table = tmp_path / "prices.toml"
    table.write_text(f'[prices]\n"openai:x" = [1.0, 2.0]\n"fake" = {pair}\n')
    with pytest.raises(UserError) as refusal:
        price_for("fake", table)
    message = str(refusal.value)
    assert message.startswith(f"{table}: price 'fake': expected [prompt, completion]")
    assert "\n" not in message and "\\n" not in message and "pydantic" not in message


def test_a_good_price_table_still_prices_the_model(tmp_path):
    table = tmp_path / "prices.toml"
    table.write_text('[prices]\n"fake" = [1.0, 2.0]\n')
    price = price_for("fake:0.1", table)
    assert (price.prompt, price.completion, price.known) == (1.0, 2.0, True)
    assert not price_for("openai:x", table).known


def test_train_with_an_infinite_price_is_refused(tmp_path, capsys, monkeypatch):
    table = tmp_path / "prices.toml"
    table.write_text('[prices]\n"fake" = [inf, inf]\n')
    args = ["train", "maths", "--model", "fake", "--tasks", "1", "--prices", table, "--run-dir", tmp_path / "run"]
    refused(args, f"{table}: price 'fake'", tmp_path, capsys, monkeypatch)


def test_a_role_file_that_is_a_folder_is_refused_not_skipped(home):
    (home / "roles" / "solver.toml").mkdir(parents=True)
    with pytest.raises(UserError, match="solver.toml: a folder, not a file"):
        load_scenario("maths")


def test_a_scenario_role_file_that_is_a_pipe_is_refused_without_reading_it(tmp_path):
    folder = tmp_path / "scenario"
    folder.mkdir()
    (folder / "scenario.toml").write_text(
        'name = "s"\nroles = ["planner", "solver", "verifier"]\ntasks = "tasks.jsonl"\nreward = "numeric"\n'
    )
    (folder / "tasks.jsonl").write_text('{"id": "1", "question": "What is 1 + 1?", "answer": "2"}\n')
    (folder / "roles").mkdir()
    os.mkfifo(folder / "roles" / "solver.toml")
    with pytest.raises(UserError, match="solver.toml: not a regular file"):
        load_scenario(str(folder))


def test_train_with_a_role_folder_is_refused(home, tmp_path, capsys, monkeypatch):
    (home / "roles" / "solver.toml").mkdir(parents=True)
    args = ["train", "maths", "--model", "fake", "--tasks", "1", "--run-dir", tmp_path / "run"]
    refused(args, "solver.toml: a folder, not a file", tmp_path, capsys, monkeypatch)


def test_an_unknown_model_is_refused_before_the_run_says_what_it_starts_from(tmp_path, capsys, monkeypatch):
    args = ["train", "maths", "--model", "bogus", "--library", tmp_path / "lib.json", "--run-dir", tmp_path / "run"]
    refused(args, "--model 'bogus'", tmp_path, capsys, monkeypatch)


def test_a_resume_with_other_settings_is_refused_before_the_run_says_it_resumes(tmp_path, capsys, monkeypatch):
    args = ["train", "maths", "--model", "fake", "--library", tmp_path / "lib.json", "--run-dir", tmp_path / "run"]
    code, out, err = cli(*args, "--tasks", "2", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    assert out.startswith("starting ")
    refused([*args, "--tasks", "3"], "this run was started with other settings (tasks)", tmp_path, capsys, monkeypatch)
    code, out, err = cli(
        *args, "--tasks", "2", capsys=capsys, monkeypatch=monkeypatch
    )  # the same settings still resume
    assert code == 0, err
    assert out.startswith(f"resuming {tmp_path / 'run'} (1 of 1 steps done) with ")
